"""Errors raised by the DP library.

Messages name a setting or column and the rule it broke, never a value read from sensitive data.
"""

from __future__ import annotations

from fractions import Fraction


class DPReleaseError(Exception):
    """Root of every *expected* error of dprelease: bad input, a refusal by the ledger, a broken rule.

    Its message is built from public values only (a file, a setting, a column name and the rule it
    broke, budgets), so it may be shown on a terminal, in a Prefect state and in logs. Anything else
    raised where raw rows are handled (a library's error, an unexpected failure) is replaced by a
    message-free :class:`StageFailed` before it leaves its stage.
    """


class StageFailed(Exception):
    """A stage that handles raw rows failed unexpectedly; names the stage and the exception type only.

    The original exception's text may hold a value read from the data, so it is written to the
    steward-only area and never carried here (no message, no cause, no context).

    Attributes:
        stage: The stage (task) name.
        kind: The original exception's type name.
    """

    def __init__(self, stage: str, kind: str):
        super().__init__(f"stage {stage} failed with {kind}; the details are in the steward-only area")
        self.stage = stage
        self.kind = kind

    def __reduce__(self) -> tuple[type[StageFailed], tuple[str, str]]:
        return (type(self), (self.stage, self.kind))


class ReleaseError(DPReleaseError, RuntimeError):
    """A release cannot proceed, and not because of its input (exit 1).

    For example a staged folder that does not verify, or an embedded server that does not start. Named by
    release id and rule; never a data value.
    """


class DPError(DPReleaseError):
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

    def __reduce__(self) -> tuple[object, ...]:
        return (_budget_error, (str(self), self.dataset, self.remaining, self.requested, self.unit))


def _budget_error(
    message: str, dataset: str, remaining: Fraction, requested: Fraction, unit: str
) -> BudgetExceededError:
    """Rebuild a pickled :class:`BudgetExceededError` (its keyword-only arguments need a helper)."""
    return BudgetExceededError(message, dataset=dataset, remaining=remaining, requested=requested, unit=unit)


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


class StorageError(DPError, ReleaseError):
    """The disk under the ledger (or the LDP registry) refused a write: full, over quota, or an input/output error.

    Exit 1, as an operating system's refusal; the message names the file and what to do, never SQLite's or the
    system's text.
    """


class InternalError(DPError, AssertionError):
    """An invariant of dprelease itself failed; this is a bug."""

    def __init__(self, message: str):
        super().__init__(f"{message}; this is a bug in dprelease, please report it")
