"""Statistical tests of the private selection mechanisms (dp/mechanisms/selection.py).

Two kinds of test:

1. *Distribution* tests: selection frequencies against the exact probabilities
   (``probabilities()``), with exact per-cell binomial acceptance bands. The production OpenDP
   samplers are run as in a release (``mechanism.select(scores, OpenDPNoise())``) for
   N = 20_000 selections each: every selection is one OpenDP call of 0.12-0.25 ms (almost all of
   it the Python FFI conversion, so it cannot be vectorised), and N = 100_000 would take 12-25 s
   for one mechanism alone, over this file's 20 s budget. The N = 100_000 frequency tests run on
   the seeded stand-ins below, whose laws must match the same exact probabilities; 20_000
   production draws still reject a noise scale off by x 0.7 or x 1.3 with probability
   >= 1 - 1e-17 (bound printed with ``-s``).
2. *Privacy audits*: on neighbouring score vectors, a Clopper–Pearson lower bound on the privacy
   loss of the event "selects candidate 0", which must not exceed the booked epsilon, and a
   deliberately broken variant (half the noise scale: the exponential mechanism with
   exp(epsilon u / Δu) instead of exp(epsilon u / (2Δu)), or report-noisy-max with the monotone
   Lap(Δ/epsilon) applied to non-monotone scores) that the audit must flag. Audits need 2 x 100_000
   selections per variant, too many for one OpenDP call each, so they use seeded numpy stand-ins
   that compute the *same function* as ``select``: argmax_i (u_i + scale * noise_i) with the
   mechanism's own ``scale()`` and noise family (Gumbel, exponential, or discrete Laplace via
   :class:`tests.noise.SeededNoise`), vectorised over runs. ``test_stand_ins_compute_select`` pins
   that ``select`` hands exactly these scores, family and scale to its sampler;
   ``test_seeded_stand_ins_have_the_exact_laws`` checks the stand-ins against the exact
   probabilities; the distribution tests check the production samplers against the same exact
   probabilities. Together: the audited law is the released law.

Neighbouring scores. With u = [0, 1] vs u' = [1, 0] and Δu = 1 the exponential mechanism's true
loss is only epsilon / 2 (the normalising sums are equal), so the broken variant (true loss
epsilon) would pass unnoticed. The audit uses K = 10 candidates, u = [0, 1, ..., 1] vs
u' = [1, 0, ..., 0] (every score moves by Δu = 1), where the normaliser moves against the
target: true loss ln(P'/P) = 0.897 (exponential mechanism), 0.99991 (permute-and-flip) and 0.983
(report-noisy-max) at epsilon = 1, and 1.776, 1.990, 1.851 for the broken variants.

False-alarm rates (each under a correct mechanism and sampler):

* distribution tests: <= 1e-6 per test, rigorous (exact binomial tails, union bound over cells
  and the two sides of each band; no asymptotics);
* privacy audits: <= 1e-6 per audit, rigorous (two one-sided Clopper–Pearson bounds at 5e-7 each);
* power (a wrong scale x 0.7 / x 1.3, or a broken variant, passing unnoticed): bounded by exact
  binomial tails at the true probabilities; the bounds are asserted <= 1e-9 and printed with ``-s``.
  The seeded runs are deterministic, so their outcomes are fixed; the bounds say they are typical.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import numpy.typing as npt
import pytest
from scipy import stats

from dprelease.dp.accounting.budget import PureBudget
from dprelease.dp.mechanisms.random import OpenDPNoise
from dprelease.dp.mechanisms.selection import ExponentialMechanism, PermuteAndFlip, ReportNoisyMax
from tests.noise import SeededNoise

pytestmark = pytest.mark.statistical

ALPHA = 1e-6  # false-alarm rate of every distribution test and every audit
POWER_MISS_LOG10_MAX = -9.0  # required bound on log10 P(a wrong variant passes)
EPSILON = Fraction(1)
SCORES = np.array([0, 1, 2, 3])  # distribution tests; scale 2 at epsilon = 1, Δu = 1
N_PRODUCTION = 20_000  # OpenDP calls per production distribution test
N_SEEDED = 100_000  # per side of each audit, and per seeded distribution test
K_AUDIT = 10
U = np.array([0] + [1] * (K_AUDIT - 1))  # candidate 0 is worst on D ...
U_NEIGHBOUR = np.array([1] + [0] * (K_AUDIT - 1))  # ... and best on D'; every score moved by 1

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


# ---------------------------------------------------------------------------------------------
# Exact binomial bands and Clopper–Pearson bounds


def cp_lower(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper–Pearson lower bound: P_p(cp_lower(K, n, alpha) > p) <= alpha."""
    return 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))


