from __future__ import annotations

import json
import re
from contextlib import ExitStack
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import BudgetExceededError, ParameterError
from dprelease.dp.mechanisms.range_queries import (
    NoisyRangeCounts,
    overlap_depth,
    range_counts,
    range_query_answers,
)
from dprelease.dp.mechanisms.svt import (
    AboveThreshold,
    MonotoneAboveThreshold,
    Sparse,
    run_above_threshold,
    run_sparse,
)
from tests.noise import SeededNoise, SpyNoise


@pytest.fixture
def context(tmp_path):
    def make(noise, cap=Fraction(10)):
        ledger = stack.enter_context(Ledger.open(tmp_path / "ledger.sqlite"))
        ledger.register("pop", "pure", PureBudget(cap), Fraction(0))
        ledger.reserve("pop", "r", PureBudget(cap))
        return ReleaseContext(ledger, "r", "pure", noise)

    with ExitStack() as stack:
        yield make


# -- Sparse: parameters and accounting ------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"l1_sensitivity": 0}, "Sparse: l1_sensitivity (0) must be positive"),
        ({"l1_sensitivity": -2}, "Sparse: l1_sensitivity (-2) must be positive"),
        ({"l1_sensitivity": 1.5}, "Sparse: l1_sensitivity (1.5) must be a positive integer"),
        ({"l1_sensitivity": True}, "Sparse: l1_sensitivity (True) must be a positive integer"),
        ({"cutoff": 0}, "Sparse: cutoff (0) must be positive"),
        ({"cutoff": 2.0}, "Sparse: cutoff (2.0) must be a positive integer"),
        ({"cutoff": False}, "Sparse: cutoff (False) must be a positive integer"),
        ({"budget": ZCDPBudget(Fraction(1))}, "Sparse: budget must be a PureBudget (epsilon)"),
    ],
)
def test_rejects_bad_arguments(kwargs, message):
    arguments = {"l1_sensitivity": 1, "budget": PureBudget(Fraction(1)), "cutoff": 2, **kwargs}
    with pytest.raises(ParameterError, match=re.escape(message)):
        Sparse(**arguments)


def test_hand_computed_scales_and_loss():
    sparse = Sparse(l1_sensitivity=2, budget=PureBudget(Fraction(1, 2)), cutoff=3)
    # Each of the 3 rounds has epsilon 1/6: threshold 2*2/(1/6) = 24, queries 4*2/(1/6) = 48.
    assert (sparse.threshold_scale(), sparse.query_scale(), sparse.scale()) == (24.0, 48.0, 48.0)
    assert sparse.privacy_loss() == PureBudget(Fraction(1, 2))
    assert sparse.sensitivity_text() == "L1=2 per query, cutoff 3"


@pytest.mark.parametrize("epsilon", [Fraction(1, 3), Fraction(7, 10), Fraction(1, 1000), Fraction(5)])
@pytest.mark.parametrize("sensitivity", [1, 3])
@pytest.mark.parametrize("cutoff", [1, 2, 7])
def test_loss_never_exceeds_budget(epsilon, sensitivity, cutoff):
    sparse = Sparse(sensitivity, PureBudget(epsilon), cutoff)
    assert sparse.privacy_loss().epsilon <= epsilon
    assert Fraction(sparse.threshold_scale()) >= Fraction(2 * cutoff * sensitivity) / epsilon
    assert Fraction(sparse.query_scale()) >= Fraction(4 * cutoff * sensitivity) / epsilon


def test_cutoff_one_is_above_threshold():
    sparse, single = Sparse(1, PureBudget(Fraction(1)), 1), AboveThreshold(1, PureBudget(Fraction(1)))
    assert sparse.privacy_loss() == single.privacy_loss()
    for seed in range(30):
        answers = np.random.default_rng(seed).integers(0, 12, size=15)
        hit = single.run(answers, 6, SeededNoise(seed))
        assert sparse.run(answers, 6, SeededNoise(seed)) == ([] if hit is None else [hit])


# -- Sparse: running ------------------------------------------------------------------------


