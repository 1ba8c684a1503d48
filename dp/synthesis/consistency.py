"""Hierarchical counts made consistent, non-negative and integral, as the Census TopDown does, without a solver.

Noisy counts of a :class:`dp.synthesis.hierarchy.HierarchyTree` are given per level, as one float array per
level in node order. Post-processing runs in three stages, each one pass per level, vectorised with
``np.bincount`` and sorting (no Python loop over nodes):

1. :func:`least_squares`: the minimum-variance linear unbiased estimate (BLUE) consistent with the tree,
   by the two-pass algorithm of Hay, Rastogi, Miklau and Suciu, "Boosting the accuracy of differentially
   private histograms through consistency", PVLDB 3(1), 2010, generalised to any fan-out and to per-node
   variances (the same recursion as a Kalman smoother on the tree; see Cormode et al., "Differentially
   private spatial decompositions", ICDE 2012, for per-level budgets).
2. :func:`nonnegative`: top-down, the children of each parent are made non-negative and summing to the
   parent (by default the Euclidean projection of each family onto that simplex).
3. :func:`round_consistent`: top-down controlled rounding, each parent's integer split over its children
   by largest remainder, so every parent is exactly the sum of its children and the root is ``total``.

:func:`make_consistent` composes the three. Everything here is post-processing of noisy counts: free of
privacy cost, never sees raw data. Labels of a hierarchy are public (they come from a schema), so they may
appear in error messages; counts never do.

>>> h = HierarchyTree.from_fanouts([2])
>>> [np.round(level, 4).tolist() for level in least_squares(h, [[10.0], [3.0, 5.0]], [1.0, 1.0])]
[[9.3333], [3.6667, 5.6667]]
>>> [level.tolist() for level in make_consistent(h, [[10.0], [-3.0, 5.0]], [1.0, 1.0], total=6)]
[[6], [0, 6]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dprelease.dp.accounting.charges import MeasurementRecord
from dprelease.dp.errors import InternalError, ParameterError
from dprelease.dp.synthesis.hierarchy import FloatArray, HierarchyTree, IntArray, NonnegativeMethod, _family_sums
from dprelease.dp.synthesis.noisy import NoisyMarginal
from dprelease.dp.synthesis.postprocess import combined_one_way


def _per_level(
    hierarchy: HierarchyTree, values: Sequence[npt.ArrayLike], name: str, *, finite: bool = True
) -> list[FloatArray]:
    """Validate one array per level with the level's size; copies, never views of the caller's arrays."""
    if len(values) != hierarchy.n_levels:
        raise ParameterError(f"{name} ({len(values)} levels) must have {hierarchy.n_levels} levels, root included")
    out: list[FloatArray] = []
    for level, (raw, size) in enumerate(zip(values, hierarchy.sizes, strict=True)):
        array = np.array(raw, dtype=np.float64)
        if array.ndim == 0:
            array = np.full(size, float(array))
        if array.shape != (size,):
            raise ParameterError(f"{name}[{level}] (shape {array.shape}) must have shape ({size},)")
        if finite and not np.isfinite(array).all():
            raise ParameterError(f"{name}[{level}] must be finite; {int((~np.isfinite(array)).sum())} entries are not")
        out.append(array)
    return out


def _variances(hierarchy: HierarchyTree, variances: Sequence[float | npt.ArrayLike]) -> list[FloatArray]:
    out = _per_level(hierarchy, variances, "variances", finite=False)
    last = len(out) - 1
    for level, array in enumerate(out):
        if np.isnan(array).any() or not (array > 0).all():
            raise ParameterError(f"variances[{level}] (min {float(np.min(array))}) must be positive")
        if level == last and not np.isfinite(array).all():
            raise ParameterError(
                f"variances[{level}] (inf) must be finite on the last level; only levels above it may be unmeasured"
            )
    return out


def least_squares(
    hierarchy: HierarchyTree,
    noisy: Sequence[npt.ArrayLike],
    variances: Sequence[float | npt.ArrayLike],
    *,
    root_total: float | None = None,
) -> list[FloatArray]:
    """The weighted least-squares consistent estimate of hierarchical counts (the BLUE).

    Minimises sum over nodes v of (y_v - x_v)² / var_v subject to every parent equalling the sum of its
    children, in two passes (Hay et al. 2010, generalised to any fan-out and per-node variances):

    * bottom-up, each node's estimate from its subtree: a leaf keeps z = y and V = var; an inner node with
      children c combines its own count with s = sum z_c (variance S = sum V_c) by inverse variance,
      z = (y / var + s / S) / (1 / var + 1 / S) and V = 1 / (1 / var + 1 / S);
    * top-down, the root keeps x = z (or ``root_total``), and each child gets
      x_c = z_c + (V_c / S_p) (x_p - s_p): its parent's discrepancy shared in proportion to the variances.

    Each parent then equals the sum of its children up to float rounding, and a consistent input comes back
    unchanged. An inverse variance of zero (``var = inf``) marks an unmeasured node, allowed above the last
    level; its noisy value is ignored (it may be NaN).

    Args:
        hierarchy: The tree.
        noisy: One float array per level (the root's first) of noisy counts, in node order.
        variances: One entry per level: the noise variance of every node of the level (a float) or of each
            node (an array). Positive; ``inf`` (unmeasured) is allowed above the last level.
        root_total: If given, the root is pinned to this value (known exactly, e.g. a separately released
            total) and its noisy count is ignored; the result is then the BLUE given that total.

    Returns:
        One float array per level, consistent.

    Raises:
        ParameterError: If the arrays do not match the hierarchy, a measured count or ``root_total`` is not
            finite, or a variance is not positive.

    Example:
        >>> h = HierarchyTree.from_fanouts([2])
        >>> [x.tolist() for x in least_squares(h, [[10.0], [3.0, 5.0]], [1.0, 1.0], root_total=12.0)]
        [[12.0], [5.0, 7.0]]
    """
    var = _variances(hierarchy, variances)
    values = _per_level(hierarchy, noisy, "noisy", finite=False)
    for level, (y, v) in enumerate(zip(values, var, strict=True)):
        if not np.isfinite(y[np.isfinite(v)]).all():
            raise ParameterError(f"noisy[{level}] must be finite where its variance is finite")
    if root_total is not None and not math.isfinite(root_total):
        raise ParameterError(f"root_total ({root_total}) must be finite")

    last = hierarchy.n_levels - 1
    z: list[FloatArray] = [np.empty(0)] * hierarchy.n_levels
    big_v: list[FloatArray] = [np.empty(0)] * hierarchy.n_levels
    child_sum: list[FloatArray] = [np.empty(0)] * last
    child_var: list[FloatArray] = [np.empty(0)] * last
    z[last], big_v[last] = values[last], var[last]
    for level in range(last - 1, -1, -1):
        s = _family_sums(hierarchy, level, z[level + 1])
        total_var = _family_sums(hierarchy, level, big_v[level + 1])
        measured = np.isfinite(var[level])
        inverse_own = np.where(measured, 1.0 / var[level], 0.0)
        own = np.where(measured, values[level], 0.0)
        combined_var = 1.0 / (inverse_own + 1.0 / total_var)
        z[level] = np.where(measured, combined_var * (own * inverse_own + s / total_var), s)
        big_v[level] = np.where(measured, combined_var, total_var)
        child_sum[level], child_var[level] = s, total_var

    x: list[FloatArray] = [np.array([z[0][0] if root_total is None else float(root_total)])]
    for level in range(last):
        parent = hierarchy.parents[level]
        share = big_v[level + 1] / child_var[level][parent]
        x.append(z[level + 1] + share * (x[level] - child_sum[level])[parent])
    return x


def _sorted_families(
    hierarchy: HierarchyTree, level: int, keys: FloatArray
) -> tuple[npt.NDArray[np.intp], IntArray, IntArray, IntArray]:
    """Nodes of ``level + 1`` sorted by parent, then by ``keys`` descending, then by position.

    Returns the order, the sorted parents, each family's first position and each node's 0-based rank in
    its family (all in sorted order).
    """
    parent = hierarchy.parents[level]
    order = np.lexsort((np.arange(parent.size), -keys, parent))
    sorted_parent = parent[order]
    starts = np.concatenate(([0], np.cumsum(hierarchy.child_counts[level])[:-1])).astype(np.int64)
    rank = np.arange(parent.size, dtype=np.int64) - starts[sorted_parent]
    return order, sorted_parent, starts, rank


def _project_families(hierarchy: HierarchyTree, level: int, values: FloatArray, targets: FloatArray) -> FloatArray:
    """Each family of ``level + 1`` projected (Euclidean) onto {x >= 0, sum x = its parent's target}.

    The group-wise form of :func:`dp.synthesis.postprocess.project_simplex` (Duchi et al. 2008): the shift tau of each
    family is found from its values sorted in decreasing order.
    """
    parent = hierarchy.parents[level]
    order, sorted_parent, starts, rank = _sorted_families(hierarchy, level, values)
    ordered = values[order]
    running = np.cumsum(ordered)
    before = np.where(starts > 0, running[starts - 1], 0.0)
    family_running = running - before[sorted_parent]
    count = rank + 1
    valid = ordered - (family_running - targets[sorted_parent]) / count > 0
    # A family under a positive target always keeps its largest child (the support is never empty); this
    # also covers targets too small for the test above to see in floating point.
    support = np.maximum(np.maximum.reduceat(np.where(valid, count, 0), starts), 1)
    # The family's sum over its support is summed afresh, not read off the running sum, to avoid cancellation.
    top_sum = np.bincount(sorted_parent, weights=np.where(count <= support[sorted_parent], ordered, 0.0),
                          minlength=targets.size)
    tau = (top_sum - targets) / support
    out: FloatArray = np.maximum(values - tau[parent], 0.0)
    return out


def _scale_families(hierarchy: HierarchyTree, level: int, values: FloatArray, targets: FloatArray) -> FloatArray:
    """Each family of ``level + 1``: negatives clipped to zero, the rest scaled to its parent's target."""
    parent = hierarchy.parents[level]
    positive = np.maximum(values, 0.0)
    sums = _family_sums(hierarchy, level, positive)
    out: FloatArray = positive * np.divide(targets, sums, out=np.zeros_like(targets), where=sums > 0)[parent]
    return out


def nonnegative(
    hierarchy: HierarchyTree, estimates: Sequence[npt.ArrayLike], *, method: NonnegativeMethod = "project"
) -> list[FloatArray]:
    """Consistent estimates made non-negative, top-down, each family summing to its (already fixed) parent.

    The root is clipped at zero. Then, level by level, the children of each parent with value P are
    replaced by non-negative values summing to P:

    * ``"project"`` (default): the Euclidean projection of the family onto {x >= 0, sum x = P}, i.e.
      x_c = max(e_c - tau, 0) with one shift tau per family, the nearest such family in L2 (as
      :func:`dp.synthesis.postprocess.project_simplex`); a consistent non-negative family is left unchanged;
    * ``"scale"``: negatives clipped to zero, the positive children scaled by P / (their sum).

    With either method a family whose children are all non-positive under a parent P > 0 is spread evenly
    (for ``"project"`` this is what the projection gives when the children are equal). This is a greedy,
    level-by-level correction, not the projection of the whole tree. Sums match parents up to float
    rounding; :func:`round_consistent` makes them exact.

    Args:
        hierarchy: The tree.
        estimates: One finite float array per level (typically from :func:`least_squares`).
        method: ``"project"`` or ``"scale"``, as above.

    Returns:
        One non-negative float array per level.

    Raises:
        ParameterError: If the arrays do not match the hierarchy, are not finite, or ``method`` is unknown.

    Example:
        >>> h = HierarchyTree.from_fanouts([3])
        >>> [x.tolist() for x in nonnegative(h, [[6.0], [5.0, 3.0, -2.0]])]
        [[6.0], [4.0, 2.0, 0.0]]
        >>> [x.tolist() for x in nonnegative(h, [[6.0], [5.0, 3.0, -2.0]], method="scale")]
        [[6.0], [3.75, 2.25, 0.0]]
    """
    if method not in ("project", "scale"):
        raise ParameterError(f"method ({method!r}) must be 'project' or 'scale'")
    values = _per_level(hierarchy, estimates, "estimates")
    family = _project_families if method == "project" else _scale_families
    out: list[FloatArray] = [np.maximum(values[0], 0.0)]
    for level in range(hierarchy.n_levels - 1):
        parent, targets = hierarchy.parents[level], out[level]
        children = family(hierarchy, level, values[level + 1], targets)
        # Families left with nothing under a positive parent (possible only with "scale") are spread evenly;
        # then one rescale per family removes the float drift of the shift or the scaling.
        sums = _family_sums(hierarchy, level, children)
        empty = (sums <= 0) & (targets > 0)
        if empty.any():
            even = targets / hierarchy.child_counts[level]
            children = np.where(empty[parent], even[parent], children)
            sums = np.where(empty, targets, sums)
        factor = np.divide(targets, sums, out=np.zeros_like(targets), where=sums > 0)
        out.append(children * factor[parent])
    return out


def round_consistent(hierarchy: HierarchyTree, estimates: Sequence[npt.ArrayLike], total: int) -> list[IntArray]:
    """Controlled rounding, top-down: integers whose every parent is exactly the sum of its children.

    The root is ``total``. Level by level, each parent's integer N is split over its children in proportion
    to their estimates (negatives count as zero; a family of zeros is treated as equal weights) by largest
    remainder: each child gets floor(N w_c / W), and the N - sum of floors units left go to the children with
    the largest fractional parts, ties to the earlier node. Each child thus moves by less than one from its
    share of N. Within a family this is :func:`dp.synthesis.postprocess.round_preserving_sum`, done for all families
    of a level at once by sorting on (parent, -remainder).

    Args:
        hierarchy: The tree.
        estimates: One finite float array per level (typically from :func:`nonnegative`); the root's is not
            used, as ``total`` replaces it.
        total: The root's count, a non-negative integer.

    Returns:
        One int64 array per level, non-negative, each parent the exact sum of its children.

    Raises:
        ParameterError: If the arrays do not match the hierarchy or are not finite, or ``total`` is not a
            non-negative integer.

    Example:
        >>> h = HierarchyTree.from_fanouts([3])
        >>> [x.tolist() for x in round_consistent(h, [[4.0], [1.5, 1.5, 1.0]], 4)]
        [[4], [2, 1, 1]]
    """
    if isinstance(total, bool) or not isinstance(total, int | np.integer) or total < 0:
        raise ParameterError(f"total ({total!r}) must be a non-negative integer")
    values = _per_level(hierarchy, estimates, "estimates")
    out: list[IntArray] = [np.array([int(total)], dtype=np.int64)]
    for level in range(hierarchy.n_levels - 1):
        parent, counts = hierarchy.parents[level], hierarchy.child_counts[level]
        weights = np.maximum(values[level + 1], 0.0)
        weight_sums = _family_sums(hierarchy, level, weights)
        empty = ~(weight_sums > 0)
        if empty.any():
            weights = np.where(empty[parent], 1.0, weights)
            weight_sums = np.where(empty, counts.astype(np.float64), weight_sums)
        targets = out[level]
        # The same float operations as round_preserving_sum, so that ties break the same way.
        scaled = (weights / weight_sums[parent]) * targets[parent]
        base = np.floor(scaled)
        order, sorted_parent, starts, rank = _sorted_families(hierarchy, level, scaled - base)
        floors = base.astype(np.int64)[order]
        short = targets - np.add.reduceat(floors, starts)
        if (short < 0).any() or (short > counts).any():
            raise InternalError(f"round_consistent: level {level + 1}: largest-remainder shortfall out of range")
        floors += (rank < short[sorted_parent]).astype(np.int64)
        children = np.empty_like(floors)
        children[order] = floors
        out.append(children)
    return out


def make_consistent(
    hierarchy: HierarchyTree,
    noisy: Sequence[npt.ArrayLike],
    variances: Sequence[float | npt.ArrayLike],
    total: int | None = None,
    *,
    method: NonnegativeMethod = "project",
) -> list[IntArray]:
    """Noisy hierarchical counts to consistent non-negative integers: least squares, non-negativity, rounding.

    Args:
        hierarchy: The tree.
        noisy: One float array per level (the root's first) of noisy counts, in node order.
        variances: Per level, the noise variance of each node (a float or an array), as for
            :func:`least_squares`.
        total: The root's count, if known (e.g. released separately): least squares is then pinned to it.
            If ``None``, the root is estimated and rounded to the nearest integer (at least 0).
        method: How families are made non-negative, see :func:`nonnegative`.

    Returns:
        One int64 array per level: non-negative, every parent exactly the sum of its children, the root
        equal to ``total`` when given.

    Raises:
        ParameterError: If the inputs do not match the hierarchy or are invalid (see the stages).

    Example:
        >>> h = HierarchyTree.from_fanouts([2, 2])
        >>> noisy = [[9.0], [4.0, 6.0], [2.0, 1.0, -1.0, 4.0]]
        >>> [x.tolist() for x in make_consistent(h, noisy, [1.0, 1.0, 1.0])]
        [[9], [4, 5], [3, 1, 0, 5]]
    """
    if total is not None and (isinstance(total, bool) or not isinstance(total, int | np.integer) or total < 0):
        raise ParameterError(f"total ({total!r}) must be a non-negative integer")
    pinned = None if total is None else float(total)
    estimates = nonnegative(hierarchy, least_squares(hierarchy, noisy, variances, root_total=pinned), method=method)
    root = int(total) if total is not None else int(np.rint(estimates[0][0]))
    return round_consistent(hierarchy, estimates, root)


@dataclass(frozen=True)
class NoisyLevel:
    """The noisy counts of one level of a hierarchy: a DP output, safe to publish and post-process.

    Attributes:
        hierarchy: The hierarchy's name.
        level: The level's depth: 1 for the top level (0 is the root, the total, never measured here).
        name: The level's name (the leaf column's name for the last level).
        counts: Noisy counts of the level's nodes, in node order; may be negative.
        measurement: The mechanism, scale and booked loss that produced them.
    """

    hierarchy: str
    level: int
    name: str
    counts: IntArray
    measurement: MeasurementRecord

    @property
    def variance(self) -> float:
        """Noise variance of each count."""
        std = self.measurement.std
        if std is None:
            raise InternalError("NoisyLevel without a noise standard deviation")
        return std * std


def combine(first: npt.ArrayLike, first_variance: float, second: npt.ArrayLike, second_variance: float
            ) -> tuple[FloatArray, float]:
    """Inverse-variance-weighted mean of two independent unbiased measurements of the same counts.

    >>> values, variance = combine([10.0], 1.0, [4.0], 2.0)
    >>> values.tolist(), variance
    ([8.0], 0.6666666666666666)
    """
    if not (first_variance > 0 and second_variance > 0):
        raise InternalError("combine needs positive variances")
    a = np.asarray(first, dtype=np.float64)
    b = np.asarray(second, dtype=np.float64)
    weight_a, weight_b = 1.0 / first_variance, 1.0 / second_variance
    out: FloatArray = (weight_a * a + weight_b * b) / (weight_a + weight_b)
    return out, 1.0 / (weight_a + weight_b)


def hierarchy_counts(
    tree: HierarchyTree, name: str, column: str, levels: Sequence[NoisyLevel], marginals: Sequence[NoisyMarginal],
    total: int,
) -> list[IntArray]:
    """Consistent integer counts of every level of hierarchy ``name`` (over ``column``), the root pinned to ``total``.

    The leaf level is also measured by the column's 1-way marginal and the margins of its 2-way
    marginals; all are combined by inverse variance before the weighted least squares over the tree.
    """
    ordered = sorted((x for x in levels if x.hierarchy == name), key=lambda x: x.level)
    other, other_variance = combined_one_way(column, list(marginals))
    leaf, leaf_variance = combine(ordered[-1].counts, ordered[-1].variance, other, float(other_variance[0]))
    noisy = [np.array([float(total)]), *[x.counts.astype(np.float64) for x in ordered[:-1]], leaf]
    variances = [1.0, *[x.variance for x in ordered[:-1]], leaf_variance]  # the root is pinned to the total
    return make_consistent(tree, noisy, variances, total=total)
