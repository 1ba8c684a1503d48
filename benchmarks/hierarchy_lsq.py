"""Benchmark: hierarchical counts, raw noisy vs least squares vs the full TopDown-style post-processing.

BENCHMARK ONLY. The true counts are simulated from a seeded numpy generator and the noise is seeded,
continuous Gaussian N(0, sigma²): nothing here touches real data or is a release. The figures are
internal measurements for choosing an algorithm.

Run:  .venv/bin/python benchmarks/hierarchy_lsq.py [--trials 200] [--out benchmarks/results/hierarchy_lsq.json]

Trees (levels counted below the root):

* ``geography``: 3 levels, 5 states x 20 counties x 10 tracts (1000 tracts), plus the root (the nation);
* ``tree_10k``: 4 levels of fan-out 10 (10^4 leaves), plus the root.

True leaf counts are overdispersed (negative binomial, mean 20, shape 0.5: many empty or small cells and
a long tail); inner counts are their sums. Every level, root included, is measured with Gaussian noise;
a person is in one node per level (L2 sensitivity 1 per level), and a zCDP budget rho is split evenly
over the L measured levels, so sigma = sqrt(L / (2 rho)) on every node. Two budgets: rho = 1 (little
noise against the counts) and rho = 0.01 (noise comparable to the small counts, where non-negativity
matters).

Per level (root, middle levels, leaves) and ``--trials`` trials, the mean squared error against the truth
of: the raw noisy counts; ``dp.synthesis.consistency.least_squares`` (the BLUE);
``dp.synthesis.consistency.make_consistent``
(least squares, non-negativity, controlled rounding; root estimated, not pinned) with each non-negativity
method, "project" (the default) and "scale"; and the % reduction of each against raw. The exact reduction
of the root's variance by least squares is printed beside the table as a check. The same seed is used for
both budgets of a tree, so the noise differs only by its scale and least squares, being linear, shows the
same % reduction at both (its gain does not depend on the noise level; the non-linear stages' does). Then the wall time
of ``make_consistent`` (and of each stage) on a tree of 10^6 leaves (10 x 10 x 100 x 100), median of 5.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dprelease.dp.synthesis.consistency import least_squares, make_consistent, nonnegative, round_consistent  # noqa: E402
from dprelease.dp.synthesis.hierarchy import HierarchyTree  # noqa: E402

TREES = {"geography": [5, 20, 10], "tree_10k": [10, 10, 10, 10]}
LEVEL_NAMES = {"geography": ["nation", "state", "county", "tract"]}
RHOS = (1.0, 0.01)
ESTIMATORS = ("raw", "least_squares", "consistent_project", "consistent_scale")
TIMING_FANOUTS = [10, 10, 100, 100]


def simulate_truth(h: HierarchyTree, gen: np.random.Generator) -> list[np.ndarray]:
    """Overdispersed leaf counts (negative binomial, mean 20, shape 0.5) and their sums up the tree."""
    shape, mean = 0.5, 20.0
    leaves = gen.negative_binomial(shape, shape / (shape + mean), h.sizes[-1])
    return h.aggregate(leaves)


def blue_root_variance(fanouts: list[int], variance: float) -> float:
    """The exact variance of the least-squares root (its bottom-up variance), equal variances, regular tree."""
    v = variance
    for fanout in reversed(fanouts):
        v = 1.0 / (1.0 / variance + 1.0 / (fanout * v))
    return v


def run_tree(name: str, fanouts: list[int], rho: float, trials: int, seed: int) -> dict[str, Any]:
    h = HierarchyTree.from_fanouts(fanouts)
    gen = np.random.default_rng(seed)  # benchmark only: simulated truth and noise
    truth = simulate_truth(h, gen)
    sigma = math.sqrt(h.n_levels / (2.0 * rho))
    variances = [sigma**2] * h.n_levels
    sq = {e: np.zeros(h.n_levels) for e in ESTIMATORS}
    for _ in range(trials):
        noisy = [level + gen.normal(0.0, sigma, level.size) for level in truth]
        estimates = {
            "raw": noisy,
            "least_squares": least_squares(h, noisy, variances),
            "consistent_project": make_consistent(h, noisy, variances, method="project"),
            "consistent_scale": make_consistent(h, noisy, variances, method="scale"),
        }
        for e, levels in estimates.items():
            sq[e] += [float(np.mean((x - t) ** 2)) for x, t in zip(levels, truth, strict=True)]
    names = LEVEL_NAMES.get(name, [f"level {i}" for i in range(h.n_levels)])
    levels_out = []
    for i in range(h.n_levels):
        mse = {e: sq[e][i] / trials for e in ESTIMATORS}
        levels_out.append({
            "level": i,
            "name": names[i],
            "nodes": h.sizes[i],
            "mean_true_count": float(truth[i].mean()),
            "mse": mse,
            "reduction_pct": {e: 100.0 * (1.0 - mse[e] / mse["raw"]) for e in ESTIMATORS if e != "raw"},
        })
    totals = {e: float(sum(sq[e][i] / trials * h.sizes[i] for i in range(h.n_levels))) for e in ESTIMATORS}
    return {
        "tree": name,
        "fanouts": fanouts,
        "sizes": list(h.sizes),
        "rho": rho,
        "sigma": sigma,
        "trials": trials,
        "levels": levels_out,
        "theoretical_root_reduction_pct": 100.0 * (1.0 - blue_root_variance(fanouts, sigma**2) / sigma**2),
        "sum_squared_error_all_nodes": totals,
    }


def time_large(repeats: int = 5) -> dict[str, Any]:
    h = HierarchyTree.from_fanouts(TIMING_FANOUTS)
    gen = np.random.default_rng(2026)  # benchmark only
    truth = simulate_truth(h, gen)
    sigma = math.sqrt(h.n_levels / 2.0)
    variances = [sigma**2] * h.n_levels
    noisy = [level + gen.normal(0.0, sigma, level.size) for level in truth]
    stages: dict[str, list[float]] = {"least_squares": [], "nonnegative": [], "round_consistent": [],
                                      "make_consistent": []}
    for _ in range(repeats):
        t0 = time.perf_counter()
        fitted = least_squares(h, noisy, variances)
        t1 = time.perf_counter()
        positive = nonnegative(h, fitted)
        t2 = time.perf_counter()
        round_consistent(h, positive, int(np.rint(positive[0][0])))
        t3 = time.perf_counter()
        make_consistent(h, noisy, variances)
        t4 = time.perf_counter()
        for key, seconds in zip(stages, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            stages[key].append(seconds)
    return {
        "fanouts": TIMING_FANOUTS,
        "leaves": h.sizes[-1],
        "nodes": sum(h.sizes),
        "repeats": repeats,
        "median_seconds": {key: statistics.median(values) for key, values in stages.items()},
    }


def print_table(result: dict[str, Any]) -> None:
    print(f"\n{result['tree']} {result['sizes']}  rho={result['rho']}  sigma={result['sigma']:.2f}  "
          f"trials={result['trials']}")
    header = (f"{'level':<9} {'nodes':>6} {'mean':>8} {'MSE raw':>9} {'MSE lsq':>9} {'(-%)':>6} "
              f"{'MSE full':>9} {'(-%)':>6} {'MSE scale':>9} {'(-%)':>6}")
    print(header)
    print("-" * len(header))
    for row in result["levels"]:
        mse, red = row["mse"], row["reduction_pct"]
        print(f"{row['name']:<9} {row['nodes']:>6} {row['mean_true_count']:>8.1f} {mse['raw']:>9.2f} "
              f"{mse['least_squares']:>9.2f} {red['least_squares']:>6.1f} "
              f"{mse['consistent_project']:>9.2f} {red['consistent_project']:>6.1f} "
              f"{mse['consistent_scale']:>9.2f} {red['consistent_scale']:>6.1f}")
    print(f"(theory: least squares cuts the root's variance by {result['theoretical_root_reduction_pct']:.1f}%)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "hierarchy_lsq.json"))
    args = parser.parse_args()
    start = time.perf_counter()
    results = []
    for seed, (name, fanouts) in enumerate(TREES.items()):
        for rho in RHOS:
            result = run_tree(name, fanouts, rho, args.trials, seed=20261122 + seed)
            print_table(result)
            results.append(result)
    timing = time_large()
    seconds = time.perf_counter() - start
    print(f"\nmake_consistent on {timing['leaves']:,} leaves ({timing['nodes']:,} nodes, fan-outs "
          f"{timing['fanouts']}), median of {timing['repeats']}:")
    for key, value in timing["median_seconds"].items():
        print(f"  {key:<17} {value:.3f} s")
    print(f"{seconds:.1f} s in all (seeded benchmark noise and simulated counts; not a release)")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "benchmark_only": True,
        "noise": "seeded numpy continuous Gaussian N(0, sigma^2) (not secure)",
        "truth": "simulated: negative binomial leaves (mean 20, shape 0.5), summed up the tree",
        "budget": "zCDP rho split evenly over all levels, L2 sensitivity 1 per level: sigma = sqrt(L / (2 rho))",
        "trials": args.trials,
        "seconds": seconds,
        "results": results,
        "timing_1e6_leaves": timing,
    }, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