def test_without_noise_reports_the_first_c_above_threshold():
    sparse = Sparse(1, PureBudget(Fraction(1)), 3)
    spy = SpyNoise()  # returns values unchanged
    assert sparse.run(np.array([9, 0, 9, 9, 0, 9, 9]), 5, spy) == [0, 2, 3]
    assert sparse.run(np.array([0, 0, 9]), 5, spy) == [2]
    assert sparse.run(np.array([0, 0]), 5, spy) == []


def test_draws_threshold_then_all_queries_then_one_threshold_per_later_round():
    sparse = Sparse(1, PureBudget(Fraction(1)), 3)
    spy = SpyNoise()
    sparse.run(np.array([9, 0, 9, 9, 0, 9, 9]), 5, spy)
    assert spy.calls == [("laplace", 1, 6.0), ("laplace", 7, 12.0), ("laplace", 1, 6.0), ("laplace", 1, 6.0)]
    spy.calls.clear()
    sparse.run(np.array([0, 9]), 5, spy)  # a positive on the last query: no round after it
    assert spy.calls == [("laplace", 1, 6.0), ("laplace", 2, 12.0)]


def test_returns_indices_only_and_does_not_mutate_input():
    answers = np.array([3, 8, 1, 9], dtype=np.int64)
    copy = answers.copy()
    out = Sparse(1, PureBudget(Fraction(1)), 2).run(answers, 5, SeededNoise(1))
    assert isinstance(out, list) and all(type(i) is int for i in out)
    assert np.array_equal(answers, copy)


def test_empty_answers():
    assert Sparse(1, PureBudget(Fraction(1)), 2).run(np.zeros(0, dtype=np.int64), 0, SeededNoise(0)) == []
    hits = Sparse(1, PureBudget(Fraction(1)), 2).run_batch(np.zeros((3, 0), dtype=np.int64), 0, SeededNoise(0))
    assert hits.shape == (3, 2) and (hits == -1).all()


@pytest.mark.parametrize(
    ("answers", "threshold", "message"),
    [
        (np.array([1.0, 2.0]), 1, "Sparse: answers (of dtype float64) must be integers"),
        (np.array([[1, 2]]), 1, "Sparse: answers (of shape (1, 2)) must be a vector"),
        (np.array([1, 2]), 1.5, "Sparse: threshold (1.5) must be an integer"),
        (np.array([1, 2]), True, "Sparse: threshold (True) must be an integer"),
    ],
)
def test_rejects_non_integer_answers_and_thresholds(answers, threshold, message):
    with pytest.raises(ParameterError, match=re.escape(message)):
        Sparse(1, PureBudget(Fraction(1)), 2).run(answers, threshold, SpyNoise())


@settings(max_examples=200, deadline=None)
@given(
    answers=st.lists(st.integers(-20, 20), max_size=30),
    threshold=st.integers(-10, 10),
    cutoff=st.integers(1, 5),
    seed=st.integers(0, 2**32 - 1),
)
def test_at_most_c_increasing_indices_in_range(answers, threshold, cutoff, seed):
    out = Sparse(1, PureBudget(Fraction(1, 2)), cutoff).run(np.asarray(answers, dtype=np.int64), threshold,
                                                            SeededNoise(seed))
    assert len(out) <= cutoff
    assert all(0 <= i < len(answers) for i in out)
    assert out == sorted(set(out))


def test_batch_rows_are_independent_runs_of_the_same_scan():
    sparse = Sparse(1, PureBudget(Fraction(2)), 2)
    answers = np.tile(np.array([0, 5, 0, 5, 5], dtype=np.int64), (4000, 1))
    hits = sparse.run_batch(answers, 3, SeededNoise(5))
    assert hits.shape == (4000, 2) and hits.dtype == np.int64
    assert len({tuple(row) for row in hits.tolist()}) > 5  # rows do not share noise
    assert ((hits[:, 1] == -1) | (hits[:, 1] > hits[:, 0])).all() and (hits[hits[:, 0] == -1, 1] == -1).all()


# -- run_sparse: charge first, seal, replay -------------------------------------------------


