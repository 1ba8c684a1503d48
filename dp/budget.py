"""Privacy budgets as exact values.

Budgets are frozen dataclasses over :class:`fractions.Fraction`. Every conversion that needs an
irrational function (square roots, logarithms) is evaluated with :mod:`decimal` at high precision
and rounded *towards more privacy loss* when a loss is reported, and *towards less budget* (so
more noise) when a budget is derived. The rounded values are then short decimals, so reports stay
readable.

>>> PureBudget(Fraction(1, 2)) + PureBudget(Fraction(1, 4))
PureBudget(epsilon=Fraction(3, 4))
>>> zcdp_from_pure(PureBudget(Fraction(1, 10)))
ZCDPBudget(rho=Fraction(1, 200))
>>> [b.rho for b in ZCDPBudget(Fraction(1)).split({"a": 1, "b": 3}).values()]
[Fraction(1, 4), Fraction(3, 4)]

Composition (sequential, parallel, advanced) and the Rényi-DP accountant of the Gaussian mechanism
follow the same rule: a reported epsilon is rounded up.
"""

from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, overload

import numpy as np

from dprelease.dp.errors import ParameterError

Definition = Literal["pure", "zcdp"]

# Working precision for irrational conversions, and the number of significant digits kept when a
# result is rounded to a short decimal. The gap between the two absorbs the (≤ 1 ulp) error of
# Decimal's ln/sqrt, so directed rounding at _SIGNIFICANT digits is always on the safe side.
_PRECISION = 60
_SIGNIFICANT = 15


def float_at_least(x: Fraction) -> float:
    """The smallest double >= x: a noise scale rounded towards more noise.

    >>> float_at_least(Fraction(1, 3)) >= Fraction(1, 3)
    True
    """
    f = float(x)
    return f if Fraction(f) >= x else math.nextafter(f, math.inf)


def positive_number(value: object, name: str, owner: str) -> Fraction:
    """A positive, finite int / Fraction / float as an exact fraction (floats rounded upwards).

    A float is read both as its exact binary value and as the decimal the user wrote; the larger
    one is kept, so a sensitivity is never understated.

    Raises:
        ParameterError: Naming ``owner`` and ``name``, if the value is not a positive finite number.
    """
    if isinstance(value, bool) or not isinstance(value, int | Fraction | float | np.integer | np.floating):
        raise ParameterError(f"{owner}: {name} ({value!r}) must be a positive number")
    if isinstance(value, float | np.floating):
        if not math.isfinite(value):
            raise ParameterError(f"{owner}: {name} ({value}) must be finite")
        exact = max(Fraction(float(value)), Fraction(repr(float(value))))
    else:
        exact = Fraction(int(value)) if isinstance(value, np.integer) else Fraction(value)
    if exact <= 0:
        raise ParameterError(f"{owner}: {name} ({value}) must be positive")
    return exact


def to_fraction(value: object, name: str) -> Fraction:
    """Convert a public numeric setting to an exact fraction.

    Floats are read through their shortest decimal representation, so ``1e-9`` becomes exactly
    ``1/10**9`` (what the user wrote), not the binary double nearest to it.

    Args:
        value: An int, float, Fraction, Decimal or decimal string.
        name: The setting's name, used in the error message.

    Returns:
        The exact value.

    Raises:
        ParameterError: For booleans, non-numeric values, NaN and infinities.

    >>> to_fraction(1e-9, "delta")
    Fraction(1, 1000000000)
    >>> to_fraction("1/3", "epsilon")
    Fraction(1, 3)
    """
    if isinstance(value, bool):
        raise ParameterError(f"{name} (a boolean) must be a number")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ParameterError(f"{name} ({value}) must be a finite number")
        return Fraction(repr(value))
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise ParameterError(f"{name} ({value}) must be a finite number")
        return Fraction(value)
    if isinstance(value, str):
        try:
            result = Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            raise ParameterError(f"{name} ({value!r}) must be a number") from None
        return result
    raise ParameterError(f"{name} (of type {type(value).__name__}) must be a number")