def cp_upper(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper–Pearson upper bound: P_p(cp_upper(K, n, alpha) < p) <= alpha."""
    return 1.0 if k == n else float(stats.beta.isf(alpha, k + 1, n - k))


def epsilon_hat(k_num: int, k_den: int, n: int, alpha: float) -> float:
    """ln(p_lower(num) / p_upper(den)), floored at 0; exceeds the event's true loss w.p. <= alpha."""
    p, q = cp_lower(k_num, n, alpha / 2), cp_upper(k_den, n, alpha / 2)
    return max(0.0, math.log(p) - math.log(q)) if p > 0 else 0.0


def bands(n: int, probabilities: FloatArray, alpha: float) -> tuple[IntArray, IntArray]:
    """Per-cell acceptance bands [lo, hi] with P(count < lo) + P(count > hi) <= alpha / cells, exactly."""
    tail = alpha / (2 * len(probabilities))
    lo = stats.binom.ppf(tail, n, probabilities)  # smallest k with cdf(k) >= tail, so cdf(lo - 1) < tail
    hi = stats.binom.isf(tail, n, probabilities)  # smallest k with sf(k) <= tail
    assert np.all(stats.binom.cdf(lo - 1, n, probabilities) <= tail)
    assert np.all(stats.binom.sf(hi, n, probabilities) <= tail)
    return lo.astype(np.int64), hi.astype(np.int64)


def miss_log10(n: int, truth: FloatArray, lo: IntArray, hi: IntArray) -> float:
    """log10 of a bound on P(every cell inside its band) when the counts follow ``truth``.

    P(all inside) <= P(cell c inside) <= min(P(count_c <= hi_c), P(count_c >= lo_c)) for every c.
    """
    log_inside = np.minimum(stats.binom.logcdf(hi, n, truth), stats.binom.logsf(lo - 1, n, truth))
    return float(np.min(log_inside)) / math.log(10)


def audit_miss_log10(p_num: float, p_den: float, n: int, alpha: float, threshold: float) -> float:
    """log10 of a bound on P(epsilon_hat <= threshold) for true event probabilities p_num, p_den.

    epsilon_hat is non-decreasing in the numerator count and non-increasing in the denominator
    count, so if k_num >= a and k_den <= b with epsilon_hat(a, b) > threshold, the audit flags;
    hence P(miss) <= P(K_num < a) + P(K_den > b), with exact binomial tails, minimised over (a, b).
    """
    best = 0.0
    sd_num, sd_den = math.sqrt(n * p_num * (1 - p_num)), math.sqrt(n * p_den * (1 - p_den))
    for z in np.linspace(0.0, 60.0, 601):
        a = math.floor(n * p_num - z * sd_num)
        b = math.ceil(n * p_den + z * sd_den)
        if a <= 0 or b >= n or epsilon_hat(a, b, n, alpha) <= threshold:
            continue
        log_miss = np.logaddexp(stats.binom.logcdf(a - 1, n, p_num), stats.binom.logsf(b, n, p_den))
        best = min(best, float(log_miss) / math.log(10))
    return best


# ---------------------------------------------------------------------------------------------
# Seeded stand-ins: argmax_i (u_i + scale * noise_i), vectorised over runs


def gumbel_runs(scores: IntArray, scale: float, n: int, rng: np.random.Generator) -> IntArray:
    return np.argmax(scores + scale * rng.gumbel(size=(n, len(scores))), axis=1)


def exponential_runs(scores: IntArray, scale: float, n: int, rng: np.random.Generator) -> IntArray:
    return np.argmax(scores + rng.exponential(scale, size=(n, len(scores))), axis=1)


def discrete_laplace_runs(scores: IntArray, scale: float, n: int, seed: int) -> IntArray:
    noisy = SeededNoise(seed).discrete_laplace(np.tile(scores, n), scale).reshape(n, len(scores))
    return np.argmax(noisy, axis=1)  # first maximum, like ReportNoisyMax.select


def rnm_probability_of_first(scores: IntArray, scale: float) -> float:
    """Exact P(ReportNoisyMax selects 0) when scores[1:] are equal (first index wins ties)."""
    radius = math.ceil(70 * scale) + 1
    z = np.arange(-radius, radius + 1)
    q = math.exp(-1 / scale)
    pmf = (1 - q) / (1 + q) * q ** np.abs(z)
    cdf = np.cumsum(pmf)

    def at_most(t: IntArray) -> FloatArray:
        index = t - z[0]
        return np.where(index < 0, 0.0, cdf[np.clip(index, 0, len(z) - 1)])

    others = at_most(scores[0] + z - scores[1])  # P(u_j + r_j <= u_0 + z) for each other j
    return float(np.sum(pmf * others ** (len(scores) - 1)))


class RecordingSelection:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[int], float]] = []

    def gumbel_argmax(self, scores, scale: float) -> int:
        self.calls.append(("gumbel", scores.tolist(), scale))
        return 0

    def exponential_argmax(self, scores, scale: float) -> int:
        self.calls.append(("exponential", scores.tolist(), scale))
        return 0


