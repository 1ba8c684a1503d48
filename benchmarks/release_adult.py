"""Benchmark: full releases of the Adult example; utility (TVD yardstick) and wall time.

Run:  .venv/bin/python benchmarks/release_adult.py [--runs 3] [--spec examples/adult/release.yaml]
          [--set '{"weighting": "equal"}'] [--out benchmarks/results/release_adult.json]

``--set`` overrides keys of the spec (a JSON object), e.g. to compare budget weightings or
``two_way: auto`` against the declared pairs on the same table.

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

from dprelease.flows.settings import configure  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--spec", default=str(ROOT / "examples/adult/release.yaml"))
    parser.add_argument("--set", default="{}", help="JSON object of spec keys to override")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "release_adult.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        import os

        os.environ.setdefault("PREFECT_HOME", str(Path(tmp) / "prefect"))
        configure()
        import shutil

        import yaml

        from dprelease.flows.release import release

        source = Path(args.spec).resolve()
        spec_doc = yaml.safe_load(source.read_text(encoding="utf-8"))
        spec_doc.update(json.loads(args.set))
        example = Path(tmp) / "example"
        example.mkdir()
        for name in (spec_doc["schema"], spec_doc["data"]):
            shutil.copy(source.parent / name, example / name)
        spec_path = example / "release.yaml"
        spec_path.write_text(yaml.safe_dump(spec_doc), encoding="utf-8")
        rows = []
        for run in range(args.runs):
            started = time.perf_counter()
            target = Path(release(spec=str(spec_path), out=str(Path(tmp) / "out"),
                                  ledger=str(Path(tmp) / f"ledger-{run}.sqlite"), release_id=f"bench-{run}"))
            seconds = time.perf_counter() - started
            utility = json.loads((target / "internal" / "utility.json").read_text())
            rows.append({"run": run, "seconds": seconds, "tvd1": utility["tvd1"], "tvd2": utility["tvd2"],
                         "tvd3": utility["tvd3"]})
            print(f"run {run}: {seconds:.1f} s  tvd1 {utility['tvd1']:.4f}  tvd2 {utility['tvd2']:.4f}  "
                  f"tvd3 {utility['tvd3']:.4f}", flush=True)
    summary = {k: statistics.mean(r[k] for r in rows) for k in ("seconds", "tvd1", "tvd2", "tvd3")}
    print("mean: " + "  ".join(f"{k} {v:.4f}" for k, v in summary.items()))
    Path(args.out).write_text(json.dumps({"spec": args.spec, "set": json.loads(args.set), "runs": rows,
                                          "mean": summary}, indent=2) + "\n")


if __name__ == "__main__":
    main()
