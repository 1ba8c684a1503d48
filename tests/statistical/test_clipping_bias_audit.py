"""Privacy audit, power check and interval coverage of the clipping-bias estimate (dp.statistics.bias).

Audit (``tests/statistical/audit.py``): on D (four rows inside the bounds) and D' = D plus one row at
the upper cap (the worst case: one more row in the ``above bound`` cell and a full H_e of excess),
N independent releases of the (tails, excess) pair, each drawn by the production ``sample`` of its
part on the seeded stand-in of ``tests/noise.py`` (the discrete Laplace law, as every audit in this
folder). Events are joint: ``tails above >= t and excess above >= e`` (D' in the numerator) and
their mirror ``<`` events (D in the numerator); for the discrete Laplace each such product event's
exact log-ratio is the booked loss of the two parts together, so the audit is tight. The audit's
family-wise false-alarm rate is 1e-6 (Bonferroni over the events, rigorous); its power: a broken
variant (half the noise scale of both parts) must be flagged, and the probability that it would not
is bounded from the exact event probabilities (``power_failure_log10``) and asserted <= 1e-9.

Coverage: a column that clips materially (about 5 % of 2000 rows above the upper bound, all within
the cap): over 2000 releases the corrected mean's 95 % interval must hold the TRUE mean in
[93 %, 97 %] (false alarm about 1e-4, normal approximation of the binomial when the coverage is
94-96 %); the clipped mean's interval must miss it mostly (the bias is material) and the flag must
fire mostly; intervals computed as if the noise were half its scale must cover < 93 % (power).
"""

from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np
import pytest

from dprelease.dp.accounting.budget import PureBudget
from dprelease.dp.mechanisms.noise import DiscreteLaplace
from dprelease.dp.statistics.bias import BiasMechanism, NoisyBias
from dprelease.dp.statistics.clipping import ClipBounds, Grid
from dprelease.dp.statistics.moments import MEAN_WEIGHTS, MomentsMechanism, NoisyMoments
from tests.noise import SeededNoise
from tests.statistical.audit import Event, audit, power_failure_log10

pytestmark = pytest.mark.statistical

ALPHA = 1e-6
POWER_MISS_LOG10_MAX = -9.0
N = 100_000

GRID = Grid(ClipBounds(0.0, 10.0), half_steps=5)
PLAN = BiasMechanism.around(GRID, None, PureBudget(Fraction(1)))  # tails eps 1/4, excess eps 3/4
D_VALUES = np.full(4, 5.0)
D2_VALUES = np.r_[D_VALUES, PLAN.cap[1]]
THRESHOLDS = ((1, 1), (1, 2), (2, 1))  # (tails, excess) in units of one row's move: 1 row, H_e excess steps


