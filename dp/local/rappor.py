"""RAPPOR (Erlingsson, Pihur, Korolova 2014): the client's encoder and the server's regression decoder.

Client: the value is hashed into a Bloom filter of k bits by h hash functions that depend on the client's
cohort (one of m); a *permanent* randomized response (PRR) sets each bit to 1 with probability f/2, to 0
with probability f/2 and keeps it otherwise, memoised per (client secret, value) so that repeated reports
of the same value never average the PRR away; every report then applies an *instantaneous* randomized
response (IRR): a PRR bit 1 is reported 1 with probability q, a 0 with probability p.

Guarantees (per person, for one value): longitudinal ε∞ = 2h ln((1 − f/2)/(f/2)) however many reports;
one report ε₁ = h ln(q*(1 − p*) / (p*(1 − q*))) with q* = f(p + q)/2 + (1 − f) q = P[reported 1 | Bloom 1]
and p* = f(p + q)/2 + (1 − f) p = P[reported 1 | Bloom 0].

Server: per cohort and bit, the unbiased estimate of how many clients' Bloom filters have that bit set is
t = (c − p* n_cohort) / (q* − p*). With the candidate values' Bloom bits as a design matrix X, t ≈ X β
(β: counts per candidate). Decoding: non-negative Lasso to select candidates, least squares weighted by
the exact binomial variances on the selected ones, and a one-sided z-test per candidate corrected for
multiple testing (Holm's step-down, family-wise error α). Every probability is a rational; draws are exact.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import numpy.typing as npt
from scipy import stats

from dprelease.dp.errors import ParameterError
from dprelease.dp.local.bits import Bits, IntArray, bernoulli

FloatArray = npt.NDArray[np.float64]
UINT8 = npt.NDArray[np.uint8]


@dataclass(frozen=True)
class RapporParams:
    """Public parameters of a RAPPOR collection.

    Attributes:
        k: Bloom filter bits.
        h: Hash functions.
        m: Cohorts.
        f: PRR probability (a bit is randomised permanently with probability f).
        p: IRR: P[report 1 | PRR bit 0].
        q: IRR: P[report 1 | PRR bit 1].
    """

    k: int = 32
    h: int = 2
    m: int = 64
    f: Fraction = Fraction(1, 2)
    p: Fraction = Fraction(1, 2)
    q: Fraction = Fraction(3, 4)
    q_star: Fraction = field(init=False)
    p_star: Fraction = field(init=False)

    def __post_init__(self) -> None:
        for name in ("k", "h", "m"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ParameterError(f"RAPPOR: {name} ({value!r}) must be a positive integer")
        if self.h > self.k:
            raise ParameterError("RAPPOR: h must not exceed k")
        for name in ("f", "p", "q"):
            value = Fraction(getattr(self, name))
            object.__setattr__(self, name, value)
            if not 0 <= value <= 1:
                raise ParameterError(f"RAPPOR: {name} must be a probability")
        if not 0 < self.f < 1 or self.p >= self.q:
            raise ParameterError("RAPPOR: need 0 < f < 1 and p < q")
        half = self.f * (self.p + self.q) / 2
        object.__setattr__(self, "q_star", half + (1 - self.f) * self.q)
        object.__setattr__(self, "p_star", half + (1 - self.f) * self.p)

    @property
    def epsilon_one(self) -> float:
        """One report's epsilon: h ln(q*(1 − p*) / (p*(1 − q*))), rounded up."""
        ratio = self.q_star * (1 - self.p_star) / (self.p_star * (1 - self.q_star))
        return math.nextafter(self.h * math.log(ratio), math.inf)

    @property
    def epsilon_infinity(self) -> float:
        """The longitudinal epsilon of the memoised PRR: 2h ln((1 − f/2) / (f/2)), rounded up."""
        return math.nextafter(2 * self.h * math.log((1 - self.f / 2) / (self.f / 2)), math.inf)


def bloom(value: str, cohort: int, params: RapporParams) -> IntArray:
    """The h Bloom-filter positions of ``value`` in ``cohort`` (public hashing: SHA-256 of cohort and value)."""
    digest = hashlib.sha256(f"{cohort}\x00{value}".encode()).digest()
    return np.asarray([int.from_bytes(digest[4 * i:4 * i + 4], "big") % params.k for i in range(params.h)],
                      dtype=np.int64)


def bloom_bits(value: str, cohort: int, params: RapporParams) -> UINT8:
    """The Bloom filter of ``value`` in ``cohort`` as k bits."""
    out = np.zeros(params.k, dtype=np.uint8)
    out[bloom(value, cohort, params)] = 1
    return out


