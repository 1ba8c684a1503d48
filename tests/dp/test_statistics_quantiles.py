"""Quantiles by the exponential mechanism over intervals (dp.statistics.quantiles)."""

from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget
from dprelease.dp.accounting.charges import Chargeable, ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import ParameterError
from dprelease.dp.statistics.clipping import ClipBounds, Grid
from dprelease.dp.statistics.quantiles import (
    QuantileMechanism,
    interval_scores,
    measure_quantiles,
    quantile_intervals,
    quantile_mechanisms,
)
from tests.noise import SeededNoise


class SeededSelection(SeededNoise):
    """Seeded Gumbel / exponential report-noisy-max and uniform offsets: tests only."""

    def gumbel_argmax(self, scores, scale):
        return int(np.argmax(scores + self.rng.gumbel(0.0, scale, len(scores))))

    def exponential_argmax(self, scores, scale):
        return int(np.argmax(scores + self.rng.exponential(scale, len(scores))))

    def below(self, n):
        return int(self.rng.integers(n))


@pytest.fixture
def ledger(tmp_path):
    with Ledger.open(tmp_path / "ledger.sqlite") as ledger:
        ledger.register("pop", "pure", PureBudget(Fraction(100)), Fraction(0))
        ledger.reserve("pop", "r1", PureBudget(Fraction(50)))
        yield ledger


def brute_force(codes, q, scale, grid):
    """P(y) ∝ exp(u(y)/scale) over every grid point, u(y) = -dist(q n, [#{v<y}, #{v<=y}])."""
    v = np.asarray(codes) + grid.half_steps
    n = len(v)
    utility = []
    for y in range(grid.points):
        low, high = int(np.sum(v < y)), int(np.sum(v <= y))
        utility.append(-float(max(low - q * n, q * n - high, 0)))
    weights = np.exp((np.array(utility) - max(utility)) / scale)
    return weights / weights.sum()


GRID = Grid(ClipBounds(0, 10), half_steps=5)  # 11 grid points, step 1


@pytest.mark.parametrize("values", [[], [3.0], [2.0, 2.0, 2.0, 7.0], [0.0, 0.0, 10.0, 10.0, 5.0], [4.4, 4.6, 9.0]])
@pytest.mark.parametrize("q", [Fraction(1, 2), Fraction(1, 10), Fraction(3, 4)])
def test_the_run_sampler_has_the_law_of_the_one_step_mechanism_with_ties(values, q):
    mechanism = QuantileMechanism(GRID, q, PureBudget(Fraction(1)))
    codes = GRID.encode(values)
    assert np.allclose(mechanism.probabilities(codes), brute_force(codes, float(q), mechanism.scale(), GRID))


@pytest.mark.parametrize("level", [1e-300, 0.9999999999999999, 0.123456789012341])
def test_a_level_written_with_many_digits_is_scored_exactly_on_a_large_table(level):
    """Its denominator (10^300, 10^16, 10^15) times n passes int64: the scores must not overflow."""
    q = Fraction(repr(level))  # as the spec reads a level
    codes = GRID.encode(np.random.default_rng(1).uniform(0, 10, 20_000))
    mechanism = QuantileMechanism(GRID, q, PureBudget(Fraction(1)))
    assert np.allclose(mechanism.probabilities(codes), brute_force(codes, float(q), mechanism.scale(), GRID))
    runs = interval_scores(codes, q, scale=1.0, grid=GRID)
    exact = [-float(max(Fraction(int(b)) - q * len(codes), q * len(codes) - int(u), 0))
             for b, u in zip(runs.below, runs.upto, strict=True)]
    assert np.allclose(runs.scores - np.log(runs.widths), exact, rtol=1e-12, atol=0)  # no silent int64 wrap


@pytest.mark.parametrize("q", [Fraction(1, 2), Fraction(1, 5), Fraction(9, 10)])
def test_exact_privacy_loss_on_neighbours_is_within_epsilon(q):
    rng = np.random.default_rng(5)
    mechanism = QuantileMechanism(GRID, q, PureBudget(Fraction(1)), contributions=2)
    epsilon = float(mechanism.privacy_loss().epsilon)
    worst = 0.0
    for _ in range(200):
        base = rng.integers(0, 11, rng.integers(0, 8)).astype(float)
        added = np.r_[base, rng.integers(0, 11, 2).astype(float)]  # one unit of 2 rows
        p, p2 = (mechanism.probabilities(GRID.encode(d)) for d in (base, added))
        worst = max(worst, float(np.max(np.abs(np.log(p) - np.log(p2)))))
    assert worst <= epsilon + 1e-9
    assert worst > 0.5 * epsilon  # the bound is nearly reached: the sensitivity is not overstated by much


def test_sensitivity_loss_and_zcdp_conversion():
    median = QuantileMechanism(GRID, Fraction(1, 2), PureBudget(Fraction(1)))
    assert median.score_sensitivity() == Fraction(1, 2) and median.scale() == 1.0
    assert median.privacy_loss() == PureBudget(Fraction(1)) and median.zcdp_loss() == ZCDPBudget(Fraction(1, 8))
    decile = QuantileMechanism(GRID, "0.1", PureBudget(Fraction(1)), contributions=3)
    assert decile.score_sensitivity() == Fraction(27, 10)
    rho = QuantileMechanism(GRID, Fraction(1, 2), ZCDPBudget(Fraction(1, 8)))
    assert rho.zcdp_loss().rho <= Fraction(1, 8) and rho.privacy_loss().epsilon <= 1
    assert isinstance(median, Chargeable)


