"""Sample-and-aggregate (dp.statistics.aggregate): registry, sensitivity, booking, replay, accuracy."""

from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import ParameterError
from dprelease.dp.mechanisms.noise import DiscreteGaussian, DiscreteLaplace
from dprelease.dp.statistics.aggregate import SampleAndAggregate, measure_aggregate, secure_labels
from dprelease.dp.statistics.clipping import ClipBounds
from tests.noise import SeededNoise, SpyNoise

RANGE = ClipBounds(-5.0, 5.0)


@pytest.fixture
def context(tmp_path):
    with Ledger.open(tmp_path / "ledger.sqlite") as ledger:
        ledger.register("pop", "pure", PureBudget(Fraction(100)), Fraction(0))
        ledger.reserve("pop", "r1", PureBudget(Fraction(50)))
        yield ReleaseContext(ledger, "r1", "pure", SeededNoise(3))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"function": "mean"}, "SampleAndAggregate: function ('mean') must be registered: ['ratio', 'slope']"),
    ({"chunks": 1}, "SampleAndAggregate: chunks (1) must be at least 2"),
    ({"chunks": 0}, "SampleAndAggregate: chunks (0) must be positive"),
    ({"contributions": 0}, "SampleAndAggregate: contributions (0) must be positive"),
])
def test_bad_plans_are_refused_before_any_budget_is_booked(kwargs, message, context):
    args = {"function": "slope", "chunks": 10, "output_range": RANGE, "budget": PureBudget(Fraction(1))} | kwargs
    with pytest.raises(ParameterError, match=re.escape(message)):
        SampleAndAggregate(**args)
    assert context.ledger.charges(release_id="r1") == []


def test_sensitivity_is_twice_the_half_steps_per_contribution():
    plan = SampleAndAggregate("ratio", 10, RANGE, PureBudget(Fraction(1)), half_steps=8, contributions=2)
    assert isinstance(plan.mechanism(), DiscreteLaplace) and plan.mechanism().l1_sensitivity == 32
    assert plan.privacy_loss().epsilon <= 1
    gauss = SampleAndAggregate("ratio", 10, RANGE, ZCDPBudget(Fraction(1, 2)), half_steps=8)
    assert isinstance(gauss.mechanism(), DiscreteGaussian) and gauss.mechanism().l2_sensitivity == 16


def test_chunk_results_are_clamped_and_undefined_ones_count_as_the_centre():
    plan = SampleAndAggregate("slope", 3, RANGE, PureBudget(Fraction(1)), half_steps=5)
    rows = np.array([[0, 0], [1, 100], [0, 0], [1, 1], [2, 2]], dtype=float)
    labels = np.array([0, 0, 1, 1, 1])  # chunk 0: slope 100 -> 5; chunk 1: slope 1; chunk 2: empty -> centre
    assert plan.chunk_codes(rows, labels).tolist() == [5, 1, 0]


def test_secure_labels_are_in_range():
    labels = secure_labels(1000, 7)
    assert labels.min() >= 0 and labels.max() <= 6 and len(set(labels.tolist())) == 7


def test_measure_books_once_replays_and_estimates_a_slope(context):
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 10, 20_000)
    rows = np.c_[x, 2 * x + rng.normal(0, 1, len(x))]
    plan = SampleAndAggregate("slope", 100, RANGE, PureBudget(Fraction(1)))
    fixed = lambda n, k: np.arange(n) % k  # noqa: E731 - a deterministic partition for the test
    result = measure_aggregate(rows, plan, context, name="y ~ x", labels=fixed)
    assert abs(result.estimate - 2.0) < 0.3 and result.low <= result.estimate <= result.high
    charges = context.ledger.charges(release_id="r1")
    assert [c.query for c in charges] == ["sample and aggregate slope(y ~ x), k=100"]
    spy = SpyNoise()
    again = measure_aggregate(rows, plan, ReleaseContext(context.ledger, "r1", "pure", spy), name="y ~ x")
    assert spy.calls == [] and again.estimate == result.estimate


def test_rows_must_have_two_columns(context):
    plan = SampleAndAggregate("ratio", 4, RANGE, PureBudget(Fraction(1)))
    with pytest.raises(ParameterError, match=re.escape("rows (of shape (3, 1)) must have two columns (x, y)")):
        measure_aggregate(np.ones((3, 1)), plan, context, name="r")
    assert context.ledger.charges(release_id="r1") == []
