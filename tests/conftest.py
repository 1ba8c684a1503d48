"""Shared fixtures: Prefect settings before Prefect is imported, seeded rngs, the Prefect harness."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

# One BLAS thread, set before anything loads numpy (OpenBLAS reads it once, at load) and inherited by the
# releases the tests run in subprocesses. The suite's matrices are small (RAPPOR's 2048 x 51 design, the
# junction tree's cliques): on 2 shared cores OpenBLAS's own threads spin against each other and against
# the other process, and the RAPPOR decoding runs took 4.4x longer with them (0.64 s -> 2.79 s for 12).
# Products of the same inputs are what the tests compare, so no assertion depends on the thread count.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Prefect reads its settings at import: point it at a throw-away home before anything imports it.
_HOME = tempfile.mkdtemp(prefix="dprelease-test-prefect-")
atexit.register(shutil.rmtree, _HOME, True)  # each pytest process (xdist: one per worker) removes its own
os.environ["PREFECT_HOME"] = _HOME
os.environ.setdefault("DPRELEASE_HOME", str(Path(_HOME) / "state"))

from dprelease.flows.settings import configure  # noqa: E402
from tests.prefect_server import SessionServer  # noqa: E402

configure()

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# A shared 2-core machine can make example generation slow: that is not a failure of the code under test.
# Examples are derandomized so that a CI run is reproducible; HYPOTHESIS_PROFILE=explore draws fresh ones.
settings.register_profile("dprelease", suppress_health_check=[HealthCheck.too_slow], deadline=None,
                          derandomize=True)
settings.register_profile("explore", suppress_health_check=[HealthCheck.too_slow], deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dprelease"))

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT / "examples" / "adult"


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded generator for post-processing tests (never for noise on sensitive values)."""
    return np.random.default_rng(20261122)


@pytest.fixture(scope="session")
def prefect_harness():
    """This process's Prefect server (a real API on 127.0.0.1, SQLite) as its Prefect API.

    One server per process for the whole session, on a copy of the migrated database
    (:mod:`tests.prefect_server`); Prefect's client points at it as ``prefect_test_harness`` would.
    A pytest-xdist process starts it as the session starts; without pytest-xdist, the first test that
    asks starts it (a run of a few tests that need no server starts none).
    """
    from tests.prefect_server import URL, SessionServer, connect

    own = None if os.environ.get(URL) else SessionServer()  # without xdist: started on first use
    try:
        with connect():
            yield
    finally:
        if own is not None:
            own.stop()


@pytest.fixture
def harness_api(prefect_harness, monkeypatch):
    """The session's test API as ``PREFECT_API_URL`` in the environment, for commands run in this process.

    ``flows.cli.main(["release", ...])`` spawns its own embedded Prefect server when no API URL is in the
    environment (``flows.settings.spawn_embedded_server``) and stops it at exit: the command ends its
    process, but in a test process the server would boot (a second server beside the harness) and then
    stay up, idle, for the rest of the session. With the URL set the command uses the session's server
    (the one ``prefect_harness`` started), as every other flow test does. The embedded server itself is
    tested in processes of its own (tests/flows/test_server_cleanup.py, tests/flows/test_gc_boot.py).
    """
    from prefect.settings import PREFECT_API_URL

    monkeypatch.setenv("PREFECT_API_URL", str(PREFECT_API_URL.value()))


def pytest_sessionstart(session: pytest.Session) -> None:
    """Prefect's migrations start in the background at once (``tests.prefect_db.start_migrating``), in the
    main process (with pytest-xdist it starts the worker processes and runs no test); each pytest-xdist
    process starts its Prefect server (:class:`tests.prefect_server.SessionServer`), which boots while
    the process collects the suite.
    """
    if not hasattr(session.config, "workerinput"):
        from tests.prefect_db import start_migrating

        session.config.stash[_MIGRATION] = start_migrating()
    else:
        session.config.stash[_SERVER] = SessionServer()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop this process's Prefect server; reap the background migration (long done, except in a run of a
    few quick tests on a new machine)."""
    server = session.config.stash.get(_SERVER, None)
    if server is not None:
        server.stop()
    migration = session.config.stash.get(_MIGRATION, None)
    if migration is not None:
        migration.wait()


_MIGRATION = pytest.StashKey[subprocess.Popen[bytes] | None]()
_SERVER = pytest.StashKey[SessionServer]()

FILE_SECONDS = Path(__file__).with_name("file_seconds.json")
"""Each test file's recorded duration (``scripts/record_test_seconds.py`` writes it from a JUnit report)."""


def longest_files_first(items: list[pytest.Item], seconds: dict[str, float]) -> None:
    """Order ``items`` by their file's recorded duration, longest first (stable: a file's tests keep theirs).

    With whole files per process (``--dist loadfile --no-loadscope-reorder``), pytest-xdist hands out
    files in this order to whichever process is free: the longest ones start first and the short ones
    fill the end, instead of a two-minute file starting last while the other process has nothing left
    to run. A file without a record (a new one) counts as short. Only the order changes, never what runs.
    """
    root = Path(__file__).resolve().parents[1]

    def key(item: pytest.Item) -> float:
        try:
            name = item.path.resolve().relative_to(root).as_posix()
        except ValueError:
            return 0.0
        return -seconds.get(name, 0.0)

    items.sort(key=key)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first (:func:`longest_files_first`); tests marked ``slow`` run only when asked
    for (``-m slow`` or ``DPRELEASE_SLOW=1``)."""
    if FILE_SECONDS.is_file():
        longest_files_first(items, json.loads(FILE_SECONDS.read_text(encoding="utf-8")))
    if os.environ.get("DPRELEASE_SLOW") == "1" or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow or DPRELEASE_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