def releases(values: np.ndarray, seed: int, factor: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """N releases of (tails above bound, excess above) through each part's production ``sample``."""
    answers = PLAN.exact_answers(values)
    noise = SeededNoise(seed)
    out = {}
    for name, part in PLAN.parts().items():
        budget = PureBudget(part.budget.epsilon / factor)
        drawn = part if factor == 1.0 else DiscreteLaplace(part.l1_sensitivity, budget)
        cells = len(answers[name])
        out[name] = drawn.sample(np.tile(answers[name], N), noise).reshape(N, cells)
    above = PLAN.sides.index("above")
    return out["tails"][:, 2], out["excess"][:, above]


def events(tails: np.ndarray, excess: np.ndarray) -> list[Event]:
    """Joint events on runs given by index into ``tails`` and ``excess`` (the audit sees one integer per run)."""
    h = PLAN.parts()["excess"].l1_sensitivity
    out = []
    for t, e in THRESHOLDS:
        out.append(Event(f"tails >= {t}, excess >= {e}H",
                         lambda i, t=t, e=e: (tails[i] >= t) & (excess[i] >= e * h), "D'"))
        out.append(Event(f"tails < {t}, excess < {e}H", lambda i, t=t, e=e: (tails[i] < t) & (excess[i] < e * h), "D"))
    return out


def run_audit(factor: float, seeds: tuple[int, int]):
    """The audit of N releases on D (runs 0..N-1) and N on D' (runs N..2N-1)."""
    (t_d, e_d), (t_d2, e_d2) = releases(D_VALUES, seeds[0], factor), releases(D2_VALUES, seeds[1], factor)
    tails, excess = np.r_[t_d, t_d2], np.r_[e_d, e_d2]
    runs = np.arange(2 * N)
    return audit(runs[:N], runs[N:], events(tails, excess), statistic="epsilon", alpha=ALPHA)


def tail(t: float, scale: float) -> float:
    """P(Z >= t) of the discrete Laplace of ``scale``, t an integer."""
    q = math.exp(-1 / scale)
    return q ** max(t, 0) / (1 + q) if t >= 0 else 1 - q ** max(1 - t, 0) / (1 + q)


def event_probabilities(values: np.ndarray, t: int, e: int, factor: float = 1.0) -> tuple[float, float]:
    """Exact P(tails >= t and excess >= eH) and P(tails < t and excess < eH) on ``values``."""
    answers = PLAN.exact_answers(values)
    parts = PLAN.parts()
    h = parts["excess"].l1_sensitivity
    tails_at = tail(t - int(answers["tails"][2]), parts["tails"].scale() * factor)
    excess_at = tail(e * h - int(answers["excess"][PLAN.sides.index("above")]), parts["excess"].scale() * factor)
    tails_below = 1 - tails_at
    excess_below = 1 - excess_at
    return tails_at * excess_at, tails_below * excess_below


def test_exact_event_probabilities_respect_the_booked_loss_and_the_stand_in_matches_them():
    booked = float(PLAN.privacy_loss().epsilon)
    for t, e in THRESHOLDS:
        (p_hi, p_lo), (q_hi, q_lo) = event_probabilities(D_VALUES, t, e), event_probabilities(D2_VALUES, t, e)
        assert math.log(q_hi / p_hi) <= booked + 1e-9 and math.log(p_lo / q_lo) <= booked + 1e-9
    assert math.log(event_probabilities(D2_VALUES, 1, 1)[0] / event_probabilities(D_VALUES, 1, 1)[0]) > 0.99 * booked
    tails, excess = releases(D2_VALUES, 1)
    h = PLAN.parts()["excess"].l1_sensitivity
    observed = float(np.mean((tails >= 1) & (excess >= h)))
    assert abs(observed - event_probabilities(D2_VALUES, 1, 1)[0]) < 0.006  # > 5 sd of N draws


def test_the_audit_stays_within_the_booked_loss_and_flags_half_the_noise():
    start = time.perf_counter()
    booked = float(PLAN.privacy_loss().epsilon)
    good = run_audit(1.0, (2, 3))
    assert good.value <= booked, good.as_dict()
    broken = run_audit(0.5, (4, 5))
    assert broken.value > booked, broken.as_dict()
    misses = []
    for t, e in THRESHOLDS:
        (p_hi, _), (q_hi, _) = event_probabilities(D_VALUES, t, e, 0.5), event_probabilities(D2_VALUES, t, e, 0.5)
        misses.append(power_failure_log10("epsilon", q_hi, p_hi, N, ALPHA / (2 * len(THRESHOLDS)), booked))
    print(f"\nclipping bias audit: epsilon_hat={good.value:.3f} (booked {booked}), broken {broken.value:.3f}, "
          f"log10 P(miss) <= {min(misses):.1f}, {time.perf_counter() - start:.1f} s")
    assert min(misses) <= POWER_MISS_LOG10_MAX


# ---------------------------------------------------------------------------------------------
# Coverage of the corrected mean's interval (the TRUE mean)

REPETITIONS = 2000
COVER_GRID = Grid(ClipBounds(0.0, 20.0), half_steps=1000, offset=6.0)  # radius 14
COVER_PLAN = BiasMechanism.around(COVER_GRID, (0.0, 1e6), PureBudget(Fraction(1)), factor=Fraction(1, 2))  # cap 27
COVER_VALUES = np.minimum(np.random.default_rng(20261127).lognormal(2.0, 0.6, 2000), 26.9)  # all within the cap
MOMENTS = MomentsMechanism(COVER_GRID, PureBudget(Fraction(1)), MEAN_WEIGHTS)


def coverage(declared_factor: float, repetitions: int) -> tuple[float, float, float]:
    """Shares of releases whose corrected interval holds the true mean, whose clipped one does, and flagged.

    ``declared_factor`` != 1 computes the intervals as if the noise were that many times its real scale.
    """
    scale = Fraction(1) / Fraction(declared_factor)
    claimed = MomentsMechanism(COVER_GRID, PureBudget(scale), MEAN_WEIGHTS)
    claimed_bias = BiasMechanism(COVER_GRID, COVER_PLAN.cap, PureBudget(scale))
    answers, bias_answers = MOMENTS.exact_answers(COVER_VALUES), COVER_PLAN.exact_answers(COVER_VALUES)
    noise = SeededNoise(23)
    truth = float(COVER_VALUES.mean())
    corrected = clipped = flagged = 0
    for r in range(repetitions):
        noisy = {n: tuple(int(v) for v in p.sample(answers[n], noise)) for n, p in MOMENTS.parts().items()}
        drawn = {n: tuple(int(v) for v in p.sample(bias_answers[n], noise)) for n, p in COVER_PLAN.parts().items()}
        moments = NoisyMoments("x", COVER_GRID, claimed, noisy, (), seed=r)
        report = NoisyBias("x", claimed_bias, drawn, (), seed=r).report(moments)
        mean = moments.mean()
        corrected += report.corrected_low <= truth <= report.corrected_high
        clipped += mean.low <= truth <= mean.high
        flagged += report.clips
    return corrected / repetitions, clipped / repetitions, flagged / repetitions


def test_the_corrected_interval_covers_the_true_mean_within_93_and_97_percent():
    start = time.perf_counter()
    assert float(COVER_VALUES.mean() - np.clip(COVER_VALUES, 0, 20).mean()) > 0.1  # a material bias
    covered, clipped, flagged = coverage(1.0, REPETITIONS)
    broken, _, _ = coverage(0.5, 400)  # 400 runs: a coverage near 80 % lies >= 5 sd below 93 %
    print(f"\ncorrected mean: coverage of the true mean {covered:.3f} (clipped mean's interval {clipped:.3f}), "
          f"flagged {flagged:.3f}, at half the noise {broken:.3f}, {time.perf_counter() - start:.1f} s")
    assert 0.93 <= covered <= 0.97
    assert clipped < 0.2 and flagged > 0.9
    assert broken < 0.93
