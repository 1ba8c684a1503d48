"""Estimating a junction-tree graphical model from noisy marginals (post-processing, in numpy).

The model is a distribution over encoded columns that factorises over a junction tree of cliques
(each clique a tuple of at most a few columns, each clique's *separator* — its columns shared with
its parent clique — contained in the parent). A tree of 2-way marginals is one too: the spanning forest
of the measured pairs as a ``(root,)`` clique per component and a ``(parent, child)`` clique per edge
(:func:`forest_cliques`); so the chosen cliques (``cliques: auto``) and declared or MST pairs share one
estimator and one sampler. It is fitted to noisy measurements of marginals
y_i (each over a subset of one clique, with per-cell noise variance v_i) by minimising

    L(mu) = Σ_i || N · M_i(mu) - y_i ||² / (2 v_i)

over the marginal polytope, where M_i(mu) is the model's marginal on measurement i's columns and N
the (noisy) total. This is the estimator of Private-PGM (McKenna, Sheldon & Miklau, "Graphical-model
based estimation and inference for differential privacy", ICML 2019): mirror descent on the clique
log-potentials theta (theta <- theta - eta · ∇L), whose marginals are computed exactly by two-pass
sum-product message passing on the junction tree (:mod:`dp.synthesis.fitloss`). The step size starts at
1 / max_i (N² / v_i), is halved until the loss does not increase, and grows by 1.5 after each
accepted step until the first halving, by 1.05 after that (:data:`GROWTH`). Everything here sees noisy
measurements only.

>>> tree = JunctionTree((("a", "b"),), (None,), {"a": 2, "b": 2})
>>> fit = estimate(tree, [Marginal(("a", "b"), np.array([[30.0, 10.0], [10.0, 50.0]]), 1.0)], 100.0, iterations=200)
>>> np.round(fit.marginal(("a",)) * 100).tolist()
[40.0, 60.0]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dprelease.dp.errors import InternalError, ParameterError
from dprelease.dp.synthesis import arrays
from dprelease.dp.synthesis.arrays import FloatArray, logsumexp
from dprelease.dp.synthesis.arrays import align as _align
from dprelease.dp.synthesis.arrays import sum_to as _sum_to
from dprelease.dp.synthesis.fitloss import FlatLoss
from dprelease.dp.synthesis.noisy import NoisyMarginal
from dprelease.dp.synthesis.postprocess import round_preserving_sum

ITERATIONS = 500
"""Accepted mirror-descent steps of a fit that does not start from post-processed tables (:func:`measured_start`).

500 steps (about 520 evaluations of :class:`~dp.synthesis.fitloss.FlatLoss`) cost about half the CPU of the former
300 (about 474 evaluations of the log-space loss, each about twice as slow) and reach a lower loss. Paired re-fits
of the same noisy measurements (mean tvd2 / tvd3; Adult ε = 1 12 sets, ε = 3 6 sets, ACS MA 3 sets each), former
300 steps -> 300 / 500 / 700 / 1,000 steps now: Adult ε = 3 tvd2 .0285 -> 500 .0281, 700 .0280, 1,000 .0280, 2,000
.0280 (converged); Adult ε = 1 .0353 / .0774 -> 300 .0353 / .0774, 500 .0352 / .0773, 700 .0354 / .0777, 1,000
(6 sets) +.0005 / +.0009 (at ε = 1 an early stop regularises); ACS MA ε = 1 .0802 -> 700 .0802; ACS MA ε = 3
.0576 -> 500 .0567, 700 .0566. ``docs/research/synthesis.md`` §6.3."""

FIRST_GROWTH = 1.5
"""The step grows by this factor after every accepted step until a trial step is first rejected (halved)."""

GROWTH = 1.05
"""After the first rejection, the step grows by this factor after every accepted step (Private-PGM: 1.5 always).

