"""Benchmark: a 10-million-row Adult-like table released end to end on this machine.

Run:  .venv/bin/python benchmarks/scale_10m.py [--rows 10000000] [--row-group 1000000]
          [--out benchmarks/results/scale_10m.json] [--dask ADDRESS]

1. Generates the table by resampling Adult's rows with a seeded generator and writes it as Parquet
   in row groups of ``--row-group`` rows to a temporary folder (never committed, removed at the end).
2. Warms up a fresh PREFECT_HOME with a release of Adult itself (the first start migrates Prefect's
   database), then runs ``dprelease release`` on the big table as a subprocess of the project venv,
   with a temporary ledger and a copy of ``examples/adult/release.yaml`` whose ``data:`` points at
   the big table, under ``/usr/bin/time -v`` (wall time and peak RSS of the subprocess).
3. Times each stage from the Prefect log lines (a task's duration is the time between the end of the
   previous task and its own end: the flow runs its tasks one after the other), and samples the
   release process's RSS every 0.1 s (``/proc``) for the peak RSS of each stage.
4. Measures the compute floor in this process: a pyarrow read of the measured columns plus numpy
   bincounts of every 1-way marginal and of 13 coarse 3-way marginals (consecutive columns, numeric
   columns in 8 bins), which approximate the 13 cliques of ``cliques: auto``.
5. Reports the size of the decoded columns (numpy nbytes of the measured columns as int64/float64)
   and the ratios, and writes the JSON result.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT / "examples" / "adult"
VENV = ROOT / ".venv" / "bin"
SEED = 20261123
TASK_END = re.compile(r"^(\d\d:\d\d:\d\d\.\d+) \| \w+\s+\| Task run '([A-Za-z_]+)-[^']*' - Finished in state (\w+)")
FLOW_START = re.compile(r"^(\d\d:\d\d:\d\d\.\d+) \| \w+\s+\| Flow run '[^']*' - Beginning flow run")


def generate(path: Path, rows: int, row_group: int) -> float:
    """Resample Adult's rows into ``path`` (Parquet, one row group per ``row_group`` rows); returns seconds."""
    started = time.perf_counter()
    adult = pq.read_table(ADULT / "adult.parquet")
    generator = np.random.default_rng(SEED)  # a benchmark table, not noise: a seeded generator is right here
    with pq.ParquetWriter(path, adult.schema, write_page_checksum=True) as writer:
        for start in range(0, rows, row_group):
            count = min(row_group, rows - start)
            writer.write_table(adult.take(generator.integers(0, adult.num_rows, count)), row_group_size=count)
    return time.perf_counter() - started


def _rss_samples(parent: subprocess.Popen[str], samples: list[tuple[float, int]]) -> None:
    """Sample the RSS of /usr/bin/time's child (the release) every 0.1 s as (seconds of the day, bytes)."""
    while parent.poll() is None:
        try:
            children = Path(f"/proc/{parent.pid}/task/{parent.pid}/children").read_text().split()
            status = Path(f"/proc/{children[0]}/status").read_text() if children else ""
        except OSError:
            status = ""
        found = re.search(r"VmRSS:\s+(\d+) kB", status)
        if found:
            now = datetime.now()
            samples.append((now.hour * 3600 + now.minute * 60 + now.second + now.microsecond / 1e6,
                            int(found.group(1)) * 1024))
        time.sleep(0.1)


