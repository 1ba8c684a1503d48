"""Pairs across the junction tree's branches, chosen and measured privately (``cross_pairs:``; issue 14, §7.2).

A degree-2 junction tree holds a pair only inside a clique; the extra pairs of :mod:`dp.measurement.cover`
grow cliques along one branch. A pair whose columns lie in different branches is left to the tree's path
between them, which can weaken or reverse a dependence (``docs/research/synthesis.md`` §7). This stage, after
the model is fitted, measures such pairs and rakes a pool of rows drawn from the model to them
(:mod:`dp.synthesis.raking`), as AIM measures where its model is worst (McKenna et al. 2022):

1. The candidates are the pairs that no clique of the fitted model holds, whose coarse table is within
   :data:`dp.measurement.marginals`' cell limit and not noise-capped at the pair's noise scale
   (:func:`dp.measurement.cover.capped`): public, from the model's cliques, domain sizes, the plan and N̂.
2. Each of ``rounds`` rounds picks one by the exponential mechanism on AIM's score
   u(a, b) = ‖x_ab − N̂ · q_ab‖₁ − sqrt(2/π) · σ · |a||b|, with x the exact coarse counts and q the weighted
   pool's table of the pair (public: the pool is drawn from the fitted model with the release's seed and raked
   to the noisy tables measured so far). One row moves one cell of x: sensitivity 1 per row (k per unit of k
   rows); the penalty, AIM's expected noise of the pair's measurement, is public.
3. The chosen pair is measured as a coarse 2-way marginal (a histogram: sensitivity 1 per row), then the pool
   is raked to every pair measured so far, and the next round scores the candidates against it.

Each selection and each measurement is booked before it draws (:func:`dp.mechanisms.selection.run_selection`,
:func:`dp.mechanisms.noise.measure`) and sealed: a re-run replays both, and since the pool and the raking are
seeded post-processing, it scores and picks the same pairs. Rounds for which no candidate is left are not run
and their share stays unspent (returned to the dataset when the release closes).

The stage's budget: a fifth to the selections (each round the same share; under zCDP an epsilon-bounded-range
round costs epsilon²/8), four fifths to the measurements, split equally.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dprelease.dp.accounting.budget import Budget, PureBudget, bounded_range_from_zcdp_share
from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext
from dprelease.dp.errors import ParameterError
from dprelease.dp.measurement.cover import capped
from dprelease.dp.mechanisms.noise import additive_mechanism, measure
from dprelease.dp.mechanisms.selection import ExponentialMechanism, run_selection
from dprelease.dp.synthesis.noisy import NoisyMarginal
from dprelease.dp.synthesis.raking import FloatArray, IntArray, anchored, pair_target, rake, weighted_table

Pair = tuple[str, str]

CROSS_QUERY = "cross pair("
"""The ledger query of a cross pair's measurement starts so: ``cross pair(a,b)``; its selection is ``cross pair k``."""

SELECTION_WEIGHT, MEASUREMENT_WEIGHT = 1, 4
"""The stage's split between the selections and the measurements (a fifth and four fifths)."""

DEFAULT_CROSS_PAIRS = 8
"""Cross pairs when ``allocation.cross`` is set and ``cross_pairs`` is not (the counterfactual's eight: on the
heavy-tailed table they took every numeric pair to within 0.005 of the shuffled line, ``§7.1``)."""

MAX_PAIRS = 64
"""At most this many cross pairs (``cross_pairs:``): each round rakes the whole pool once more."""

RESCORE_ALL = 2_000
"""With at most this many candidates every round scores them all against the raked pool; with more (a wide
table: 44,500 pairs of 300 columns took 45 s), a round rescores only the pairs sharing a column with the pair
measured last, and the others keep their score against the pool they were last scored on."""

ROUND_SWEEPS = 5
"""Raking sweeps after each round (warm-started; only the next round's scores need them): sampling rakes the
pool afresh to every pair (:data:`dp.synthesis.raking.SWEEPS`)."""

_L1_PER_CELL = float(np.sqrt(2 / np.pi))


@dataclass(frozen=True)
class PlannedCross:
    """The cross-pair stage of a release (``cross_pairs: K`` with ``cliques: auto``).

    Attributes:
        rounds: At most so many pairs are chosen and measured.
        run_budget: Epsilon of each selection (bounded range; booked as epsilon²/8 under zCDP).
        pair_budget: The budget of each pair's measurement.
    """

    rounds: int
    run_budget: PureBudget
    pair_budget: Budget

    def describe(self, unit: str) -> str:
        """One line of ``dprelease plan``."""
        return (f"    cross: up to {self.rounds} pairs across the junction tree's branches, each chosen by the "
                f"exponential mechanism (epsilon={float(self.run_budget.epsilon):.6g}) and measured "
                f"({unit}={float(self.pair_budget.amount):.6g}); the synthetic rows are drawn from the model's "
                "rows raked to them")


def plan_cross(stage: Budget, rounds: int) -> PlannedCross:
    """Split the ``cross`` stage over ``rounds`` selections and measurements (see the module's docstring).

    Raises:
        ParameterError: If a selection's share is too small for a short-decimal epsilon.
    """
    parts = stage.split({"select": SELECTION_WEIGHT, "measure": MEASUREMENT_WEIGHT})
    ways = {str(k): 1 for k in range(rounds)}
    select, pair = parts["select"].split(ways)["0"], parts["measure"].split(ways)["0"]
    run = select if isinstance(select, PureBudget) else bounded_range_from_zcdp_share(select)
    return PlannedCross(rounds, run, pair)


