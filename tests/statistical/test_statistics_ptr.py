"""Statistical tests of propose-test-release for the median (dp/statistics/ptr.py, docs/proofs/ptr_threshold.md).

1. *Refusal at distance 0*: on data whose median is unstable (γ = 0), the test must refuse with
   probability >= 1 − δ. 10⁶ runs of the production test mechanism's ``sample`` (seeded source, the
   discrete Laplace law); a Clopper–Pearson lower bound on P(pass) must not exceed δ (false alarm
   <= 1e-6, rigorous). Power: the textbook threshold ln(2/δ)/(2ε) passes with probability ≈ 11 δ here
   and must be flagged; the chance it is not is bounded by an exact binomial tail (asserted <= 1e-9).
2. *(ε, δ) audit*: neighbours D = {0 × 20, M × 21} (median M, γ = 0) and D' = D minus one M (median 0);
   event "released value >= M/2". The statistic P_lower(E | D) − e^ε P_upper(E | D') (Clopper–Pearson
   at 5e-7 each: false alarm <= 1e-6) must not exceed δ; with the textbook threshold it must, and the
   probability that it would not is bounded exactly (binomial tails) and asserted <= 1e-9.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dprelease.dp.accounting.budget import PureBudget
from dprelease.dp.statistics.clipping import ClipBounds, Grid
from dprelease.dp.statistics.ptr import (
    PTRMedian,
    book_threshold,
    median_code,
    pass_probability_at_distance_zero,
    stability_distance,
)
from tests.noise import SeededNoise
from tests.statistical.audit import cp_lower, cp_upper

pytestmark = pytest.mark.statistical

ALPHA = 1e-6
DELTA = Fraction(1, 1000)
GRID = Grid(ClipBounds(0.0, 100.0), half_steps=50)  # M = 100 grid steps of 1
HALF = PureBudget(Fraction(1, 2))


class BookPTR(PTRMedian):
    """The broken variant: the textbook threshold ln(2/δ)/(2ε_t)."""

    def threshold(self) -> int:
        return math.floor(book_threshold(self.test_budget.epsilon, self.delta))


def runs(mechanism: PTRMedian, values: np.ndarray, n: int, seed: int) -> np.ndarray:
    """``n`` independent outputs (grid codes 0..M, −1 for ⊥) from the production pieces, vectorised."""
    noise = SeededNoise(seed)
    codes = GRID.encode(values)
    gamma = stability_distance(codes, GRID, mechanism.bound_codes(), mechanism.cap())
    passed = mechanism.test_mechanism().sample(np.full(n, gamma, dtype=np.int64), noise) > mechanism.threshold()
    released = mechanism.release_mechanism().sample(np.full(n, median_code(codes, GRID), dtype=np.int64), noise)
    return np.where(passed, released, -1)


UNSTABLE = np.r_[np.zeros(20), np.full(21, 100.0)]  # median M; removing one M moves it to 0
NEIGHBOUR = np.r_[np.zeros(20), np.full(20, 100.0)]


def test_unstable_data_have_distance_zero():
    mechanism = PTRMedian(GRID, 1.0, HALF, HALF, DELTA)
    for values in (UNSTABLE, NEIGHBOUR):
        assert stability_distance(GRID.encode(values), GRID, mechanism.bound_codes(), mechanism.cap()) == 0


@pytest.mark.parametrize("epsilon", [Fraction(1, 2), Fraction(2)])
def test_the_test_refuses_with_probability_at_least_one_minus_delta_at_distance_zero(epsilon):
    n = 1_000_000
    good = PTRMedian(GRID, 1.0, PureBudget(epsilon), HALF, DELTA)
    book = BookPTR(GRID, 1.0, PureBudget(epsilon), HALF, DELTA)
    passes = int(np.sum(runs(good, UNSTABLE, n, 1) >= 0))
    assert cp_lower(passes, n, ALPHA) <= DELTA, passes
    broken = int(np.sum(runs(book, UNSTABLE, n, 2) >= 0))
    assert cp_lower(broken, n, ALPHA) > DELTA, broken
    p_book = pass_probability_at_distance_zero(book.test_mechanism().scale(), book.threshold())
    # The smallest count that is flagged, and the exact chance of seeing fewer under the textbook threshold.
    flagged_from = next(k for k in range(n) if cp_lower(k, n, ALPHA) > DELTA) if p_book > 2 * DELTA else n
    miss = stats.binom.logcdf(flagged_from - 1, n, p_book) / math.log(10)
    print(f"\nepsilon_t={epsilon}: passes {passes / n:.2e} (delta {float(DELTA):g}), textbook {broken / n:.2e} "
          f"(exact {p_book:.2e}), log10 P(miss) <= {miss:.1f}")
    assert miss <= -9


def test_epsilon_delta_audit_passes_the_proven_threshold_and_flags_the_textbook_one():
    n = 400_000
    good = PTRMedian(GRID, 1.0, HALF, HALF, DELTA)
    book = BookPTR(GRID, 1.0, HALF, HALF, DELTA)
    epsilon = float(good.privacy_loss().epsilon)

    def delta_hat(mechanism: PTRMedian, seed: int) -> tuple[float, int, int]:
        k_num = int(np.sum(runs(mechanism, UNSTABLE, n, seed) >= 50))
        k_den = int(np.sum(runs(mechanism, NEIGHBOUR, n, seed + 1) >= 50))
        return cp_lower(k_num, n, ALPHA / 2) - math.exp(epsilon) * cp_upper(k_den, n, ALPHA / 2), k_num, k_den

    value, k_num, k_den = delta_hat(good, 10)
    assert value <= DELTA, (k_num, k_den)
    broken, b_num, b_den = delta_hat(book, 20)
    assert broken > DELTA, (b_num, b_den)
    p_book = pass_probability_at_distance_zero(book.test_mechanism().scale(), book.threshold())
    # The event has probability ≈ 0 under D' (release noise would have to cross 50 steps at scale 2: < e^-25).
    flagged_from = next(k for k in range(0, n, 10) if cp_lower(k, n, ALPHA / 2) - math.exp(epsilon)
                        * cp_upper(0, n, ALPHA / 2) > DELTA)
    miss = stats.binom.logcdf(flagged_from - 1, n, p_book * 0.999) / math.log(10)
    print(f"\n(eps, delta) audit: delta_hat={value:.2e} (delta {float(DELTA):g}), textbook {broken:.2e}, "
          f"log10 P(miss) <= {miss:.1f}")
    assert miss <= -9
