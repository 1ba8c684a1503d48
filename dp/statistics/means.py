"""Clip bounds and an offset for a mean without public bounds, chosen by the exponential mechanism (booked).

A clipped mean's error has three parts: the noise of the sum (its sensitivity is how far a row can
move from the grid's offset, max(U − c, c − L)), the count's noise times |mean − c|, and the bias of
the rows clipped. :func:`select_mean_bounds` chooses L, U and c for it from a fine geometric grid of
the column's public ``search_range`` (ratio :data:`MEAN_GRID_RATIO`: 0 and ±1.1^k, or offsets from the
end nearer 0 when the range does not hold 0), in up to three exponential-mechanism selections:

1. **upper bound** U among the candidates above the anchor a (0, or the range's end nearer 0):
   score −#{rows > g} − s·β·ln(r)·j, j the candidate's index counted from a, s the mechanism's scale
   2Δ/ε, β = :data:`TAIL_EXPONENT`; i.e. base measure r^(−βj) ≈ (g/g₀)^(−β). Beyond the data's edge
   (no row above) each step out is r^β times less likely (a bound 2× too wide has probability 2^(−β)
   of the edge's); inside the data a step in is chosen only where fewer than about s·β·ln r rows lie
   in it. Skipped (U = the range's high end) when a is the high end.
2. **lower bound** L, the mirror image among the candidates below a (skipped when a is the low end:
   a column whose search range starts at 0 needs no lower search).
3. **offset** c, a median among the candidates in [L, U]: score −|#{rows < g} − #{rows > g}|
   (sensitivity Δ: one row moves the difference by at most 1 per row of a unit), uniform base measure.

Then R = max(U − c, c − L), and the published bounds are [max(low, c − R), min(high, c + R)]: the
narrow side is widened for free (the sum's sensitivity is R either way), which clips fewer rows.
The moments are measured on :class:`~dp.statistics.clipping.Grid` with ``offset=c``.

Budget (:func:`split_mean_budget`, one rule for every column, tuned on ``benchmarks/stats_peers.py``):
:data:`MEAN_SHARES` = 20 % for the bounds (split equally between the ends searched), 5 % for the
offset, 5 % for the count and 70 % for the sum. The median-centred offset makes the count's share
cheap (|mean − median| is small next to R for every benchmark column), and the bounds' share buys a
resolution of about s·β·ln r ≈ 4/(0.2·ε) rows per grid step.

Privacy: each selection is the exponential mechanism on scores whose sensitivity is Δ (the tail
counts and |below − above| move by at most Δ when a unit of Δ rows is added or removed; the base
measure and the candidate sets depend only on public inputs and earlier DP outputs), so each is
ε_i-DP (McSherry & Talwar 2007), booked through :func:`~dp.mechanisms.selection.run_selection`
(charge, draw, seal; a re-run replays), and the column's loss composes sequentially. Under zCDP a
share ρ_i runs at ε_i = √(8ρ_i) (bounded range, ``docs/proofs/exponential_bounded_range.md``).
What the bounds cannot give: rows beyond a selected bound are clipped, and their bias is not in the
interval (about s·β·ln r rows can lie in a step the search cut off); the benchmark reports the
coverage of the true mean beside that of the clipped mean. ``clipping_bias=True`` estimates that bias
out to caps near the bounds (:mod:`dp.statistics.bias`, out of the sum's share) and corrects for it.

>>> grid = mean_grid(0.0, 100.0)
>>> grid[:4], len(grid)
((0.0, 1.0, 1.1, 1.2100000000000002), 51)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget, bounded_range_from_zcdp_share, positive_integer
from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext
from dprelease.dp.errors import ParameterError
from dprelease.dp.measurement.bounds import geometric_grid, tail_counts
from dprelease.dp.mechanisms.random import IntArray
from dprelease.dp.mechanisms.selection import ExponentialMechanism, run_selection
from dprelease.dp.statistics.bias import BIAS_SHARE, BiasMechanism, NoisyBias, measure_bias
from dprelease.dp.statistics.clipping import ClipBounds, Grid
from dprelease.dp.statistics.moments import MomentsMechanism, NoisyMoments, measure_moments

FloatArray = npt.NDArray[np.float64]

MEAN_GRID_RATIO = 1.1
"""Ratio of neighbouring candidates of :func:`mean_grid` (a bound is at most 10 % wider than a grid point needs)."""

TAIL_EXPONENT = 4
"""β of the base measure r^(−βj) of the bound selections: a bound twice as far out weighs 2^−4 as much."""

MEAN_HALF_STEPS = 2**16
"""Grid points on each side of the offset: rounding moves a value by at most R/2^17 (R = the radius), which
keeps the rounding bias of a mean far below its noise (1024 steps gave biases of 0.05 on ages with R = 171)."""

MEAN_SHARES = MappingProxyType({"bounds": Fraction(1, 5), "centre": Fraction(1, 20), "count": Fraction(1, 20),
                                "sum": Fraction(7, 10)})
"""Shares of a mean's budget without public bounds (see the module docstring)."""


