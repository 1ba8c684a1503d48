"""Benchmark: full releases of the Adult example; utility (TVD yardstick) and wall time.

Run:  .venv/bin/python benchmarks/release_adult.py [--runs 3] [--out benchmarks/results/release_adult.json]

Each run is a complete release through the Prefect flow (validation, bounds, measurement, synthesis,
report, publication) into a temporary folder with a temporary ledger; the utility figures are read
from the release's internal report (computed against the real table).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flows.settings import configure  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "release_adult.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        import os

        os.environ.setdefault("PREFECT_HOME", str(Path(tmp) / "prefect"))
        configure()
        from flows.release import release

        rows = []
        for run in range(args.runs):
            started = time.perf_counter()
            target = Path(release(spec=str(ROOT / "examples/adult/release.yaml"), out=str(Path(tmp) / "out"),
                                  ledger=str(Path(tmp) / f"ledger-{run}.sqlite"), release_id=f"bench-{run}"))
            seconds = time.perf_counter() - started
            utility = json.loads((target / "internal" / "utility.json").read_text())
            rows.append({"run": run, "seconds": seconds, "tvd1": utility["tvd1"], "tvd2": utility["tvd2"],
                         "tvd3": utility["tvd3"]})
            print(f"run {run}: {seconds:.1f} s  tvd1 {utility['tvd1']:.4f}  tvd2 {utility['tvd2']:.4f}  "
                  f"tvd3 {utility['tvd3']:.4f}", flush=True)
    summary = {k: statistics.mean(r[k] for r in rows) for k in ("seconds", "tvd1", "tvd2", "tvd3")}
    print("mean: " + "  ".join(f"{k} {v:.4f}" for k, v in summary.items()))
    Path(args.out).write_text(json.dumps({"runs": rows, "mean": summary}, indent=2) + "\n")


if __name__ == "__main__":
    main()
