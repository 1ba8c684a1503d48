"""A mean without public bounds (dp.statistics.means): grid offset, budget split, selections, booking, replay."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import ParameterError
from dprelease.dp.measurement.bounds import geometric_grid, tail_counts
from dprelease.dp.mechanisms.random import secure_noise
from dprelease.dp.mechanisms.selection import ExponentialMechanism, MonotoneExponentialMechanism
from dprelease.dp.statistics.clipping import ClipBounds, Grid
from dprelease.dp.statistics.means import (
    MEAN_HALF_STEPS,
    MEAN_SHARES,
    bound_scores,
    mean_grid,
    mean_weights,
    measure_svt_moments,
    select_mean_bounds,
    split_mean_budget,
)
from dprelease.dp.statistics.moments import MomentsMechanism, NoisyMoments
from tests.noise import SeededNoise


@pytest.fixture
def ledger(tmp_path):
    with Ledger.open(tmp_path / "ledger.sqlite") as book:
        book.register("pop", "pure", PureBudget(Fraction(100)), Fraction(0))
        book.reserve("pop", "r1", PureBudget(Fraction(50)))
        yield book


def test_an_offset_grid_encodes_within_half_steps_around_the_offset():
    grid = Grid(ClipBounds(0.0, 100.0), half_steps=10, offset=20.0)
    assert grid.centre == 20.0 and grid.step == 8.0  # max(100 - 20, 20 - 0) / 10
    codes = grid.encode(np.array([-5.0, 0.0, 20.0, 100.0, 1e9]))
    assert codes.tolist() == [-2, -2, 0, 10, 10] and np.abs(codes).max() <= grid.half_steps
    assert grid.decode(codes).tolist() == [4.0, 4.0, 20.0, 100.0, 100.0]
    assert Grid(ClipBounds(0.0, 100.0), half_steps=10).centre == 50.0  # no offset: the midpoint, as before
    with pytest.raises(ParameterError, match="offset"):
        Grid(ClipBounds(0.0, 1.0), offset=2.0)


def test_grids_and_shares():
    assert geometric_grid(0, 16) == (0.0, 1.0, 2.0, 4.0, 8.0, 16.0)  # the default ratio is unchanged
    fine = mean_grid(-2.0, 2.0)
    assert fine[0] == -2.0 and fine[-1] == 2.0 and 0.0 in fine and 1.1 in fine and -1.1 in fine
    with pytest.raises(ParameterError, match="ratio"):
        geometric_grid(0, 16, 1.0)
    assert sum(MEAN_SHARES.values()) == 1
    shares = split_mean_budget(PureBudget(Fraction(1)))
    assert {k: v.epsilon for k, v in shares.items()} == dict(MEAN_SHARES)
    # issue 16's tuning moved the split from 20/5/5/70 % to 22.5/5/5/67.5 %, then to 26.25/3.75/5/65 %:
    # the count : sum ratio is 1 : 13 (2 : 27 before the second tuning)
    assert mean_weights({"mean"}) == {"count": 1, "sum": 13, "sum_of_squares": 0}
    assert mean_weights({"variance"})["sum_of_squares"] == 13


def test_a_nonnegative_range_searches_the_upper_end_and_the_offset_only(ledger):
    values = np.arange(17.0, 91.0).repeat(50)  # 3 700 rows in [17, 90]
    found = select_mean_bounds(values, "age", (0.0, 2.0**17), PureBudget(Fraction(2)), PureBudget(Fraction(1)),
                               ReleaseContext(ledger, "r1", "pure", SeededNoise(3)))
    charges = ledger.charges(release_id="r1")
    assert [c.query for c in charges] == ["upper bound of age (mean)", "centre of age (mean)"]
    assert [c.loss for c in charges] == [Fraction(2), Fraction(1)]
    lower, upper = found.selected
    # Selections draw from the secure source: the checks hold but with probability < 1e-8 (500 rows lie above
    # 80; a bound k times past the edge has probability about k^-5)
    assert lower == 0.0 and 80 <= upper <= 1e4 and 30 <= found.centre <= 60
    radius = max(upper - found.centre, found.centre - lower)
    assert found.lower == max(0.0, found.centre - radius) and found.upper == min(2.0**17, found.centre + radius)
    grid = found.grid()
    assert grid.half_steps == MEAN_HALF_STEPS and grid.centre == found.centre and grid.bounds.source == "svt"
    assert found.clip_side == grid.bounds.clip_side == "upper"  # the lower bound is the range's 0: no row below
    again = select_mean_bounds(values, "age", (0.0, 2.0**17), PureBudget(Fraction(2)), PureBudget(Fraction(1)),
                               ReleaseContext(ledger, "r1", "pure", SeededNoise(99)))
    assert again == found and len(ledger.charges(release_id="r1")) == 2  # a re-run replays, books nothing
    assert found.records == tuple(c for c in found.records)


def test_a_signed_range_searches_both_ends_from_zero(ledger):
    values = np.linspace(-40.0, 30.0, 2000)
    found = select_mean_bounds(values, "profit", (-1e4, 1e4), PureBudget(Fraction(2)), PureBudget(Fraction(1)),
                               ReleaseContext(ledger, "r1", "pure", SeededNoise(5)))
    assert [c.loss for c in ledger.charges(release_id="r1")] == [Fraction(1), Fraction(1), Fraction(1)]
    assert -4000 <= found.selected[0] <= -36 and 27 <= found.selected[1] <= 4000
    assert found.lower <= found.centre <= found.upper
    assert found.clip_side is None  # both bounds inside the range: the bias can go either way


def test_the_mean_interval_leans_towards_the_only_side_that_clips():
    intervals = {}
    for side in ("upper", "lower", None):
        grid = Grid(ClipBounds(0.0, 100.0, "svt", side), half_steps=1000, offset=20.0)
        mechanism = MomentsMechanism(grid, PureBudget(Fraction(1)), {"count": 1, "sum": 13})
        noisy = NoisyMoments("x", grid, mechanism, {"count": (10_000,), "sum": (1_000_000,)}, (), seed=4)
        mean, total = noisy.mean(), noisy.sum()
        intervals[side] = (mean.high - mean.estimate, mean.estimate - mean.low, total.high - total.estimate,
                           total.estimate - total.low)
    up, down, plain = (intervals[k] for k in ("upper", "lower", None))
    assert up[0] > plain[0] and up[1] < plain[1] and up[2] > plain[2] and up[3] < plain[3]  # more room above
    assert down[1] > plain[1] and down[0] < plain[0] and down[3] > plain[3] and down[2] < plain[2]  # mirrored
    assert 1.0 < (up[0] + up[1]) / (plain[0] + plain[1]) < 1.06  # 2.9 % wider on Laplace noise


def test_bad_budgets_book_nothing(ledger):
    with pytest.raises(ParameterError, match="bounds_budget"):
        select_mean_bounds(np.ones(3), "x", (0.0, 8.0), Fraction(1), PureBudget(Fraction(1)),  # type: ignore[arg-type]
                           ReleaseContext(ledger, "r1", "pure", SeededNoise(1)))
    assert ledger.charges(release_id="r1") == []


def test_the_svt_moments_book_exactly_the_budget_and_estimate_the_mean(ledger):
    rng = np.random.default_rng(1)  # test data, not a release
    values = np.round(rng.lognormal(1.5, 1.0, 20_000), 1)
    found, moments = measure_svt_moments(values, "stay", (0.0, 2.0**17), PureBudget(Fraction(1)),
                                         ReleaseContext(ledger, "r1", "pure", SeededNoise(2)), seed=4)
    charges = ledger.charges(release_id="r1")
    assert Fraction(1) - Fraction(1, 10**12) < sum(c.loss for c in charges) <= Fraction(1)  # scales rounded up
    assert [c.query for c in charges][-2:] == ["count(stay)", "sum(stay)"]
    mean = moments.mean()
    assert mean.low <= mean.estimate <= mean.high and abs(mean.estimate - values.mean()) < 0.3
    assert moments.grid == found.grid()


def test_the_svt_moments_book_rho_under_zcdp(tmp_path):
    with Ledger.open(tmp_path / "z.sqlite") as book:
        book.register("pop", "zcdp", ZCDPBudget(Fraction(10)), Fraction(1, 10**9))
        book.reserve("pop", "r1", ZCDPBudget(Fraction(5)))
        values = np.arange(1.0, 101.0).repeat(20)
        _, moments = measure_svt_moments(values, "x", (0.0, 1e4), ZCDPBudget(Fraction(1, 2)),
                                         ReleaseContext(book, "r1", "zcdp", secure_noise()),  # sigma ~1e10
                                         statistics=frozenset({"mean", "variance"}))
        total = sum(c.loss for c in book.charges(release_id="r1"))
        assert 0 < total <= Fraction(1, 2)
        assert abs(moments.mean().estimate - 50.5) < 2 and "sum_of_squares" in moments.noisy


def test_the_monotone_exponential_mechanism_spends_its_epsilon_on_monotone_scores_only():
    em = MonotoneExponentialMechanism(2, PureBudget(Fraction(1, 4)))
    assert em.scale() == 8.0 and em.privacy_loss() == PureBudget(Fraction(1, 4))
    assert em.zcdp_loss() == ZCDPBudget(Fraction(1, 128)) and em.sensitivity_text().endswith("monotone")
    assert ExponentialMechanism(2, PureBudget(Fraction(1, 4))).scale() == 2 * em.scale()
    rng = np.random.default_rng(7)  # test scores, not a release
    worst_monotone, worst_broken = 0.0, 0.0
    for _ in range(500):
        u = rng.integers(-30, 1, 12).astype(np.float64)
        moved = rng.integers(0, 3, 12)  # each score up by 0..Δ: a monotone neighbour
        ratio = np.log(em.probabilities(u + moved) / em.probabilities(u))
        worst_monotone = max(worst_monotone, float(np.abs(ratio).max()), float(ratio.max() - ratio.min()))
        mixed = moved * rng.choice([-1, 1], 12)  # scores moving both ways: not monotone
        worst_broken = max(worst_broken, float(np.abs(np.log(em.probabilities(u + mixed) / em.probabilities(u))).max()))
    # epsilon-DP and epsilon-bounded-range on monotone neighbours; up to 2 epsilon when the claim is false
    assert worst_monotone <= 0.25 + 1e-12 and worst_broken > 0.3


def test_bound_selections_are_monotone_and_booked_as_such(ledger):
    values = np.arange(17.0, 91.0).repeat(50)
    select_mean_bounds(values, "age", (0.0, 2.0**17), PureBudget(Fraction(2)), PureBudget(Fraction(1)),
                       ReleaseContext(ledger, "r1", "pure", SeededNoise(3)))
    upper, centre = ledger.charges(release_id="r1")
    assert upper.sensitivity == "score sensitivity=1, monotone" and float(upper.scale) == 0.5
    assert centre.sensitivity == "score sensitivity=1" and float(centre.scale) == 2.0
    for extra in (np.array([]), np.array([95.0]), np.array([5e4])):  # an added row moves every score one way
        grid = mean_grid(0.0, 2.0**17)
        before = bound_scores(tail_counts(values, grid)[1], 1.0)
        after = bound_scores(tail_counts(np.concatenate([values, extra]), grid)[1], 1.0)
        assert np.all((after - before >= -1 - 1e-9) & (after - before <= 1e-9))
