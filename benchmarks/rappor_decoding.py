"""Benchmark: RAPPOR decoding over 26 US states and 25 decoys, dprelease's decoder against Google's rule.

BENCHMARK ONLY: simulated people (``dp.local.simulate``), seeded sources for reproducibility. Nothing here
is a release.

Run:  .venv/bin/python benchmarks/rappor_decoding.py [--runs 500] [--google-runs 500 500] [--n 1000000]
          [--workers 2] [--out benchmarks/results/rappor_decoding.json] [--table] [--google-from FILE]
      .venv/bin/python benchmarks/rappor_decoding.py --table-only   (print the table of the saved results)
Saved results: rappor_decoding.json (--runs 500 --google-runs 100 150 --split-runs 100, one collection per
invocation); rappor_decoding_google500.json (the proposed collection, Google's rule on all 500 runs);
rappor_decoding_twostage.json (the two-stage rule, the flow's default: --collections proposed --runs 500
--google-runs 0 300 --split-runs 0 --google-from benchmarks/results/rappor_decoding_google500.json).
Every report and Google's resampling noise are seeded by (collection, n, seed), so a run's tallies are a
function of them: with --google-from, Google's rule is re-run on the first runs only and compared with the
earlier file (and every run's per-family tally too), and the earlier tallies fill the other runs (marked
``google_stored``); the summary gives the paired difference on all runs and on the re-run ones alone.

Two collections at one-report ε ≈ 1, decoded on the same simulated reports by every rule:
  current:  k = 32, h = 2, m = 64, f = 1/2, p = 1/2, q = 3/4 (ε₁ 1.07, ε∞ 4.39; the example's until now and
            Google's defaults but k);
  proposed: k = 32, h = 1, m = 64, f = 9/16, p = 1/8, q = 11/16 (ε₁ 1.05, ε∞ 1.88). With 26 values a single
            hash is enough (cohorts separate the collisions), and each bit then carries the whole one-report
            ε instead of half of it: the variance per candidate is about 3.4 n instead of 7.9 n (the floor,
            OUE's 4e^ε/(e^ε − 1)², is 3.2 n at ε = 1.07), with a stronger longitudinal guarantee.
People hold one of 26 states with Zipf(1.1) weights; per run the per-cohort bit counts are drawn from their
exact law (``simulate.rappor_counts``: cohorts uniform, one report per person through a fresh PRR and an
IRR; the same law as ``encode_once`` + ``cohort_counts``, checked in tests/statistical). Candidates: the 26
states and 25 decoys no one holds; per run and rule we count true states detected and decoys detected
(false positives).

Rules (all on the same counts):
  two-stage 0.1 (headline; the flow's default) ``decode(..., alpha=0.1, error="per-family two-stage")``: the
      same fit and p-values; candidates with p < 0.1/(20 · 51²) (z > 4.6) are detected at once, the others
      with p < 0.095/(51 − that number): E[false positives per run] <= 0.1 under any dependence, without
      knowing which candidates are decoys (docs/proofs/two_stage_per_family.md).
  per-family 0.1 ``decode(..., alpha=0.1, error="per-family")``: least squares on all 51
      candidates, exact sandwich standard errors (bit noise and the cohort draw), one-sided z-tests,
      Bonferroni at 0.1/51: E[false positives per run] <= 0.1 × 25/51 = 0.049 whatever the dependence.
  family-wise 0.05 (the flow's default before the two-stage rule) and 0.1: the same z-tests with Holm's
      correction (P[any FP] <= α; the expected number is not bounded by α).
  oracle 0.1/25: a reference, not a decoder: each p-value read at 0.1/25, knowing that exactly 25
      candidates are held by no one (E[FP] = 0.1): the ceiling of a single threshold on these z-statistics.
  cohort split: least squares on all candidates in the even cohorts selects those with z > 1; least
      squares on the selected ones alone in the odd cohorts, Bonferroni at 0.1/|selected| (valid: the
      cohorts are independent). Fitting fewer, less collinear columns does not pay for half the reports.
  Google: google/rappor's analysis/R/decode.R rule (Decode with its defaults), re-implemented: per-cohort
      bit shares with their binomial standard deviations, a constrained least-squares fit (coefficients >= 0
      summing to at most 1, fitted bit shares at most the observed share + 3 sd, clamped to [0.01, 1]; no
      Lasso, 51 candidates being fewer than 80 % of the 2048 rows) on the data and on 4 copies with Gaussian
      noise of the estimated sd added (sd then taken × √2); a candidate is reported when the mean of the 5
      fits exceeds 2 sample sd of them. The fit starts from NNLS and adds the violated share constraints
      until none is violated (the same optimum as SLSQP over all 2048 constraints; identical detections in
      6 of 6 runs checked, 5-10× faster).
Tried and not kept (seeded runs of this module's law, n = 10⁶, the proposed collection): feasible weighted
least squares with the exact per-bit variances (bit noise at the fitted N1 and the cohort draw) instead of
weights 1/n_m: empirical standard deviations of every candidate's count within ±0.3 % of the unweighted
fit's (200 runs; the variances differ by at most ~15 % between bits), so no power to gain. Wider filters
at h = 1 (same ε₁ and ε∞): standard error of a decoy 1886 at k 32, 1857 at k 64, 1843 at k 128 (m 64;
floor √(n p*(1 − p*))/(q* − p*) = 1831): −2.3 % for reports 4× longer, for both decoders alike; not adopted.
Decode time: 10⁶ reports through the real encoder (``encode_once``), then aggregation (``cohort_counts``)
and ``decode`` timed, one run per collection.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats
from scipy.optimize import minimize, nnls

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dprelease.dp.local.bits import SeededBits  # noqa: E402
from dprelease.dp.local.rappor import (  # noqa: E402
    RapporParams,
    _least_squares,
    cohort_counts,
    decode,
    design_matrix,
    encode_once,
    holm,
    two_stage,
)
from dprelease.dp.local.simulate import DECOYS, STATES, population, rappor_counts, zipf_weights  # noqa: E402

COLLECTIONS = {"current": RapporParams(k=32, h=2, m=64),
               "proposed": RapporParams(k=32, h=1, m=64, f=Fraction(9, 16), p=Fraction(1, 8),
                                        q=Fraction(11, 16))}
CANDIDATES = list(STATES) + list(DECOYS)
TARGET = 0.1
"""The issue's bound on false positives per run (an expected number: the per-family error rate)."""
RULES = ("two-stage 0.1", "per-family 0.1", "family-wise 0.05", "family-wise 0.1", "oracle 0.1/25", "cohort split",
         "google")
