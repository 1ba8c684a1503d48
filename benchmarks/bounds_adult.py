"""Benchmark: clipping bounds for Adult's unbounded columns, dprelease's SVT vs the book's naive method.

BENCHMARK ONLY. Noise here comes from a *seeded numpy* discrete Laplace sampler (fast and
reproducible), never from the secure source a release uses, and the figures it prints (fraction of
rows clipped, error against the true mean) are computed from the raw rows: they are internal
measurements for choosing an algorithm, not releasable outputs. Nothing here is a release.

Run:  .venv/bin/python benchmarks/bounds_adult.py [--reps 50] [--out benchmarks/results/bounds_adult.json]

For each column (capital-gain, capital-loss, fnlwgt; search range from ``examples/adult/schema.yaml``)
and each epsilon (0.1 and 1, the whole bounds budget of one column), ``--reps`` repetitions of:

(a) ``dp.measurement.bounds.discover_bounds``: two AboveThreshold runs of epsilon/2 each over the schema's
    geometric grid (queries "rows below g" and "rows above g"), charged to a throw-away ledger;
(b) the naive method of Near & Abuah, "Programming Differential Privacy", sec. 5.3 (clipping): for
    b = 1, 2, 4, ..., 2^K = the search range's top, the sum of the values clipped to [0, b] with
    Laplace noise of scale b / (epsilon / (K + 1)) (sensitivity b under add/remove-one-row, the
    budget split evenly over the K + 1 sums), and the bound is the first b at which the noisy sum
    stops growing (the noisy sum at 2b is not larger). The lower bound is 0, the bottom of the
    range, as in the book;
(c) a proposal: (a) with ``dp.mechanisms.svt.MonotoneAboveThreshold`` (query noise 2/ε instead of 4/ε; the
    tail counts are monotone under add/remove-one-row), everything else unchanged.

Then a DP mean with each method's bounds [L, U], at the same epsilon again: epsilon/2 for the sum
of (2 clip(x, L, U) - L - U) (an integer with sensitivity U - L) and epsilon/2 for the count, mean =
(L + U)/2 + noisy sum / (2 noisy count). Reported per column: median bounds, median fraction of
rows clipped, the fraction of runs whose upper bound exceeds twice the largest value ("wide": a
spurious early positive or a fallback to the search range, which inflates the mean's noise), and
the median and 90th-percentile absolute error of the mean against the true (unclipped) mean.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dprelease.dp.accounting.budget import PureBudget  # noqa: E402
from dprelease.dp.accounting.charges import ReleaseContext  # noqa: E402
from dprelease.dp.accounting.ledger import Ledger  # noqa: E402
from dprelease.dp.measurement.bounds import discover_bounds, geometric_grid, tail_counts  # noqa: E402
from dprelease.dp.mechanisms.random import IntArray  # noqa: E402
from dprelease.dp.mechanisms.svt import MonotoneAboveThreshold, run_above_threshold, svt_threshold  # noqa: E402

ADULT = ROOT / "examples" / "adult"
COLUMNS = ("capital-gain", "capital-loss", "fnlwgt")
EPSILONS = (Fraction(1, 10), Fraction(1))


class BenchmarkNoise:
    """BENCHMARK ONLY: discrete Laplace from a seeded numpy generator (difference of two geometrics)."""

    def __init__(self, seed: list[int]) -> None:
        self.rng = np.random.default_rng(seed)

    def discrete_laplace(self, values: IntArray, scale: float) -> IntArray:
        p = -np.expm1(-1 / scale)
        n = len(values)
        return np.asarray(values, dtype=np.int64) + (self.rng.geometric(p, n) - self.rng.geometric(p, n))

    def discrete_gaussian(self, values: IntArray, sigma: float) -> IntArray:
        raise NotImplementedError("the bounds benchmark draws no Gaussian noise")


def discover_bounds_monotone(column: str, counts: tuple[IntArray, IntArray], grid: tuple[float, ...],
                             run_budget: PureBudget, context: ReleaseContext, stage: str) -> tuple[float, float]:
    """``dp.measurement.bounds.discover_bounds`` with MonotoneAboveThreshold in place of AboveThreshold (a proposal)."""
    below, above = counts
    mechanism = MonotoneAboveThreshold(1, run_budget)
    threshold = svt_threshold(mechanism.query_scale(), len(grid))
    hit, _ = run_above_threshold(mechanism, below, threshold, context, stage=stage, query=f"lower bound of {column}")
    lower = grid[hit - 1] if hit is not None and hit > 0 else grid[0]
    hit, _ = run_above_threshold(mechanism, above[::-1].copy(), threshold, context, stage=stage,
                                 query=f"upper bound of {column}")
    upper = grid[len(grid) - hit] if hit is not None and hit > 0 else grid[-1]
    return (lower, upper) if lower < upper else (grid[0], grid[-1])


def naive_upper_bound(values: np.ndarray, top: float, epsilon: Fraction, noise: BenchmarkNoise) -> float:
    """The book's clipping heuristic: the first b = 2^k at which the noisy clipped sum stops growing."""
    k_max = int(np.ceil(np.log2(top)))
    bounds = [float(2**k) for k in range(k_max + 1)]
    epsilon_each = float(epsilon) / len(bounds)
    sums = np.array([int(np.clip(values, 0, b).sum()) for b in bounds], dtype=np.int64)
    noisy = np.array([noise.discrete_laplace(sums[i : i + 1], b / epsilon_each)[0] for i, b in enumerate(bounds)])
    for k in range(len(bounds) - 1):
        if noisy[k + 1] <= noisy[k]:
            return bounds[k]
    return bounds[-1]