def mean_grid(low: float, high: float) -> tuple[float, ...]:
    """The candidates of :func:`select_mean_bounds`: :func:`geometric_grid` at ratio :data:`MEAN_GRID_RATIO`."""
    return geometric_grid(low, high, MEAN_GRID_RATIO)


def split_mean_budget(budget: PureBudget | ZCDPBudget, *,
                      clipping_bias: bool = False) -> dict[str, PureBudget | ZCDPBudget]:
    """The budget of a mean without public bounds, split by :data:`MEAN_SHARES` (exactly; shares sum to it).

    With ``clipping_bias``, :data:`~dp.statistics.bias.BIAS_SHARE` of the whole is moved from ``sum`` to ``bias``.
    """
    if not isinstance(budget, PureBudget | ZCDPBudget):
        raise ParameterError("split_mean_budget: budget must be a PureBudget or a ZCDPBudget")
    shares = dict(MEAN_SHARES)
    if clipping_bias:
        shares = {**shares, "sum": shares["sum"] - BIAS_SHARE, "bias": BIAS_SHARE}
    return dict(budget.split(shares))


def bound_scores(beyond: IntArray, scale: float, ratio: float = MEAN_GRID_RATIO,
                 exponent: float = TAIL_EXPONENT) -> FloatArray:
    """Scores for candidates ordered outwards from the anchor: −rows beyond − scale·β·ln(r)·j (j the index).

    The second term is public (the candidate's position only): the base measure r^(−βj).
    """
    steps = np.arange(len(beyond), dtype=np.float64)
    return np.asarray(-np.asarray(beyond, dtype=np.float64) - scale * exponent * math.log(ratio) * steps,
                      dtype=np.float64)


def centre_scores(below: IntArray, above: IntArray) -> FloatArray:
    """−|rows below g − rows above g|: highest at a median (sensitivity 1 per row)."""
    return np.asarray(-np.abs(np.asarray(below, dtype=np.float64) - np.asarray(above, dtype=np.float64)),
                      dtype=np.float64)


@dataclass(frozen=True)
class MeanBounds:
    """Bounds and offset of a mean, DP outputs (public once released).

    Attributes:
        column: The column.
        lower: The lower clipping bound (after widening the narrow side).
        upper: The upper clipping bound.
        centre: The offset c (a DP median among the grid's candidates in the selected range).
        selected: The selected (lower, upper) before widening.
        records: The selections' provenance (upper, lower, centre; those that ran).
    """

    column: str
    lower: float
    upper: float
    centre: float
    selected: tuple[float, float]
    records: tuple[MeasurementRecord, ...]

    def grid(self, half_steps: int = MEAN_HALF_STEPS) -> Grid:
        """The moments' grid: these bounds (source ``svt``), offset at the centre."""
        return Grid(ClipBounds(self.lower, self.upper, "svt"), half_steps, offset=self.centre)


def _epsilon(budget: PureBudget | ZCDPBudget) -> PureBudget:
    return bounded_range_from_zcdp_share(budget) if isinstance(budget, ZCDPBudget) else budget


