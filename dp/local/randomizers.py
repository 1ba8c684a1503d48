"""Client-side local randomizers: each person's report is epsilon-LDP on its own.

Every randomizer keeps its probabilities as rationals with denominator 2³² (:data:`GRID`), rounded
towards more privacy, and states the epsilon those rounded probabilities give (:attr:`epsilon`, never
above the requested one). For a report y and any two inputs x, x': P[y | x] <= e^epsilon P[y | x'].

Support counts for the server: a report *supports* value v when it is evidence for v (GRR: the reported
value is v; unary encoding: bit v is set; OLH: the report's hash of v equals its reported bucket). With
p* = P[a report supports its own value] and q* = P[it supports another given value], the unbiased
count of v is (C_v − n q*) / (p* − q*) (Wang, Blocki, Li, Jha 2017, "Locally Differentially Private
Protocols for Frequency Estimation", USENIX Security): :mod:`dp.local.estimators`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dprelease.dp.errors import ParameterError
from dprelease.dp.local.bits import Bits, IntArray, at_least, at_most, bernoulli

GRID = 1 << 32
"""Denominator of every probability (probabilities are multiples of 2⁻³²)."""

UINT8 = npt.NDArray[np.uint8]


def _check(k: int, epsilon: float, owner: str) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 2:
        raise ParameterError(f"{owner}: k ({k!r}) must be an integer >= 2")
    if not (isinstance(epsilon, int | float) and math.isfinite(epsilon) and 0 < epsilon <= 20):
        raise ParameterError(f"{owner}: epsilon ({epsilon!r}) must be in (0, 20]")


def _log_ratio(numerator: Fraction, denominator: Fraction) -> float:
    """ln(numerator / denominator), rounded up to the next float (a stated epsilon never understates)."""
    return math.nextafter(math.log(numerator / denominator), math.inf)


def _signal(numerator: Fraction, denominator: Fraction, owner: str, epsilon: float) -> None:
    """Refuse probabilities that, rounded to the grid, leave a report independent of its value (stated epsilon <= 0)."""
    if numerator <= denominator:
        raise ParameterError(f"{owner}: epsilon ({epsilon!r}) is too small: rounded to multiples of 2^-32, its "
                             "probabilities make a report independent of the value (no signal to estimate)")


def _values(values: npt.ArrayLike, k: int, owner: str) -> IntArray:
    array = np.asarray(values, dtype=np.int64)
    if array.size and (array.min() < 0 or array.max() >= k):
        raise ParameterError(f"{owner}: values must be codes in [0, {k})")
    return array


@dataclass(frozen=True)
class GRR:
    """Generalized (k-ary) randomized response: keep the value with probability p, else report one of the others.

    p = e^ε / (e^ε + k − 1) rounded down; each other value has (1 − p)/(k − 1). Binary randomized
    response is GRR with k = 2. ε = ln(p (k − 1) / (1 − p)).
    """

    k: int
    requested: float
    p: Fraction = field(init=False)

    def __post_init__(self) -> None:
        _check(self.k, self.requested, "GRR")
        e = math.exp(self.requested)
        p = at_most(e / (e + self.k - 1), GRID)
        while _log_ratio(p * (self.k - 1), 1 - p) > self.requested:
            p -= Fraction(1, GRID)
        _signal(p * (self.k - 1), 1 - p, "GRR", self.requested)
        object.__setattr__(self, "p", p)

    @property
    def epsilon(self) -> float:
        """The epsilon the rounded probabilities give (<= the requested one)."""
        return _log_ratio(self.p * (self.k - 1), 1 - self.p)

    @property
    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        """(p*, q*): P[supports its own value], P[supports a given other value]."""
        return self.p, (1 - self.p) / (self.k - 1)

    def encode(self, values: npt.ArrayLike, bits: Bits) -> IntArray:
        """One report per value: a code in [0, k)."""
        x = _values(values, self.k, "GRR")
        keep = bernoulli(self.p, x.size, bits)
        other = bits.below(self.k - 1, x.size)
        other = other + (other >= x)  # uniform over the k − 1 values other than x
        return np.where(keep, x, other).astype(np.int64)

    def support(self, reports: npt.ArrayLike) -> IntArray:
        """C_v for every v: how many reports support v."""
        return np.bincount(np.asarray(reports, dtype=np.int64), minlength=self.k).astype(np.int64)


@dataclass(frozen=True)
class UnaryEncoding:
    """Unary encoding: a k-bit vector with the value's bit set, each bit flipped independently.

    A set bit is reported 1 with probability p, an unset bit with probability q, and
    ε = ln(p (1 − q) / ((1 − p) q)). ``SUE`` (symmetric, basic one-time RAPPOR): p = e^{ε/2}/(e^{ε/2} + 1),
    q = 1 − p. ``OUE`` (optimized): p = 1/2, q = 1/(e^ε + 1). p is rounded down and q up.
    """

    k: int
    requested: float
    variant: str = "OUE"
    p: Fraction = field(init=False)
    q: Fraction = field(init=False)

    def __post_init__(self) -> None:
        _check(self.k, self.requested, self.variant)
        if self.variant == "SUE":
            half = math.exp(self.requested / 2)
            p, q = at_most(half / (half + 1), GRID), at_least(1 / (half + 1), GRID)
        elif self.variant == "OUE":
            p, q = Fraction(1, 2), at_least(1 / (math.exp(self.requested) + 1), GRID)
        else:
            raise ParameterError(f"unary encoding: variant ({self.variant!r}) must be SUE or OUE")
        while _log_ratio(p * (1 - q), (1 - p) * q) > self.requested:
            q += Fraction(1, GRID)
        _signal(p * (1 - q), (1 - p) * q, self.variant, self.requested)
        object.__setattr__(self, "p", p)
        object.__setattr__(self, "q", q)

    @property
    def epsilon(self) -> float:
        """The epsilon the rounded probabilities give (<= the requested one)."""
        return _log_ratio(self.p * (1 - self.q), (1 - self.p) * self.q)

    @property
    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        """(p*, q*) = (p, q)."""
        return self.p, self.q

    def encode(self, values: npt.ArrayLike, bits: Bits) -> UINT8:
        """One k-bit report per value (rows), 0/1 as uint8."""
        x = _values(values, self.k, self.variant)
        ones = bernoulli(self.p, x.size, bits)  # the value's own bit
        noise = bernoulli(self.q, x.size * self.k, bits).reshape(x.size, self.k)
        noise[np.arange(x.size), x] = ones
        return noise.astype(np.uint8)

    def support(self, reports: npt.ArrayLike) -> IntArray:
        """C_v for every v: how many reports have bit v set."""
        matrix = np.asarray(reports, dtype=np.int64).reshape(-1, self.k)
        return np.asarray(matrix.sum(axis=0), dtype=np.int64)


def SUE(k: int, epsilon: float) -> UnaryEncoding:
    """Symmetric unary encoding (basic one-time RAPPOR)."""
    return UnaryEncoding(k, epsilon, "SUE")


def OUE(k: int, epsilon: float) -> UnaryEncoding:
    """Optimized unary encoding (Wang et al. 2017)."""
    return UnaryEncoding(k, epsilon, "OUE")


def olh_hash(seeds: IntArray, values: npt.ArrayLike, g: int) -> IntArray:
    """The public hash family of OLH: a multiply-add hash of v mod 2⁶⁴, then mod g, keyed by each report's seed.

    The seed's two halves give an odd multiplier and an offset; over random seeds two different values
    collide with probability 1/g up to about g/2⁶⁴ (far below anything measurable).
    """
    a, b = _olh_keys(seeds)
    return _olh_mix(a, b, np.asarray(values, dtype=np.int64).astype(np.uint64), g)


def _olh_keys(seeds: IntArray) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """Each seed's odd multiplier and offset (computed once when many values are hashed with the same seeds)."""
    keys = np.asarray(seeds, dtype=np.int64).astype(np.uint64)
    with np.errstate(over="ignore"):
        return (keys * np.uint64(0x9E3779B97F4A7C15)) | np.uint64(1), keys ^ np.uint64(0xD1B54A32D192ED03)


