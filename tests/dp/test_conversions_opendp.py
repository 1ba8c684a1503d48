"""The budget conversions, cross-checked against OpenDP's own (an independent implementation).

Ours are exact (fractions, decimal at 60 digits) and rounded towards more privacy loss; OpenDP's are
floating point with their own conservative rounding. They must agree to a few parts in a million, and
ours must never report less loss than the true value allows (checked against OpenDP from the safe side).
"""

from __future__ import annotations

from fractions import Fraction

import opendp.prelude as dp
import pytest

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget, budget_total, zcdp_from_pure
from dprelease.dp.accounting.conversions import approx_from_gaussian_rdp, approx_from_zcdp_cks, zcdp_from_approx_cks

dp.enable_features("contrib")

RHOS = [Fraction(1, 1000), Fraction(1, 50), Fraction(1, 8), Fraction(1, 2), Fraction(2), Fraction(10)]
DELTAS = [Fraction(1, 10**9), Fraction(1, 10**6), Fraction(1, 10**5)]


def _opendp_epsilon(rho: Fraction, delta: Fraction) -> float:
    """OpenDP's zCDP -> (epsilon, delta) conversion of a Gaussian mechanism with exactly this rho."""
    sigma = (1 / (2 * float(rho))) ** 0.5  # rho = 1 / (2 sigma^2) at sensitivity 1
    gaussian = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=sigma)
    booked = gaussian.map(1.0)
    profile = dp.c.make_zCDP_to_approxDP(gaussian).map(1.0)
    # OpenDP books its own (slightly conservative) rho; compare at that rho's conversion, scaled back.
    assert booked == pytest.approx(float(rho), rel=1e-9)
    return float(profile.epsilon(float(delta)))


@pytest.mark.parametrize("rho", RHOS, ids=str)
@pytest.mark.parametrize("delta", DELTAS, ids=str)
def test_zcdp_to_approx_agrees_with_opendp(rho: Fraction, delta: Fraction):
    ours = float(approx_from_zcdp_cks(ZCDPBudget(rho), delta).epsilon)
    theirs = _opendp_epsilon(rho, delta)
    assert ours == pytest.approx(theirs, rel=1e-5)


@pytest.mark.parametrize("epsilon", [Fraction(1, 10), Fraction(1), Fraction(3), Fraction(8)], ids=str)
@pytest.mark.parametrize("delta", DELTAS, ids=str)
def test_the_inverse_is_safe_and_tight_by_opendp(epsilon: Fraction, delta: Fraction):
    """budget_total("zcdp", ε, δ) gives the largest rho whose conversion (by OpenDP too) stays within ε."""
    rho = budget_total("zcdp", epsilon, delta)
    assert isinstance(rho, ZCDPBudget) and rho == zcdp_from_approx_cks(epsilon, delta)
    theirs = _opendp_epsilon(rho.rho, delta)
    assert theirs <= float(epsilon) * (1 + 1e-9)  # safe: never more loss than declared
    assert theirs >= float(epsilon) * (1 - 1e-5)  # tight: almost all of it is used


@pytest.mark.parametrize("epsilon", [Fraction(1, 10), Fraction(1, 2), Fraction(2)], ids=str)
def test_pure_to_zcdp_is_opendps(epsilon: Fraction):
    laplace = dp.m.make_laplace(dp.atom_domain(T=int), dp.absolute_distance(T=int), scale=float(1 / epsilon))
    theirs = dp.c.make_pureDP_to_zCDP(laplace).map(1)
    assert float(zcdp_from_pure(PureBudget(epsilon)).rho) == pytest.approx(theirs, rel=1e-12)


@pytest.mark.parametrize("sigma", [1.0, 4.0, 20.0], ids=str)
def test_gaussian_rdp_accountant_is_valid_by_opendps_optimal_conversion(sigma: float):
    """The RDP accountant's classic conversion is a valid bound: never below OpenDP's optimal one, not far above."""
    delta = Fraction(1, 10**6)
    ours = float(approx_from_gaussian_rdp(1, Fraction(sigma), delta).epsilon)
    optimal = _opendp_epsilon(Fraction(1) / (2 * Fraction(sigma) ** 2), delta)
    assert optimal * (1 - 1e-9) <= ours <= optimal * 1.5
