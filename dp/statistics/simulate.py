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


CLIPPED_SIDE_TAILS = (0.035, 0.015)
"""Miss probabilities (truth below the interval, truth above it) of a 95 % interval of a mean or sum whose
bounds can clip above only (mirrored for below only); :func:`interval_tails`.

Clipping rows above the upper bound can only lower the clipped mean, so the true mean lies at or above
the clipped one: a noise interval that keeps 95 % of the noise but leaves 1.5 % of it above (3.5 % below)
still covers the clipped mean with 95 % probability, whatever the split, and covers a true mean a bias
b above it with at least 95 % probability while b is below about 0.6 noise standard deviations (Laplace
noise: 1 − 0.035·e^(−b/a) − 0.015·e^(b/a) >= 0.95 for b <= 0.85·a, a the scale), where the symmetric
interval starts losing coverage at once. It is 2.9 % wider. Chosen on the benchmark's columns (issue 16;
n = 10⁴, ε = 1, 2 000-3 000 runs each, the library path): the stay column's coverage of its true mean
went 93.8 % → 94.8 % (± 0.4 %), age's, hours-per-week's and capital-gain's (hardly clipped) 95.3-95.5 %
→ 95.8-95.9 %; a 1 % / 4 % split covered stay 95.2 % but is 7 % wider."""


def interval_tails(clip_side: str | None) -> tuple[float, float]:
    """(Truth below, truth above) miss probabilities of a mean's or sum's 95 % interval by the side that clips.

    >>> interval_tails(None), interval_tails("upper"), interval_tails("lower")
    ((0.025, 0.025), (0.035, 0.015), (0.015, 0.035))
    """
    if clip_side is None:
        return 0.025, 0.025
    below, above = CLIPPED_SIDE_TAILS
    return (below, above) if clip_side == "upper" else (above, below)


def basic_interval(estimate: float, replicates: FloatArray, level: float = 0.95,
                   tails: tuple[float, float] | None = None) -> tuple[float, float]:
    """The basic (pivotal) bootstrap interval: [θ̂ − q_hi(θ* − θ̂), θ̂ − q_lo(θ* − θ̂)].

    ``replicates`` are the statistic recomputed on the plug-in truth plus fresh simulated noise;
    their spread around the plug-in value stands for the noise's spread around the truth.
    ``tails`` are the probabilities that the truth lies below and above the interval (default: half of
    1 − ``level`` each); they must add up to 1 − ``level``.
    """
    below, above = ((1 - level) / 2, (1 - level) / 2) if tails is None else tails
    if not (0 < below < 1 and 0 < above < 1 and math.isclose(below + above, 1 - level)):
        raise InternalError("basic_interval: the tails must be in (0, 1) and add up to 1 - level; this is a bug")
    errors = replicates - estimate
    low, high = np.quantile(errors, [above, 1 - below])
    return estimate - float(high), estimate - float(low)
