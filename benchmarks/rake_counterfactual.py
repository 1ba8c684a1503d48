"""Counterfactual (issue 14): would pairs across the junction tree's branches, imposed by raking, close the gap?

A degree-2 junction tree cannot hold a pair whose columns lie in different branches (``docs/research/synthesis.md``
§7). This asks what such pairs would buy if the model could use them, without building it: for each kept release
(``benchmarks/peers_adult.py --systems dprelease-core --keep``; each run folder holds ``measured.pickle`` and
``synthetic.parquet``), it

1. draws a pool of ``--pool`` times the rows from the release's own fitted model (the flow's ``estimate_model``
   and ``sample_synthetic`` on the kept measurements, the release's public seed);
2. picks the ``--pairs`` pairs with a numeric column whose TVD is most above the same synthetic table with its
   columns shuffled (an *oracle* choice: a release would pick them privately, and pay for it);
3. measures each such pair in the release's coarse bins (its noisy domains and clique maps) with Gaussian noise of
   scale ``--sigma`` (0: exact) — the real rows enter only here, as a release's measurement would;
4. rakes the pool's row weights to those tables (iterative proportional fitting: the pool's law times one factor
   per pair, the model's Monte Carlo counterpart with the pairs as extra cliques), and draws the release's row
   count from the pool by systematic resampling;
5. compares, pair by pair, with the shuffled line as ``benchmarks/pair_structure.py`` does.

Steward-only figures (computed from the real rows); seeded generators throughout (a scratch estimate, not a
release). Usage::

    .venv/bin/python benchmarks/rake_counterfactual.py --real /tmp/ht/table.parquet \\
        --runs /tmp/peers_adult-X/dprelease-core-1-{0,1,2} --numeric balance duration contacts age net_flow \\
        --pairs 8 --sigma 36 --pool 10
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pickle
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from pair_structure import shuffled  # noqa: E402

from dprelease.quality.utility import utility  # noqa: E402


def pool_from_model(run: Path, multiple: int) -> pa.Table:
    """``multiple`` times the release's rows, sampled from the model fitted to the run's kept measurements."""
    from dprelease.flows.settings import configure

    configure()
    import peers_adult

    peers_adult._quiet_prefect_context()
    from dprelease.tasks.synthesize import estimate_model, sample_synthetic

    with (run / "measured.pickle").open("rb") as fh:
        state = pickle.load(fh)
    estimate = estimate_model.fn(state["plan"], state["bounds"], state["measured"])
    estimate = dataclasses.replace(estimate, rows=estimate.rows * multiple)
    staging = tempfile.mkdtemp()
    result = sample_synthetic.fn(state["plan"], state["bounds"], estimate, staging, "counterfactual", state["mappings"])
    return pq.read_table(Path(staging) / result.table_file)


def coarse_codes(table: pa.Table, measured: Any) -> dict[str, np.ndarray]:
    """Each column's cell in the release's coarse domain (categories by position; numbers by its noisy edges)."""
    out: dict[str, np.ndarray] = {}
    for domain in measured.domains:
        values = table.column(domain.name).to_numpy(zero_copy_only=False)
        if domain.kind == "category":
            index = {c: i for i, c in enumerate(domain.categories)}
            out[domain.name] = np.array([index[v] for v in values])
        else:
            fine = np.clip(np.searchsorted(np.array(domain.edges), values.astype(float), side="right") - 1, 0,
                           len(domain.edges) - 2)
            out[domain.name] = measured.maps[domain.name][fine] if domain.name in measured.maps else fine
    return out


def rake(cells: list[np.ndarray], targets: list[np.ndarray], rows: int, sweeps: int = 30) -> np.ndarray:
    """Row weights whose weighted tables match ``targets`` (IPF over the pairs), normalised to sum to 1."""
    weights = np.ones(rows)
    for _ in range(sweeps):
        for cell, target in zip(cells, targets, strict=True):
            current = np.bincount(cell, weights=weights, minlength=len(target))
            weights *= np.where(current > 0, target / np.maximum(current, 1e-12), 1.0)[cell]
    return weights / weights.sum()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", required=True)
    parser.add_argument("--runs", nargs="+", required=True, help="kept dprelease-core run folders")
    parser.add_argument("--numeric", nargs="+", required=True)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--sigma", type=float, default=0.0)
    parser.add_argument("--pool", type=int, default=10)
    parser.add_argument("--tolerance", type=float, default=0.005)
    parser.add_argument("--out")
    args = parser.parse_args()
    real = pq.read_table(args.real)
    columns = real.column_names
    numeric = set(args.numeric)
    rng = np.random.default_rng(7)
    keys = ("release", "release_shuffled", "raked", "raked_shuffled")
    lines: dict[str, list[dict[str, float]]] = {key: [] for key in keys}
    tvd2: dict[str, list[float]] = {"release": [], "raked": []}
    for i, run in enumerate(map(Path, args.runs)):
        with (run / "measured.pickle").open("rb") as fh:
            measured = pickle.load(fh)["measured"]
        synthetic = pq.read_table(run / "synthetic.parquet").select(columns)
        pool = pool_from_model(run, args.pool).select(columns)
        before = utility(real, synthetic, columns, three_way=0)
        before_shuffled = utility(real, shuffled(synthetic, i), columns, three_way=0).two_way
        excess = sorted(((before.two_way[p] - before_shuffled[p], p) for p in before.two_way
                         if numeric & set(p.split("|"))), reverse=True)
        real_codes, pool_codes = coarse_codes(real, measured), coarse_codes(pool, measured)
        size = {c: int(max(real_codes[c].max(), pool_codes[c].max())) + 1 for c in real_codes}
        cells, targets = [], []
        for _, pair in excess[:args.pairs]:
            a, b = pair.split("|")
            table = np.bincount(real_codes[a] * size[b] + real_codes[b], minlength=size[a] * size[b]).astype(float)
            if args.sigma > 0:
                table = table + rng.normal(scale=args.sigma, size=table.shape)
            noisy = np.clip(table, 0, None)
            cells.append(pool_codes[a] * size[b] + pool_codes[b])
            targets.append(noisy * pool.num_rows / noisy.sum())
        weights = rake(cells, targets, pool.num_rows)
        draws = (rng.random() + np.arange(synthetic.num_rows)) / synthetic.num_rows
        raked = pool.take(pa.array(np.minimum(np.searchsorted(np.cumsum(weights), draws), pool.num_rows - 1)))
        after = utility(real, raked, columns, three_way=0)
        lines["release"].append(before.two_way)
        lines["release_shuffled"].append(before_shuffled)
        lines["raked"].append(after.two_way)
        lines["raked_shuffled"].append(utility(real, shuffled(raked, i), columns, three_way=0).two_way)
        tvd2["release"].append(before.tvd2)
        tvd2["raked"].append(after.tvd2)
    pairs = list(lines["release"][0])

    def worse(key: str) -> list[tuple[float, str]]:
        mean = {p: statistics.fmean(r[p] for r in lines[key]) for p in pairs}
        line = {p: statistics.fmean(r[p] for r in lines[key + "_shuffled"]) for p in pairs}
        ranked = sorted(((mean[p] - line[p], p) for p in pairs if numeric & set(p.split("|"))), reverse=True)
        return [(round(e, 4), p) for e, p in ranked if e > args.tolerance]

    result = {"pairs": args.pairs, "sigma": args.sigma, "pool": args.pool, "releases": len(args.runs),
              "tvd2": {k: round(statistics.fmean(v), 4) for k, v in tvd2.items()},
              "numeric_pairs_worse_than_shuffled_by_tolerance": {"release": worse("release"), "raked": worse("raked")}}
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
