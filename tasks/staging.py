"""Release folders: staging, the steward-only folder, the manifest and its verification.

A release folder holds public files only, exactly those its manifest lists. Steward-only files (exact
row counts, validation results, the internal report, stage failures) go to the release's steward
folder under a separate root (``--internal``, default ``.dprelease/internal/``), owner-only.

No Prefect here: ``dprelease verify`` uses it without starting anything.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from dprelease.schemas.identifiers import FolderError, check_identifier, inside

MANIFEST = "manifest.json"
STAGING_RECORD = "staging-folder.txt"
"""In the steward folder of a release: the staging folder its run created (so a re-run may reclaim it)."""


def staging_dir(out: Path, dataset: str, release_id: str) -> Path:
    """Where a release is assembled before it is renamed into place (checked to stay under ``out``)."""
    return inside(out, check_identifier("dataset", dataset), f".staging-{check_identifier('release id', release_id)}")


def final_dir(out: Path, dataset: str, release_id: str) -> Path:
    """Where a published release lives (checked to stay under ``out``)."""
    return inside(out, check_identifier("dataset", dataset), check_identifier("release id", release_id))


def steward_dir(internal: Path, dataset: str, release_id: str) -> Path:
    """The steward-only folder of a release, under the steward root ``internal`` (outside ``out``)."""
    return inside(internal, check_identifier("dataset", dataset), check_identifier("release id", release_id))


def _public_folder(path: Path) -> None:
    """Create ``path`` and its missing parents as 0755, whatever the umask."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(parents=True, exist_ok=True)
    for folder in missing:
        os.chmod(folder, 0o755)


def create_steward(path: Path) -> Path:
    """Create the steward-only folder of a release (and its missing parents), owner-only (0700)."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    for folder in missing:
        os.chmod(folder, 0o700)
    os.chmod(path, 0o700)
    return path


def check_staging(path: Path, steward: Path) -> bool:
    """Whether a staging folder is left at ``path`` by an earlier run of this release (to reclaim).

    Raises:
        FolderError: If the path is taken by a folder, file or link this release did not create.
    """
    if not (path.is_symlink() or path.exists()):
        return False
    record = steward / STAGING_RECORD
    ours = record.is_file() and record.read_text(encoding="utf-8") == str(path)
    if path.is_symlink() or not path.is_dir() or not ours:
        raise FolderError(f"staging folder {path}: exists and was not created by a run of this release; "
                          "refused (nothing was deleted)")
    return True


def create_staging(path: Path, steward: Path) -> Path:
    """Create a fresh staging folder for a release whose steward folder is ``steward``.

    A staging folder left by a killed run of the same release (recorded in its steward folder) is
    never published, so it is removed first. Anything else at that path, whoever made it, is left
    alone and the release is refused: nothing is ever deleted outside the staging area the release
    itself created.

    Raises:
        FolderError: If the path is taken by a folder or file this release did not create.
    """
    if check_staging(path, steward):
        shutil.rmtree(path)  # a crashed run of this very release: reclaimed
    _public_folder(path.parent)
    path.mkdir()
    os.chmod(path, 0o755)
    write_internal(steward, STAGING_RECORD, str(path))
    return path


def make_public(root: Path) -> None:
    """Public modes on every file (0644) and folder (0755) under ``root``, whatever the umask."""
    os.chmod(root, 0o755)
    for path in root.rglob("*"):
        if not path.is_symlink():
            os.chmod(path, 0o755 if path.is_dir() else 0o644)


def write_internal(steward: Path, name: str, text: str) -> Path:
    """Write a steward-only file (mode 0600) into the release's steward folder."""
    target = steward / name
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
    """Every file of a release folder but the manifest itself (a release folder holds public files only).

    Symbolic links are neither followed nor listed (:func:`verify_release` refuses them).
    """
    found = []
    for folder, _, files in os.walk(root, followlinks=False):
        for name in files:
            path = Path(folder) / name
            if not path.is_symlink() and path.is_file() and path.relative_to(root).as_posix() != MANIFEST:
                found.append(path)
    return sorted(found)


def file_entries(root: Path) -> list[dict[str, object]]:
    """Manifest entries (path, bytes, SHA-256) of every public file."""
    return [
        {"path": p.relative_to(root).as_posix(), "bytes": p.stat().st_size, "sha256": file_sha256(p)}
        for p in public_files(root)
    ]


def manifest_seal(manifest: dict[str, object]) -> str:
    """SHA-256 over the manifest's own fields (ids, spec, schema, provenance, the file list), canonical JSON.

    Stored in the manifest as ``manifest_sha256`` and sealed in the ledger at publication, so an edit of
    any field (e.g. the embedded spec's epsilon) is detected by :func:`verify_release`.
    """
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def _links(root: Path) -> list[str]:
    """Paths under ``root`` that are symbolic links (never followed)."""
    found = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            path = Path(folder) / name
            if path.is_symlink():
                found.append(path.relative_to(root).as_posix())
    return sorted(found)


def verify_release(root: Path, sealed: str | None = None) -> list[str]:
    """Problems of a release folder against its manifest; empty when it verifies.

    Every file must be listed with its size and SHA-256, every listed file present, no symbolic link
    anywhere (a link could point outside the release), and the manifest's own fields must match its
    ``manifest_sha256`` (and ``sealed``, the value the ledger recorded at publication, when given).
    """
    if root.is_symlink():
        return [f"{root.name}: is a symbolic link; refused"]
    manifest_path = root / MANIFEST
    if manifest_path.is_symlink() or not manifest_path.is_file():
        return [f"{MANIFEST} is missing"]
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        listed = {str(f["path"]): f for f in manifest["files"]}
    except (ValueError, KeyError, TypeError, AttributeError):
        return [f"{MANIFEST} is not a valid manifest"]
    problems = [f"{link}: a symbolic link; refused" for link in _links(root)]
    seal = manifest.get("manifest_sha256")
    if seal is None:
        problems.append(f"{MANIFEST}: has no manifest_sha256")
    elif seal != manifest_seal(manifest):
        problems.append(f"{MANIFEST}: its fields (ids, spec, schema, file list) do not match its manifest_sha256")
    if sealed is not None and seal != sealed:
        problems.append(f"{MANIFEST}: manifest_sha256 differs from the one the ledger sealed at publication")
    present = {p.relative_to(root).as_posix() for p in public_files(root)}
    for path in sorted(present - set(listed)):
        problems.append(f"{path}: not listed in the manifest")
    for path, entry in sorted(listed.items()):
        file = root / path
        if path not in present:
            if not file.is_symlink():
                problems.append(f"{path}: listed in the manifest but missing")
        elif file.stat().st_size != entry.get("bytes") or file_sha256(file) != entry.get("sha256"):
            problems.append(f"{path}: SHA-256 does not match the manifest")
    return problems