def test_run_sparse_charges_before_drawing(context):
    spy = SpyNoise()
    ctx = context(spy, cap=Fraction(1))
    with pytest.raises(BudgetExceededError, match="exceeds the reservation"):
        run_sparse(Sparse(1, PureBudget(Fraction(2)), 2), np.array([1, 2]), 0, ctx, stage="s", query="q")
    assert spy.calls == []
    assert ctx.ledger.charges() == []


def test_run_sparse_checks_arguments_before_charging(context):
    spy = SpyNoise()
    ctx = context(spy)
    with pytest.raises(ParameterError, match="threshold"):
        run_sparse(Sparse(1, PureBudget(Fraction(1)), 2), np.array([1, 2]), 0.5, ctx, stage="s", query="q")
    with pytest.raises(ParameterError, match="integers"):
        run_sparse(Sparse(1, PureBudget(Fraction(1)), 2), np.array([1.5]), 0, ctx, stage="s", query="q")
    assert spy.calls == [] and ctx.ledger.charges() == []


def test_run_sparse_books_the_loss_and_seals_indices_only(context):
    spy = SpyNoise(SeededNoise(2))
    ctx = context(spy)
    sparse = Sparse(1, PureBudget(Fraction(1, 2)), 2)
    indices, record = run_sparse(sparse, np.array([0, 500, 0, 600, 700]), 250, ctx, stage="bounds", query="q")
    assert indices == [1, 3]
    [booked] = ctx.ledger.charges()
    assert (booked.loss, booked.mechanism) == (Fraction(1, 2), sparse.name)
    assert booked.sensitivity == sparse.sensitivity_text()
    assert record.loss == PureBudget(Fraction(1, 2)) and record.std is None and record.cells == 5
    payload = json.loads(ctx.ledger.sealed("r", "bounds/q"))
    assert set(payload) == {"measurement", "indices"} and payload["indices"] == [1, 3]
    # A re-run of the same release replays the sealed outcome: no new charge, no new draw.
    draws = len(spy.calls)
    again, _ = run_sparse(sparse, np.array([0, 500, 0, 600, 700]), 250, ctx, stage="bounds", query="q")
    assert again == [1, 3] and len(ctx.ledger.charges()) == 1 and len(spy.calls) == draws


# -- range queries --------------------------------------------------------------------------


def test_range_counts_and_overlap_depth():
    values = np.array([np.nan, -np.inf, 0.0, 1.0, 1.0, 2.5, np.inf])
    assert range_counts(values, [(0, 1), (1, 2), (-np.inf, 0), (0, np.inf), (3, 4)]).tolist() == [1, 2, 1, 4, 0]
    assert overlap_depth([(0, 1), (1, 2)]) == 1
    assert overlap_depth([(0, 4), (1, 2), (1.5, 3), (3.5, 5)]) == 3
    assert overlap_depth([(0, 1)] * 4) == 4


@pytest.mark.parametrize(
    ("ranges", "message"),
    [
        ([], "range_query_answers: ranges must not be empty"),
        ([(0, 1), (2, 2)], "range_query_answers: ranges[1] (2, 2) must have low below high"),
        ([(0, float("nan"))], "range_query_answers: ranges[0] (0, nan) must have low below high"),
        ([(0, 1, 2)], "range_query_answers: ranges[0] must be a pair of numbers (low, high)"),
    ],
)
def test_range_queries_reject_bad_ranges_before_charging(context, ranges, message):
    ctx = context(SpyNoise())
    with pytest.raises(ParameterError, match=re.escape(message)):
        range_query_answers(np.array([1.0]), ranges, 1, PureBudget(Fraction(1)), 2, ctx, stage="s", query="age")
    assert ctx.ledger.charges() == []


