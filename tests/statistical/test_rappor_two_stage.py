"""The two-stage per-family correction (``dp.local.rappor.two_stage``): E[false rejections] <= α, and power.

The proof (docs/proofs/two_stage_per_family.md) needs only valid p-values. Checked here on p-values whose law
is known exactly, so the checks are fast and many:

- Independent nulls beside alternatives with the z-means of the example's 26 states at n = 10⁶ (count /
  standard error, standard error 1890 as measured on the example's collection), 25 nulls, REPS repetitions.
  V is then a sum of independent indicators, each of probability at most α/25 (the second stage divides by
  at least the number of nulls unless a null was rejected first, which happens with probability < 10⁻⁴),
  so the total over REPS is compared with the 1 − 10⁻⁶ quantile of Binomial(25 · REPS, α/25) (false
  alarm <= 10⁻⁶). Power check: the same rule run at 2α (a variant that books half its error) exceeds that
  quantile; so does a first stage at α that is not paid for.
- Comonotone nulls (every null p-value the same uniform draw, the dependence that makes Bonferroni tight):
  E[V] is computed exactly on a fine grid and must be at most α.
- Power: at least as many alternatives found as Bonferroni at α/m in every repetition with 3 or more sure
  rejections, and more on average.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

from dprelease.dp.errors import ParameterError
from dprelease.dp.local.rappor import FIRST_STAGE, bonferroni, two_stage
from dprelease.dp.local.simulate import zipf_weights

pytestmark = pytest.mark.statistical
ALPHA = 0.1
NULLS = 25
REPS = 20_000
FALSE_ALARM = 1e-6
STANDARD_ERROR = 1890.0


def _p_values(seed: int) -> np.ndarray:
    """REPS rows: 26 alternatives (the example's z-means at n = 10⁶) then NULLS independent nulls."""
    means = np.concatenate([zipf_weights() * 1_000_000 / STANDARD_ERROR, np.zeros(NULLS)])
    z = np.random.default_rng(seed).normal(size=(REPS, means.size)) + means  # simulated statistics only
    return np.asarray(stats.norm.sf(z))


def _bound() -> int:
    return int(stats.binom.isf(FALSE_ALARM, NULLS * REPS, ALPHA / NULLS))


def _false_rejections(rule: Callable[[np.ndarray, float], np.ndarray], p: np.ndarray, alpha: float) -> int:
    return int(sum(int(rule(row, alpha)[-NULLS:].sum()) for row in p))


@pytest.fixture(scope="module")
def p_values() -> np.ndarray:
    return _p_values(11)


def test_expected_false_rejections_are_at_most_alpha(p_values):
    false = _false_rejections(two_stage, p_values, ALPHA)
    assert false <= _bound(), (false / REPS, _bound() / REPS)
    assert false / REPS < ALPHA


def test_a_variant_booking_half_its_error_fails_the_same_bound(p_values):
    assert _false_rejections(two_stage, p_values, 2 * ALPHA) > _bound()


def test_an_unpaid_first_stage_fails_the_same_bound(p_values):
    """Broken: a first stage at α (not α/(20 m²)) whose rejections are not paid for, the rest at α/(m − |S|)."""

    def unpaid(p: np.ndarray, alpha: float) -> np.ndarray:
        sure = p < alpha
        return np.asarray(sure | (p < alpha / max(p.size - int(sure.sum()), 1)))

    assert _false_rejections(unpaid, p_values, ALPHA) > _bound()


def test_comonotone_nulls_keep_the_bound():
    """Every null p-value equal to one uniform U, alternatives at p = 0: E[V] = ∫ V(U) dU, on a grid (midpoints).

    Nothing is rejected for U >= 0.01 (> α/25), so the grid covers [0, 0.01); the exact value is (1 − ρ)α.
    """
    alternatives, width, points = 26, 0.01, 20_000
    grid = (np.arange(points) + 0.5) / points * width
    rows = np.concatenate([np.zeros((points, alternatives)), np.repeat(grid[:, None], NULLS, axis=1)], axis=1)
    v = np.asarray([two_stage(row, ALPHA)[alternatives:].sum() for row in rows])
    assert not two_stage(np.concatenate([np.zeros(alternatives), np.full(NULLS, width)]), ALPHA)[-1]
    expected = float(v.mean() * width)
    assert expected <= ALPHA and expected == pytest.approx((1 - FIRST_STAGE) * ALPHA, rel=1e-3), expected


def test_more_alternatives_found_than_with_bonferroni(p_values):
    ours = np.asarray([two_stage(row, ALPHA)[:-NULLS].sum() for row in p_values])
    theirs = np.asarray([bonferroni(row, ALPHA)[:-NULLS].sum() for row in p_values])
    m = p_values.shape[1]
    sure = (p_values < FIRST_STAGE * ALPHA / m**2).sum(axis=1)
    assert (ours[sure >= 3] >= theirs[sure >= 3]).all()
    assert ours.mean() > theirs.mean() + 0.03, (ours.mean(), theirs.mean())


def test_edge_cases():
    assert two_stage(np.zeros(0), ALPHA).size == 0
    assert two_stage(np.zeros(4), ALPHA).all()
    assert not two_stage(np.ones(4), ALPHA).any()
    with pytest.raises(ParameterError):
        two_stage(np.zeros(3), ALPHA, first=1.0)
