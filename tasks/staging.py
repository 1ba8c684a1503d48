"""Release folders: staging, the steward-only ``internal/`` part, the manifest and its verification.

No Prefect here: ``dprelease verify`` uses it without starting anything.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

INTERNAL = "internal"
MANIFEST = "manifest.json"


def staging_dir(out: Path, dataset: str, release_id: str) -> Path:
    """Where a release is assembled before it is renamed into place."""
    return out / dataset / f".staging-{release_id}"


def final_dir(out: Path, dataset: str, release_id: str) -> Path:
    """Where a published release lives."""
    return out / dataset / release_id


def create_staging(path: Path) -> Path:
    """Create a fresh staging folder with ``internal/`` readable by the owner only.

    A stale staging folder of the same release (left by a killed run) is never published, so it
    is removed first.
    """
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
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


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, streamed."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def public_files(root: Path) -> list[Path]:
    """Every public file of a release folder (``internal/`` and the manifest itself excluded)."""
    out = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        relative = path.relative_to(root)
        if relative.parts[0] == INTERNAL or relative.as_posix() == MANIFEST:
            continue
        out.append(path)
    return out


def file_entries(root: Path) -> list[dict[str, object]]:
    """Manifest entries (path, bytes, SHA-256) of every public file."""
    return [
        {"path": p.relative_to(root).as_posix(), "bytes": p.stat().st_size, "sha256": file_sha256(p)}
        for p in public_files(root)
    ]


def verify_release(root: Path) -> list[str]:
    """Problems of a release folder against its manifest; empty when every public file verifies."""
    manifest_path = root / MANIFEST
    if not manifest_path.is_file():
        return [f"{MANIFEST} is missing"]
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        listed = {str(f["path"]): f for f in manifest["files"]}
    except (ValueError, KeyError, TypeError):
        return [f"{MANIFEST} is not a valid manifest"]
    problems = []
    present = {p.relative_to(root).as_posix() for p in public_files(root)}
    for path in sorted(present - set(listed)):
        problems.append(f"{path}: not listed in the manifest")
    for path, entry in sorted(listed.items()):
        file = root / path
        if path not in present:
            problems.append(f"{path}: listed in the manifest but missing")
        elif file.stat().st_size != entry.get("bytes") or file_sha256(file) != entry.get("sha256"):
            problems.append(f"{path}: SHA-256 does not match the manifest")
    return problems
