"""Continuous Laplace and Gaussian mechanisms: for teaching and comparison only.

Never used by the release flow. These are the textbook mechanisms on real numbers, drawn with
numpy's floating-point samplers from a :class:`numpy.random.Generator` the caller passes in. The
guarantees below are those of the *idealised* real-valued mechanisms: a floating-point Laplace
sample leaks through the pattern of representable doubles (Mironov 2012, "On significance of the
least significant bits for differential privacy"), and numpy's generators are not
cryptographically secure. Releases use :class:`dp.mechanisms.noise.DiscreteLaplace` and
:class:`dp.mechanisms.noise.DiscreteGaussian`, sampled exactly by OpenDP. Use this module to show
students the formulas, or to compare accuracy with the discrete mechanisms.

>>> Laplace(l1_sensitivity=1, budget=PureBudget(Fraction(1, 2))).scale()
2.0
>>> g = Gaussian(l2_sensitivity=1, budget=ApproxBudget(Fraction(1, 2), Fraction(1, 10**5)))
>>> round(g.sigma(), 6)  # sqrt(2 ln(1.25e5)) / 0.5
9.689611
"""

from __future__ import annotations

import decimal
import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dprelease.dp.accounting.budget import ApproxBudget, PureBudget, float_at_least, positive_number
from dprelease.dp.errors import ParameterError

FloatArray = npt.NDArray[np.float64]

_PRECISION = 60
_SIGNIFICANT = 15
_MAX_ULP_STEPS = 10_000






def _decimal(x: Fraction) -> decimal.Decimal:
    ctx = decimal.Context(prec=_PRECISION)
    return ctx.divide(decimal.Decimal(x.numerator), decimal.Decimal(x.denominator))


def _gaussian_constant(l2_sensitivity: Fraction, delta: Fraction) -> decimal.Decimal:
    """l2_sensitivity * sqrt(2 ln(1.25 / delta)) at 60 significant digits."""
    ctx = decimal.Context(prec=_PRECISION)
    log_term = ctx.ln(_decimal(Fraction(5, 4) / delta))
    return ctx.multiply(_decimal(l2_sensitivity), ctx.sqrt(ctx.multiply(2, log_term)))


def _round_up(x: decimal.Decimal) -> Fraction:
    """A short decimal >= x plus one unit in the 15th digit (covers Decimal's own rounding error)."""
    quantum = decimal.Decimal(1).scaleb(x.adjusted() - _SIGNIFICANT + 1)
    ctx = decimal.Context(prec=_PRECISION)
    return Fraction(x.quantize(quantum, rounding=decimal.ROUND_CEILING, context=ctx)) + Fraction(quantum)


@dataclass(frozen=True)
class Laplace:
    """Adds continuous Laplace noise, density ∝ exp(-|z| / scale), to real values. Teaching only.

    Privacy (of the idealised real-valued mechanism): epsilon-DP with epsilon =
    l1_sensitivity / scale, for neighbouring inputs whose value vectors differ by at most
    ``l1_sensitivity`` in L1 norm (Dwork & Roth 2014, Thm. 3.6). numpy's floating-point sampler
    does not attain it exactly (Mironov 2012); releases use :class:`dp.mechanisms.noise.DiscreteLaplace`.

    Attributes:
        l1_sensitivity: Declared L1 sensitivity of the vector (a positive number).
        budget: The epsilon of the measurement.
    """

    l1_sensitivity: Fraction | int
    budget: PureBudget
    _scale: float = field(init=False, repr=False, compare=False)

    name = "Laplace (continuous; teaching only)"

    def __post_init__(self) -> None:
        sensitivity = positive_number(self.l1_sensitivity, "l1_sensitivity", "Laplace")
        object.__setattr__(self, "l1_sensitivity", sensitivity)
        if not isinstance(self.budget, PureBudget):
            raise ParameterError(f"Laplace: budget ({self.budget!r}) must be a PureBudget (epsilon)")
        object.__setattr__(self, "_scale", float_at_least(sensitivity / self.budget.epsilon))

    def scale(self) -> float:
        """The noise scale used, the smallest double >= l1_sensitivity / epsilon."""
        return self._scale

    def privacy_loss(self) -> PureBudget:
        """The loss epsilon = l1_sensitivity / scale, exactly; never above the budget."""
        return PureBudget(Fraction(self.l1_sensitivity) / Fraction(self._scale))

    def sensitivity_text(self) -> str:
        """The declared sensitivity."""
        return f"L1={self.l1_sensitivity}"

    def sample(self, values: object, rng: np.random.Generator) -> FloatArray:
        """Return ``values`` plus i.i.d. Laplace(0, scale) noise drawn from ``rng`` (a new array)."""
        array = np.asarray(values, dtype=np.float64)
        return array + rng.laplace(0.0, self._scale, size=array.shape)  # teaching only


