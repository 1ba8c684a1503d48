"""Copies of the bundled examples for tests that change them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import yaml

ADULT = Path(__file__).resolve().parents[1] / "examples" / "adult"


def adult_example(tmp_path: Path, rows: int | None = None, **changes: object) -> Path:
    """A copy of the Adult example under ``tmp_path/example`` with ``changes`` to its spec; the spec's path.

    ``rows``: only the table's first ``rows`` rows (for tests whose property does not depend on the size).
    """
    folder = tmp_path / "example"
    folder.mkdir()
    shutil.copy(ADULT / "schema.yaml", folder / "schema.yaml")
    if rows is None:
        shutil.copy(ADULT / "adult.parquet", folder / "adult.parquet")
    else:
        pq.write_table(pq.read_table(ADULT / "adult.parquet").slice(0, rows), folder / "adult.parquet")
    doc = yaml.safe_load((ADULT / "release.yaml").read_text(encoding="utf-8"))
    doc.update(changes)
    (folder / "release.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    return folder / "release.yaml"
