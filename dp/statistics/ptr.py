"""Propose-test-release for the median (Dwork & Lei 2009; Dwork & Roth 2014, Sec. 7.2), on the public grid.

The analyst proposes a bound b on the median's local sensitivity (public, in value units; on the
grid, b_codes = ceil(b / step) steps). With encoded values sorted as x_1 <= ... <= x_n in
{0, ..., M}, padded with x_i = 0 for i < 1 and x_i = M for i > n, the median is x_m with
m = ceil(n/2), and

    A(k) = max { x_{s+k+1} − x_s : m − k − 2 <= s <= m + 1 }

bounds the local sensitivity (add/remove one row) of every dataset within distance k of the data;
γ = min{k : A(k) > b_codes} (capped at a public constant) has sensitivity 1 and is 0 whenever the
data's own local sensitivity exceeds b (both: ``docs/proofs/ptr_threshold.md``).

1. **Test**: γ̂ = γ + Z_t, Z_t discrete Laplace of scale 1/ε_t (booked through
   :func:`dp.mechanisms.noise.measure`: releasing γ̂ is ε_t-DP on its own).
2. If γ̂ <= T, refuse (⊥). T is the smallest integer with P(Z_t > T) <= δ, for the scale actually
   used: P(Z_t > T) = q^(T+1)/(1 + q), q = exp(−1/scale); T <= ceil(ln(1/(2δ))·scale), the
   continuous threshold ln(1/(2δ))/ε. The book's ln(2/δ)/(2ε) lets the test pass at distance 0
   with probability about sqrt(δ/8), not δ (:func:`pass_probability_at_distance_zero`).
3. **Release**: x_m + Z_r, Z_r discrete Laplace of scale b_codes/ε_r.

Privacy: (ε_t + ε_r, δ)-DP under add/remove one row. :func:`run_ptr_median` runs under zCDP only: the
ledger books it as δ-approximately (ε_t²/2 + ε_r²/2)-zCDP, the δ beside the test's rho, counted against
the dataset's δ (``docs/proofs/approximate_zcdp.md``); a pure-DP ledger has no δ to give.

>>> ptr_threshold(Fraction(1), Fraction(1, 10**6)) > 13
True
>>> test = DiscreteLaplace(1, PureBudget(Fraction(1)))
>>> integer_threshold(test.scale(), Fraction(1, 10**6))
13
>>> pass_probability_at_distance_zero(test.scale(), 13) <= 1e-6 < pass_probability_at_distance_zero(test.scale(), 12)
True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dprelease.dp.accounting.budget import ApproxBudget, PureBudget, validate_delta
from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext
from dprelease.dp.errors import ParameterError
from dprelease.dp.mechanisms.noise import DiscreteLaplace, measure
from dprelease.dp.mechanisms.random import IntArray, NoiseSource
from dprelease.dp.statistics.clipping import Grid


def ptr_threshold(epsilon: Fraction, delta: Fraction) -> float:
    """The continuous threshold ln(1/(2δ))/ε: P(Lap(1/ε) > T) = exp(−εT)/2 = δ exactly."""
    return math.log(1 / (2 * float(delta))) / float(epsilon)


def book_threshold(epsilon: Fraction, delta: Fraction) -> float:
    """The textbook's ln(2/δ)/(2ε), kept only to show what it gets wrong (tests, proof note)."""
    return math.log(2 / float(delta)) / (2 * float(epsilon))


def pass_probability_at_distance_zero(scale: float, threshold: float) -> float:
    """P(0 + Z > threshold) for Z discrete Laplace of ``scale``: q^(floor(T)+1)/(1 + q)."""
    q = math.exp(-1 / scale)
    return q ** (math.floor(threshold) + 1) / (1 + q)


def integer_threshold(scale: float, delta: Fraction) -> int:
    """The smallest integer T >= 0 with P(Z > T) <= δ for Z discrete Laplace of ``scale``."""
    target = float(delta)
    # ceil(scale·ln(1/(2δ))) always satisfies it (docs/proofs/ptr_threshold.md); step down while the smaller one does.
    t = max(0, math.ceil(scale * math.log(1 / (2 * target))))
    while t > 0 and pass_probability_at_distance_zero(scale, t - 1) <= target:
        t -= 1
    while pass_probability_at_distance_zero(scale, t) > target:  # pragma: no cover - guards float rounding
        t += 1
    return t