With 1.5 every third trial step or so overshot and was rejected (474 evaluations for 300 steps); at a constant
1.05 the step stays near the largest stable one and few trials are lost. Adult ε = 3, 2 sets, loss after
474 / 1,000 / 2,000 evaluations: growth 1.5 8,525 / 8,270 / 8,077 and 10,519 / 10,191 / 9,921; 1.05
8,364 / 8,149 / 7,983 and 10,333 / 10,029 / 9,791 (1.02: within 0.2 % of 1.05; 1.01 worse)."""


@dataclass(frozen=True)
class Marginal:
    """A noisy marginal to fit.

    Attributes:
        columns: Its columns (all inside one clique of the tree).
        values: Noisy counts, shaped by the columns' sizes.
        variance: The noise variance of each cell: one number, or an array shaped like ``values`` (a
            1-way summed onto coarse bins of unequal sizes has a variance per bin).
    """

    columns: tuple[str, ...]
    values: FloatArray
    variance: float | FloatArray


@dataclass(frozen=True)
class JunctionTree:
    """Cliques in an order where every clique's parent comes first, and each separator inside its parent.

    Attributes:
        cliques: The cliques (tuples of column names).
        parents: The index of each clique's parent, None for a root.
        sizes: The number of codes of every column.
    """

    cliques: tuple[tuple[str, ...], ...]
    parents: tuple[int | None, ...]
    sizes: dict[str, int]
    separators: tuple[tuple[str, ...], ...] = field(init=False)

    def __post_init__(self) -> None:
        if len(self.cliques) != len(self.parents) or not self.cliques:
            raise ParameterError("JunctionTree: cliques and parents must be non-empty and of equal length")
        separators: list[tuple[str, ...]] = []
        for i, (clique, parent) in enumerate(zip(self.cliques, self.parents, strict=True)):
            if len(set(clique)) != len(clique) or any(c not in self.sizes for c in clique):
                raise ParameterError(f"JunctionTree: clique {i} repeats a column or names one without a size")
            if parent is None:
                separators.append(())
                continue
            if not 0 <= parent < i:
                raise ParameterError(f"JunctionTree: the parent of clique {i} must come before it")
            separators.append(tuple(c for c in clique if c in self.cliques[parent]))
        object.__setattr__(self, "separators", tuple(separators))

    def shape(self, index: int) -> tuple[int, ...]:
        """The array shape of clique ``index``."""
        return tuple(self.sizes[c] for c in self.cliques[index])

    def host(self, columns: Sequence[str]) -> int:
        """The first clique that contains every one of ``columns``.

        Raises:
            ParameterError: If none does.
        """
        for i, clique in enumerate(self.cliques):
            if set(columns) <= set(clique):
                return i
        raise ParameterError(f"JunctionTree: no clique contains the columns {tuple(columns)}")

    def calibrate(self, potentials: Sequence[FloatArray]) -> list[FloatArray]:
        """Normalised log-marginals of every clique under the given clique log-potentials (two-pass sum-product)."""
        n = len(self.cliques)
        upward: list[FloatArray | None] = [None] * n
        incoming = [np.array(p, dtype=np.float64) for p in potentials]
        for i in reversed(range(n)):  # leaves to roots: every child comes after its parent
            parent = self.parents[i]
            if parent is not None:
                message = _sum_to(incoming[i], self.cliques[i], self.separators[i], log=True)
                upward[i] = message
                incoming[parent] = incoming[parent] + _align(message, self.separators[i], self.cliques[parent])
        beliefs: list[FloatArray] = []
        for i in range(n):  # roots to leaves
            parent = self.parents[i]
            if parent is None:
                beliefs.append(incoming[i])
                continue
            sent = upward[i]
            if sent is None:
                raise InternalError("junction tree message missing; this is a bug")
            down = _sum_to(beliefs[parent], self.cliques[parent], self.separators[i], log=True) - sent
            beliefs.append(incoming[i] + _align(down, self.separators[i], self.cliques[i]))
        return [b - logsumexp(b) for b in beliefs]


@dataclass(frozen=True)
class FittedModel:
    """A fitted junction-tree model: the probability table of every clique (consistent on separators).

    Attributes:
        tree: The junction tree.
        cliques: Probabilities of each clique, shaped by its columns' sizes (each sums to 1).
        loss: The final value of the fitting loss.
    """

    tree: JunctionTree
    cliques: list[FloatArray]
    loss: float

    def marginal(self, columns: Sequence[str]) -> FloatArray:
        """The model's distribution over ``columns`` (inside one clique)."""
        host = self.tree.host(columns)
        return _sum_to(self.cliques[host], self.tree.cliques[host], tuple(columns))