class _KeyedStream:
    """Uniform integers from HMAC-SHA256(secret, value ‖ counter): the memoised PRR's deterministic randomness."""

    def __init__(self, secret: bytes, value: str) -> None:
        self._key, self._value, self._counter, self._pool = secret, value.encode(), 0, b""

    def below(self, n: int) -> int:
        width = max(1, (n - 1).bit_length())
        while True:
            while len(self._pool) < 8:
                block = hmac.new(self._key, self._value + b"\x00" + self._counter.to_bytes(8, "big"), hashlib.sha256)
                self._pool += block.digest()
                self._counter += 1
            draw = int.from_bytes(self._pool[:8], "big") & ((1 << width) - 1)
            self._pool = self._pool[8:]
            if draw < n:
                return draw


def permanent_response(value: str, cohort: int, secret: bytes, params: RapporParams) -> UINT8:
    """The memoised PRR of ``value`` for the client holding ``secret`` (the same bits every time)."""
    stream = _KeyedStream(secret, value)
    truth = bloom_bits(value, cohort, params)
    a, d = params.f.numerator, params.f.denominator
    out = truth.copy()
    for j in range(params.k):
        u = stream.below(2 * d)  # u < a: 1 (prob f/2); a <= u < 2a: 0 (prob f/2); else the true bit
        if u < a:
            out[j] = 1
        elif u < 2 * a:
            out[j] = 0
    return out


def instantaneous_response(prr: npt.ArrayLike, params: RapporParams, bits: Bits) -> UINT8:
    """One report: each PRR bit 1 reported 1 with probability q, each 0 with probability p (secure draws)."""
    prr_bits = np.asarray(prr, dtype=np.uint8)
    ones = bernoulli(params.q, prr_bits.size, bits).reshape(prr_bits.shape)
    zeros = bernoulli(params.p, prr_bits.size, bits).reshape(prr_bits.shape)
    return np.where(prr_bits == 1, ones, zeros).astype(np.uint8)


@dataclass
class RapporClient:
    """A device: its secret (from the secure source), its cohort, its memoised PRRs; reports on demand."""

    params: RapporParams
    secret: bytes
    cohort: int
    _memo: dict[str, UINT8] = field(default_factory=dict)

    def report(self, value: str, bits: Bits) -> UINT8:
        """One report of ``value``: the memoised PRR through a fresh IRR."""
        if value not in self._memo:
            self._memo[value] = permanent_response(value, self.cohort, self.secret, self.params)
        return instantaneous_response(self._memo[value], self.params, bits)


def encode_once(values: Sequence[str], cohorts: npt.ArrayLike, params: RapporParams, bits: Bits) -> UINT8:
    """One report per client, vectorised (simulation and first reports: a fresh PRR then an IRR, exact draws)."""
    cohort = np.asarray(cohorts, dtype=np.int64)
    truth = np.zeros((len(values), params.k), dtype=np.uint8)
    cache: dict[tuple[str, int], IntArray] = {}
    for i, (value, c) in enumerate(zip(values, cohort.tolist(), strict=True)):
        key = (value, c)
        if key not in cache:
            cache[key] = bloom(value, c, params)
        truth[i, cache[key]] = 1
    a, d = params.f.numerator, params.f.denominator
    u = bits.below(2 * d, truth.size).reshape(truth.shape)
    prr = np.where(u < a, 1, np.where(u < 2 * a, 0, truth)).astype(np.uint8)
    return instantaneous_response(prr, params, bits)


def cohort_counts(reports: npt.ArrayLike, cohorts: npt.ArrayLike, params: RapporParams) -> tuple[IntArray, IntArray]:
    """(bit counts per cohort, shape (m, k); reports per cohort, shape (m,)): all the decoder needs."""
    matrix = np.asarray(reports, dtype=np.int64).reshape(-1, params.k)
    cohort = np.asarray(cohorts, dtype=np.int64)
    counts = np.zeros((params.m, params.k), dtype=np.int64)
    np.add.at(counts, cohort, matrix)
    return counts, np.bincount(cohort, minlength=params.m).astype(np.int64)


@dataclass(frozen=True)
class Decoded:
    """RAPPOR decoding against a candidate list.

    Attributes:
        candidates: The candidate values, in the order given.
        detected: Per candidate, whether it passed the corrected test.
        counts: Least-squares count estimate per candidate (0 for those not selected by the Lasso).
        std: Standard error of each count (NaN for those not selected).
        p_values: One-sided p-value per candidate (1 for those not selected).
        explained: The share of reports that the detected candidates' estimated counts account for.
        reports: n.
    """

    candidates: tuple[str, ...]
    detected: tuple[bool, ...]
    counts: FloatArray
    std: FloatArray
    p_values: FloatArray
    explained: float
    reports: int


