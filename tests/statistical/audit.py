"""Reusable helpers for statistical privacy audits and distribution tests.

An *audit* runs a mechanism many times on two neighbouring inputs D and D', counts how often an
event E happens under each, and turns the counts into a high-confidence *lower* bound on the
privacy loss that the event exhibits:

* pure DP: ``epsilon_hat = ln(p_lower(E|num) / p_upper(E|den))``;
* zCDP: ``rho_hat = sup_{alpha >= 1} D_alpha(Bern(p_lower(E|num)) || Bern(p_upper(E|den))) / alpha``.

``p_lower`` / ``p_upper`` are one-sided Clopper–Pearson bounds, each holding with probability at
least ``1 - alpha_event / 2``, so an event's statistic overstates the true loss with probability at
most ``alpha_event``; :func:`audit` splits the family-wise ``alpha`` evenly over its events
(Bonferroni). A test that asserts ``statistic <= booked loss`` therefore raises a false alarm with
probability at most ``alpha`` whenever the mechanism really has the loss it books.

Both statistics are monotone (non-decreasing in the numerator count, non-increasing in the
denominator count), which is what :func:`power_failure_log10` uses to bound, with Chernoff tail
bounds on exact binomial counts, the probability that an audit of a deliberately broken mechanism
fails to notice it.

The module also has exact pmfs of the discrete Laplace / Gaussian, a chi-square goodness-of-fit
test with pooled tails, a :class:`ScaledNoise` wrapper to build under-noised variants, and
:func:`record_results` (writes JSON only when ``DPRELEASE_AUDIT_RECORD=1``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy import optimize, stats
from scipy.special import logsumexp, xlogy

from dprelease.dp.mechanisms.random import IntArray, NoiseSource

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]
Indicator = Callable[[IntArray], BoolArray]
Side = Literal["D", "D'"]
Statistic = Literal["epsilon", "rho"]

RECORD_ENV = "DPRELEASE_AUDIT_RECORD"


# ---------------------------------------------------------------------------------------------
# Confidence bounds


def cp_lower(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper–Pearson lower bound: P_p(cp_lower(K, n, alpha) > p) <= alpha."""
    if not 0 <= k <= n:
        raise ValueError(f"count {k} outside [0, {n}]")
    return 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))


