from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np
import pytest

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget
from dprelease.dp.errors import ParameterError
from dprelease.dp.mechanisms.noise import DiscreteGaussian, DiscreteLaplace
from dprelease.dp.mechanisms.random import OpenDPNoise


class MechanismContract:
    """Shared checks for every noise mechanism (STYLE.md section 8)."""

    def make(self, sensitivity, budget):
        raise NotImplementedError

    budgets: tuple = ()

    def test_rejects_bad_sensitivity(self):
        for bad, rule in [(0, "must be positive"), (-2, "must be positive"), (1.5, "must be a positive integer"),
                          (True, "must be a positive integer")]:
            with pytest.raises(ParameterError, match=re.escape(rule)):
                self.make(bad, self.budgets[0])

    def test_loss_never_exceeds_budget(self):
        for budget in self.budgets:
            for sensitivity in (1, 2, 7):
                mechanism = self.make(sensitivity, budget)
                assert mechanism.privacy_loss().amount <= budget.amount

    def test_input_not_mutated_and_dtype_shape(self):
        mechanism = self.make(1, self.budgets[0])
        values = np.arange(50, dtype=np.int64)
        copy = values.copy()
        out = mechanism.sample(values, OpenDPNoise())
        assert np.array_equal(values, copy)
        assert out.dtype == np.int64 and out.shape == values.shape

    def test_empty_vector(self):
        mechanism = self.make(1, self.budgets[0])
        assert mechanism.sample(np.zeros(0, dtype=np.int64), OpenDPNoise()).shape == (0,)


class TestDiscreteLaplace(MechanismContract):
    budgets = (PureBudget(Fraction(1, 3)), PureBudget(Fraction(7, 10)), PureBudget(Fraction(1, 1000)))

    def make(self, sensitivity, budget):
        return DiscreteLaplace(l1_sensitivity=sensitivity, budget=budget)

    def test_hand_computed_loss(self):
        m = DiscreteLaplace(l1_sensitivity=2, budget=PureBudget(Fraction(1, 2)))
        assert m.scale() == 4.0
        assert m.privacy_loss() == PureBudget(Fraction(1, 2))

    def test_scale_search_steps_past_an_overshooting_naive_scale(self):
        # 1 / (1/3) = 3.0 exactly, but for epsilon = 7/10 the naive double 1/0.7 overshoots by an ulp.
        m = DiscreteLaplace(l1_sensitivity=1, budget=PureBudget(Fraction(7, 10)))
        naive = 1 / 0.7
        assert m._loss_at(naive) > Fraction(7, 10)  # the naive scale overshoots the budget by OpenDP's map ...
        assert m.scale() > naive  # ... so the search stepped past it
        assert m._loss_at(math.nextafter(m.scale(), 0)) > Fraction(7, 10)  # to the first scale that fits
        assert m.privacy_loss().epsilon <= Fraction(7, 10)

    def test_rejects_zcdp_budget(self):
        with pytest.raises(ParameterError, match="budget must be a PureBudget"):
            DiscreteLaplace(l1_sensitivity=1, budget=ZCDPBudget(Fraction(1)))

    def test_ci95_is_a_95_percent_interval(self):
        m = DiscreteLaplace(l1_sensitivity=1, budget=PureBudget(Fraction(1, 10)))
        q = np.exp(-1 / m.scale())
        h = m.ci95_halfwidth()
        assert 2 * q ** (h + 1) / (1 + q) <= 0.05 < 2 * q**h / (1 + q)


class TestDiscreteGaussian(MechanismContract):
    budgets = (ZCDPBudget(Fraction(1, 8)), ZCDPBudget(Fraction(1, 3)), ZCDPBudget(Fraction(1, 10000)))

    def make(self, sensitivity, budget):
        return DiscreteGaussian(l2_sensitivity=sensitivity, budget=budget)

    def test_hand_computed_loss(self):
        m = DiscreteGaussian(l2_sensitivity=1, budget=ZCDPBudget(Fraction(1, 8)))
        assert m.sigma() == 2.0
        assert m.privacy_loss() == ZCDPBudget(Fraction(1, 8))

    def test_rejects_pure_budget(self):
        with pytest.raises(ParameterError, match="budget must be a ZCDPBudget"):
            DiscreteGaussian(l2_sensitivity=1, budget=PureBudget(Fraction(1)))


@pytest.mark.parametrize("sigma", [1000.5, 1500.0, 4000.0])
def test_gaussian_ci95_above_the_exact_range_is_a_safe_and_tight_bound(sigma):
    """Above EXACT_CI_SIGMA the half-width comes from the continuous bound: never below the exact smallest h."""
    from dprelease.dp.mechanisms.noise import EXACT_CI_SIGMA

    rho = Fraction(1) / (2 * Fraction(sigma) ** 2)
    g = DiscreteGaussian(l2_sensitivity=1, budget=ZCDPBudget(rho))
    assert g.sigma() > EXACT_CI_SIGMA
    radius = math.ceil(12 * g.sigma()) + 2
    z = np.arange(-radius, radius + 1, dtype=np.float64)
    weights = np.exp(-(z**2) / (2 * g.sigma() ** 2))
    weights /= weights.sum()
    covered = np.cumsum(np.concatenate([[weights[radius]], weights[radius + 1:] + weights[radius - 1::-1]]))
    exact = int(np.searchsorted(covered, 0.95))  # the smallest h with P(|Z| <= h) >= 0.95
    assert exact <= g.ci95_halfwidth() <= exact + 3


def test_gaussian_ci95_of_a_huge_sigma_is_immediate():
    g = DiscreteGaussian(l2_sensitivity=1_048_576, budget=ZCDPBudget(Fraction(1, 1000)))
    assert g.sigma() > 1e7 and g.ci95_halfwidth() == pytest.approx(1.96 * g.sigma(), rel=1e-3)
