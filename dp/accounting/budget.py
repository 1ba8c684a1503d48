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
import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

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


def positive_integer(value: object, name: str, owner: str) -> int:
    """A positive whole number given as an int (a sensitivity, a cutoff), as an int.

    Raises:
        ParameterError: Naming ``owner`` and ``name``, if the value is not a positive int (bools refused).
    """
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ParameterError(f"{owner}: {name} ({value!r}) must be a positive integer")
    if value <= 0:
        raise ParameterError(f"{owner}: {name} ({value}) must be positive")
    return int(value)


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
    from dprelease.dp.accounting.conversions import zcdp_from_approx_cks  # the module builds on this one

    return zcdp_from_approx_cks(epsilon, delta)


def describe(budget: Budget, delta: Fraction | None = None) -> str:
    """A short human-readable description of a budget (public)."""
    if isinstance(budget, PureBudget):
        return f"epsilon={float(budget.epsilon):.6g}"
    from dprelease.dp.accounting.conversions import approx_from_zcdp_cks  # the module builds on this one

    text = f"rho={float(budget.rho):.6g}"
    if delta is not None and delta > 0:
        text += f" (epsilon={float(approx_from_zcdp_cks(budget, delta).epsilon):.6g}, delta={float(delta):.3g})"
    return text


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


def marginal_weight(cells: int, definition: str, *, balanced: bool = False) -> Fraction:
    """The budget weight that minimises the summed expected L1 error of a stage's marginals.

    A marginal of n cells with noise scale s has expected L1 error proportional to n·s. Under zCDP,
    s ∝ rho^(-1/2), and minimising Σ n_i rho_i^(-1/2) subject to Σ rho_i = rho gives rho_i ∝ n_i^(2/3);
    under pure DP, s ∝ 1/epsilon and epsilon_i ∝ n_i^(1/2). The weight is that power as a rational
    (to three digits): any positive rational weights split the stage exactly.

    ``balanced`` halves the power (n^(1/3) under zCDP): the summed error is no longer the aim, each
    marginal's own error is. Small marginals (a 2-category 1-way) then keep enough budget while large
    ones still get more; on Adult's 1-ways it lowers the worst column's TVD relative to both
    (``docs/research/synthesis.md``, section 5).

    >>> marginal_weight(8, "zcdp"), marginal_weight(16, "pure"), marginal_weight(8, "zcdp", balanced=True)
    (Fraction(4, 1), Fraction(4, 1), Fraction(2, 1))
    """
    power = 2 / 3 if definition == "zcdp" else 1 / 2
    if balanced:
        power /= 2
    return Fraction(round(cells**power * 1000), 1000)
