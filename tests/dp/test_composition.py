"""Composition, advanced composition, the CKS zCDP conversion and the Rényi-DP accountant.

Irrational results are checked against values computed here, independently, with Python's decimal
at 80 digits: a returned epsilon must be >= the true value (rounded up) and within 1e-12 of it.
"""

from __future__ import annotations

import decimal
import math
import re
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dprelease.dp.accounting.budget import ApproxBudget, PureBudget, ZCDPBudget, approx_from_zcdp
from dprelease.dp.accounting.composition import (
    advanced_composition,
    advanced_composition_simple,
    parallel_composition,
    sequential_composition,
)
from dprelease.dp.accounting.conversions import (
    approx_from_gaussian_rdp,
    approx_from_rdp,
    approx_from_zcdp_cks,
    rdp_gaussian,
)
from dprelease.dp.errors import ParameterError

HIGH = decimal.Context(prec=80)
TOLERANCE = Fraction(1, 10**12)


def exact_decimal(x: Fraction) -> Decimal:
    return HIGH.divide(Decimal(x.numerator), Decimal(x.denominator))


def log_inverse(delta: Fraction) -> Decimal:
    return HIGH.ln(HIGH.divide(1, exact_decimal(delta)))


def assert_rounded_up(reported: Fraction, true: Decimal) -> None:
    """reported >= true, and not by more than TOLERANCE relative."""
    true_fraction = Fraction(true)
    assert reported >= true_fraction, (float(reported), float(true_fraction))
    assert reported - true_fraction <= TOLERANCE * abs(true_fraction), (float(reported), float(true_fraction))


def bun_steinke(rho: Fraction, delta: Fraction) -> Decimal:
    """rho + 2 sqrt(rho ln(1/delta)) at 80 digits."""
    r = exact_decimal(rho)
    return HIGH.add(r, HIGH.multiply(2, HIGH.sqrt(HIGH.multiply(r, log_inverse(delta)))))


def cks_objective(rho: Decimal, delta: Decimal, alpha: Decimal) -> Decimal:
    """CKS 2020 Cor. 13 solved for epsilon, written as in the brief: no algebra shared with dp.accounting.budget."""
    a1 = HIGH.subtract(alpha, 1)
    numerator = HIGH.add(
        HIGH.ln(HIGH.divide(1, HIGH.multiply(alpha, delta))),
        HIGH.multiply(a1, HIGH.ln(HIGH.subtract(1, HIGH.divide(1, alpha)))),
    )
    return HIGH.add(HIGH.multiply(rho, alpha), HIGH.divide(numerator, a1))


def golden_minimum(function, low: Decimal, high: Decimal, steps: int = 170) -> tuple[Decimal, Decimal]:
    """Golden-section search for a unimodal function at 80 digits; returns (argmin, min)."""
    ratio = HIGH.divide(HIGH.subtract(HIGH.sqrt(Decimal(5)), 1), 2)
    left = HIGH.subtract(high, HIGH.multiply(ratio, HIGH.subtract(high, low)))
    right = HIGH.add(low, HIGH.multiply(ratio, HIGH.subtract(high, low)))
    f_left, f_right = function(left), function(right)
    for _ in range(steps):
        if f_left <= f_right:
            high, right, f_right = right, left, f_left
            left = HIGH.subtract(high, HIGH.multiply(ratio, HIGH.subtract(high, low)))
            f_left = function(left)
        else:
            low, left, f_left = left, right, f_right
            right = HIGH.add(low, HIGH.multiply(ratio, HIGH.subtract(high, low)))
            f_right = function(right)
    return (left, f_left) if f_left <= f_right else (right, f_right)


def cks_true(rho: Fraction, delta: Fraction) -> tuple[Decimal, Decimal]:
    """(argmin alpha, inf epsilon) of the CKS bound, by golden section on the objective itself."""
    r, d = exact_decimal(rho), exact_decimal(delta)
    scale = HIGH.sqrt(HIGH.divide(log_inverse(delta), r))  # the Bun–Steinke optimum is 1 + scale
    low = HIGH.add(1, HIGH.multiply(scale, Decimal("1e-6")))
    high = HIGH.add(HIGH.add(1, HIGH.multiply(2, scale)), 1)
    return golden_minimum(lambda alpha: cks_objective(r, d, alpha), low, high)