def spans(codes: IntArray, grid: Grid) -> Callable[[int], int]:
    """The spans A(k) = max{x_{s+k+1} − x_s : m − k − 2 <= s <= m + 1} of the padded, sorted grid codes (raw data).

    A(k) bounds the median's local sensitivity on every dataset within distance k, and A_{D'}(k) <= A_D(k + 1)
    for neighbours (``docs/proofs/ptr_threshold.md``, Lemmas A and B); PTR and the smooth sensitivity use it.
    """
    x = np.sort(np.asarray(codes, dtype=np.int64) + grid.half_steps)
    n, top = len(x), 2 * grid.half_steps
    m = (n + 1) // 2  # ceil(n / 2), 1-indexed

    def value(i: npt.NDArray[np.int64]) -> IntArray:
        padded = np.clip(i, 1, max(n, 1)) - 1
        inside = x[padded] if n else np.zeros(len(i), dtype=np.int64)
        return np.where(i < 1, 0, np.where(i > n, top, inside))

    def span(k: int) -> int:
        starts = np.arange(m - k - 2, m + 2, dtype=np.int64)
        return int(np.max(value(starts + k + 1) - value(starts)))

    return span


def stability_distance(codes: IntArray, grid: Grid, bound: int, cap: int) -> int:
    """γ = min{k : A(k) > bound}, capped at ``cap`` (raw data: only ever released with noise)."""
    span = spans(codes, grid)
    for k in range(cap):
        if span(k) > bound:
            return k
    return cap


@dataclass(frozen=True)
class PTRMedian:
    """Propose-test-release for the median on the grid (see the module docstring).

    Privacy: (ε_t + ε_r, δ)-DP under add/remove one row, ε_t and ε_r the losses of the two
    discrete Laplace mechanisms at their actual scales (``docs/proofs/ptr_threshold.md``).

    Attributes:
        grid: The public grid.
        proposed_bound: b, the proposed bound on the median's local sensitivity (value units, > 0).
        test_budget: ε_t.
        release_budget: ε_r.
        delta: δ in (0, 1): the most the test may pass when the data are unstable.
    """

    grid: Grid
    proposed_bound: float
    test_budget: PureBudget
    release_budget: PureBudget
    delta: Fraction
    _test: DiscreteLaplace = field(init=False, repr=False, compare=False)
    _release: DiscreteLaplace = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        owner = "PTRMedian"
        if not isinstance(self.grid, Grid):
            raise ParameterError(f"{owner}: grid must be a Grid")
        bound = self.proposed_bound
        if isinstance(bound, bool) or not isinstance(bound, int | float) or not math.isfinite(bound) or bound <= 0:
            raise ParameterError(f"{owner}: proposed_bound ({bound!r}) must be a positive finite number")
        object.__setattr__(self, "delta", validate_delta(self.delta))
        for name in ("test_budget", "release_budget"):
            if not isinstance(getattr(self, name), PureBudget):
                raise ParameterError(f"{owner}: {name} must be a PureBudget (epsilon)")
        object.__setattr__(self, "_test", DiscreteLaplace(1, self.test_budget))
        object.__setattr__(self, "_release", DiscreteLaplace(self.bound_codes(), self.release_budget))

    def bound_codes(self) -> int:
        """The proposed bound in grid steps, rounded up exactly (at least 1); the test and the release both use it.

        At most M = 2H, the grid's span: no A(k) exceeds M, so any larger bound gives the same γ, and M bounds
        the median's sensitivity on the grid outright (a bound of 1e308 would otherwise overflow the scale).
        """
        steps = math.ceil(Fraction(self.proposed_bound) / Fraction(self.grid.step))
        return min(2 * self.grid.half_steps, max(1, steps))

    def threshold(self) -> int:
        """T: the test passes when γ̂ > T."""
        return integer_threshold(self._test.scale(), self.delta)

    def cap(self) -> int:
        """The public cap of γ: T plus 50 noise scales (the test then passes with probability ≈ 1 − e^-50)."""
        return self.threshold() + math.ceil(50 * self._test.scale()) + 1

    def privacy_loss(self) -> ApproxBudget:
        """(ε_t + ε_r, δ), from the scales actually used."""
        epsilon = self._test.privacy_loss().epsilon + self._release.privacy_loss().epsilon
        return ApproxBudget(epsilon, self.delta)

    def test_mechanism(self) -> DiscreteLaplace:
        """The test's mechanism (sensitivity 1, ε_t)."""
        return self._test

    def release_mechanism(self) -> DiscreteLaplace:
        """The release's mechanism (sensitivity b_codes, ε_r)."""
        return self._release

    def run(self, codes: IntArray, noise: NoiseSource) -> int | None:
        """One run without booking (for audits): the released grid code in [0, M] or None (⊥)."""
        gamma = stability_distance(codes, self.grid, self.bound_codes(), self.cap())
        noisy_gamma = int(self._test.sample(np.array([gamma], dtype=np.int64), noise)[0])
        if noisy_gamma <= self.threshold():
            return None
        return int(self._release.sample(np.array([median_code(codes, self.grid)], dtype=np.int64), noise)[0])


