"""Error bars by simulation from the published mechanism: post-processing only.

The functions here see public parameters (noise scales) and noisy, already published values,
never a row; their generator is a seeded :func:`dp.mechanisms.random.synthetic_generator` so that
a release's intervals are reproducible. They draw from the exact noise laws of the published
mechanisms: the discrete Laplace as the difference of two geometric variables, the discrete
Gaussian from its tabulated pmf (for sigma above 500, the rounded normal, whose total variation
distance from it is below 1e-100).

>>> rng = np.random.default_rng(0)  # post-processing: simulated noise, no row
>>> z = noise_draws(DiscreteLaplace(1, PureBudget(Fraction(1))), 100_000, rng)
>>> abs(float(z.std()) - DiscreteLaplace(1, PureBudget(Fraction(1))).std()) < 0.02
True
"""

from __future__ import annotations

import math
from fractions import Fraction  # noqa: F401  (doctest)

import numpy as np
import numpy.typing as npt

from dprelease.dp.accounting.budget import PureBudget  # noqa: F401  (doctest)
from dprelease.dp.errors import InternalError
from dprelease.dp.mechanisms.noise import DiscreteGaussian, DiscreteLaplace, Mechanism

FloatArray = npt.NDArray[np.float64]

SIMULATIONS = 10_000
"""Noise draws per interval: the 2.5 % and 97.5 % points are then within about ±0.3 % in coverage."""

_TABULATED_SIGMA = 500.0


def noise_draws(mechanism: Mechanism, size: int, rng: np.random.Generator) -> FloatArray:
    """``size`` independent draws of the mechanism's noise, from its exact law (post-processing only)."""
    if isinstance(mechanism, DiscreteLaplace):
        p = -math.expm1(-1 / mechanism.scale())  # P(geometric = k) = (1 - p)^(k-1) p, 1 - p = exp(-1/scale)
        draws = rng.geometric(p, size) - rng.geometric(p, size)  # post-processing: public scale, no row
        return np.asarray(draws, dtype=np.float64)
    if not isinstance(mechanism, DiscreteGaussian):  # pragma: no cover - Mechanism is a closed union
        raise InternalError("noise_draws: an additive mechanism is required; this is a bug")
    sigma = mechanism.sigma()
    if sigma > _TABULATED_SIGMA:
        return np.asarray(np.rint(rng.normal(0.0, sigma, size)), dtype=np.float64)  # post-processing
    radius = math.ceil(13 * sigma) + 2
    support = np.arange(-radius, radius + 1, dtype=np.float64)
    weights = np.exp(-(support**2) / (2 * sigma * sigma))
    return np.asarray(rng.choice(support, size=size, p=weights / weights.sum()), dtype=np.float64)


def basic_interval(estimate: float, replicates: FloatArray, level: float = 0.95) -> tuple[float, float]:
    """The basic (pivotal) bootstrap interval: [θ̂ − q_hi(θ* − θ̂), θ̂ − q_lo(θ* − θ̂)].

    ``replicates`` are the statistic recomputed on the plug-in truth plus fresh simulated noise;
    their spread around the plug-in value stands for the noise's spread around the truth.
    """
    tail = (1 - level) / 2
    errors = replicates - estimate
    low, high = np.quantile(errors, [tail, 1 - tail])
    return estimate - float(high), estimate - float(low)
