"""Interleaved A/B (issue 16): two rules for a mean without public bounds, run alternately on the library path.

README
======

Each repetition runs ``dp.statistics.means.measure_svt_moments`` once per rule, one after the other,
with the same seeded additive-noise stand-in (``tests.noise.SeededNoise``, seeded by the repetition:
the count's and the sum's draws are shared between the rules; the selections draw from OpenDP's secure
source), through a real ledger. A rule is ``β:bounds,centre,count,sum`` (the tail exponent and the
four shares); it is installed by setting the module's ``MEAN_SHARES`` and the tail exponent of
``bound_scores`` for the duration of its run. Reported per column and rule: RMSE, coverage of the true
mean by the published 95 % interval, mean error, median upper bound and CPU seconds (the rules are
timed side by side).

    PYTHONPATH=. .venv/bin/python benchmarks/stats_rule_ab.py --n 10000 --reps 1000 \\
        --rule A=5:9/40,1/20,1/20,27/40 --rule P=6:21/80,3/80,1/20,13/20 --out JSON
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

import dprelease.dp.statistics.means as means
from benchmarks.stats_peers import COLUMNS, column_values
from dprelease.dp.accounting.budget import PureBudget
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from tests.noise import SeededNoise


def install(beta: float, shares: tuple[Fraction, ...]) -> None:
    """Make ``measure_svt_moments`` run the rule (β, bounds/centre/count/sum shares)."""
    means.MEAN_SHARES = MappingProxyType(dict(zip(("bounds", "centre", "count", "sum"), shares, strict=True)))
    means.bound_scores.__defaults__ = (means.MEAN_GRID_RATIO, beta)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--columns", default="stay,capital-gain,age,hours-per-week")
    parser.add_argument("--rule", action="append", required=True, help="NAME=β:bounds,centre,count,sum")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rules: dict[str, tuple[float, tuple[Fraction, ...]]] = {}
    for text in args.rule:
        name, rule = text.split("=")
        beta, shares = rule.split(":")
        rules[name] = (float(beta), tuple(Fraction(s) for s in shares.split(",")))
    saved = (means.MEAN_SHARES, means.bound_scores.__defaults__)
    report: dict[str, Any] = {"rules": args.rule, "n": args.n, "reps": args.reps, "cells": {}}
    with tempfile.TemporaryDirectory() as tmp, Ledger.open(Path(tmp) / "ledger.sqlite") as ledger:
        ledger.register("bench", "pure", PureBudget(Fraction(10**9)), Fraction(0))
        ledger.reserve("bench", "ab", PureBudget(Fraction(10**8)))
        for column in args.columns.split(","):
            x = column_values(column, args.n)
            truth = float(np.mean(x))
            rows: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in rules}
            cpu = dict.fromkeys(rules, 0.0)
            for r in range(args.reps):
                for name, (beta, shares) in rules.items():
                    install(beta, shares)
                    started = time.process_time()
                    context = ReleaseContext(ledger, "ab", "pure", SeededNoise(10**6 * args.n + r))
                    found, moments = means.measure_svt_moments(x, f"{column}#{name}#{r}", COLUMNS[column]["wide"],
                                                               PureBudget(Fraction(1)), context, seed=r)[:2]
                    mean = moments.mean()
                    cpu[name] += time.process_time() - started
                    rows[name].append((found.upper, mean.estimate, mean.low, mean.high))
            for name in rules:
                a = np.asarray(rows[name])
                error = a[:, 1] - truth
                cell = {"rmse": float(np.sqrt(np.mean(error**2))), "bias": float(error.mean()),
                        "coverage_true_mean": float(np.mean((a[:, 2] <= truth) & (truth <= a[:, 3]))),
                        "upper_median": float(np.median(a[:, 0])), "cpu_seconds": round(cpu[name], 1)}
                report["cells"][f"{column}|{name}"] = cell
                print(column, args.n, name, cell, flush=True)
    means.MEAN_SHARES, means.bound_scores.__defaults__ = saved
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
