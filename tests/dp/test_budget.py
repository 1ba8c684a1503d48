from __future__ import annotations

import math
import re
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dprelease.dp.accounting.budget import (
    PureBudget,
    ZCDPBudget,
    approx_from_zcdp,
    budget_total,
    pure_from_zcdp_share,
    split_exact,
    to_fraction,
    zcdp_from_approx,
    zcdp_from_pure,
)
from dprelease.dp.accounting.conversions import approx_from_zcdp_cks, zcdp_from_approx_cks
from dprelease.dp.errors import ParameterError


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), -float("inf"), "abc", True, None, [1]])
def test_pure_budget_rejects_bad_epsilon(bad):
    with pytest.raises(ParameterError, match="epsilon"):
        PureBudget(bad)


def test_nan_is_rejected_even_though_nan_le_zero_is_false():
    assert not (float("nan") <= 0)
    with pytest.raises(ParameterError, match=re.escape("epsilon (nan) must be a finite number")):
        PureBudget(float("nan"))


def test_floats_are_read_as_the_decimal_the_user_wrote():
    assert to_fraction(0.1, "epsilon") == Fraction(1, 10)
    assert to_fraction(1e-9, "delta") == Fraction(1, 10**9)


@pytest.mark.parametrize("delta", [1, 2, -0.1, 0])
def test_zcdp_rejects_delta_outside_open_unit_interval(delta):
    with pytest.raises(ParameterError, match="delta"):
        zcdp_from_approx(1, delta)


def test_pure_to_zcdp_is_exact():
    assert zcdp_from_pure(PureBudget(Fraction(1, 2))) == ZCDPBudget(Fraction(1, 8))


def test_zcdp_to_approx_hand_computed():
    # rho = 1/2, delta = e^-2  =>  epsilon = 1/2 + 2 sqrt(1/2 * 2) = 2.5 exactly; rounded up slightly.
    delta = Fraction(math.exp(-2))  # the double nearest e^-2; ln(1/delta) is within 1e-16 of 2
    eps = approx_from_zcdp(ZCDPBudget(Fraction(1, 2)), delta).epsilon
    assert Fraction(5, 2) - Fraction(1, 10**12) < eps < Fraction(5, 2) + Fraction(1, 10**12)


def test_approx_rounds_up_and_inverse_rounds_down():
    for epsilon in (Fraction(1, 10), Fraction(1), Fraction(3)):
        rho = zcdp_from_approx(epsilon, Fraction(1, 10**9))
        back = approx_from_zcdp(rho, Fraction(1, 10**9)).epsilon
        assert back <= epsilon
        assert epsilon - back < Fraction(1, 10**10)


def test_pure_share_of_rho_never_exceeds_it():
    for rho in (Fraction(1, 3), Fraction(1, 7919), Fraction(2)):
        eps = pure_from_zcdp_share(ZCDPBudget(rho)).epsilon
        assert eps**2 / 2 <= rho
        assert rho - eps**2 / 2 < rho * Fraction(1, 10**12)


def test_budget_total_pure_rejects_delta():
    with pytest.raises(ParameterError, match="delta must be absent or 0 under pure DP"):
        budget_total("pure", 1, 1e-9)


@given(
    st.fractions(min_value=Fraction(1, 10**6), max_value=10),
    st.dictionaries(st.text(min_size=1, max_size=5), st.integers(0, 1000), min_size=1, max_size=8).filter(
        lambda d: sum(d.values()) > 0
    ),
)
def test_split_adds_back_to_the_whole(total, weights):
    parts = split_exact(total, weights)
    assert sum(parts.values(), Fraction(0)) == total
    assert all(v > 0 for v in parts.values())
    assert ZCDPBudget(total).split(weights) == {k: ZCDPBudget(v) for k, v in parts.items()}


def test_split_rejects_negative_and_all_zero():
    with pytest.raises(ParameterError, match=re.escape("allocation.a (-1) must be non-negative")):
        split_exact(Fraction(1), {"a": -1, "b": 2})
    with pytest.raises(ParameterError, match="positive weight"):
        split_exact(Fraction(1), {"a": 0})


def test_cks_inverse_is_feasible_and_nearly_tight():
    delta = Fraction(1, 10**9)
    for epsilon in (Fraction(1, 10), Fraction(1), Fraction(3)):
        rho = zcdp_from_approx_cks(epsilon, delta)
        assert approx_from_zcdp_cks(rho, delta).epsilon <= epsilon
        assert approx_from_zcdp_cks(ZCDPBudget(rho.rho * (1 + Fraction(1, 10**9))), delta).epsilon > epsilon - \
            epsilon * Fraction(1, 10**6)
        assert rho.rho > zcdp_from_approx(epsilon, delta).rho


def test_budget_total_zcdp_uses_the_cks_inverse():
    """The declared (epsilon, delta) becomes the largest rho whose CKS conversion stays within epsilon."""
    delta = Fraction(1, 10**9)
    rho = budget_total("zcdp", 1, delta)
    assert rho == zcdp_from_approx_cks(1, delta)
    back = approx_from_zcdp_cks(rho, delta).epsilon
    assert back <= 1 and back > Fraction(999_999, 1_000_000)  # safe and tight (what the inverse promises)
    assert approx_from_zcdp_cks(ZCDPBudget(rho.rho * Fraction(1_000_001, 1_000_000)), delta).epsilon > back
