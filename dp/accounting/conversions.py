"""Tighter conversions between zCDP, Renyi DP and (epsilon, delta)-DP.

The zCDP to (epsilon, delta) conversion of Canonne, Kamath & Steinke (2020) and its inverse, and the
Renyi-DP accountant of the Gaussian mechanism (Mironov 2017), each evaluated with :mod:`decimal` and rounded
towards more privacy loss.
"""

from __future__ import annotations

import decimal
import functools
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction

from dprelease.dp.accounting.budget import (
    _DEFAULT_ORDERS,
    _GOLDEN_STEPS,
    _MAX_EXTENSION,
    _PRECISION,
    _SIGNIFICANT,
    ApproxBudget,
    ZCDPBudget,
    _ctx,
    _dec,
    _positive,
    _round_down,
    _round_up,
    approx_from_zcdp,
    to_fraction,
    validate_delta,
    zcdp_from_approx,
)
from dprelease.dp.accounting.composition import _log_inverse, _order, _zcdp_budget
from dprelease.dp.errors import ParameterError

# ---------------------------------------------------------------------------------------------
# Tighter zCDP -> (epsilon, delta) conversion

# Bound on the rounding error of a _PRECISION-digit evaluation of the CKS formula, as a multiple of
# its terms' magnitudes (the true error is below 10**-58 of them; this leaves a wide margin).
_ALLOWANCE = decimal.Decimal(10) ** -(_PRECISION - 10)
# Reported when the CKS bound is not positive: the guarantee then holds for every epsilon > 0.
_SMALLEST_EPSILON = decimal.Decimal(10) ** -30


def _cks_epsilon(rho: decimal.Decimal, log_term: decimal.Decimal, alpha: decimal.Decimal) -> decimal.Decimal | None:
    """An upper bound on the CKS epsilon at one order alpha > 1 (None if alpha rounds to 1).

    The decimal value plus an allowance for its rounding error, so that a cancellation between the
    terms (delta close to 1) cannot turn a positive epsilon into a smaller one.
    """
    ctx = _ctx()
    alpha_minus_one = ctx.subtract(alpha, 1)  # exact: alpha has at most _PRECISION digits and alpha > 1
    if alpha_minus_one <= 0:
        return None
    log_alpha = ctx.ln(alpha)
    linear = ctx.multiply(alpha, rho)
    log_ratio = ctx.ln(ctx.divide(alpha_minus_one, alpha))
    quotient = ctx.divide(ctx.subtract(log_term, log_alpha), alpha_minus_one)
    value = ctx.add(ctx.add(linear, log_ratio), quotient)
    magnitude = ctx.add(
        ctx.add(ctx.add(linear, abs(log_ratio)), 1),
        ctx.divide(ctx.add(ctx.add(log_term, abs(log_alpha)), 1), alpha_minus_one),
    )
    return ctx.add(value, ctx.multiply(magnitude, _ALLOWANCE))


def _cks_optimal_order(rho: decimal.Decimal, log_term: decimal.Decimal) -> decimal.Decimal:
    """The order alpha minimising the CKS bound: the root of rho (alpha - 1)^2 + ln(alpha) = ln(1/delta).

    The bound's derivative in alpha is rho - (ln(1/delta) - ln alpha) / (alpha - 1)^2, negative below
    this root and positive above it, so the root is the global minimum. Safeguarded Newton on
    [1, 1 + sqrt(ln(1/delta) / rho)] (the left end has a negative residual, the right a positive one).
    """
    ctx = _ctx()
    low = decimal.Decimal(1)
    high = ctx.add(1, ctx.sqrt(ctx.divide(log_term, rho)))
    alpha = high
    tolerance = decimal.Decimal(10) ** (_SIGNIFICANT - _PRECISION + 10)
    for _ in range(400):
        excess = ctx.subtract(alpha, 1)
        residual = ctx.subtract(ctx.add(ctx.multiply(rho, ctx.multiply(excess, excess)), ctx.ln(alpha)), log_term)
        if residual > 0:
            high = alpha
        else:
            low = alpha
        slope = ctx.add(ctx.multiply(ctx.multiply(2, rho), excess), ctx.divide(1, alpha))
        candidate = ctx.subtract(alpha, ctx.divide(residual, slope))
        if not low < candidate < high:
            candidate = ctx.divide(ctx.add(low, high), 2)
        if abs(ctx.subtract(candidate, alpha)) <= ctx.multiply(tolerance, alpha):
            return candidate
        alpha = candidate
    return alpha  # pragma: no cover - Newton converges in a handful of steps


