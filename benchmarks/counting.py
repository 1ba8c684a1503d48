"""Benchmark: counting throughput of all 1-way and 2-way marginals, production path vs a numpy floor.

BENCHMARK ONLY. The tables are Adult rows resampled with a seeded numpy generator and written to a
temporary folder (never to the repository); the counts are exact and never leave this process.

Run:  .venv/bin/python benchmarks/counting.py [--rows 1000000 10000000] [--repeats 3]
      [--row-group 1000000] [--out benchmarks/results/counting.json]

Domains are built from ``examples/adult/schema.yaml`` with ``dprelease.schemas.encoding.column_domain`` and
the row-level rules with ``rules_for``, as the release does. The three columns without public
bounds (fnlwgt, capital-gain, capital-loss) take their schema ``search_range`` as bounds (the
release uses SVT-discovered ones). ``education-num`` is derived in a release (it costs no budget),
but it is counted here too, so the workload is that of the issue: all 15 one-way and all
15 * 14 / 2 = 105 two-way marginals of the 15-column table.

For each size, each measurement runs in a fresh Python process (so its peak RSS is its own) and is
repeated ``--repeats`` times, the two alternating; the fastest run of each is reported:

- ``production``: ``dprelease.dp.measurement.marginals.count_all(
  dprelease.tasks.ingest.row_groups(...), domains, rules, workload)``, the map-reduce of the release's
  ``measure_marginals`` task;
- ``floor``: the same reader (``row_groups``), the same encoding done once per row group
  (``dprelease.dp.measurement.marginals.encode_table``), then a plain ``np.bincount(code, minlength=size)`` per
  column and ``np.bincount(a * size_b + b, minlength=size_a * size_b)`` per pair over those codes, summed over
  row groups. Its time is split into reading, encoding and counting.

Both produce a digest of every count; the benchmark fails if they differ.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import platform
import resource
import subprocess
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

from dprelease.dp.measurement.marginals import ColumnDomain, ColumnRule, count_all, encode_table  # noqa: E402
from dprelease.schemas.encoding import column_domain, rules_for  # noqa: E402
from dprelease.schemas.table import load_schema  # noqa: E402

ADULT = ROOT / "examples" / "adult"
SEED = 20260522


def adult_domains() -> tuple[list[ColumnDomain], dict[str, ColumnRule]]:
    """Encodings of all 15 Adult columns; search ranges stand in for the SVT-discovered bounds."""
    schema = load_schema(ADULT / "schema.yaml")
    bounds = {c.name: c.search_range for c in schema.columns if c.search_range is not None}
    domains = [column_domain(c, bounds) for c in schema.columns]
    return domains, rules_for(schema)


def workload(domains: list[ColumnDomain]) -> list[tuple[str, ...]]:
    """All one-way and all two-way marginals, in schema order."""
    names = [d.name for d in domains]
    return [(n,) for n in names] + list(itertools.combinations(names, 2))


def generate(rows: int, path: Path, row_group: int) -> None:
    """Write ``rows`` Adult rows resampled with replacement (seeded), ``row_group`` rows per row group."""
    adult = pq.read_table(ADULT / "adult.parquet")
    rng = np.random.default_rng(SEED)
    with pq.ParquetWriter(path, adult.schema) as writer:
        for start in range(0, rows, row_group):
            n = min(row_group, rows - start)
            chunk = adult.take(pa.array(rng.integers(0, adult.num_rows, n)))
            writer.write_table(chunk, row_group_size=row_group)


def digest(totals: dict[tuple[str, ...], np.ndarray], order: list[tuple[str, ...]]) -> str:
    """SHA-256 of every count (int64, in workload order): equal digests mean bit-identical counts."""
    h = hashlib.sha256()
    for cols in order:
        counts = totals[cols]
        if counts.dtype != np.int64:
            raise AssertionError(f"counts of {cols} are {counts.dtype}, not int64")
        h.update(counts.tobytes())
    return h.hexdigest()


def run_production(path: Path) -> dict[str, Any]:
    """The release's map-reduce over row groups."""
    from dprelease.tasks.ingest import row_groups

    domains, rules = adult_domains()
    order = workload(domains)
    started = time.perf_counter()
    totals, handling = count_all(row_groups(path, [d.name for d in domains]), domains, rules, order)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "digest": digest(totals, order), "rows_kept": handling.rows_kept}


def run_floor(path: Path) -> dict[str, Any]:
    """Same reader and encoding, then a plain ``np.bincount`` per marginal over the codes."""
    from dprelease.tasks.ingest import row_groups

    domains, rules = adult_domains()
    order = workload(domains)
    size = {d.name: d.size for d in domains}
    totals = {cols: np.zeros(int(np.prod([size[c] for c in cols])), dtype=np.int64) for cols in order}
    read = encode = one_way = two_way = 0.0
    rows_kept = 0
    started = time.perf_counter()
    groups = row_groups(path, [d.name for d in domains])
    while True:
        t0 = time.perf_counter()
        batch = next(groups, None)
        t1 = time.perf_counter()
        read += t1 - t0
        if batch is None:
            break
        codes, handling = encode_table(batch, domains, rules)
        rows_kept += handling.rows_kept
        t2 = time.perf_counter()
        encode += t2 - t1
        for cols in order:
            if len(cols) == 1:
                totals[cols] += np.bincount(codes[cols[0]], minlength=size[cols[0]])
        t3 = time.perf_counter()
        one_way += t3 - t2
        for cols in order:
            if len(cols) == 2:
                a, b = cols
                totals[cols] += np.bincount(codes[a] * size[b] + codes[b], minlength=size[a] * size[b])
        two_way += time.perf_counter() - t3
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "read": read, "encode": encode, "one_way": one_way, "two_way": two_way,
            "digest": digest(totals, order), "rows_kept": rows_kept}