def select_mean_bounds(
    values: npt.ArrayLike,
    column: str,
    search_range: tuple[float, float],
    bounds_budget: PureBudget | ZCDPBudget,
    centre_budget: PureBudget | ZCDPBudget,
    context: ReleaseContext,
    *,
    contributions: int = 1,
    stage: str = "stats",
    query: str | None = None,
) -> MeanBounds:
    """Select L, U and c (module docstring); books each selection before it draws.

    Args:
        values: The column's raw values (NaN: missing, in no count).
        column: The column name (public).
        search_range: The public range the bounds are searched in (the schema's ``search_range``).
        bounds_budget: The budget of the bound selections, split equally over the ends searched.
        centre_budget: The budget of the offset's selection.
        context: The ledger and noise source.
        contributions: Rows per privacy unit (Δ of every score).
        stage: The ledger stage.
        query: The name in the ledger (default: the column).

    Returns:
        The bounds, the offset and the records.
    """
    for name, budget in (("bounds_budget", bounds_budget), ("centre_budget", centre_budget)):
        if not isinstance(budget, PureBudget | ZCDPBudget):
            raise ParameterError(f"select_mean_bounds: {name} must be a PureBudget or a ZCDPBudget")
    sensitivity = positive_integer(contributions, "contributions", "select_mean_bounds")
    low, high = (float(v) for v in search_range)
    grid = mean_grid(low, high)
    below, above = tail_counts(np.asarray(values, dtype=np.float64), grid)
    anchor = grid.index(0.0) if low < 0 < high else (0 if abs(low) <= abs(high) else len(grid) - 1)
    ends = [side for side, searched in (("upper", anchor < len(grid) - 1), ("lower", anchor > 0)) if searched]
    share = bounds_budget.split({side: 1 for side in ends})
    label = query or column
    records: list[MeasurementRecord] = []
    upper_index, lower_index = len(grid) - 1, 0
    for side in ends:
        mechanism = ExponentialMechanism(sensitivity, _epsilon(share[side]))
        if side == "upper":
            scores = bound_scores(above[anchor:], mechanism.scale())
        else:
            scores = bound_scores(np.asarray(below[:anchor + 1])[::-1], mechanism.scale())
        hit, record = run_selection(mechanism, scores, context, stage=stage, query=f"{side} bound of {label} (mean)")
        records.append(record)
        if side == "upper":
            upper_index = anchor + hit
        else:
            lower_index = anchor - hit
    if lower_index == upper_index:  # both at the anchor: widen towards the side that was searched
        upper_index = min(upper_index + 1, len(grid) - 1)
        lower_index = upper_index - 1
    mechanism = ExponentialMechanism(sensitivity, _epsilon(centre_budget))
    inside = slice(lower_index, upper_index + 1)
    hit, record = run_selection(mechanism, centre_scores(below[inside], above[inside]), context, stage=stage,
                                query=f"centre of {label} (mean)")
    records.append(record)
    lower, upper, centre = grid[lower_index], grid[upper_index], grid[lower_index + hit]
    radius = max(upper - centre, centre - lower)
    return MeanBounds(column, max(low, centre - radius), min(high, centre + radius), centre, (lower, upper),
                      tuple(records))


def mean_weights(statistics: set[str] | frozenset[str]) -> dict[str, int | Fraction]:
    """Moment weights with :data:`MEAN_SHARES`' count : sum ratio (1 : 14); a sum of squares, if asked, as the sum."""
    ratio = MEAN_SHARES["sum"] / MEAN_SHARES["count"]
    return {"count": 1, "sum": ratio if statistics & {"sum", "mean", "variance", "std"} else 0,
            "sum_of_squares": ratio if statistics & {"variance", "std"} else 0}


def measure_svt_moments(
    values: npt.ArrayLike,
    column: str,
    search_range: tuple[float, float],
    budget: PureBudget | ZCDPBudget,
    context: ReleaseContext,
    *,
    statistics: frozenset[str] = frozenset({"mean"}),
    contributions: int = 1,
    seed: int = 0,
    stage: str = "stats",
    clipping_bias: bool = False,
) -> tuple[MeanBounds, NoisyMoments] | tuple[MeanBounds, NoisyMoments, NoisyBias]:
    """A column's moments without public bounds: :func:`select_mean_bounds`, then count, sum (and squares).

    ``budget`` is split by :func:`split_mean_budget`; the count and sum shares (and a sum of squares,
    weighted as the sum, when a variance is asked for) go to :class:`~dp.statistics.moments.MomentsMechanism`
    on the offset grid. Everything is booked in ``context`` before it draws; a re-run replays.
    With ``clipping_bias``, :data:`~dp.statistics.bias.BIAS_SHARE` of the budget is taken from the sum's
    share for :class:`~dp.statistics.bias.BiasMechanism` (caps around the selected bounds, within
    ``search_range``), and the measured bias is returned third.
    """
    shares = split_mean_budget(budget, clipping_bias=clipping_bias)
    found = select_mean_bounds(values, column, search_range, shares["bounds"], shares["centre"], context,
                               contributions=contributions, stage=stage)
    rest = shares["count"].amount + shares["sum"].amount
    moments_budget = PureBudget(rest) if isinstance(budget, PureBudget) else ZCDPBudget(rest)
    mechanism = MomentsMechanism(found.grid(), moments_budget, mean_weights(set(statistics)), contributions)
    moments = measure_moments(values, mechanism, context, column=column, seed=seed, stage=stage)
    if not clipping_bias:
        return found, moments
    plan = BiasMechanism.around(found.grid(), search_range, shares["bias"], contributions)
    return found, moments, measure_bias(values, plan, context, column=column, seed=seed, stage=stage)


__all__ = ["MEAN_GRID_RATIO", "MEAN_HALF_STEPS", "MEAN_SHARES", "TAIL_EXPONENT", "MeanBounds", "bound_scores",
           "centre_scores", "mean_grid", "mean_weights", "measure_svt_moments", "select_mean_bounds",
           "split_mean_budget"]