def _positive(value: object, name: str) -> Fraction:
    result = to_fraction(value, name)
    if result <= 0:
        raise ParameterError(f"{name} ({float(result):g}) must be positive")
    return result


@dataclass(frozen=True, order=True)
class PureBudget:
    """A pure epsilon-DP budget.

    Attributes:
        epsilon: The privacy-loss bound; positive.
    """

    epsilon: Fraction

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _positive(self.epsilon, "epsilon"))

    @property
    def amount(self) -> Fraction:
        """The budget in the ledger's unit (epsilon)."""
        return self.epsilon

    def __add__(self, other: PureBudget) -> PureBudget:
        return PureBudget(self.epsilon + other.epsilon)

    def split(self, weights: Mapping[str, object]) -> dict[str, PureBudget]:
        """Split by named weights under sequential composition; parts add back to the whole."""
        return {k: PureBudget(v) for k, v in split_exact(self.epsilon, weights).items()}


@dataclass(frozen=True, order=True)
class ZCDPBudget:
    """A rho-zero-concentrated-DP budget (Bun & Steinke 2016).

    Attributes:
        rho: The zCDP parameter; positive.
    """

    rho: Fraction

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", _positive(self.rho, "rho"))

    @property
    def amount(self) -> Fraction:
        """The budget in the ledger's unit (rho)."""
        return self.rho

    def __add__(self, other: ZCDPBudget) -> ZCDPBudget:
        return ZCDPBudget(self.rho + other.rho)

    def split(self, weights: Mapping[str, object]) -> dict[str, ZCDPBudget]:
        """Split by named weights under sequential composition; parts add back to the whole."""
        return {k: ZCDPBudget(v) for k, v in split_exact(self.rho, weights).items()}


@dataclass(frozen=True)
class ApproxBudget:
    """An (epsilon, delta)-DP guarantee, as reported.

    Attributes:
        epsilon: Positive.
        delta: In [0, 1).
    """

    epsilon: Fraction
    delta: Fraction

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _positive(self.epsilon, "epsilon"))
        object.__setattr__(self, "delta", validate_delta(self.delta, allow_zero=True))


Budget = PureBudget | ZCDPBudget


def validate_delta(value: object, *, allow_zero: bool = False) -> Fraction:
    """Check that delta lies in (0, 1) (or [0, 1) when ``allow_zero``)."""
    delta = to_fraction(value, "delta")
    if delta >= 1 or delta < 0 or (delta == 0 and not allow_zero):
        rule = "in [0, 1)" if allow_zero else "in (0, 1)"
        raise ParameterError(f"delta ({float(delta):g}) must be {rule}")
    return delta


def split_exact(total: Fraction, weights: Mapping[str, object]) -> dict[str, Fraction]:
    """Split ``total`` proportionally to non-negative weights, exactly.

    Zero-weight parts are left out (a stage with no budget draws no noise).

    Raises:
        ParameterError: If a weight is negative or not a number, or all weights are zero.
    """
    exact = {name: to_fraction(w, f"allocation.{name}") for name, w in weights.items()}
    for name, w in exact.items():
        if w < 0:
            raise ParameterError(f"allocation.{name} ({float(w):g}) must be non-negative")
    whole = sum(exact.values(), Fraction(0))
    if whole <= 0:
        raise ParameterError("allocation must give a positive weight to at least one stage")
    return {name: total * w / whole for name, w in exact.items() if w > 0}


# ---------------------------------------------------------------------------------------------
# Directed rounding helpers


def _ctx() -> decimal.Context:
    return decimal.Context(prec=_PRECISION)