def estimate(
    tree: JunctionTree, marginals: Sequence[Marginal], total: float, *, iterations: int = ITERATIONS,
    start: Sequence[FloatArray] | None = None,
) -> FittedModel:
    """Fit the model to noisy marginals by mirror descent (Private-PGM's estimator).

    Args:
        tree: The junction tree; every marginal's columns lie inside one of its cliques.
        marginals: The noisy marginals with their cell variances.
        total: The (noisy, post-processed) number of rows.
        iterations: Accepted mirror-descent steps.
        start: Initial clique log-potentials, shaped like the cliques (all zeros, the uniform
            distribution, when None).

    Returns:
        The clique probabilities.

    Raises:
        ParameterError: If a marginal fits no clique, its shape is wrong, or a variance is not positive.
    """
    hosts = []
    for m in marginals:
        host = tree.host(m.columns)
        expected = tuple(tree.sizes[c] for c in m.columns)
        if m.values.shape != expected:
            raise ParameterError(f"marginal {m.columns}: values of shape {m.values.shape} must be {expected}")
        variance = np.asarray(m.variance, dtype=np.float64)
        if variance.shape not in ((), expected) or not (variance > 0).all():
            raise ParameterError(f"marginal {m.columns}: variance must be positive, one number or one per cell")
        hosts.append(host)
    scale = max(float(total), 1.0)
    if start is not None and [np.shape(p) for p in start] != [tree.shape(i) for i in range(len(tree.cliques))]:
        raise ParameterError("estimate: start must hold one log-potential per clique, shaped like the clique")
    evaluate = FlatLoss(tree, marginals, hosts, scale)
    potentials = np.zeros(evaluate.cells) if start is None else evaluate.flatten(start)
    loss, gradient, probabilities = evaluate(potentials)
    if not marginals:
        return FittedModel(tree, evaluate.views(probabilities), loss)
    step = 1.0 / max(scale * scale / float(np.min(m.variance)) for m in marginals)
    growth = FIRST_GROWTH
    for _ in range(iterations):
        while True:
            trial = potentials - step * gradient
            trial_loss, trial_gradient, trial_probabilities = evaluate(trial)
            if trial_loss <= loss or step < 1e-30:
                break
            step *= 0.5
            growth = GROWTH
        potentials, loss, gradient, probabilities = trial, trial_loss, trial_gradient, trial_probabilities
        step *= growth
    return FittedModel(tree, evaluate.views(probabilities), loss)


def junction_parents(cliques: Sequence[tuple[str, ...]]) -> tuple[int | None, ...]:
    """Parents for cliques listed as (parents..., child): the first earlier clique holding all but the child.

    A 1-clique ``(root,)`` has no parents: it starts a component of the forest (parent None).

    >>> junction_parents([("a", "b"), ("a", "b", "c"), ("b", "d"), ("e",), ("e", "f")])
    (None, 0, 0, None, 3)
    """
    out: list[int | None] = []
    for i, clique in enumerate(cliques):
        separator = set(clique[:-1])
        out.append(next((j for j in range(i) if separator <= set(cliques[j])), None) if separator else None)
    return tuple(out)


def spanning_forest(columns: Sequence[str], pairs: Sequence[tuple[str, ...]]) -> list[tuple[str, str | None]]:
    """Order the columns so each comes after its parent: ``[(column, parent or None), ...]``.

    Pairs are taken in order and skipped when they would close a cycle (Kruskal with a public
    order). Each component is rooted at its first column in ``columns`` order and visited breadth first.

    >>> spanning_forest(["a", "b", "c"], [("a", "b"), ("b", "c"), ("a", "c")])
    [('a', None), ('b', 'a'), ('c', 'b')]
    """
    parent_of: dict[str, str] = {c: c for c in columns}

    def find(c: str) -> str:
        while parent_of[c] != c:
            parent_of[c] = parent_of[parent_of[c]]
            c = parent_of[c]
        return c

    adjacency: dict[str, list[str]] = {c: [] for c in columns}
    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra == rb:
            continue
        parent_of[ra] = rb
        adjacency[a].append(b)
        adjacency[b].append(a)
    order: list[tuple[str, str | None]] = []
    seen: set[str] = set()
    for root in columns:
        if root in seen:
            continue
        seen.add(root)
        queue: list[tuple[str, str | None]] = [(root, None)]
        while queue:
            node, parent = queue.pop(0)
            order.append((node, parent))
            for child in adjacency[node]:
                if child not in seen:
                    seen.add(child)
                    queue.append((child, node))
    return order


