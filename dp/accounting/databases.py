"""Opening an SQLite file that must be this project's own (the ledger, the LDP collections' registry), or new.

A path given for such a file may be a folder, a device, a text file or another application's database; each
is refused in one line naming the file before anything is written into it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dprelease.dp.errors import ParameterError


def connect_own(file: Path, what: str, own_table: str, hint: str) -> sqlite3.Connection:
    """A connection to ``file`` (created if absent): empty, or a database holding ``own_table``.

    Args:
        file: The database's path.
        what: What it is, as the message names it (``ledger``, ``registry``).
        own_table: A table only this kind of database has.
        hint: What to give instead, ending each refusal.

    Raises:
        ParameterError: If ``file`` is a folder or device, not an SQLite database (or damaged),
            or a database of something else (tables, none of them ``own_table``); ``sqlite3.OperationalError``
            (SQLite's own words) if it is locked or unreadable.
    """
    if file.exists() and not file.is_file():
        raise ParameterError(f"{what} {file}: must be a file (an SQLite database), not a folder or device")
    file.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(file, isolation_level=None, timeout=60)
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