def approx_from_zcdp_cks(budget: ZCDPBudget, delta: object) -> ApproxBudget:
    """rho-zCDP implies (epsilon, delta)-DP with the tighter conversion of Canonne, Kamath & Steinke.

    Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for Differential Privacy", Prop. 12 and
    Cor. 13: rho-zCDP implies (epsilon, delta)-DP for every alpha > 1 with
    delta = e^((alpha - 1)(alpha rho - epsilon)) (1 - 1/alpha)^alpha / (alpha - 1). Solved for epsilon:

        epsilon = inf over alpha > 1 of
                  alpha rho + (ln(1/(alpha delta)) + (alpha - 1) ln(1 - 1/alpha)) / (alpha - 1)

    (the same as Balle et al. 2020, "Hypothesis testing interpretations and Rényi DP", Thm. 21,
    applied to the Rényi curve alpha rho). Each term is at most the Bun–Steinke term
    alpha rho + ln(1/delta) / (alpha - 1), so the result never exceeds :func:`approx_from_zcdp`.

    Every alpha gives a valid bound, so the minimising alpha is found numerically (see
    :func:`_cks_optimal_order`) and only the final evaluation, at that exact alpha, needs to be
    rigorous: it is done in decimal, increased by a bound on its rounding error, and rounded up. The
    result is also capped by the Bun–Steinke value.

    If the bound is not positive (only for large delta, e.g. rho = 0.01 and delta = 1/2), the delta
    of Prop. 12 at epsilon = 0 is already at most ``delta``, so every epsilon > 0 is valid; 1e-30 is
    reported (a floor, which keeps the result monotone in rho and delta).

    Args:
        budget: The zCDP guarantee.
        delta: In (0, 1).

    Returns:
        (epsilon, delta), epsilon rounded up.

    Raises:
        ParameterError: If ``budget`` is not a ZCDPBudget or delta is not in (0, 1).

    >>> rho, delta = ZCDPBudget(Fraction(1, 2)), Fraction(1, 10**6)
    >>> round(float(approx_from_zcdp_cks(rho, delta).epsilon), 6), round(float(approx_from_zcdp(rho, delta).epsilon), 6)
    (5.221534, 5.756522)
    """
    exact_budget = _zcdp_budget(budget, "budget")
    exact_delta = validate_delta(delta)
    standard = approx_from_zcdp(exact_budget, exact_delta)
    rho = _dec(exact_budget.rho)
    log_term = _log_inverse(exact_delta)
    ctx = _ctx()
    candidates = (
        _cks_optimal_order(rho, log_term),
        ctx.add(1, ctx.sqrt(ctx.divide(log_term, rho))),  # Bun–Steinke's optimal order
    )
    values = [value for alpha in candidates if (value := _cks_epsilon(rho, log_term, alpha)) is not None]
    if not values:  # pragma: no cover - only if sqrt(ln(1/delta) / rho) < 10**-_PRECISION
        return standard
    epsilon = _round_up(max(min(values), _SMALLEST_EPSILON))
    return ApproxBudget(min(epsilon, standard.epsilon), exact_delta)


def rdp_gaussian(l2_sensitivity: object, sigma: object, alpha: object) -> Fraction:
    """The Rényi divergence of order alpha of the Gaussian mechanism: alpha l2_sensitivity^2 / (2 sigma^2); exact.

    Mironov 2017, "Rényi Differential Privacy", Table II (N(0, sigma^2) noise on a query of L2
    sensitivity Delta is (alpha, alpha Delta^2 / (2 sigma^2))-RDP for every alpha > 1). This is the
    rho-zCDP curve alpha rho with rho = Delta^2 / (2 sigma^2) (Bun & Steinke 2016, Prop. 1.6);
    Canonne, Kamath & Steinke 2020 show the discrete Gaussian has the same curve.

    Args:
        l2_sensitivity: Positive.
        sigma: The noise's standard deviation; positive.
        alpha: The Rényi order; greater than 1.

    Returns:
        The RDP epsilon at order alpha.

    Raises:
        ParameterError: On invalid parameters.

    >>> rdp_gaussian(1, 2, 3)
    Fraction(3, 8)
    """
    exact_sensitivity = _positive(l2_sensitivity, "l2_sensitivity")
    exact_sigma = _positive(sigma, "sigma")
    exact_alpha = _order(alpha, "alpha")
    return exact_alpha * exact_sensitivity**2 / (2 * exact_sigma**2)


