"""Benchmark: bound discovery's scans, the general AboveThreshold against the monotone one, on Adult's columns.

BENCHMARK ONLY: seeded noise (``tests.noise.SeededNoise``) and figures computed from the raw rows, for
choosing an algorithm; nothing here is a release. For each unbounded column of ``examples/adult/schema.yaml``
at the example's per-run epsilon (0.0158), 400 runs of each scan on the production grid and thresholds
(``dp.mechanisms.svt.svt_threshold``): the share of rows clamped by the bounds found, the share of runs whose upper
bound exceeds twice the largest value ("wide"), and the median upper bound.

Run:  .venv/bin/python benchmarks/bounds_monotone.py
Measured (2026-11-24, 2 cores): fnlwgt clamped 1.67 % (general) vs 1.13 % (monotone) on average;
capital-gain wide 57 % vs 48 %, median upper 524288 vs 131072; capital-loss wide 76 % vs 62 %.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fractions import Fraction

import numpy as np
import pyarrow.parquet as pq
import yaml

from dprelease.dp.accounting.budget import PureBudget
from dprelease.dp.measurement.bounds import geometric_grid, tail_counts
from dprelease.dp.mechanisms.svt import AboveThreshold, MonotoneAboveThreshold, svt_threshold
from tests.noise import SeededNoise

ROOT = Path(__file__).resolve().parents[1]
table = pq.read_table(ROOT / "examples/adult/adult.parquet")
with open(ROOT / "examples/adult/schema.yaml", encoding="utf-8") as fh:
    schema = yaml.safe_load(fh)
eps = Fraction(158, 10000)
R = 400
for col in ("fnlwgt", "capital-gain", "capital-loss"):
    spec = schema["columns"][col]
    lo, hi = spec["search_range"]
    bins = spec.get("bins")
    cheap = bins == "log" or (isinstance(bins, dict) and bins.get("kind") == "log")
    v = table.column(col).to_numpy().astype(float)
    grid = geometric_grid(lo, hi)
    below, above = tail_counts(v, grid)
    mechanisms = (("AT", AboveThreshold(1, PureBudget(eps)), False),
                  ("monotone", MonotoneAboveThreshold(1, PureBudget(eps)), True))
    for name, mech, ts in mechanisms:
        kw = dict(threshold_scale=mech.threshold_scale()) if ts else {}
        Tl = svt_threshold(mech.query_scale(), len(grid), cheap_widening=cheap, away_from_origin=grid[0] < 0, **kw)
        Tu = svt_threshold(mech.query_scale(), len(grid), cheap_widening=cheap, away_from_origin=grid[-1] > 0, **kw)
        noise = SeededNoise(7)
        hl = mech.run_batch(np.tile(below, (R, 1)), Tl, noise)
        hu = mech.run_batch(np.tile(above[::-1].copy(), (R, 1)), Tu, noise)
        lower = np.where(hl > 0, np.array(grid)[np.maximum(hl - 1, 0)], grid[0])
        upper = np.where(hu > 0, np.array(grid)[len(grid) - np.maximum(hu, 1)], grid[-1])
        clamped = np.array([np.mean((v < lo_) | (v > hi_)) for lo_, hi_ in zip(lower, upper, strict=True)])
        wide = np.mean(upper > 2 * v.max())
        print(f"{col:13s} {name:9s} cheap={cheap} T=({Tl},{Tu}) clamped median {np.median(clamped):.4f} "
              f"mean {clamped.mean():.4f}  wide {wide:.2f}  median U {np.median(upper):g}")
