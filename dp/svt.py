"""The sparse vector technique, and clip-bound discovery built on it.

:class:`AboveThreshold` is Dwork & Roth's Algorithm 1 ("The Algorithmic Foundations of
Differential Privacy", 2014, Sec. 3.6) over integer-valued queries of L1 sensitivity Δ, with exact
discrete Laplace noise: the threshold gets noise of scale 2Δ/ε, each query noise of scale 4Δ/ε, and
the output is the index of the first query whose noisy answer reaches the noisy threshold (or
None). The proof only uses that the noise density ratio between neighbouring shifts is bounded by
exp(shift / scale), which the discrete Laplace shares with the continuous one for integer shifts;
queries and threshold are integers, so every shift is an integer. The mechanism is ε-DP however
many queries it examines, and so (ε²/2)-zCDP.

Drawing the noise of all queries in one vectorised call and then scanning is the same algorithm:
the output is the same function of the same independent random variables; noise drawn for queries
after the first positive one never influences the output. The argument, its preconditions and the
code lines it relies on are in ``docs/proofs/above_threshold.md``.

:class:`Sparse` is Dwork & Roth's Algorithm 2: up to ``cutoff`` (c) positive answers, each found by
an AboveThreshold run of epsilon/c with a freshly drawn threshold noise. Both mechanisms share one
scan, :func:`_scan_batch`, which also takes a batch of independent runs; statistical audits run
the very code a release runs, only with many rows.

:func:`range_query_answers` is the sparse-vector application of Near & Abuah's "Programming
Differential Privacy" (chapter "The Sparse Vector Technique", range queries): Sparse picks the
range counts above a threshold, and only those are measured with discrete Laplace noise.

:func:`discover_bounds` finds public clipping bounds for a numeric column without declared ones:
one AboveThreshold run for the lower bound (ascending geometric grid, queries "rows below g") and
one for the upper bound (descending grid, queries "rows above g"). Both queries have sensitivity 1
under add/remove-one-row. A run that never fires returns the end of the declared search range.

>>> grid = geometric_grid(0, 100)
>>> grid[:6], grid[-1]
((0.0, 1.0, 2.0, 4.0, 8.0, 16.0), 100.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dprelease.dp.accounting import Measurement, ReleaseContext, charge, measure, replay, seal
from dprelease.dp.budget import PureBudget, float_at_least
from dprelease.dp.errors import ParameterError
from dprelease.dp.mechanisms import DiscreteLaplace
from dprelease.dp.random import IntArray, NoiseSource

FloatArray = npt.NDArray[np.float64]




@dataclass(frozen=True)
class AboveThreshold:
    """Reports the first query whose noisy answer reaches a noisy threshold.

    Privacy: epsilon-DP for any number of queries, each of L1 sensitivity ``l1_sensitivity``,
    under the neighbouring relation of those queries (Dwork & Roth 2014, Thm. 3.23). The booked
    loss is recomputed from the rounded-up noise scales: max(2Δ / threshold_scale, 4Δ / query_scale).

    Attributes:
        l1_sensitivity: Sensitivity of each query (a positive integer).
        budget: The epsilon of the whole run.
    """

    l1_sensitivity: int
    budget: PureBudget
    _threshold_scale: float = field(init=False, repr=False, compare=False)
    _query_scale: float = field(init=False, repr=False, compare=False)

    name = "AboveThreshold (discrete Laplace)"

    def __post_init__(self) -> None:
        sensitivity = self.l1_sensitivity
        if isinstance(sensitivity, bool) or not isinstance(sensitivity, int) or sensitivity <= 0:
            raise ParameterError(f"AboveThreshold: l1_sensitivity ({self.l1_sensitivity!r}) must be a positive integer")
        if not isinstance(self.budget, PureBudget):
            raise ParameterError("AboveThreshold: budget must be a PureBudget (epsilon)")
        delta_q = Fraction(self.l1_sensitivity)
        object.__setattr__(self, "_threshold_scale", float_at_least(2 * delta_q / self.budget.epsilon))
        object.__setattr__(self, "_query_scale", float_at_least(4 * delta_q / self.budget.epsilon))

    def threshold_scale(self) -> float:
        """Scale of the threshold noise, >= 2Δ/ε."""
        return self._threshold_scale

    def query_scale(self) -> float:
        """Scale of each query's noise, >= 4Δ/ε."""
        return self._query_scale

    def scale(self) -> float:
        """The query noise scale (recorded in the ledger)."""
        return self._query_scale

    def sensitivity_text(self) -> str:
        """The declared per-query sensitivity, for the ledger."""
        return f"L1={self.l1_sensitivity} per query"

    def privacy_loss(self) -> PureBudget:
        """Epsilon implied by the scales actually used; never above the budget."""
        delta_q = Fraction(self.l1_sensitivity)
        return PureBudget(
            max(2 * delta_q / Fraction(self._threshold_scale), 4 * delta_q / Fraction(self._query_scale))
        )

    def run(self, answers: IntArray, threshold: int, noise: NoiseSource) -> int | None:
        """The index of the first query with noisy answer >= noisy threshold, or None.

        Draws the threshold noise (one value), then every query's noise (one vectorised call),
        then scans: :meth:`run_batch` with a single row. Callers go through
        :func:`run_above_threshold`, which charges the ledger first.
        """
        hit = int(self.run_batch(np.asarray(answers, dtype=np.int64).reshape(1, -1), threshold, noise)[0])
        return hit if hit >= 0 else None

    def run_batch(self, answers: IntArray, threshold: int, noise: NoiseSource) -> IntArray:
        """Independent runs, one per row of ``answers`` (shape (runs, queries)); -1 stands for None.

        Each row is a separate run with its own noise, so rows computed from the same data cost
        ``runs`` times :meth:`privacy_loss`; releases use :meth:`run` (one row). Audits call this
        to repeat the production scan many times with two noise calls.
        """
        hits = _scan_batch(_answer_matrix(answers), threshold, 1, self.threshold_scale(), self.query_scale(), noise)
        return hits[:, 0]