OUT = ROOT / "benchmarks" / "results" / "rappor_decoding.json"


def _constrained_fit(x: np.ndarray, y: np.ndarray, std: np.ndarray) -> np.ndarray:
    """Google's ConstrainedLinModel: min ‖Xβ − y‖² s.t. β >= 0, Σβ <= 1, Xβ <= clamp(y + 3 sd, 0.01, 1).

    NNLS first; while its solution breaks a constraint, SLSQP with the constraints broken so far (in
    variables scaled to order 1). A solution meeting every constraint of a relaxed problem solves the full
    one (convex QP), so this is the full problem's optimum, found with a handful of constraints.
    """
    start, _ = nnls(x, y)
    ceiling = np.clip(y + 3 * std, 0.01, 1.0)
    scale = max(float(start.max(initial=0.0)), 1e-9)
    xs = x * scale
    gram, cross = xs.T @ xs, xs.T @ y
    kept = np.zeros(y.size, dtype=bool)
    beta = start
    for _ in range(50):
        broken = x @ beta > ceiling + 1e-12
        if beta.sum() <= 1 + 1e-12 and not (broken & ~kept).any():
            return beta
        kept |= broken
        rows, caps = xs[kept], ceiling[kept]
        constraints = [{"type": "ineq", "fun": lambda u: 1.0 - scale * u.sum(),
                        "jac": lambda u: -scale * np.ones_like(u)}]
        if kept.any():
            constraints.append({"type": "ineq", "fun": lambda u, r=rows, c=caps: c - r @ u,
                                "jac": lambda u, r=rows: -r})
        result = minimize(lambda u: 0.5 * float(u @ gram @ u) - float(cross @ u), start / scale,
                          jac=lambda u: gram @ u - cross, bounds=[(0.0, None)] * x.shape[1],
                          constraints=constraints, method="SLSQP", options={"ftol": 1e-10, "maxiter": 1000})
        if not result.success:
            return start
        beta = np.maximum(result.x, 0.0) * scale
    return beta