def test_stand_ins_compute_select():
    """select() passes the scores unchanged, with its own scale, to the noise family the stand-ins use."""
    spy = RecordingSelection()
    ExponentialMechanism(1, PureBudget(EPSILON)).select(U, spy)
    PermuteAndFlip(1, PureBudget(EPSILON)).select(U, spy)
    assert spy.calls == [("gumbel", U.tolist(), 2.0), ("exponential", U.tolist(), 2.0)]


# ---------------------------------------------------------------------------------------------
# Distribution tests


def _check_frequencies(label: str, draws: IntArray, exact: FloatArray, wrong: dict[str, FloatArray]) -> None:
    n = len(draws)
    counts = np.bincount(draws, minlength=len(exact))
    lo, hi = bands(n, exact, ALPHA)
    z = (counts - n * exact) / np.sqrt(n * exact * (1 - exact))
    power = {name: miss_log10(n, truth, lo, hi) for name, truth in wrong.items()}
    print(f"\n{label}: N={n} counts={counts.tolist()} expected={np.round(n * exact, 1).tolist()} "
          f"bands={list(zip(lo.tolist(), hi.tolist(), strict=True))} max|z|={np.abs(z).max():.2f} "
          f"log10 P(wrong scale passes)={ {k: round(v, 1) for k, v in power.items()} }")
    assert np.all((lo <= counts) & (counts <= hi)), f"{label}: counts {counts.tolist()} outside the bands"
    for name, value in power.items():
        assert value <= POWER_MISS_LOG10_MAX, f"{label}: the test cannot tell the {name} scale apart"


def _wrong_scales(cls: type[ExponentialMechanism] | type[PermuteAndFlip]) -> dict[str, FloatArray]:
    result = {}
    for factor in (0.7, 1.3):
        variant = cls(1, PureBudget(EPSILON))
        object.__setattr__(variant, "_scale", variant.scale() * factor)
        result[f"x{factor}"] = variant.probabilities(SCORES)
    return result


def test_exponential_mechanism_production_frequencies():
    em = ExponentialMechanism(1, PureBudget(EPSILON))
    noise = OpenDPNoise()
    start = time.perf_counter()
    draws = np.fromiter((em.select(SCORES, noise) for _ in range(N_PRODUCTION)), dtype=np.int64, count=N_PRODUCTION)
    print(f"\nOpenDP Gumbel selection: {N_PRODUCTION} draws in {time.perf_counter() - start:.1f} s")
    _check_frequencies("exponential mechanism (OpenDP)", draws, em.probabilities(SCORES),
                       _wrong_scales(ExponentialMechanism))


def test_permute_and_flip_production_frequencies():
    pf = PermuteAndFlip(1, PureBudget(EPSILON))
    noise = OpenDPNoise()
    draws = np.fromiter((pf.select(SCORES, noise) for _ in range(N_PRODUCTION)), dtype=np.int64,
                        count=N_PRODUCTION)
    _check_frequencies("permute-and-flip (OpenDP)", draws, pf.probabilities(SCORES), _wrong_scales(PermuteAndFlip))