def cp_upper(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper–Pearson upper bound: P_p(cp_upper(K, n, alpha) < p) <= alpha."""
    if not 0 <= k <= n:
        raise ValueError(f"count {k} outside [0, {n}]")
    return 1.0 if k == n else float(stats.beta.isf(alpha, k + 1, n - k))


# ---------------------------------------------------------------------------------------------
# Event-level privacy-loss statistics (functions of two probabilities)


def log_ratio(p: float, q: float) -> float:
    """``ln(p / q)`` floored at 0 (0 when the ratio carries no evidence of loss)."""
    if p <= 0 or p <= q:
        return 0.0
    return math.log(p) - math.log(q)


_ALPHA_GRID = np.geomspace(1 + 1e-3, 1e3, 1200)


def _renyi_over_alpha(p: float, q: float, alpha: FloatArray) -> FloatArray:
    """D_alpha(Bern(p) || Bern(q)) / alpha for alpha > 1, in log space (0 < q < p)."""
    terms = [alpha * math.log(p) + (1 - alpha) * math.log(q)]
    if p < 1:
        terms.append(alpha * math.log1p(-p) + (1 - alpha) * math.log1p(-q))
    log_h = np.logaddexp(*terms) if len(terms) == 2 else terms[0]
    return np.asarray(log_h / ((alpha - 1) * alpha), dtype=np.float64)


def bernoulli_renyi_rate(p: float, q: float) -> float:
    """``sup_{alpha >= 1} D_alpha(Bern(p) || Bern(q)) / alpha`` (alpha = 1 is the KL divergence).

    A rho-zCDP mechanism satisfies D_alpha(M(D) || M(D')) <= alpha rho for every alpha > 1 (and
    KL <= rho in the limit); by the data-processing inequality so does the Bernoulli indicator of
    any event, hence this rate is <= rho for the true event probabilities. For p > q it is
    non-decreasing in p and non-increasing in q (each D_alpha is), so plugging in a lower bound
    for p and an upper bound for q can only understate it. The supremum is approximated from
    below (grid plus local refinement): any alpha gives a valid lower bound, so an imperfect
    optimiser costs power, never soundness. Returns 0 when p <= q.
    """
    if not (0 < q < p <= 1):
        return 0.0
    kl = float(xlogy(p, p / q) + xlogy(1 - p, (1 - p) / (1 - q)))
    values = _renyi_over_alpha(p, q, _ALPHA_GRID)
    i = int(np.argmax(values))
    best = max(kl, float(values[i]))
    lo = math.log(_ALPHA_GRID[max(i - 1, 0)])
    hi = math.log(_ALPHA_GRID[min(i + 1, len(_ALPHA_GRID) - 1)])
    if hi > lo:
        res = optimize.minimize_scalar(
            lambda x: -float(_renyi_over_alpha(p, q, np.array([math.exp(x)]))[0]),
            bounds=(lo, hi),
            method="bounded",
            options={"xatol": 1e-9},
        )
        best = max(best, -float(res.fun))
    return best


_STATISTICS: dict[Statistic, Callable[[float, float], float]] = {
    "epsilon": log_ratio,
    "rho": bernoulli_renyi_rate,
}


def loss_lower_bound(statistic: Statistic, k_num: int, n_num: int, k_den: int, n_den: int, alpha: float) -> float:
    """The event statistic at (cp_lower(num), cp_upper(den)), each bound at ``alpha / 2``.

    Exceeds the event's true statistic with probability at most ``alpha``.
    """
    p = cp_lower(k_num, n_num, alpha / 2)
    q = cp_upper(k_den, n_den, alpha / 2)
    return _STATISTICS[statistic](p, q)


# ---------------------------------------------------------------------------------------------
# Audits


@dataclass(frozen=True)
class Event:
    """An event on a mechanism's (scalar) output, and which input is expected to make it likelier.

    Attributes:
        label: Human-readable description, e.g. ``"out <= c"``.
        indicator: Maps an array of outputs to a boolean array.
        numerator: The input (``"D"`` or ``"D'"``) whose probability goes in the numerator.
    """

    label: str
    indicator: Indicator
    numerator: Side


@dataclass(frozen=True)
class EventBound:
    """One event's counts, confidence bounds and loss statistic."""

    label: str
    numerator: Side
    k_num: int
    n_num: int
    k_den: int
    n_den: int
    p_lower: float
    p_upper: float
    value: float


@dataclass(frozen=True)
class AuditResult:
    """The outcome of :func:`audit`: the maximum statistic over events, with its parts."""

    statistic: Statistic
    alpha: float
    events: list[EventBound] = field(default_factory=list)

    @property
    def value(self) -> float:
        """The largest event statistic (the empirical lower bound on the loss)."""
        return max((e.value for e in self.events), default=0.0)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "statistic": self.statistic,
            "value": self.value,
            "family_wise_false_alarm": self.alpha,
            "events": [
                {
                    "event": e.label,
                    "numerator": e.numerator,
                    "count_numerator": e.k_num,
                    "count_denominator": e.k_den,
                    "n": [e.n_num, e.n_den],
                    "p_lower": e.p_lower,
                    "p_upper": e.p_upper,
                    "value": e.value,
                }
                for e in self.events
            ],
        }


def audit(
    out_d: IntArray, out_d2: IntArray, events: Sequence[Event], *, statistic: Statistic, alpha: float
) -> AuditResult:
    """Lower-bound the privacy loss from independent outputs on D (``out_d``) and D' (``out_d2``).

    Each entry of the arrays must be an independent run of the mechanism on the scalar input. The
    family-wise false-alarm rate ``alpha`` is split evenly over events and, inside each event,
    over its two one-sided bounds: P(result.value > true loss) <= alpha.
    """
    if not events:
        raise ValueError("audit needs at least one event")
    per_event = alpha / len(events)
    bounds = []
    for event in events:
        hits = {"D": event.indicator(out_d), "D'": event.indicator(out_d2)}
        den: Side = "D'" if event.numerator == "D" else "D"
        k_num, n_num = int(hits[event.numerator].sum()), len(hits[event.numerator])
        k_den, n_den = int(hits[den].sum()), len(hits[den])
        p = cp_lower(k_num, n_num, per_event / 2)
        q = cp_upper(k_den, n_den, per_event / 2)
        value = _STATISTICS[statistic](p, q)
        bounds.append(EventBound(event.label, event.numerator, k_num, n_num, k_den, n_den, p, q, value))
    return AuditResult(statistic, alpha, bounds)


# ---------------------------------------------------------------------------------------------
# Power


def _log_binom_tail(n: int, p: float, k: float, *, upper: bool) -> float:
    """Chernoff: ln P(Bin(n, p) >= k) (upper) or ln P(Bin(n, p) <= k), bounded by -n KL(k/n || p)."""
    x = min(max(k / n, 0.0), 1.0)
    if (upper and x <= p) or (not upper and x >= p):
        return 0.0
    kl = float(xlogy(x, x / p) + xlogy(1 - x, (1 - x) / (1 - p)))
    return -n * kl


def power_failure_log10(
    statistic: Statistic,
    p_num: float,
    p_den: float,
    n: int,
    alpha: float,
    threshold: float,
) -> float:
    """log10 of an upper bound on P(event statistic <= threshold) for true probabilities p_num, p_den.

    Uses monotonicity: if k_num >= a and k_den <= b with statistic(a, b) > threshold, the audit
    flags the event; so P(miss) <= P(K_num <= a - 1) + P(K_den >= b + 1), each tail bounded by
    Chernoff (rigorous, no normal approximation). ``a`` and ``b`` sit ``z`` standard deviations
    inside the means, with ``z`` found by bisection. ``alpha`` is the per-event false-alarm rate
    the audit uses. Returns 0 (a trivial bound) if even the expected counts do not flag.
    """
    sd_num = math.sqrt(n * p_num * (1 - p_num))
    sd_den = math.sqrt(n * p_den * (1 - p_den))

    def counts(z: float) -> tuple[int, int]:
        a = math.floor(n * p_num - z * sd_num)
        b = math.ceil(n * p_den + z * sd_den)
        return min(max(a, 0), n), min(max(b, 0), n)

    def flags(z: float) -> bool:
        a, b = counts(z)
        return loss_lower_bound(statistic, a, n, b, n, alpha) > threshold

    if not flags(0.0):
        return 0.0
    lo, hi = 0.0, 1.0
    while flags(hi) and hi < 1e4:
        lo, hi = hi, 2 * hi
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if flags(mid) else (lo, mid)
    a, b = counts(lo)
    log_miss = logsumexp([_log_binom_tail(n, p_num, a - 1, upper=False), _log_binom_tail(n, p_den, b + 1, upper=True)])
    return min(0.0, float(log_miss) / math.log(10))


# ---------------------------------------------------------------------------------------------
# Exact noise distributions


@dataclass(frozen=True)
class Pmf:
    """A pmf on the integers, tabulated on ``support`` (the mass outside is below 1e-30)."""

    support: IntArray
    prob: FloatArray

    def __call__(self, z: IntArray) -> FloatArray:
        """Probabilities at the integers ``z`` (0 outside the tabulated support)."""
        idx = np.asarray(z, dtype=np.int64) - int(self.support[0])
        inside = (idx >= 0) & (idx < len(self.support))
        out = np.zeros(np.shape(z), dtype=np.float64)
        out[inside] = self.prob[idx[inside]]
        return out

    def event_probability(self, indicator: Indicator, value: int) -> float:
        """P(indicator(value + Z)) for Z with this pmf."""
        return float(self.prob[indicator(value + self.support)].sum())


def discrete_laplace_pmf(scale: float) -> Pmf:
    """P(z) = (1 - q) / (1 + q) q^|z| with q = exp(-1 / scale)."""
    radius = math.ceil(70 * scale) + 1  # excluded mass 2 q^(r+1) / (1 + q) < e^-70
    z = np.arange(-radius, radius + 1, dtype=np.int64)
    log_q = -1 / scale
    log_norm = math.log(-math.expm1(log_q)) - math.log1p(math.exp(log_q))
    return Pmf(z, np.exp(log_norm + log_q * np.abs(z)))


def discrete_gaussian_pmf(sigma: float) -> Pmf:
    """P(z) ∝ exp(-z² / (2 sigma²)), normalised over the integers."""
    radius = math.ceil(13 * sigma) + 2  # excluded mass < e^-84
    z = np.arange(-radius, radius + 1, dtype=np.int64)
    weights = np.exp(-(z.astype(np.float64) ** 2) / (2 * sigma * sigma))
    return Pmf(z, weights / math.fsum(weights))


# ---------------------------------------------------------------------------------------------
# Chi-square goodness of fit


@dataclass(frozen=True)
class Bins:
    """Singleton bins ``lo..hi`` plus two pooled tails ``z < lo`` and ``z > hi``."""

    lo: int
    hi: int

    @property
    def count(self) -> int:
        """Number of bins (singletons and the two tails)."""
        return self.hi - self.lo + 3

    def probabilities(self, pmf: Pmf) -> FloatArray:
        """Bin probabilities under ``pmf``: [P(Z < lo), P(lo), ..., P(hi), P(Z > hi)]."""
        s, p = pmf.support, pmf.prob
        middle = pmf(np.arange(self.lo, self.hi + 1, dtype=np.int64))
        return np.concatenate(([math.fsum(p[s < self.lo])], middle, [math.fsum(p[s > self.hi])]))

    def observed(self, samples: IntArray) -> IntArray:
        """Observed counts per bin."""
        clipped = np.clip(np.asarray(samples, dtype=np.int64), self.lo - 1, self.hi + 1) - (self.lo - 1)
        return np.bincount(clipped, minlength=self.count).astype(np.int64)


def chi_square_bins(pmf: Pmf, n: int, min_expected: float) -> Bins:
    """Bins under which every expected count (n times the bin probability) is >= ``min_expected``.

    Singletons where n P(z) >= min_expected; tails pooled and widened until they too reach it.
    Fixed from the hypothesised pmf before looking at data. Assumes a unimodal pmf.
    """
    big = pmf.support[n * pmf.prob >= min_expected]
    if len(big) == 0:
        raise ValueError("no bin reaches the minimum expected count")
    lo, hi = int(big.min()), int(big.max())
    while lo < hi and n * math.fsum(pmf.prob[pmf.support < lo]) < min_expected:
        lo += 1
    while hi > lo and n * math.fsum(pmf.prob[pmf.support > hi]) < min_expected:
        hi -= 1
    return Bins(lo, hi)


@dataclass(frozen=True)
class ChiSquareResult:
    """Pearson's statistic against a hypothesised pmf, with the level-``alpha`` threshold."""

    statistic: float
    df: int
    alpha: float
    threshold: float
    log10_p_value: float
    noncentrality: float

    @property
    def rejects(self) -> bool:
        """Whether the statistic exceeds the threshold."""
        return self.statistic > self.threshold

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "statistic": self.statistic,
            "df": self.df,
            "alpha": self.alpha,
            "threshold": self.threshold,
            "log10_p_value": self.log10_p_value,
            "noncentrality": self.noncentrality,
        }