def cks_delta(rho: Decimal, epsilon: Decimal, alpha: Decimal) -> Decimal:
    """CKS 2020 Cor. 13 in its original form: delta = e^((a-1)(a rho - eps)) (1 - 1/a)^a / (a - 1)."""
    a1 = HIGH.subtract(alpha, 1)
    exponent = HIGH.multiply(a1, HIGH.subtract(HIGH.multiply(alpha, rho), epsilon))
    factor = HIGH.power(HIGH.subtract(1, HIGH.divide(1, alpha)), alpha)
    return HIGH.divide(HIGH.multiply(HIGH.exp(exponent), factor), a1)


def advanced_true(epsilon: Fraction, k: int, delta_prime: Fraction) -> tuple[Decimal, Decimal]:
    """(Dwork–Roth Thm. 3.20 epsilon', simplified 2 epsilon sqrt(2k ln(1/delta'))) at 80 digits."""
    e = exact_decimal(epsilon)
    root_term = HIGH.multiply(e, HIGH.sqrt(HIGH.multiply(2 * k, log_inverse(delta_prime))))
    wide = decimal.Context(prec=160)  # e^epsilon - 1 cancels for small epsilon
    expm1 = HIGH.plus(wide.subtract(wide.exp(e), 1))
    return HIGH.add(root_term, HIGH.multiply(HIGH.multiply(k, e), expm1)), HIGH.multiply(2, root_term)


# ---------------------------------------------------------------------------------------------
# Sequential and parallel composition: exact


def test_sequential_composition_sums_exactly():
    assert sequential_composition([PureBudget(Fraction(1, 2)), PureBudget(Fraction(1, 3))]) == PureBudget(
        Fraction(5, 6)
    )
    parts = [ZCDPBudget(Fraction(1, 8)), ZCDPBudget(Fraction(1, 24)), ZCDPBudget(Fraction(1, 3))]
    assert sequential_composition(parts) == ZCDPBudget(Fraction(1, 2))
    assert sequential_composition((ZCDPBudget(Fraction(1, 7)),)) == ZCDPBudget(Fraction(1, 7))


def test_parallel_composition_takes_the_maximum_exactly():
    parts = [PureBudget(Fraction(1, 10)), PureBudget(Fraction(3, 10)), PureBudget(Fraction(1, 5))]
    assert parallel_composition(parts) == PureBudget(Fraction(3, 10))
    assert parallel_composition([ZCDPBudget(Fraction(1, 8)), ZCDPBudget(Fraction(1, 8))]) == ZCDPBudget(Fraction(1, 8))


def test_composition_accepts_split_values_directly():
    whole = PureBudget(Fraction(1))
    assert sequential_composition(whole.split({"a": 1, "b": 2, "c": 7}).values()) == whole


@pytest.mark.parametrize("function", [sequential_composition, parallel_composition])
def test_composition_rejects_mixed_empty_and_non_budgets(function):
    name = function.__name__
    mixed = [PureBudget(Fraction(1)), ZCDPBudget(Fraction(1))]
    with pytest.raises(ParameterError, match=re.escape(f"{name}: budgets (a mix of PureBudget and ZCDPBudget)")):
        function(mixed)
    with pytest.raises(ParameterError, match=re.escape(f"{name}: budgets (empty) must hold at least one budget")):
        function([])
    with pytest.raises(ParameterError, match=re.escape(f"{name}: budgets[1] (of type float) must be a PureBudget")):
        function([PureBudget(Fraction(1)), 0.5])
    with pytest.raises(ParameterError, match=re.escape(f"{name}: budgets (of type NoneType) must be a sequence")):
        function(None)
    with pytest.raises(ParameterError, match=re.escape(f"{name}: budgets[0] (of type str)")):
        function("epsilon")


weights = st.dictionaries(st.text(min_size=1, max_size=5), st.integers(0, 1000), min_size=1, max_size=8).filter(
    lambda d: sum(d.values()) > 0
)


@settings(max_examples=50)
@given(st.fractions(min_value=Fraction(1, 10**6), max_value=10), weights, st.booleans())
def test_split_budgets_compose_back_to_the_whole(total, weights, pure):
    whole = PureBudget(total) if pure else ZCDPBudget(total)
    parts = list(whole.split(weights).values())
    assert sequential_composition(parts) == whole
    largest = parallel_composition(parts)
    assert type(largest) is type(whole)
    assert largest.amount == max(part.amount for part in parts) <= whole.amount


# ---------------------------------------------------------------------------------------------
# Advanced composition


