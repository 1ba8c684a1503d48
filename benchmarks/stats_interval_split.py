"""Coverage (issue 16): a mean's 95 % interval without public bounds, by how its 5 % is split between the ends.

README
======

Each repetition runs the library path of a ``stats:`` mean without public bounds
(``dp.statistics.means.measure_svt_moments``, through a real ledger; the count's and the sum's noise from
the seeded stand-in ``tests.noise.SeededNoise`` with the discrete Laplace law, the selections from the
secure source), then recomputes the published interval from the same simulated replicates
(``NoisyMoments._replicates``, the basic interval) at several splits of its 5 %: the share left above
the interval (the truth above it) and below. The same seeds serve every split, so the splits differ only
by their quantiles. Reported per split: the coverage of the true mean and of the clipped mean (± its
standard error) and the median width over the symmetric split's. Also: the coverage of the interval
the library publishes (``mean().low``, ``mean().high``), to check the production path.

    PYTHONPATH=. .venv/bin/python benchmarks/stats_interval_split.py --columns stay,age --reps 3000

Session 16 (``docs/research/statistics.md`` §1): stay .938 → .948 at 1.5 / 3.5 %, 2.9 % wider.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.stats_peers import COLUMNS, column_values
from dprelease.dp.accounting.budget import PureBudget
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.statistics.means import measure_svt_moments
from tests.noise import SeededNoise

SPLITS = ((0.025, 0.025), (0.02, 0.03), (0.015, 0.035), (0.01, 0.04), (0.005, 0.045))
"""(Truth above the interval, truth below it): the symmetric split first."""
LEDGER_RUNS = 100
"""Runs per ledger (a fresh one after that: a ledger's charges grow, and each charge reads them)."""


def run_column(column: str, n: int, reps: int, seed: int) -> dict[str, Any]:
    """Every split's coverage and width for one column (and the published interval's coverage)."""
    x = column_values(column, n)
    truth = float(np.mean(x))
    rows = []
    with contextlib.ExitStack() as outer:
        for r in range(reps):
            if r % LEDGER_RUNS == 0:
                stack = outer.enter_context(contextlib.ExitStack())
                folder = stack.enter_context(tempfile.TemporaryDirectory())
                ledger = stack.enter_context(Ledger.open(Path(folder) / "ledger.sqlite"))
                ledger.register("bench", "pure", PureBudget(Fraction(10**9)), Fraction(0))
                ledger.reserve("bench", "split", PureBudget(Fraction(10**8)))
            context = ReleaseContext(ledger, "split", "pure", SeededNoise(seed + r))
            moments = measure_svt_moments(x, f"{column}#{r}", COLUMNS[column]["wide"], PureBudget(Fraction(1)),
                                          context, seed=r)[1]
            mean, grid = moments.mean(), moments.grid
            sims = moments._replicates(("count", "sum"))
            errors = grid.centre + grid.step * sims["sum"] / np.maximum(sims["count"], 1.0) - mean.estimate
            row = [mean.estimate, float(np.mean(grid.decode(grid.encode(x)))), mean.low, mean.high]
            for above, below in SPLITS:
                low_q, high_q = np.quantile(errors, [above, 1 - below])
                row += [mean.estimate - high_q, mean.estimate - low_q]
            rows.append(row)
    a = np.asarray(rows)

    def share(low: np.ndarray, high: np.ndarray, target: np.ndarray | float) -> dict[str, float]:
        p = float(np.mean((low <= target) & (target <= high)))
        return {"coverage": p, "se": (p * (1 - p) / reps) ** 0.5}

    base = float(np.median(a[:, 5] - a[:, 4]))
    out: dict[str, Any] = {"rmse": float(np.sqrt(np.mean((a[:, 0] - truth) ** 2))),
                           "published": share(a[:, 2], a[:, 3], truth), "splits": {}}
    for i, (above, below) in enumerate(SPLITS):
        low, high = a[:, 4 + 2 * i], a[:, 5 + 2 * i]
        out["splits"][f"{above}/{below}"] = {"true": share(low, high, truth), "clipped": share(low, high, a[:, 1]),
                                             "width": float(np.median(high - low)) / base}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--columns", default="stay,age,hours-per-week,capital-gain")
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7 * 10**6)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report = {}
    for column in args.columns.split(","):
        cell = run_column(column, args.n, args.reps, args.seed)
        report[column] = cell
        published = cell["published"]
        print(f"{column} n={args.n} reps={args.reps} rmse {cell['rmse']:.4g} published interval covers "
              f"{published['coverage']:.4f} ± {published['se']:.4f}", flush=True)
        for name, split in cell["splits"].items():
            print(f"  split {name}: true {split['true']['coverage']:.4f} ± {split['true']['se']:.4f}, "
                  f"clipped {split['clipped']['coverage']:.4f}, width {split['width']:.3f}", flush=True)
    if args.out:
        args.out.write_text(json.dumps({"n": args.n, "reps": args.reps, "cells": report}, indent=1))


if __name__ == "__main__":
    main()