def run_above_threshold(
    mechanism: AboveThreshold,
    answers: IntArray,
    threshold: int,
    context: ReleaseContext,
    *,
    stage: str,
    query: str,
) -> tuple[int | None, Measurement]:
    """Charge the ledger for one AboveThreshold run, run it and seal its outcome (or replay it)."""
    sealed = replay(mechanism, context, stage=stage, query=query)
    if sealed is not None:
        return sealed["index"], sealed["measurement"]
    record = charge(mechanism, context, stage=stage, query=query, cells=len(answers))
    index = mechanism.run(answers, threshold, context.noise)
    seal(context, record, {"index": index})
    return index, record


def _answer_matrix(answers: IntArray) -> IntArray:
    matrix = np.asarray(answers)
    if matrix.ndim != 2:
        raise ParameterError(f"answers (of shape {matrix.shape}) must be a matrix of shape (runs, queries)")
    return np.asarray(matrix, dtype=np.int64)


def _scan_batch(
    answers: IntArray, threshold: int, cutoff: int, threshold_scale: float, query_scale: float, noise: NoiseSource
) -> IntArray:
    """Dwork & Roth's Algorithm 2 (Sparse) on each row of ``answers``, all rows at once.

    The one implementation of the scan, shared by :class:`AboveThreshold` (cutoff 1) and
    :class:`Sparse`. Noise calls, in this order: the first round's threshold noise (one value per
    row); every query's noise (one value per query and row, drawn once: a query is examined in at
    most one round, so no noise value is used twice); then, for each later round, fresh threshold
    noise for the rows whose previous round answered positive and that have queries left. Noise
    of queries after a row's last examined query is drawn and discarded; it never influences the
    output (``docs/proofs/above_threshold.md``, "Vectorised draws").

    Returns:
        Shape (rows, cutoff): each row's positive indices in increasing order, padded with -1.
    """
    rows, queries = answers.shape
    hits = np.full((rows, cutoff), -1, dtype=np.int64)
    noisy_threshold = noise.discrete_laplace(np.full(rows, threshold, dtype=np.int64), threshold_scale)
    noisy = noise.discrete_laplace(answers.reshape(-1), query_scale).reshape(rows, queries)
    if queries == 0:
        return hits
    position = np.arange(queries)
    start = np.zeros(rows, dtype=np.int64)  # each row's first query not examined yet
    active = np.arange(rows)  # the rows whose current round is running
    for round_ in range(cutoff):
        if round_ > 0:
            active = active[start[active] < queries]
            if active.size == 0:
                break
            # Dwork & Roth, Alg. 2: fresh threshold noise after every positive answer.
            noisy_threshold = noise.discrete_laplace(np.full(active.size, threshold, dtype=np.int64), threshold_scale)
        above = (noisy[active] >= noisy_threshold[:, np.newaxis]) & (position >= start[active][:, np.newaxis])
        fired = above.any(axis=1)
        first = above.argmax(axis=1)[fired]
        active = active[fired]
        hits[active, round_] = first
        start[active] = first + 1
    return hits