@pytest.mark.parametrize(
    ("epsilon", "k", "delta_prime"),
    [
        (Fraction(1, 10), 100, Fraction(1, 10**6)),
        (Fraction(1, 100), 1000, Fraction(1, 10**9)),
        (Fraction(1, 10**6), 10**6, Fraction(1, 10**12)),
        (Fraction(1, 2), 10, Fraction(1, 100)),
        (Fraction(2), 3, Fraction(1, 10**5)),
    ],
)
def test_advanced_composition_matches_high_precision(epsilon, k, delta_prime):
    tight, simple = advanced_true(epsilon, k, delta_prime)
    result = advanced_composition(epsilon, k, delta_prime)
    assert_rounded_up(result.epsilon, tight)
    assert result.delta == delta_prime
    if simple >= tight:
        assert_rounded_up(advanced_composition_simple(epsilon, k, delta_prime).epsilon, simple)


def test_advanced_composition_hand_values():
    # epsilon = 0.1, k = 100, delta' = 1e-6: sqrt(200 ln 1e6) = 52.565..., so
    # tight = 5.2565 + 10 (e^0.1 - 1) = 5.2565 + 1.0517 = 6.3082; simple = 2 * 5.2565 = 10.5130.
    assert float(advanced_composition(0.1, 100, 1e-6).epsilon) == pytest.approx(6.308230950513, rel=1e-12)
    assert float(advanced_composition_simple(0.1, 100, 1e-6).epsilon) == pytest.approx(10.513043539514, rel=1e-12)


def test_per_mechanism_delta_adds_up_exactly():
    result = advanced_composition(Fraction(1, 10), 10, Fraction(1, 10**6), delta=Fraction(1, 10**8))
    assert result.delta == 10 * Fraction(1, 10**8) + Fraction(1, 10**6)
    assert advanced_composition_simple(0.1, 10, 1e-6, 1e-8).delta == Fraction(11, 10**7)
    assert result.epsilon == advanced_composition(Fraction(1, 10), 10, Fraction(1, 10**6)).epsilon


@pytest.mark.parametrize("epsilon", [Fraction(1, 1000), Fraction(1, 100), Fraction(1, 20), Fraction(1, 10)])
@pytest.mark.parametrize("k", [2, 10, 100, 1000])
@pytest.mark.parametrize("delta_prime", [Fraction(1, 10**5), Fraction(1, 10**9)])
def test_tight_form_is_at_most_simplified_form_for_small_epsilon(epsilon, k, delta_prime):
    assert (
        advanced_composition(epsilon, k, delta_prime).epsilon
        <= advanced_composition_simple(epsilon, k, delta_prime).epsilon
    )


@pytest.mark.parametrize("epsilon", [Fraction(1, 100), Fraction(1, 2), Fraction(1), Fraction(3)])
def test_advanced_composition_of_one_mechanism_is_worse_than_epsilon(epsilon):
    # For k = 1 the bound is epsilon (sqrt(2 ln(1/delta')) + e^epsilon - 1) > epsilon whenever
    # delta' < e^-1/2: the theorem only pays off for many mechanisms (documented in the docstring).
    assert advanced_composition(epsilon, 1, Fraction(1, 10**6)).epsilon > epsilon


def test_advanced_composition_loses_to_sequential_composition_for_large_epsilon():
    k, epsilon = 10, Fraction(2)
    assert advanced_composition(epsilon, k, Fraction(1, 10**6)).epsilon > k * epsilon


def test_simplified_form_refuses_where_it_would_understate_the_loss():
    # epsilon = 1, k = 1000, delta' = 1e-6: k (e - 1) = 1718 > sqrt(2000 ln 1e6) = 166, so
    # 2 epsilon sqrt(2k ln(1/delta')) = 332 would be below Thm. 3.20's 1884.
    with pytest.raises(ParameterError, match=re.escape("epsilon (1) must satisfy k (e^epsilon - 1) <= sqrt(")):
        advanced_composition_simple(1, 1000, 1e-6)
    tight, simple = advanced_true(Fraction(1), 1000, Fraction(1, 10**6))
    assert simple < tight
    assert_rounded_up(advanced_composition(1, 1000, 1e-6).epsilon, tight)


