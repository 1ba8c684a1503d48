"""The median by smooth sensitivity (Nissim, Raskhodnikova & Smith 2007), with discrete Laplace noise on the grid.

Values are clipped and encoded on the public grid (codes 0..M, :mod:`dp.statistics.clipping`). With A(k) the
span of the order statistics around the median (:func:`dp.statistics.ptr.spans`: A bounds the local
sensitivity of every dataset within distance k, and A_{D'}(k) <= A_D(k + 1) for neighbours),

    S(D) = max_k e^(−βk) · A_D(k)

is a β-smooth upper bound on the median's local sensitivity (S(D) >= LS(D), S(D) <= e^β S(D')). It is computed
exactly over k = 0, 1, …, stopping once e^(−βk)·M cannot exceed the maximum so far (A(k) <= M), so in
O(n · k*) with k* <= min(n, ln(M / S)/β). The release is m(D) + Z, Z discrete Laplace on the integers of scale
c·S(D) (OpenDP's exact sampler, the secure source), clipped to [0, M] (post-processing) and decoded.

Why the discrete Laplace, and why (ε, δ): the Cauchy-like law that gives pure ε-DP has no exact integer
sampler here, whereas the discrete Laplace has one at any scale. ``docs/proofs/smooth_median.md`` proves,
for the discrete law itself (the admissibility argument of NRS Lemma 2.5 redone for the integer pmf): the
privacy loss is at most β + 1/c + (e^β − 1)·|Z|/s, and P(|Z| > s·ln(2/δ)) <= δ, so the mechanism is
(ε, δ)-DP with ε = β + 1/c + (e^β − 1)·ln(2/δ) (:meth:`SmoothMedian.privacy_loss`). Parameters: 1/c = ε/2 and
β = ln(1 + ε/(2(ln(2/δ) + 1))), which makes the bound ε/2 + β + (e^β − 1) ln(2/δ) <= ε. Floating point
(e^(−βk), the product, the scale) moves S by a relative 1e-14 at most; S is raised by a relative 1e-12 and
the loss is computed with β + 1e-11, which covers it.

The noise scale c·S(D) depends on the data: it is never recorded. The ledger and the audit get the public
factor c (:meth:`SmoothMedian.scale`), β, δ and ε; the only output is the released value (no interval:
its width would be the private scale).

>>> from dprelease.dp.statistics.clipping import ClipBounds
>>> median = SmoothMedian(Grid(ClipBounds(0.0, 100.0), half_steps=50), PureBudget(Fraction(1)), Fraction(1, 10**6))
>>> float(median.privacy_loss().epsilon) <= 1 and 0.03 < median.beta() < 0.04
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget, float_at_least, validate_delta
from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext, noisy_result
from dprelease.dp.errors import ParameterError
from dprelease.dp.mechanisms.random import IntArray, NoiseSource
from dprelease.dp.statistics.clipping import Grid
from dprelease.dp.statistics.ptr import median_code, spans

# Floating-point allowance (module docstring): S is raised by _RAISE, the loss is computed with β + _SLACK.
_RAISE = 1e-12
_SLACK = 1e-11
_DESIGN = 1 - 1e-6  # parameters are designed for a hair less than the budget, so the rounded-up loss fits
MINIMUM_SMOOTH_SENSITIVITY = 1e-3
"""A public floor on S in grid steps (a constant is 0-smooth, and a maximum of β-smooth bounds is β-smooth):
keeps the scale positive when e^(−βk) underflows on data with long runs of ties."""


def smooth_sensitivity(codes: IntArray, grid: Grid, beta: float) -> float:
    """S(D) = max_k e^(−βk) A_D(k) in grid steps, exactly up to floating point, floored (raw data: never released)."""
    span, top = spans(codes, grid), 2 * grid.half_steps
    best, k = 0.0, 0
    while k <= len(codes) + 1 and math.exp(-beta * k) * top > best:
        best = max(best, math.exp(-beta * k) * span(k))
        k += 1
    return max(best * (1 + _RAISE), MINIMUM_SMOOTH_SENSITIVITY)


def local_sensitivity_bound(codes: IntArray, grid: Grid) -> float:
    """A_D(0), the local sensitivity bound without smoothing: for the power check of the audit only (not DP)."""
    return max(float(spans(codes, grid)(0)), MINIMUM_SMOOTH_SENSITIVITY)


@dataclass(frozen=True)
class SmoothMedian:
    """The smooth-sensitivity median on the grid (see the module docstring).

    Privacy: (ε, δ)-DP under add/remove one row, ε = β + 1/c + (e^β − 1)·ln(2/δ) (``docs/proofs/smooth_median.md``);
    booked under zCDP as δ-approximately (ε²/2)-zCDP (``docs/proofs/approximate_zcdp.md``, Lemma 1).

    Attributes:
        grid: The public grid.
        budget: The ε to design for (the loss booked is computed from the parameters and never exceeds it).
        delta: δ in (0, 1).
    """

    grid: Grid
    budget: PureBudget
    delta: Fraction

    name = "smooth-sensitivity median, discrete Laplace"

    def __post_init__(self) -> None:
        if not isinstance(self.grid, Grid):
            raise ParameterError("SmoothMedian: grid must be a Grid")
        if not isinstance(self.budget, PureBudget):
            raise ParameterError("SmoothMedian: budget must be a PureBudget (epsilon)")
        object.__setattr__(self, "delta", validate_delta(self.delta))
        if self.privacy_loss().epsilon > self.budget.epsilon:  # pragma: no cover - the design leaves 1e-6 of slack
            raise ParameterError("SmoothMedian: no parameters fit the budget")

    def _log_term(self) -> float:
        return math.log(2 / float(self.delta))

    def beta(self) -> float:
        """β = ln(1 + ε/(2(ln(2/δ) + 1))), for the designed ε."""
        epsilon = float(self.budget.epsilon) * _DESIGN
        return math.log1p(epsilon / (2 * (self._log_term() + 1)))

    def scale(self) -> float:
        """The public factor c = 2/ε: the noise scale is c·S(D) grid steps (S private, so never recorded)."""
        return float_at_least(2 / (self.budget.epsilon * Fraction(_DESIGN)))

    def privacy_loss(self) -> PureBudget:
        """ε = β' + 1/c + (e^β' − 1)·ln(2/δ) with β' = β + 1e-11, rounded up (the δ is booked beside it)."""
        beta = self.beta() + _SLACK
        value = beta + 1 / self.scale() + math.expm1(beta) * self._log_term()
        return PureBudget(Fraction(value * (1 + 1e-12)).limit_denominator(10**15) + Fraction(1, 10**15))

    def zcdp_loss(self) -> ZCDPBudget | None:
        """No own zCDP bound: booked as ε²/2 with its δ."""
        return None

    def sensitivity_text(self) -> str:
        """The smoothing parameters, public: β and δ (the sensitivity itself is private)."""
        return f"smooth sensitivity of the median (beta={self.beta():.6g}, delta={float(self.delta):.3g})"

    def noise_sd(self) -> float | None:
        """None: the noise's spread is c·S(D), private."""
        return None

    def ci95_halfwidth(self) -> float | None:
        """None: the noise's spread is c·S(D), private."""
        return None

    def draw(self, codes: IntArray, noise: NoiseSource, *, smooth: bool = True) -> int:
        """One release in grid codes 0..M (``smooth=False`` is the broken local-sensitivity variant, audits only)."""
        sensitivity = smooth_sensitivity(codes, self.grid, self.beta()) if smooth else local_sensitivity_bound(
            codes, self.grid)
        scale = float_at_least(Fraction(self.scale()) * Fraction(sensitivity))
        released = noise.discrete_laplace(np.array([median_code(codes, self.grid)], dtype=np.int64), scale)
        return int(np.clip(released[0], 0, 2 * self.grid.half_steps))


def measure_smooth_median(values: npt.ArrayLike, mechanism: SmoothMedian, context: ReleaseContext, *,
                          column: str, stage: str = "stats") -> tuple[float, MeasurementRecord]:
    """Book (ε, δ) and release the median; sealed, so a re-run replays it.

    Raises:
        ParameterError: If the ledger is pure-DP (no delta to spend), before anything is booked.
    """
    if context.definition != "zcdp":
        raise ParameterError("the smooth-sensitivity median is (epsilon, delta)-DP: it needs a zCDP budget with "
                             "delta; a pure-DP release cannot run it")
    codes = mechanism.grid.encode(values)
    code, record = noisy_result(mechanism, context, lambda noise: mechanism.draw(codes, noise), stage=stage,
                                query=f"smooth median({column})", cells=1, sealed_as="value", delta=mechanism.delta)
    grid = mechanism.grid
    return float(grid.decode(np.array([code - grid.half_steps]))[0]), record