def geometric_grid(low: float, high: float) -> tuple[float, ...]:
    """Candidate bounds inside [low, high]: the ends, 0 when inside, and ±2^k offsets.

    For a range that does not contain 0, the powers of two are offsets from the end nearer 0.
    """
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ParameterError(f"search_range ({low}, {high}) must be finite with low below high")
    points = {float(low), float(high)}
    if low < 0 < high:
        points.add(0.0)
        anchors = [(0.0, 1.0), (0.0, -1.0)]
    elif low >= 0:
        anchors = [(float(low), 1.0)]
    else:
        anchors = [(float(high), -1.0)]
    for origin, sign in anchors:
        k = 0
        while True:
            point = origin + sign * 2.0**k
            if not low < point < high:
                break
            points.add(point)
            k += 1
    return tuple(sorted(points))


def tail_counts(values: FloatArray, grid: tuple[float, ...]) -> tuple[IntArray, IntArray]:
    """For each grid point g: rows with value < g, and rows with value > g.

    Each count has sensitivity 1 under add/remove-one-row. NaN (missing) rows are in neither
    count; -inf is below and +inf above every point. Counts over row groups add up, so this is
    the map step of a map-reduce.
    """
    finite_or_inf = values[~np.isnan(values)]
    ordered = np.sort(finite_or_inf)
    points = np.asarray(grid, dtype=np.float64)
    below = np.searchsorted(ordered, points, side="left").astype(np.int64)
    above = (len(ordered) - np.searchsorted(ordered, points, side="right")).astype(np.int64)
    return below, above


@dataclass(frozen=True)
class DiscoveredBounds:
    """Bounds found by SVT for one column: DP outputs, public once released.

    Attributes:
        column: The column.
        lower: The lower clipping bound.
        upper: The upper clipping bound.
        lower_found: False when the lower run never fired (fell back to the search range).
        upper_found: False when the upper run never fired.
        measurements: The two AboveThreshold runs' provenance.
    """

    column: str
    lower: float
    upper: float
    lower_found: bool
    upper_found: bool
    measurements: tuple[Measurement, ...]


