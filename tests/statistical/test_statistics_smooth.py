"""Statistical privacy audit of the smooth-sensitivity median (dp/statistics/smooth.py, docs/proofs/smooth_median.md).

The mechanism is booked as (ε, δ)-DP. For an event E and neighbours (D, D'), (ε, δ)-DP gives
P(E | D) <= e^ε P(E | D') + δ, so ε̂_E = ln((P_lower(E | D) − δ) / P_upper(E | D')) is a lower bound on ε whenever
the Clopper–Pearson bounds hold. Each bound is taken at α_E / 2 with α_E = ALPHA / (number of events), so the
audit's largest ε̂ exceeds the booked ε with probability at most ALPHA = 1e-6 (Bonferroni) when the mechanism
has the loss it books: that is the false-alarm rate.

Pairs (grid 0..100, step 1; 10⁶ runs per side of the production pieces: ``smooth_sensitivity``, the factor
``scale()``, the median code, the discrete Laplace law, clipping):
* *unstable*: D = {0 × 20, 100 × 21} (median 100), D' = D minus one 100 (median 0): the release moves by the
  whole range, which the scale c·S(D) must cover;
* *ties*: D = {0 × 20, 50 × 5, 100 × 20}, D' = D minus one 50: the local sensitivity is 0 on D and 50 on D'.

Power: the broken variant that scales the noise by the local sensitivity bound A(0) instead of the smooth one
(the mistake NRS warn against) must be flagged on the *ties* pair; the chance it is not is bounded by exact
binomial tails and asserted <= 1e-9.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dprelease.dp.accounting.budget import PureBudget, float_at_least
from dprelease.dp.statistics.clipping import ClipBounds, Grid
from dprelease.dp.statistics.ptr import median_code
from dprelease.dp.statistics.smooth import SmoothMedian, local_sensitivity_bound, smooth_sensitivity
from tests.noise import SeededNoise
from tests.statistical.audit import cp_lower, cp_upper

pytestmark = pytest.mark.statistical

ALPHA = 1e-6
DELTA = Fraction(1, 10**6)
GRID = Grid(ClipBounds(0.0, 100.0), half_steps=50)
RUNS = 1_000_000
PAIRS = {
    "unstable": (np.r_[np.zeros(20), np.full(21, 100.0)], np.r_[np.zeros(20), np.full(20, 100.0)]),
    "ties": (np.r_[np.zeros(20), np.full(5, 50.0), np.full(20, 100.0)],
             np.r_[np.zeros(20), np.full(4, 50.0), np.full(20, 100.0)]),
}
EVENTS = [("out == 50", lambda out: out == 50), ("out == 100", lambda out: out == 100),
          ("out == 0", lambda out: out == 0), *((f"out >= {t}", lambda out, t=t: out >= t) for t in (25, 50, 75)),
          *((f"out <= {t}", lambda out, t=t: out <= t) for t in (25, 50, 75))]
TESTS = len(EVENTS) * 2  # both directions of one pair


def runs(mechanism: SmoothMedian, values: np.ndarray, seed: int, *, smooth: bool = True) -> np.ndarray:
    """``RUNS`` releases (grid codes 0..M) from the production pieces, vectorised."""
    codes = GRID.encode(values)
    sensitivity = smooth_sensitivity(codes, GRID, mechanism.beta()) if smooth else local_sensitivity_bound(codes, GRID)
    scale = float_at_least(Fraction(mechanism.scale()) * Fraction(sensitivity))
    noisy = SeededNoise(seed).discrete_laplace(np.full(RUNS, median_code(codes, GRID), dtype=np.int64), scale)
    return np.clip(noisy, 0, 2 * GRID.half_steps)


def epsilon_hat(k_num: int, k_den: int) -> float:
    """ln((P_lower − δ) / P_upper), 0 when it carries no evidence."""
    p = cp_lower(k_num, RUNS, ALPHA / TESTS / 2) - float(DELTA)
    q = cp_upper(k_den, RUNS, ALPHA / TESTS / 2)
    return math.log(p / q) if p > q else 0.0


def audit(mechanism: SmoothMedian, pair: str, seed: int, *, smooth: bool = True) -> tuple[float, str]:
    d, d_prime = PAIRS[pair]
    outputs = {"D": runs(mechanism, d, seed, smooth=smooth), "D'": runs(mechanism, d_prime, seed + 1, smooth=smooth)}
    best, label = 0.0, ""
    for name, event in EVENTS:
        counts = {side: int(np.sum(event(out))) for side, out in outputs.items()}
        for num, den in (("D", "D'"), ("D'", "D")):
            value = epsilon_hat(counts[num], counts[den])
            if value > best:
                best, label = value, f"{name} ({num} over {den})"
    return best, label


@pytest.mark.parametrize("epsilon", [Fraction(1, 2), Fraction(1)])
@pytest.mark.parametrize("pair", ["unstable", "ties"])
def test_the_empirical_epsilon_stays_below_the_booked_one(pair, epsilon):
    mechanism = SmoothMedian(GRID, PureBudget(epsilon), DELTA)
    booked = float(mechanism.privacy_loss().epsilon)
    value, label = audit(mechanism, pair, 100 + int(epsilon * 10))
    print(f"\nsmooth median, {pair}, booked epsilon {booked:.4f}, delta {float(DELTA):g}: epsilon_hat {value:.4f} "
          f"({label}); false alarm <= {ALPHA:g}")
    assert value <= booked


def test_the_local_sensitivity_variant_is_flagged():
    mechanism = SmoothMedian(GRID, PureBudget(Fraction(1)), DELTA)
    booked = float(mechanism.privacy_loss().epsilon)
    value, label = audit(mechanism, "ties", 7, smooth=False)
    assert value > booked, label
    # Exact chance of missing it: on D the scale is c·1e-3 (out == 50 with probability tanh(1/(2s)) ≈ 1), on D'
    # it is c·50 (out == 50 with probability tanh(1/(2s')) ≈ 0.005). Flagged whenever k_num >= low and
    # k_den <= high, thresholds at which epsilon_hat already exceeds the booked epsilon.
    d, d_prime = (GRID.encode(v) for v in PAIRS["ties"])
    p_num, p_den = (math.tanh(1 / (2 * mechanism.scale() * local_sensitivity_bound(c, GRID))) for c in (d, d_prime))
    low, high = int(RUNS * p_num * 0.99), int(RUNS * p_den * 1.2)
    assert epsilon_hat(low, high) > booked
    miss = np.logaddexp(stats.binom.logcdf(low - 1, RUNS, p_num), stats.binom.logsf(high, RUNS, p_den)) / math.log(10)
    print(f"\nlocal-sensitivity variant: epsilon_hat {value:.2f} ({label}) against booked {booked:.4f}; "
          f"log10 P(miss) <= {miss:.1f}")
    assert miss <= -9
