"""Pairs across the junction tree's branches (dp/measurement/cross.py) and the raked pool (dp/synthesis/raking.py)."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget, zcdp_from_bounded_range
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.errors import InternalError
from dprelease.dp.measurement.cross import (
    _score,
    cross_candidates,
    measure_cross,
    pair_cells,
    plan_cross,
)
from dprelease.dp.synthesis.raking import (
    anchored,
    pair_target,
    pool_factor,
    rake,
    resample,
    sort_order,
    weighted_table,
)
from tests.ledgers import charged_queries, pure_release


@pytest.fixture
def context(tmp_path: Path) -> Iterator[ReleaseContext]:
    with pure_release(tmp_path, Fraction(1000)) as opened:
        yield opened


def test_raking_meets_consistent_targets_and_keeps_the_pool_law_within_each_cell():
    generator = np.random.default_rng(3)  # a public pool (no real row)
    pool = {c: generator.integers(0, 3, size=20_000) for c in "abc"}
    pool["c"] = (pool["a"] + generator.integers(0, 2, size=20_000)) % 3  # c depends on a
    sizes = dict.fromkeys("abc", 3)
    cells = pair_cells(pool, ("a", "b"), sizes)
    model = weighted_table(cells, np.ones(20_000), 9).reshape(3, 3)
    wanted = np.array([[9, 1, 1], [1, 9, 1], [1, 1, 9]], dtype=np.float64)  # a strong a-b association
    target = pair_target(wanted, model.sum(axis=1), model.sum(axis=0), model)
    weights = rake([cells], [target.ravel()], np.ones(20_000))
    assert np.allclose(weighted_table(cells, weights, 9), target.ravel(), atol=1e-9)
    assert abs(weights.sum() - 1) < 1e-12
    # inside each (a, b) cell every row keeps the same weight: c given (a, b) is the pool's own
    for cell in range(9):
        assert np.ptp(weights[cells == cell]) < 1e-15


def test_a_target_keeps_the_model_margins_and_the_noisy_tables_association():
    margin_a, margin_b = np.array([0.7, 0.3]), np.array([0.5, 0.25, 0.25])
    noisy = np.array([[50, -20, 5], [-3, 40, 30]])
    target = pair_target(noisy, margin_a, margin_b)
    assert np.allclose(target.sum(axis=1), margin_a) and np.allclose(target.sum(axis=0), margin_b)
    assert (target > 0).all()  # a cell at or below zero keeps a floor of the model's mass, not none
    assert target[0, 1] < 0.01 and target[1, 0] < 0.01  # the noisy table's zeros stay small
    with pytest.raises(InternalError):
        pair_target(noisy, margin_b, margin_a)


def test_resampling_holds_exact_counts_per_stratum_in_a_random_order():
    generator = np.random.default_rng(1)
    strata = np.repeat(np.arange(3), [30, 50, 20])
    weights = generator.random(100)
    weights[strata == 2] = 0.0  # no weight left in a stratum: drawn uniformly there
    counts = np.array([3, 5, 2])
    picked = resample(weights, 10, generator, strata=strata, counts=counts)
    assert np.bincount(strata[picked], minlength=3).tolist() == [3, 5, 2]
    assert not np.array_equal(strata[picked], np.sort(strata[picked])) or len(set(strata[picked])) == 1
    plain = resample(np.r_[np.zeros(50), np.ones(50)], 40, generator)
    assert (plain >= 50).all() and len(plain) == 40  # systematic: in proportion to the weights
    with pytest.raises(InternalError):
        resample(weights, 10, generator, strata=strata, counts=np.array([3, 5, 3]))
    with pytest.raises(InternalError):
        resample(weights, 10, generator, strata=strata, counts=np.array([3, 5, 0, 2]))  # a stratum with no pool row


def test_walking_a_sorted_pool_draws_its_leading_columns_near_their_shares_and_anchors_hold_the_1_ways():
    generator = np.random.default_rng(2)
    pool = {"a": generator.integers(0, 7, size=50_000), "b": generator.integers(0, 5, size=50_000)}
    weights = np.ones(50_000)
    share = np.bincount(pool["a"], minlength=7) / 50_000
    sorted_draw = resample(weights, 5_000, generator, sort_order(pool, ["a", "b"]))
    assert np.abs(np.bincount(pool["a"][sorted_draw], minlength=7) - 5_000 * share).max() <= 1
    for cell in range(7):  # b inside each a: within a row or two of its share too
        inside = pool["b"][sorted_draw][pool["a"][sorted_draw] == cell]
        local = np.bincount(pool["b"][pool["a"] == cell], minlength=5) / (pool["a"] == cell).sum()
        assert np.abs(np.bincount(inside, minlength=5) - len(inside) * local).max() <= 2
    pool["c"] = (pool["a"] + pool["b"]) % 3  # a column the pool ties to the pair (a, b)
    sizes = {"a": 7, "b": 5, "c": 3}
    cell = pair_cells(pool, ("a", "b"), sizes)
    model = weighted_table(cell, weights, 35).reshape(7, 5)
    wanted = np.ones((7, 5))
    wanted[np.arange(5), np.arange(5)] = 20.0  # a = b made likely
    target = pair_target(wanted, model.sum(axis=1), model.sum(axis=0), model).ravel()
    c_share = weighted_table(pool["c"], weights, 3)
    free = rake([cell], [target], weights)
    cells, targets = anchored([cell], [target], pool, sizes)
    assert len(cells) == 4 and np.allclose(targets[3], c_share)
    held = rake(cells, targets, weights)
    assert np.abs(weighted_table(pool["c"], free, 3) - c_share).sum() > 0.05  # the pair moved c's 1-way ...
    assert np.abs(weighted_table(pool["c"], held, 3) - c_share).sum() < 0.01  # ... which the anchor holds
    # c is a function of (a, b) here, so the anchor and the pair pull against each other: the pair is still
    # much nearer its target than the unraked pool
    assert np.abs(weighted_table(cell, held, 35) - target).sum() < 0.3 * np.abs(model.ravel() - target).sum()


@pytest.mark.parametrize("stage", [ZCDPBudget(Fraction(3, 1000)), PureBudget(Fraction(1, 10))])
def test_the_stage_is_split_exactly_and_never_over(stage):
    planned = plan_cross(stage, 8)
    if isinstance(stage, ZCDPBudget):
        booked = 8 * zcdp_from_bounded_range(planned.run_budget).rho + 8 * planned.pair_budget.amount
        assert stage.rho * Fraction(99, 100) < booked <= stage.rho
    else:
        assert 8 * planned.run_budget.epsilon + 8 * planned.pair_budget.amount == stage.epsilon
    assert "up to 8 pairs" in planned.describe("rho")


def test_candidates_leave_out_held_too_large_and_noise_capped_pairs():
    cliques = [("a", "b"), ("a", "b", "c"), ("a", "d")]
    sizes = {"a": 2, "b": 2, "c": 2, "d": 2, "e": 400}
    out = cross_candidates(list("abcde"), cliques, sizes, sigma=1.0, total=1000.0, cell_limit=10_000)
    assert out == [("a", "e"), ("b", "d"), ("b", "e"), ("c", "d"), ("c", "e"), ("d", "e")]
    # 800 cells at σ = 5: expected L1 noise 3,190 > N̂ = 1,000: capped
    assert cross_candidates(list("abcde"), cliques, sizes, 5.0, 1000.0, 10_000) == [("b", "d"), ("c", "d")]
    assert cross_candidates(list("abcde"), cliques, sizes, 1.0, 1000.0, 100) == [("b", "d"), ("c", "d")]
    assert pool_factor(45_000) == 10 and pool_factor(10_000_000) == 1


def test_one_row_moves_a_cross_score_by_at_most_one():
    generator = np.random.default_rng(11)
    cells = generator.integers(0, 12, size=5_000)
    weights = generator.random(5_000)
    exact = generator.integers(0, 60, size=12)
    before = _score(exact, cells, weights, 700.0, 3.0)
    for cell in range(12):
        for step in (1, -1):
            moved = exact + step * np.eye(12, dtype=np.int64)[cell]
            assert abs(_score(moved, cells, weights, 700.0, 3.0) - before) <= 1 + 1e-9
    # power: a score without that bound (the squared distance, as a least-squares residual) fails the same check
    table = weighted_table(cells, weights, 12)

    def squared(x: np.ndarray) -> float:
        return float(np.square(x - 700.0 * table).sum())

    assert max(abs(squared(exact + np.eye(12, dtype=np.int64)[c]) - squared(exact)) for c in range(12)) > 1


def test_cross_pairs_are_booked_before_they_are_drawn_follow_the_residual_and_replay(context):
    generator = np.random.default_rng(5)  # test data: d depends on a, the model (pool) has them independent
    rows = 4_000
    real = {"a": generator.integers(0, 2, size=rows), "b": generator.integers(0, 3, size=rows)}
    real["d"] = (real["a"] * 2 + generator.integers(0, 2, size=rows)) % 4
    pool = {c: generator.permutation(np.tile(v, 5)) for c, v in real.items()}  # same 1-ways, no dependence
    sizes = {"a": 2, "b": 3, "d": 4}
    candidates = [("a", "b"), ("a", "d"), ("b", "d")]
    exact = {p: np.bincount(pair_cells(real, p, sizes), minlength=sizes[p[0]] * sizes[p[1]]) for p in candidates}
    planned = plan_cross(PureBudget(Fraction(20)), 2)
    out = measure_cross(planned, candidates, exact, pool, sizes, float(rows), context, 1)
    assert out.pairs()[0] == ("a", "d")  # by far the largest residual (scores differ by thousands at ε = 2)
    queries = [q for _, q in charged_queries(context)]
    assert queries == ["cross pair 1", "cross pair(a,d)", "cross pair 2", f"cross pair({','.join(out.pairs()[1])})"]
    assert [r.query for r in out.records] == queries
    target = out.targets[0].reshape(2, 4)
    assert target[0, 2:].sum() < 0.02 and target[1, :2].sum() < 0.02  # the raked pool holds the dependence
    again = measure_cross(planned, candidates, exact, pool, sizes, float(rows), context, 1)
    assert again.pairs() == out.pairs() and len(charged_queries(context)) == 4  # replayed, not redrawn
    assert all(np.array_equal(x, y) for x, y in zip(again.targets, out.targets, strict=True))


def test_a_wide_candidate_list_rescored_only_near_the_last_pair_books_and_replays_the_same(context, monkeypatch):
    import dprelease.dp.measurement.cross as cross

    generator = np.random.default_rng(9)  # test data: six columns, d depends on a
    rows = 3_000
    real = {c: generator.integers(0, 3, size=rows) for c in "abcdef"}
    real["d"] = (real["a"] + generator.integers(0, 2, size=rows)) % 3
    pool = {c: generator.permutation(np.tile(v, 4)) for c, v in real.items()}
    sizes = dict.fromkeys("abcdef", 3)
    candidates = [(x, y) for i, x in enumerate("abcdef") for y in "abcdef"[i + 1:]]
    exact = {p: np.bincount(pair_cells(real, p, sizes), minlength=9) for p in candidates}
    planned = plan_cross(PureBudget(Fraction(20)), 3)
    calls: list[int] = []
    score = cross._score

    def counted(*args):
        calls.append(1)
        return score(*args)

    monkeypatch.setattr(cross, "RESCORE_ALL", 0)
    monkeypatch.setattr(cross, "_score", counted)
    out = measure_cross(planned, candidates, exact, pool, sizes, float(rows), context, 1)
    assert out.pairs()[0] == ("a", "d")
    touching = sum(1 for p in candidates if p != ("a", "d") and {"a", "d"} & set(p))
    # rounds 2 and 3 rescored only the pairs near the pair measured last (all of them: 15 + 14 + 13)
    assert 15 + touching < len(calls) < 15 + 14 + 13
    again = measure_cross(planned, candidates, exact, pool, sizes, float(rows), context, 1)
    assert again.pairs() == out.pairs() and len(charged_queries(context)) == 6