def forest_cliques(
    columns: Sequence[str], marginals: Sequence[NoisyMarginal]
) -> tuple[list[tuple[str, ...]], list[NoisyMarginal]]:
    """The forest over the measured 2-ways as a junction tree of 1- and 2-cliques, and the marginals it models.

    The forest is :func:`spanning_forest` over the 2-way marginals in their order (the structure is
    public: it depends only on the spec, or on pairs chosen privately). Its cliques, in sampling
    order, are ``(root,)`` for every component's root and ``(parent, child)`` for every edge. A pair
    that would close a cycle lies inside no clique: it is left out of the returned marginals, and so
    out of the fit.

    Args:
        columns: Every column, roots first where it matters (a component is rooted at its first column).
        marginals: The noisy 1-way and 2-way marginals.

    Returns:
        The cliques, and the marginals that lie inside one of them (in their order).
    """
    pairs = [m.columns for m in marginals if len(m.columns) == 2]
    cliques: list[tuple[str, ...]] = [(column,) if parent is None else (parent, column)
                                      for column, parent in spanning_forest(columns, pairs)]
    sets = [set(c) for c in cliques]
    return cliques, [m for m in marginals if any(set(m.columns) <= s for s in sets)]


START_SMOOTHING = 0.01
"""A hundredth of a row added to every cell of a post-processed table the fit starts from: a cell rounded
to 0 starts with a small probability instead of log 0, from which mirror descent could not move it. Half a
row would be 3,663 rows in a 74 x 99 table (age x hours-per-week), a ninth of Adult; on 5 paired sets of
the MST spec it raised the mean tvd1 from .00802 to .00822 (both after 300 steps)."""

WARM_ITERATIONS = 30
"""Mirror-descent steps from a warm start, which refine the consistent tables rather than replace them.
Measured on the Adult pairs specs, each of 5 sets of noisy measurements fitted both ways (mean tvd1 / tvd2
/ tvd3): declared pairs .00506 / .04601 / .10116 after 30 steps, .00498 / .04577 / .10084 after 300; pairs
chosen by MST .00725 / .04715 / .10011 after 30, .00802 / .04815 / .10111 after 300 (the former tree model:
.00710 / .04774 / .10231 and .00759 / .04869 / .10212). The full fit drifts from the consistent 1-ways on
MST's large sparse tables, where non-negativity leaves mass in empty cells."""


def _start(
    tree: JunctionTree, consistent: Mapping[tuple[str, ...], npt.NDArray[np.int64]],
    maps: Mapping[str, npt.NDArray[np.int64]],
) -> list[FloatArray] | None:
    """Log-potentials of the model that the post-processed tables define, or None when no clique has one.

    A clique whose fine columns carry a post-processed table (the forest's 1- and 2-cliques: each is a
    consistent marginal) starts at log P(clique) - log P(separator); any other clique at zero. Mirror
    descent then starts next to the consistent tables (the tree they define) instead of from the
    uniform distribution, and a few steps refine them (:data:`WARM_ITERATIONS`).
    """
    tables = {frozenset(columns): columns for columns in consistent}
    start: list[FloatArray] = []
    warm = False
    for clique, separator in zip(tree.cliques, tree.separators, strict=True):
        columns = tables.get(frozenset(clique))
        if columns is None or any(c in maps for c in clique):
            start.append(np.zeros(tuple(tree.sizes[c] for c in clique)))
            continue
        warm = True
        table = consistent[columns].reshape([tree.sizes[c] for c in columns]).astype(np.float64)
        table = np.transpose(table, [columns.index(c) for c in clique]) + START_SMOOTHING
        log = np.log(table / table.sum())
        if separator:
            log = log - _align(_sum_to(log, clique, separator, log=True), separator, clique)
        start.append(log)
    return start if warm else None


def _noise_l1(measurement: Marginal) -> float:
    """The expected L1 norm of a measurement's noise: sqrt(2/π) σ per cell (public: the variances)."""
    variance = np.broadcast_to(np.asarray(measurement.variance, dtype=np.float64), measurement.values.shape)
    return float(np.sqrt(2.0 / np.pi) * np.sqrt(variance).sum())


MEASURED_START_SMOOTHING = 1.0
"""One row added to every cell of a noisy clique (negative counts clipped to 0) that a cold fit starts from."""


