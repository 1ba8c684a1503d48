"""A table of our own making with the numeric traits of issue 14's point 5, for benchmarks/peers_adult.py.

45,000 rows, 20 columns: 15 categorical columns driven by three latent factors (so pairs are dependent)
and 5 numeric columns with no public bounds, found by SVT in a release:

* ``balance``: signed, 8 % negative, a spike of 35 % at zero, a heavy right tail (lognormal);
* ``duration``: a heavy-tailed duration in seconds with a −1 sentinel ("unknown", 5 %);
* ``contacts``: a count with many zeros and a Pareto tail (values up to about 10⁵);
* ``age``: 18-95, moderately skewed;
* ``net_flow``: signed heavy tails on both sides, a spike at zero.

Each numeric column depends on the latent factors, so its pairs with categorical columns carry signal.
The schema declares only what a steward would know without the rows: types, a generous ``search_range``,
``bins: quantiles`` and the public spikes (0, the −1 sentinel).

Usage::

    .venv/bin/python benchmarks/tables/heavy_tails.py OUT_DIR      # writes table.parquet, schema.yaml, release.yaml
                                                                   # and release-cross.yaml (cross_pairs)
    .venv/bin/python benchmarks/peers_adult.py --spec OUT_DIR/release.yaml --systems dprelease-flow independent \\
        bootstrap --epsilons 1
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

ROWS = 45_000
SEED = 20261125  # public: the table is synthetic


def make_table(rows: int = ROWS, seed: int = SEED) -> pa.Table:
    """The table (a seeded generator: this is made-up data, not a sensitive input)."""
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(rows, 3))
    columns: dict[str, pa.Array] = {}
    for i in range(15):
        k = 2 + (i % 6) * 2  # 2 .. 12 categories
        weights = rng.normal(size=3)
        score = latent @ weights + rng.normal(scale=1.0, size=rows)
        cuts = np.quantile(score, np.sort(rng.uniform(0.05, 0.95, k - 1)))
        codes = np.searchsorted(cuts, score)
        columns[f"c{i:02d}"] = pa.array([f"v{c}" for c in codes], type=pa.string())
    a, b, c = latent[:, 0], latent[:, 1], latent[:, 2]
    u = rng.random(rows)
    negative = u < 0.04 + 0.04 * (a > 0.5)
    zero = (~negative) & (u < 0.35 + 0.1 * (b > 0))
    balance = np.where(negative, -np.round(rng.lognormal(5 + 0.5 * a, 1.0)),
                       np.where(zero, 0.0, np.round(rng.lognormal(7 + 0.8 * a, 1.2))))
    duration = np.round(rng.lognormal(4 + 0.6 * b, 1.1))
    duration = np.where(rng.random(rows) < 0.05 + 0.03 * (c > 1), -1.0, duration)
    contacts = np.where(rng.random(rows) < 0.3 + 0.2 * (c < 0), 0.0,
                        np.floor(rng.pareto(1.3, rows) * (3 + 2 * (a > 0))) + 1)
    age = np.clip(np.round(45 + 14 * b + rng.normal(scale=10, size=rows)), 18, 95)
    flow = np.where(rng.random(rows) < 0.25, 0.0, np.round(rng.standard_t(2.5, rows) * 300 * np.exp(0.4 * c)))
    for name, values in (("balance", balance), ("duration", duration), ("contacts", contacts), ("age", age),
                         ("net_flow", flow)):
        columns[name] = pa.array(values.astype(np.int64), type=pa.int64())
    return pa.table(columns)


def write(folder: Path) -> Path:
    """Write the table, its schema and a release spec (ε = 1) into ``folder``; return the spec's path."""
    folder.mkdir(parents=True, exist_ok=True)
    table = make_table()
    pq.write_table(table, folder / "table.parquet", row_group_size=10_000)
    columns: dict[str, object] = {}
    for name in table.column_names:
        if name.startswith("c") and name[1:].isdigit():
            k = 2 + (int(name[1:]) % 6) * 2
            columns[name] = {"type": "category", "categories": [f"v{i}" for i in range(k)]}
    numeric = {
        "balance": {"search_range": [-1048576, 67108864], "spikes": [0]},
        "duration": {"search_range": [-1, 16777216], "spikes": [-1]},
        "contacts": {"search_range": [0, 16777216], "spikes": [0]},
        "age": {"search_range": [0, 1024]},
        "net_flow": {"search_range": [-16777216, 16777216], "spikes": [0]},
    }
    for name, spec in numeric.items():
        columns[name] = {"type": "int", **spec, "bins": "quantiles"}
    (folder / "schema.yaml").write_text(yaml.safe_dump({"table": "heavy_tails", "columns": columns},
                                                       sort_keys=False), encoding="utf-8")
    release = {
        "dataset": "heavy-tails", "schema": "schema.yaml", "data": "table.parquet",
        "budget": {"epsilon": 1, "delta": 1.0e-9}, "lifetime_budget": {"epsilon": 3, "delta": 1.0e-9},
        "allocation": {"bounds": 0.10, "one_way": 0.36, "selection": 0.04, "cliques": 0.50},
        "cliques": "auto", "clique_bins": 8, "weighting": "balanced",
    }
    (folder / "release.yaml").write_text(yaml.safe_dump(release, sort_keys=False), encoding="utf-8")
    # the same with pairs across the junction tree's branches (README, "Pairs across the tree's branches")
    cross = {**release, "allocation": {"bounds": 0.10, "one_way": 0.36, "selection": 0.04, "cliques": 0.25,
                                       "cross": 0.25}, "cross_pairs": 24}  # docs/research/synthesis.md §7.2
    (folder / "release-cross.yaml").write_text(yaml.safe_dump(cross, sort_keys=False), encoding="utf-8")
    return folder / "release.yaml"


if __name__ == "__main__":
    print(write(Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/tables/heavy-tails")))