def svt_threshold(
    query_scale: float, queries: int, *, cheap_widening: bool = False, away_from_origin: bool = False,
    threshold_scale: float | None = None,
) -> int:
    """The public count threshold: the query noise's (1 - 1/m) quantile scale, at least 1.

    A run fires once about this many rows lie beyond a candidate; queries with no such rows fire
    spuriously with probability about 1/(2m) each, so the whole scan with probability ~1/2 at most
    (which only widens the bounds, never narrows them below the data).

    A scan ``away_from_origin`` (the upper bound of a range starting at or above 0, where
    consecutive candidates double) widens the range by a factor of 2 or more with each spurious
    step, which equal-width bins pay in resolution (fnlwgt in 32 bins over [16384, 4194304] instead
    of [16384, 524288]: tvd1 0.14, in about 8% of runs at epsilon 1). It uses the quantile 1 - 1/(4m):
    spurious firing 4 times rarer, for ln 4 noise scales more rows beyond the bound. (On the side of
    the origin a spurious step moves the bound by at most its distance from the origin.)

    With ``cheap_widening`` (a column binned ``log``: a bound one doubling too wide adds one nearly
    empty bin, while a bound too narrow clamps a whole tail, such as capital-gain >= 3411 at small
    epsilon) the threshold is one noise scale: the scan fires earlier, wider bounds are more frequent
    and fewer rows are clamped.

    >>> svt_threshold(100.0, 23), svt_threshold(100.0, 23, away_from_origin=True)
    (314, 453)
    >>> svt_threshold(100.0, 23, cheap_widening=True)
    100

    With ``threshold_scale`` (the monotone scan, whose two noises have one scale) the quantile is that of
    the difference of the two noises, at the same spurious-firing rates:

    >>> svt_threshold(50.0, 23, threshold_scale=50.0)
    214
    >>> svt_threshold(50.0, 23, away_from_origin=True, threshold_scale=50.0)
    295
    """
    if threshold_scale is not None:
        return _threshold_for_both_noises(query_scale, threshold_scale, queries, cheap_widening=cheap_widening,
                                          away_from_origin=away_from_origin)
    if cheap_widening:
        return max(1, math.ceil(query_scale))
    return max(1, math.ceil(query_scale * math.log(max(2, queries) * (4 if away_from_origin else 1))))


def _difference_tail(x: float, query_scale: float, threshold_scale: float) -> float:
    """P(Z_q − Z_t > x) for independent Laplace noises of the two scales, x >= 0."""
    a, b = query_scale, threshold_scale
    if math.isclose(a, b, rel_tol=1e-9):
        return math.exp(-x / a) * (2 + x / a) / 4
    return (a * a * math.exp(-x / a) - b * b * math.exp(-x / b)) / (2 * (a * a - b * b))


def _threshold_for_both_noises(query_scale: float, threshold_scale: float, queries: int, *,
                               cheap_widening: bool, away_from_origin: bool) -> int:
    """The threshold at which an empty candidate fires spuriously with probability about 1/(2m).

    1/(8m) away from the origin; counting both the query's and the threshold's noise (the monotone scan,
    where the two have the same scale, so the threshold's noise cannot be left out). With cheap widening,
    the spurious rate of the general scan's cheap threshold.
    """
    if cheap_widening:
        # The general scan's cheap threshold is one query scale (4Δ/ε against threshold noise 2Δ/ε): keep
        # its per-candidate spurious rate, P(Z_q − Z_t > 4Δ/ε) ≈ 0.223, under the monotone scan's noises.
        target = _difference_tail(2.0, 2.0, 1.0)
    else:
        target = 1 / (2 * max(2, queries) * (4 if away_from_origin else 1))
    low, high = 0.0, 64 * max(query_scale, threshold_scale)
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if _difference_tail(middle, query_scale, threshold_scale) > target else (low, middle)
    return max(1, math.ceil(high))


