"""A wide table of our own making: many category columns, few rows, for the cost of ``cliques: auto``'s selection.

300 columns ``c000`` … ``c299`` of 4 categories each, drawn independently and uniformly (a seeded generator: made-up
data), 3,000 rows. Every pair is a candidate of the spanning tree (44,850) and of the extra pairs, so the cost of
the structure selection per pair and round shows; the model's accuracy is not the point (the columns are independent).

Usage::

    .venv/bin/python benchmarks/tables/wide.py OUT_DIR            # writes table.parquet, schema.yaml, release.yaml
    .venv/bin/dprelease release OUT_DIR/release.yaml --out /tmp/wide-out --ledger /tmp/wide.sqlite

Measured (2-core machine, quiet): the release 574 s before the extra-pair candidates walked the junction tree once
(measurement 525 s), 79 s after (97 s on a new Prefect home, which migrates its database first; measurement
32–34 s, most of it OpenDP's exact Gumbel draws of 299 selection rounds).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

COLUMNS = 300
ROWS = 3_000
CATEGORIES = 4
SEED = 20261128  # public: the table is synthetic


def write(folder: Path, columns: int = COLUMNS, rows: int = ROWS) -> Path:
    """Write the table, its schema and a release spec (ε = 1) into ``folder``; return the spec's path."""
    rng = np.random.default_rng(SEED)
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"c{i:03d}" for i in range(columns)]
    labels = np.array([f"v{j}" for j in range(CATEGORIES)], dtype=object)
    table = pa.table({n: pa.array(labels[rng.integers(0, CATEGORIES, rows)].tolist(), pa.string()) for n in names})
    pq.write_table(table, folder / "table.parquet")
    schema = {"table": "wide", "columns": {n: {"type": "category", "categories": labels.tolist()} for n in names}}
    (folder / "schema.yaml").write_text(yaml.safe_dump(schema, sort_keys=False), encoding="utf-8")
    release = {
        "dataset": "wide", "schema": "schema.yaml", "data": "table.parquet",
        "budget": {"epsilon": 1, "delta": 1.0e-9}, "lifetime_budget": {"epsilon": 3, "delta": 1.0e-9},
        "allocation": {"bounds": 0.05, "one_way": 0.42, "selection": 0.04, "cliques": 0.49}, "cliques": "auto",
    }
    (folder / "release.yaml").write_text(yaml.safe_dump(release, sort_keys=False), encoding="utf-8")
    return folder / "release.yaml"


if __name__ == "__main__":
    print(write(Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/tables/wide")))
