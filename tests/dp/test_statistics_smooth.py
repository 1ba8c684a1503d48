"""The smooth-sensitivity median (dp.statistics.smooth): smoothness by brute force, parameters, booking, replay."""

from __future__ import annotations

import itertools
import math
import re
from fractions import Fraction

import numpy as np
import pytest

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.accounting.conversions import zcdp_from_approx_cks
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import ParameterError
from dprelease.dp.statistics.clipping import ClipBounds, Grid
from dprelease.dp.statistics.smooth import SmoothMedian, measure_smooth_median, smooth_sensitivity
from tests.noise import SeededNoise, SpyNoise

GRID = Grid(ClipBounds(0, 6), half_steps=3)  # codes shifted to 0..6, step 1


def median(data: tuple[int, ...]) -> int:
    return sorted(data)[(len(data) + 1) // 2 - 1] if data else 0


def neighbours(data: tuple[int, ...]) -> set[tuple[int, ...]]:
    out = {tuple(sorted((*data, v))) for v in range(7)}
    return out | {tuple(sorted(data[:i] + data[i + 1:])) for i in range(len(data))}


def codes(data: tuple[int, ...]) -> np.ndarray:
    return np.asarray(data, dtype=np.int64) - GRID.half_steps


DATASETS = [tuple(sorted(c)) for size in range(0, 6) for c in itertools.combinations_with_replacement(range(7), size)]


@pytest.mark.parametrize("beta", [0.05, 0.3, 1.0])
def test_smooth_sensitivity_bounds_the_local_one_and_is_beta_smooth(beta):
    values = {data: smooth_sensitivity(codes(data), GRID, beta) for data in DATASETS}
    for data in DATASETS:
        local = max(abs(median(data) - median(other)) for other in neighbours(data))
        assert values[data] >= local, data
        for other in neighbours(data):
            if other in values:
                assert values[data] <= math.exp(beta) * values[other] * (1 + 1e-9), (data, other)


def test_smooth_sensitivity_is_the_maximum_over_all_distances():
    data = (0, 3, 3, 3, 6)
    beta = 0.5
    from dprelease.dp.statistics.ptr import spans  # the spans A(k), here over every k up to n + 1
    span = spans(codes(data), GRID)
    exact = max(math.exp(-beta * k) * span(k) for k in range(len(data) + 2))
    assert smooth_sensitivity(codes(data), GRID, beta) == pytest.approx(exact, rel=1e-11)


@pytest.mark.parametrize("delta", [Fraction(1, 10**3), Fraction(1, 10**6), Fraction(1, 10**12)])
@pytest.mark.parametrize("epsilon", [Fraction(1, 10), Fraction(1), Fraction(4)])
def test_the_booked_loss_is_the_bound_of_the_parameters_and_fits_the_budget(epsilon, delta):
    mechanism = SmoothMedian(GRID, PureBudget(epsilon), delta)
    beta, factor = mechanism.beta(), mechanism.scale()
    bound = beta + 1 / factor + math.expm1(beta) * math.log(2 / float(delta))
    assert bound <= float(mechanism.privacy_loss().epsilon) <= float(epsilon)
    assert float(mechanism.privacy_loss().epsilon) == pytest.approx(float(epsilon), rel=1e-2)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"delta": Fraction(0)}, "delta (0) must be in (0, 1)"),
    ({"budget": ZCDPBudget(Fraction(1))}, "SmoothMedian: budget must be a PureBudget (epsilon)"),
])
def test_bad_arguments_are_refused(kwargs, message):
    args = {"grid": GRID, "budget": PureBudget(Fraction(1)), "delta": Fraction(1, 10**6), **kwargs}
    with pytest.raises(ParameterError, match=re.escape(message)):
        SmoothMedian(**args)