def discover_bounds(
    column: str,
    counts: tuple[IntArray, IntArray],
    grid: tuple[float, ...],
    run_budget: PureBudget,
    context: ReleaseContext,
    *,
    sensitivity: int,
    stage: str = "bounds",
    cheap_widening: bool = False,
) -> DiscoveredBounds:
    """Discover lower and upper clipping bounds with two monotone AboveThreshold runs of ``run_budget`` each.

    Args:
        column: The column name (public).
        counts: ``tail_counts(values, grid)``, summed over row groups.
        grid: The candidate points, ascending.
        run_budget: Epsilon of each of the two runs (the column costs both, composed).
        context: The ledger and noise source.
        sensitivity: How much one privacy unit can move each tail count: 1 for row-level privacy,
            k when contributions are bounded to k rows per id.
        stage: The ledger stage name.
        cheap_widening: Whether a too wide bound costs little (public: the column is binned ``log``);
            then the threshold is lower (:func:`svt_threshold`).

    Returns:
        The bounds; lower < upper always holds (a crossing is resolved towards the search range).
    """
    below, above = counts
    # "Rows below g" over ascending g (and "rows above g" over descending g) are monotone: adding a
    # privacy unit raises every count of a scan by 0 to Δ, removing one lowers them all. So the
    # monotone AboveThreshold applies, with query noise 2Δ/ε instead of 4Δ/ε for the same ε.
    mechanism = MonotoneAboveThreshold(sensitivity, run_budget)
    # The grid's origin is 0 when the range holds it, else its end nearer 0 (geometric_grid): a side
    # whose candidates run away from it doubles the range with each spurious step.
    lower_threshold, upper_threshold = (
        svt_threshold(mechanism.query_scale(), len(grid), cheap_widening=cheap_widening, away_from_origin=away,
                      threshold_scale=mechanism.threshold_scale())
        for away in (grid[0] < 0, grid[-1] > 0)
    )

    # Lower bound: ascending scan of "rows below g"; the bound is the last point before it fires.
    hit, lower_record = run_above_threshold(
        mechanism, below, lower_threshold, context, stage=stage, query=f"lower bound of {column}"
    )
    lower_found = hit is not None and hit > 0
    lower = grid[hit - 1] if lower_found and hit is not None else grid[0]

    # Upper bound: descending scan of "rows above g"; the bound is the last point before it fires.
    descending = above[::-1].copy()
    hit, upper_record = run_above_threshold(
        mechanism, descending, upper_threshold, context, stage=stage, query=f"upper bound of {column}"
    )
    upper_found = hit is not None and hit > 0
    upper = grid[len(grid) - hit] if upper_found and hit is not None else grid[-1]
    if not lower < upper:
        lower, upper, lower_found, upper_found = grid[0], grid[-1], False, False
    return DiscoveredBounds(column, lower, upper, lower_found, upper_found, (lower_record, upper_record))


# ---------------------------------------------------------------------------------------------
# Sparse: up to c positive answers (Dwork & Roth, Algorithm 2)


