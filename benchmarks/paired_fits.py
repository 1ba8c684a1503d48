"""Paired re-fits: the same noisy measurements fitted by two versions of the estimator (issue 14, §6.3).

``make`` draws noisy measurements once through the benchmark's own path (``peers_adult.measure_core``: plan,
bounds, mappings, bins, measurement; fresh secure noise) and pickles them, one folder per seed. ``fit`` runs
``estimate_model`` + ``sample_synthetic`` on those pickles with the ``dprelease`` that ``PYTHONPATH`` names
(this checkout, or another worktree's: set it, or the venv's editable install is used), optionally with
``--iterations N`` (``dp.synthesis.junction.ITERATIONS``), scores each synthetic table with the benchmark's
yardstick and appends one JSON line per set: the fit's final loss, tvd1/2/3, and the CPU time (user + sys) of
``estimate_model``. Only the estimator differs between two ``fit`` runs over the same sets, so their difference
is the estimator's (sampling is seeded by the spec). Steward-only figures (computed from the real rows); the
pickles hold noisy measurements of the real data, so keep them under a private temporary folder.

Usage::

    PYTHONPATH=. .venv/bin/python benchmarks/paired_fits.py make --eps 3 --seeds 0 1 2 3 4 5 --sets /tmp/s --tag a3
    PYTHONPATH=../base .venv/bin/python benchmarks/paired_fits.py fit --sets /tmp/s --tag a3 --seeds 0 1 2 3 4 5 \\
        --label before
    PYTHONPATH=. .venv/bin/python benchmarks/paired_fits.py fit --sets /tmp/s --tag a3 --seeds 0 1 2 3 4 5 \\
        --label after --iterations 700
    .venv/bin/python benchmarks/paired_fits.py table --out fits.jsonl
"""

from __future__ import annotations

import argparse
import json
import pickle
import shutil
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import peers_adult  # noqa: E402


def make(spec: Path, epsilon: float, seeds: list[int], sets: Path, tag: str) -> None:
    """One pickled set of noisy measurements per seed, in ``sets/TAG_SEED``."""
    for seed in seeds:
        work = sets / f"{tag}_{seed}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        path = peers_adult.spec_at(spec, epsilon, seed, work / "spec")
        state = peers_adult.measure_core(path, seed, work)
        state["spec_source"] = str(spec)
        with (work / "measured.pickle").open("wb") as fh:
            pickle.dump(state, fh)
        print(f"made {work}", flush=True)


def fit(sets: Path, tag: str, seeds: list[int], label: str, out: Path) -> None:
    """Estimate + sample + score every set of ``tag`` with the code on the path; one JSON line per set."""
    import dprelease.dp.synthesis.junction as junction
    from dprelease.tasks.synthesize import estimate_model, sample_synthetic

    evaluators: dict[str, peers_adult.Evaluator] = {}
    for seed in seeds:
        work = sets / f"{tag}_{seed}"
        with (work / "measured.pickle").open("rb") as fh:
            state = pickle.load(fh)
        staging = Path(state["staging"])
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        started = time.process_time()
        estimate = estimate_model.fn(state["plan"], state["bounds"], state["measured"])
        cpu = time.process_time() - started
        synthesis = sample_synthetic.fn(state["plan"], state["bounds"], estimate, str(staging), "benchmark",
                                        state["mappings"])
        spec = state["spec_source"]
        evaluate = evaluators.setdefault(spec, peers_adult.Evaluator(Path(spec)))
        report = evaluate(staging / synthesis.table_file)
        row = {"label": label, "tag": tag, "seed": seed, "code": junction.__file__,
               "iterations": junction.ITERATIONS, "loss": estimate.model.fitted.loss, "estimate_cpu_s": cpu,
               "tvd1": report["tvd1"], "tvd2": report["tvd2"], "tvd3": report["tvd3"]}
        with out.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)


def table(out: Path) -> str:
    """Means per (tag, label): loss, tvd1/2/3, median estimate CPU."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for line in out.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            groups[(row["tag"], row["label"])].append(row)
    lines = ["| tag | label | sets | loss | tvd1 | tvd2 | tvd3 | estimate CPU s (median) |",
             "|---|---|---|---|---|---|---|---|"]
    for (tag, label), rows in sorted(groups.items()):
        means = [statistics.fmean(r[k] for r in rows) for k in ("loss", "tvd1", "tvd2", "tvd3")]
        lines.append(f"| {tag} | {label} | {len(rows)} | {means[0]:,.0f} | {means[1]:.4f} | {means[2]:.4f} | "
                     f"{means[3]:.4f} | {statistics.median(r['estimate_cpu_s'] for r in rows):.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["make", "fit", "table"])
    parser.add_argument("--spec", default=str(peers_adult.DEFAULT_SPEC))
    parser.add_argument("--eps", type=float, default=3.0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--sets", default="/tmp/paired-fits", help="where the pickled measurement sets live")
    parser.add_argument("--tag", default="adult3")
    parser.add_argument("--label", default="run")
    parser.add_argument("--iterations", type=int, help="mirror-descent steps of the fit (default: the code's)")
    parser.add_argument("--out", default="paired_fits.jsonl")
    args = parser.parse_args()
    if args.command == "table":
        print(table(Path(args.out)))
        return
    from dprelease.flows.settings import configure

    configure()
    peers_adult._quiet_prefect_context()
    if args.command == "make":
        make(Path(args.spec).resolve(), args.eps, args.seeds, Path(args.sets), args.tag)
        return
    if args.iterations is not None:
        import dprelease.dp.synthesis.junction as junction

        junction.ITERATIONS = args.iterations  # read at call time by fit_junction
    fit(Path(args.sets), args.tag, args.seeds, args.label, Path(args.out))


if __name__ == "__main__":
    main()
