"""Clip bounds and an offset for a mean without public bounds, chosen by the exponential mechanism (booked).

A clipped mean's error has three parts: the noise of the sum (its sensitivity is how far a row can
move from the grid's offset, max(U − c, c − L)), the count's noise times |mean − c|, and the bias of
the rows clipped. :func:`select_mean_bounds` chooses L, U and c for it from a fine geometric grid of
the column's public ``search_range`` (ratio :data:`MEAN_GRID_RATIO`: 0 and ±1.1^k, or offsets from the
end nearer 0 when the range does not hold 0), in up to three exponential-mechanism selections:

1. **upper bound** U among the candidates above the anchor a (0, or the range's end nearer 0):
   score −#{rows > g} − s·β·ln(r)·j, j the candidate's index counted from a, s the mechanism's scale
   Δ/ε_U (the monotone exponential mechanism, below), β = :data:`TAIL_EXPONENT`; i.e. base measure
   r^(−βj) ≈ (g/g₀)^(−β). Beyond the data's edge (no row above) each step out is r^β times less likely
   (a bound 2× too wide has probability 2^(−β) of the edge's); inside the data a step in is chosen
   only where fewer than about s·β·ln r rows lie in it, and a gap of ratio G with k rows beyond it
   (a top code) is jumped unless k < s·β·ln G. Skipped (U = the range's high end) when a is the high end.
2. **lower bound** L, the mirror image among the candidates below a (skipped when a is the low end:
   a column whose search range starts at 0 needs no lower search).
3. **offset** c, a median among the candidates in [L, U]: score −|#{rows < g} − #{rows > g}|
   (sensitivity Δ: one row moves the difference by at most 1 per row of a unit), uniform base measure.

Then R = max(U − c, c − L), and the published bounds are [max(low, c − R), min(high, c + R)]: the
narrow side is widened for free (the sum's sensitivity is R either way), which clips fewer rows.
The moments are measured on :class:`~dp.statistics.clipping.Grid` with ``offset=c``. When only one
bound lies inside the search range (for a range starting at 0: the upper one), only that side can clip,
and the mean's interval leans towards it (``MeanBounds.clip_side``, :func:`~dp.statistics.simulate.interval_tails`).

Why this stopping rule (the clipping trade-off): a bound with k rows beyond it biases the mean by at
most k·(range)/n, and the sum's noise costs about R/(n·ε); the instance-optimal rule clips where only
about O(log(candidates)/ε) rows lie beyond, so that the two are of one order (Huang, Liang & Yi 2021,
"Instance-optimal mean estimation under differential privacy", NeurIPS; Amin, Kulesza, Muñoz Medina &
Vassilvitskii 2019, "Bounding user contributions: a bias-variance trade-off in differential
privacy", ICML; Karwa & Vadhan 2018, "Finite sample differentially private confidence intervals",
ITCS). An exponential-mechanism selection resolves the number of rows beyond a bound to about
s·ln(candidates) rows, s = Δ/ε_U: the tail prior β and the bounds' share ε_U are tuned so that the
rows it leaves beyond the bound are that few (a handful at n = 10⁴, ε = 1) while the overshoot beyond
the data's edge (a factor 1.1^j with probability ∝ 1.1^(−βj)) stays small. Before issue 16's tuning
(β = 4, 20 % at scale 2Δ/ε_U) the rule left hundreds of rows' worth of bias on heavy tails: a step
cost 3.8 rows at ε = 1, so a top code on 0.5 % of the rows, 2.4× beyond the next value, was clipped
in more than half the runs.

Budget (:func:`split_mean_budget`, one rule for every column, tuned on ``benchmarks/stats_peers.py``):
:data:`MEAN_SHARES` = 26.25 % for the bounds (split equally between the ends searched), 3.75 % for the
offset, 5 % for the count and 65 % for the sum. The median-centred offset makes the count's share
cheap (|mean − median| is small next to R for every benchmark column), and the bounds' share buys a
resolution of s = Δ/(0.2625·ε) rows (3.8 at ε = 1), a step costing s·β·ln r ≈ 2.2 rows. Beyond the data's
edge every candidate scores the same but for the base measure, so the overshoot is the prior's alone,
r^(−β) per step whatever ε: β = 6 (0.56 per step, 0.62 at β = 5) keeps the mean square of a bound past
the edge at 1.37 times the first candidate's (1.52 at β = 5), and the larger bounds' share keeps the
step's cost inside the data at about 2 rows. The offset's share is what keeps it near the median at
n = 10³ (at 2.5 % its rank resolution, about 80·ln(m) rows, doubled hours-per-week's error there through
the count's noise; 3.75 % costs n = 10³ little). Issue 16's second tuning (from 22.5/5/5/67.5 %, β = 5):
chosen on an exact error model of this mechanism (the selections' laws computed, the noise simulated)
over β ∈ {4.5, …, 8} and the four shares, then measured (``benchmarks/results/stats_peers_s7*.json``).

Privacy: the bound scores are monotone (an added row lowers each by 0 or 1, a removed one raises each
by 0 or 1; the base measure is public), so each bound is selected by
:class:`~dp.mechanisms.selection.MonotoneExponentialMechanism` at scale Δ/ε_i, which is ε_i-DP
(McSherry & Talwar 2007); the offset's scores are not monotone (one row raises the scores below it
and lowers those above) and use :class:`~dp.mechanisms.selection.ExponentialMechanism` at 2Δ/ε_i.
The candidate sets depend only on public inputs and earlier DP outputs. Each selection is booked
through :func:`~dp.mechanisms.selection.run_selection` (charge, draw, seal; a re-run replays), and the
column's loss composes sequentially. Under zCDP a share ρ_i runs at ε_i = √(8ρ_i) (both mechanisms
are ε_i-bounded-range, ``docs/proofs/exponential_bounded_range.md``). Audited with a power check in
``tests/statistical/test_mean_bounds_audit.py``.

What the bounds cannot give: rows beyond a selected bound are clipped, and their bias is not in the
interval of the clipped mean (it covers the noise); ``clipping_bias=True`` estimates that bias out to
caps near the bounds (:mod:`dp.statistics.bias`, out of the sum's share) and corrects for it. A few
rows far beyond the data's bulk are beyond the reach of any ε_U-DP rule: by group privacy, adding
k rows changes the probability of any bound by at most e^(k·ε_U), so at n = 10⁴, ε = 1 (ε_U = 21/80)
ten rows at 9999 beyond a body ending at 115 (the benchmark's ``stay+outliers``) raise the chance of
a bound above them at most e^2.625 ≈ 13.8-fold: covering them in 93 % of runs would need a bound above
9999 in ≥ 6.7 % of the runs *without* them, whose noise (sd ≈ 2.2 against the oracle's 0.015) would
wreck the clean column. A noisy count at this share (discrete Laplace, scale 3.8) told where to look
sees the 10 rows over a 5 % false-alarm threshold in about 64 % of runs, and searching the 47 grid
steps between 115 and 9999 at a 5 % family-wise false alarm in about 1.5 %. The selection here picks
a bound above them with probability about e^(10/3.8 − 6·47·ln 1.1) ≈ 3·10⁻¹¹: those rows are clipped, the
clipped mean's interval misses the true mean (coverage 0), and only the ``beyond_cap`` flag of a
clipping-bias estimate can tell. The remedy is a public bound, or validation of missing-value codes.

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
from dprelease.dp.mechanisms.selection import ExponentialMechanism, MonotoneExponentialMechanism, run_selection
from dprelease.dp.statistics.bias import BIAS_SHARE, BiasMechanism, NoisyBias, measure_bias
from dprelease.dp.statistics.clipping import ClipBounds, Grid
from dprelease.dp.statistics.moments import MomentsMechanism, NoisyMoments, measure_moments

FloatArray = npt.NDArray[np.float64]

MEAN_GRID_RATIO = 1.1
"""Ratio of neighbouring candidates of :func:`mean_grid` (a bound is at most 10 % wider than a grid point needs)."""

TAIL_EXPONENT = 6
"""β of the base measure r^(−βj) of the bound selections: a bound twice as far out weighs 2^−6 as much
(4 before issue 16's tuning, then 5 with the monotone scale; 6 with the bounds' share of 26.25 % narrows
the overshoot beyond the data's edge, which every column pays for in noise, at the same cost in rows per
step inside the data)."""

MEAN_HALF_STEPS = 2**16
"""Grid points on each side of the offset: rounding moves a value by at most R/2^17 (R = the radius), which
keeps the rounding bias of a mean far below its noise (1024 steps gave biases of 0.05 on ages with R = 171)."""

MEAN_SHARES = MappingProxyType({"bounds": Fraction(21, 80), "centre": Fraction(3, 80), "count": Fraction(1, 20),
                                "sum": Fraction(13, 20)})
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
        clip_side: ``"upper"`` when the lower bound is the search range's low end and the upper one is
            inside it (only rows above can be clipped), ``"lower"`` for the mirror image, else None.
    """

    column: str
    lower: float
    upper: float
    centre: float
    selected: tuple[float, float]
    records: tuple[MeasurementRecord, ...]
    clip_side: str | None = None

    def grid(self, half_steps: int = MEAN_HALF_STEPS) -> Grid:
        """The moments' grid: these bounds (source ``svt``, with their clipping side), offset at the centre."""
        return Grid(ClipBounds(self.lower, self.upper, "svt", self.clip_side), half_steps, offset=self.centre)


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
        monotone = MonotoneExponentialMechanism(sensitivity, _epsilon(share[side]))
        if side == "upper":
            scores = bound_scores(above[anchor:], monotone.scale())
        else:
            scores = bound_scores(np.asarray(below[:anchor + 1])[::-1], monotone.scale())
        hit, record = run_selection(monotone, scores, context, stage=stage, query=f"{side} bound of {label} (mean)")
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
    lower, upper = max(low, centre - radius), min(high, centre + radius)
    clip_side = {(True, False): "upper", (False, True): "lower"}.get((lower <= low, upper >= high))
    return MeanBounds(column, lower, upper, centre, (grid[lower_index], grid[upper_index]), tuple(records),
                      clip_side)


def mean_weights(statistics: set[str] | frozenset[str]) -> dict[str, int | Fraction]:
    """Moment weights with :data:`MEAN_SHARES`' count : sum ratio (1 : 13); a sum of squares, if asked, as the sum."""
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
