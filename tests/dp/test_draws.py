"""The measure stage's draws (dp/measurement/draws.py): order, mechanism, sensitivity, hierarchy levels."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from dprelease.dp.accounting.budget import PureBudget
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.errors import InternalError
from dprelease.dp.measurement.draws import PairSelection, level_counts, measure_plan
from dprelease.dp.measurement.marginals import ColumnDomain
from dprelease.schemas.plan import PlannedMeasurement
from tests.ledgers import charged_queries, pure_release

DOMAINS = [ColumnDomain("a", "category", ("x", "y")), ColumnDomain("b", "category", ("u", "v", "w")),
           ColumnDomain("c", "category", ("p", "q"))]
EXACT = {("a",): np.array([30, 10]), ("b",): np.array([5, 15, 20]), ("c",): np.array([25, 15]),
         ("a", "b"): np.array([5, 10, 15, 0, 5, 5]), ("a", "c"): np.array([20, 10, 5, 5]),
         ("b", "c"): np.array([5, 0, 10, 5, 10, 10])}  # 2-ways flattened row-major, as counted
TENTH = PureBudget(Fraction(1, 10))


@pytest.fixture
def context(tmp_path: Path) -> Iterator[ReleaseContext]:
    with pure_release(tmp_path, Fraction(100)) as opened:
        yield opened


_queries = charged_queries


def test_one_ways_are_drawn_first_then_the_rest_in_plan_order(context):
    plan = [PlannedMeasurement("two_way", ("a", "b"), TENTH),
            PlannedMeasurement("one_way", ("a",), TENTH),
            PlannedMeasurement("hierarchy", ("b",), TENTH, hierarchy="h", level=1, level_name="top"),
            PlannedMeasurement("one_way", ("b",), TENTH)]
    measured = measure_plan(plan, EXACT, {"h": [[0, 0, 1]]}, DOMAINS, context, 2)
    assert _queries(context) == [("one_way", plan[1].query), ("one_way", plan[3].query),
                                 ("two_way", plan[0].query), ("hierarchy", plan[2].query)]
    assert [m.columns for m in measured.marginals] == [("a",), ("b",), ("a", "b")]
    assert [m.shape for m in measured.marginals] == [(2,), (3,), (2, 3)]
    (level,) = measured.levels
    assert (level.hierarchy, level.level, level.name, level.counts.shape) == ("h", 1, "top", (2,))
    # Discrete Laplace at the unit sensitivity given: scale 2 / 0.1, rounded towards more noise.
    for record in [*(m.measurement for m in measured.marginals), level.measurement]:
        assert record.scale == pytest.approx(20.0) and record.scale >= 20.0
    assert measured.selection == [] and measured.junction is None


def test_chosen_pairs_are_planned_after_the_selection_and_drawn_before_the_rest(context):
    asked: list[list[tuple[str, str]]] = []

    def plan_pairs(chosen):
        asked.append(list(chosen))
        return [PlannedMeasurement("two_way", pair, TENTH) for pair in chosen]

    plan = [PlannedMeasurement("hierarchy", ("b",), TENTH, hierarchy="h", level=1, level_name="top"),
            *(PlannedMeasurement("one_way", (d.name,), TENTH) for d in DOMAINS)]
    pairs = PairSelection((("a", "b"), ("a", "c"), ("b", "c")), PureBudget(Fraction(1)), plan_pairs)
    measured = measure_plan(plan, EXACT, {"h": [[0, 0, 1]]}, DOMAINS, context, 1, pairs=pairs)
    (chosen,) = asked
    assert len(chosen) == 2 and len(measured.selection) == 2  # a spanning tree of three columns
    stages = [stage for stage, _ in _queries(context)]
    assert stages == ["one_way"] * 3 + ["selection"] * 2 + ["two_way"] * 2 + ["hierarchy"]
    assert [m.columns for m in measured.marginals[3:]] == chosen


def test_level_counts_sum_the_leaves_up_to_the_level():
    parents = [[0, 0, 1], [0, 1, 1, 2, 2]]  # top 2 nodes, middle 3, leaves 5
    leaves = np.array([1, 2, 3, 4, 5])
    assert level_counts(parents, leaves, 2).tolist() == [1, 5, 9]
    assert level_counts(parents, leaves, 1).tolist() == [6, 9]
    assert level_counts(parents, leaves, 3).tolist() == [1, 2, 3, 4, 5]


def test_cliques_without_a_coarse_counter_are_refused_before_any_draw(context):
    from dprelease.dp.measurement.cliques import PlannedCliques

    cliques = PlannedCliques(2, TENTH, 1, TENTH, (("a", "b"), ("a", "c"), ("b", "c")), TENTH, 8, None)
    plan = [PlannedMeasurement("one_way", ("a",), TENTH)]
    with pytest.raises(InternalError, match="cliques need count_coarse"):
        measure_plan(plan, EXACT, {}, DOMAINS, context, 1, cliques=cliques)
    assert _queries(context) == []


def test_root_auto_is_drawn_after_the_tree_and_before_the_second_parents(context):
    from dprelease.dp.measurement.cliques import PlannedCliques

    rows = np.random.default_rng(3).integers(0, [2, 3, 2], size=(400, 3))
    rows[:, 2] = rows[:, 0]  # c copies a: the tree holds (a, c) and one pair with b

    def count_coarse(workload, maps):
        assert maps == {}  # categorical columns: no coarse maps
        out = {}
        for columns in workload:
            index = ["abc".index(c) for c in columns]
            flat = np.ravel_multi_index(tuple(rows[:, i] for i in index), tuple([2, 3, 2][i] for i in index))
            out[tuple(columns)] = np.bincount(flat, minlength=int(np.prod([[2, 3, 2][i] for i in index])))
        return out

    exact = {(d.name,): np.bincount(rows[:, i], minlength=d.size) for i, d in enumerate(DOMAINS)}
    cliques = PlannedCliques(2, TENTH, 1, TENTH, (("a", "b"), ("a", "c"), ("b", "c")), TENTH, 8, "auto", TENTH)
    plan = [PlannedMeasurement("one_way", (d.name,), TENTH) for d in DOMAINS]
    measured = measure_plan(plan, exact, {}, DOMAINS, context, 1, cliques=cliques, count_coarse=count_coarse)
    queries = [q for _, q in _queries(context)]
    assert queries[3:6] == ["spanning tree edge 1", "spanning tree edge 2", "root of the junction tree"]
    junction = measured.junction
    assert junction is not None
    degree = {c: sum(c in e for e in junction.tree) for c in "abc"}
    assert degree[junction.cliques[0].columns[0]] == 1  # the root is a leaf of the chosen tree