def _positive_int(value: object, name: str, owner: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ParameterError(f"{owner}: {name} ({value!r}) must be a positive integer")
    if value <= 0:
        raise ParameterError(f"{owner}: {name} ({value}) must be positive")
    return int(value)


def _integer_threshold(threshold: object, owner: str) -> int:
    if isinstance(threshold, bool) or not isinstance(threshold, int | np.integer):
        raise ParameterError(
            f"{owner}: threshold ({threshold!r}) must be an integer; the privacy argument shifts it by integers"
        )
    return int(threshold)


def _integer_answers(answers: IntArray, owner: str, *, ndim: int) -> IntArray:
    array = np.asarray(answers)
    shape = "a vector" if ndim == 1 else "a matrix of shape (runs, queries)"
    if array.ndim != ndim:
        raise ParameterError(f"{owner}: answers (of shape {array.shape}) must be {shape}")
    if array.size and array.dtype.kind not in "iu":
        raise ParameterError(f"{owner}: answers (of dtype {array.dtype}) must be integers")
    return array.astype(np.int64)


@dataclass(frozen=True)
class Sparse:
    """Reports the indices of up to ``cutoff`` queries whose noisy answers reach a noisy threshold.

    Privacy: epsilon-DP for any number of queries, each of L1 sensitivity ``l1_sensitivity``,
    under the neighbouring relation of those queries (Dwork & Roth 2014, Sec. 3.6, Algorithm 2
    "Sparse" with delta = 0): c = ``cutoff`` AboveThreshold runs of epsilon/c each, composed, where
    each run starts after the previous positive answer with fresh threshold noise. The threshold noise has
    scale 2cΔ/ε and each query's noise 4cΔ/ε (rounded up); the booked loss is recomputed from them:
    c · max(2Δ / threshold_scale, 4Δ / query_scale). Only indices are released, never a noisy
    answer. Argument: ``docs/proofs/above_threshold.md``.

    >>> sparse = Sparse(l1_sensitivity=1, budget=PureBudget(Fraction(1)), cutoff=2)
    >>> sparse.threshold_scale(), sparse.query_scale(), sparse.privacy_loss()
    (4.0, 8.0, PureBudget(epsilon=Fraction(1, 1)))
    >>> class NoNoise:  # shows the scan only; a release always uses the secure source
    ...     def discrete_laplace(self, values, scale):
    ...         return values
    >>> sparse.run(np.array([0, 7, 0, 9, 8]), 5, NoNoise())
    [1, 3]

    Attributes:
        l1_sensitivity: Sensitivity of each query (a positive integer).
        budget: The epsilon of the whole run, for all ``cutoff`` positive answers together.
        cutoff: The most positive answers reported (c); the scan stops at the c-th.
    """

    l1_sensitivity: int
    budget: PureBudget
    cutoff: int
    _round: AboveThreshold = field(init=False, repr=False, compare=False)

    name = "Sparse (discrete Laplace)"

    def __post_init__(self) -> None:
        object.__setattr__(self, "l1_sensitivity", _positive_int(self.l1_sensitivity, "l1_sensitivity", "Sparse"))
        object.__setattr__(self, "cutoff", _positive_int(self.cutoff, "cutoff", "Sparse"))
        if not isinstance(self.budget, PureBudget):
            raise ParameterError("Sparse: budget must be a PureBudget (epsilon)")
        round_budget = PureBudget(self.budget.epsilon / self.cutoff)
        object.__setattr__(self, "_round", AboveThreshold(self.l1_sensitivity, round_budget))

    def threshold_scale(self) -> float:
        """Scale of each threshold noise, >= 2cΔ/ε."""
        return self._round.threshold_scale()

    def query_scale(self) -> float:
        """Scale of each query's noise, >= 4cΔ/ε."""
        return self._round.query_scale()

    def scale(self) -> float:
        """The query noise scale (recorded in the ledger)."""
        return self.query_scale()

    def sensitivity_text(self) -> str:
        """The declared per-query sensitivity and the cutoff, for the ledger."""
        return f"L1={self.l1_sensitivity} per query, cutoff {self.cutoff}"

    def privacy_loss(self) -> PureBudget:
        """Epsilon implied by the scales actually used, for all c rounds; never above the budget."""
        return PureBudget(self.cutoff * self._round.privacy_loss().epsilon)

    def run(self, answers: IntArray, threshold: int, noise: NoiseSource) -> list[int]:
        """The indices of the positive answers, increasing, at most ``cutoff`` of them.

        Callers go through :func:`run_sparse`, which charges the ledger first.
        """
        matrix = _integer_answers(answers, "Sparse", ndim=1).reshape(1, -1)
        return [int(i) for i in self.run_batch(matrix, threshold, noise)[0] if i >= 0]

    def run_batch(self, answers: IntArray, threshold: int, noise: NoiseSource) -> IntArray:
        """Independent runs, one per row of ``answers`` (shape (runs, queries)).

        Each row is a separate run with its own noise (rows computed from the same data cost
        ``runs`` times :meth:`privacy_loss`); releases use :meth:`run`.

        Returns:
            Shape (runs, cutoff): each row's positive indices, increasing, padded with -1.
        """
        matrix = _integer_answers(answers, "Sparse", ndim=2)
        threshold = _integer_threshold(threshold, "Sparse")
        return _scan_batch(matrix, threshold, self.cutoff, self.threshold_scale(), self.query_scale(), noise)


def run_sparse(
    mechanism: Sparse,
    answers: IntArray,
    threshold: int,
    context: ReleaseContext,
    *,
    stage: str,
    query: str,
) -> tuple[list[int], Measurement]:
    """Charge the ledger for one Sparse run, run it and seal its outcome (or replay it).

    The arguments are checked before anything is charged; the charge is booked before any noise
    is drawn.

    Returns:
        The indices of the positive answers and the run's public provenance.
    """
    values = _integer_answers(answers, "Sparse", ndim=1)
    _integer_threshold(threshold, "Sparse")
    sealed = replay(mechanism, context, stage=stage, query=query)
    if sealed is not None:
        return [int(i) for i in sealed["indices"]], sealed["measurement"]
    record = charge(mechanism, context, stage=stage, query=query, cells=len(values))
    indices = mechanism.run(values, threshold, context.noise)
    seal(context, record, {"indices": indices})
    return indices, record


# ---------------------------------------------------------------------------------------------
# Range queries (Near & Abuah, "Programming Differential Privacy", sparse vector chapter)


def range_counts(values: FloatArray, ranges: Sequence[tuple[float, float]]) -> IntArray:
    """For each range [low, high): the rows with low <= value < high.

    Each count has sensitivity 1 under add/remove-one-row. NaN (missing) rows are in no range.

    >>> range_counts(np.array([0.0, 1.0, 1.5, 2.0, np.nan]), [(0, 1), (1, 2), (0, 10)]).tolist()
    [1, 2, 4]
    """
    ordered = np.sort(values[~np.isnan(values)])
    lows = np.asarray([r[0] for r in ranges], dtype=np.float64)
    highs = np.asarray([r[1] for r in ranges], dtype=np.float64)
    inside = np.searchsorted(ordered, highs, side="left") - np.searchsorted(ordered, lows, side="left")
    return inside.astype(np.int64)


def overlap_depth(ranges: Sequence[tuple[float, float]]) -> int:
    """The largest number of ranges [low, high) sharing a point.

    One row lies in at most this many of the ranges, so it is the L1 sensitivity of their counts
    as one vector under add/remove-one-row (it is 1 for disjoint ranges, and at most their number).

    >>> overlap_depth([(0, 1), (1, 2), (2, 3)]), overlap_depth([(0, 10), (2, 3), (2.5, 4)])
    (1, 3)
    """
    # At a shared coordinate the end (-1) sorts before the start (+1): [a, b) and [b, c) are disjoint.
    steps = sorted([(float(low), 1) for low, _ in ranges] + [(float(high), -1) for _, high in ranges])
    depth = deepest = 0
    for _, step in steps:
        depth += step
        deepest = max(deepest, depth)
    return deepest


def _check_ranges(ranges: Sequence[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    checked = []
    if len(ranges) == 0:
        raise ParameterError("range_query_answers: ranges must not be empty")
    for i, pair in enumerate(ranges):
        try:
            low, high = (float(x) for x in pair)
        except (TypeError, ValueError):
            raise ParameterError(f"range_query_answers: ranges[{i}] must be a pair of numbers (low, high)") from None
        if not low < high:
            raise ParameterError(f"range_query_answers: ranges[{i}] ({low:g}, {high:g}) must have low below high")
        checked.append((low, high))
    return tuple(checked)


@dataclass(frozen=True)
class NoisyRangeCounts:
    """Noisy counts of the range queries that Sparse reported above the threshold (a DP output).

    Attributes:
        ranges: All range queries asked, each [low, high) (public).
        indices: The queries Sparse reported above the threshold, increasing, at most ``cutoff``.
        counts: Their noisy counts, aligned with ``indices``. The noise is drawn after, and
            independently of, the selection, so each is unbiased for its range's true count.
        scale: The discrete Laplace scale of ``counts``; None when nothing was selected.
        measurements: Provenance: the Sparse run, then the counts' measurement (if any).
    """

    ranges: tuple[tuple[float, float], ...]
    indices: tuple[int, ...]
    counts: IntArray
    scale: float | None
    measurements: tuple[Measurement, ...]


def range_query_answers(
    values: FloatArray,
    ranges: Sequence[tuple[float, float]],
    threshold: int,
    budget: PureBudget,
    cutoff: int,
    context: ReleaseContext,
    *,
    stage: str,
    query: str,
) -> NoisyRangeCounts:
    """Answer the range counts that are large: Sparse selects up to ``cutoff``, Laplace measures them.

    The book's method (Near & Abuah, "Programming Differential Privacy", sparse vector chapter,
    range queries): half the budget runs Sparse over all range counts (each of sensitivity 1
    under add/remove-one-row) to find up to c of them above ``threshold``; the other half
    measures only those. The book measures each selected count separately at epsilon/(2c), noise
    scale 2c/ε. Here the selected counts are measured as one vector whose L1 sensitivity is their
    ranges' overlap depth d (public: it depends on the public ranges and on Sparse's output only),
    at epsilon/2: scale 2d/ε, never more than the book's since d <= c. The total is
    epsilon/2 + epsilon/2 = epsilon by sequential composition; when nothing is selected the
    measurement half is neither drawn nor charged.

    Counts below the threshold are not released; that they were not selected is part of the
    (private) output. The threshold must be public, chosen without looking at the data.

    Args:
        values: One column, one row per privacy unit (sensitive).
        ranges: The range queries, each [low, high) with low < high (public).
        threshold: The public count threshold (an integer).
        budget: Epsilon of the whole procedure.
        cutoff: The most queries answered (c).
        context: The ledger and noise source.
        sensitivity: How much one privacy unit can move each tail count: 1 for row-level privacy,
            k when contributions are bounded to k rows per id.
        stage: The ledger stage name.
        query: A public label; the ledger rows are ``{query}: select`` and ``{query}: counts``.

    Returns:
        The selected indices and their noisy counts.

    Raises:
        ParameterError: For an empty or malformed range list, a non-integer threshold, a bad cutoff
            or budget; raised before anything is charged.
    """
    checked = _check_ranges(ranges)
    if not isinstance(budget, PureBudget):
        raise ParameterError("range_query_answers: budget must be a PureBudget (epsilon)")
    parts = budget.split({"select": 1, "counts": 1})
    sparse = Sparse(1, parts["select"], cutoff)
    counts = range_counts(np.asarray(values, dtype=np.float64), checked)
    selected, select_record = run_sparse(sparse, counts, threshold, context, stage=stage, query=f"{query}: select")
    if not selected:
        return NoisyRangeCounts(checked, (), np.zeros(0, dtype=np.int64), None, (select_record,))
    depth = overlap_depth([checked[i] for i in selected])
    laplace = DiscreteLaplace(l1_sensitivity=depth, budget=parts["counts"])
    noisy, count_record = measure(laplace, counts[selected], context, stage=stage, query=f"{query}: counts")
    return NoisyRangeCounts(checked, tuple(selected), noisy, laplace.scale(), (select_record, count_record))


# ---------------------------------------------------------------------------------------------
# Monotone queries


@dataclass(frozen=True)
class MonotoneAboveThreshold(AboveThreshold):
    """AboveThreshold for monotone queries: query noise of scale 2Δ/ε instead of 4Δ/ε.

    Privacy: epsilon-DP with epsilon = Δ / threshold_scale + Δ / query_scale, provided that for
    every pair of neighbouring datasets either every query's answer moves up by between 0 and Δ,
    or every query's answer moves down by between 0 and Δ (Lyu, Su & Li 2017, "Understanding the
    Sparse Vector Technique for Differential Privacy", PVLDB 10(6), the monotonic-query case).
    The mechanism cannot check this; the caller's queries must have it. Counts of rows below (or
    above) a sequence of points are monotone under add/remove-one-row: one added row raises each
    count by 0 or 1. Argument: ``docs/proofs/above_threshold.md``, "Monotone queries".

    >>> m = MonotoneAboveThreshold(l1_sensitivity=1, budget=PureBudget(Fraction(1, 2)))
    >>> m.threshold_scale(), m.query_scale(), m.privacy_loss()
    (4.0, 4.0, PureBudget(epsilon=Fraction(1, 2)))
    """

    name = "AboveThreshold, monotone queries (discrete Laplace)"

    def __post_init__(self) -> None:
        super().__post_init__()
        # Both noises get half the budget: scale Δ / (ε/2) = 2Δ/ε each, rounded up.
        query_scale = float_at_least(2 * Fraction(self.l1_sensitivity) / self.budget.epsilon)
        object.__setattr__(self, "_query_scale", query_scale)

    def sensitivity_text(self) -> str:
        """The declared per-query sensitivity and the monotonicity it relies on, for the ledger."""
        return f"L1={self.l1_sensitivity} per query, monotone"

    def privacy_loss(self) -> PureBudget:
        """Δ / threshold_scale + Δ / query_scale, from the scales actually used; never above the budget."""
        delta_q = Fraction(self.l1_sensitivity)
        return PureBudget(delta_q / Fraction(self._threshold_scale) + delta_q / Fraction(self._query_scale))