def measured_start(tree: JunctionTree, measurements: Sequence[Marginal], total: float) -> list[FloatArray] | None:
    """Log-potentials of the model whose cliques are the noisy clique measurements themselves, or None.

    Every clique measured whole (in any column order), or, when none measures it whole, through its largest
    measurement that holds its child (a clique grown to hold an extra pair: :mod:`dp.measurement.cover`; the
    start is then constant in the columns that measurement lacks, times P(child | b) / P(child) for every further
    measurement over the child and some b, renormalised), whose expected noise is below its signal
    (sqrt(2/π) σ per cell, summed, under ``total`` rows: public quantities) starts at log P(clique) -
    log P(separator) of its noisy table, negative counts clipped to 0 and :data:`MEASURED_START_SMOOTHING`
    added to every cell; any other clique starts at zero (uniform given its separator). This is the
    degree-2 network read directly off the noisy cliques; mirror descent then reconciles them with each
    other and with the 1-ways. Post-processing of noisy values only.

    Measured on Adult at ε = 3 (the same 6 sets of measurements fitted both ways, 300 steps): loss 8,858
    from the uniform distribution, 7,283 from here (1,000 steps from uniform: 7,378), tvd2 .0302 -> .0285
    at the same CPU time. Where a clique's noise exceeds its rows (Adult at ε = 1: the cliques with
    native-country, 2,160-10,080 cells at σ 31), starting from it was worse than from uniform (tvd2 .0361
    against .0353 over 6 releases each); with this rule, paired, Adult ε = 1 .0353 -> .0351 and ACS MA
    ε = 1 .0794 -> .0795 (6 sets each). ``benchmarks/results/synthesis_fit.json``.
    """
    whole = {frozenset(m.columns) for m in measurements}
    usable = [m for m in measurements if len(m.columns) > 1 and _noise_l1(m) < total]
    start: list[FloatArray] = []
    found = False
    for clique, separator in zip(tree.cliques, tree.separators, strict=True):
        inside = [m for m in usable if (set(m.columns) == set(clique) if frozenset(clique) in whole
                                         else set(m.columns) <= set(clique) and clique[-1] in m.columns)]
        m = max(inside, key=lambda x: len(x.columns), default=None)
        if m is None:
            start.append(np.zeros(tuple(tree.sizes[c] for c in clique)))
            continue
        found = True
        shape = tuple(tree.sizes[c] for c in clique)
        out = np.broadcast_to(_conditional(m, clique, separator), shape).copy()
        others = [x for x in inside if x is not m and len(x.columns) > 1]
        if others and frozenset(clique) not in whole:
            # a grown clique: every further measurement holding its child adds its evidence on the child,
            # log P(child | its columns) - log P(child), then the table is a conditional again
            child = (clique[-1],)
            for x in others:
                log_child = _sum_to(_table_log(x, x.columns), x.columns, child, log=True)
                out = out + _conditional(x, clique, tuple(c for c in x.columns if c != clique[-1]))
                out = out - _align(log_child, child, clique)
            out = out - _align(logsumexp(out, axis=len(clique) - 1), clique[:-1], clique)
        start.append(out)
    return start if found else None


def _table_log(m: Marginal, columns: tuple[str, ...]) -> FloatArray:
    """The log of a noisy table over ``columns`` (its own columns, reordered): clipped, smoothed, normalised."""
    table = np.transpose(np.asarray(m.values, dtype=np.float64), [m.columns.index(c) for c in columns])
    table = np.maximum(table, 0.0) + MEASURED_START_SMOOTHING
    out: FloatArray = np.log(table / table.sum())
    return out


def _conditional(m: Marginal, clique: tuple[str, ...], separator: tuple[str, ...]) -> FloatArray:
    """Log P(m's columns | their part of ``separator``) under a noisy table, laid out over ``clique``."""
    columns = tuple(c for c in clique if c in m.columns)
    log = _table_log(m, columns)
    given = tuple(c for c in separator if c in columns)
    if given:
        log = log - _align(_sum_to(log, columns, given, log=True), given, columns)
    return _align(log, columns, clique)


@dataclass(frozen=True)
class JunctionEstimate:
    """A fitted junction-tree model (degree 2; more where grown to hold extra pairs): post-processed DP outputs.

    Attributes:
        fitted: The clique probabilities (coarse codes).
        cliques: (parents..., child) in sampling order; ``(root,)`` starts a component of a forest.
        maps: Fine-to-coarse maps of the coarsened columns.
        fine: Post-processed fine 1-way distribution of every column (to refine coarse codes).
        counts: Post-processed integer counts of every clique that is not already published as a
            post-processed marginal over the same fine columns (the forest's 1- and 2-cliques are).
    """

    fitted: FittedModel
    cliques: list[tuple[str, ...]]
    maps: dict[str, npt.NDArray[np.int64]]
    fine: dict[str, npt.NDArray[np.float64]]
    counts: dict[tuple[str, ...], npt.NDArray[np.int64]]

    def edges(self) -> list[tuple[str, str]]:
        """The model's (parent, child) edges: each clique's last parent and its child."""
        return [(clique[-2], clique[-1]) for clique in self.cliques if len(clique) > 1]


