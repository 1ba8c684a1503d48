"""Counterfactual releases of the synthesis core, in process: a spec with a few keys changed, several seeds.

Issue 14 (``docs/research/synthesis.md`` §6.2). Each run is exactly the path of ``peers_adult.py
--systems dprelease-core`` (``plan_budget``, ``find_bounds``, ``find_mappings``, ``find_bins``,
``measure_marginals``, ``estimate_model``, ``sample_synthetic``, through the tasks' undecorated ``.fn``,
outside Prefect; fresh secure noise every run), but in one process, so that many counterfactuals are cheap:
``--set root=auto``, ``--set clique_bins=12``, ``--set "allocation={...}"`` change the spec (YAML values;
``key=null`` drops a key), and ``--iterations N`` changes the fit's number of mirror-descent steps
(``dp.synthesis.junction.ITERATIONS``; a counterfactual of the estimator, not a spec key). Every run is
scored with the benchmark's yardstick (``quality.utility.utility``) and appended to ``--out`` as one JSON
line: tvd1/2/3, every pair's TVD, the chosen tree and cliques, and the CPU time (user + sys) of the
measurement path, the fit and the sampling. Steward-only figures (computed from the real rows).

``--table`` prints, per tag, the means over its runs and the pairs worse than the independent baseline
stored in ``benchmarks/results/peers_adult.json`` (the mean over its seeds at the same ε) by more than 0.005.

Usage::

    .venv/bin/python benchmarks/structure_counterfactuals.py --eps 3 --seeds 0 1 2 3 4 5 --tag hub
    .venv/bin/python benchmarks/structure_counterfactuals.py --eps 3 --seeds 0 1 2 3 4 5 --set root=auto --tag auto
    .venv/bin/python benchmarks/structure_counterfactuals.py --spec examples/acs-ma2019/release.yaml --eps 1 \\
        --seeds 0 1 2 --set root=auto --tag acs-auto
    .venv/bin/python benchmarks/structure_counterfactuals.py --table hub auto acs-auto
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import peers_adult  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "structure_counterfactuals.jsonl"
TOLERANCE = 0.005


def run(spec: Path, epsilon: float, seed: int, changes: list[str], evaluate: peers_adult.Evaluator) -> dict[str, Any]:
    """One release through the core path with the spec's keys changed; its utility and CPU times."""
    from dprelease.tasks.synthesize import estimate_model, sample_synthetic

    work = Path(tempfile.mkdtemp(prefix="structure-"))
    path = peers_adult.spec_at(spec, epsilon, seed, work / "spec")
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    for change in changes:
        key, value = change.split("=", 1)
        parsed = yaml.safe_load(value)
        if parsed is None:
            doc.pop(key, None)
        else:
            doc[key] = parsed
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    started = time.process_time()
    core = peers_adult.measure_core(path, seed, work)
    plan, bounds, mappings, measured, staging = (core[k] for k in ("plan", "bounds", "mappings", "measured", "staging"))
    measured_at = time.process_time()
    estimate = estimate_model.fn(plan, bounds, measured)
    estimated_at = time.process_time()
    synthesis = sample_synthetic.fn(plan, bounds, estimate, str(staging), "benchmark", mappings)
    sampled_at = time.process_time()
    report = evaluate(Path(staging) / synthesis.table_file)
    shutil.rmtree(work, ignore_errors=True)
    return {"tvd1": report["tvd1"], "tvd2": report["tvd2"], "tvd3": report["tvd3"], "two_way": report["two_way"],
            "cliques": [list(m.columns) for m in measured.cliques], "tree": [list(e) for e in measured.tree],
            "measure_cpu_s": measured_at - started, "estimate_cpu_s": estimated_at - measured_at,
            "sample_cpu_s": sampled_at - estimated_at}


def table(rows: list[dict[str, Any]], tags: list[str]) -> str:
    """Means per tag, and the pairs worse than the stored independent baseline by more than the tolerance."""
    stored = json.loads(peers_adult.RESULTS.read_text(encoding="utf-8"))["runs"]
    out = ["| tag | spec | ε | runs | tvd1 | tvd2 | tvd3 | estimate CPU s (median) | pairs worse | worse by > .005 |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for tag in tags:
        runs = [r for r in rows if r["tag"] == tag]
        if not runs:
            continue
        spec, epsilon = runs[0]["spec"], runs[0]["epsilon"]
        base = [r for r in stored if r["system"] == "independent" and r["spec"] == spec and r["epsilon"] == epsilon]
        worse = over = "–"
        if base:
            excess = [statistics.fmean(r["two_way"][p] for r in runs) - statistics.fmean(b["two_way"][p] for b in base)
                      for p in runs[0]["two_way"]]
            worse, over = str(sum(e > 0 for e in excess)), str(sum(e > TOLERANCE for e in excess))
        means = [statistics.fmean(r[k] for r in runs) for k in ("tvd1", "tvd2", "tvd3")]
        out.append(f"| {tag} | {spec} | {epsilon:g} | {len(runs)} | {means[0]:.4f} | {means[1]:.4f} | {means[2]:.4f} "
                   f"| {statistics.median(r['estimate_cpu_s'] for r in runs):.2f} | {worse} | {over} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default=str(peers_adult.DEFAULT_SPEC))
    parser.add_argument("--eps", type=float, default=3.0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=YAML", help="spec keys to change")
    parser.add_argument("--iterations", type=int, help="mirror-descent steps of the fit (default: the code's)")
    parser.add_argument("--tag", default="run")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--table", nargs="*", metavar="TAG", help="only print the table of these tags")
    args = parser.parse_args()
    out = Path(args.out)
    if args.table is not None:
        rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]
        print(table(rows, args.table or list(dict.fromkeys(r["tag"] for r in rows))))
        return
    from dprelease.flows.settings import configure

    configure()
    peers_adult._quiet_prefect_context()
    if args.iterations is not None:
        import dprelease.dp.synthesis.junction as junction

        junction.ITERATIONS = args.iterations  # read at call time by fit_junction
    spec = Path(args.spec).resolve()
    evaluate = peers_adult.Evaluator(spec)
    for seed in args.seeds:
        row = {"tag": args.tag, "spec": str(spec.relative_to(ROOT)) if spec.is_relative_to(ROOT) else str(spec),
               "epsilon": args.eps, "seed": seed, "set": args.set, "iterations": args.iterations,
               "commit": peers_adult.code_commit(), **run(spec, args.eps, seed, args.set, evaluate)}
        row["two_way"] = {k: round(v, 5) for k, v in row["two_way"].items()}
        with out.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row, separators=(",", ":")) + "\n")
        print(f"{args.tag} ε={args.eps:g} seed={seed}: tvd1 {row['tvd1']:.4f} tvd2 {row['tvd2']:.4f} "
              f"tvd3 {row['tvd3']:.4f} root clique {row['cliques'][0] if row['cliques'] else None} "
              f"estimate CPU {row['estimate_cpu_s']:.2f} s", flush=True)


if __name__ == "__main__":
    main()
