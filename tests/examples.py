"""Copies of the bundled examples for tests that change them."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

ADULT = Path(__file__).resolve().parents[1] / "examples" / "adult"


def adult_example(tmp_path: Path, **changes: object) -> Path:
    """A copy of the Adult example under ``tmp_path/example`` with ``changes`` to its spec; the spec's path."""
    folder = tmp_path / "example"
    folder.mkdir()
    for name in ("schema.yaml", "adult.parquet"):
        shutil.copy(ADULT / name, folder / name)
    doc = yaml.safe_load((ADULT / "release.yaml").read_text(encoding="utf-8"))
    doc.update(changes)
    (folder / "release.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    return folder / "release.yaml"