def run_release(spec: Path, tmp: Path, release_id: str, env: dict[str, str], extra: list[str]) -> dict[str, object]:
    """One ``dprelease release`` subprocess under /usr/bin/time -v: wall, peak RSS, stage times and peaks."""
    command = ["/usr/bin/time", "-v", str(VENV / "dprelease"), "release", str(spec), "--out", str(tmp / "out"),
               "--ledger", str(tmp / "ledger.sqlite"), "--release-id", release_id, *extra]
    samples: list[tuple[float, int]] = []
    started = time.perf_counter()
    with subprocess.Popen(command, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as process:
        sampler = threading.Thread(target=_rss_samples, args=(process, samples), daemon=True)
        sampler.start()
        stdout, stderr = process.communicate()
        sampler.join()
    wall = time.perf_counter() - started
    if process.returncode != 0:
        sys.stderr.write(stdout[-4000:] + stderr[-8000:])
        raise SystemExit(f"dprelease release failed ({process.returncode})")
    peak_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr).group(1))  # type: ignore[union-attr]
    elapsed = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", stderr)
    spans = stage_spans(stdout + stderr)
    return {"wall_s": round(wall, 2), "time_elapsed": elapsed.group(1) if elapsed else None,
            "peak_rss_bytes": peak_kib * 1024,
            "stages_s": {name: round(end - start, 2) for name, (start, end) in spans.items()},
            "stage_peak_rss_bytes": {name: max((rss for at, rss in samples if start <= at <= end), default=None)
                                     for name, (start, end) in spans.items()},
            # Arrow's and Python's allocators keep freed memory: a stage's peak includes earlier stages'.
            "stage_start_rss_bytes": {name: next((rss for at, rss in samples if at >= start), None)
                                      for name, (start, end) in spans.items()}}


COUNT_ONLY = """
import json, re, sys, time
from pathlib import Path
from dprelease.schemas.encoding import domains_for, rules_for
from dprelease.schemas.spec import load_spec
from dprelease.dp.measurement.marginals import count_all
from dprelease.tasks.ingest import row_groups
spec = load_spec(sys.argv[1])
ranges = {c.name: tuple(c.search_range) for c in spec.schema.measured if c.search_range is not None}
domains = domains_for(spec.schema, ranges)
names = [d.name for d in domains]
workload = [(n,) for n in names] + [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
started = time.perf_counter()
totals, handling = count_all(row_groups(spec.data, names), domains, rules_for(spec.schema), workload)
# VmHWM, not ru_maxrss: Linux carries ru_maxrss across execve (the forking parent's peak would count).
peak = int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024
print(json.dumps({"seconds": round(time.perf_counter() - started, 2), "marginals": len(workload),
                  "rows": handling.rows_in, "peak_rss_bytes": peak}))
"""