def _round_up(x: decimal.Decimal) -> Fraction:
    """A short decimal fraction >= x (and >= x plus Decimal's own rounding error)."""
    q = _quantum(x)
    return Fraction(x.quantize(q, rounding=decimal.ROUND_CEILING, context=_ctx())) + Fraction(q)


def _round_down(x: decimal.Decimal) -> Fraction:
    """A short decimal fraction <= x (and <= x minus Decimal's own rounding error)."""
    q = _quantum(x)
    return Fraction(x.quantize(q, rounding=decimal.ROUND_FLOOR, context=_ctx())) - Fraction(q)


def _quantum(x: decimal.Decimal) -> decimal.Decimal:
    exponent = x.adjusted() - _SIGNIFICANT + 1 if x != 0 else -_SIGNIFICANT
    return decimal.Decimal(1).scaleb(exponent)


def _dec(x: Fraction) -> decimal.Decimal:
    ctx = _ctx()
    return ctx.divide(decimal.Decimal(x.numerator), decimal.Decimal(x.denominator))


# ---------------------------------------------------------------------------------------------
# Conversions


def zcdp_from_pure(budget: PureBudget) -> ZCDPBudget:
    """Epsilon-DP implies (epsilon^2 / 2)-zCDP (Bun & Steinke 2016, Prop. 1.4); exact."""
    return ZCDPBudget(budget.epsilon**2 / 2)


def zcdp_from_bounded_range(budget: PureBudget) -> ZCDPBudget:
    """An epsilon-bounded-range mechanism is (epsilon^2 / 8)-zCDP (Cesar & Rogers 2021, Lemma 3.2); exact.

    The exponential mechanism P(i) ∝ exp(epsilon u_i / (2Δ)) is epsilon-bounded-range (Durfee & Rogers
    2019, Lemma 4.2); ``docs/proofs/exponential_bounded_range.md`` has the argument. Only such mechanisms
    may be booked this way: a general epsilon-DP one costs epsilon^2 / 2 (:func:`zcdp_from_pure`).

    >>> zcdp_from_bounded_range(PureBudget(Fraction(1, 10)))
    ZCDPBudget(rho=Fraction(1, 800))
    """
    return ZCDPBudget(budget.epsilon**2 / 8)


def bounded_range_from_zcdp_share(budget: ZCDPBudget) -> PureBudget:
    """The largest short-decimal epsilon whose epsilon-bounded-range mechanism fits in ``budget`` as zCDP.

    An epsilon-bounded-range mechanism is (epsilon^2 / 8)-zCDP, so epsilon = sqrt(8 rho), rounded down.

    >>> e = bounded_range_from_zcdp_share(ZCDPBudget(Fraction(1, 200))).epsilon
    >>> e <= Fraction(1, 5) and zcdp_from_bounded_range(PureBudget(e)).rho <= Fraction(1, 200)
    True
    """
    return _epsilon_within(budget, 8, "an epsilon-bounded-range mechanism")


def pure_from_zcdp_share(budget: ZCDPBudget) -> PureBudget:
    """The largest short-decimal epsilon whose epsilon-DP mechanism fits in ``budget`` as zCDP.

    An epsilon-DP mechanism is (epsilon^2 / 2)-zCDP, so epsilon = sqrt(2 rho), rounded down.

    >>> e = pure_from_zcdp_share(ZCDPBudget(Fraction(1, 200))).epsilon
    >>> e <= Fraction(1, 10) and zcdp_from_pure(PureBudget(e)).rho <= Fraction(1, 200)
    True
    """
    return _epsilon_within(budget, 2, "an epsilon-DP mechanism")


def _epsilon_within(budget: ZCDPBudget, divisor: int, mechanism: str) -> PureBudget:
    """The largest short-decimal epsilon with epsilon² / ``divisor`` <= rho: sqrt(divisor · rho), rounded down."""
    epsilon = _round_down(_dec(divisor * budget.rho).sqrt(_ctx()))
    if epsilon <= 0 or epsilon**2 / divisor > budget.rho:
        raise ParameterError(f"rho ({float(budget.rho):g}) is too small to run {mechanism}")
    return PureBudget(epsilon)


