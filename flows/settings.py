"""Prefect settings for dprelease, applied before Prefect is imported.

The embedded default is Prefect's local ephemeral API on SQLite under a project-local
PREFECT_HOME (``.dprelease/prefect`` in the working directory). Telemetry is off; task results are
never cached or persisted by default. Settings the user already exported win.
"""

from __future__ import annotations

import os
from pathlib import Path

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
    """The project-local state folder (Prefect home, default ledger)."""
    return Path(os.environ.get("DPRELEASE_HOME", ".dprelease")).resolve()


def configure() -> None:
    """Set Prefect's environment defaults (call before importing prefect)."""
    os.environ.setdefault("PREFECT_HOME", str(state_dir() / "prefect"))
    Path(os.environ["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)
