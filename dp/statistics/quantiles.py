"""Quantiles by the exponential mechanism over the intervals between sorted clipped values.

Values are encoded on the public grid (:class:`~dp.statistics.clipping.Grid`); write them as
integers v in {0, ..., M} (M = 2H grid steps above the lower bound). For a quantile q in (0, 1)
the candidates are *every* grid point y in {0, ..., M} (a public set), scored by the distance of
the target rank q·n to the ranks y occupies:

    u(y) = −dist(q·n, [#{v_j < y}, #{v_j <= y}]),

(0 when y is a q-quantile of the data: #{v < y} <= q n <= #{v <= y}), and the mechanism releases
y with probability ∝ exp(ε u(y) / (2Δ)): the exponential mechanism (McSherry & Talwar 2007) over a
fixed candidate set. Sensitivity: adding one row raises both counts by 0 or 1 and q·n by q, so each
end of the interval moves by 1 − q or −q relative to q·n (removing one: the opposite), and with c
rows per privacy unit |u(y) − u'(y)| <= Δ = c·max(q, 1 − q) (Δ = c/2 for the median). Privacy:
ε-DP with ε = 2Δ/scale, and ε-bounded-range, so (ε²/8)-zCDP
(:class:`~dp.mechanisms.selection.ExponentialMechanism`, ``docs/proofs/exponential_bounded_range.md``).

Drawing (an exact equivalent, as in Smith 2011 and google-research ``dp_multiq``): grid points
share a score within *runs*: each distinct value d_j is a run of one point, and the gap of
points strictly between two consecutive distinct values (or a bound) is a run whose ranks are
both #{v <= d_j}. A run of w points has total weight w·exp(u/scale), so a run is selected by the
project's exponential mechanism on scores u + scale·ln w (empty gaps have weight 0 and are left
out), then a point of the run uniformly, from the secure source (:class:`SecureUniform`): the
two steps have exactly the law of the one-step mechanism. Ties are handled by construction: a
tied value is one run whose rank interval spans all its copies (diffprivlib's quantile, which
works on indices of sorted values, mis-scores them). For integer data, a grid whose step is the
data's resolution puts grid points on the values: the release is then a value, not a point in a
gap. (The scores' ln w is a double, accurate to about 1e-16 relative; the selection is drawn
exactly by OpenDP from those scores.)

Error bars: :meth:`QuantileMechanism.rank_error_bound` (closed form, a priori): with probability
>= 95 % the released point's rank distance exceeds the best achievable on the grid by at most
scale·ln((M + 1)/0.05). Value intervals (:func:`quantile_intervals`): the exact output law of the
published mechanism on a plug-in dataset built from the published quantiles and a noisy count
(post-processing only), read as a basic interval.

>>> grid = Grid(ClipBounds(0, 4), half_steps=2)  # grid points 0, 1, 2, 3, 4
>>> runs = interval_scores(grid.encode([1, 1, 3]), Fraction(1, 2), scale=1.0, grid=grid)
>>> runs.starts.tolist(), runs.widths.tolist(), runs.below.tolist(), runs.upto.tolist()
([0, 1, 2, 3, 4], [1, 1, 1, 1, 1], [0, 0, 2, 2, 3], [0, 2, 2, 3, 3])
>>> (runs.scores - np.log(runs.widths)).tolist()  # -dist(1.5, [below, upto])
[-1.5, 0.0, -0.5, -0.5, -1.5]
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol

import numpy as np
import numpy.typing as npt

from dprelease.dp.accounting.budget import (
    PureBudget,
    ZCDPBudget,
    bounded_range_from_zcdp_share,
    positive_integer,
    to_fraction,
)
from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext, noisy_result
from dprelease.dp.errors import ParameterError
from dprelease.dp.mechanisms.random import IntArray, NoiseSource
from dprelease.dp.mechanisms.selection import ExponentialMechanism, SelectionNoise
from dprelease.dp.statistics.clipping import ClipBounds, Grid

FloatArray = npt.NDArray[np.float64]


class UniformSource(Protocol):
    """Draws a uniform integer in [0, n): the point inside the selected run."""

    def below(self, n: int) -> int:
        """A uniform integer in [0, n)."""
        ...


class SecureUniform:
    """The production source: :func:`secrets.randbelow` (the operating system's CSPRNG, as OpenDP's)."""

    def below(self, n: int) -> int:
        """A uniform integer in [0, n) from the secure source."""
        return secrets.randbelow(n)


SECURE_UNIFORM = SecureUniform()


def check_quantile(value: object, owner: str = "quantile") -> Fraction:
    """A quantile level in the open interval (0, 1), as an exact fraction (floats read as written)."""
    q = to_fraction(value, owner)
    if not 0 < q < 1:
        raise ParameterError(f"{owner} ({float(q):g}) must lie strictly between 0 and 1")
    return q


@dataclass(frozen=True)
class Runs:
    """The non-empty runs of grid points sharing a count, and their selection scores.

    Attributes:
        starts: First grid point of each run (0..M).
        widths: Points in each run (> 0).
        below: #{v_j < y} for y in the run.
        upto: #{v_j <= y} for y in the run.
        scores: u_i + scale·ln(width_i).
    """

    starts: IntArray
    widths: IntArray
    below: IntArray
    upto: IntArray
    scores: FloatArray


def interval_scores(codes: IntArray, quantile: Fraction, *, scale: float, grid: Grid) -> Runs:
    """The runs of equal rank of encoded values and their exponential-mechanism scores (see the module docstring).

    Runs alternate: the gap of grid points below the smallest value, each distinct value d_j (one
    point, ranks [#{v < d_j}, #{v <= d_j}]), the gap after it (both ranks #{v <= d_j}), ... Empty
    gaps (adjacent values) are left out.
    """
    v = np.asarray(codes, dtype=np.int64) + grid.half_steps  # 0..M
    top = 2 * grid.half_steps
    distinct, multiplicity = np.unique(v, return_counts=True)
    upto = np.cumsum(multiplicity)  # #{v <= d_j}
    below = upto - multiplicity  # #{v < d_j}
    m = len(distinct)
    # 2m + 1 runs: gap_0, value_1, gap_1, ..., value_m, gap_m.
    starts = np.empty(2 * m + 1, dtype=np.int64)
    widths = np.empty(2 * m + 1, dtype=np.int64)
    low = np.empty(2 * m + 1, dtype=np.int64)
    high = np.empty(2 * m + 1, dtype=np.int64)
    edges = np.concatenate(([-1], distinct, [top + 1]))
    starts[0::2], widths[0::2] = edges[:-1] + 1, edges[1:] - edges[:-1] - 1
    starts[1::2], widths[1::2] = distinct, 1
    low[0::2] = high[0::2] = np.concatenate(([0], upto))
    low[1::2], high[1::2] = below, upto
    keep = widths > 0
    n = len(v)
    # u = -dist(q n, [low, high]), exactly in rationals (numerators over q's denominator), then as a double.
    target = quantile.numerator * n
    den = quantile.denominator
    # A level written with many digits (1e-300, 0.9999999999999999) has a large denominator: past int64, the
    # products are Python integers (at most 2·(2H + 1) + 1 runs), still exact.
    ranks: tuple[npt.NDArray[np.int64] | npt.NDArray[np.object_], ...] = (low, high)
    if den * (n + 1) >= 2**62:
        ranks = (low.astype(object), high.astype(object))
    gap = np.maximum(np.maximum(ranks[0] * den - target, target - ranks[1] * den), 0)
    utility = np.asarray(-gap / den, dtype=np.float64)
    scores = utility + scale * np.log(np.where(keep, widths, 1).astype(np.float64))
    return Runs(starts[keep], widths[keep], low[keep], high[keep], np.asarray(scores[keep], dtype=np.float64))


@dataclass(frozen=True)
class QuantileMechanism:
    """The exponential mechanism over grid points for one quantile (see the module docstring).

    Privacy: epsilon-DP with epsilon = 2Δ/scale, Δ = contributions·max(q, 1 − q), for neighbouring
    inputs that differ by adding or removing one privacy unit of at most ``contributions`` rows;
    booked in a zCDP ledger at epsilon²/8 (bounded range).

    Attributes:
        grid: The public grid.
        quantile: q in (0, 1).
        budget: Epsilon; or rho, then epsilon = sqrt(8 rho) rounded down (bounded range).
        contributions: Rows per privacy unit (c).
    """

    grid: Grid
    quantile: Fraction
    budget: PureBudget | ZCDPBudget
    contributions: int = 1
    _selection: ExponentialMechanism = field(init=False, repr=False, compare=False)

    name = "exponential mechanism over intervals (quantile)"

    def __post_init__(self) -> None:
        owner = "QuantileMechanism"
        if not isinstance(self.grid, Grid):
            raise ParameterError(f"{owner}: grid must be a Grid")
        object.__setattr__(self, "quantile", check_quantile(self.quantile, f"{owner}: quantile"))
        object.__setattr__(self, "contributions", positive_integer(self.contributions, "contributions", owner))
        if isinstance(self.budget, ZCDPBudget):
            epsilon = bounded_range_from_zcdp_share(self.budget)
        elif isinstance(self.budget, PureBudget):
            epsilon = self.budget
        else:
            raise ParameterError(f"{owner}: budget must be a PureBudget or a ZCDPBudget")
        q = self.quantile
        sensitivity = self.contributions * max(q, 1 - q)
        object.__setattr__(self, "_selection", ExponentialMechanism(sensitivity, epsilon))

    def score_sensitivity(self) -> Fraction:
        """Δ = c·max(q, 1 − q)."""
        return Fraction(self._selection.score_sensitivity)

    def scale(self) -> float:
        """The exponential mechanism's scale, >= 2Δ/epsilon."""
        return self._selection.scale()

    def privacy_loss(self) -> PureBudget:
        """The loss epsilon = 2Δ/scale, exactly; never above the budget."""
        return self._selection.privacy_loss()

    def zcdp_loss(self) -> ZCDPBudget:
        """epsilon²/8: the mechanism is epsilon-bounded-range."""
        return self._selection.zcdp_loss()

    def sensitivity_text(self) -> str:
        """The per-score sensitivity, for the ledger."""
        return f"score sensitivity={self.score_sensitivity()} (rank distance, q={self.quantile})"

    def noise_sd(self) -> float | None:
        """No additive noise: the error bar is :meth:`rank_error_bound`."""
        return None

    def ci95_halfwidth(self) -> float | None:
        """No additive noise: the error bar is :meth:`rank_error_bound`."""
        return None

    def rank_error_bound(self, level: float = 0.95) -> float:
        """The t with P(u(y) < u* − t) <= 1 − level, u* the best score on the grid: scale·ln((M + 1)/(1 − level)).

        Any point scoring below u* − t has probability at most exp(−t/scale) times the best point's,
        and there are M + 1 points.
        """
        return self.scale() * math.log(self.grid.points / (1 - level))

    def probabilities(self, codes: IntArray) -> FloatArray:
        """The exact probability of every grid point 0..M (for tests and interval computations)."""
        runs = interval_scores(codes, self.quantile, scale=self.scale(), grid=self.grid)
        logits = (runs.scores - runs.scores.max()) / self.scale()
        weights = np.exp(logits)
        per_point = np.repeat(weights / weights.sum() / runs.widths, runs.widths)
        return np.asarray(per_point, dtype=np.float64)

    def draw(self, codes: IntArray, noise: NoiseSource | SelectionNoise, uniform: UniformSource) -> int:
        """The released grid index 0..M; releases go through :func:`measure_quantiles`, which books it first."""
        runs = interval_scores(codes, self.quantile, scale=self.scale(), grid=self.grid)
        chosen = self._selection.select(runs.scores, noise)
        return int(runs.starts[chosen]) + uniform.below(int(runs.widths[chosen]))


@dataclass(frozen=True)
class NoisyQuantiles:
    """Released quantiles of one column: grid values, sorted by level.

    Attributes:
        column: The column.
        grid: The public grid.
        mechanisms: One mechanism per level, in the order of ``levels``.
        levels: The quantile levels, increasing.
        values: The released values (monotone: sorted, post-processing).
        records: The measurements' provenance.
    """

    column: str
    grid: Grid
    mechanisms: tuple[QuantileMechanism, ...]
    levels: tuple[Fraction, ...]
    values: tuple[float, ...]
    records: tuple[MeasurementRecord, ...]

    def median(self) -> float:
        """The released median (the level 1/2 must have been measured)."""
        if Fraction(1, 2) not in self.levels:
            raise ParameterError(f"{self.column}: the median (0.5) was not among the measured quantiles")
        return self.values[self.levels.index(Fraction(1, 2))]


def quantile_mechanisms(grid: Grid, levels: Sequence[object], budget: PureBudget | ZCDPBudget, *,
                        contributions: int = 1) -> tuple[QuantileMechanism, ...]:
    """One mechanism per level, the budget split evenly (sequential composition); levels checked first."""
    checked = [check_quantile(q) for q in levels]
    if not checked:
        raise ParameterError("quantiles must name at least one level")
    if len(set(checked)) != len(checked):
        raise ParameterError("quantiles must not repeat a level")
    shares = budget.split({str(i): 1 for i in range(len(checked))})
    return tuple(QuantileMechanism(grid, q, shares[str(i)], contributions) for i, q in enumerate(checked))


def measure_quantiles(
    values: npt.ArrayLike,
    mechanisms: Sequence[QuantileMechanism],
    context: ReleaseContext,
    *,
    column: str,
    stage: str = "stats",
    group: str | None = None,
    uniform: UniformSource = SECURE_UNIFORM,
) -> NoisyQuantiles:
    """Release each level's quantile through :func:`dp.accounting.charges.noisy_result` (replayed on a re-run).

    Args:
        values: The column's raw values of one group (NaN dropped, clipped, encoded).
        mechanisms: From :func:`quantile_mechanisms` (one grid).
        context: The ledger and secure noise source.
        column: The column (public).
        stage: The ledger stage.
        group: The public group value, if any.
        uniform: The source of the point inside the selected run (the secure one in releases).

    Returns:
        The released quantiles, sorted (post-processing), with their provenance.
    """
    if not mechanisms or len({m.grid for m in mechanisms}) != 1:
        raise ParameterError("measure_quantiles: mechanisms must be non-empty and share one grid")
    grid = mechanisms[0].grid
    codes = grid.encode(values)
    suffix = f"{column} | {group}" if group is not None else column
    drawn: list[int] = []
    records = []
    for mechanism in mechanisms:
        index, record = noisy_result(
            mechanism, context, lambda noise, m=mechanism: m.draw(codes, noise, uniform),  # type: ignore[misc]
            stage=stage, query=f"quantile {mechanism.quantile}({suffix})", cells=grid.points,
            sealed_as="index", decode=int)
        drawn.append(index)
        records.append(record)
    order = sorted(range(len(mechanisms)), key=lambda i: mechanisms[i].quantile)
    levels = tuple(mechanisms[i].quantile for i in order)
    released = sorted(float(grid.decode(np.array([i - grid.half_steps]))[0]) for i in drawn)
    return NoisyQuantiles(column, grid, tuple(mechanisms[i] for i in order), levels, tuple(released),
                          tuple(records))


def plug_in_codes(released: NoisyQuantiles, count: float) -> IntArray:
    """A public stand-in dataset: round(count) values whose quantiles are the released ones (post-processing).

    The quantile function interpolates linearly between (0, lower), the released (level, value)
    points and (1, upper); the rows are its values at (i + 1/2)/n.
    """
    n = max(1, round(count))
    bounds: ClipBounds = released.grid.bounds
    xs = [0.0, *(float(q) for q in released.levels), 1.0]
    ys = [bounds.lower, *released.values, bounds.upper]
    values = np.interp((np.arange(n) + 0.5) / n, xs, ys)
    return released.grid.encode(values)


def quantile_intervals(released: NoisyQuantiles, count: float, level: float = 0.95) -> list[tuple[float, float]]:
    """Basic intervals of each released quantile from the mechanism's exact law on :func:`plug_in_codes`.

    For each level, the output law of the same mechanism on the plug-in data is computed exactly
    (:meth:`QuantileMechanism.probabilities`), its error around the plug-in's own quantile read at
    (1 ± level)/2, and the released value shifted by it. Post-processing only: it sees the released
    values, a noisy count and public parameters.
    """
    codes = plug_in_codes(released, count)
    grid = released.grid
    tail = (1 - level) / 2
    out = []
    for mechanism, value in zip(released.mechanisms, released.values, strict=True):
        cdf = np.cumsum(mechanism.probabilities(codes))
        points = grid.decode(np.arange(grid.points) - grid.half_steps)
        ordered = np.sort(codes)
        truth = float(grid.decode(ordered[min(len(ordered) - 1, int(mechanism.quantile * len(ordered)))]))
        low_point = points[min(int(np.searchsorted(cdf, tail)), grid.points - 1)]
        high_point = points[min(int(np.searchsorted(cdf, 1 - tail)), grid.points - 1)]
        low = value - (float(high_point) - truth)
        high = value - (float(low_point) - truth)
        # Where the law is lopsided around the plug-in's quantile (a spike, an empty group, a count far off),
        # the shifted interval can miss the released value, or leave the bounds: it is widened to hold both.
        out.append((max(min(low, value), grid.bounds.lower), min(max(high, value), grid.bounds.upper)))
    return out
