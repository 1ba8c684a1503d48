"""Propose-test-release for the median (dp.statistics.ptr): lemmas by brute force, thresholds, booking."""

from __future__ import annotations

import itertools
import math
import re
from fractions import Fraction

import numpy as np
import pytest

from dprelease.dp.accounting.budget import ApproxBudget, PureBudget, ZCDPBudget
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.accounting.conversions import zcdp_from_approx_cks
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import LedgerError, ParameterError
from dprelease.dp.statistics.clipping import ClipBounds, Grid
from dprelease.dp.statistics.ptr import (
    PTRMedian,
    book_threshold,
    integer_threshold,
    median_code,
    pass_probability_at_distance_zero,
    ptr_threshold,
    run_ptr_median,
    stability_distance,
)
from tests.noise import SeededNoise, SpyNoise

GRID = Grid(ClipBounds(0, 4), half_steps=2)  # codes shifted to 0..4, step 1


def median(data: tuple[int, ...]) -> int:
    return sorted(data)[(len(data) + 1) // 2 - 1] if data else 0


def neighbours(data: tuple[int, ...]) -> set[tuple[int, ...]]:
    out = {tuple(sorted((*data, v))) for v in range(5)}
    out |= {tuple(sorted(data[:i] + data[i + 1:])) for i in range(len(data))}
    return out


def local_sensitivity(data: tuple[int, ...]) -> int:
    return max(abs(median(data) - median(other)) for other in neighbours(data))


def codes(data: tuple[int, ...]) -> np.ndarray:
    return np.asarray(data, dtype=np.int64) - GRID.half_steps


DATASETS = [tuple(sorted(c)) for size in range(0, 5) for c in itertools.combinations_with_replacement(range(5), size)]


@pytest.mark.parametrize("bound", [1, 2, 3])
def test_gamma_is_zero_when_local_sensitivity_exceeds_the_bound_and_bounds_every_ball(bound):
    for data in DATASETS:
        gamma = stability_distance(codes(data), GRID, bound, 10)
        if local_sensitivity(data) > bound:
            assert gamma == 0, data
        ball, frontier = {data}, {data}
        for _ in range(gamma):  # every dataset within distance gamma - 1 has LS <= bound
            assert all(local_sensitivity(other) <= bound for other in frontier), data
            frontier = {n for other in frontier for n in neighbours(other)} - ball
            ball |= frontier


@pytest.mark.parametrize("bound", [1, 2, 3])
def test_gamma_has_sensitivity_one(bound):
    for data in DATASETS:
        gamma = stability_distance(codes(data), GRID, bound, 10)
        for other in neighbours(data):
            assert abs(gamma - stability_distance(codes(other), GRID, bound, 10)) <= 1, (data, other)


def test_median_code_is_the_lower_median():
    assert median_code(codes((0, 1, 3, 4)), GRID) == 1 and median_code(codes((2,)), GRID) == 2
    assert median_code(codes(()), GRID) == 0


@pytest.mark.parametrize("delta", [Fraction(1, 10**3), Fraction(1, 10**6), Fraction(1, 10**9)])
@pytest.mark.parametrize("epsilon", [Fraction(1, 10), Fraction(1), Fraction(3)])
def test_threshold_is_the_smallest_integer_with_pass_probability_at_most_delta(epsilon, delta):
    mechanism = PTRMedian(GRID, 1.0, PureBudget(epsilon), PureBudget(Fraction(1)), delta)
    scale = mechanism.test_mechanism().scale()
    t = mechanism.threshold()
    assert pass_probability_at_distance_zero(scale, t) <= delta
    assert t == 0 or pass_probability_at_distance_zero(scale, t - 1) > delta
    assert t <= math.ceil(scale * math.log(1 / (2 * float(delta))))
    assert ptr_threshold(epsilon, delta) == pytest.approx(math.log(1 / (2 * float(delta))) / float(epsilon))


@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-9])
def test_the_book_threshold_passes_at_distance_zero_with_probability_about_sqrt_delta_over_8(delta):
    epsilon = Fraction(1, 2)
    continuous = 0.5 * math.exp(-float(epsilon) * book_threshold(epsilon, Fraction(delta)))
    assert continuous == pytest.approx(math.sqrt(delta / 8)) and continuous > 10 * delta
    assert 0.5 * math.exp(-float(epsilon) * ptr_threshold(epsilon, Fraction(delta))) == pytest.approx(delta)
    scale = 1 / float(epsilon)
    assert pass_probability_at_distance_zero(scale, book_threshold(epsilon, Fraction(delta))) > 5 * delta


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"proposed_bound": 0.0}, "PTRMedian: proposed_bound (0.0) must be a positive finite number"),
    ({"proposed_bound": float("inf")}, "PTRMedian: proposed_bound (inf) must be a positive finite number"),
    ({"delta": Fraction(0)}, "delta (0) must be in (0, 1)"),
    ({"test_budget": ZCDPBudget(Fraction(1))}, "PTRMedian: test_budget must be a PureBudget (epsilon)"),
])
def test_bad_arguments_are_refused(kwargs, message):
    args = {"grid": GRID, "proposed_bound": 1.0, "test_budget": PureBudget(Fraction(1)),
            "release_budget": PureBudget(Fraction(1)), "delta": Fraction(1, 10**6)} | kwargs
    with pytest.raises(ParameterError, match=re.escape(message)):
        PTRMedian(**args)


