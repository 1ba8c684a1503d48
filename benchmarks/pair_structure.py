"""Is a release's model ever worse than independence, pair by pair? (issue 14, point 5)

For each synthetic table of one release spec (several releases: seeds or repeats), every 2-way marginal's
TVD against the real table (:func:`dprelease.quality.utility.utility`, the project's yardstick) is compared
with two independence lines on the same pair:

``shuffled``
    The same synthetic table with every column permuted independently (a seeded generator:
    post-processing of a public output). Same 1-ways as the release, no dependence at all: a pair worse
    than this is a pair the model's structure made worse than assuming independence.
``independent (real)``
    The real table with every column permuted independently: the non-private independence line.

Output: mean tvd2 of each, and for the pairs involving a numeric column (``--numeric``) the pairs whose
mean over the releases is more than ``--tolerance`` (0.005) worse than the shuffled line, the worst first.
Steward-only figures (computed from the real rows). Results JSON to ``--out``.

Usage::

    .venv/bin/python benchmarks/pair_structure.py --real T.parquet --synthetic S1.parquet S2.parquet ... \\
        --numeric balance duration contacts age net_flow --out benchmarks/results/heavy_tails.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dprelease.quality.utility import utility  # noqa: E402


def shuffled(table: pa.Table, seed: int) -> pa.Table:
    """Every column permuted independently (seeded: post-processing, no sensitive input drives it)."""
    rng = np.random.default_rng(seed)
    return pa.table({name: table.column(name).take(pa.array(rng.permutation(table.num_rows)))
                     for name in table.column_names})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", required=True)
    parser.add_argument("--synthetic", nargs="+", required=True)
    parser.add_argument("--numeric", nargs="*", default=[])
    parser.add_argument("--tolerance", type=float, default=0.005)
    parser.add_argument("--out")
    args = parser.parse_args()
    real = pq.read_table(args.real)
    columns = real.column_names
    lines: dict[str, list[dict[str, float]]] = {"release": [], "shuffled": [], "independent_real": []}
    tvd2: dict[str, list[float]] = {k: [] for k in lines}
    for i, path in enumerate(args.synthetic):
        synthetic = pq.read_table(path).select(columns)
        for key, table in (("release", synthetic), ("shuffled", shuffled(synthetic, i)),
                           ("independent_real", shuffled(real, 100 + i))):
            report = utility(real, table, columns, three_way=0)
            lines[key].append(report.two_way)
            tvd2[key].append(report.tvd2)
    pairs = list(lines["release"][0])
    mean = {k: {p: statistics.fmean(run[p] for run in runs) for p in pairs} for k, runs in lines.items()}
    numeric = set(args.numeric)
    excess = sorted(((mean["release"][p] - mean["shuffled"][p], p) for p in pairs
                     if numeric & set(p.split("|"))), reverse=True)
    worse = [(round(e, 4), p) for e, p in excess if e > args.tolerance]
    result = {
        "releases": len(args.synthetic),
        "tvd2": {k: round(statistics.fmean(v), 4) for k, v in tvd2.items()},
        "numeric_pairs": len(excess),
        "numeric_pairs_worse_than_shuffled_by_tolerance": worse,
        "worst_numeric_excess": round(excess[0][0], 4) if excess else None,
        "tvd2_numeric_pairs": {k: round(statistics.fmean(mean[k][p] for _, p in excess), 4) for k in mean},
        "tvd2_other_pairs": {k: round(statistics.fmean(mean[k][p] for p in pairs
                                                       if not numeric & set(p.split("|"))), 4) for k in mean},
    }
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