@pytest.mark.parametrize("function", [advanced_composition, advanced_composition_simple])
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 10, 1e-6), "epsilon (0) must be positive"),
        ((-1, 10, 1e-6), "epsilon (-1) must be positive"),
        ((float("nan"), 10, 1e-6), "epsilon (nan) must be a finite number"),
        ((float("inf"), 10, 1e-6), "epsilon (inf) must be a finite number"),
        ((True, 10, 1e-6), "epsilon (a boolean) must be a number"),
        (("abc", 10, 1e-6), "epsilon ('abc') must be a number"),
        ((0.1, 0, 1e-6), "k (0) must be a positive integer"),
        ((0.1, -3, 1e-6), "k (-3) must be a positive integer"),
        ((0.1, 2.5, 1e-6), "k (2.5) must be a positive integer"),
        ((0.1, float("nan"), 1e-6), "k (nan) must be a finite number"),
        ((0.1, True, 1e-6), "k (a boolean) must be a number"),
        ((0.1, 10, 0), "delta_prime (0) must be in (0, 1)"),
        ((0.1, 10, 1), "delta_prime (1) must be in (0, 1)"),
        ((0.1, 10, -0.5), "delta_prime (-0.5) must be in (0, 1)"),
        ((0.1, 10, float("inf")), "delta_prime (inf) must be a finite number"),
        ((0.1, 10, 1e-6, 1), "delta (1) must be in [0, 1)"),
        ((0.1, 10, 1e-6, -1e-9), "delta (-1e-09) must be in [0, 1)"),
        ((0.1, 10, 0.5, 0.05), "k * delta + delta_prime (1) must be below 1"),
        ((10**7, 10, 1e-6), "epsilon (1e+07) must be small enough for e^epsilon to be evaluated"),
    ],
)
def test_advanced_composition_rejects_bad_parameters(function, args, message):
    with pytest.raises(ParameterError, match=re.escape(message)):
        function(*args)


# ---------------------------------------------------------------------------------------------
# Canonne–Kamath–Steinke conversion


@pytest.mark.parametrize(
    ("rho", "delta"),
    [
        (Fraction("0.0117811603952013"), Fraction(1, 10**9)),
        (Fraction(1, 2), Fraction(1, 10**6)),
        (Fraction(1, 10**6), Fraction(1, 10**9)),
        (Fraction(3), Fraction(1, 10**12)),
        (Fraction(100), Fraction(1, 2)),
        (Fraction(1, 7), Fraction(1, 10**30)),
    ],
)
def test_cks_matches_an_independent_high_precision_search(rho, delta):
    alpha, true = cks_true(rho, delta)
    reported = approx_from_zcdp_cks(ZCDPBudget(rho), delta)
    assert reported.delta == delta
    assert_rounded_up(reported.epsilon, true)
    # The reported epsilon satisfies CKS's Cor. 13 as originally stated (delta as a function of epsilon).
    assert cks_delta(exact_decimal(rho), exact_decimal(reported.epsilon), alpha) <= exact_decimal(delta)


def test_cks_is_strictly_tighter_for_typical_values():
    rho, delta = ZCDPBudget(Fraction(1, 2)), Fraction(1, 10**6)
    cks, standard = approx_from_zcdp_cks(rho, delta).epsilon, approx_from_zcdp(rho, delta).epsilon
    assert cks < standard - Fraction(1, 2)  # 5.2215 against 5.7565


@pytest.mark.parametrize("rho", [Fraction(1, 10**9), Fraction(1, 1000), Fraction(1, 10), Fraction(1), Fraction(50)])
@pytest.mark.parametrize("delta", [Fraction(1, 10**20), Fraction(1, 10**9), Fraction(1, 10**5), Fraction(1, 10)])
def test_cks_never_exceeds_bun_steinke_on_a_grid(rho, delta):
    cks = approx_from_zcdp_cks(ZCDPBudget(rho), delta).epsilon
    assert cks <= approx_from_zcdp(ZCDPBudget(rho), delta).epsilon
    if delta <= Fraction(1, 10**5):
        assert cks < approx_from_zcdp(ZCDPBudget(rho), delta).epsilon


def test_cks_reports_a_tiny_epsilon_when_delta_alone_covers_the_mechanism():
    # rho = 0.01 with delta = 1/2: CKS's delta at epsilon = 0 is already below 1/2 (a Gaussian with
    # rho = 0.01 has total-variation distance 0.056), so every epsilon > 0 holds.
    rho, delta = Fraction(1, 100), Fraction(1, 2)
    alpha = Decimal(2)
    assert cks_delta(exact_decimal(rho), Decimal(0), alpha) <= exact_decimal(delta)
    assert approx_from_zcdp_cks(ZCDPBudget(rho), delta).epsilon < Fraction(1, 10**29)