def test_the_noise_scale_is_the_factor_times_the_smooth_sensitivity():
    mechanism = SmoothMedian(Grid(ClipBounds(0, 100), half_steps=50), PureBudget(Fraction(1)), Fraction(1, 10**6))
    values = mechanism.grid.encode(np.r_[np.zeros(20), np.full(5, 50.0), np.full(20, 100.0)])
    spy = SpyNoise()
    assert mechanism.draw(values, spy) == 50
    expected = mechanism.scale() * smooth_sensitivity(values, mechanism.grid, mechanism.beta())
    assert spy.calls == [("laplace", 1, pytest.approx(expected, rel=1e-12))] and spy.calls[0][2] >= expected


@pytest.fixture
def ledger(tmp_path):
    with Ledger.open(tmp_path / "ledger.sqlite") as book:
        book.register("pop", "zcdp", zcdp_from_approx_cks(20, Fraction(1, 1000)), Fraction(1, 1000),
                      epsilon=Fraction(20))
        book.reserve("pop", "r1", ZCDPBudget(Fraction(5)), delta=Fraction(1, 10**5))
        yield book


def test_the_median_is_booked_with_its_delta_and_replayed_and_no_private_scale_is_recorded(ledger):
    mechanism = SmoothMedian(Grid(ClipBounds(0, 100), half_steps=512), PureBudget(Fraction(1)), Fraction(1, 10**6))
    values = np.random.default_rng(3).uniform(20, 80, 2000)
    value, record = measure_smooth_median(values, mechanism, ReleaseContext(ledger, "r1", "zcdp", SeededNoise(1)),
                                          column="age")
    assert abs(value - float(np.median(values))) < 10
    [charge] = ledger.charges(release_id="r1")
    assert charge.query == "smooth median(age)" and charge.delta == Fraction(1, 10**6)
    assert charge.loss == mechanism.privacy_loss().epsilon ** 2 / 2
    assert float(charge.scale) == mechanism.scale() and record.std is None and record.ci95 is None
    spy = SpyNoise()
    again, _ = measure_smooth_median(values, mechanism, ReleaseContext(ledger, "r1", "zcdp", spy), column="age")
    assert spy.calls == [] and again == value and len(ledger.charges(release_id="r1")) == 1


def test_a_pure_ledger_is_refused_before_anything_is_booked(tmp_path):
    with Ledger.open(tmp_path / "p.sqlite") as book:
        book.register("pop", "pure", PureBudget(Fraction(10)), Fraction(0))
        book.reserve("pop", "r1", PureBudget(Fraction(1)))
        mechanism = SmoothMedian(GRID, PureBudget(Fraction(1)), Fraction(1, 10**6))
        with pytest.raises(ParameterError, match=re.escape("is (epsilon, delta)-DP")):
            measure_smooth_median([1.0], mechanism, ReleaseContext(book, "r1", "pure", SeededNoise(0)), column="x")
        assert book.charges(release_id="r1") == []


def test_a_refused_ptr_median_publishes_only_its_outcome(ledger):
    from dprelease.dp.statistics.medians import measure_median
    grid = Grid(ClipBounds(0, 100), half_steps=50)
    unstable = np.r_[np.zeros(20), np.full(21, 100.0)]  # γ = 0: the test passes with probability <= δ
    result = measure_median(unstable, grid, "ptr", ZCDPBudget(Fraction(1, 2)), Fraction(1, 10**6),
                            ReleaseContext(ledger, "r1", "zcdp", SeededNoise(4)), column="x", proposed_bound=1.0)
    assert (result.value, result.low, result.high, result.outcome) == (None, None, None, "refused")
    assert [r.query for r in result.records] == ["ptr test(median x)"] and result.records[0].delta == Fraction(1, 10**6)
    with pytest.raises(ParameterError, match="must be zCDP"):
        measure_median(unstable, grid, "smooth", PureBudget(Fraction(1)), Fraction(1, 10**6),
                       ReleaseContext(ledger, "r1", "zcdp", SeededNoise(4)), column="x")
