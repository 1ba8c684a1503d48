"""Opening an SQLite file that must be this project's own (the ledger, the LDP collections' registry), or new.

A path given for such a file may be a folder, a device, a text file or another application's database; each
is refused in one line naming the file before anything is written into it. A write that its disk refuses (full,
over quota, an input/output error) is one :class:`StorageError` naming the file and what to do.
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dprelease.dp.errors import ParameterError, StorageError

_REASONS = {sqlite3.SQLITE_FULL: "its disk is full (or its quota or file size limit reached)",
            sqlite3.SQLITE_IOERR: "its disk reported an input/output error"}
"""SQLite's result codes (primary: an extended code's low byte) of a disk that refuses a write, in our words."""

_ERRNOS = {errno.ENOSPC: sqlite3.SQLITE_FULL, errno.EDQUOT: sqlite3.SQLITE_FULL, errno.EFBIG: sqlite3.SQLITE_FULL,
           errno.EIO: sqlite3.SQLITE_IOERR}
"""The operating system's refusals of a file beside the database (the ledger's head), as SQLite's codes."""


def refused_write(file: Path, what: str, code: int, again: str) -> str:
    """The one line for a write of ``what`` at ``file`` that its disk refused (``code``: SQLite's result code)."""
    return (f"{what} {file}: could not be written: {_REASONS[code & 0xFF]}; free space on its disk (or move it to a "
            f"disk with room) and {again}")


def storage_code(err: BaseException) -> int | None:
    """SQLite's primary result code of a refused write in ``err`` (SQLite's or the system's), else None."""
    if isinstance(err, sqlite3.OperationalError):
        code = getattr(err, "sqlite_errorcode", None)
        return code & 0xFF if isinstance(code, int) and code & 0xFF in _REASONS else None
    if isinstance(err, OSError):
        return _ERRNOS.get(err.errno or 0)
    return None


class OwnConnection(sqlite3.Connection):
    """A connection whose statements that the disk refuses raise a :class:`StorageError` (set by :func:`connect_own`).

    Only SQLite's result codes are read (never its message); the statement and its parameters never reach the
    error.
    """

    file: Path = Path()
    what: str = "database"
    again: str = "run again"

    @contextmanager
    def _refusals(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as err:
            code = storage_code(err)
            if code is None:
                raise
            raise StorageError(refused_write(self.file, self.what, code, self.again)) from None

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        """:meth:`sqlite3.Connection.execute`; a refused write is a :class:`StorageError`."""
        with self._refusals():
            return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> sqlite3.Cursor:
        """:meth:`sqlite3.Connection.executemany`; a refused write is a :class:`StorageError`."""
        with self._refusals():
            return super().executemany(sql, parameters)

    def executescript(self, sql_script: str, /) -> sqlite3.Cursor:
        """:meth:`sqlite3.Connection.executescript`; a refused write is a :class:`StorageError`."""
        with self._refusals():
            return super().executescript(sql_script)


def connect_own(file: Path, what: str, own_table: str, hint: str, again: str = "run again") -> OwnConnection:
    """A connection to ``file`` (created if absent): empty, or a database holding ``own_table``.

    Args:
        file: The database's path.
        what: What it is, as the message names it (``ledger``, ``registry``).
        own_table: A table only this kind of database has.
        hint: What to give instead, ending each refusal.
        again: What to do once the disk has room, ending a :class:`StorageError`.

    Raises:
        ParameterError: If ``file`` is a folder or device, not an SQLite database (or damaged),
            or a database of something else (tables, none of them ``own_table``); ``sqlite3.OperationalError``
            (SQLite's own words) if it is locked or unreadable.
        StorageError: If its disk refuses a write (full, over quota, an input/output error), then and later.
    """
    if file.exists() and not file.is_file():
        raise ParameterError(f"{what} {file}: must be a file (an SQLite database), not a folder or device")
    file.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(file, isolation_level=None, timeout=60, factory=OwnConnection)
    db.file, db.what, db.again = file, what, again
    try:
        try:
            tables = {str(row[0]) for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as err:
            if isinstance(err, sqlite3.OperationalError):  # locked, unreadable: SQLite's own words
                raise
            raise ParameterError(f"{what} {file}: is not an SQLite database (or is damaged); {hint}") from None
        if tables and own_table not in tables:
            raise ParameterError(f"{what} {file}: is an SQLite database of something else (none of its tables is a "
                        f"{what}'s); {hint}")
    except BaseException:
        db.close()
        raise
    return db