class _RDPBound:
    """epsilon(alpha) = rdp(alpha) + ln(1/delta) / (alpha - 1), evaluated exactly-then-decimal and memoised."""

    def __init__(self, rdp_curve: Callable[[Fraction], Fraction], log_term: decimal.Decimal):
        self.rdp_curve = rdp_curve
        self.log_term = log_term
        self.values: dict[Fraction, decimal.Decimal] = {}

    def __call__(self, alpha: Fraction) -> decimal.Decimal:
        if alpha not in self.values:
            name = f"rdp_curve({float(alpha):g})"
            rdp = to_fraction(self.rdp_curve(alpha), name)
            if rdp < 0:
                raise ParameterError(f"{name} ({float(rdp):g}) must be non-negative")
            ctx = _ctx()
            self.values[alpha] = ctx.add(_dec(rdp), ctx.divide(self.log_term, _dec(alpha - 1)))
        return self.values[alpha]

    def best(self) -> decimal.Decimal:
        return min(self.values.values())


def _search_orders(bound: _RDPBound) -> None:
    """Evaluate the default grid, extend it while the best order is at an end, then golden-section search."""
    orders = list(_DEFAULT_ORDERS)
    for _ in range(_MAX_EXTENSION):
        best = min(orders, key=bound)
        if best == orders[-1]:
            orders.append(orders[-1] * 2)
        elif best == orders[0]:
            orders.insert(0, 1 + (orders[0] - 1) / 2)
        else:
            break
    index = orders.index(min(orders, key=bound))
    low, high = orders[max(index - 1, 0)], orders[min(index + 1, len(orders) - 1)]
    # Golden-section search over [low, high]; any order is valid, so this only needs to be good, not exact.
    # Orders keep denominators below 10**20, so the curve sees short fractions.
    ratio = Fraction(decimal.Decimal(5).sqrt(_ctx()) - 1) / 2
    ratio = ratio.limit_denominator(10**20)
    left, right = high - ratio * (high - low), low + ratio * (high - low)
    for _ in range(_GOLDEN_STEPS):
        left, right = left.limit_denominator(10**20), right.limit_denominator(10**20)
        if left <= 1 or right - left <= 0:
            break
        if bound(left) <= bound(right):
            high = right
            right = left
            left = high - ratio * (high - low)
        else:
            low = left
            left = right
            right = low + ratio * (high - low)


def approx_from_rdp(
    rdp_curve: Callable[[Fraction], Fraction], delta: object, alphas: Sequence[object] | None = None
) -> ApproxBudget:
    """Convert a Rényi-DP curve to (epsilon, delta)-DP.

    Mironov 2017, "Rényi Differential Privacy", Prop. 3: an (alpha, r)-RDP mechanism is
    (r + ln(1/delta) / (alpha - 1), delta)-DP. So

        epsilon = min over alpha of rdp_curve(alpha) + ln(1/delta) / (alpha - 1),

    rounded up. Each candidate is evaluated from the exact ``rdp_curve(alpha)``; the search only
    chooses which valid bound to report.

    With ``alphas=None`` the default grid 1.25, 1.5, ..., 256 is evaluated, extended (doubling
    beyond 256, halving towards 1) while its best point is at an end, and refined by a golden-section
    search between the best point's neighbours. Given ``alphas``, exactly those orders are used.

    For the Gaussian mechanism (curve alpha rho), the optimum is rho + 2 sqrt(rho ln(1/delta)), the
    Bun–Steinke value; :func:`approx_from_zcdp_cks` is tighter for such curves.

    Args:
        rdp_curve: Maps an order alpha > 1 (a Fraction) to the mechanism's RDP epsilon at alpha (a
            non-negative Fraction, or another exact number accepted by :func:`to_fraction`).
        delta: In (0, 1).
        alphas: The orders to try, each greater than 1; default: the grid described above.

    Returns:
        (epsilon, delta), epsilon rounded up.

    Raises:
        ParameterError: On invalid parameters or alphas, or a negative or non-finite value of the curve.

    At alpha = 2 the bound below is 2/8 + ln 2 = 0.94314718055994530..., reported rounded up:

    >>> approx_from_rdp(lambda alpha: alpha / 8, Fraction(1, 2), alphas=[2])
    ApproxBudget(epsilon=Fraction(943147180559947, 1000000000000000), delta=Fraction(1, 2))
    """
    if not callable(rdp_curve):
        raise ParameterError(f"rdp_curve (of type {type(rdp_curve).__name__}) must be callable")
    exact_delta = validate_delta(delta)
    bound = _RDPBound(rdp_curve, _log_inverse(exact_delta))
    if alphas is None:
        _search_orders(bound)
    else:
        if isinstance(alphas, str | bytes) or not isinstance(alphas, Iterable):
            raise ParameterError(f"alphas (of type {type(alphas).__name__}) must be a sequence of orders")
        orders = [_order(alpha, f"alphas[{index}]") for index, alpha in enumerate(alphas)]
        if not orders:
            raise ParameterError("alphas (empty) must hold at least one order")
        for order in orders:
            bound(order)
    return ApproxBudget(_round_up(bound.best()), exact_delta)


