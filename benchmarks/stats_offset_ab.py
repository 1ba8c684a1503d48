"""Interleaved A/B (issue 16): today's mean without public bounds against a two-pass offset, on the library's parts.

README
======

Each repetition runs, with the same seeded additive-noise stand-in (``tests.noise.SeededNoise``, seeded by
the repetition; the selections draw from OpenDP's secure source) and through a real ledger:

* **current**: ``dp.statistics.means.measure_svt_moments`` (bound 26.25 %, median offset 3.75 %, count 5 %,
  sum 65 %), its published mean;
* **two-pass** (an experiment, not in ``dp/``): the same upper-bound selection (26.25 %), no median; the
  count (5 %) and a rough sum (2.5 %) on a grid offset at the bounds' midpoint; then the sum (66.25 %) on a
  grid offset at the rough mean, the mean being offset + sum / count. Every query is booked through
  ``dp.mechanisms.noise.measure`` (charge, then draw) with the sensitivity of its grid.

The two-pass offset removes the count's noise times |mean − median| (9-11 % of age's and stay's variance)
at the price of the rough sum; ``benchmarks/stats_offset_model.py`` predicts a gain at n = 10⁴ and a loss at
n = 10³. Reported: each rule's RMSE and the ratio two-pass / current with a paired bootstrap 95 % interval.

    PYTHONPATH=. .venv/bin/python benchmarks/stats_offset_ab.py --n 10000 --reps 1000
"""

from __future__ import annotations

import argparse
import contextlib
import math
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np

from benchmarks.stats_peers import COLUMNS, column_values
from dprelease.dp.accounting.budget import PureBudget
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.measurement.bounds import tail_counts
from dprelease.dp.mechanisms.noise import additive_mechanism, measure
from dprelease.dp.mechanisms.selection import MonotoneExponentialMechanism, run_selection
from dprelease.dp.statistics.clipping import ClipBounds, Grid
from dprelease.dp.statistics.means import MEAN_HALF_STEPS, bound_scores, mean_grid, measure_svt_moments
from tests.noise import SeededNoise

SHARES = {"bound": Fraction(21, 80), "count": Fraction(1, 20), "rough": Fraction(1, 40), "sum": Fraction(53, 80)}


def two_pass(x: np.ndarray, name: str, wide: tuple[float, float], context: ReleaseContext) -> float:
    """The two-pass rule's mean (search ranges from 0: only the upper bound is searched)."""
    low, high = wide
    grid = mean_grid(low, high)
    _, above = tail_counts(np.asarray(x, dtype=np.float64), grid)
    selection = MonotoneExponentialMechanism(1, PureBudget(SHARES["bound"]))
    hit, _ = run_selection(selection, bound_scores(above, selection.scale()), context, stage="stats",
                           query=f"upper bound of {name}")
    upper = max(grid[hit], grid[1])

    def noisy(share: Fraction, sensitivity: int, answer: int, query: str) -> float:
        result, _ = measure(additive_mechanism(PureBudget(share), sensitivity), np.array([answer], dtype=np.int64),
                            context, stage="stats", query=f"{query}({name})")
        return float(result[0])

    first = Grid(ClipBounds(low, upper, "svt"), MEAN_HALF_STEPS, offset=(low + upper) / 2)
    count = max(noisy(SHARES["count"], 1, len(x), "count"), 1.0)
    rough = first.centre + first.step * noisy(SHARES["rough"], MEAN_HALF_STEPS, int(first.encode(x).sum()),
                                              "rough sum") / count
    final = Grid(ClipBounds(low, upper, "svt"), MEAN_HALF_STEPS, offset=float(np.clip(rough, low, upper)))
    total = noisy(SHARES["sum"], MEAN_HALF_STEPS, int(final.encode(x).sum()), "sum")
    return float(np.clip(final.centre + final.step * total / count, low, upper))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--columns", default="age,hours-per-week,capital-gain,stay")
    parser.add_argument("--seed", type=int, default=9 * 10**6)
    args = parser.parse_args()
    for column in args.columns.split(","):
        x = column_values(column, args.n)
        truth, wide = float(np.mean(x)), COLUMNS[column]["wide"]
        errors: dict[str, list[float]] = {"current": [], "two-pass": []}
        with contextlib.ExitStack() as outer:
            for r in range(args.reps):
                if r % 100 == 0:  # a fresh ledger now and then: each charge reads the ledger's charges
                    stack = outer.enter_context(contextlib.ExitStack())
                    folder = stack.enter_context(tempfile.TemporaryDirectory())
                    ledger = stack.enter_context(Ledger.open(Path(folder) / "ledger.sqlite"))
                    ledger.register("bench", "pure", PureBudget(Fraction(10**9)), Fraction(0))
                    ledger.reserve("bench", "ab", PureBudget(Fraction(10**8)))
                context = ReleaseContext(ledger, "ab", "pure", SeededNoise(args.seed + r))
                moments = measure_svt_moments(x, f"{column}#current#{r}", wide, PureBudget(Fraction(1)), context,
                                              seed=r)[1]
                errors["current"].append(moments.mean().estimate - truth)
                context = ReleaseContext(ledger, "ab", "pure", SeededNoise(args.seed + r))
                errors["two-pass"].append(two_pass(x, f"{column}#two-pass#{r}", wide, context) - truth)
        a, b = np.asarray(errors["current"]), np.asarray(errors["two-pass"])
        resample = np.random.default_rng(0).integers(0, args.reps, (2000, args.reps))  # bootstrap of public errors
        ratios = np.sqrt(np.mean(b[resample] ** 2, axis=1) / np.mean(a[resample] ** 2, axis=1))
        current, other = math.sqrt(float(np.mean(a**2))), math.sqrt(float(np.mean(b**2)))
        print(f"{column:15s} n={args.n} reps={args.reps}: current {current:.4g}, two-pass {other:.4g}, "
              f"ratio {other / current:.3f} [{np.quantile(ratios, 0.025):.3f}, {np.quantile(ratios, 0.975):.3f}]",
              flush=True)


if __name__ == "__main__":
    main()