def median_code(codes: IntArray, grid: Grid) -> int:
    """x_ceil(n/2) of the grid codes shifted to 0..M (0 for no rows): the median PTR releases."""
    x = np.sort(np.asarray(codes, dtype=np.int64) + grid.half_steps)
    return int(x[(len(x) + 1) // 2 - 1]) if len(x) else 0


@dataclass(frozen=True)
class PTRResult:
    """The outcome of one PTR median.

    Attributes:
        value: The released median (value units), or None when the test refused.
        halfwidth: Half-width of the 95 % interval of the release noise (value units), None if refused.
        loss: (ε_t + ε_r, δ).
        records: The test's record and, when it passed, the release's.
    """

    value: float | None
    halfwidth: float | None
    loss: ApproxBudget
    records: tuple[MeasurementRecord, ...]


def run_ptr_median(
    values: npt.ArrayLike, mechanism: PTRMedian, context: ReleaseContext, *, column: str, stage: str = "stats"
) -> PTRResult:
    """Test, then release the median or refuse; both steps booked and sealed (a re-run replays them).

    Booked under zCDP as approximate zCDP (``docs/proofs/approximate_zcdp.md``, Lemma 2): the test carries
    ρ_t = ε_t²/2 and the δ, the release ρ_r = ε_r²/2. A refusal publishes only "refused" (the mechanism's
    output ⊥); the noisy distance γ̂ stays sealed in the ledger.

    Raises:
        ParameterError: If the ledger is pure-DP (it has no delta to spend), before anything is booked.
    """
    if context.definition != "zcdp":
        raise ParameterError("PTR is (epsilon, delta)-DP: it needs a zCDP budget with delta (the ledger books its "
                             "delta as approximate zCDP); a pure-DP release cannot run it")
    codes = mechanism.grid.encode(values)
    gamma = stability_distance(codes, mechanism.grid, mechanism.bound_codes(), mechanism.cap())
    noisy, test_record = measure(mechanism.test_mechanism(), np.array([gamma], dtype=np.int64), context,
                                 stage=stage, query=f"ptr test(median {column})", delta=mechanism.delta)
    loss = mechanism.privacy_loss()
    if int(noisy[0]) <= mechanism.threshold():
        return PTRResult(None, None, loss, (test_record,))
    release = mechanism.release_mechanism()
    exact = np.array([median_code(codes, mechanism.grid)], dtype=np.int64)
    released, record = measure(release, exact, context, stage=stage, query=f"ptr release(median {column})")
    grid = mechanism.grid
    value = float(np.clip(grid.decode(released - grid.half_steps)[0], grid.bounds.lower, grid.bounds.upper))
    halfwidth = float(release.ci95_halfwidth()) * grid.step
    return PTRResult(value, halfwidth, loss, (test_record, record))