def pair_sigma(planned: PlannedCross, sensitivity: int) -> float:
    """The noise scale of one pair's measurement (public)."""
    return float(additive_mechanism(planned.pair_budget, sensitivity).noise_sd() or 0.0)


def cross_candidates(columns: Sequence[str], cliques: Sequence[tuple[str, ...]], sizes: Mapping[str, int],
                     sigma: float, total: float, cell_limit: int) -> list[Pair]:
    """The pairs no clique holds, in public column order, within ``cell_limit`` cells and not noise-capped."""
    held = {frozenset((x, y)) for c in cliques for x in c for y in c if x != y}
    out = []
    for i, a in enumerate(columns):
        for b in columns[i + 1:]:
            size = sizes[a] * sizes[b]
            if frozenset((a, b)) not in held and size <= cell_limit and not capped(sigma, size, total):
                out.append((a, b))
    return out


@dataclass
class CrossPairs:
    """What the cross-pair stage releases (DP outputs) and the raking targets made from them (post-processing).

    Attributes:
        measured: The noisy coarse 2-way tables, in the order chosen.
        records: Every selection's and measurement's record, in the order booked.
        targets: Each measured pair's target distribution (flattened), made against the pool when it was measured.
        weights: The pool's row weights after the last round (public): sampling starts its raking from them.
    """

    measured: list[NoisyMarginal] = field(default_factory=list)
    records: list[MeasurementRecord] = field(default_factory=list)
    targets: list[FloatArray] = field(default_factory=list)
    weights: FloatArray | None = None
    """The pool's row weights after the last round (public): sampling starts its raking from them."""

    def pairs(self) -> list[Pair]:
        """The measured pairs, in the order chosen."""
        return [(m.columns[0], m.columns[1]) for m in self.measured]


def pair_cells(pool: Mapping[str, IntArray], pair: Pair, sizes: Mapping[str, int]) -> IntArray:
    """Each pool row's cell of ``pair`` (row-major: a's code times |b| plus b's)."""
    a, b = pair
    return pool[a] * sizes[b] + pool[b]


def measure_cross(
    planned: PlannedCross,
    candidates: Sequence[Pair],
    exact: Mapping[tuple[str, ...], npt.NDArray[np.int64]],
    pool: Mapping[str, IntArray],
    sizes: Mapping[str, int],
    total: float,
    context: ReleaseContext,
    sensitivity: int,
) -> CrossPairs:
    """Choose and measure up to ``planned.rounds`` cross pairs; rake the pool after each (see the module).

    Args:
        planned: The stage's plan.
        candidates: The public candidates (:func:`cross_candidates`).
        exact: The raw coarse counts of every candidate, flattened row-major: used only through the mechanisms.
        pool: Coarse codes of the pool's rows per column (drawn from the fitted model: public).
        sizes: Coarse sizes of the columns.
        total: The noisy row count N̂.
        context: The ledger and noise source.
        sensitivity: Rows per privacy unit (1 without a unit).
    """
    if planned.rounds < 1:
        raise ParameterError("cross_pairs: at least one round")
    sigma = pair_sigma(planned, sensitivity)
    selector = ExponentialMechanism(score_sensitivity=sensitivity, budget=planned.run_budget)
    rows = len(next(iter(pool.values()))) if pool else 0
    weights = np.full(rows, 1.0 / max(rows, 1))
    remaining = list(candidates)
    out = CrossPairs()
    cells: list[IntArray] = []
    scored: dict[Pair, float] = {}
    for k in range(1, planned.rounds + 1):
        if not remaining:
            break
        index = 0
        if len(remaining) > 1:
            touched = {c for p in out.pairs()[-1:] for c in p}
            for p in remaining:  # a stale score is still one of sensitivity 1, against an earlier (public) pool
                if p not in scored or len(remaining) <= RESCORE_ALL or touched & set(p):
                    scored[p] = _score(exact[p], pair_cells(pool, p, sizes), weights, total, sigma)
            index, record = run_selection(selector, [scored[p] for p in remaining], context, stage="cross",
                                          query=f"cross pair {k}")
            out.records.append(record)
        a, b = pair = remaining.pop(index)
        noisy, record = measure(additive_mechanism(planned.pair_budget, sensitivity),
                                exact[pair], context, stage="cross", query=f"{CROSS_QUERY}{a},{b})")
        out.records.append(record)
        out.measured.append(NoisyMarginal(pair, (sizes[a], sizes[b]), noisy, record))
        cell = pair_cells(pool, pair, sizes)
        model = weighted_table(cell, weights, sizes[a] * sizes[b]).reshape(sizes[a], sizes[b])
        target = pair_target(noisy.reshape(sizes[a], sizes[b]), model.sum(axis=1), model.sum(axis=0), model)
        cells.append(cell)
        out.targets.append(target.ravel())
        # warm: the earlier pairs' tables are met already; every column's 1-way held where the model has it
        weights = rake(*anchored(cells, out.targets, pool, sizes, [c for p in out.pairs() for c in p]), weights,
                       ROUND_SWEEPS)
    out.weights = weights
    return out


def _score(exact: npt.NDArray[np.int64], cell: IntArray, weights: FloatArray, total: float, sigma: float) -> float:
    """AIM's score of a candidate: its L1 distance from N̂ times the pool's table, less its expected noise."""
    table = weighted_table(cell, weights, len(exact))
    return float(np.abs(exact - total * table).sum()) - _L1_PER_CELL * sigma * len(exact)

