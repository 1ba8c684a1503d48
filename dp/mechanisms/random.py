"""Randomness: one secure noise source for releases, seeded generators for post-processing only.

Noise that touches sensitive values comes from OpenDP's exact samplers (discrete Laplace and
discrete Gaussian over 64-bit integers), which draw their bits from the operating system's
cryptographically secure generator. ``numpy.random`` and :mod:`random` never see sensitive values:
:func:`synthetic_generator` exists for post-processing (sampling synthetic rows from noisy
measurements), where a recorded seed makes a release reproducible.
"""

from __future__ import annotations

import secrets
from typing import Protocol

import numpy as np
import numpy.typing as npt
import opendp.prelude as odp

IntArray = npt.NDArray[np.int64]

odp.enable_features("contrib")


class NoiseSource(Protocol):
    """Adds integer noise to a vector of integers; one call per measurement vector."""

    def discrete_laplace(self, values: IntArray, scale: float) -> IntArray:
        """Return ``values`` plus i.i.d. discrete Laplace noise, P(z) ∝ exp(-|z| / scale)."""
        ...

    def discrete_gaussian(self, values: IntArray, sigma: float) -> IntArray:
        """Return ``values`` plus i.i.d. discrete Gaussian noise, P(z) ∝ exp(-z² / (2 sigma²))."""
        ...


def opendp_laplace(scale: float) -> odp.Measurement:
    """OpenDP's vectorised discrete Laplace measurement at ``scale`` (L1 metric over i64)."""
    domain = odp.vector_domain(odp.atom_domain(T=odp.i64))
    return odp.m.make_laplace(domain, odp.l1_distance(T=odp.i64), scale=scale)


def opendp_gaussian(sigma: float) -> odp.Measurement:
    """OpenDP's vectorised discrete Gaussian measurement at ``sigma`` (L2 metric over i64)."""
    domain = odp.vector_domain(odp.atom_domain(T=odp.i64))
    return odp.m.make_gaussian(domain, odp.l2_distance(T=odp.i64), scale=sigma)


class OpenDPNoise:
    """The production noise source: OpenDP's exact samplers over a secure random source."""

    def discrete_laplace(self, values: IntArray, scale: float) -> IntArray:
        """Add discrete Laplace noise with one OpenDP call for the whole vector."""
        if len(values) == 0:
            return np.zeros(0, dtype=np.int64)
        out = opendp_laplace(scale)(np.asarray(values, dtype=np.int64).tolist())
        return np.asarray(out, dtype=np.int64)

    def discrete_gaussian(self, values: IntArray, sigma: float) -> IntArray:
        """Add discrete Gaussian noise with one OpenDP call for the whole vector."""
        if len(values) == 0:
            return np.zeros(0, dtype=np.int64)
        out = opendp_gaussian(sigma)(np.asarray(values, dtype=np.int64).tolist())
        return np.asarray(out, dtype=np.int64)


def secure_noise() -> NoiseSource:
    """The noise source every release uses."""
    return OpenDPNoise()


def secure_seed() -> int:
    """A fresh public seed for post-processing, from the secure source (recorded in the report)."""
    return secrets.randbits(63)


def synthetic_generator(seed: int) -> np.random.Generator:
    """A seeded generator for post-processing and synthetic sampling only; never for noise."""
    return np.random.default_rng(seed)  # post-processing only: sees noisy measurements, never raw rows
