"""Composition of exact budgets: sequential, parallel and advanced (Dwork, Rothblum & Vadhan 2010).

A reported epsilon is rounded up, as everywhere in :mod:`dp.accounting.budget`.
"""

from __future__ import annotations

import decimal
from collections.abc import Iterable
from fractions import Fraction
from typing import overload

from dprelease.dp.accounting.budget import (
    _PRECISION,
    ApproxBudget,
    Budget,
    PureBudget,
    ZCDPBudget,
    _ctx,
    _dec,
    _positive,
    _round_up,
    to_fraction,
)
from dprelease.dp.errors import ParameterError

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