def _olh_mix(a: npt.NDArray[np.uint64], b: npt.NDArray[np.uint64], v: npt.NDArray[np.uint64] | np.uint64,
             g: int) -> IntArray:
    with np.errstate(over="ignore"):
        mixed = a * (v + np.uint64(1)) + b
        mixed ^= mixed >> np.uint64(29)
        mixed *= np.uint64(0xBF58476D1CE4E5B9)
        mixed ^= mixed >> np.uint64(32)
    return np.asarray(mixed % np.uint64(g), dtype=np.int64)


@dataclass(frozen=True)
class OLH:
    """Optimal local hashing: a per-report public hash into g = round(e^ε) + 1 buckets, then GRR over them.

    p* = p (the GRR keep probability over g buckets), q* = 1/g.
    """

    k: int
    requested: float
    g: int = field(init=False)
    inner: GRR = field(init=False)

    def __post_init__(self) -> None:
        _check(self.k, self.requested, "OLH")
        g = max(2, round(math.exp(self.requested)) + 1)
        object.__setattr__(self, "g", g)
        object.__setattr__(self, "inner", GRR(g, self.requested))

    @property
    def epsilon(self) -> float:
        """The epsilon of the inner GRR (the hash is public and data-independent)."""
        return self.inner.epsilon

    @property
    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        """(p*, q*) = (p, 1/g)."""
        return self.inner.p, Fraction(1, self.g)

    def encode(self, values: npt.ArrayLike, bits: Bits) -> tuple[IntArray, IntArray]:
        """One report per value: (seed, bucket)."""
        x = _values(values, self.k, "OLH")
        seeds = bits.below(1 << 62, x.size)  # public: drawn independently of the value
        return seeds, self.inner.encode(olh_hash(seeds, x, self.g), bits)

    def support(self, reports: tuple[IntArray, IntArray]) -> IntArray:
        """C_v for every v: reports whose seed hashes v to the reported bucket.

        Every report is hashed with every value (reports × values hashes: the limit on a collection is
        ``schemas.ldp.MAX_OLH_CELLS``). :func:`olh_hash`'s steps, run over :data:`OLH_BLOCK` reports at a time
        into buffers allocated once: numpy's temporaries of every step were a fresh allocation, and its page
        faults, per value (3.7× the time).
        """
        seeds, buckets = (np.asarray(r, dtype=np.int64) for r in reports)
        out = np.zeros(self.k, dtype=np.int64)
        g, multiplier = np.uint64(self.g), np.uint64(0xBF58476D1CE4E5B9)
        size = min(OLH_BLOCK, seeds.size)
        mixed, shifted, hit = np.empty(size, np.uint64), np.empty(size, np.uint64), np.empty(size, np.bool_)
        with np.errstate(over="ignore"):
            for start in range(0, seeds.size, OLH_BLOCK):
                a, b = _olh_keys(seeds[start:start + OLH_BLOCK])  # once for all k values
                bucket = buckets[start:start + OLH_BLOCK].astype(np.uint64)
                x, t, h = mixed[:a.size], shifted[:a.size], hit[:a.size]
                for v in range(self.k):  # _olh_mix(a, b, v, g) in place
                    np.multiply(a, np.uint64(v + 1), out=x)
                    np.add(x, b, out=x)
                    np.right_shift(x, np.uint64(29), out=t)
                    np.bitwise_xor(x, t, out=x)
                    np.multiply(x, multiplier, out=x)
                    np.right_shift(x, np.uint64(32), out=t)
                    np.bitwise_xor(x, t, out=x)
                    np.remainder(x, g, out=x)
                    np.equal(x, bucket, out=h)
                    out[v] += int(np.count_nonzero(h))
        return out


OLH_BLOCK = 1 << 16
"""Reports hashed at once by :meth:`OLH.support` (three buffers of this many elements, about 1.1 MB)."""


def variance_factor(name: str, k: int, epsilon: float) -> float:
    """Per-report variance factor of a count estimate (Wang et al. 2017), for choosing a protocol."""
    e = math.exp(epsilon)
    if name == "GRR":
        return (e + k - 2) / (e - 1) ** 2
    if name == "SUE":
        return math.exp(epsilon / 2) / (math.exp(epsilon / 2) - 1) ** 2
    if name in ("OUE", "OLH"):
        return 4 * e / (e - 1) ** 2
    raise ParameterError(f"unknown protocol {name!r}")


def choose(k: int, epsilon: float) -> str:
    """The protocol with the lowest variance for k values at epsilon: GRR when e^ε > 3k − 2... else OUE.

    (OLH has OUE's variance with reports of two integers instead of k bits: pick it when k is large.)
    """
    grr, oue = variance_factor("GRR", k, epsilon), variance_factor("OUE", k, epsilon)
    if grr <= oue:
        return "GRR"
    return "OLH" if k > 256 else "OUE"