def chi_square_test(
    samples: IntArray, hypothesis: Pmf, bins: Bins, alpha: float, *, truth: Pmf | None = None
) -> ChiSquareResult:
    """Pearson chi-square of ``samples`` against ``hypothesis`` on ``bins`` (df = bins - 1).

    Under the hypothesis the statistic exceeds ``threshold = chi2.isf(alpha, df)`` with probability
    about ``alpha`` (asymptotic; keep expected counts large). ``truth`` (the sampler's actual pmf)
    only feeds the reported noncentrality n sum (p_truth - p_hyp)² / p_hyp, for power estimates.
    """
    n = len(samples)
    expected = n * bins.probabilities(hypothesis)
    observed = bins.observed(samples)
    with np.errstate(divide="ignore"):
        stat = float(np.sum((observed - expected) ** 2 / expected))
    df = bins.count - 1
    lam = 0.0
    if truth is not None:
        p_hyp = bins.probabilities(hypothesis)
        lam = float(n * np.sum((bins.probabilities(truth) - p_hyp) ** 2 / p_hyp))
    return ChiSquareResult(
        statistic=stat,
        df=df,
        alpha=alpha,
        threshold=float(stats.chi2.isf(alpha, df)),
        log10_p_value=float(stats.chi2.logsf(stat, df)) / math.log(10),
        noncentrality=lam,
    )