def approx_from_gaussian_rdp(l2_sensitivity: object, sigma: object, delta: object) -> ApproxBudget:
    """(epsilon, delta) of the Gaussian mechanism through its Rényi-DP curve (Mironov 2017, Prop. 3).

    epsilon = min over alpha of alpha l2_sensitivity^2 / (2 sigma^2) + ln(1/delta) / (alpha - 1),
    rounded up (see :func:`rdp_gaussian` and :func:`approx_from_rdp`).

    Args:
        l2_sensitivity: Positive.
        sigma: The noise's standard deviation; positive.
        delta: In (0, 1).

    Returns:
        (epsilon, delta).

    Raises:
        ParameterError: On invalid parameters.

    >>> approx_from_gaussian_rdp(1, 10, Fraction(1, 10**6)).epsilon < 1
    True
    """
    exact_sensitivity = _positive(l2_sensitivity, "l2_sensitivity")
    exact_sigma = _positive(sigma, "sigma")
    exact_delta = validate_delta(delta)
    return approx_from_rdp(lambda alpha: rdp_gaussian(exact_sensitivity, exact_sigma, alpha), exact_delta)


def zcdp_from_approx_cks(epsilon: object, delta: object) -> ZCDPBudget:
    """The largest (short-decimal) rho whose CKS conversion implies (epsilon, delta)-DP.

    Inverts :func:`approx_from_zcdp_cks` by bisection on rho, starting from the Bun–Steinke rho
    (:func:`zcdp_from_approx`, always feasible since CKS is never looser). Every rho returned is
    checked with the rounded-up CKS epsilon, so the guarantee holds exactly as reported; the
    bisection only decides how close to the optimum the answer gets (relative 1e-12).

    >>> rho = zcdp_from_approx_cks(1, Fraction(1, 10**9))
    >>> approx_from_zcdp_cks(rho, Fraction(1, 10**9)).epsilon <= 1 and rho > zcdp_from_approx(1, Fraction(1, 10**9))
    True
    """
    return _zcdp_from_approx_cks(_positive(epsilon, "epsilon"), validate_delta(delta))


@functools.lru_cache(maxsize=256)
def _zcdp_from_approx_cks(exact_epsilon: Fraction, exact_delta: Fraction) -> ZCDPBudget:
    """:func:`zcdp_from_approx_cks` on validated exact values, remembered.

    The bisection takes tens of milliseconds, and every stage of a release re-reads its spec.
    """

    def fits(rho: Fraction) -> bool:
        return approx_from_zcdp_cks(ZCDPBudget(rho), exact_delta).epsilon <= exact_epsilon

    low = zcdp_from_approx(exact_epsilon, exact_delta).rho
    high = low * 2
    while fits(high):
        low, high = high, high * 2
    while (high - low) > low * Fraction(1, 10**12):
        middle = _round_down(_dec((low + high) / 2))
        if middle <= low:
            break
        if fits(middle):
            low = middle
        else:
            high = middle
    return ZCDPBudget(low)