def test_seeded_stand_ins_have_the_exact_laws():
    """The stand-ins used by the audits draw the exact laws; wrong scales are rejected."""
    rng = np.random.default_rng(20261123)
    for cls, runs in ((ExponentialMechanism, gumbel_runs), (PermuteAndFlip, exponential_runs)):
        mechanism = cls(1, PureBudget(EPSILON))
        draws = runs(SCORES, mechanism.scale(), N_SEEDED, rng)
        _check_frequencies(f"{cls.__name__} (seeded stand-in)", draws, mechanism.probabilities(SCORES),
                           _wrong_scales(cls))
        lo, hi = bands(N_SEEDED, mechanism.probabilities(SCORES), ALPHA)
        for factor in (0.7, 1.3):
            counts = np.bincount(runs(SCORES, mechanism.scale() * factor, N_SEEDED, rng), minlength=len(SCORES))
            assert not np.all((lo <= counts) & (counts <= hi)), f"{cls.__name__}: x{factor} passed"


# ---------------------------------------------------------------------------------------------
# Privacy audits


Runs = Callable[[IntArray, float, int, int], IntArray]


def _audit(label: str, runs: Runs, scale: float, booked: float, exact: tuple[float, float], *, broken: bool) -> float:
    """Run the neighbouring pair, return epsilon_hat; check the verdict and the power bound."""
    on_d = runs(U, scale, N_SEEDED, 1)
    on_neighbour = runs(U_NEIGHBOUR, scale, N_SEEDED, 2)
    k_den, k_num = int(np.sum(on_d == 0)), int(np.sum(on_neighbour == 0))
    value = epsilon_hat(k_num, k_den, N_SEEDED, ALPHA)
    p_den, p_num = exact
    truth = math.log(p_num / p_den)
    line = (f"\n{label}: P(select 0) = {k_den / N_SEEDED:.5f} (exact {p_den:.5f}) vs {k_num / N_SEEDED:.5f} "
            f"(exact {p_num:.5f}); epsilon_hat = {value:.4f}, true event loss {truth:.4f}, booked {booked}")
    if broken:
        power = audit_miss_log10(p_num, p_den, N_SEEDED, ALPHA, booked)
        shown = f"{power:.1f}" if math.isfinite(power) else "-300 (underflows)"
        print(line + f"; log10 P(audit misses it) <= {shown}")
        assert power <= POWER_MISS_LOG10_MAX
        assert value > booked, f"{label}: the audit did not notice the broken variant"
    else:
        print(line)
        assert value <= booked, f"{label}: epsilon_hat {value} exceeds the booked loss"
    return value


def _seeded(sampler: Callable[[IntArray, float, int, np.random.Generator], IntArray]) -> Runs:
    return lambda scores, scale, n, seed: sampler(scores, scale, n, np.random.default_rng(seed))


@pytest.mark.parametrize("broken", [False, True], ids=["correct", "half-scale"])
def test_exponential_mechanism_audit(broken):
    em = ExponentialMechanism(1, PureBudget(EPSILON))
    scale = em.scale() / 2 if broken else em.scale()
    exact = ExponentialMechanism(1, PureBudget(2 * EPSILON if broken else EPSILON))
    probabilities = (float(exact.probabilities(U)[0]), float(exact.probabilities(U_NEIGHBOUR)[0]))
    _audit("exponential mechanism" + (" (broken: exp(eps u / Δu))" if broken else ""), _seeded(gumbel_runs),
           scale, float(em.privacy_loss().epsilon), probabilities, broken=broken)


@pytest.mark.parametrize("broken", [False, True], ids=["correct", "half-scale"])
def test_permute_and_flip_audit(broken):
    pf = PermuteAndFlip(1, PureBudget(EPSILON))
    scale = pf.scale() / 2 if broken else pf.scale()
    exact = PermuteAndFlip(1, PureBudget(2 * EPSILON if broken else EPSILON))
    probabilities = (float(exact.probabilities(U)[0]), float(exact.probabilities(U_NEIGHBOUR)[0]))
    _audit("permute-and-flip" + (" (broken: half scale)" if broken else ""), _seeded(exponential_runs),
           scale, float(pf.privacy_loss().epsilon), probabilities, broken=broken)


@pytest.mark.parametrize("broken", [False, True], ids=["correct", "monotone-scale"])
def test_report_noisy_max_audit(broken):
    rnm = ReportNoisyMax(1, PureBudget(EPSILON))
    scale = rnm.scale() / 2 if broken else rnm.scale()
    probabilities = (rnm_probability_of_first(U, scale), rnm_probability_of_first(U_NEIGHBOUR, scale))
    _audit("report noisy max" + (" (broken: Lap(Δ/eps))" if broken else ""), discrete_laplace_runs,
           scale, float(rnm.privacy_loss().epsilon), probabilities, broken=broken)
