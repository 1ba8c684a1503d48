"""Error model (issue 16): the expected RMSE and coverage of a mean without public bounds, per rule, in seconds.

README
======

``dp.statistics.means.measure_svt_moments`` is a short chain of mechanisms whose laws are known given the
data: the upper bound's monotone exponential mechanism (probabilities ∝ exp(score / scale), computed
exactly), the offset's exponential mechanism (likewise, for each bound), then the discrete Laplace noise
of the count and the sum on the offset grid. For each (bound, offset) pair the clipped mean, its
clipping bias and the noise's variance follow in closed form, and the coverage of the 95 % interval
is simulated (Laplace draws: the interval is the noise's 2.5 % and 97.5 % points, as the published
basic interval is). Summing over the pairs by their probabilities gives the *expected* RMSE and
coverage that ``benchmarks/stats_peers.py`` estimates from 200 runs. Two uses:

* rare events: capital-gain's error is dominated by bounds below its top code (a probability of a few
  per thousand, an error of 20-30 noise sds), which 200 runs catch or miss by luck (the same rule
  measured 1.87× and 2.68× the oracle in two runs); the model weighs them by their probability;
* tuning: a rule (tail exponent β and the four shares) is scored on every column at n = 10⁴ and 10³
  in about three seconds, before it is measured.

It is a model of the mechanism, not a measurement: it approximates the discrete Laplace by the
continuous one and the mean's ratio by its linearisation (the variance of S/n by that of S and n
separately). Checked against real runs of the library (seeded noise stand-in, 600-2000 runs):
age 0.0177 against 0.0173, stay 0.0261 against 0.0243-0.0266, coverage of stay 0.931 against 0.924-0.933.

    PYTHONPATH=. .venv/bin/python benchmarks/stats_error_model.py [--rule 5:9/40,1/20,1/20,27/40 ...] [--out JSON]

Oracle RMSEs are the best oracle peer's in ``results/stats_peers_headline.json`` (n = 10⁴) and
``results/stats_peers_tails_n1000.json`` (n = 10³), as the benchmark's ratios use.
"""

from __future__ import annotations

import argparse
import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.stats_peers import COLUMNS, column_values
from dprelease.dp.measurement.bounds import tail_counts
from dprelease.dp.statistics.means import MEAN_GRID_RATIO, MEAN_SHARES, TAIL_EXPONENT, mean_grid

ORACLE = {10_000: {"age": 0.0104, "hours-per-week": 0.014, "capital-gain": 12.9977, "stay": 0.015},
          1_000: {"age": 0.0725, "hours-per-week": 0.17, "capital-gain": 70.6, "stay": 0.265}}
DRAWS = 20_000


def softmax(scores: np.ndarray, scale: float) -> np.ndarray:
    """exp(u / scale), normalised (the exponential mechanism's law)."""
    z = np.exp((scores - scores.max()) / scale)
    return np.asarray(z / z.sum())


def expected_error(x: np.ndarray, wide: tuple[float, float], beta: float, shares: tuple[float, float, float, float],
                   epsilon: float = 1.0, seed: int = 1) -> tuple[float, float]:
    """Expected RMSE and coverage of the true mean by the rule (β, bounds/offset/count/sum shares)."""
    rng = np.random.default_rng(seed)  # simulation of public noise laws only
    z_sum, z_count = rng.laplace(size=DRAWS), rng.laplace(size=DRAWS)
    n, mu = len(x), float(np.mean(x))
    low, high = wide
    grid = np.array(mean_grid(low, high))
    below, above = tail_counts(x, tuple(grid))
    e_bounds, e_centre, e_count, e_sum = (epsilon * s for s in shares)
    scale = 1 / e_bounds  # the monotone mechanism's scale Δ/ε (the range starts at 0: one end searched)
    p_upper = softmax(-above - scale * beta * math.log(MEAN_GRID_RATIO) * np.arange(len(grid)), scale)
    mse = miss = 0.0
    for iu in np.nonzero(p_upper > 1e-5)[0]:
        p_centre = softmax(-np.abs(below[:iu + 1] - above[:iu + 1]).astype(float), 2 / e_centre)
        for ic in np.nonzero(p_centre > 1e-3)[0]:
            upper, centre = grid[iu], grid[ic]
            radius = max(upper - centre, centre - low)
            clipped = float(np.mean(np.clip(x, max(low, centre - radius), min(high, centre + radius))))
            a, b = radius / (e_sum * n), (clipped - centre) / (e_count * n)
            weight = p_upper[iu] * p_centre[ic]
            mse += weight * ((clipped - mu) ** 2 + 2 * a * a + 2 * b * b)
            noise = a * z_sum - b * z_count
            q_low, q_high = np.quantile(noise, [0.025, 0.975])
            miss += weight * float(np.mean((clipped + noise - q_high > mu) | (clipped + noise - q_low < mu)))
    return math.sqrt(mse), 1 - miss


def parse_rule(text: str) -> tuple[float, tuple[float, float, float, float]]:
    """``β:bounds,centre,count,sum`` (fractions allowed) to (β, shares)."""
    beta, shares = text.split(":")
    values = tuple(float(Fraction(s)) for s in shares.split(","))
    if len(values) != 4 or abs(sum(values) - 1) > 1e-12:
        raise SystemExit(f"{text}: four shares summing to 1 are needed")
    return float(beta), (values[0], values[1], values[2], values[3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    current = f"{TAIL_EXPONENT}:" + ",".join(str(MEAN_SHARES[k]) for k in ("bounds", "centre", "count", "sum"))
    parser.add_argument("--rule", action="append",
                        help=f"β:bounds,centre,count,sum (default: the library's, {current})")
    parser.add_argument("--sizes", default="10000,1000")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report: dict[str, Any] = {}
    for rule in args.rule or [current]:
        beta, shares = parse_rule(rule)
        for n in (int(s) for s in args.sizes.split(",")):
            for column, oracle in ORACLE[n].items():
                rmse, coverage = expected_error(column_values(column, n), COLUMNS[column]["wide"], beta, shares)
                report[f"{rule}|{column}|{n}"] = {"rmse": rmse, "over_oracle": rmse / oracle, "coverage": coverage}
                print(f"{rule:32s} {column:15s} {n:6d}  RMSE/oracle {rmse / oracle:6.3f}  coverage {coverage:.3f}",
                      flush=True)
    if args.out:
        args.out.write_text(json.dumps({"model": "benchmarks/stats_error_model.py", "cells": report}, indent=1))


if __name__ == "__main__":
    main()
