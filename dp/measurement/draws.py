"""The measure stage's noise draws, in plan order: 1-ways, the private choice of pairs or cliques, the rest.

The stage's task counts the rows (input/output) and calls :func:`measure_plan` once; the choice of
mechanism (:func:`dp.mechanisms.noise.additive_mechanism`, by the budget's kind), the sensitivity (the
unit sensitivity of the bounded rows, the same for every histogram), the order of the draws and the
private structure selection live here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from dprelease.dp.accounting.budget import Budget, PureBudget
from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext
from dprelease.dp.errors import InternalError
from dprelease.dp.measurement.cliques import CoarseCounter, MeasuredJunction, PlannedCliques, measure_junction
from dprelease.dp.measurement.marginals import ColumnDomain, IntArray
from dprelease.dp.measurement.structure import independence_scores, select_spanning_tree
from dprelease.dp.mechanisms.noise import additive_mechanism, measure
from dprelease.dp.synthesis.consistency import NoisyLevel
from dprelease.dp.synthesis.noisy import NoisyMarginal
from dprelease.dp.synthesis.postprocess import consistent_counts, estimate_total

Columns = tuple[str, ...]
Pair = tuple[str, str]


class PlannedDraw(Protocol):
    """One planned noisy measurement, as the budget plan gives it (``schemas.plan.PlannedMeasurement``)."""

    @property
    def stage(self) -> str:
        """The budget stage: ``one_way``, ``two_way``, ``hierarchy``."""

    @property
    def columns(self) -> Columns:
        """The marginal's columns (for a hierarchy level: its leaf column)."""

    @property
    def budget(self) -> Budget:
        """Its share of the stage, in the mechanism's unit (epsilon for pure, rho for zCDP)."""

    @property
    def hierarchy(self) -> str | None:
        """The hierarchy's name for a hierarchy level, else None."""

    @property
    def level(self) -> int:
        """The hierarchy level measured, 1 for the top level."""

    @property
    def level_name(self) -> str:
        """The hierarchy level's name."""

    @property
    def query(self) -> str:
        """The query's public name."""


@dataclass(frozen=True)
class PairSelection:
    """``two_way: auto``: the 2-way marginals chosen privately as a spanning tree, one edge a round.

    Attributes:
        candidates: The pairs that may be chosen, in public order.
        run_budget: Epsilon of each round of the exponential mechanism.
        plan_pairs: The planned 2-way measurements of the chosen pairs (the ``two_way`` stage split over
            them: public arithmetic of the budget plan).
    """

    candidates: Sequence[Pair]
    run_budget: PureBudget
    plan_pairs: Callable[[list[Pair]], Sequence[PlannedDraw]]


@dataclass(frozen=True)
class MeasuredPlan:
    """The noisy results of :func:`measure_plan` (DP outputs: public, safe to post-process).

    Attributes:
        marginals: The noisy 1-way and 2-way marginals, in draw order.
        levels: The noisy counts of every hierarchy level, in draw order.
        selection: The records of the spanning tree's rounds (``two_way: auto``).
        junction: The measured junction tree (``cliques: auto``), else None.
    """

    marginals: list[NoisyMarginal]
    levels: list[NoisyLevel]
    selection: list[MeasurementRecord]
    junction: MeasuredJunction | None


def level_counts(parents: Sequence[Sequence[int]], leaves: IntArray, level: int) -> IntArray:
    """Exact counts of a hierarchy level (1 = top) summed up from the exact counts of its leaf codes.

    ``parents[i]`` maps every node of level ``i + 2`` (the leaves for the last) to its parent's index.

    >>> level_counts([[0, 0, 1]], np.array([2, 3, 4]), 1).tolist()
    [5, 4]
    """
    counts = np.asarray(leaves, dtype=np.int64)
    for up in reversed(parents[level - 1:]):
        summed = np.zeros(max(up) + 1, dtype=np.int64)
        np.add.at(summed, np.asarray(up, dtype=np.int64), counts)
        counts = summed
    return counts


