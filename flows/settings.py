"""Prefect settings for dprelease, applied before Prefect is imported.

The embedded default is Prefect's local ephemeral API on SQLite under a project-local
PREFECT_HOME (``.dprelease/prefect`` in the working directory). Telemetry is off; task results are
never cached or persisted by default. Settings the user already exported win.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

DEFAULTS = {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    # A fresh PREFECT_HOME needs its database migrated on first start; 20 s is too little here.
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
    # The default cache policy hashes every task input and may persist results: never for DP tasks.
    "PREFECT_TASKS_DEFAULT_NO_CACHE": "true",
    "PREFECT_RESULTS_PERSIST_BY_DEFAULT": "false",
    "PREFECT_SERVER_UI_ENABLED": "false",
    "PREFECT_LOGGING_LOG_PRINTS": "false",
    # A bounded thread pool for concurrent task submission.
    "PREFECT_TASKS_RUNNER_THREAD_POOL_MAX_WORKERS": "4",
}


def state_dir() -> Path:
    """The project-local state folder (Prefect home, default ledger, steward-only files): owner-only."""
    return Path(os.environ.get("DPRELEASE_HOME", ".dprelease")).resolve()


def _owner_only_folder(path: Path) -> None:
    """Create ``path`` (and parents) readable by the owner only, whatever the umask."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)


def configure() -> None:
    """Set Prefect's environment defaults (call before importing prefect).

    The state folder is owner-only: it holds the ledger, the steward-only files and Prefect's home.
    Prefect's local result storage (where a worker may pickle a failed run's exception even with
    persistence off) is pointed at a steward-only folder inside it.
    """
    state = state_dir()
    if not state.exists():
        _owner_only_folder(state)
    os.environ.setdefault("PREFECT_HOME", str(state / "prefect"))
    Path(os.environ["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_LOCAL_STORAGE_PATH", str(state / "prefect-storage"))
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)


_PR_SET_PDEATHSIG = 1


def _die_with_parent_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to send SIGTERM to the child when its parent dies (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

    return hook


def start_embedded_server() -> None:
    """Start Prefect's temporary API server from this (main) thread, tied to this process's life.

    Prefect starts the same server lazily on first use; started here first, it is the one Prefect
    then finds and reuses. The difference: its process gets ``PR_SET_PDEATHSIG``, so a ``kill -9``
    of the command takes the server with it instead of leaving an orphan holding a port and the
    database. The signal follows the thread that started the server, hence the main thread only.
    Nothing happens when an API URL is configured (a real server is used then).
    """
    if os.environ.get("PREFECT_API_URL"):
        return
    from prefect.server.api import server as prefect_server

    hook = _die_with_parent_hook()
    if hook is not None:
        shim = SimpleNamespace(**{k: getattr(subprocess, k) for k in dir(subprocess) if not k.startswith("__")})

        def popen(*args: Any, **kwargs: Any) -> Any:
            kwargs["preexec_fn"] = hook  # it only calls prctl
            return subprocess.Popen(*args, **kwargs)

        shim.Popen = popen
        setattr(prefect_server, "subprocess", shim)  # noqa: B010 - a module attribute, replaced on purpose
    prefect_server.SubprocessASGIServer().start()
