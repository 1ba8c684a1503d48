"""dprelease: differentially private data releases, orchestrated by Prefect.

The package is one namespace over the repository's top-level folders (see ``setup.py``):
``dprelease.dp`` (differential privacy: mechanisms, the ledger, measurement, the noisy side),
``dprelease.schemas`` (the declarative schema and spec model), ``dprelease.tasks`` (Prefect tasks),
``dprelease.flows`` (Prefect flows and the command line). Importing this package imports nothing else.
"""

from __future__ import annotations

import subprocess
from functools import cache
from importlib import metadata
from pathlib import Path

__all__ = ["__version__", "commit"]

try:
    __version__ = metadata.version("dprelease")
except metadata.PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "0+unknown"


@cache
def commit() -> str:
    """The code commit: stamped into a built package (``setup.py``), else asked of git in a checkout.

    Returns ``"unknown"`` when neither is available (never raises).
    """
    try:
        from dprelease._build import COMMIT  # type: ignore[import-not-found,unused-ignore]

        return str(COMMIT) or "unknown"
    except ImportError:
        pass
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return "unknown"
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        out = ""
    return out or "unknown"