def test_range_queries_select_then_measure_with_half_the_budget_each(context):
    spy = SpyNoise()  # no noise: the selection is the first c ranges at or above the threshold
    ctx = context(spy)
    values = np.repeat([20.0, 30.0, 40.0, 50.0], [5, 50, 3, 80])
    ranges = [(20, 30), (30, 40), (40, 50), (50, 60), (60, 70)]
    out = range_query_answers(values, ranges, 10, PureBudget(Fraction(1)), 3, ctx, stage="ranges", query="age")
    assert isinstance(out, NoisyRangeCounts)
    assert out.indices == (1, 3) and out.counts.tolist() == [50, 80]
    # Disjoint ranges: the selected counts have L1 sensitivity 1, measured at epsilon 1/2, scale 2.
    assert out.scale == 2.0
    select, counts = ctx.ledger.charges()
    assert (select.query, select.loss, select.mechanism) == ("age: select", Fraction(1, 2), Sparse.name)
    assert (counts.query, counts.loss, counts.sensitivity) == ("age: counts", Fraction(1, 2), "L1=1")
    # Sparse at epsilon 1/2 with c = 3: threshold scale 2*3/(1/2) = 12, queries 24.
    assert spy.calls[:2] == [("laplace", 1, 12.0), ("laplace", 5, 24.0)]
    assert spy.calls[-1] == ("laplace", 2, 2.0)


def test_overlapping_selected_ranges_are_measured_at_their_overlap_depth(context):
    ctx = context(SpyNoise())
    values = np.full(100, 5.0)
    out = range_query_answers(values, [(0, 10), (4, 6), (5, 6), (20, 30)], 10, PureBudget(Fraction(1)), 3, ctx,
                              stage="ranges", query="x")
    assert out.indices == (0, 1, 2)
    assert out.measurements[1].sensitivity == "L1=3" and out.scale == 6.0  # 3 / (1/2); the book's 2c/ε is 6 too


def test_nothing_selected_charges_only_the_selection(context):
    ctx = context(SpyNoise())
    out = range_query_answers(np.array([1.0, 2.0]), [(0, 10)], 50, PureBudget(Fraction(1)), 2, ctx,
                              stage="ranges", query="x")
    assert out.indices == () and out.counts.shape == (0,) and out.scale is None
    assert [c.loss for c in ctx.ledger.charges()] == [Fraction(1, 2)]


def test_range_queries_with_noise_answer_at_most_c(context):
    ctx = context(SeededNoise(4))
    values = np.random.default_rng(0).integers(17, 90, size=5000).astype(float)
    ranges = [(a, a + 10) for a in range(0, 100, 5)]
    out = range_query_answers(values, ranges, 400, PureBudget(Fraction(1)), 4, ctx, stage="ranges", query="age")
    assert len(out.indices) <= 4 and len(out.counts) == len(out.indices)
    assert sum(c.loss for c in ctx.ledger.charges()) <= Fraction(1)


# -- monotone variant -----------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [Fraction(1, 3), Fraction(7, 10), Fraction(2)])
@pytest.mark.parametrize("sensitivity", [1, 3])
def test_monotone_scales_and_loss(epsilon, sensitivity):
    m = MonotoneAboveThreshold(sensitivity, PureBudget(epsilon))
    assert Fraction(m.threshold_scale()) >= 2 * sensitivity / epsilon
    assert Fraction(m.query_scale()) >= 2 * sensitivity / epsilon
    assert m.privacy_loss().epsilon <= epsilon
    assert m.sensitivity_text() == f"L1={sensitivity} per query, monotone"


def test_monotone_hand_computed_and_charged(context):
    m = MonotoneAboveThreshold(1, PureBudget(Fraction(1, 2)))
    assert (m.threshold_scale(), m.query_scale()) == (4.0, 4.0)
    assert m.privacy_loss() == PureBudget(Fraction(1, 2))  # 1/4 + 1/4
    spy = SpyNoise()
    ctx = context(spy)
    hit, _ = run_above_threshold(m, np.array([0, 3, 9]), 5, ctx, stage="bounds", query="q")
    assert hit == 2 and spy.calls == [("laplace", 1, 4.0), ("laplace", 3, 4.0)]
    [booked] = ctx.ledger.charges()
    assert (booked.loss, booked.mechanism) == (Fraction(1, 2), MonotoneAboveThreshold.name)
