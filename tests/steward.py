"""Where a test's release keeps its steward-only files (outside the public release folder)."""

from __future__ import annotations

import os
from pathlib import Path


def steward_of(release: Path, root: Path | None = None) -> Path:
    """The steward folder of the published release folder ``release`` (``<out>/<dataset>/<id>``).

    ``root`` is the steward root (``--internal``); by default ``internal/`` in ``$DPRELEASE_HOME``.
    """
    base = root if root is not None else Path(os.environ.get("DPRELEASE_HOME", ".dprelease")).resolve() / "internal"
    return base / release.parent.name / release.name