def chi_square_miss_log10(result: ChiSquareResult) -> float:
    """Estimated log10 P(statistic <= threshold) under the truth, i.e. of a missed rejection.

    Noncentral chi-square approximation; where its cdf underflows, a normal approximation with the
    same mean (df + lambda) and variance (2 df + 4 lambda), evaluated in log space. An estimate.
    """
    df, lam = result.df, result.noncentrality
    with np.errstate(divide="ignore"):
        log_cdf = float(stats.ncx2.logcdf(result.threshold, df, lam))
    if not math.isfinite(log_cdf):
        z = (result.threshold - (df + lam)) / math.sqrt(2 * df + 4 * lam)
        log_cdf = float(stats.norm.logcdf(z))
    return log_cdf / math.log(10)


# ---------------------------------------------------------------------------------------------
# Broken variants and recording


class ScaledNoise:
    """A deliberately broken :class:`~dp.mechanisms.random.NoiseSource`: every scale multiplied by ``factor``.

    With ``factor < 1`` the mechanism draws less noise than its booked loss pays for; audits use
    it to show that they would notice.
    """

    def __init__(self, inner: NoiseSource, factor: float) -> None:
        self.inner = inner
        self.factor = factor

    def discrete_laplace(self, values: IntArray, scale: float) -> IntArray:
        return self.inner.discrete_laplace(values, scale * self.factor)

    def discrete_gaussian(self, values: IntArray, sigma: float) -> IntArray:
        return self.inner.discrete_gaussian(values, sigma * self.factor)


def recording_enabled() -> bool:
    """Whether ``DPRELEASE_AUDIT_RECORD=1`` asks for measured values to be written to disk."""
    return os.environ.get(RECORD_ENV) == "1"


def record_results(path: Path, results: Mapping[str, Any]) -> bool:
    """Write ``results`` as JSON to ``path`` (atomically) iff recording is enabled; return whether written."""
    if not recording_enabled():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=2, sort_keys=True, default=float) + "\n", encoding="utf-8")
    tmp.replace(path)
    return True
