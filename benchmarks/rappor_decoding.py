"""Benchmark: RAPPOR decoding over 26 US states and 25 decoys, dprelease's decoder against Google's rule.

BENCHMARK ONLY: simulated people (``dp.local.simulate``), seeded sources for reproducibility. Nothing here
is a release.

Run:  .venv/bin/python benchmarks/rappor_decoding.py [--sizes 10000 100000 1000000] [--seeds 40 30 20]
          [--workers 2] [--out benchmarks/results/rappor_decoding.json] [--table]
      .venv/bin/python benchmarks/rappor_decoding.py --table-only   (print the table of the saved results)

Collection: k = 32 bits, h = 2 hashes, m = 64 cohorts, f = 1/2, p = 1/2, q = 3/4 (one-report ε 1.07, as
in issue 15). People hold one of 26 states with Zipf(1.1) weights (``population``); each sends one report
through the real encoder (``encode_once``: fresh PRR, then IRR), cohorts drawn uniformly. The candidate
list is the 26 states and 25 decoy values no one holds; per run we count true states detected and decoys
detected (false positives).

(a) ``decode``: least squares on all 51 candidates, exact sandwich standard errors, one-sided z-tests,
    Holm's correction over all candidates at family-wise level 0.05.
    Also read at family-wise levels 0.1 and 0.2 (same fit, looser correction): the price of more states;
    and, as a reference only, each p-value read at 0.1/25 (``ORACLE_LEVEL``).
(b) Google's rule, as in google/rappor's analysis/R/decode.R (Decode with its default settings),
    re-implemented here: per-cohort bit shares with their binomial standard deviations, a constrained
    least-squares fit (coefficients >= 0 summing to at most 1, fitted bit shares at most the observed share
    + 3 sd, clamped to [0.01, 1]; no Lasso, since 51 candidates are fewer than 80 % of the 2048 rows) on
    the data and on 4 copies with Gaussian noise of the estimated sd added (sd then taken × √2), and a
    candidate is reported when the mean of the 5 fits exceeds 2 sample sd of them ("mean > 2 sd").
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import minimize, nnls

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dprelease.dp.local.bits import SeededBits  # noqa: E402
from dprelease.dp.local.rappor import (  # noqa: E402
    RapporParams,
    cohort_counts,
    decode,
    design_matrix,
    encode_once,
)
from dprelease.dp.local.simulate import DECOYS, STATES, population  # noqa: E402

PARAMS = RapporParams(k=32, h=2, m=64)
CANDIDATES = list(STATES) + list(DECOYS)
LOOSER = (0.1, 0.2)
READINGS = (*(f"{alpha:g}" for alpha in LOOSER), "oracle")
"""Family-wise levels the decoder is also read at (the trade-off between states detected and decoys)."""
ORACLE_LEVEL = 0.1 / len(DECOYS)
"""A reference, not a decoder: each candidate's p-value read at 0.1/25, knowing that exactly 25 candidates
are held by no one, so that the expected false positives per run are 0.1; with calibrated z-statistics no
rule whose false positives stay under 0.1 per run detects many more states than this one."""
OUT = ROOT / "benchmarks" / "results" / "rappor_decoding.json"


def _constrained_fit(x: np.ndarray, y: np.ndarray, std: np.ndarray) -> np.ndarray:
    """Google's ConstrainedLinModel: min ‖Xβ − y‖² s.t. β >= 0, Σβ <= 1, Xβ <= clamp(y + 3 sd, 0.01, 1)."""
    start, _ = nnls(x, y)
    ceiling = np.clip(y + 3 * std, 0.01, 1.0)
    constraints = [{"type": "ineq", "fun": lambda b: 1.0 - b.sum(), "jac": lambda b: -np.ones_like(b)},
                   {"type": "ineq", "fun": lambda b: ceiling - x @ b, "jac": lambda b: -x}]
    result = minimize(lambda b: 0.5 * float(np.sum((x @ b - y) ** 2)), start, jac=lambda b: x.T @ (x @ b - y),
                      bounds=[(0.0, None)] * x.shape[1], constraints=constraints, method="SLSQP",
                      options={"ftol": 1e-12, "maxiter": 500})
    return np.asarray(result.x if result.success else start, dtype=np.float64)


def google_rule(counts: np.ndarray, per_cohort: np.ndarray, seed: int) -> np.ndarray:
    """Which candidates Google's Decode reports (mean of 5 constrained fits > 2 sd of them)."""
    p_star, q_star = float(PARAMS.p_star), float(PARAMS.q_star)
    gap = q_star - p_star
    keep = per_cohort > 0
    n_m = per_cohort[keep].astype(np.float64)
    shares = (counts[keep] - p_star * n_m[:, None]) / (gap * n_m[:, None])
    clamped = np.clip(shares, 0.0, 1.0)
    rate = clamped * q_star + (1 - clamped) * p_star
    std = np.sqrt(n_m[:, None] * rate * (1 - rate)) / gap / n_m[:, None]
    rows = np.repeat(keep, PARAMS.k)
    x = (design_matrix(CANDIDATES, PARAMS, np.ones(PARAMS.m))[rows] > 0).astype(np.float64)
    y, sd = shares.reshape(-1), std.reshape(-1)
    rng = np.random.default_rng(seed)  # benchmark only: Google's resampling noise
    fits = [_constrained_fit(x, y, sd)]
    for _ in range(4):
        fits.append(_constrained_fit(x, y + rng.normal(0.0, sd), sd * math.sqrt(2)))
    n = float(per_cohort.sum())
    coefs = n * np.asarray(fits)
    return np.asarray(coefs.mean(axis=0) > 1e-6 + 2 * coefs.std(axis=0, ddof=1))


