"""Benchmark: local-DP frequency protocols against their exact variance, RAPPOR decoding, and central vs local.

BENCHMARK ONLY: simulated people (``dp.local.simulate``), seeded sources for reproducibility. Nothing here
is a release.

Run:  .venv/bin/python benchmarks/ldp_protocols.py [--n 100000] [--reps 20]
          [--out benchmarks/results/ldp_protocols.json]

1. GRR, SUE, OUE and OLH on the Zipf(1.1) 26-state population at ε = ln 3: mean squared error of the
   count estimates over ``--reps`` runs against the exact variance (Wang et al. 2017 with the c_v term),
   and encode/estimate time.
2. RAPPOR (k 32, h 2, m 64, f 1/2, p 1/2, q 3/4: one-report ε 1.07) at n = 10⁴, 10⁵, 10⁶ (4 runs each):
   true states detected, false positives among 25 decoys (Holm-corrected test), the same fit read with a
   plain "estimate > 2 standard errors" rule, the share explained, and decode time.
3. Central vs local at the same ε = ln 3: the same counts released by the central pipeline's mechanism
   (discrete Laplace of scale 1/ε on the histogram, one person changes one count by 1) against OUE.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dprelease.dp.local.bits import SeededBits  # noqa: E402
from dprelease.dp.local.estimators import estimate, exact_variance  # noqa: E402
from dprelease.dp.local.randomizers import GRR, OLH, OUE, SUE  # noqa: E402
from dprelease.dp.local.rappor import RapporParams, cohort_counts, decode, encode_once  # noqa: E402
from dprelease.dp.local.simulate import DECOYS, STATES, population  # noqa: E402
from tests.noise import SeededNoise  # noqa: E402

EPSILON = math.log(3)


def protocols(n: int, reps: int) -> list[dict[str, Any]]:
    x = population(n, 1)
    truth = np.bincount(x, minlength=len(STATES))
    out = []
    for protocol in (GRR(26, EPSILON), SUE(26, EPSILON), OUE(26, EPSILON), OLH(26, EPSILON)):
        p, q = protocol.support_probabilities
        start = time.perf_counter()
        errors = [float(np.mean((estimate(protocol.support(protocol.encode(x, SeededBits(r))), n, p, q).counts
                                 - truth) ** 2)) for r in range(reps)]
        seconds = (time.perf_counter() - start) / reps
        theory = float(np.mean(exact_variance(n, truth, p, q)))
        name = getattr(protocol, "variant", type(protocol).__name__)
        out.append({"protocol": name, "epsilon": protocol.epsilon, "mse_counts": float(np.mean(errors)),
                    "exact_variance": theory, "ratio": float(np.mean(errors)) / theory,
                    "mse_shares": float(np.mean(errors)) / n**2, "seconds_per_run": seconds})
    return out


def rappor(sizes: tuple[int, ...], runs: int) -> list[dict[str, Any]]:
    params = RapporParams(k=32, h=2, m=64)
    out = []
    for n in sizes:
        found, false, plain, plain_false, explained, decode_s = [], [], [], [], [], []
        for r in range(runs):
            x = population(n, 20 + r)
            cohorts = SeededBits(50 + r).below(params.m, n)
            reports = encode_once([STATES[i] for i in x], cohorts, params, SeededBits(30 + r))
            start = time.perf_counter()
            counts, per_cohort = cohort_counts(reports, cohorts, params)
            decoded = decode(counts, per_cohort, list(STATES) + list(DECOYS), params)
            decode_s.append(time.perf_counter() - start)
            rule = [bool(c > 2 * s) if not np.isnan(s) else False for c, s in zip(decoded.counts, decoded.std,
                                                                                   strict=True)]
            found.append(sum(decoded.detected[:26]))
            false.append(sum(decoded.detected[26:]))
            plain.append(sum(rule[:26]))
            plain_false.append(sum(rule[26:]))
            explained.append(decoded.explained)
        out.append({"n": n, "epsilon_one": params.epsilon_one, "states_detected": float(np.mean(found)),
                    "decoy_false_positives": float(np.mean(false)), "two_sd_rule_states": float(np.mean(plain)),
                    "two_sd_rule_false_positives": float(np.mean(plain_false)),
                    "explained": float(np.mean(explained)), "decode_seconds": float(np.median(decode_s))})
    return out


def central_vs_local(n: int, reps: int) -> dict[str, Any]:
    x = population(n, 3)
    truth = np.bincount(x, minlength=len(STATES))
    noise = SeededNoise(5)
    central = [float(np.mean((noise.discrete_laplace(truth, 1 / EPSILON) - truth) ** 2)) for _ in range(reps)]
    protocol = OUE(26, EPSILON)
    p, q = protocol.support_probabilities
    local = [float(np.mean((estimate(protocol.support(protocol.encode(x, SeededBits(r))), n, p, q).counts - truth)
                           ** 2)) for r in range(reps)]
    return {"n": n, "epsilon": EPSILON, "central_mse_counts": float(np.mean(central)),
            "local_oue_mse_counts": float(np.mean(local)),
            "local_over_central": float(np.mean(local) / np.mean(central))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "ldp_protocols.json")
    args = parser.parse_args()
    result = {"protocols": protocols(args.n, args.reps), "rappor": rappor((10_000, 100_000, 1_000_000), 4),
              "central_vs_local": central_vs_local(args.n, args.reps)}
    for row in result["protocols"]:
        print(f"{row['protocol']:4s} eps {row['epsilon']:.4f}: MSE/exact variance {row['ratio']:.3f}, "
              f"MSE of shares {row['mse_shares']:.3g}, {row['seconds_per_run']:.3f} s per run")
    for row in result["rappor"]:
        print(f"RAPPOR n={row['n']:>9,}: states {row['states_detected']:.2f}/26, "
              f"decoys {row['decoy_false_positives']:.2f}"
              f" (2-sd rule {row['two_sd_rule_states']:.2f}, {row['two_sd_rule_false_positives']:.2f}), "
              f"explained {row['explained']:.3f}, decode {row['decode_seconds']:.2f} s")
    c = result["central_vs_local"]
    print(f"central vs local at n={c['n']}: MSE per count {c['central_mse_counts']:.3g} vs "
          f"{c['local_oue_mse_counts']:.3g} (local costs {c['local_over_central']:.3g}x)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