def approx_from_zcdp(budget: ZCDPBudget, delta: object) -> ApproxBudget:
    """rho-zCDP implies (rho + 2 sqrt(rho ln(1/delta)), delta)-DP (Bun & Steinke 2016, Prop. 1.3).

    Epsilon is rounded up.

    >>> approx_from_zcdp(ZCDPBudget(Fraction(1, 2)), Fraction(1, 10**6)).epsilon > Fraction(1, 2)
    True
    """
    exact_delta = validate_delta(delta)
    ctx = _ctx()
    rho = _dec(budget.rho)
    log_term = ctx.ln(ctx.divide(1, _dec(exact_delta)))
    epsilon = rho + 2 * ctx.sqrt(ctx.multiply(rho, log_term))
    return ApproxBudget(_round_up(epsilon), exact_delta)


def zcdp_from_approx(epsilon: object, delta: object) -> ZCDPBudget:
    """The largest (short-decimal) rho whose zCDP guarantee implies (epsilon, delta)-DP.

    Solves rho + 2 sqrt(rho L) = epsilon with L = ln(1/delta): sqrt(rho) = sqrt(L + epsilon) - sqrt(L);
    rounded down, then checked with :func:`approx_from_zcdp` (which rounds up).

    >>> rho = zcdp_from_approx(1, Fraction(1, 10**9))
    >>> approx_from_zcdp(rho, Fraction(1, 10**9)).epsilon <= 1
    True
    """
    exact_epsilon = _positive(epsilon, "epsilon")
    exact_delta = validate_delta(delta)
    ctx = _ctx()
    log_term = ctx.ln(ctx.divide(1, _dec(exact_delta)))
    root = ctx.sqrt(log_term + _dec(exact_epsilon)) - ctx.sqrt(log_term)
    rho = ZCDPBudget(_round_down(ctx.multiply(root, root)))
    if approx_from_zcdp(rho, exact_delta).epsilon > exact_epsilon:  # pragma: no cover - guarded by margin
        rho = ZCDPBudget(rho.rho * (1 - Fraction(1, 10**9)))
    return rho


def budget_total(definition: Definition, epsilon: object, delta: object | None) -> Budget:
    """The ledger-unit budget for a declared (epsilon[, delta]) under the given definition.

    Raises:
        ParameterError: On invalid parameters, or a delta with pure DP / no delta with zCDP.
    """
    if definition == "pure":
        if delta is not None and to_fraction(delta, "delta") != 0:
            raise ParameterError("delta must be absent or 0 under pure DP; use definition 'zcdp' for delta > 0")
        return PureBudget(_positive(epsilon, "epsilon"))
    if delta is None:
        raise ParameterError("delta must be given under zCDP (it is only used to report (epsilon, delta))")
    return zcdp_from_approx_cks(epsilon, delta)


def describe(budget: Budget, delta: Fraction | None = None) -> str:
    """A short human-readable description of a budget (public)."""
    if isinstance(budget, PureBudget):
        return f"epsilon={float(budget.epsilon):.6g}"
    text = f"rho={float(budget.rho):.6g}"
    if delta is not None and delta > 0:
        text += f" (epsilon={float(approx_from_zcdp_cks(budget, delta).epsilon):.6g}, delta={float(delta):.3g})"
    return text


# ---------------------------------------------------------------------------------------------
# Validation helpers for the composition and Rényi-DP functions


def _probability(value: object, name: str, *, allow_zero: bool = False) -> Fraction:
    """Like :func:`validate_delta`, for a probability with another name (``delta_prime``)."""
    result = to_fraction(value, name)
    if result >= 1 or result < 0 or (result == 0 and not allow_zero):
        rule = "in [0, 1)" if allow_zero else "in (0, 1)"
        raise ParameterError(f"{name} ({float(result):g}) must be {rule}")
    return result