@pytest.mark.parametrize(
    ("budget", "delta", "message"),
    [
        (0.5, 1e-6, "budget (of type float) must be a ZCDPBudget"),
        (PureBudget(Fraction(1)), 1e-6, "budget (of type PureBudget) must be a ZCDPBudget"),
        (ZCDPBudget(Fraction(1)), 0, "delta (0) must be in (0, 1)"),
        (ZCDPBudget(Fraction(1)), 1, "delta (1) must be in (0, 1)"),
        (ZCDPBudget(Fraction(1)), float("nan"), "delta (nan) must be a finite number"),
        (ZCDPBudget(Fraction(1)), True, "delta (a boolean) must be a number"),
        (ZCDPBudget(Fraction(1)), "tiny", "delta ('tiny') must be a number"),
    ],
)
def test_cks_rejects_bad_parameters(budget, delta, message):
    with pytest.raises(ParameterError, match=re.escape(message)):
        approx_from_zcdp_cks(budget, delta)


# ---------------------------------------------------------------------------------------------
# Rényi DP


def test_rdp_gaussian_hand_computed():
    assert rdp_gaussian(1, 2, 3) == Fraction(3, 8)
    assert rdp_gaussian(2, 3, Fraction(5, 2)) == Fraction(5, 9)  # 5/2 * 4 / 18
    assert rdp_gaussian(Fraction(1, 2), Fraction(1, 10), 2) == Fraction(25)


@settings(max_examples=50)
@given(
    st.fractions(min_value=Fraction(1, 100), max_value=100, max_denominator=1000),
    st.fractions(min_value=Fraction(1, 100), max_value=100, max_denominator=1000),
    st.fractions(min_value=Fraction(101, 100), max_value=1000, max_denominator=1000),
)
def test_rdp_gaussian_is_alpha_times_the_zcdp_rho(sensitivity, sigma, alpha):
    rho = ZCDPBudget(sensitivity**2 / (2 * sigma**2)).rho
    assert rdp_gaussian(sensitivity, sigma, alpha) == alpha * rho


@pytest.mark.parametrize(
    ("sensitivity", "sigma", "delta"),
    [
        (1, 1, Fraction(1, 10**9)),
        (1, 10, Fraction(1, 10**6)),
        (2, Fraction(1, 3), Fraction(1, 10**5)),
        (1, 1000, Fraction(1, 10**9)),
    ],
)
def test_gaussian_rdp_conversion_reaches_the_bun_steinke_value(sensitivity, sigma, delta):
    # RDP(alpha) = alpha rho, so min over alpha of alpha rho + ln(1/delta) / (alpha - 1) is
    # rho + 2 sqrt(rho ln(1/delta)), attained at alpha = 1 + sqrt(ln(1/delta) / rho). The search gets
    # there to within rounding; it can never go below (that would be an invalid bound).
    rho = Fraction(sensitivity) ** 2 / (2 * Fraction(sigma) ** 2)
    reported = approx_from_gaussian_rdp(sensitivity, sigma, delta)
    assert_rounded_up(reported.epsilon, bun_steinke(rho, delta))
    assert reported.epsilon <= approx_from_zcdp(ZCDPBudget(rho), delta).epsilon * (1 + TOLERANCE)
    assert approx_from_zcdp_cks(ZCDPBudget(rho), delta).epsilon < reported.epsilon


def test_rdp_conversion_with_explicit_orders_uses_only_those():
    rho, delta = Fraction(1, 10), Fraction(1, 10**6)
    log_term = log_inverse(delta)
    r = exact_decimal(rho)
    # alpha = 2: 0.2 + 13.8155 = 14.0155; alpha = 3: 0.3 + 6.9078 = 7.2078; the best grid value is 2.551.
    expected = min(HIGH.add(2 * r, log_term), HIGH.add(3 * r, HIGH.divide(log_term, 2)))
    assert_rounded_up(approx_from_rdp(lambda alpha: alpha * rho, delta, alphas=[2, 3]).epsilon, expected)
    assert_rounded_up(approx_from_rdp(lambda alpha: alpha * rho, delta).epsilon, bun_steinke(rho, delta))