def count_only(spec: Path) -> dict[str, object]:
    """The production map-reduce alone in a fresh process: all 1-ways and all 2-ways, one pass."""
    done = subprocess.run([str(VENV / "python"), "-c", COUNT_ONLY, str(spec)], cwd=ROOT, capture_output=True,
                          text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def stage_spans(log: str) -> dict[str, tuple[float, float]]:
    """(start, end) of each task in seconds of the day, from the Prefect log: each task ends, the next starts."""
    def seconds(stamp: str) -> float:
        moment = datetime.strptime(stamp, "%H:%M:%S.%f")
        return moment.hour * 3600 + moment.minute * 60 + moment.second + moment.microsecond / 1e6

    previous: float | None = None
    spans: dict[str, tuple[float, float]] = {}
    for line in log.splitlines():
        if (start := FLOW_START.match(line)) is not None:
            previous = seconds(start.group(1))
        elif (end := TASK_END.match(line)) is not None and previous is not None:
            now = seconds(end.group(1))
            spans[end.group(2)] = (previous, now)
            previous = now
    return spans


def floor(path: Path, spec_path: Path) -> dict[str, float | int]:
    """The compute floor: read the measured columns, code them, bincount the 1-ways and 13 coarse 3-ways."""
    sys.path.insert(0, str(ROOT))
    from dprelease.schemas.spec import load_spec

    schema = load_spec(spec_path).schema
    names = [c.name for c in schema.measured]
    started = time.perf_counter()
    table = pq.read_table(path, columns=names)
    read_s = time.perf_counter() - started
    decoded = 0
    fine: dict[str, np.ndarray] = {}
    coarse: dict[str, np.ndarray] = {}
    for name in names:
        column = table.column(name)
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            decoded += 8 * len(column)  # as int64 codes
            indices = pc.fill_null(pc.dictionary_encode(column).combine_chunks().indices, -1)
            fine[name] = coarse[name] = indices.to_numpy().astype(np.int64) + 1  # 0: null
        else:
            values = pc.fill_null(column, pc.min(column)).to_numpy()
            decoded += values.astype(np.float64 if values.dtype.kind == "f" else np.int64).nbytes
            low, high = float(np.nanmin(values)), float(np.nanmax(values))
            width = max((high - low) / 64, 1.0)  # 64 fine bins, as the release's numeric domains at most
            fine[name] = np.minimum(((values - low) / width).astype(np.int64), 63)
            coarse[name] = fine[name] // 8
    counted = 0
    for name in names:
        counted += int(np.bincount(fine[name]).sum())
    sizes = {n: int(coarse[n].max()) + 1 for n in names}
    for i in range(len(names) - 1):
        a, b, c = names[i], names[i + 1], names[(i + 2) % len(names)]
        combined = (coarse[a] * sizes[b] + coarse[b]) * sizes[c] + coarse[c]
        counted += int(np.bincount(combined, minlength=sizes[a] * sizes[b] * sizes[c]).sum())
    total_s = time.perf_counter() - started
    return {"read_s": round(read_s, 2), "read_and_count_s": round(total_s, 2), "decoded_bytes": decoded,
            "columns": len(names), "marginals": len(names) + len(names) - 1, "cells_counted": counted}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--row-group", type=int, default=1_000_000)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "scale_10m.json"))
    parser.add_argument("--dask", default=None, help="scheduler address: run the counting map on that cluster")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dprelease-scale-") as name:
        tmp = Path(name)
        example = tmp / "example"
        example.mkdir()
        shutil.copy(ADULT / "schema.yaml", example / "schema.yaml")
        shutil.copy(ADULT / "adult.parquet", example / "adult.parquet")
        generate_s = generate(example / "big.parquet", args.rows, args.row_group)
        doc = yaml.safe_load((ADULT / "release.yaml").read_text(encoding="utf-8"))
        (example / "warmup.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
        doc["data"] = "big.parquet"
        (example / "release.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
        env = {**os.environ, "DPRELEASE_HOME": str(tmp / "state"), "PREFECT_HOME": str(tmp / "state" / "prefect"),
               "PYTHONUNBUFFERED": "1"}
        extra = ["--dask", args.dask] if args.dask else []
        warmup = run_release(example / "warmup.yaml", tmp, "warmup", env, [])
        big = run_release(example / "release.yaml", tmp, "scale", env, extra)
        compute = floor(example / "big.parquet", example / "release.yaml")
        counting = count_only(example / "release.yaml")
        file_bytes = (example / "big.parquet").stat().st_size
    stages = dict(big["stages_s"])  # type: ignore[call-overload]
    stage_peaks = dict(big["stage_peak_rss_bytes"])  # type: ignore[call-overload]
    measure_s = stages.get("measure_marginals", 0.0) + stages.get("discover_bounds", 0.0)
    wall, peak, decoded = float(big["wall_s"]), int(big["peak_rss_bytes"]), int(compute["decoded_bytes"])  # type: ignore[call-overload]
    internal = ("validate_table", "evaluate_utility")  # the steward-only checks (validation; the internal report)
    without_internal = wall - sum(stages.get(name, 0.0) for name in internal)
    peak_without_internal = max((v for k, v in stage_peaks.items() if k not in internal and v), default=0)
    result = {
        "rows": args.rows, "row_group_rows": args.row_group, "parquet_bytes": file_bytes,
        "generate_s": round(generate_s, 2), "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "dask": args.dask, "warmup_adult_release": warmup, "release": big, "floor": compute,
        "count_all_one_pass_1way_2way": counting,
        "ratios": {
            "wall_over_floor": round(wall / float(compute["read_and_count_s"]), 1),
            "bounds_and_measure_over_floor": round(measure_s / float(compute["read_and_count_s"]), 1),
            "peak_rss_over_decoded_columns": round(peak / decoded, 2),
            "wall_without_validate_and_evaluate_s": round(without_internal, 2),
            "peak_rss_without_validate_and_evaluate_over_decoded": round(peak_without_internal / decoded, 2),
            "count_all_pass_peak_rss_over_decoded": round(int(counting["peak_rss_bytes"]) / decoded, 2),  # type: ignore[call-overload]
        },
        "targets": {"wall_under_60s": wall < 60, "peak_rss_under_3x_decoded": peak < 3 * decoded},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