def design_matrix(candidates: Sequence[str], params: RapporParams, cohort_shares: npt.ArrayLike) -> FloatArray:
    """X[(cohort, bit), candidate] = the cohort's share of reports when the candidate's Bloom filter there has the bit.

    A candidate held by β clients (cohorts assigned at random) has about β · share_m of them in cohort m,
    each setting the candidate's bits there: t ≈ X β with β the candidates' counts.
    """
    shares = np.asarray(cohort_shares, dtype=np.float64)
    x = np.zeros((params.m * params.k, len(candidates)), dtype=np.float64)
    for j, value in enumerate(candidates):
        for cohort in range(params.m):
            x[cohort * params.k + bloom(value, cohort, params), j] = shares[cohort]
    return x


def nonnegative_lasso(x: FloatArray, y: FloatArray, penalty: float, iterations: int = 500) -> FloatArray:
    """argmin_{β >= 0} ½‖y − Xβ‖² + penalty·‖β‖₁ by coordinate descent."""
    beta = np.zeros(x.shape[1])
    squares = (x**2).sum(axis=0)
    residual = y.copy()
    for _ in range(iterations):
        largest = 0.0
        for j in range(x.shape[1]):
            if squares[j] == 0:
                continue
            old = beta[j]
            rho = x[:, j] @ residual + squares[j] * old
            new = max(0.0, (rho - penalty) / squares[j])
            if new != old:
                residual -= x[:, j] * (new - old)
                beta[j] = new
                largest = max(largest, abs(new - old))
        if largest < 1e-6 * max(1.0, float(np.abs(beta).max(initial=0.0))):
            break
    return beta


def holm(p_values: npt.ArrayLike, alpha: float) -> npt.NDArray[np.bool_]:
    """Holm's step-down test: rejections with family-wise error at most ``alpha`` (Bonferroni, but stepwise)."""
    values = np.asarray(p_values, dtype=np.float64)
    order = np.argsort(values, kind="stable")
    reject = np.zeros(values.size, dtype=bool)
    for rank, index in enumerate(order):
        if values[index] >= alpha / (values.size - rank):
            break
        reject[index] = True
    return reject


def decode(counts: npt.ArrayLike, per_cohort: npt.ArrayLike, candidates: Sequence[str], params: RapporParams,
           *, alpha: float = 0.05) -> Decoded:
    """Decode per-cohort bit counts against ``candidates``: Lasso, weighted least squares, Holm-corrected test.

    The family-wise error rate is at most ``alpha``: the expected number of false detections among the
    candidates no one holds is at most alpha times their share of the candidate list.
    """
    c = np.asarray(counts, dtype=np.float64).reshape(params.m, params.k)
    n_m = np.asarray(per_cohort, dtype=np.float64).reshape(params.m)
    n = int(n_m.sum())
    gap = float(params.q_star - params.p_star)
    y = ((c - float(params.p_star) * n_m[:, None]) / gap).reshape(-1)
    # Exact binomial variance of each estimated bit count, at its observed rate (floored away from 0).
    rate = np.clip(c / np.maximum(n_m[:, None], 1.0), 1e-6, 1 - 1e-6)
    variance = (n_m[:, None] * rate * (1 - rate) / gap**2).reshape(-1)
    weight = 1.0 / np.maximum(variance, 1e-9)
    x = design_matrix(candidates, params, n_m / max(n, 1))
    root_w = np.sqrt(weight)
    xw, yw = x * root_w[:, None], y * root_w
    # Universal penalty: a candidate enters only when its correlation beats noise across all candidates.
    penalty = float(np.sqrt(2.0 * np.log(max(len(candidates), 2))) * np.sqrt((xw**2).sum(axis=0)).max(initial=0.0))
    selected = np.nonzero(nonnegative_lasso(xw, yw, penalty) > 0)[0]
    estimates = np.zeros(len(candidates))
    std = np.full(len(candidates), np.nan)
    p_values = np.ones(len(candidates))
    if selected.size:
        xs = xw[:, selected]
        gram = xs.T @ xs
        beta, *_ = np.linalg.lstsq(xs, yw, rcond=None)
        covariance = np.linalg.pinv(gram)  # weights are inverse variances: unit residual scale
        se = np.sqrt(np.maximum(np.diag(covariance), 1e-12))
        estimates[selected], std[selected] = beta, se
        p_values[selected] = stats.norm.sf(beta / se)
    detected = holm(p_values, alpha)
    explained = float(estimates[detected].sum() / n) if n else 0.0
    return Decoded(tuple(candidates), tuple(bool(d) for d in detected), estimates, std, p_values, explained, n)
