"""The ledger's tamper-evident head, kept beside the database: its row count and last hash (a mixin of the ledger).

Deleting trailing charge rows, which the hash chain alone cannot show, is detected against the head file
(and against the head in every published manifest).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from dprelease.dp.accounting.databases import refused_write, storage_code
from dprelease.dp.accounting.ledger_rows import _GENESIS, LedgerHead, head_path
from dprelease.dp.errors import LedgerError, StorageError

AGAIN = ("run the same release id again: what it drew is replayed from the ledger, not drawn again (a draw whose "
         "result could not be written stays booked, as lost)")
"""How a :class:`~dp.errors.StorageError` of the ledger ends: what to do once its disk has room."""


class HeadMixin:
    """The head methods of :class:`dp.accounting.ledger.Ledger` (which provides ``_db``, ``path`` and ``verify``)."""

    _db: sqlite3.Connection
    path: Path

    if TYPE_CHECKING:
        def verify(self) -> None:
            """Check the hash chain (the ledger's own method)."""

    def head(self) -> LedgerHead:
        """The ledger's head now: its number of charge rows and the last row's hash."""
        count, last = self._db.execute(
            "SELECT COUNT(*), (SELECT hash FROM charges ORDER BY seq DESC LIMIT 1) FROM charges").fetchone()
        return LedgerHead(int(count), str(last or _GENESIS))

    def _write_head(self, head: LedgerHead) -> None:
        target = head_path(self.path)
        temporary = target.with_name(target.name + f".{os.getpid()}.tmp")
        try:
            temporary.write_text(json.dumps(head.to_dict()) + "\n", encoding="utf-8")
            os.replace(temporary, target)
        except OSError as err:
            code = storage_code(err)
            if code is None:
                raise
            temporary.unlink(missing_ok=True)
            raise StorageError(refused_write(self.path, "ledger", code, AGAIN)) from None

    def check_head(self) -> None:
        """Verify the hash chain and that no row the head file records has gone; then move the head on.

        The head (row count and last hash) is kept beside the database, outside its tables, and in every
        published manifest: deleting trailing charge rows, which the chain alone cannot show, is detected.

        Raises:
            LedgerError: If the chain is broken or the table holds fewer rows than its head recorded.
        """
        self.verify()
        now = self.head()
        target = head_path(self.path)
        if target.is_file():
            try:
                recorded = json.loads(target.read_text(encoding="utf-8"))
                rows, last = int(recorded["rows"]), str(recorded["last_hash"])
            except (ValueError, KeyError, TypeError) as err:
                raise LedgerError(f"ledger {self.path}: its head file {target.name} is damaged "
                                  f"({type(err).__name__})") from None
            if rows > now.rows:
                raise LedgerError(f"ledger {self.path}: {rows - now.rows} charge row(s) recorded by its head file "
                                  "are missing (rows were deleted); refusing to use it")
            at = self._db.execute("SELECT hash FROM charges ORDER BY seq LIMIT 1 OFFSET ?",
                                  (rows - 1,)).fetchone() if rows else (_GENESIS,)
            if at is None or str(at[0]) != last:
                raise LedgerError(f"ledger {self.path}: charge row {rows} does not match its head file (tampered)")
            if rows == now.rows:
                return
        elif now.rows == 0:
            return
        self._write_head(now)
