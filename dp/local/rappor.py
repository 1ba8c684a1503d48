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
t = (c − p* n_cohort) / (q* − p*), with exact variance (n_cohort p*(1 − p*) + N1 (q* − p*)(1 − p* − q*)) /
(q* − p*)² for N1 filters setting it. With the candidate values' Bloom bits as a design matrix X, t ≈ X β
(β: counts per candidate). Decoding: least squares on every candidate at once (unbiased, exact sandwich
standard errors), a one-sided z-test per candidate, and a correction over all candidates: Holm's step-down
(family-wise error: P[any false detection] <= α), Bonferroni (per-family error: E[false detections]
<= α) or a two-stage per-family rule (the same bound; the candidates detected beyond doubt leave the
correction of the others); Lasso selection, on a split sample, only when the candidates are too many
for the Bloom bits to identify. Every probability is a rational; draws are exact.
"""

from __future__ import annotations

import functools
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


MAX_HASHES = 8
"""Hash functions per value: :func:`_positions` cuts one SHA-256 digest into 8 positions of 32 bits."""
MAX_BITS = 4096
"""Bloom filter bits (Google's deployments used 128 to 256)."""
MAX_COHORTS = 4096
"""Cohorts."""
MAX_DENOMINATOR = 1 << 32
"""f, p and q: the largest denominator (the secure source draws below 2^62; 2f's draw is below twice f's)."""


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
        if self.h > MAX_HASHES:
            raise ParameterError(f"RAPPOR: h ({self.h}) must be at most {MAX_HASHES} (one SHA-256 digest gives "
                                 f"{MAX_HASHES} positions of 32 bits)")
        for name, most in (("k", MAX_BITS), ("m", MAX_COHORTS)):
            if getattr(self, name) > most:
                raise ParameterError(f"RAPPOR: {name} ({getattr(self, name)}) must be at most {most}")
        for name in ("f", "p", "q"):
            value = Fraction(getattr(self, name))
            object.__setattr__(self, name, value)
            if not 0 <= value <= 1:
                raise ParameterError(f"RAPPOR: {name} must be a probability")
            if value.denominator > MAX_DENOMINATOR:  # the encoders draw a uniform integer below it (or twice it)
                raise ParameterError(f"RAPPOR: {name} must be a fraction with a denominator of at most 2^32 (as 9/16 "
                                     "or 0.1), which the client encoders draw exactly")
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


@functools.lru_cache(maxsize=1 << 16)
def _positions(value: str, cohort: int, k: int, h: int) -> tuple[int, ...]:
    digest = hashlib.sha256(f"{cohort}\x00{value}".encode()).digest()
    return tuple(int.from_bytes(digest[4 * i:4 * i + 4], "big") % k for i in range(h))


def bloom(value: str, cohort: int, params: RapporParams) -> IntArray:
    """The h Bloom-filter positions of ``value`` in ``cohort`` (public hashing: SHA-256 of cohort and value)."""
    return np.asarray(_positions(value, cohort, params.k, params.h), dtype=np.int64)


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
        counts: Least-squares count estimate per candidate (0 for a candidate the split-sample Lasso left out).
        std: Standard error of each count (NaN where the count is not estimated).
        p_values: One-sided p-value per candidate (1 where the count is not estimated).
        explained: The share of reports that the detected candidates' estimated counts account for.
        reports: n.
        method: How the counts were fitted and tested ("all candidates" or "split by cohort"), in words.
    """

    candidates: tuple[str, ...]
    detected: tuple[bool, ...]
    counts: FloatArray
    std: FloatArray
    p_values: FloatArray
    explained: float
    reports: int
    method: str = ""


def design_matrix(candidates: Sequence[str], params: RapporParams, cohort_shares: npt.ArrayLike) -> FloatArray:
    """X[(cohort, bit), candidate] = the cohort's share of reports when the candidate's Bloom filter there has the bit.

    A candidate held by β clients (cohorts assigned at random) has about β · share_m of them in cohort m,
    each setting the candidate's bits there: t ≈ X β with β the candidates' counts.
    """
    shares = np.asarray(cohort_shares, dtype=np.float64)
    rows, columns = _set_bits(tuple(candidates), params.k, params.h, params.m)
    x = np.zeros((params.m * params.k, len(candidates)), dtype=np.float64)
    x[rows, columns] = shares[rows // params.k]
    return x


@functools.lru_cache(maxsize=64)
def _set_bits(candidates: tuple[str, ...], k: int, h: int, m: int) -> tuple[IntArray, IntArray]:
    """Where :func:`design_matrix` has a non-zero: (cohort · k + Bloom position, candidate index) pairs.

    Public hashing only, the same for every decode of one candidate list and one set of parameters.
    """
    rows: list[int] = []
    columns: list[int] = []
    for j, value in enumerate(candidates):
        for cohort in range(m):
            for position in _positions(value, cohort, k, h):
                rows.append(cohort * k + position)
                columns.append(j)
    out = np.asarray(rows, dtype=np.int64), np.asarray(columns, dtype=np.int64)
    out[0].flags.writeable = out[1].flags.writeable = False
    return out


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


ERRORS = ("family-wise", "per-family", "per-family two-stage")
"""The error rates :func:`decode` can control: P[any false detection] (Holm) or E[false detections]
(Bonferroni, or the two-stage rule of :func:`two_stage`, which bounds the same expectation with more power)."""

FIRST_STAGE = 0.05
"""Share of the per-family budget that :func:`two_stage` spends on its first stage."""


def bonferroni(p_values: npt.ArrayLike, alpha: float) -> npt.NDArray[np.bool_]:
    """Rejections with p < alpha/m: E[false rejections] = Σ over true nulls of P[p < alpha/m] <= alpha.

    The per-family error rate (the expected number of false rejections) is bounded by linearity of
    expectation alone, whatever the dependence between the p-values; it is at most alpha·m0/m when m0 of
    the m hypotheses are true.
    """
    values = np.asarray(p_values, dtype=np.float64)
    return np.asarray(values < alpha / max(values.size, 1), dtype=np.bool_)


def two_stage(p_values: npt.ArrayLike, alpha: float, first: float = FIRST_STAGE) -> npt.NDArray[np.bool_]:
    """Per-family error E[false rejections] <= alpha, testing the hypotheses not surely false at alpha/(m − |S|).

    Stage 1 rejects S = {p < γ} with γ = first·alpha/m² (the "sure" rejections); stage 2 rejects the others
    with p < (1 − first)·alpha/(m − |S|). With m0 true nulls: E[nulls in S] <= m0 γ; when S holds no true
    null, m − |S| >= m0 and stage 2 rejects each at most at (1 − first)·alpha/m0, in expectation at most
    (1 − first)·alpha in all; S holds a true null with probability at most m0 γ, and then stage 2 rejects
    at most m0 − 1 of them. So E[false rejections] <= (1 − first)·alpha + m0² γ <= alpha, for valid p-values
    under any dependence (docs/proofs/two_stage_per_family.md). Bonferroni at alpha/m when S is empty.
    """
    values = np.asarray(p_values, dtype=np.float64)
    if not 0 < first < 1:
        raise ParameterError("two_stage: first must be in (0, 1)")
    m = max(values.size, 1)
    sure = values < first * alpha / m**2
    rest = m - int(sure.sum())
    return np.asarray(sure | (values < (1 - first) * alpha / max(rest, 1)), dtype=np.bool_)


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


def bit_count_variance(ones: npt.ArrayLike, per_cohort: npt.ArrayLike, params: RapporParams) -> FloatArray:
    """Exact variance of the debiased count t = (c − p* n_m)/(q* − p*) of a bit set in ``ones`` of n_m filters.

    One report per client, PRR and IRR drawn afresh: c = Binomial(N1, q*) + Binomial(n_m − N1, p*), so
    Var t = (n_m p*(1 − p*) + N1 (q* − p*)(1 − p* − q*)) / (q* − p*)². The permanent randomisation f is
    inside p* and q*; the N1 term is the one the approximate variance n_m p*(1 − p*)/(q* − p*)² leaves out.
    ``ones`` is clipped to [0, n_m] (a plug-in estimate may leave it).
    """
    n_m = np.asarray(per_cohort, dtype=np.float64)
    n1 = np.clip(np.asarray(ones, dtype=np.float64), 0.0, n_m)
    p_star, q_star = float(params.p_star), float(params.q_star)
    gap = q_star - p_star
    return np.asarray((n_m * p_star * (1 - p_star) + n1 * gap * (1 - p_star - q_star)) / gap**2, dtype=np.float64)


def _identifiable(x: FloatArray) -> bool:
    """Whether X identifies every column: full column rank, with at most 80 % as many columns as rows.

    The 80 % is Google's threshold; rank is read off the column-normalised Gram matrix's smallest eigenvalue.
    """
    if x.shape[1] == 0 or x.shape[1] > 0.8 * x.shape[0]:
        return False
    norms = np.sqrt((x**2).sum(axis=0))
    if not (norms > 0).all():
        return False
    unit = x / norms
    return bool(np.linalg.eigvalsh(unit.T @ unit)[0] > 1e-8)


def _least_squares(x: FloatArray, y: FloatArray, n_rows: FloatArray, cohort_of_row: IntArray,
                   shares: FloatArray, params: RapporParams) -> tuple[FloatArray, FloatArray]:
    """Counts and their standard errors from t ≈ X β on the given rows (X of full column rank).

    Weights 1/n_m are fixed before looking at the counts (the variance of a bit no one sets is proportional
    to n_m), so β̂ = (XᵀWX)⁻¹XᵀW t is exactly unbiased; its covariance is the sandwich A (Σ + Γ) Aᵀ with
    A = (XᵀWX)⁻¹XᵀW. Σ is diagonal (clients and bits are independent), each entry the exact variance of
    :func:`bit_count_variance` at the fitted number of filters setting the bit. Γ is the cohort draw: the
    β_j holders of candidate j fall into cohorts at random, N_j,c of them in cohort c where X assumes
    β_j · share_c, so Cov(N_j,·) = β_j (diag(share) − share shareᵀ) (multinomial; given the cohorts' sizes
    the law is hypergeometric, with slightly less variance) reaches every bit j sets, at β_j = max(β̂_j, 0).
    """
    w = 1.0 / n_rows
    gram = (x * w[:, None]).T @ x
    a = np.linalg.solve(gram, (x * w[:, None]).T)
    beta = a @ y
    sigma = bit_count_variance(x @ beta, n_rows, params)
    cov = (a * sigma) @ a.T
    cohorts, position = np.unique(cohort_of_row, return_inverse=True)
    share = shares[cohorts]
    for j in np.nonzero(beta > 0)[0]:
        rows = np.nonzero(x[:, j] > 0)[0]
        g = np.zeros((cohorts.size, a.shape[0]))
        np.add.at(g, position[rows], a[:, rows].T)  # (A X̃_j)ᵀ: row c sums A's columns at j's bits in cohort c
        g = g.T
        gs = g @ share
        cov += beta[j] * ((g * share) @ g.T - np.outer(gs, gs))
    se = np.sqrt(np.diag(cov))
    return np.asarray(beta, dtype=np.float64), np.asarray(se, dtype=np.float64)


def decode(counts: npt.ArrayLike, per_cohort: npt.ArrayLike, candidates: Sequence[str], params: RapporParams,
           *, alpha: float = 0.05, error: str = "family-wise") -> Decoded:
    """Decode per-cohort bit counts against ``candidates``: least squares, one-sided tests, a correction.

    Every (cohort, bit) with reports gives t = (c − p* n_m)/(q* − p*), unbiased for the number of Bloom
    filters there that set the bit; t ≈ X β with β the candidates' counts (:func:`design_matrix`).

    All candidates (X of full column rank and at most 80 % as many candidates as rows, Google's
    threshold): β is fitted by least squares on all candidates at once, unbiased for every candidate as
    long as every value people hold is a candidate, with the exact sandwich standard error. Each candidate
    gets the one-sided z-test of β_j = 0 against β_j > 0, and the correction runs over all candidates:
    ``error="family-wise"`` (Holm): P[any candidate no one holds is detected] <= ``alpha``;
    ``error="per-family"`` (Bonferroni, p < alpha / candidates): E[number of candidates no one holds that
    are detected] <= ``alpha`` (alpha times the share of candidates no one holds, in fact);
    ``error="per-family two-stage"`` (:func:`two_stage`, the flow's default at 0.1): the same bound on the
    expected number, with candidates detected beyond doubt (p < alpha/(20 m²)) taken out of the correction
    for the others, which are then tested at 0.95·alpha/(m − |sure|) (about 0.95·alpha/25 instead of
    alpha/51 on the example: more true values found, ``benchmarks/rappor_decoding.py``). No Lasso:
    selecting candidates and then testing them on the same counts makes the test anti-conservative, and
    leaving a held value out of the fit moves its counts onto the candidates sharing its bits. Nor does
    fitting fewer columns buy precision here: with the example's 51 candidates on 2048 rows the columns are
    nearly orthogonal (the standard errors of the 26 states shrink by about 1 % if the 25 decoys are
    dropped), so a selected fit on half the cohorts loses far more (√2 on every standard error) than it gains
    (``benchmarks/rappor_decoding.py``).

    Too many candidates (X not identifiable): a non-negative Lasso on the even cohorts selects candidates,
    least squares on the odd cohorts (independent reports) fits and tests the selected ones, and the
    correction still runs over every candidate (the others get p = 1 and count 0). The test is then valid
    given the selection if the selection holds every held value; counts are unbiased only under that
    condition.
    """
    if not 0 < alpha < 1:
        raise ParameterError("RAPPOR decode: alpha must be in (0, 1)")
    if error not in ERRORS:
        raise ParameterError(f"RAPPOR decode: error must be one of {', '.join(ERRORS)}")
    correction = {"family-wise": f"Holm's correction over all {len(candidates)} candidates at family-wise "
                                 f"level {alpha:g}",
                  "per-family": f"Bonferroni's correction over all {len(candidates)} candidates (expected "
                                f"false detections at most {alpha:g})",
                  "per-family two-stage": f"the two-stage per-family correction over all {len(candidates)} "
                                          f"candidates (expected false detections at most {alpha:g})"}[error]
    c = np.asarray(counts, dtype=np.float64).reshape(params.m, params.k)
    n_m = np.asarray(per_cohort, dtype=np.float64).reshape(params.m)
    n = int(n_m.sum())
    gap = float(params.q_star - params.p_star)
    y = ((c - float(params.p_star) * n_m[:, None]) / gap).reshape(-1)
    n_rows = np.repeat(n_m, params.k)
    shares = n_m / max(n, 1)
    x = design_matrix(candidates, params, shares)
    cohort_of_row = np.repeat(np.arange(params.m), params.k)
    active = n_rows > 0
    size = len(candidates)
    estimates = np.zeros(size)
    std = np.full(size, np.nan)
    p_values = np.ones(size)
    if _identifiable(x[active]):
        method = ("least squares on all candidates (weights 1/n_m), exact sandwich standard errors, one-sided "
                  f"z-tests with {correction}")
        fitted = np.arange(size)
        beta, se = _least_squares(x[active], y[active], n_rows[active], cohort_of_row[active], shares, params)
    else:
        method = ("non-negative Lasso on the even cohorts, least squares on the selected candidates in the odd "
                  f"cohorts, one-sided z-tests with {correction}")
        select = active & (cohort_of_row % 2 == 0)
        test = active & (cohort_of_row % 2 == 1)
        root_w = 1.0 / np.sqrt(np.maximum(bit_count_variance(0.0, n_rows[select], params), 1e-9))
        xw, yw = x[select] * root_w[:, None], y[select] * root_w
        # Universal penalty: a candidate enters only when its correlation beats noise across all candidates.
        penalty = float(np.sqrt(2.0 * np.log(max(size, 2))) * np.sqrt((xw**2).sum(axis=0)).max(initial=0.0))
        fitted = np.nonzero(nonnegative_lasso(xw, yw, penalty) > 0)[0] if size else np.zeros(0, dtype=np.int64)
        xs = x[test][:, fitted]
        if _identifiable(xs):
            beta, se = _least_squares(xs, y[test], n_rows[test], cohort_of_row[test], shares, params)
        else:
            fitted = np.zeros(0, dtype=np.int64)
            beta = se = np.zeros(0)
    if fitted.size:
        estimates[fitted], std[fitted] = beta, se
        p_values[fitted] = stats.norm.sf(beta / se)
    rule = {"family-wise": holm, "per-family": bonferroni, "per-family two-stage": two_stage}[error]
    detected = rule(p_values, alpha)
    explained = float(estimates[detected].sum() / n) if n else 0.0
    return Decoded(tuple(candidates), tuple(bool(d) for d in detected), estimates, std, p_values, explained, n,
                   method)