def _positive_integer(value: object, name: str) -> int:
    result = to_fraction(value, name)
    if result.denominator != 1 or result <= 0:
        raise ParameterError(f"{name} ({float(result):g}) must be a positive integer")
    return result.numerator


def _order(value: object, name: str) -> Fraction:
    """A Rényi order alpha, which must exceed 1."""
    result = to_fraction(value, name)
    if result <= 1:
        raise ParameterError(f"{name} ({float(result):g}) must be greater than 1")
    return result


def _zcdp_budget(value: object, name: str) -> ZCDPBudget:
    if not isinstance(value, ZCDPBudget):
        raise ParameterError(f"{name} (of type {type(value).__name__}) must be a ZCDPBudget")
    return value


def _log_inverse(probability: Fraction) -> decimal.Decimal:
    """ln(1 / probability) at working precision, for a probability in (0, 1)."""
    ctx = _ctx()
    return ctx.ln(ctx.divide(1, _dec(probability)))


def _expm1(x: Fraction) -> decimal.Decimal:
    """e^x - 1 for x > 0, with enough extra digits that the subtraction loses nothing we keep."""
    extra = max(0, -_dec(x).adjusted())
    wide = decimal.Context(prec=_PRECISION + extra)
    value = wide.divide(decimal.Decimal(x.numerator), decimal.Decimal(x.denominator))
    try:
        return _ctx().plus(wide.subtract(wide.exp(value), 1))
    except decimal.Overflow:
        raise ParameterError(f"epsilon ({float(x):g}) must be small enough for e^epsilon to be evaluated") from None


# ---------------------------------------------------------------------------------------------
# Composition


def _composable(budgets: Iterable[Budget], function: str) -> list[Budget]:
    try:
        items = list(budgets)
    except TypeError:
        raise ParameterError(
            f"{function}: budgets (of type {type(budgets).__name__}) must be a sequence of budgets"
        ) from None
    if not items:
        raise ParameterError(f"{function}: budgets (empty) must hold at least one budget")
    for index, budget in enumerate(items):
        if not isinstance(budget, PureBudget | ZCDPBudget):
            raise ParameterError(
                f"{function}: budgets[{index}] (of type {type(budget).__name__}) must be a PureBudget or ZCDPBudget"
            )
    kinds = sorted({type(budget).__name__ for budget in items})
    if len(kinds) > 1:
        raise ParameterError(
            f"{function}: budgets (a mix of {' and '.join(kinds)}) must all be of one kind; "
            "convert the pure budgets with zcdp_from_pure first"
        )
    return items


@overload
def sequential_composition(budgets: Iterable[PureBudget]) -> PureBudget: ...
@overload
def sequential_composition(budgets: Iterable[ZCDPBudget]) -> ZCDPBudget: ...
@overload
def sequential_composition(budgets: Iterable[Budget]) -> Budget: ...
def sequential_composition(budgets: Iterable[Budget]) -> Budget:
    """The budget of running every mechanism on the same data (adaptive sequential composition); exact.

    Pure DP: epsilon = sum_i epsilon_i (Dwork & Roth 2014, Thm. 3.16). zCDP: rho = sum_i rho_i
    (Bun & Steinke 2016, Lemma 1.7). Both hold for adaptively chosen mechanisms.

    Args:
        budgets: One or more budgets, all pure or all zCDP (a ``Sequence`` or any other iterable).

    Returns:
        The total, of the same kind as the parts.

    Raises:
        ParameterError: If ``budgets`` is empty, holds a non-budget, or mixes pure and zCDP budgets.

    >>> sequential_composition([PureBudget(Fraction(1, 2)), PureBudget(Fraction(1, 3))])
    PureBudget(epsilon=Fraction(5, 6))
    >>> sequential_composition(ZCDPBudget(Fraction(1)).split({"a": 1, "b": 2}).values())
    ZCDPBudget(rho=Fraction(1, 1))
    """
    items = _composable(budgets, "sequential_composition")
    total = sum((budget.amount for budget in items), Fraction(0))
    return PureBudget(total) if isinstance(items[0], PureBudget) else ZCDPBudget(total)


