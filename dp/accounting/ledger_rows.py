"""The ledger's tables and rows: the SQLite schema, a charge as booked, a dataset's status, the chain's head.

Exact amounts are stored as fractions in text (``numerator/denominator``); each charge carries the hash of
its predecessor, so a changed or removed row breaks the chain (:meth:`dp.accounting.ledger.Ledger.verify`).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from dprelease.dp.accounting.approximate import effective_cap
from dprelease.dp.accounting.budget import Budget, Definition, PureBudget, ZCDPBudget
from dprelease.dp.errors import LedgerError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS datasets (
    dataset TEXT PRIMARY KEY,
    definition TEXT NOT NULL,
    cap TEXT NOT NULL,
    release_cap TEXT,
    delta TEXT NOT NULL,
    created_at REAL NOT NULL,
    epsilon TEXT
);
CREATE TABLE IF NOT EXISTS releases (
    release_id TEXT PRIMARY KEY,
    dataset TEXT NOT NULL REFERENCES datasets(dataset),
    reserved TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('reserved', 'published', 'failed')),
    created_at REAL NOT NULL,
    closed_at REAL,
    plan TEXT NOT NULL DEFAULT '{}',
    reserved_delta TEXT NOT NULL DEFAULT '0/1'
);
CREATE TABLE IF NOT EXISTS sealed (
    release_id TEXT NOT NULL REFERENCES releases(release_id),
    key TEXT NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (release_id, key)
);
CREATE TABLE IF NOT EXISTS leases (
    release_id TEXT PRIMARY KEY REFERENCES releases(release_id),
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS lost (
    seq INTEGER PRIMARY KEY,
    release_id TEXT NOT NULL,
    booked_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS charges (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset TEXT NOT NULL,
    release_id TEXT NOT NULL REFERENCES releases(release_id),
    stage TEXT NOT NULL,
    query TEXT NOT NULL,
    mechanism TEXT NOT NULL,
    sensitivity TEXT NOT NULL,
    scale TEXT NOT NULL,
    loss TEXT NOT NULL,
    native_loss TEXT NOT NULL,
    created_at REAL NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    delta TEXT NOT NULL DEFAULT '0/1'
);
"""

# Columns added after ledgers existed: (table, column, declaration). ``migrate`` adds them to an old file; rows
# booked before have their defaults (no delta, epsilon unknown), which is what they were.
_ADDED_COLUMNS = (
    ("datasets", "epsilon", "TEXT"),
    ("releases", "reserved_delta", "TEXT NOT NULL DEFAULT '0/1'"),
    ("charges", "delta", "TEXT NOT NULL DEFAULT '0/1'"),
)


def migrate(db: sqlite3.Connection) -> None:
    """Add the columns of delta accounting to a ledger file made before them (idempotent)."""
    for table, column, declaration in _ADDED_COLUMNS:
        present = {str(row[1]) for row in db.execute(f"PRAGMA table_info({table})")}
        if column not in present:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")


def chain_content(row: list[str], delta: Fraction) -> list[str]:
    """A charge's hashed content: the delta is appended only when positive, so rows without one hash as before."""
    return [*row, _text(delta)] if delta else row

_GENESIS = "0" * 64


def _text(value: Fraction) -> str:
    return f"{value.numerator}/{value.denominator}"


def _fraction(text: str) -> Fraction:
    return Fraction(text)


@dataclass(frozen=True)
class LedgerHead:
    """The ledger's tamper-evident head: how many charge rows it holds and the hash of the last one."""

    rows: int
    last_hash: str

    def to_dict(self) -> dict[str, object]:
        """JSON form (kept in ``<ledger>.head`` and in each published manifest)."""
        return {"rows": self.rows, "last_hash": self.last_hash}


def head_path(ledger: Path) -> Path:
    """Where the head of the ledger at ``ledger`` is kept: beside it, outside its tables."""
    return ledger.with_name(ledger.name + ".head")


@dataclass(frozen=True)
class LedgerStatus:
    """A dataset's budget position, in the ledger's unit (epsilon for pure DP, rho for zCDP).

    Attributes:
        dataset: The ledger key.
        definition: ``"pure"`` or ``"zcdp"``.
        cap: The lifetime budget.
        delta: The delta used to report zCDP budgets as (epsilon, delta); 0 under pure DP.
        spent: Sum of all charges ever drawn (published, failed or in progress).
        reserved: Budget reserved by open releases and not yet drawn.
        release_cap: The most one release may reserve, or None for no per-release cap.
        epsilon: The declared lifetime epsilon (zCDP; None if unknown): needed once delta is spent.
        delta_spent: Delta spent by (epsilon, delta) mechanisms (``docs/proofs/approximate_zcdp.md``).
        delta_reserved: Delta reserved by open releases and not yet spent.
    """

    dataset: str
    definition: Definition
    cap: Fraction
    delta: Fraction
    spent: Fraction
    reserved: Fraction
    release_cap: Fraction | None = None
    epsilon: Fraction | None = None
    delta_spent: Fraction = Fraction(0)
    delta_reserved: Fraction = Fraction(0)

    @property
    def remaining(self) -> Fraction:
        """What a new reservation (taking no delta) may still take: the usable cap less spent and reserved."""
        return self.remaining_with(Fraction(0))

    def remaining_with(self, delta: Fraction) -> Fraction:
        """What a new reservation that also takes ``delta`` may still take (the cap shrinks with delta used)."""
        used = self.delta_spent + self.delta_reserved + delta
        return effective_cap(self.cap, self.epsilon, self.delta, used) - self.spent - self.reserved

    @property
    def unit(self) -> str:
        """``"epsilon"`` or ``"rho"``."""
        return "epsilon" if self.definition == "pure" else "rho"


@dataclass(frozen=True)
class Charge:
    """One row of the ledger: a measurement's booked privacy loss and its public parameters."""

    seq: int
    dataset: str
    release_id: str
    stage: str
    query: str
    mechanism: str
    sensitivity: str
    scale: str
    loss: Fraction
    native_loss: str
    created_at: float
    delta: Fraction = Fraction(0)


def _chain_hash(prev_hash: str, content: list[str]) -> str:
    payload = json.dumps([prev_hash, *content], separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def _check_unit(definition: str, budget: Budget, what: str) -> None:
    expected = PureBudget if definition == "pure" else ZCDPBudget
    if not isinstance(budget, expected):
        raise LedgerError(f"{what} must be a {expected.__name__} for a {definition} ledger")