def google_rule(counts: np.ndarray, per_cohort: np.ndarray, params: RapporParams, seed: int) -> np.ndarray:
    """Which candidates Google's Decode reports (mean of 5 constrained fits > 2 sd of them)."""
    p_star, q_star = float(params.p_star), float(params.q_star)
    gap = q_star - p_star
    keep = per_cohort > 0
    n_m = per_cohort[keep].astype(np.float64)
    shares = (counts[keep] - p_star * n_m[:, None]) / (gap * n_m[:, None])
    clamped = np.clip(shares, 0.0, 1.0)
    rate = clamped * q_star + (1 - clamped) * p_star
    std = np.sqrt(n_m[:, None] * rate * (1 - rate)) / gap / n_m[:, None]
    rows = np.repeat(keep, params.k)
    x = (design_matrix(CANDIDATES, params, np.ones(params.m))[rows] > 0).astype(np.float64)
    y, sd = shares.reshape(-1), std.reshape(-1)
    rng = np.random.default_rng(seed)  # benchmark only: Google's resampling noise
    fits = [_constrained_fit(x, y, sd)]
    for _ in range(4):
        fits.append(_constrained_fit(x, y + rng.normal(0.0, sd), sd * math.sqrt(2)))
    n = float(per_cohort.sum())
    coefs = n * np.asarray(fits)
    return np.asarray(coefs.mean(axis=0) > 1e-6 + 2 * coefs.std(axis=0, ddof=1))


def cohort_split(counts: np.ndarray, per_cohort: np.ndarray, params: RapporParams) -> np.ndarray:
    """Select on the even cohorts (z > 1, all candidates fitted), fit and test the selected on the odd ones."""
    n_m = per_cohort.astype(np.float64)
    gap = float(params.q_star - params.p_star)
    y = ((counts - float(params.p_star) * n_m[:, None]) / gap).reshape(-1)
    n_rows = np.repeat(n_m, params.k)
    cohort = np.repeat(np.arange(params.m), params.k)
    shares = n_m / n_m.sum()
    x = design_matrix(CANDIDATES, params, shares)
    first, second = cohort % 2 == 0, cohort % 2 == 1
    beta, se = _least_squares(x[first], y[first], n_rows[first], cohort[first], shares, params)
    chosen = np.nonzero(beta / se > 1.0)[0]
    detected = np.zeros(len(CANDIDATES), dtype=bool)
    if chosen.size:
        beta, se = _least_squares(x[second][:, chosen], y[second], n_rows[second], cohort[second], shares, params)
        detected[chosen] = stats.norm.sf(beta / se) < TARGET / chosen.size
    return detected


def _tally(detected: np.ndarray) -> list[int]:
    return [int(detected[:len(STATES)].sum()), int(detected[len(STATES):].sum())]


def one_run(key: str, n: int, seed: int, google: bool, split: bool = True) -> dict[str, Any]:
    params = COLLECTIONS[key]
    truth = np.random.default_rng(1000 + seed).multinomial(n, zipf_weights())  # simulated people only
    held = np.concatenate([truth, np.zeros(len(DECOYS), dtype=np.int64)])
    counts, per_cohort = rappor_counts(CANDIDATES, held, params, 2000 + seed)
    start = time.perf_counter()
    decoded = decode(counts, per_cohort, CANDIDATES, params, alpha=TARGET, error="per-family")
    seconds = time.perf_counter() - start
    p = decoded.p_values
    rules = {"two-stage 0.1": _tally(two_stage(p, TARGET)), "per-family 0.1": _tally(np.asarray(decoded.detected)),
             "family-wise 0.05": _tally(holm(p, 0.05)),
             "family-wise 0.1": _tally(holm(p, 0.1)), "oracle 0.1/25": _tally(p < TARGET / len(DECOYS))}
    if split:
        rules["cohort split"] = _tally(cohort_split(counts, per_cohort, params))
    if google:
        rules["google"] = _tally(google_rule(counts, per_cohort, params, 4000 + seed))
    z = (decoded.counts - held) / decoded.std
    return {"collection": key, "n": n, "seed": seed, "decode_seconds": seconds, "rules": rules,
            "z_decoys": [round(float(v), 4) for v in z[len(STATES):]],
            "max_abs_z_states": float(np.abs(z[:len(STATES)]).max())}


