"""The privacy ledger and the one path by which noise is drawn.

The :class:`Ledger` is a durable record (SQLite) of each dataset's lifetime budget and of every
charge made against it. A dataset is the *population* a table describes, not a file: releases of
new extracts of the same people share one lifetime budget, which is never renewed.

Life of a release in the ledger::

    reserve(dataset, release_id, amount)   # before any data is read; refuses if it would overspend
    charge(release_id, ...)                # before each noise draw; irrevocable from then on
    publish(release_id) | fail(release_id) # closes the release; undrawn reservation is released

:func:`measure` is the only caller of a mechanism's ``sample``: it charges the ledger and only then
draws noise, so a draw is never made that the ledger does not hold.

Rows of the ``charges`` table are hash-chained (each row stores the SHA-256 of the previous row's
hash and its own content), so a row edited or deleted after the fact is detected by
:meth:`Ledger.verify`.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path

from dprelease.dp.accounting.budget import Budget, Definition, PureBudget, ZCDPBudget, describe
from dprelease.dp.accounting.conversions import zcdp_from_approx_cks
from dprelease.dp.accounting.databases import connect_own
from dprelease.dp.accounting.ledger_head import AGAIN, HeadMixin
from dprelease.dp.accounting.ledger_rows import (
    _GENESIS,
    _SCHEMA,
    Charge,
    LedgerStatus,
    _chain_hash,
    _check_unit,
    _fraction,
    _text,
    chain_content,
    migrate,
)
from dprelease.dp.accounting.processes import _alive, _process_start
from dprelease.dp.errors import BudgetExceededError, LedgerError


class Ledger(HeadMixin):
    """A durable, tamper-evident privacy ledger on SQLite.

    Use :meth:`open` as a context manager. Every write runs in a ``BEGIN IMMEDIATE`` transaction,
    so concurrent releases on the same ledger file are serialised and the cap holds.
    """

    def __init__(self, connection: sqlite3.Connection, path: Path):
        self._db = connection
        self.path = path

    @classmethod
    @contextmanager
    def open(cls, path: Path | str) -> Iterator[Ledger]:
        """Open (creating if needed) the ledger at ``path``.

        Raises:
            ParameterError: ``path`` is a folder or device, a file that is not an SQLite database (or is damaged),
                or an SQLite database of something else (it has tables, none of them a ledger's): nothing is
                written into it.
            StorageError: Its disk refuses a write (full, over quota, an input/output error), as it opens or later.
        """
        file = Path(path)
        db = connect_own(file, "ledger", "datasets", "give the ledger's own file, or a new path for a new ledger",
                         AGAIN)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA foreign_keys=ON")
            db.executescript(_SCHEMA)
            migrate(db)
            ledger = cls(db, file)
            ledger.check_head()
            yield ledger
        finally:
            db.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            if self._db.in_transaction:  # SQLite may have rolled back itself (a full disk): a ROLLBACK would fail
                self._db.execute("ROLLBACK")
            raise
        else:
            self._db.execute("COMMIT")

    # -- datasets -------------------------------------------------------------------------------

    def register(
        self, dataset: str, definition: Definition, cap: Budget, delta: Fraction, release_cap: Budget | None = None,
        epsilon: Fraction | None = None,
    ) -> None:
        """Declare a dataset's lifetime budget; a no-op when it is already declared identically.

        Args:
            dataset: The ledger key (the population).
            definition: ``pure`` or ``zcdp``.
            cap: The lifetime budget.
            delta: The delta used to report zCDP budgets (0 under pure DP).
            release_cap: The most a single release may reserve (None: only the lifetime cap).
            epsilon: The declared lifetime epsilon under zCDP (kept so that delta spent by (epsilon, delta)
                mechanisms can shrink the usable cap; filled in for a dataset registered without it).

        Raises:
            LedgerError: If the dataset exists with another definition, cap, per-release cap or
                delta (a lifetime budget is never renewed or raised).
        """
        _check_unit(definition, cap, "lifetime budget")
        if release_cap is not None:
            _check_unit(definition, release_cap, "per-release cap")
            if release_cap.amount > cap.amount:
                raise LedgerError(f"dataset {dataset!r}: the per-release cap must not exceed the lifetime budget")
        release_text = _text(release_cap.amount) if release_cap is not None else None
        with self._write() as db:
            row = db.execute(
                "SELECT definition, cap, delta, release_cap, epsilon FROM datasets WHERE dataset = ?", (dataset,)
            ).fetchone()
            epsilon_text = _text(epsilon) if epsilon is not None and definition == "zcdp" else None
            if epsilon_text is not None and zcdp_from_approx_cks(epsilon, delta).rho != cap.amount:
                raise LedgerError(f"dataset {dataset!r}: the lifetime cap is not the rho of the declared "
                                  "(epsilon, delta); register the cap the spec derives")
            if row is None:
                db.execute(
                    "INSERT INTO datasets (dataset, definition, cap, release_cap, delta, created_at, epsilon) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (dataset, definition, _text(cap.amount), release_text, _text(delta), time.time(), epsilon_text),
                )
                return
            if row[3] != release_text:
                raise LedgerError(f"dataset {dataset!r}: the ledger holds another per-release cap than the spec; "
                                  "caps cannot be changed")
            if row[0] != definition or _fraction(row[1]) != cap.amount or _fraction(row[2]) != delta:
                raise LedgerError(
                    f"dataset {dataset!r}: the ledger holds lifetime budget "
                    f"{row[0]} {float(_fraction(row[1])):.6g} (delta {float(_fraction(row[2])):.3g}); "
                    f"the spec declares {definition} {float(cap.amount):.6g} (delta {float(delta):.3g}); "
                    "a lifetime budget cannot be changed, only spent"
                )
            if epsilon_text is not None and row[4] != epsilon_text:
                if row[4] is not None:
                    raise LedgerError(f"dataset {dataset!r}: the declared lifetime epsilon does not match the "
                                      "ledger's; a lifetime budget cannot be changed, only spent")
                db.execute("UPDATE datasets SET epsilon = ? WHERE dataset = ?", (epsilon_text, dataset))

    def status(self, dataset: str) -> LedgerStatus:
        """The dataset's cap, spent and reserved budget.

        Raises:
            LedgerError: If the dataset is not registered.
        """
        row = self._db.execute(
            "SELECT definition, cap, delta, release_cap, epsilon FROM datasets WHERE dataset = ?", (dataset,)
        ).fetchone()
        if row is None:
            raise LedgerError(f"dataset {dataset!r} is not in the ledger {self.path}")
        delta_spent = sum((_fraction(r[0]) for r in self._db.execute(
            "SELECT delta FROM charges WHERE dataset = ?", (dataset,))), Fraction(0))
        spent = sum(
            (_fraction(r[0]) for r in self._db.execute("SELECT loss FROM charges WHERE dataset = ?", (dataset,))),
            Fraction(0),
        )
        reserved = delta_reserved = Fraction(0)
        for release_id, amount, amount_delta in self._db.execute(
            "SELECT release_id, reserved, reserved_delta FROM releases WHERE dataset = ? AND status = 'reserved'",
            (dataset,)
        ):
            reserved += max(Fraction(0), _fraction(amount) - self._drawn(release_id))
            delta_reserved += max(Fraction(0), _fraction(amount_delta) - self._drawn(release_id, "delta"))
        release_cap = _fraction(row[3]) if row[3] is not None else None
        return LedgerStatus(dataset, row[0], _fraction(row[1]), _fraction(row[2]), spent, reserved, release_cap,
                            _fraction(row[4]) if row[4] is not None else None, delta_spent, delta_reserved)

    # -- releases -------------------------------------------------------------------------------

    def reserve(
        self, dataset: str, release_id: str, amount: Budget, plan: Mapping[str, object] | None = None,
        delta: Fraction = Fraction(0),
    ) -> LedgerStatus:
        """Reserve a release's whole budget before any data is read.

        Args:
            dataset: The ledger key.
            release_id: A new release id.
            amount: The release's whole budget.
            plan: Public facts to keep with the reservation (seed, input hashes, status before), so a
                re-run of the same release id can replay it exactly.
            delta: The delta the release's (epsilon, delta) mechanisms will spend (zCDP only); it shrinks the
                dataset's usable cap (:func:`dp.accounting.approximate.effective_cap`).

        Returns:
            The dataset's status before the reservation (for the report's "spent before").

        Raises:
            BudgetExceededError: If the amount exceeds what the dataset has left; nothing is written.
            LedgerError: If the release id is already in the ledger (see :meth:`resume`).
        """
        with self._write() as db:
            before = self.status(dataset)
            _check_unit(before.definition, amount, "release budget")
            if delta and (before.definition != "zcdp" or delta < 0):
                raise LedgerError(f"release {release_id!r}: only a zCDP dataset can book delta (a pure-DP ledger "
                                  "books epsilon alone)")
            if db.execute("SELECT 1 FROM releases WHERE release_id = ?", (release_id,)).fetchone():
                raise LedgerError(
                    f"release {release_id!r} is already in the ledger; a release id is reserved once "
                    "(re-run it with resume, which replays its sealed measurements)"
                )
            if before.release_cap is not None and amount.amount > before.release_cap:
                raise BudgetExceededError(
                    f"dataset {dataset!r}: release {release_id!r} requests {describe(amount, before.delta)} "
                    f"but one release may take at most {before.unit}={float(before.release_cap):.6g}",
                    dataset=dataset,
                    remaining=before.release_cap,
                    requested=amount.amount,
                    unit=before.unit,
                )
            if amount.amount > before.remaining_with(delta):
                raise BudgetExceededError(
                    f"dataset {dataset!r}: release {release_id!r} requests "
                    f"{describe(amount, before.delta)}" + (f" and delta={float(delta):.3g}" if delta else "") +
                    f" but only {before.unit}={float(before.remaining_with(delta)):.6g} remains of the lifetime budget "
                    f"{before.unit}={float(before.cap):.6g} (spent {float(before.spent):.6g}, "
                    f"reserved by open releases {float(before.reserved):.6g})",
                    dataset=dataset,
                    remaining=before.remaining_with(delta),
                    requested=amount.amount,
                    unit=before.unit,
                )
            db.execute(
                "INSERT INTO releases (release_id, dataset, reserved, status, created_at, closed_at, plan, "
                "reserved_delta) VALUES (?, ?, ?, 'reserved', ?, NULL, ?, ?)",
                (release_id, dataset, _text(amount.amount), time.time(), json.dumps(dict(plan or {}), sort_keys=True),
                 _text(delta)),
            )
            self._take_lease(db, release_id)
            return before

    def release_plan(self, release_id: str) -> dict[str, object] | None:
        """The public plan facts kept with a reservation, or None for an unknown release id."""
        row = self._db.execute("SELECT plan FROM releases WHERE release_id = ?", (release_id,)).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def resume(self, release_id: str) -> Fraction:
        """Re-open a release so that it can finish by replaying its sealed measurements; the loss booked as lost.

        A charge whose noisy result was never sealed (the process died between the two) cannot be
        replayed: it is booked as spent-and-lost (it stays in the ledger) and the reservation grows by
        its amount, so that the re-run may book and draw that query again; it never draws it without
        booking it. Re-opening a closed (failed or published) release, or growing an open one, must fit
        what the dataset has left. The caller holds the release id's lock (one run per id at a time).

        Returns:
            The loss newly booked as lost (0 when every charge was sealed).

        Raises:
            LedgerError: If the release is unknown.
            BudgetExceededError: If what the release still needs no longer fits the dataset's budget.
        """
        with self._write() as db:
            dataset, reserved, status = self._release(release_id)
            sealed = {r[0] for r in db.execute("SELECT key FROM sealed WHERE release_id = ?", (release_id,))}
            counted = {r[0] for r in db.execute("SELECT seq FROM lost WHERE release_id = ?", (release_id,))}
            lost = [(seq, _fraction(loss), _fraction(delta)) for seq, key, loss, delta in db.execute(
                "SELECT seq, stage || '/' || query, loss, delta FROM charges WHERE release_id = ? ORDER BY seq",
                (release_id,)) if key not in sealed and seq not in counted]
            # Keys charged more than once: only the latest charge of a key may still be sealed later.
            lost_amount = sum((loss for _, loss, _ in lost), Fraction(0))
            lost_delta = sum((delta for _, _, delta in lost), Fraction(0))
            reserved_delta = _fraction(db.execute("SELECT reserved_delta FROM releases WHERE release_id = ?",
                                                  (release_id,)).fetchone()[0])
            status_now = self.status(dataset)
            needed = lost_amount if status == "reserved" else reserved + lost_amount - self._drawn(release_id)
            needed_delta = lost_delta if status == "reserved" else (
                reserved_delta + lost_delta - self._drawn(release_id, "delta"))
            if needed > status_now.remaining_with(needed_delta):
                raise BudgetExceededError(
                    f"dataset {dataset!r}: resuming release {release_id!r} needs {status_now.unit}="
                    f"{float(needed):.6g} more (undrawn part and draws lost in a crash) but only "
                    f"{float(status_now.remaining_with(needed_delta)):.6g} remains",
                    dataset=dataset, remaining=status_now.remaining_with(needed_delta), requested=needed,
                    unit=status_now.unit,
                )
            for seq, _, _ in lost:
                db.execute("INSERT INTO lost VALUES (?, ?, ?)", (seq, release_id, time.time()))
            db.execute("UPDATE releases SET status = 'reserved', closed_at = NULL, reserved = ?, reserved_delta = ? "
                       "WHERE release_id = ?", (_text(reserved + lost_amount), _text(reserved_delta + lost_delta),
                                                release_id))
            self._take_lease(db, release_id)
            return lost_amount

    def _take_lease(self, db: sqlite3.Connection, release_id: str) -> None:
        db.execute("INSERT OR REPLACE INTO leases VALUES (?, ?, ?, ?)",
                   (release_id, socket.gethostname(), os.getpid(), _process_start(os.getpid())))

    def reclaim_stale(self, dataset: str) -> list[str]:
        """Close as failed every open release of ``dataset`` whose process on this host is gone.

        What such a release drew stays booked; the undrawn rest of its reservation returns to the dataset.
        A release held by a process on another host is left alone (see :meth:`abandon`).

        Returns:
            The release ids reclaimed.
        """
        host = socket.gethostname()
        stale = [
            rid for rid, lease_host, pid, started in self._db.execute(
                "SELECT r.release_id, l.host, l.pid, l.started FROM releases r JOIN leases l USING (release_id) "
                "WHERE r.dataset = ? AND r.status = 'reserved'", (dataset,))
            if lease_host == host and not _alive(int(pid), str(started))
        ]
        for rid in stale:
            try:
                self._close(rid, "failed")
            except LedgerError:  # closed meanwhile by its own re-run
                continue
        return stale

    def abandon(self, release_id: str) -> None:
        """A steward's decision: close an open release as failed, whoever holds it (drawn stays booked)."""
        self._close(release_id, "failed")

    def settle_published(self, release_id: str) -> None:
        """Mark a release published whose folder was found published and intact (a kill after the rename)."""
        with self._write() as db:
            _, _, status = self._release(release_id)
            if status != "published":
                db.execute("UPDATE releases SET status = 'published', closed_at = ? WHERE release_id = ?",
                           (time.time(), release_id))
            db.execute("DELETE FROM leases WHERE release_id = ?", (release_id,))

    def datasets(self) -> list[str]:
        """Every dataset in the ledger, by name."""
        return [str(r[0]) for r in self._db.execute("SELECT dataset FROM datasets ORDER BY dataset")]

    def releases(self, dataset: str | None = None) -> list[dict[str, object]]:
        """Every release (optionally of one dataset): id, dataset, status, reserved and drawn amounts, lease."""
        sql = ("SELECT r.release_id, r.dataset, r.status, r.reserved, r.created_at, l.host, l.pid "
               "FROM releases r LEFT JOIN leases l USING (release_id)")
        rows = self._db.execute(sql + (" WHERE r.dataset = ?" if dataset else "") + " ORDER BY r.created_at",
                                (dataset,) if dataset else ()).fetchall()
        lost = dict(self._db.execute("SELECT release_id, COUNT(*) FROM lost GROUP BY release_id").fetchall())
        return [{"release_id": r[0], "dataset": r[1], "status": r[2], "reserved": _fraction(r[3]),
                 "drawn": self._drawn(r[0]), "created_at": r[4], "lost_draws": int(lost.get(r[0], 0)),
                 "holder": None if r[5] is None else f"{r[5]} pid {r[6]}"} for r in rows]

    def seal(self, release_id: str, key: str, payload: str) -> None:
        """Keep a measurement's noisy result (a DP output) so a re-run replays it instead of redrawing."""
        with self._write() as db:
            db.execute("INSERT INTO sealed VALUES (?, ?, ?)", (release_id, key, payload))

    def sealed(self, release_id: str, key: str) -> str | None:
        """A sealed result, or None."""
        row = self._db.execute(
            "SELECT payload FROM sealed WHERE release_id = ? AND key = ?", (release_id, key)
        ).fetchone()
        return None if row is None else str(row[0])

    def _release(self, release_id: str) -> tuple[str, Fraction, str]:
        row = self._db.execute(
            "SELECT dataset, reserved, status FROM releases WHERE release_id = ?", (release_id,)
        ).fetchone()
        if row is None:
            raise LedgerError(f"release {release_id!r} has no reservation in the ledger")
        return row[0], _fraction(row[1]), row[2]

    def _drawn(self, release_id: str, column: str = "loss") -> Fraction:
        """What a release's charges booked: rho/epsilon (``loss``) or ``delta``."""
        sql = {"loss": "SELECT loss FROM charges WHERE release_id = ?",
               "delta": "SELECT delta FROM charges WHERE release_id = ?"}[column]
        return sum((_fraction(r[0]) for r in self._db.execute(sql, (release_id,))), Fraction(0))

    def charge(
        self,
        release_id: str,
        *,
        stage: str,
        query: str,
        mechanism: str,
        sensitivity: str,
        scale: str,
        loss: Budget,
        native_loss: Budget | None = None,
        delta: Fraction = Fraction(0),
    ) -> Charge:
        """Book a measurement's privacy loss against its release's reservation.

        Call before the noise is drawn; once booked, a charge is never refunded. ``delta`` is the delta of an
        (epsilon, delta) mechanism (``loss`` then its rho as approximate zCDP, ``docs/proofs/approximate_zcdp.md``).

        Raises:
            LedgerError: If the release is not open, or books delta it did not reserve.
            BudgetExceededError: If the charge would exceed the release's reservation.
        """
        if not isinstance(loss, PureBudget | ZCDPBudget):
            raise LedgerError(f"charge for {stage}/{query}: loss must be a PureBudget or ZCDPBudget")
        with self._write() as db:
            dataset, reserved, status = self._release(release_id)
            if status != "reserved":
                raise LedgerError(f"release {release_id!r} is {status}; it takes no more charges")
            definition = db.execute("SELECT definition FROM datasets WHERE dataset = ?", (dataset,)).fetchone()[0]
            _check_unit(definition, loss, f"charge for {stage}/{query}")
            drawn = self._drawn(release_id)
            if delta:
                reserved_delta = _fraction(db.execute("SELECT reserved_delta FROM releases WHERE release_id = ?",
                                                      (release_id,)).fetchone()[0])
                if delta < 0 or self._drawn(release_id, "delta") + delta > reserved_delta:
                    raise LedgerError(f"release {release_id!r}: charge delta={float(delta):.3g} for {stage}/{query} "
                                      "exceeds the delta the release reserved")
            if drawn + loss.amount > reserved:
                unit = "epsilon" if definition == "pure" else "rho"
                raise BudgetExceededError(
                    f"release {release_id!r}: charge {unit}={float(loss.amount):.6g} for {stage}/{query} "
                    f"exceeds the reservation's remaining {unit}={float(reserved - drawn):.6g}",
                    dataset=dataset,
                    remaining=reserved - drawn,
                    requested=loss.amount,
                    unit=unit,
                )
            prev = db.execute("SELECT hash FROM charges ORDER BY seq DESC LIMIT 1").fetchone()
            prev_hash = prev[0] if prev else _GENESIS
            created = time.time()
            native = describe(native_loss if native_loss is not None else loss)
            content = [dataset, release_id, stage, query, mechanism, sensitivity, scale,
                       _text(loss.amount), native, repr(created)]
            digest = _chain_hash(prev_hash, chain_content(content, delta))
            cursor = db.execute(
                "INSERT INTO charges (dataset, release_id, stage, query, mechanism, sensitivity, scale, "
                "loss, native_loss, created_at, prev_hash, hash, delta) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*content[:9], created, prev_hash, digest, _text(delta)),
            )
            seq = cursor.lastrowid
            assert seq is not None
        self._write_head(self.head())
        return Charge(seq, dataset, release_id, stage, query, mechanism, sensitivity, scale,
                      loss.amount, native, created, delta)

    def publish(self, release_id: str) -> None:
        """Close a release as published; its undrawn reservation returns to the dataset."""
        self._close(release_id, "published")

    def fail(self, release_id: str) -> None:
        """Close a release as failed; drawn charges stay booked, the undrawn rest is released."""
        self._close(release_id, "failed")

    def _close(self, release_id: str, status: str) -> None:
        with self._write() as db:
            _, _, current = self._release(release_id)
            if current != "reserved":
                raise LedgerError(f"release {release_id!r} is already {current}")
            db.execute(
                "UPDATE releases SET status = ?, closed_at = ? WHERE release_id = ?",
                (status, time.time(), release_id),
            )
            db.execute("DELETE FROM leases WHERE release_id = ?", (release_id,))

    def release_status(self, release_id: str) -> str:
        """``reserved``, ``published`` or ``failed``."""
        return self._release(release_id)[2]

    def charges(self, *, dataset: str | None = None, release_id: str | None = None) -> list[Charge]:
        """Charges in booking order, filtered by dataset and/or release."""
        sql = ("SELECT seq, dataset, release_id, stage, query, mechanism, sensitivity, scale, loss, "
               "native_loss, created_at, delta FROM charges WHERE 1=1")
        args: list[str] = []
        if dataset is not None:
            sql += " AND dataset = ?"
            args.append(dataset)
        if release_id is not None:
            sql += " AND release_id = ?"
            args.append(release_id)
        rows = self._db.execute(sql + " ORDER BY seq", args).fetchall()
        return [Charge(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], _fraction(r[8]), r[9], r[10], _fraction(r[11]))
                for r in rows]

    def verify(self) -> None:
        """Check the hash chain of all charges.

        Raises:
            LedgerError: If a row was altered, inserted or deleted after it was booked.
        """
        prev_hash = _GENESIS
        for row in self._db.execute(
            "SELECT seq, dataset, release_id, stage, query, mechanism, sensitivity, scale, loss, native_loss, "
            "created_at, prev_hash, hash, delta FROM charges ORDER BY seq"
        ):
            content = chain_content([*row[1:10], repr(row[10])], _fraction(row[13]))
            if row[11] != prev_hash or row[12] != _chain_hash(prev_hash, content):
                raise LedgerError(f"ledger {self.path}: charge {row[0]} does not match the hash chain (tampered)")
            prev_hash = row[12]
