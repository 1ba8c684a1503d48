"""Model (issue 16): three rules for a mean without public bounds against today's, by Monte Carlo, in seconds.

README
======

A Monte Carlo model of ``dp.statistics.means.measure_svt_moments`` and of three variants, run on the
benchmark's columns (``benchmarks/stats_peers.py``). The upper bound's monotone exponential mechanism and
the offset's exponential mechanism are drawn from their exact laws (softmax of the scores); the count's
and the sums' noise is continuous Laplace at the scales the rule would use. It reproduces the library's
ratios over the oracle (n = 10⁴, ε = 1: age 1.63, hours-per-week 1.32-1.34, capital-gain 2.25-2.28, stay
1.71; the library measured 1.54-1.64, 1.24-1.33, 1.65-2.68, 1.69-1.75). Rules (``--rule NAME``):

``current``
    today's: bound 26.25 % (prior 1.1^(−6j)), median offset 3.75 %, count 5 %, sum 65 %.
``two-pass``
    no median: bound 26.25 %, count 2.5 %, a rough sum 2.5 % on a grid offset at the bounds' midpoint,
    then the sum (68.75 %) on a grid offset at the rough mean (its count's noise then multiplies
    |mean − offset| ≈ the rough mean's error instead of |mean − median|).
``two-pass-median``
    the median offset kept (3.75 %) for the rough sum (2.5 %), count 2.5 %, sum 65 %; the final offset is
    the rough mean only when the rough mean's noise sd (public) is below its distance to the median.
``refine``
    the bound in two stages: 20 % on today's grid, then 6.25 % on a ratio-1.01 grid from one step below
    the first bound up to it, with a prior 1.01^(−10j) (steeper: less overshoot past the data's edge).

    PYTHONPATH=. .venv/bin/python benchmarks/stats_offset_model.py [--n 10000] [--reps 20000]

Session 16's results are in ``docs/research/statistics.md`` §2 (no rule wins on every column and size).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from benchmarks.stats_peers import COLUMNS, column_values
from dprelease.dp.statistics.means import MEAN_GRID_RATIO, mean_grid

ORACLE = {10_000: {"age": 0.0104, "hours-per-week": 0.014, "capital-gain": 12.9977, "stay": 0.015},
          1_000: {"age": 0.0725, "hours-per-week": 0.17, "capital-gain": 70.6, "stay": 0.265}}
"""The best oracle peer's RMSE (as ``benchmarks/stats_error_model.py``)."""
RULES = ("current", "two-pass", "two-pass-median", "refine")


def softmax(scores: np.ndarray, scale: float) -> np.ndarray:
    """exp(u / scale), normalised (the exponential mechanism's law)."""
    z = np.exp((scores - scores.max()) / scale)
    return np.asarray(z / z.sum())


def rmse(rule: str, x: np.ndarray, wide: tuple[float, float], reps: int, seed: int = 1) -> float:
    """The rule's RMSE over ``reps`` simulated releases of the column ``x`` (ε = 1; search range from 0)."""
    rng = np.random.default_rng(seed)  # simulation of public noise laws only (benchmark data)
    x = np.sort(x)
    n, mu, low = len(x), float(np.mean(x)), wide[0]
    grid = np.asarray(mean_grid(*wide))
    above = n - np.searchsorted(x, grid, side="right")
    below = np.searchsorted(x, grid, side="left")
    coarse = 0.2 if rule == "refine" else 21 / 80
    scale = 1 / coarse
    first = rng.choice(len(grid), reps, p=softmax(-above - scale * 6 * math.log(MEAN_GRID_RATIO)
                                                   * np.arange(len(grid)), scale))
    uppers = grid[first]
    if rule == "refine":  # a fine second selection from one coarse step below the first bound up to it
        for index in np.unique(first):
            where = np.nonzero(first == index)[0]
            top = grid[index]
            steps = round(math.log(MEAN_GRID_RATIO) / math.log(1.01)) if index > 1 else 0
            candidates = top * 1.01 ** (-np.arange(steps, -1, -1.0))
            beyond = n - np.searchsorted(x, candidates, side="right")
            fine = 1 / 0.0625
            law = softmax(-beyond - fine * 10 * math.log(1.01) * np.arange(steps + 1), fine)
            uppers[where] = candidates[rng.choice(steps + 1, len(where), p=law)]
    estimates = np.empty(reps)
    for upper in np.unique(uppers):
        where = np.nonzero(uppers == upper)[0]
        k, clipped_sum = len(where), float(np.sum(np.minimum(x, upper)))
        inside = int(np.searchsorted(grid, upper, side="right"))
        median = grid[rng.choice(inside, k, p=softmax(-np.abs(below[:inside] - above[:inside]).astype(float),
                                                     2 / (3 / 80)))]
        median = np.minimum(median, upper)
        count_share = 1 / 40 if rule.startswith("two-pass") else 1 / 20
        count = np.maximum(n + rng.laplace(0, 1 / count_share, k), 1.0)
        if rule in ("current", "refine"):
            offset, share = median, (13 / 20 if rule == "current" else 0.65)
        else:
            first_offset = np.full(k, (low + upper) / 2) if rule == "two-pass" else median
            radius = np.maximum(upper - first_offset, first_offset - low)
            rough = np.clip(first_offset + (clipped_sum - n * first_offset
                                            + rng.laplace(0, 1, k) * radius / (1 / 40)) / count, low, upper)
            if rule == "two-pass":
                offset, share = rough, 1 - 21 / 80 - 1 / 40 - 1 / 40
            else:
                noisier = math.sqrt(2) * radius / ((1 / 40) * count) >= np.abs(rough - median)
                offset, share = np.where(noisier, median, rough), 13 / 20
        radius = np.maximum(upper - offset, offset - low)
        estimate = offset + (clipped_sum - n * offset + rng.laplace(0, 1, k) * radius / share) / count
        estimates[where] = np.clip(estimate, low, upper)
    return math.sqrt(float(np.mean((estimates - mu) ** 2)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000, choices=sorted(ORACLE))
    parser.add_argument("--reps", type=int, default=20_000)
    parser.add_argument("--rule", action="append", choices=RULES)
    args = parser.parse_args()
    for column, oracle in ORACLE[args.n].items():
        x = column_values(column, args.n)
        ratios = {rule: rmse(rule, x, COLUMNS[column]["wide"], args.reps) / oracle for rule in args.rule or RULES}
        print(f"{column:15s} n={args.n}: " + "  ".join(f"{rule} {ratio:.3f}" for rule, ratio in ratios.items()),
              flush=True)


if __name__ == "__main__":
    main()