FIT_CELL_STEPS = 2.5
"""A fit's cells × steps stay within this multiple of ITERATIONS × the cells measured whole: a model grown to hold
extra pairs (:mod:`dp.measurement.cover`, up to 4× the cells) takes fewer steps, at about the former CPU."""


def fit_steps(tree: JunctionTree, observations: Sequence[Marginal]) -> int:
    """Mirror-descent steps of a cold fit: :data:`ITERATIONS`, fewer for a grown model (:data:`FIT_CELL_STEPS`)."""
    held = sum(int(np.prod(tree.shape(i))) for i in range(len(tree.cliques)))
    cliques = {frozenset(c) for c in tree.cliques}
    whole = sum(int(np.prod(o.values.shape)) for o in {frozenset(o.columns): o for o in observations
                                                          if frozenset(o.columns) in cliques}.values())
    return max(1, round(ITERATIONS * min(1.0, FIT_CELL_STEPS * whole / max(held, 1))))


def fit_junction(
    cliques: Sequence[tuple[str, ...]],
    measurements: Sequence[NoisyMarginal],
    maps: Mapping[str, npt.NDArray[np.int64]],
    consistent: Mapping[tuple[str, ...], npt.NDArray[np.int64]],
    sizes: Mapping[str, int],
    total: int,
) -> JunctionEstimate:
    """Fit the junction tree to noisy measurements (Private-PGM's estimator, :mod:`dp.synthesis.junction`).

    The 1-ways enter summed onto the coarse codes of coarsened columns (a coarse cell adds up the
    noisy fine cells of its bin, so its variance is the fine variance times the bin's size: a spike
    alone in its bin is measured as precisely as any fine cell). Mirror descent starts from the
    post-processed tables of the cliques that have one (:func:`_start`) and takes :data:`WARM_ITERATIONS`
    steps, else from the measured cliques (:func:`measured_start`; uniform where none is usable) and takes
    :data:`ITERATIONS`.

    Args:
        cliques: (parents..., child) in sampling order (:func:`junction_parents` links them); a
            1-clique ``(root,)`` starts a component.
        measurements: The noisy marginals to fit, each inside one clique: measured cliques (in coarse
            codes), 2-ways and 1-ways (in fine codes).
        maps: Fine-to-coarse maps of the coarsened columns.
        consistent: The post-processed marginals (their 1-ways refine coarse codes).
        sizes: The fine size of every column.
        total: The post-processed row count.

    Raises:
        ParameterError: If a measurement lies inside no clique or has the wrong shape.
    """
    coarse_sizes = arrays.coarse_sizes(sizes, maps)
    cliques = [tuple(c) for c in cliques]
    tree = JunctionTree(tuple(cliques), junction_parents(cliques), coarse_sizes)
    observations = []
    for m in measurements:
        column = m.columns[0]
        if len(m.columns) == 1 and column in maps:
            values = np.bincount(maps[column], weights=m.counts.astype(np.float64), minlength=coarse_sizes[column])
            cells = np.bincount(maps[column], minlength=coarse_sizes[column])
            observations.append(Marginal((column,), values.astype(np.float64), m.variance * cells.astype(np.float64)))
        else:
            observations.append(Marginal(m.columns, m.counts.astype(np.float64).reshape(m.shape), m.variance))
    start = _start(tree, consistent, maps)
    iterations = WARM_ITERATIONS
    if start is None:  # the measured cliques (cliques: auto): a rougher start, more steps (fewer if grown)
        start, iterations = measured_start(tree, observations, float(total)), fit_steps(tree, observations)
    fitted = estimate(tree, observations, float(total), start=start, iterations=iterations)
    fine = {cols[0]: counts / max(total, 1) for cols, counts in consistent.items() if len(cols) == 1}
    published = {frozenset(cols) for cols in consistent}
    counts = {clique: round_preserving_sum(fitted.marginal(clique).ravel() * total, total) for clique in cliques
              if frozenset(clique) not in published or any(c in maps for c in clique)}
    return JunctionEstimate(fitted, cliques, dict(maps), fine, counts)