def measure_plan(
    draws: Sequence[PlannedDraw],
    exact: Mapping[Columns, IntArray],
    hierarchies: Mapping[str, Sequence[Sequence[int]]],
    domains: Sequence[ColumnDomain],
    context: ReleaseContext,
    sensitivity: int,
    *,
    pairs: PairSelection | None = None,
    cliques: PlannedCliques | None = None,
    count_coarse: CoarseCounter | None = None,
) -> MeasuredPlan:
    """Charge the ledger and draw every planned measurement: one additive-noise call each.

    Order: every ``one_way`` draw (plan order); then, with ``pairs``, the spanning tree chosen by the
    exponential mechanism (charged per round) on the pairs' exact counts scored against the noisy
    1-ways, and the chosen pairs' 2-way draws; then, with ``cliques``, the junction tree
    (:func:`dp.measurement.cliques.measure_junction`, whose coarse counts come from ``count_coarse``);
    then every other planned draw (plan order). Each draw is a histogram of the bounded rows: the
    additive mechanism of its budget's kind at ``sensitivity``. A row falls in exactly one node of every
    hierarchy level, so each level is a histogram of the same sensitivity.

    Args:
        draws: The planned measurements, in plan order.
        exact: The exact counts of every planned marginal and selection candidate.
        hierarchies: Each measured hierarchy's ``parents`` (see :func:`level_counts`).
        domains: Every measured column's public domain.
        context: The release's ledger, id, definition and secure noise source.
        sensitivity: The unit sensitivity of one privacy unit's rows.
        pairs: The private choice of 2-way marginals, or None.
        cliques: The private choice and measurement of junction-tree cliques, or None.
        count_coarse: Exact coarse counts for ``cliques``.

    Returns:
        The noisy marginals, hierarchy levels, selection records and junction tree.
    """
    if cliques is not None and count_coarse is None:
        raise InternalError("measure_plan: cliques need count_coarse")
    sizes = {d.name: d.size for d in domains}
    marginals: list[NoisyMarginal] = []
    levels: list[NoisyLevel] = []

    def draw(planned: PlannedDraw) -> None:
        mechanism = additive_mechanism(planned.budget, sensitivity)
        if planned.hierarchy is not None:
            values = level_counts(hierarchies[planned.hierarchy], exact[planned.columns], planned.level)
            noisy, record = measure(mechanism, values, context, stage=planned.stage, query=planned.query)
            levels.append(NoisyLevel(planned.hierarchy, planned.level, planned.level_name, noisy, record))
            return
        noisy, record = measure(mechanism, exact[planned.columns], context, stage=planned.stage, query=planned.query)
        marginals.append(NoisyMarginal(planned.columns, tuple(sizes[c] for c in planned.columns), noisy, record))

    for planned in draws:
        if planned.stage == "one_way":
            draw(planned)
    later: list[PlannedDraw] = [m for m in draws if m.stage != "one_way"]
    selection: list[MeasurementRecord] = []
    if pairs is not None:
        total = max(1, round(estimate_total(marginals)))
        distributions = {m.columns[0]: consistent_counts(m, total) / total for m in marginals}
        scores = independence_scores({p: exact[p] for p in pairs.candidates}, distributions, total)
        chosen, selection = select_spanning_tree([d.name for d in domains], list(pairs.candidates), scores,
                                                 pairs.run_budget, context, score_sensitivity=sensitivity)
        later = [*pairs.plan_pairs(chosen), *later]
    junction: MeasuredJunction | None = None
    if cliques is not None and count_coarse is not None:  # both or neither (checked above)
        junction = measure_junction(cliques, domains, marginals, count_coarse, context, sensitivity)
    for planned in later:
        draw(planned)
    return MeasuredPlan(marginals, levels, selection, junction)