@overload
def parallel_composition(budgets: Iterable[PureBudget]) -> PureBudget: ...
@overload
def parallel_composition(budgets: Iterable[ZCDPBudget]) -> ZCDPBudget: ...
@overload
def parallel_composition(budgets: Iterable[Budget]) -> Budget: ...
def parallel_composition(budgets: Iterable[Budget]) -> Budget:
    """The budget of running each mechanism on its own disjoint part of the data; exact.

    Pure DP: epsilon = max_i epsilon_i (McSherry 2009, "Privacy integrated queries", Thm. 4). zCDP:
    rho = max_i rho_i, by the same argument: only one part's output distribution changes, and the
    Rényi divergence of independent outputs is the sum of the parts' divergences.

    Precondition (the caller's to guarantee): neighbouring datasets differ in one part only, e.g.
    add/remove-one-record neighbours with parts chosen by a fixed public function of the record.
    Under replace-one neighbours a record may move between parts and change two of them; then the
    bound is the sum of the two largest budgets, not the maximum.

    Args:
        budgets: One or more budgets, all pure or all zCDP.

    Returns:
        The largest budget.

    Raises:
        ParameterError: If ``budgets`` is empty, holds a non-budget, or mixes pure and zCDP budgets.

    >>> parallel_composition([ZCDPBudget(Fraction(1, 8)), ZCDPBudget(Fraction(1, 2))])
    ZCDPBudget(rho=Fraction(1, 2))
    """
    items = _composable(budgets, "parallel_composition")
    largest = max(budget.amount for budget in items)
    return PureBudget(largest) if isinstance(items[0], PureBudget) else ZCDPBudget(largest)


def _advanced_terms(
    epsilon: object, k: object, delta_prime: object, delta: object
) -> tuple[Fraction, int, Fraction, decimal.Decimal, decimal.Decimal]:
    """Validate and return (epsilon, k, total delta, epsilon sqrt(2 k ln(1/delta')), k epsilon (e^epsilon - 1))."""
    exact_epsilon = _positive(epsilon, "epsilon")
    exact_k = _positive_integer(k, "k")
    exact_delta_prime = _probability(delta_prime, "delta_prime")
    exact_delta = _probability(delta, "delta", allow_zero=True)
    total_delta = exact_k * exact_delta + exact_delta_prime
    if total_delta >= 1:
        raise ParameterError(f"k * delta + delta_prime ({float(total_delta):g}) must be below 1")
    ctx = _ctx()
    root = ctx.sqrt(ctx.multiply(2 * exact_k, _log_inverse(exact_delta_prime)))
    square_root_term = ctx.multiply(_dec(exact_epsilon), root)
    linear_term = ctx.multiply(_dec(exact_k * exact_epsilon), _expm1(exact_epsilon))
    return exact_epsilon, exact_k, total_delta, square_root_term, linear_term


