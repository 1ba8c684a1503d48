"""Test-only noise sources: a seeded one (fast, for structural tests) and a spy."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dprelease.dp.mechanisms.random import IntArray


class SeededNoise:
    """Discrete Laplace / Gaussian from a seeded numpy generator: for tests only, never releases."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def discrete_laplace(self, values: IntArray, scale: float) -> IntArray:
        p = 1 - np.exp(-1 / scale)
        n = len(values)
        return np.asarray(values, dtype=np.int64) + (self.rng.geometric(p, n) - self.rng.geometric(p, n))

    def discrete_gaussian(self, values: IntArray, sigma: float) -> IntArray:
        radius = int(np.ceil(12 * sigma)) + 2
        support = np.arange(-radius, radius + 1)
        weights = np.exp(-(support.astype(float) ** 2) / (2 * sigma * sigma))
        draws = self.rng.choice(support, size=len(values), p=weights / weights.sum())
        return np.asarray(values, dtype=np.int64) + draws


class SeededSelectionNoise(SeededNoise):
    """:class:`SeededNoise` that also draws selections from its seeded generator, for tests whose outcome
    must not depend on a secure draw (a unit test that pins one typical outcome of a selection; the
    selection's distribution itself is audited in ``tests/statistical``)."""

    def gumbel_argmax(self, scores: npt.ArrayLike, scale: float) -> int:
        values = np.asarray(scores, dtype=np.float64)
        return int(np.argmax(values + self.rng.gumbel(0.0, scale, len(values))))

    def exponential_argmax(self, scores: npt.ArrayLike, scale: float) -> int:
        values = np.asarray(scores, dtype=np.float64)
        return int(np.argmax(values + self.rng.exponential(scale, len(values))))


class SpyNoise:
    """Records every call (kind, length, scale) and returns the values unchanged (or via an inner source)."""

    def __init__(self, inner: object | None = None) -> None:
        self.calls: list[tuple[str, int, float]] = []
        self.inner = inner

    def discrete_laplace(self, values: IntArray, scale: float) -> IntArray:
        self.calls.append(("laplace", len(values), scale))
        return self.inner.discrete_laplace(values, scale) if self.inner else np.asarray(values, dtype=np.int64)

    def discrete_gaussian(self, values: IntArray, sigma: float) -> IntArray:
        self.calls.append(("gaussian", len(values), sigma))
        return self.inner.discrete_gaussian(values, sigma) if self.inner else np.asarray(values, dtype=np.int64)