@pytest.mark.parametrize(("levels", "message"), [
    ([0], "quantile (0) must lie strictly between 0 and 1"),
    ([0.5, 1], "quantile (1) must lie strictly between 0 and 1"),
    ([1.5], "quantile (1.5) must lie strictly between 0 and 1"),
    ([], "quantiles must name at least one level"),
    ([0.5, "1/2"], "quantiles must not repeat a level"),
])
def test_bad_levels_are_refused_before_any_budget_is_booked(levels, message, ledger):
    with pytest.raises(ParameterError, match=re.escape(message)):
        quantile_mechanisms(GRID, levels, PureBudget(Fraction(1)))
    assert ledger.charges(release_id="r1") == []


def test_budget_split_is_exact():
    mechanisms = quantile_mechanisms(GRID, [0.25, 0.5, 0.75], PureBudget(Fraction(3, 2)))
    assert sum((m.privacy_loss().epsilon for m in mechanisms), Fraction(0)) == Fraction(3, 2)


def test_measure_books_each_level_replays_and_sorts(ledger):
    noise = SeededSelection(3)
    context = ReleaseContext(ledger, "r1", "pure", noise)
    values = np.r_[np.full(50, 2.0), np.full(50, 8.0), np.nan]
    mechanisms = quantile_mechanisms(GRID, [0.75, 0.25, 0.5], PureBudget(Fraction(30)))
    released = measure_quantiles(values, mechanisms, context, column="age", group="F", uniform=noise)
    assert released.levels == (Fraction(1, 4), Fraction(1, 2), Fraction(3, 4))
    assert list(released.values) == sorted(released.values)
    assert released.values[0] == 2.0 and released.values[2] == 8.0 and 2.0 <= released.median() <= 8.0
    charges = ledger.charges(release_id="r1")
    assert [c.query for c in charges] == ["quantile 3/4(age | F)", "quantile 1/4(age | F)", "quantile 1/2(age | F)"]
    booked = sum((c.loss for c in charges), Fraction(0))
    assert booked == sum((m.privacy_loss().epsilon for m in mechanisms), Fraction(0)) and booked <= 30

    class Refuse(SeededSelection):
        def gumbel_argmax(self, scores, scale):
            raise AssertionError("a replay must not draw")

    again = measure_quantiles(values, mechanisms, ReleaseContext(ledger, "r1", "pure", Refuse()), column="age",
                              group="F", uniform=noise)
    assert again.values == released.values and len(ledger.charges(release_id="r1")) == 3


def test_the_median_must_have_been_measured(ledger):
    context = ReleaseContext(ledger, "r1", "pure", SeededSelection(0))
    released = measure_quantiles([1.0, 2.0], quantile_mechanisms(GRID, [0.25], PureBudget(Fraction(1))), context,
                                 column="x", uniform=SeededSelection(1))
    with pytest.raises(ParameterError, match=re.escape("x: the median (0.5) was not among the measured quantiles")):
        released.median()


def test_rank_error_bound_is_the_closed_form():
    mechanism = QuantileMechanism(GRID, Fraction(1, 2), PureBudget(Fraction(1)))
    assert mechanism.rank_error_bound() == pytest.approx(1.0 * np.log(11 / 0.05))
    codes = GRID.encode(np.arange(11.0).repeat(3))
    p = mechanism.probabilities(codes)
    runs = interval_scores(codes, Fraction(1, 2), scale=1.0, grid=GRID)
    utility = runs.scores - np.log(runs.widths)
    per_point = np.repeat(utility, runs.widths)
    assert p[per_point < per_point.max() - mechanism.rank_error_bound()].sum() <= 0.05


def test_intervals_contain_the_release_and_respect_the_bounds(ledger):
    context = ReleaseContext(ledger, "r1", "pure", SeededSelection(2))
    values = np.random.default_rng(0).uniform(0, 10, 500)
    released = measure_quantiles(values, quantile_mechanisms(GRID, [0.25, 0.5, 0.75], PureBudget(Fraction(1))),
                                 context, column="x", uniform=SeededSelection(4))
    for (low, high), value in zip(quantile_intervals(released, 500), released.values, strict=True):
        assert 0 <= low <= value <= high <= 10


FINE = Grid(ClipBounds(0, 100))  # the release's grid: 2049 points


@pytest.mark.parametrize(("values", "count"), [
    ([42.0] * 2000, 1955),  # a spike: the whole law on one grid point
    ([], -19),  # an empty group: the released values are noise
    (list(np.linspace(0, 100, 2000)), 3),  # a noisy count far from the rows
    ([0.0] * 1000 + [100.0] * 1000, 2000),  # all rows at the bounds
])
def test_hostile_intervals_are_ordered_hold_the_release_and_stay_in_the_bounds(ledger, values, count):
    for seed in range(8):
        context = ReleaseContext(ledger, "r1", "pure", SeededSelection(seed))
        mechanisms = quantile_mechanisms(FINE, [0.1, 0.5, 0.9], PureBudget(Fraction(1, 20)))
        released = measure_quantiles(values, mechanisms, context, column=f"x{seed}-{len(values)}-{count}",
                                     uniform=SeededSelection(seed))
        for (low, high), value in zip(quantile_intervals(released, max(1.0, count)), released.values, strict=True):
            assert 0 <= low <= value <= high <= 100
