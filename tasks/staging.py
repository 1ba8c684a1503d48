"""The staging folder of a release: public files beside a steward-only ``internal/`` folder."""

from __future__ import annotations

import os
from pathlib import Path

INTERNAL = "internal"


def staging_dir(out: Path, dataset: str, release_id: str) -> Path:
    """Where a release is assembled before it is renamed into place."""
    return out / dataset / f".staging-{release_id}"


def final_dir(out: Path, dataset: str, release_id: str) -> Path:
    """Where a published release lives."""
    return out / dataset / release_id


def create_staging(path: Path) -> Path:
    """Create a fresh staging folder with ``internal/`` readable by the owner only."""
    path.mkdir(parents=True, exist_ok=False)
    internal = path / INTERNAL
    internal.mkdir(mode=0o700)
    os.chmod(internal, 0o700)
    return path


def write_internal(staging: Path, name: str, text: str) -> Path:
    """Write a steward-only file (mode 0600) into ``internal/``."""
    target = staging / INTERNAL / name
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(target, 0o600)
    return target