def advanced_composition(epsilon: object, k: object, delta_prime: object, delta: object = 0) -> ApproxBudget:
    """The k-fold adaptive composition of an (epsilon, delta)-DP mechanism (advanced composition).

    Dwork & Roth 2014, Thm. 3.20: for every delta' > 0 the composition is (epsilon', k delta + delta')-DP
    with

        epsilon' = epsilon sqrt(2 k ln(1/delta')) + k epsilon (e^epsilon - 1),

    rounded up. For k = 1 (and delta' < e^-1/2) this is worse than the plain epsilon, and for large
    epsilon or k it can be worse than sequential composition (k epsilon): the theorem pays off for
    many small-epsilon mechanisms. Take the minimum with :func:`sequential_composition` if you need
    the best of both.

    Args:
        epsilon: Each mechanism's epsilon; positive.
        k: The number of mechanisms; a positive integer.
        delta_prime: The slack delta'; in (0, 1).
        delta: Each mechanism's delta; in [0, 1), default 0 (pure DP mechanisms).

    Returns:
        (epsilon', k delta + delta').

    Raises:
        ParameterError: On invalid parameters, or if k delta + delta' >= 1.

    >>> result = advanced_composition(Fraction(1, 10), 100, Fraction(1, 10**6))
    >>> round(float(result.epsilon), 9), result.delta
    (6.308230951, Fraction(1, 1000000))
    """
    _, _, total_delta, square_root_term, linear_term = _advanced_terms(epsilon, k, delta_prime, delta)
    return ApproxBudget(_round_up(square_root_term + linear_term), total_delta)


def advanced_composition_simple(epsilon: object, k: object, delta_prime: object, delta: object = 0) -> ApproxBudget:
    """The textbook form of advanced composition: epsilon' = 2 epsilon sqrt(2 k ln(1/delta')).

    From Dwork & Roth 2014, Cor. 3.21, as stated in Near & Abuah, "Programming Differential Privacy"
    (chapter "Advanced composition"): the k-fold composition of an (epsilon, delta)-DP mechanism is
    (epsilon', k delta + delta')-DP, epsilon' rounded up. It is a weakening of Thm. 3.20
    (:func:`advanced_composition`), so it only holds where it is at least that bound, i.e. where

        k (e^epsilon - 1) <= sqrt(2 k ln(1/delta')),

    which Dwork & Roth ensure by assuming epsilon' < 1. That condition is checked (on the exact
    values), so a returned bound is always valid; outside it a ParameterError is raised.

    Args:
        epsilon: Each mechanism's epsilon; positive.
        k: The number of mechanisms; a positive integer.
        delta_prime: The slack delta'; in (0, 1).
        delta: Each mechanism's delta; in [0, 1), default 0.

    Returns:
        (2 epsilon sqrt(2 k ln(1/delta')), k delta + delta').

    Raises:
        ParameterError: On invalid parameters, if k delta + delta' >= 1, or if the simplified bound
            would be below the bound of Thm. 3.20.

    >>> round(float(advanced_composition_simple(Fraction(1, 10), 100, Fraction(1, 10**6)).epsilon), 9)
    10.51304354
    """
    exact_epsilon, exact_k, total_delta, square_root_term, linear_term = _advanced_terms(epsilon, k, delta_prime, delta)
    # simple = 2 * square_root_term >= square_root_term + linear_term  <=>  square_root_term >= linear_term
    if square_root_term < linear_term:
        raise ParameterError(
            f"epsilon ({float(exact_epsilon):g}) must satisfy k (e^epsilon - 1) <= sqrt(2 k ln(1/delta_prime)) "
            f"(k = {exact_k}, delta_prime = {float(to_fraction(delta_prime, 'delta_prime')):g}) for the "
            "simplified bound to hold; use advanced_composition"
        )
    return ApproxBudget(_round_up(2 * square_root_term), total_delta)


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


# ---------------------------------------------------------------------------------------------
# Rényi differential privacy

# Default Rényi orders: a grid like Opacus' and TensorFlow Privacy's, extended at either end while
# the bound keeps improving, then refined between the best point's neighbours.
_DEFAULT_ORDERS: tuple[Fraction, ...] = tuple(
    Fraction(a)
    for a in (
        *("5/4", "3/2", "7/4", 2, "9/4", "5/2", "11/4", 3, "7/2", 4, "9/2", 5, 6, 7, 8, 9, 10),
        *(12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256),
    )
)
_MAX_EXTENSION = 64
_GOLDEN_STEPS = 60


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