@dataclass(frozen=True)
class Gaussian:
    """Adds continuous Gaussian noise N(0, sigma²) to real values. Teaching only.

    sigma = l2_sensitivity sqrt(2 ln(1.25 / delta)) / epsilon, i.e.
    sigma² = 2 l2_sensitivity² ln(1.25 / delta) / epsilon².

    Privacy (of the idealised real-valued mechanism): (epsilon, delta)-DP for epsilon in (0, 1),
    with epsilon = l2_sensitivity sqrt(2 ln(1.25 / delta)) / sigma, for neighbouring inputs whose
    value vectors differ by at most ``l2_sensitivity`` in L2 norm (Dwork & Roth 2014, Thm. A.1).
    The theorem says nothing for epsilon >= 1, so such budgets are refused. Releases use
    :class:`dp.mechanisms.noise.DiscreteGaussian` under zCDP instead.

    Attributes:
        l2_sensitivity: Declared L2 sensitivity of the vector (a positive number).
        budget: The (epsilon, delta) of the measurement; 0 < epsilon < 1 and 0 < delta < 1.
    """

    l2_sensitivity: Fraction | int
    budget: ApproxBudget
    _sigma: float = field(init=False, repr=False, compare=False)

    name = "Gaussian (continuous; teaching only)"

    def __post_init__(self) -> None:
        sensitivity = positive_number(self.l2_sensitivity, "l2_sensitivity", "Gaussian")
        object.__setattr__(self, "l2_sensitivity", sensitivity)
        budget = self.budget
        if not isinstance(budget, ApproxBudget):
            raise ParameterError(f"Gaussian: budget ({budget!r}) must be an ApproxBudget (epsilon, delta)")
        if budget.epsilon >= 1:
            raise ParameterError(
                f"Gaussian: epsilon ({float(budget.epsilon):g}) must be below 1; "
                "Dwork & Roth's Thm. A.1 holds for epsilon in (0, 1)"
            )
        if budget.delta <= 0:
            raise ParameterError(f"Gaussian: delta ({float(budget.delta):g}) must be positive")
        exact = _gaussian_constant(sensitivity, budget.delta) / _decimal(budget.epsilon)
        sigma = float_at_least(_round_up(exact))
        for _ in range(_MAX_ULP_STEPS):
            if self._epsilon_at(sigma) <= budget.epsilon:
                break
            sigma = math.nextafter(sigma, math.inf)
        else:  # pragma: no cover - the rounded-up sigma is within a few ulps
            raise ParameterError("Gaussian: no sigma found whose privacy loss fits the budget")
        object.__setattr__(self, "_sigma", sigma)

    def _epsilon_at(self, sigma: float) -> Fraction:
        """The epsilon of Thm. A.1 at ``sigma``, rounded up."""
        constant = _gaussian_constant(Fraction(self.l2_sensitivity), self.budget.delta)
        return _round_up(decimal.Context(prec=_PRECISION).divide(constant, _decimal(Fraction(sigma))))

    def sigma(self) -> float:
        """The noise standard deviation used, >= l2_sensitivity sqrt(2 ln(1.25 / delta)) / epsilon."""
        return self._sigma

    def scale(self) -> float:
        """Alias of :meth:`sigma`, so reports can treat every mechanism alike."""
        return self._sigma

    def privacy_loss(self) -> ApproxBudget:
        """(epsilon, delta) with epsilon recomputed from :meth:`sigma` (rounded up); never above the budget."""
        return ApproxBudget(self._epsilon_at(self._sigma), self.budget.delta)

    def sensitivity_text(self) -> str:
        """The declared sensitivity."""
        return f"L2={self.l2_sensitivity}"

    def sample(self, values: object, rng: np.random.Generator) -> FloatArray:
        """Return ``values`` plus i.i.d. N(0, sigma²) noise drawn from ``rng`` (a new array)."""
        array = np.asarray(values, dtype=np.float64)
        return array + rng.normal(0.0, self._sigma, size=array.shape)  # teaching only
