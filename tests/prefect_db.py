"""A Prefect database migrated once, copied into each fresh Prefect home a test starts a server in.

A Prefect server on a new home first runs all of Prefect's Alembic migrations on its empty SQLite
database: about 10 s of CPU on 2 cores, more than the rest of the server's start. A user pays it once
per home (the first ``make example``); the suite would pay it for its test harness in each
pytest-xdist process and for every subprocess test that starts a server in a home of its own. Here
the migrations run once per Prefect version (the first process to ask migrates, under a file lock;
the others wait and reuse the file, later runs too), with Prefect's own command,
``prefect server database upgrade``, and :func:`seed_home` copies the result where a new home's
server looks for its database. A server started on the copy finds the database at Alembic's head and
migrates nothing; everything else about the home stays new.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

_DB = "prefect.db"  # PREFECT_SERVER_DATABASE_CONNECTION_URL's default: sqlite:///$PREFECT_HOME/prefect.db


def _cache() -> Path:
    """The folder of the migrated database: one per user and Prefect version (its migrations are fixed)."""
    # The installed version, read without importing Prefect (1.4 s of CPU in pytest's main process at start).
    folder = Path(tempfile.gettempdir()) / f"dprelease-prefect-db-{os.getuid()}-{metadata.version('prefect')}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def migrated_database() -> Path:
    """A SQLite database with every Prefect migration applied (made on first use, then reused)."""
    folder = _cache()
    done = folder / _DB
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            home = Path(tempfile.mkdtemp(dir=folder))
            env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
            env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
            subprocess.run([sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"], env=env,
                           check=True, capture_output=True, timeout=600)
            os.replace(home / _DB, done)
            shutil.rmtree(home, ignore_errors=True)
    return done


def start_migrating() -> subprocess.Popen[bytes] | None:
    """Make the migrated database in a background process now, unless it exists (None then).

    Called as the test session starts (tests/conftest.py), so that the migrations run while the
    pytest-xdist processes start and collect the suite, not after, when their first test asks for a
    server and one of them would migrate while the other waits on the lock. A test that asks before
    it is done waits on the same lock; if it fails, the first test to ask runs it again and reports why.
    """
    if (_cache() / _DB).exists():
        return None
    code = "from tests.prefect_db import migrated_database; migrated_database()"
    return subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def seed_home(prefect_home: Path) -> None:
    """Put a copy of the migrated database where a server on ``prefect_home`` looks for it (a new home only).

    Missing folders are made owner-only, as ``flows.settings.configure`` makes the state folder.
    """
    for folder in (prefect_home.parent, prefect_home):
        folder.mkdir(mode=0o700, exist_ok=True)
    target = prefect_home / _DB
    if not target.exists():
        shutil.copyfile(migrated_database(), target)