def test_rdp_conversion_extends_the_grid_for_very_small_and_very_large_rho():
    delta = Fraction(1, 10**9)
    for rho in (Fraction(1, 10**12), Fraction(10**4)):  # optimal alpha ~ 4.6e6 and ~ 1.045
        reported = approx_from_rdp(lambda alpha, rho=rho: alpha * rho, delta).epsilon
        assert_rounded_up(reported, bun_steinke(rho, delta))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: rdp_gaussian(0, 1, 2), "l2_sensitivity (0) must be positive"),
        (lambda: rdp_gaussian(1, -1, 2), "sigma (-1) must be positive"),
        (lambda: rdp_gaussian(1, float("inf"), 2), "sigma (inf) must be a finite number"),
        (lambda: rdp_gaussian(1, 1, 1), "alpha (1) must be greater than 1"),
        (lambda: rdp_gaussian(1, 1, 0.5), "alpha (0.5) must be greater than 1"),
        (lambda: rdp_gaussian(1, 1, float("nan")), "alpha (nan) must be a finite number"),
        (lambda: rdp_gaussian(True, 1, 2), "l2_sensitivity (a boolean) must be a number"),
        (lambda: rdp_gaussian(1, "wide", 2), "sigma ('wide') must be a number"),
        (lambda: approx_from_gaussian_rdp(1, 0, 1e-6), "sigma (0) must be positive"),
        (lambda: approx_from_gaussian_rdp(1, 1, 0), "delta (0) must be in (0, 1)"),
        (lambda: approx_from_gaussian_rdp(float("nan"), 1, 1e-6), "l2_sensitivity (nan) must be a finite number"),
        (lambda: approx_from_rdp(0.5, 1e-6), "rdp_curve (of type float) must be callable"),
        (lambda: approx_from_rdp(lambda a: a, 1.5), "delta (1.5) must be in (0, 1)"),
        (lambda: approx_from_rdp(lambda a: -a, 1e-6), "rdp_curve(1.25) (-1.25) must be non-negative"),
        (lambda: approx_from_rdp(lambda a: float("nan"), 1e-6), "rdp_curve(1.25) (nan) must be a finite number"),
        (lambda: approx_from_rdp(lambda a: math.inf, 1e-6), "rdp_curve(1.25) (inf) must be a finite number"),
        (lambda: approx_from_rdp(lambda a: a, 1e-6, alphas=[]), "alphas (empty) must hold at least one order"),
        (lambda: approx_from_rdp(lambda a: a, 1e-6, alphas=[2, 1]), "alphas[1] (1) must be greater than 1"),
        (lambda: approx_from_rdp(lambda a: a, 1e-6, alphas=[True]), "alphas[0] (a boolean) must be a number"),
        (lambda: approx_from_rdp(lambda a: a, 1e-6, alphas="23"), "alphas (of type str) must be a sequence"),
        (lambda: approx_from_rdp(lambda a: a, 1e-6, alphas=5), "alphas (of type int) must be a sequence"),
    ],
)
def test_rdp_functions_reject_bad_parameters(call, message):
    with pytest.raises(ParameterError, match=re.escape(message)):
        call()


# ---------------------------------------------------------------------------------------------
# Monotonicity and ordering of the conversions

rhos = st.fractions(min_value=Fraction(1, 10**8), max_value=100, max_denominator=10**12)
deltas = st.fractions(min_value=Fraction(1, 10**20), max_value=Fraction(3, 4), max_denominator=10**21)


def conversions(rho: Fraction, delta: Fraction) -> list[ApproxBudget]:
    budget = ZCDPBudget(rho)
    return [
        approx_from_zcdp(budget, delta),
        approx_from_zcdp_cks(budget, delta),
        approx_from_rdp(lambda alpha: alpha * rho, delta),
    ]


@settings(max_examples=25, deadline=None)
@given(rhos, rhos, deltas)
def test_conversions_are_monotone_in_rho(rho_a, rho_b, delta):
    low, high = sorted((rho_a, rho_b))
    for smaller, larger in zip(conversions(low, delta), conversions(high, delta), strict=True):
        assert smaller.epsilon <= larger.epsilon


@settings(max_examples=25, deadline=None)
@given(rhos, deltas, deltas)
def test_conversions_are_monotone_in_delta(rho, delta_a, delta_b):
    low, high = sorted((delta_a, delta_b))
    for strict, loose in zip(conversions(rho, low), conversions(rho, high), strict=True):
        assert strict.epsilon >= loose.epsilon


@settings(max_examples=40, deadline=None)
@given(rhos, deltas)
def test_cks_at_most_bun_steinke_at_most_rdp_grid(rho, delta):
    standard, cks, rdp = conversions(rho, delta)
    assert cks.epsilon <= standard.epsilon
    # The RDP route optimises the same expression as Bun–Steinke over a finite search.
    assert rdp.epsilon >= Fraction(bun_steinke(rho, delta))
    assert rdp.epsilon <= standard.epsilon * (1 + TOLERANCE)