def child(mode: str, path: Path) -> None:
    """One measurement in this (fresh) process; prints its result and peak RSS as JSON."""
    import dprelease.tasks.ingest  # noqa: F401  (Prefect and friends: counted in the baseline, not the measurement)

    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = run_production(path) if mode == "production" else run_floor(path)
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["baseline_rss_mib"] = baseline
    print(json.dumps(result))


def run_child(mode: str, path: Path) -> dict[str, Any]:
    """One measurement in a fresh Python process."""
    out = subprocess.run([sys.executable, __file__, "--child", mode, str(path)], check=True,
                         capture_output=True, text=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def measure(path: Path, repeats: int) -> dict[str, dict[str, Any]]:
    """Per mode, the fastest of ``repeats`` runs (peak RSS: the largest); the modes alternate, so
    load from other processes on the machine hits both alike."""
    runs: dict[str, list[dict[str, Any]]] = {"production": [], "floor": []}
    for _ in range(repeats):
        for mode, done in runs.items():
            done.append(run_child(mode, path))
    out = {}
    for mode, done in runs.items():
        if len({r["digest"] for r in done}) != 1:
            raise AssertionError(f"{mode}: counts differ between repeats")
        best = dict(min(done, key=lambda r: r["seconds"]))
        best["all_seconds"] = [r["seconds"] for r in done]
        best["peak_rss_mib"] = max(r["peak_rss_mib"] for r in done)
        out[mode] = best
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--row-group", type=int, default=1_000_000)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "counting.json"))
    parser.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]))
        return

    domains, _ = adult_domains()
    marginals = workload(domains)
    results = []
    with tempfile.TemporaryDirectory(prefix="dprelease-counting-") as tmp:
        for rows in args.rows:
            path = Path(tmp) / f"adult-{rows}.parquet"
            started = time.perf_counter()
            generate(rows, path, args.row_group)
            print(f"{rows:,} rows: generated in {time.perf_counter() - started:.1f} s "
                  f"({path.stat().st_size / 2**20:.0f} MiB, {pq.ParquetFile(path).num_row_groups} row groups)",
                  flush=True)
            measured = measure(path, args.repeats)
            production, floor = measured["production"], measured["floor"]
            if production["digest"] != floor["digest"] or production["rows_kept"] != floor["rows_kept"]:
                raise AssertionError(f"{rows} rows: production and floor counts differ")
            path.unlink()
            results.append({"rows": rows, "production": production, "floor": floor,
                            "ratio": production["seconds"] / floor["seconds"]})
            print(f"  production {production['seconds']:.2f} s, floor {floor['seconds']:.2f} s "
                  f"(ratio {results[-1]['ratio']:.2f})", flush=True)

    header = (f"{'rows':>11} {'production s':>12} {'floor s':>8} {'ratio':>6} {'floor: read':>11} {'encode':>7} "
              f"{'1-way':>6} {'2-way':>6} {'prod peak RSS MiB':>17} {'floor peak RSS MiB':>18}")
    print()
    print(header)
    print("-" * len(header))
    for r in results:
        p, f = r["production"], r["floor"]
        print(f"{r['rows']:>11,} {p['seconds']:>12.2f} {f['seconds']:>8.2f} {r['ratio']:>6.2f} {f['read']:>11.2f} "
              f"{f['encode']:>7.2f} {f['one_way']:>6.2f} {f['two_way']:>6.2f} {p['peak_rss_mib']:>17.0f} "
              f"{f['peak_rss_mib']:>18.0f}")
    print(f"{len(marginals)} marginals ({len(domains)} one-way, {len(marginals) - len(domains)} two-way); "
          f"fastest of {args.repeats}; counts bit-identical between production and floor")
    print(f"peak RSS includes the interpreter and imports (~{results[0]['production']['baseline_rss_mib']:.0f} MiB "
          "before reading any row)")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "benchmark_only": True,
        "data": "Adult rows resampled with replacement (seeded numpy), temporary Parquet",
        "row_group_rows": args.row_group,
        "repeats": args.repeats,
        "marginals": {"one_way": len(domains), "two_way": len(marginals) - len(domains)},
        "domain_sizes": {d.name: d.size for d in domains},
        "machine": {"python": platform.python_version(), "numpy": np.__version__, "pyarrow": pa.__version__,
                    "cpus": len(os.sched_getaffinity(0))},
        "results": results,
    }, indent=2) + "\n")


if __name__ == "__main__":
    main()
