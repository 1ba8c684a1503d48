"""The clipping-bias estimate (dp.statistics.bias): caps, exact answers, sensitivities, booking, replay, flags."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import ParameterError
from dprelease.dp.statistics.bias import (
    BIAS_SHARE,
    EXCESS_HALF_STEPS,
    BiasMechanism,
    NoisyBias,
    measure_bias,
)
from dprelease.dp.statistics.clipping import ClipBounds, Grid
from dprelease.dp.statistics.means import MEAN_SHARES, measure_svt_moments, split_mean_budget
from dprelease.dp.statistics.moments import MEAN_WEIGHTS, MomentsMechanism, NoisyMoments, measure_moments
from tests.noise import SeededNoise

GRID = Grid(ClipBounds(0.0, 20.0), half_steps=1000, offset=5.0)  # radius 15


@pytest.fixture
def ledger(tmp_path):
    with Ledger.open(tmp_path / "ledger.sqlite") as book:
        book.register("pop", "pure", PureBudget(Fraction(100)), Fraction(0))
        book.reserve("pop", "r1", PureBudget(Fraction(50)))
        yield book


def test_caps_lie_a_fraction_of_the_radius_out_within_the_search_range():
    m = BiasMechanism.around(GRID, (0.0, 1e6), PureBudget(Fraction(1)), factor=Fraction(1, 2))
    assert m.cap == (0.0, 27.5) and m.sides == ("above",) and m.width == 7.5
    both = BiasMechanism.around(GRID, None, PureBudget(Fraction(1)), factor=Fraction(1, 2))
    assert both.cap == (-7.5, 27.5) and both.sides == ("below", "above")
    none = BiasMechanism(GRID, (0.0, 20.0), PureBudget(Fraction(1)))
    assert set(none.parts()) == {"tails"} and none.sides == ()
    with pytest.raises(ParameterError, match="must be finite and contain the bounds"):
        BiasMechanism(GRID, (1.0, 30.0), PureBudget(Fraction(1)))
    with pytest.raises(ParameterError, match="PureBudget or a ZCDPBudget"):
        BiasMechanism(GRID, (0.0, 30.0), Fraction(1))  # type: ignore[arg-type]


def test_one_row_moves_each_query_by_at_most_its_declared_sensitivity():
    m = BiasMechanism(GRID, (-10.0, 30.0), PureBudget(Fraction(1)), contributions=1)
    base = np.array([1.0, 5.0, 19.0, np.nan])
    before = m.exact_answers(base)
    for extra in (-1e9, -10.0, -3.0, 0.0, 7.0, 20.0, 20.1, 25.0, 30.0, 1e9):
        after = m.exact_answers(np.r_[base, extra])
        for name, part in m.parts().items():
            assert np.abs(after[name] - before[name]).sum() <= part.l1_sensitivity
    exact = m.exact_answers(np.array([-20.0, -5.0, 25.0, 40.0, 10.0]))
    assert exact["tails"].tolist() == [1, 1, 1, 1]
    half = EXCESS_HALF_STEPS // 2  # 5 of the width 10 below, 5 above; a row beyond a cap counts the full width
    assert exact["excess"].tolist() == [half + 2 * half, half + 2 * half]


def test_the_bias_is_booked_replayed_and_corrects_a_clipped_mean(ledger):
    rng = np.random.default_rng(3)  # test data, not a release
    values = np.minimum(rng.lognormal(2.0, 0.6, 20_000), 27.0)  # about 5 % above 20, all within the cap 27.5
    moments_plan = MomentsMechanism(GRID, PureBudget(Fraction(2)), MEAN_WEIGHTS)
    bias_plan = BiasMechanism.around(GRID, (0.0, 1e6), PureBudget(Fraction(2)), factor=Fraction(1, 2))
    context = ReleaseContext(ledger, "r1", "pure", SeededNoise(8))
    moments = measure_moments(values, moments_plan, context, column="x", seed=1)
    bias = measure_bias(values, bias_plan, context, column="x", seed=1)
    queries = [c.query for c in ledger.charges(release_id="r1")]
    assert queries[-2:] == ["clipping tails(x)", "clipping excess(x)"]
    assert sum(c.loss for c in ledger.charges(release_id="r1")) <= Fraction(4)
    report = bias.report(moments)
    clipped = moments.mean().estimate
    true_bias = float(values.mean() - np.clip(values, 0, 20).mean())
    assert true_bias > 0.1 and report.clips and not report.beyond_cap
    assert report.bias_low <= true_bias <= report.bias_high
    assert report.corrected == pytest.approx(clipped + report.bias)
    assert report.corrected_low <= values.mean() <= report.corrected_high
    total = bias.report(moments, "sum")
    assert total.corrected == pytest.approx(moments.sum().estimate + total.bias)
    with pytest.raises(ParameterError, match="a mean or a sum"):
        bias.report(moments, "variance")
    again = measure_bias(values, bias_plan, ReleaseContext(ledger, "r1", "pure", SeededNoise(99)), column="x", seed=1)
    assert again.noisy == bias.noisy and len(ledger.charges(release_id="r1")) == len(queries)  # replayed


def test_nothing_clipped_is_rarely_flagged_and_the_estimate_is_centred():
    values = np.linspace(1.0, 19.0, 2000)
    plan = MomentsMechanism(GRID, PureBudget(Fraction(1)), MEAN_WEIGHTS)
    bias_plan = BiasMechanism.around(GRID, None, PureBudget(Fraction(1, 5)))
    answers, bias_answers = plan.exact_answers(values), bias_plan.exact_answers(values)
    noise = SeededNoise(5)
    flags, biases = [], []
    for r in range(200):
        noisy = {name: tuple(int(v) for v in part.sample(answers[name], noise)) for name, part in plan.parts().items()}
        drawn = {name: tuple(int(v) for v in part.sample(bias_answers[name], noise))
                 for name, part in bias_plan.parts().items()}
        report = NoisyBias("x", bias_plan, drawn, (), r).report(NoisyMoments("x", GRID, plan, noisy, (), r))
        flags.append(report.clips)
        biases.append(report.bias)
    assert sum(flags) <= 4  # about 0.25 % expected; 4 of 200 has probability below 1e-3
    assert abs(float(np.mean(biases))) < 3 * float(np.std(biases)) / np.sqrt(200)


def test_the_svt_path_moves_its_share_from_the_sum(ledger):
    shares = split_mean_budget(PureBudget(Fraction(1)), clipping_bias=True)
    assert shares["bias"].epsilon == BIAS_SHARE and shares["sum"].epsilon == MEAN_SHARES["sum"] - BIAS_SHARE
    assert sum(s.epsilon for s in shares.values()) == 1
    values = np.round(np.random.default_rng(1).lognormal(1.5, 1.0, 20_000), 1)  # test data, not a release
    found, moments, bias = measure_svt_moments(values, "stay", (0.0, 2.0**17), PureBudget(Fraction(1)),
                                               ReleaseContext(ledger, "r1", "pure", SeededNoise(2)), seed=4,
                                               clipping_bias=True)
    charges = ledger.charges(release_id="r1")
    assert Fraction(1) - Fraction(1, 10**12) < sum(c.loss for c in charges) <= Fraction(1)
    assert [c.query for c in charges][-2:] == ["clipping tails(stay)", "clipping excess(stay)"]
    assert bias.mechanism.grid == found.grid() == moments.grid
    split = split_mean_budget(ZCDPBudget(Fraction(1, 2)), clipping_bias=True)
    assert sum(s.rho for s in split.values()) == Fraction(1, 2)


def test_a_corrected_mean_on_its_cap_keeps_the_inside_of_its_interval(ledger):
    """Every row beyond the cap 27.5, noisy answers: a corrected mean on the cap had the interval [27.5, 27.5]."""
    values = np.full(2_000, 1_000.0)
    moments_plan = MomentsMechanism(GRID, PureBudget(Fraction(1, 50)), MEAN_WEIGHTS)
    bias_plan = BiasMechanism.around(GRID, (0.0, 1e6), PureBudget(Fraction(1, 50)), factor=Fraction(1, 2))
    on_cap = 0
    for seed in range(16):
        context = ReleaseContext(ledger, "r1", "pure", SeededNoise(seed))
        moments = measure_moments(values, moments_plan, context, column=f"x{seed}", seed=seed)
        report = measure_bias(values, bias_plan, context, column=f"x{seed}", seed=seed).report(moments)
        assert report.corrected_low <= report.corrected <= report.corrected_high <= bias_plan.cap[1]
        if report.corrected == bias_plan.cap[1]:
            on_cap += 1
            assert report.corrected_low < report.corrected - 0.1
    assert on_cap >= 3
