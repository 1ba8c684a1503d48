"""Exact random choices from the operating system's secure source, vectorised.

:class:`SecureBits` draws uniform integers below ``n`` by rejection from ``secrets.token_bytes`` (no
modulo bias) and Bernoulli(a/b) for a rational a/b exactly (a uniform integer below b is below a). A
seeded :class:`numpy.random.Generator` can stand in for tests and simulations (:class:`SeededBits`);
releases and devices use the secure one.
"""

from __future__ import annotations

import secrets
from fractions import Fraction
from typing import Protocol

import numpy as np
import numpy.typing as npt

from dprelease.dp.errors import ParameterError

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class Bits(Protocol):
    """A source of exact uniform integers."""

    def below(self, n: int, size: int) -> IntArray:
        """``size`` independent integers uniform on ``[0, n)``."""
        ...


class SecureBits:
    """Uniform integers from ``secrets`` (the OS's cryptographically secure generator), by rejection."""

    def below(self, n: int, size: int) -> IntArray:
        """``size`` independent integers uniform on ``[0, n)``, ``1 <= n <= 2**62``."""
        if not 1 <= n <= 2**62:
            raise ParameterError("n must be in [1, 2**62]")
        if size == 0 or n == 1:
            return np.zeros(size, dtype=np.int64)
        width = (n - 1).bit_length()
        mask = np.uint64((1 << width) - 1)
        out = np.empty(0, dtype=np.int64)
        while out.size < size:
            need = max(16, int((size - out.size) * 1.3) + 8)  # acceptance >= 1/2: few rounds
            raw = np.frombuffer(secrets.token_bytes(8 * need), dtype=np.uint64) & mask
            out = np.concatenate([out, raw[raw < np.uint64(n)].astype(np.int64)])
        return out[:size]


class SeededBits:
    """A seeded generator with the same interface: for tests and simulations only, never for people's data."""

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)  # evaluation only: tests and simulations, never real reports

    def below(self, n: int, size: int) -> IntArray:
        """``size`` independent integers uniform on ``[0, n)``."""
        return np.asarray(self._rng.integers(0, n, size=size), dtype=np.int64)


def bernoulli(p: Fraction, size: int, bits: Bits) -> BoolArray:
    """``size`` independent Bernoulli(p) draws for a rational ``p`` in [0, 1], exactly."""
    if not 0 <= p <= 1:
        raise ParameterError("p must be in [0, 1]")
    if p == 0 or p == 1:
        return np.full(size, bool(p == 1))
    return np.asarray(bits.below(p.denominator, size) < p.numerator, dtype=bool)


def at_most(x: float, denominator: int = 1 << 32) -> Fraction:
    """The largest a/denominator <= x (a probability rounded down)."""
    return Fraction(int(np.floor(x * denominator)), denominator)


def at_least(x: float, denominator: int = 1 << 32) -> Fraction:
    """The smallest a/denominator >= x (a probability rounded up)."""
    return Fraction(int(np.ceil(x * denominator)), denominator)