def dp_mean(values: np.ndarray, lower: float, upper: float, epsilon: Fraction, noise: BenchmarkNoise) -> float:
    """Clipped mean: epsilon/2 on the centred (doubled, so integral) sum, epsilon/2 on the count."""
    half = float(epsilon) / 2
    doubled = (2 * np.clip(values, lower, upper) - lower - upper).astype(np.int64)
    width = max(upper - lower, 1.0)
    noisy_sum = noise.discrete_laplace(np.array([doubled.sum()], dtype=np.int64), width / half)[0]
    noisy_count = noise.discrete_laplace(np.array([len(values)], dtype=np.int64), 1 / half)[0]
    return (lower + upper) / 2 + float(noisy_sum) / (2 * max(int(noisy_count), 1))


def summarise(rows: list[dict[str, float]], truth: float, largest: float) -> dict[str, Any]:
    errors = np.array([abs(r["mean"] - truth) for r in rows])
    return {
        "wide_fraction": float(np.mean([r["upper"] > 2 * largest for r in rows])),
        "lower_median": statistics.median(r["lower"] for r in rows),
        "upper_median": statistics.median(r["upper"] for r in rows),
        "upper_quartiles": [float(q) for q in np.percentile([r["upper"] for r in rows], [25, 75])],
        "clipped_fraction_median": statistics.median(r["clipped"] for r in rows),
        "mean_abs_error_median": float(np.median(errors)),
        "mean_abs_error_p90": float(np.percentile(errors, 90)),
        "mean_relative_error_median": float(np.median(errors)) / abs(truth) if truth else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bounds_adult.json"))
    args = parser.parse_args()
    schema = yaml.safe_load((ADULT / "schema.yaml").read_text())
    table = pq.read_table(ADULT / "adult.parquet", columns=list(COLUMNS))
    started = time.perf_counter()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, Ledger.open(Path(tmp) / "ledger.sqlite") as ledger:
        ledger.register("benchmark", "pure", PureBudget(Fraction(10**9)), Fraction(0))
        for column in COLUMNS:
            raw = table.column(column).to_numpy(zero_copy_only=False).astype(np.float64)
            values = raw[~np.isnan(raw)]
            truth = float(values.mean())
            low, high = (float(x) for x in schema["columns"][column]["search_range"])
            grid = geometric_grid(low, high)
            counts = tail_counts(values, grid)
            results[column] = {"true_mean": truth, "rows": len(values), "search_range": [low, high],
                               "grid_points": len(grid), "by_epsilon": {}}
            for epsilon in EPSILONS:
                per_method: dict[str, list[dict[str, float]]] = {"svt": [], "naive": [], "svt-monotone": []}
                for rep in range(args.reps):
                    noise = BenchmarkNoise([COLUMNS.index(column), EPSILONS.index(epsilon), rep])
                    release = f"{column} eps={epsilon} rep={rep}"  # one release per repetition keeps charging fast
                    ledger.reserve("benchmark", release, PureBudget(2 * epsilon))
                    context = ReleaseContext(ledger, release, "pure", noise)
                    found = discover_bounds(column, counts, grid, PureBudget(epsilon / 2), context,
                                            sensitivity=1, stage="bounds")
                    naive_upper = naive_upper_bound(values, high, epsilon, noise)
                    monotone = discover_bounds_monotone(column, counts, grid, PureBudget(epsilon / 2), context,
                                                        stage="bounds (monotone)")
                    candidates = {"svt": (found.lower, found.upper), "naive": (low, naive_upper),
                                  "svt-monotone": monotone}
                    for method, (lower, upper) in candidates.items():
                        clipped = float(np.mean((values < lower) | (values > upper)))
                        mean = dp_mean(values, lower, upper, epsilon, noise)
                        per_method[method].append({"lower": lower, "upper": upper, "clipped": clipped, "mean": mean})
                results[column]["by_epsilon"][str(float(epsilon))] = {
                    m: summarise(rows, truth, float(values.max())) for m, rows in per_method.items()}
    seconds = time.perf_counter() - started

    header = (f"{'column':<13} {'eps':>4} {'method':<12} {'lower':>8} {'upper (IQR)':>26} {'clipped':>8} "
              f"{'wide':>6} {'|err| med':>10} {'|err| p90':>10} {'rel err':>8}   true mean")
    print(header)
    print("-" * len(header))
    for column, r in results.items():
        for eps, methods in r["by_epsilon"].items():
            for method, s in methods.items():
                q1, q3 = s["upper_quartiles"]
                upper = f"{s['upper_median']:.0f} ({q1:.0f}-{q3:.0f})"
                print(f"{column:<13} {eps:>4} {method:<12} {s['lower_median']:>8.0f} {upper:>26} "
                      f"{s['clipped_fraction_median']:>8.2%} {s['wide_fraction']:>6.0%} "
                      f"{s['mean_abs_error_median']:>10.1f} {s['mean_abs_error_p90']:>10.1f} "
                      f"{s['mean_relative_error_median']:>8.2%}   "
                      f"{r['true_mean']:.1f}")
    print(f"{args.reps} repetitions per cell, {seconds:.1f} s (seeded benchmark noise; not a release)")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"benchmark_only": True, "noise": "seeded numpy discrete Laplace (not secure)",
                               "reps": args.reps, "seconds": seconds, "columns": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