def test_privacy_loss_and_bound_in_grid_steps():
    mechanism = PTRMedian(Grid(ClipBounds(0, 100), half_steps=50), 5.0, PureBudget(Fraction(1, 2)),
                          PureBudget(Fraction(1, 2)), Fraction(1, 10**6))
    assert mechanism.bound_codes() == 5 and mechanism.release_mechanism().scale() == 10.0
    assert mechanism.privacy_loss() == ApproxBudget(Fraction(1), Fraction(1, 10**6))


@pytest.mark.parametrize("bound", [100.0, 1e5, 1e308])
def test_a_bound_beyond_the_grid_span_is_the_span(bound):
    """The spec takes any positive finite bound: 1e308 overflowed the release's scale after the test was booked."""
    mechanism = PTRMedian(Grid(ClipBounds(0, 100), half_steps=50), bound, PureBudget(Fraction(1, 2)),
                          PureBudget(Fraction(1, 2)), Fraction(1, 10**6))
    assert mechanism.bound_codes() == 100 and mechanism.release_mechanism().scale() == 200.0


@pytest.fixture
def ledger(tmp_path):
    with Ledger.open(tmp_path / "ledger.sqlite") as ledger:
        ledger.register("pop", "zcdp", zcdp_from_approx_cks(200, Fraction(1, 1000)), Fraction(1, 1000),
                        epsilon=Fraction(200))
        ledger.reserve("pop", "r1", ZCDPBudget(Fraction(50)), delta=Fraction(1, 10**5))
        yield ledger


def test_a_stable_median_is_released_booked_and_replayed(ledger):
    grid = Grid(ClipBounds(0, 100), half_steps=50)
    mechanism = PTRMedian(grid, 4.0, PureBudget(Fraction(1)), PureBudget(Fraction(1)), Fraction(1, 10**6))
    values = np.repeat(np.arange(0, 100, 2.0), 40)  # dense: the median is stable far beyond T
    result = run_ptr_median(values, mechanism, ReleaseContext(ledger, "r1", "zcdp", SeededNoise(1)), column="age")
    assert result.value is not None and abs(result.value - 48.0) < 30 and result.halfwidth is not None
    charges = ledger.charges(release_id="r1")
    assert [c.query for c in charges] == ["ptr test(median age)", "ptr release(median age)"]
    assert [c.delta for c in charges] == [Fraction(1, 10**6), 0] and charges[0].loss == Fraction(1, 2)
    assert ledger.status("pop").delta_spent == Fraction(1, 10**6)
    spy = SpyNoise()
    again = run_ptr_median(values, mechanism, ReleaseContext(ledger, "r1", "zcdp", spy), column="age")
    assert spy.calls == [] and again.value == result.value and len(ledger.charges(release_id="r1")) == 2


def test_an_unstable_median_is_refused_and_only_the_test_is_booked(ledger):
    mechanism = PTRMedian(GRID, 1.0, PureBudget(Fraction(1)), PureBudget(Fraction(1)), Fraction(1, 10**6))
    result = run_ptr_median(np.array([0.0, 0.0, 4.0, 4.0]), mechanism,
                            ReleaseContext(ledger, "r1", "zcdp", SeededNoise(2)), column="x")
    assert result.value is None and [c.query for c in ledger.charges(release_id="r1")] == ["ptr test(median x)"]


def test_a_pure_ledger_is_refused_before_anything_is_booked(tmp_path):
    with Ledger.open(tmp_path / "p.sqlite") as ledger:
        ledger.register("pop", "pure", PureBudget(Fraction(100)), Fraction(0))
        ledger.reserve("pop", "r1", PureBudget(Fraction(1)))
        mechanism = PTRMedian(GRID, 1.0, PureBudget(Fraction(1)), PureBudget(Fraction(1)), Fraction(1, 10**6))
        with pytest.raises(ParameterError, match="PTR is \\(epsilon, delta\\)-DP"):
            run_ptr_median([1.0], mechanism, ReleaseContext(ledger, "r1", "pure", SeededNoise(0)), column="x")
        assert ledger.charges(release_id="r1") == []


def test_delta_the_release_did_not_reserve_is_refused_before_anything_is_booked(tmp_path):
    with Ledger.open(tmp_path / "z.sqlite") as ledger:
        ledger.register("pop", "zcdp", zcdp_from_approx_cks(200, Fraction(1, 1000)), Fraction(1, 1000),
                        epsilon=Fraction(200))
        ledger.reserve("pop", "r1", ZCDPBudget(Fraction(1)))
        mechanism = PTRMedian(GRID, 1.0, PureBudget(Fraction(1)), PureBudget(Fraction(1)), Fraction(1, 10**6))
        with pytest.raises(LedgerError, match="exceeds the delta the release reserved"):
            run_ptr_median([1.0], mechanism, ReleaseContext(ledger, "r1", "zcdp", SeededNoise(0)), column="x")
        assert ledger.charges(release_id="r1") == []


def test_integer_threshold_at_small_scale():
    assert integer_threshold(1.0, Fraction(1, 2)) == 0
