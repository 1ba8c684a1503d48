"""Benchmark: the counting map in process against the same map on a Dask LocalCluster of 2 workers.

BENCHMARK ONLY. The tables are Adult rows (and, for ``--rows``, Adult rows resampled with a seeded numpy
generator) written to a temporary folder, never to the repository; the counts are exact and never leave
this process except as the benchmark's digest.

Run:  .venv/bin/python benchmarks/dask_map.py [--rows 10000000] [--row-group 500000] [--repeats 5]
      [--out benchmarks/results/dask_map.json]

What is timed is one counting pass of ``tasks.measure.Counter`` (the release's measure stage), with the
workload of ``cliques: auto``'s first two passes on Adult's schema: every 1-way marginal and 13 3-way
marginals of consecutive columns (numeric columns at their schema search range, so the domains are the
widest the release could use). The two ways alternate, ``--repeats`` times each, and the medians are
reported with their ratio:

- ``in_process``: ``Counter(data, unit).count(...)``, the default path;
- ``dask``: ``Counter(data, unit, client).count(...)`` with ``client`` connected to a
  ``distributed.LocalCluster(n_workers=2, threads_per_worker=1)`` started once (start-up not timed; a
  steward's cluster is already running). Each pass ships the public domains once (scatter) and one plain
  function call per run of row groups; only exact partial counts come back.

The digests of the two ways' counts must agree, or the benchmark fails.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dprelease.schemas.encoding import domains_for, rules_for  # noqa: E402
from dprelease.schemas.spec import load_spec  # noqa: E402
from dprelease.tasks.measure import Counter, map_client  # noqa: E402

ADULT = ROOT / "examples" / "adult"
SEED = 20261124


def workload(names: list[str]) -> list[tuple[str, ...]]:
    """Every 1-way and 13 3-ways of consecutive columns."""
    return [(n,) for n in names] + [tuple(names[i:i + 3]) for i in range(len(names) - 2)]


def digest(counts: dict[tuple[str, ...], Any]) -> str:
    hasher = hashlib.sha256()
    for columns in sorted(counts):
        hasher.update(repr(columns).encode())
        hasher.update(np.ascontiguousarray(counts[columns], dtype=np.int64).tobytes())
    return hasher.hexdigest()


def write_table(folder: Path, rows: int | None, row_group: int) -> Path:
    """Adult itself (rows None) or ``rows`` Adult rows resampled, in row groups of ``row_group`` rows."""
    adult = pq.read_table(ADULT / "adult.parquet")
    if rows is None:
        table = adult
    else:
        picks = np.random.default_rng(SEED).integers(0, adult.num_rows, size=rows)
        table = adult.take(pa.array(picks))
    path = folder / f"table-{table.num_rows}.parquet"
    pq.write_table(table, path, row_group_size=row_group)
    return path


def time_pass(counter: Counter, domains: Any, rules: Any, work: Any) -> tuple[float, str]:
    start = time.perf_counter()
    counts, _ = counter.count(domains, rules, work)
    return time.perf_counter() - start, digest(counts)


def run_size(path: Path, repeats: int, address: str) -> dict[str, Any]:
    spec = load_spec(ADULT / "release.yaml")
    bounds = {c.name: (float(c.search_range[0]), float(c.search_range[1]))
              for c in spec.schema.columns if getattr(c, "search_range", None)}
    domains = domains_for(spec.schema, bounds)
    rules = rules_for(spec.schema)
    work = workload([d.name for d in domains])
    unit = spec.schema.privacy_unit
    times: dict[str, list[float]] = {"in_process": [], "dask": []}
    digests: set[str] = set()
    with map_client(address) as client:
        for _ in range(repeats):
            seconds, found = time_pass(Counter(path, unit), domains, rules, work)
            times["in_process"].append(seconds)
            digests.add(found)
            seconds, found = time_pass(Counter(path, unit, client), domains, rules, work)
            times["dask"].append(seconds)
            digests.add(found)
    if len(digests) != 1:
        raise SystemExit(f"{path.name}: the two ways' counts differ")
    medians = {k: statistics.median(v) for k, v in times.items()}
    return {"rows": pq.read_metadata(path).num_rows, "row_groups": pq.read_metadata(path).num_row_groups,
            "marginals": len(work), "seconds": times, "median_s": medians,
            "dask_over_in_process": medians["dask"] / medians["in_process"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--row-group", type=int, default=500_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "dask_map.json")
    args = parser.parse_args()
    from distributed import LocalCluster

    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        folder = Path(tmp)
        for rows, group in ((None, 5_000), (args.rows, args.row_group)):
            path = write_table(folder, rows, group)
            result = run_size(path, args.repeats, cluster.scheduler_address)
            results.append(result)
            print(f"{result['rows']:>10,} rows, {result['row_groups']} row groups: in process "
                  f"{result['median_s']['in_process']:.2f} s, dask {result['median_s']['dask']:.2f} s "
                  f"(ratio {result['dask_over_in_process']:.2f}, medians of {args.repeats})", flush=True)
            path.unlink()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                                    "workers": 2, "results": results}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
