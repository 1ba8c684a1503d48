"""Errors raised by the DP library.

Messages name a setting or column and the rule it broke, never a value read from sensitive data.
"""

from __future__ import annotations

from fractions import Fraction


class DPError(Exception):
    """Root of every error raised by ``dp``."""


class ParameterError(DPError, ValueError):
    """A privacy parameter or setting is invalid (public input; safe to show)."""


class BudgetExceededError(DPError):
    """A charge or reservation would exceed the remaining budget.

    Attributes:
        dataset: The ledger key of the population whose budget is short.
        remaining: The budget still available, in the ledger's unit.
        requested: The budget that was asked for, in the ledger's unit.
        unit: The ledger's unit, ``"epsilon"`` (pure DP) or ``"rho"`` (zCDP).
    """

    def __init__(self, message: str, *, dataset: str, remaining: Fraction, requested: Fraction, unit: str):
        super().__init__(message)
        self.dataset = dataset
        self.remaining = remaining
        self.requested = requested
        self.unit = unit


class DomainError(DPError, ValueError):
    """Data does not fit the declared public domain of a column.

    Attributes:
        column: The column's name (public); the offending values are never carried.
    """

    def __init__(self, message: str, *, column: str):
        super().__init__(message)
        self.column = column


class LedgerError(DPError):
    """The ledger refuses an operation (unknown release, closed release, tampering, mismatched cap)."""


class InternalError(DPError, AssertionError):
    """An invariant of dprelease itself failed; this is a bug."""

    def __init__(self, message: str):
        super().__init__(f"{message}; this is a bug in dprelease, please report it")