def one_run(n: int, seed: int) -> dict[str, Any]:
    x = population(n, 1000 + seed)
    cohorts = SeededBits(2000 + seed).below(PARAMS.m, n)
    reports = encode_once([STATES[i] for i in x], cohorts, PARAMS, SeededBits(3000 + seed))
    counts, per_cohort = cohort_counts(reports, cohorts, PARAMS)
    start = time.perf_counter()
    decoded = decode(counts, per_cohort, CANDIDATES, PARAMS)
    seconds = time.perf_counter() - start
    google = google_rule(counts, per_cohort, 4000 + seed)
    held = np.bincount(x, minlength=len(STATES))
    looser = {f"{alpha:g}": [int(sum(d[:len(STATES)])), int(sum(d[len(STATES):]))]
              for alpha in LOOSER for d in [decode(counts, per_cohort, CANDIDATES, PARAMS, alpha=alpha).detected]}
    oracle = decoded.p_values < ORACLE_LEVEL
    looser["oracle"] = [int(oracle[:len(STATES)].sum()), int(oracle[len(STATES):].sum())]
    return {"n": n, "seed": seed, "decode_seconds": seconds, "decoder_at_alpha": looser,
            "decoder": {"states": int(sum(decoded.detected[:len(STATES)])),
                        "false_positives": int(sum(decoded.detected[len(STATES):])),
                        "explained": decoded.explained,
                        "max_abs_z_states": float(np.max(np.abs((decoded.counts[:len(STATES)] - held)
                                                                / decoded.std[:len(STATES)])))},
            "google": {"states": int(google[:len(STATES)].sum()),
                       "false_positives": int(google[len(STATES):].sum())}}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"n": runs[0]["n"], "runs": len(runs),
                           "decode_seconds_median": float(np.median([r["decode_seconds"] for r in runs]))}
    for rule in ("decoder", "google"):
        states = np.asarray([r[rule]["states"] for r in runs], dtype=np.float64)
        false = np.asarray([r[rule]["false_positives"] for r in runs], dtype=np.float64)
        out[rule] = {"states_median": float(np.median(states)), "states_mean": float(states.mean()),
                     "states_min": int(states.min()), "false_positives_median": float(np.median(false)),
                     "false_positives_per_run": float(false.mean()),
                     "runs_with_a_false_positive": int((false > 0).sum())}
    for key in READINGS:
        pairs = np.asarray([r["decoder_at_alpha"][key] for r in runs], dtype=np.float64)
        out[f"decoder_alpha_{key}"] = {"states_median": float(np.median(pairs[:, 0])),
                                           "states_mean": float(pairs[:, 0].mean()),
                                           "false_positives_per_run": float(pairs[:, 1].mean()),
                                           "runs_with_a_false_positive": int((pairs[:, 1] > 0).sum())}
    return out


def table(result: dict[str, Any]) -> str:
    lines = ["| n | runs | decoder: states median (mean) | decoder: FP/run (runs with FP) "
             "| Google: states median (mean) | Google: FP/run (runs with FP) | decode s "
             "| decoder α=0.1: states mean, FP/run | decoder α=0.2: states mean, FP/run "
             "| oracle z-rule at 0.1 FP/run: states mean, FP/run |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in result["summary"]:
        a, b = row["decoder"], row["google"]
        lines.append(f"| {row['n']:,} | {row['runs']} | {a['states_median']:g} ({a['states_mean']:.2f}) "
                     f"| {a['false_positives_per_run']:.3f} ({a['runs_with_a_false_positive']}) "
                     f"| {b['states_median']:g} ({b['states_mean']:.2f}) "
                     f"| {b['false_positives_per_run']:.3f} ({b['runs_with_a_false_positive']}) "
                     f"| {row['decode_seconds_median']:.3f} "
                     + "".join(f"| {row[f'decoder_alpha_{key}']['states_mean']:.2f}, "
                               f"{row[f'decoder_alpha_{key}']['false_positives_per_run']:.3f} "
                               for key in READINGS) + "|")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--seeds", type=int, nargs="+", default=[40, 30, 20], help="runs per size")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--table", action="store_true", help="print a Markdown table of the results")
    parser.add_argument("--table-only", action="store_true", help="print the table of --out without running")
    args = parser.parse_args()
    if args.table_only:
        print(table(json.loads(args.out.read_text(encoding="utf-8"))))
        return
    if len(args.seeds) != len(args.sizes):
        parser.error("--seeds needs one number of runs per size")
    jobs = [(n, seed) for n, runs in zip(args.sizes, args.seeds, strict=True) for seed in range(runs)]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        runs = list(pool.map(one_run, [job[0] for job in jobs], [job[1] for job in jobs]))
    params = {"k": PARAMS.k, "h": PARAMS.h, "m": PARAMS.m, "f": str(PARAMS.f), "p": str(PARAMS.p),
              "q": str(PARAMS.q), "epsilon_one": PARAMS.epsilon_one}
    result: dict[str, Any] = {"params": params, "candidates": {"states": len(STATES), "decoys": len(DECOYS)},
                              "summary": [summarise([r for r in runs if r["n"] == n]) for n in args.sizes],
                              "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for row in result["summary"]:
        a, b = row["decoder"], row["google"]
        print(f"n={row['n']:>9,} ({row['runs']} runs): decoder {a['states_median']:g} states, "
              f"{a['false_positives_per_run']:.3f} FP/run; Google {b['states_median']:g} states, "
              f"{b['false_positives_per_run']:.3f} FP/run")
    if args.table:
        print(table(result))


if __name__ == "__main__":
    main()
