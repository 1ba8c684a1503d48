"""Additive noise mechanisms over integers, with their scale derived from a declared budget.

Each mechanism takes a sensitivity and a budget, finds the smallest floating-point noise scale
whose privacy loss *as computed by OpenDP's privacy map* does not exceed the budget, and books
that computed loss (:meth:`privacy_loss`), never the loss that was asked for. A naive scale of
sensitivity / epsilon overshoots the budget by one ulp in about half of all cases; the search
below steps the scale up one ulp at a time until OpenDP's (conservatively rounded) map fits.

>>> m = DiscreteLaplace(l1_sensitivity=1, budget=PureBudget(Fraction(1, 3)))
>>> m.privacy_loss().epsilon <= Fraction(1, 3)
True
>>> g = DiscreteGaussian(l2_sensitivity=1, budget=ZCDPBudget(Fraction(1, 8)))
>>> g.sigma()
2.0
"""

from __future__ import annotations

import decimal
import math
from dataclasses import dataclass, field
from fractions import Fraction
from statistics import NormalDist

import numpy as np

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget, float_at_least, positive_integer
from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext, noisy_result
from dprelease.dp.errors import ParameterError
from dprelease.dp.mechanisms.random import IntArray, NoiseSource, opendp_gaussian, opendp_laplace

_MAX_ULP_STEPS = 10_000
EXACT_CI_SIGMA = 1000.0
"""Above this sigma, the discrete Gaussian's 95 % half-width is bounded through the continuous one."""





@dataclass(frozen=True)
class DiscreteLaplace:
    """Adds discrete Laplace noise, P(z) ∝ exp(-|z| / scale), to integer vectors.

    Privacy: epsilon-DP with epsilon = l1_sensitivity / scale, for neighbouring inputs whose
    integer vectors differ by at most ``l1_sensitivity`` in L1 norm (Canonne, Kamath & Steinke
    2020, "The Discrete Gaussian for Differential Privacy", Sec. 2; sampled by OpenDP).

    Attributes:
        l1_sensitivity: Declared L1 sensitivity of the measured vector (a positive integer).
        budget: The epsilon allocated to this measurement.
    """

    l1_sensitivity: int
    budget: PureBudget
    _scale: float = field(init=False, repr=False, compare=False)

    name = "discrete Laplace"

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "l1_sensitivity", positive_integer(self.l1_sensitivity, "l1_sensitivity", "DiscreteLaplace")
        )
        if not isinstance(self.budget, PureBudget):
            raise ParameterError("DiscreteLaplace: budget must be a PureBudget (epsilon)")
        scale = float_at_least(Fraction(self.l1_sensitivity) / self.budget.epsilon)
        for _ in range(_MAX_ULP_STEPS):
            if self._loss_at(scale) <= self.budget.epsilon:
                break
            scale = math.nextafter(scale, math.inf)
        else:  # pragma: no cover - OpenDP's map is within a few ulps of the exact value
            raise ParameterError("DiscreteLaplace: no scale found whose privacy loss fits the budget")
        object.__setattr__(self, "_scale", scale)

    def _loss_at(self, scale: float) -> Fraction:
        return Fraction(opendp_laplace(scale).map(self.l1_sensitivity))  # type: ignore[no-untyped-call]

    def scale(self) -> float:
        """The noise scale actually used."""
        return self._scale

    def privacy_loss(self) -> PureBudget:
        """The epsilon that OpenDP's privacy map reports for :meth:`scale`; never above the budget."""
        return PureBudget(self._loss_at(self._scale))

    def zcdp_loss(self) -> ZCDPBudget | None:
        """No bound tighter than the general epsilon²/2."""
        return None

    def noise_sd(self) -> float:
        """Standard deviation of the noise (exact): :meth:`std`."""
        return self.std()

    def std(self) -> float:
        """Standard deviation of the noise: sqrt(2 q) / (1 - q) with q = exp(-1 / scale)."""
        q = math.exp(-1 / self._scale)
        return math.sqrt(2 * q) / (1 - q)

    def ci95_halfwidth(self) -> int:
        """The smallest integer h with P(|noise| <= h) >= 0.95."""
        q = math.exp(-1 / self._scale)
        # P(|Z| > h) = 2 q^(h+1) / (1 + q)
        h = math.log(0.05 * (1 + q) / 2) / math.log(q) - 1
        return max(0, math.ceil(h))

    def sensitivity_text(self) -> str:
        """The declared sensitivity, for the ledger."""
        return f"L1={self.l1_sensitivity}"

    def sample(self, values: IntArray, noise: NoiseSource) -> IntArray:
        """Return ``values`` plus noise; callers go through :func:`dp.mechanisms.noise.measure`."""
        return noise.discrete_laplace(np.asarray(values, dtype=np.int64), self._scale)