def _mean_se(values: np.ndarray) -> dict[str, float]:
    return {"mean": float(values.mean()), "se": float(values.std(ddof=1) / math.sqrt(values.size))}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    params = COLLECTIONS[runs[0]["collection"]]
    out: dict[str, Any] = {
        "collection": runs[0]["collection"], "n": runs[0]["n"], "runs": len(runs),
        "params": {"k": params.k, "h": params.h, "m": params.m, "f": str(params.f), "p": str(params.p),
                   "q": str(params.q), "epsilon_one": params.epsilon_one,
                   "epsilon_infinity": params.epsilon_infinity},
        "decode_seconds_median": float(np.median([r["decode_seconds"] for r in runs]))}
    z = np.asarray([r["z_decoys"] for r in runs])
    out["decoy_z"] = {"mean": float(z.mean()), "variance": float(z.var(ddof=1)),
                      "share_above_bonferroni": float((z > stats.norm.isf(TARGET / len(CANDIDATES))).mean()),
                      "nominal": TARGET / len(CANDIDATES)}
    for rule in RULES:
        pairs = np.asarray([r["rules"][rule] for r in runs if rule in r["rules"]], dtype=np.float64)
        if not pairs.size:
            continue
        out[rule] = {"runs": int(pairs.shape[0]), "states": _mean_se(pairs[:, 0]),
                     "false_positives_per_run": _mean_se(pairs[:, 1]),
                     "runs_with_a_false_positive": int((pairs[:, 1] > 0).sum())}
    for rule, key in (("two-stage 0.1", "states_two_stage_minus_google"),
                      ("per-family 0.1", "states_ours_minus_google")):
        paired = np.asarray([r["rules"][rule][0] - r["rules"]["google"][0]
                             for r in runs if "google" in r["rules"] and rule in r["rules"]], dtype=np.float64)
        if paired.size > 1:
            out[key] = _mean_se(paired)
    rerun = np.asarray([r["rules"]["two-stage 0.1"][0] - r["rules"]["google"][0] for r in runs
                        if "google" in r["rules"] and not r.get("google_stored")], dtype=np.float64)
    if 1 < rerun.size < sum("google" in r["rules"] for r in runs):
        out["states_two_stage_minus_google_rerun_only"] = {**_mean_se(rerun), "runs": int(rerun.size)}
    return out


def _merge_google(runs: list[dict[str, Any]], path: Path) -> dict[str, dict[str, Any]]:
    """Fill Google's tallies from an earlier run of the same reports (same collection, n and seeds).

    Every simulated report and Google's resampling noise are seeded by the run's seed, so a run's tallies
    are a function of (collection, n, seed): the runs that re-ran Google here, and every run's per-family
    tally, are compared with the earlier file to check that. Filled runs are marked ``google_stored``.
    """
    earlier = {(r["collection"], r["n"], r["seed"]): r["rules"]
               for r in json.loads(path.read_text(encoding="utf-8"))["runs"]}
    checks: dict[str, dict[str, Any]] = {}
    for r in runs:
        old = earlier.get((r["collection"], r["n"], r["seed"]))
        if old is None:
            continue
        c = checks.setdefault(r["collection"], {"file": str(path.relative_to(ROOT)) if path.is_absolute() else
                                                str(path), "google_checked": 0, "google_identical": 0,
                                                "per_family_checked": 0, "per_family_identical": 0})
        for rule, name in (("google", "google"), ("per-family 0.1", "per_family")):
            if rule in r["rules"] and rule in old:
                c[f"{name}_checked"] += 1
                c[f"{name}_identical"] += int(r["rules"][rule] == old[rule])
        if "google" not in r["rules"] and "google" in old:
            r["rules"]["google"] = old["google"]
            r["google_stored"] = True
    return checks


def table(result: dict[str, Any]) -> str:
    lines = ["| collection | rule | runs | true states (of 26) | false positives per run (of 25) | runs with FP |",
             "|---|---|---|---|---|---|"]
    for row in result["summary"]:
        p = row["params"]
        name = (f"{row['collection']} (k {p['k']}, h {p['h']}, m {p['m']}, f {p['f']}, p {p['p']}, q {p['q']}; "
                f"ε₁ {p['epsilon_one']:.2f}, ε∞ {p['epsilon_infinity']:.2f})")
        for rule in RULES:
            if rule not in row:
                continue
            a = row[rule]
            lines.append(f"| {name} | {rule} | {a['runs']} | {a['states']['mean']:.3f} ± {a['states']['se']:.3f} "
                         f"| {a['false_positives_per_run']['mean']:.3f} ± {a['false_positives_per_run']['se']:.3f} "
                         f"| {a['runs_with_a_false_positive']} |")
    for row in result["summary"]:
        for key, rule in (("states_two_stage_minus_google", "two-stage 0.1"),
                          ("states_ours_minus_google", "per-family 0.1")):
            if key in row:
                d = row[key]
                lines.append(f"{row['collection']}: states, {rule} minus Google (paired, same reports): "
                             f"{d['mean']:+.3f} ± {d['se']:.3f}")
        if "states_two_stage_minus_google_rerun_only" in row:
            d = row["states_two_stage_minus_google_rerun_only"]
            lines.append(f"{row['collection']}: the same on the {d['runs']} runs where Google's rule was re-run "
                         f"here: {d['mean']:+.3f} ± {d['se']:.3f}")
        if "reproduced_from" in row:
            lines.append(f"{row['collection']}: tallies checked against {row['reproduced_from']}")
    for key, t in result.get("timing", {}).items():
        lines.append(f"{key}: 10⁶ reports aggregated in {t['aggregate_seconds']:.2f} s, decoded in "
                     f"{t['decode_seconds']:.2f} s")
    return "\n".join(lines)


