"""RMSE of dp/statistics at epsilon = 1, n = 10^4 (issue 16's figures, dprelease only; peers not run here).

Heavy-tailed length of stay (lognormal, days, a few above 365) and uniform integer ages 17..90.
Noise from a seeded stand-in with the exact discrete Laplace law (tests.noise.SeededNoise) and a
seeded selection sampler, so that hundreds of repetitions run in seconds; the laws are those the
statistical tests check against the production samplers.

    PYTHONPATH=. python benchmarks/stats_rmse.py
"""

from __future__ import annotations

import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np

from dprelease.dp.accounting.budget import PureBudget
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.statistics.clipping import ClipBounds, Grid, svt_bounds
from dprelease.dp.statistics.moments import MomentsMechanism, measure_moments
from dprelease.dp.statistics.ptr import PTRMedian, run_ptr_median
from dprelease.dp.statistics.quantiles import measure_quantiles, quantile_mechanisms
from tests.noise import SeededNoise

REPS = 200


class Seeded(SeededNoise):
    def gumbel_argmax(self, scores, scale):  # type: ignore[no-untyped-def]
        return int(np.argmax(scores + self.rng.gumbel(0.0, scale, len(scores))))

    def exponential_argmax(self, scores, scale):  # type: ignore[no-untyped-def]
        return int(np.argmax(scores + self.rng.exponential(scale, len(scores))))

    def below(self, n):  # type: ignore[no-untyped-def]
        return int(self.rng.integers(n))


def main() -> None:
    data = np.random.default_rng(16)
    stay = np.round(data.lognormal(1.5, 1.0, 10_000), 1)
    ages = data.integers(17, 91, 10_000).astype(float)
    true_mean, true_median = float(stay.mean()), float(np.quantile(ages, 0.5, method="inverted_cdf"))
    errors: dict[str, list[float]] = {k: [] for k in ("mean public 365", "mean svt", "median em (step 1)",
                                                      "median em (step 1/16)", "median ptr")}
    refused = 0
    with tempfile.TemporaryDirectory() as tmp, Ledger.open(Path(tmp) / "l.sqlite") as ledger:
        ledger.register("pop", "pure", PureBudget(Fraction(10**6)), Fraction(0))
        ledger.reserve("pop", "r", PureBudget(Fraction(10**5)))
        for r in range(REPS):
            noise = Seeded(r)
            context = ReleaseContext(ledger, "r", "pure", noise)
            one = PureBudget(Fraction(1))
            public = MomentsMechanism(Grid(ClipBounds(0, 365)), one, weights={"count": 1, "sum": 3})
            mean = measure_moments(stay, public, context, column="stay", seed=r, group=f"p{r}").mean()
            errors["mean public 365"].append(mean.estimate - true_mean)
            bounds, _ = svt_bounds(stay, f"stay{r}", (0.0, 4096.0), PureBudget(Fraction(1, 10)), context)
            found = MomentsMechanism(Grid(bounds), PureBudget(Fraction(4, 5)), weights={"count": 1, "sum": 3})
            mean = measure_moments(stay, found, context, column="stay", seed=r, group=f"s{r}").mean()
            errors["mean svt"].append(mean.estimate - true_mean)
            for key, steps in (("median em (step 1)", 64), ("median em (step 1/16)", 1024)):
                mechanisms = quantile_mechanisms(Grid(ClipBounds(0, 128), steps), [0.5], one)
                released = measure_quantiles(ages, mechanisms, context, column="age", group=f"{key}{r}", uniform=noise)
                errors[key].append(released.median() - true_median)
            ptr = PTRMedian(Grid(ClipBounds(0, 128), 64), 1.0, PureBudget(Fraction(1, 2)), PureBudget(Fraction(1, 2)),
                            Fraction(1, 10**6))
            result = run_ptr_median(ages, ptr, context, column=f"age{r}")
            if result.value is None:
                refused += 1
            else:
                errors["median ptr"].append(result.value - true_median)
    for key, values in errors.items():
        print(f"{key:24s} RMSE {np.sqrt(np.mean(np.square(values))):.3f}  (n={len(values)})")
    print(f"ptr refused {refused}/{REPS}")


if __name__ == "__main__":
    main()