@dataclass(frozen=True)
class DiscreteGaussian:
    """Adds discrete Gaussian noise, P(z) ∝ exp(-z² / (2 sigma²)), to integer vectors.

    Privacy: rho-zCDP with rho = l2_sensitivity² / (2 sigma²), for neighbouring inputs whose
    integer vectors differ by at most ``l2_sensitivity`` in L2 norm (Canonne, Kamath & Steinke
    2020, Thm. 4; sampled exactly by OpenDP).

    Attributes:
        l2_sensitivity: Declared L2 sensitivity of the measured vector (a positive integer).
        budget: The rho allocated to this measurement.
    """

    l2_sensitivity: int
    budget: ZCDPBudget
    _sigma: float = field(init=False, repr=False, compare=False)

    name = "discrete Gaussian"

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "l2_sensitivity", positive_integer(self.l2_sensitivity, "l2_sensitivity", "DiscreteGaussian")
        )
        if not isinstance(self.budget, ZCDPBudget):
            raise ParameterError("DiscreteGaussian: budget must be a ZCDPBudget (rho)")
        ctx = decimal.Context(prec=40, rounding=decimal.ROUND_CEILING)
        variance = Fraction(self.l2_sensitivity**2) / (2 * self.budget.rho)
        root = ctx.sqrt(ctx.divide(decimal.Decimal(variance.numerator), decimal.Decimal(variance.denominator)))
        sigma = float_at_least(Fraction(root))
        for _ in range(_MAX_ULP_STEPS):
            if self._loss_at(sigma) <= self.budget.rho:
                break
            sigma = math.nextafter(sigma, math.inf)
        else:  # pragma: no cover
            raise ParameterError("DiscreteGaussian: no sigma found whose privacy loss fits the budget")
        object.__setattr__(self, "_sigma", sigma)

    def _loss_at(self, sigma: float) -> Fraction:
        return Fraction(opendp_gaussian(sigma).map(self.l2_sensitivity))  # type: ignore[no-untyped-call]

    def sigma(self) -> float:
        """The noise parameter actually used."""
        return self._sigma

    def scale(self) -> float:
        """Alias of :meth:`sigma`, so reports can treat every mechanism alike."""
        return self._sigma

    def privacy_loss(self) -> ZCDPBudget:
        """The rho that OpenDP's privacy map reports for :meth:`sigma`; never above the budget."""
        return ZCDPBudget(self._loss_at(self._sigma))

    def zcdp_loss(self) -> ZCDPBudget | None:
        """Its own loss is already zCDP."""
        return None

    def noise_sd(self) -> float:
        """An upper bound on the noise's standard deviation: sigma (the discrete Gaussian's variance is below σ²)."""
        return self._sigma

    def ci95_halfwidth(self) -> int:
        """An integer h with P(|noise| <= h) >= 0.95.

        Up to sigma = :data:`EXACT_CI_SIGMA`: the smallest such h, by an exact sum over the support.
        Above it (a sum of squares' sensitivity makes sigma huge), a bound from the continuous Gaussian:
        with rho(x) = exp(-x²/2σ²) decreasing on x >= 0, the tail sum over z > h is at most the integral
        of rho from h, and the normaliser is at least that integral over the line minus 1, so
        P(|noise| > h) <= 2 Q(h/σ) F with F = σ√(2π) / (σ√(2π) - 1); h is chosen so that this is <= 0.05.
        """
        sigma = self._sigma
        if sigma > EXACT_CI_SIGMA:
            root = sigma * math.sqrt(2 * math.pi)
            tail = 0.025 * (1 - 1 / root)  # Q(h/σ) <= 0.025 / F
            return math.ceil(sigma * NormalDist().inv_cdf(1 - tail)) + 1  # + 1: float rounding, on the safe side
        radius = math.ceil(12 * sigma) + 2
        z = np.arange(-radius, radius + 1, dtype=np.float64)
        weights = np.exp(-(z**2) / (2 * sigma * sigma))
        weights /= weights.sum()
        central = weights[radius]
        covered, h = float(central), 0
        while covered < 0.95:
            h += 1
            covered += float(weights[radius + h] + weights[radius - h])
        return h

    def sensitivity_text(self) -> str:
        """The declared sensitivity, for the ledger."""
        return f"L2={self.l2_sensitivity}"

    def sample(self, values: IntArray, noise: NoiseSource) -> IntArray:
        """Return ``values`` plus noise; callers go through :func:`dp.mechanisms.noise.measure`."""
        return noise.discrete_gaussian(np.asarray(values, dtype=np.int64), self._sigma)


Mechanism = DiscreteLaplace | DiscreteGaussian


def additive_mechanism(budget: PureBudget | ZCDPBudget, sensitivity: int) -> Mechanism:
    """The additive noise of a budget's kind: discrete Laplace for epsilon, discrete Gaussian for rho.

    ``sensitivity`` is the L1 (Laplace) or L2 (Gaussian) sensitivity of the measured vector.
    """
    if isinstance(budget, PureBudget):
        return DiscreteLaplace(l1_sensitivity=sensitivity, budget=budget)
    return DiscreteGaussian(l2_sensitivity=sensitivity, budget=budget)


def measure(
    mechanism: Mechanism, values: IntArray, context: ReleaseContext, *, stage: str, query: str,
    delta: Fraction = Fraction(0),
) -> tuple[IntArray, MeasurementRecord]:
    """Charge the ledger for ``mechanism``, draw its noise on ``values``, and seal the result.

    This is the only caller of a noise mechanism's ``sample`` (through
    :func:`dp.accounting.charges.noisy_result`). When this release already drew the measurement (a
    re-run of the same release id), the sealed result is returned instead: no charge, no draw. ``delta`` is
    booked with the loss when the draw is one step of an (epsilon, delta) mechanism (PTR's test).

    Returns:
        The noisy values and the measurement's public provenance.
    """
    exact = np.asarray(values, dtype=np.int64)
    return noisy_result(mechanism, context, lambda noise: mechanism.sample(exact, noise), stage=stage, query=query,
                        cells=len(exact), sealed_as="values", encode=lambda noisy: noisy.tolist(),
                        decode=lambda payload: np.asarray(payload, dtype=np.int64), delta=delta)