def timing(key: str, n: int) -> dict[str, float]:
    """Aggregate and decode n reports made by the real encoder (one run)."""
    params = COLLECTIONS[key]
    people = population(n, 7)
    cohorts = SeededBits(8).below(params.m, n)
    reports = encode_once([STATES[i] for i in people], cohorts, params, SeededBits(9))
    start, cpu_start = time.perf_counter(), time.process_time()
    counts, per_cohort = cohort_counts(reports, cohorts, params)
    middle, cpu_middle = time.perf_counter(), time.process_time()
    decoded = decode(counts, per_cohort, CANDIDATES, params, alpha=TARGET, error="per-family two-stage")
    end, cpu_end = time.perf_counter(), time.process_time()
    return {"aggregate_seconds": middle - start, "decode_seconds": end - middle,
            "aggregate_cpu_seconds": cpu_middle - cpu_start, "decode_cpu_seconds": cpu_end - cpu_middle,
            "states": int(sum(decoded.detected[:len(STATES)])),
            "false_positives": int(sum(decoded.detected[len(STATES):]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=500, help="runs per collection")
    parser.add_argument("--google-runs", type=int, nargs=2, default=[500, 500],
                        help="of those, how many also run Google's rule (current, proposed)")
    parser.add_argument("--split-runs", type=int, default=500, help="of those, how many also run the cohort split")
    parser.add_argument("--collections", nargs="+", default=list(COLLECTIONS), choices=list(COLLECTIONS),
                        help="run these only; the others' results already in --out are kept")
    parser.add_argument("--google-from", type=Path, default=None,
                        help="earlier results whose Google tallies fill the runs (same collection, n, seed) not "
                             "re-run here; the runs re-run here are checked against them")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--no-timing", action="store_true", help="skip the real-encoder timing runs")
    parser.add_argument("--table", action="store_true", help="print a Markdown table of the results")
    parser.add_argument("--table-only", action="store_true", help="print the table of --out without running")
    args = parser.parse_args()
    if args.table_only:
        print(table(json.loads(args.out.read_text(encoding="utf-8"))))
        return
    google = dict(zip(COLLECTIONS, args.google_runs, strict=True))
    jobs = [(key, seed) for key in args.collections for seed in range(args.runs)]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        runs = list(pool.map(one_run, [j[0] for j in jobs], [args.n] * len(jobs), [j[1] for j in jobs],
                             [j[1] < google[j[0]] for j in jobs], [j[1] < args.split_runs for j in jobs]))
    kept: dict[str, Any] = {"summary": [], "timing": {}, "runs": []}
    if args.out.exists():
        kept = json.loads(args.out.read_text(encoding="utf-8"))
        if "collection" not in (kept["summary"] or [{"collection": ""}])[0]:
            kept = {"summary": [], "timing": {}, "runs": []}  # results of an earlier layout: not merged
    reproduced = _merge_google(runs, args.google_from) if args.google_from else {}
    fresh = {key: summarise([r for r in runs if r["collection"] == key]) for key in args.collections}
    for key, check in reproduced.items():
        fresh[key]["reproduced_from"] = check
    result: dict[str, Any] = {
        "candidates": {"states": len(STATES), "decoys": len(DECOYS)},
        "summary": [fresh.get(key) or next(row for row in kept["summary"] if row["collection"] == key)
                    for key in COLLECTIONS if key in fresh or any(row["collection"] == key for row in kept["summary"])],
        "timing": {**kept.get("timing", {}),
                   **({} if args.no_timing else {key: timing(key, 1_000_000) for key in args.collections})},
        "runs": [r for r in kept["runs"] if r["collection"] not in fresh]
        + [{k: v for k, v in r.items() if k != "z_decoys"} for r in runs]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(table(result))


if __name__ == "__main__":
    main()
