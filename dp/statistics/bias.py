"""A DP estimate of the bias of clipping a mean or a sum, a flag, and a corrected estimate with its interval.

A clipped mean (:mod:`dp.statistics.moments`) estimates the mean of the values moved into [L, U];
the rows beyond a bound pull it towards that bound. With a share of the statistic's budget,
:class:`BiasMechanism` measures what those rows cost, out to a wider public *cap* [W_lo, W_hi]:

* ``tails``: the 4-cell histogram (rows below W_lo, rows in [W_lo, L), rows in (U, W_hi], rows
  above W_hi); one row is in at most one cell, so its L1 and L2 sensitivity is c (c rows per unit);
* ``excess``: the vector (Σ over rows below L of L − max(x, W_lo), Σ over rows above U of
  min(x, W_hi) − U), each term rounded to an integer grid of :data:`EXCESS_HALF_STEPS` steps of the
  widest side (a term lies in [0, H_e]); one row is in at most one cell: sensitivity c·H_e. A side
  with no room between bound and cap (a bound at the search range's end) is not measured.

The caps are public functions of the mean's (already DP) bounds and offset: W_hi = min(U + κR, high),
W_lo = max(L − κR, low), R = max(U − c, c − L) the sum's radius, κ = :data:`CAP_FACTOR`, [low, high] the
column's public search range when it has one. Both queries go through :func:`dp.mechanisms.noise.measure`
(charge, then draw from the secure source; a re-run replays), with the additive mechanism of the budget's
kind; the bias budget is split by :data:`BIAS_SHARES`. Privacy: sequential composition of two
additive mechanisms calibrated to the sensitivities above (no further argument is needed: the caps
and the grid are public, the estimates below are post-processing).

Post-processing (:meth:`NoisyBias.report`): the bias of the clipped sum is B = step_e·(Ẽ_above −
Ẽ_below), of the mean B/ñ (ñ the moments' noisy count); the *corrected* mean is the clipped mean + B/ñ
(within the caps) and the corrected sum the clipped sum + B. Their 95 % intervals are simulated from
the published mechanisms, the moments' noise and the excess's together (the basic bootstrap interval,
:mod:`dp.statistics.simulate`). They cover the true statistic when no row lies beyond the caps: rows
beyond the caps are still clipped (the ``tails`` count tells). Flags: ``clips`` when the bias estimate
is beyond twice its 95 % half-width (the DP estimate says the bounds clip materially: more than its
noise can explain; false alarm about 0.25 % under discrete Laplace noise); ``beyond_cap`` when a
noisy count of rows beyond a cap exceeds twice its 95 % half-width (the corrected interval may then
miss the true value: rows lie further out than the cap, and what they cost is not measured).

>>> grid = Grid(ClipBounds(0.0, 10.0), half_steps=5)
>>> m = BiasMechanism.around(grid, (0.0, 100.0), PureBudget(Fraction(1)))
>>> m.cap, {name: part.l1_sensitivity for name, part in m.parts().items()}
((0.0, 11.25), {'tails': 1, 'excess': 65536})
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget, positive_integer
from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext
from dprelease.dp.errors import InternalError, ParameterError
from dprelease.dp.mechanisms.noise import Mechanism, additive_mechanism, measure
from dprelease.dp.mechanisms.random import synthetic_generator
from dprelease.dp.statistics.clipping import ClipBounds, Grid
from dprelease.dp.statistics.moments import NoisyMoments, clipped_mean
from dprelease.dp.statistics.simulate import SIMULATIONS, basic_interval, noise_draws

FloatArray = npt.NDArray[np.float64]

CAP_FACTOR = Fraction(1, 4)
"""κ: the caps lie κ radii beyond the bounds (the excess's sensitivity is κ times the sum's; tuned on
``benchmarks/stats_peers.py``: at 1/2 the excess's noise tripled the RMSE of columns that clip nothing)."""

EXCESS_HALF_STEPS = 2**16
"""H_e: steps of the excess grid (rounding moves a row's excess by at most κR/2^17)."""

BIAS_SHARES: Mapping[str, Fraction] = MappingProxyType({"tails": Fraction(1, 4), "excess": Fraction(3, 4)})
"""Shares of the bias budget: the 4-cell count of the tails, and the excess sums."""

BIAS_SHARE = Fraction(1, 5)
"""The share of a mean's (or sum's) budget that estimates its clipping bias, when asked for."""

TAIL_CELLS = ("below cap", "below bound", "above bound", "above cap")


@dataclass(frozen=True)
class BiasMechanism:
    """The plan of a clipping-bias estimate: the mean's grid, the caps, the budget and the contribution bound.

    Attributes:
        grid: The moments' grid (its bounds L, U; its centre c and radius R give the caps).
        cap: (W_lo, W_hi), public, W_lo <= L and W_hi >= U.
        budget: The bias budget (split by :data:`BIAS_SHARES`).
        contributions: Rows per privacy unit (c).
    """

    grid: Grid
    cap: tuple[float, float]
    budget: PureBudget | ZCDPBudget
    contributions: int = 1
    _parts: Mapping[str, Mechanism] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        owner = "BiasMechanism"
        if not isinstance(self.grid, Grid):
            raise ParameterError(f"{owner}: grid must be a Grid")
        if not isinstance(self.budget, PureBudget | ZCDPBudget):
            raise ParameterError(f"{owner}: budget must be a PureBudget or a ZCDPBudget")
        low, high = (float(v) for v in self.cap)
        if not (math.isfinite(low) and math.isfinite(high) and low <= self.grid.bounds.lower
                and high >= self.grid.bounds.upper):
            raise ParameterError(f"{owner}: cap ({low:g}, {high:g}) must be finite and contain the bounds")
        object.__setattr__(self, "cap", (low, high))
        c = positive_integer(self.contributions, "contributions", owner)
        object.__setattr__(self, "contributions", c)
        shares = self.budget.split(dict(BIAS_SHARES))
        sensitivity = {"tails": c, "excess": c * EXCESS_HALF_STEPS}
        names = ("tails", "excess") if self.width > 0 else ("tails",)
        object.__setattr__(self, "_parts", MappingProxyType(
            {name: additive_mechanism(shares[name], sensitivity[name]) for name in names}))

    @classmethod
    def around(cls, grid: Grid, search_range: tuple[float, float] | None, budget: PureBudget | ZCDPBudget,
               contributions: int = 1, factor: Fraction | None = None) -> BiasMechanism:
        """Caps κR beyond the grid's bounds (κ = ``factor``, default :data:`CAP_FACTOR`), within the search range."""
        factor = CAP_FACTOR if factor is None else factor
        bounds = grid.bounds
        radius = max(bounds.upper - grid.centre, grid.centre - bounds.lower)
        low, high = bounds.lower - float(factor) * radius, bounds.upper + float(factor) * radius
        if search_range is not None:
            low, high = max(low, min(float(search_range[0]), bounds.lower)), \
                min(high, max(float(search_range[1]), bounds.upper))
        return cls(grid, (low, high), budget, contributions)

    @property
    def width(self) -> float:
        """The widest side's room between bound and cap (0: nothing to measure beyond the bounds)."""
        return max(self.cap[1] - self.grid.bounds.upper, self.grid.bounds.lower - self.cap[0])

    @property
    def sides(self) -> tuple[str, ...]:
        """The sides with room between bound and cap (``below``, ``above``): the excess's cells, in that order."""
        room = {"below": self.grid.bounds.lower - self.cap[0], "above": self.cap[1] - self.grid.bounds.upper}
        return tuple(side for side in ("below", "above") if room[side] > 0)

    @property
    def step(self) -> float:
        """The excess grid's step, width / H_e."""
        return self.width / EXCESS_HALF_STEPS

    def parts(self) -> Mapping[str, Mechanism]:
        """The additive mechanism of each query (``tails``; ``excess`` when the caps leave room)."""
        return self._parts

    def privacy_loss(self) -> PureBudget | ZCDPBudget:
        """The sum of the parts' actual losses (sequential composition); never above the budget."""
        total = sum((part.privacy_loss().amount for part in self._parts.values()), Fraction(0))
        if total > self.budget.amount:  # pragma: no cover - each part fits its share
            raise InternalError("BiasMechanism: the parts' losses exceed the budget; this is a bug")
        return PureBudget(total) if isinstance(self.budget, PureBudget) else ZCDPBudget(total)

    def exact_answers(self, values: npt.ArrayLike) -> dict[str, npt.NDArray[np.int64]]:
        """The exact integer answers (raw data: they never leave this module un-noised)."""
        array = np.asarray(values, dtype=np.float64)
        x = array[~np.isnan(array)]
        (w_lo, w_hi), lower, upper = self.cap, self.grid.bounds.lower, self.grid.bounds.upper
        tails = np.array([np.sum(x < w_lo), np.sum((x >= w_lo) & (x < lower)), np.sum((x > upper) & (x <= w_hi)),
                          np.sum(x > w_hi)], dtype=np.int64)
        answers = {"tails": tails}
        if "excess" in self._parts:
            below = np.clip(np.rint((lower - np.maximum(x[x < lower], w_lo)) / self.step), 0, EXCESS_HALF_STEPS)
            above = np.clip(np.rint((np.minimum(x[x > upper], w_hi) - upper) / self.step), 0, EXCESS_HALF_STEPS)
            sums = {"below": int(below.sum()), "above": int(above.sum())}
            answers["excess"] = np.array([sums[side] for side in self.sides], dtype=np.int64)
        return {name: answers[name] for name in self._parts}


@dataclass(frozen=True)
class BiasEstimate:
    """A statistic's clipping bias and its corrected value, each with a simulated 95 % interval (DP outputs)."""

    statistic: str
    bias: float
    bias_low: float
    bias_high: float
    corrected: float
    corrected_low: float
    corrected_high: float
    clips: bool
    beyond_cap: bool


@dataclass(frozen=True)
class NoisyBias:
    """The noisy tails and excess of one column, and their post-processing with the column's moments.

    Attributes:
        column: The column (public).
        mechanism: The plan they were measured with.
        noisy: The noisy integer answers by query name.
        records: The measurements' provenance.
        seed: The public seed of the interval simulations.
    """

    column: str
    mechanism: BiasMechanism
    noisy: Mapping[str, tuple[int, ...]]
    records: tuple[MeasurementRecord, ...]
    seed: int

    def tails(self) -> dict[str, int]:
        """The noisy count of each tail cell (:data:`TAIL_CELLS`)."""
        return dict(zip(TAIL_CELLS, self.noisy["tails"], strict=True))

    def beyond_cap(self) -> bool:
        """Whether a noisy count of rows beyond a cap exceeds twice its 95 % half-width (false alarm <= ~0.3 %)."""
        half = float(self.mechanism.parts()["tails"].ci95_halfwidth())
        counts = self.tails()
        return bool(max(counts["below cap"], counts["above cap"]) > 2 * half)

    def _excess(self) -> tuple[float, float]:
        """The noisy excess below and above (in excess steps; 0 without room), not projected to >= 0.

        Projecting would bias the estimate upward exactly where nothing is clipped (half the draws set to
        0) and make its interval over-cover there; unprojected, each is unbiased and the interval calibrated.
        """
        measured = dict(zip(self.mechanism.sides, self.noisy.get("excess", ()), strict=False))
        return float(measured.get("below", 0)), float(measured.get("above", 0))

    def report(self, moments: NoisyMoments, statistic: str = "mean") -> BiasEstimate:
        """The bias of the moments' clipped ``mean`` or ``sum``, the corrected value, their intervals, the flags."""
        if statistic not in ("mean", "sum"):
            raise ParameterError(f"{self.column}: a clipping bias is estimated for a mean or a sum, not {statistic!r}")
        if "sum" not in moments.noisy:
            raise ParameterError(f"{self.column}: the bias of a {statistic} needs the moments' sum")
        if moments.grid != self.mechanism.grid:
            raise ParameterError(f"{self.column}: the moments and the bias estimate must share one grid")
        grid, step = moments.grid, self.mechanism.step
        parts = moments.mechanism.parts()
        rng = synthetic_generator(self.seed + 7919)
        n = max(float(moments.noisy["count"][0]), 1.0)
        h = grid.half_steps
        s = float(np.clip(moments.noisy["sum"][0], -h * n, h * n))
        below, above = self._excess()
        sims_n = np.maximum(n + noise_draws(parts["count"], SIMULATIONS, rng), 1.0)
        sims_s = s + noise_draws(parts["sum"], SIMULATIONS, rng)
        sims_b = np.full(SIMULATIONS, step * (above - below))
        if "excess" in self.mechanism.parts():
            part = self.mechanism.parts()["excess"]
            for side in self.mechanism.sides:  # each measured cell's own noise; an unmeasured side is 0
                sims_b += (1.0 if side == "above" else -1.0) * step * noise_draws(part, SIMULATIONS, rng)
        bias_sum = step * (above - below)
        w_lo, w_hi = self.mechanism.cap
        if statistic == "mean":
            bias, sims_bias = bias_sum / n, sims_b / sims_n
            clipped = float(clipped_mean(grid, [n], [s])[0])
            corrected = float(np.clip(clipped + bias, w_lo, w_hi))
            # unclipped replicates, as NoisyMoments.mean's: one on a cap keeps its spread (the interval is clipped)
            sims_corrected = grid.centre + grid.step * sims_s / sims_n + sims_bias
        else:
            raw_n, raw_s = float(moments.noisy["count"][0]), float(moments.noisy["sum"][0])
            bias, sims_bias = bias_sum, sims_b
            clipped = grid.centre * raw_n + grid.step * raw_s
            sims_clipped = grid.centre * sims_n + grid.step * sims_s
            corrected, sims_corrected = clipped + bias, sims_clipped + sims_b
        bias_low, bias_high = basic_interval(bias, sims_bias)
        low, high = basic_interval(corrected, sims_corrected)
        if statistic == "mean":
            low, high = max(low, w_lo), min(high, w_hi)
        # clips: the bias is beyond twice its 95 % half-width on its side (false alarm about 0.25 % under
        # discrete Laplace noise when nothing is clipped); a 95 % interval alone would flag 5 % of unclipped columns.
        clips = bool(bias > 2 * (bias - bias_low) or bias < -2 * (bias_high - bias))
        return BiasEstimate(statistic, bias, bias_low, bias_high, corrected, low, high, clips, self.beyond_cap())


def measure_bias(
    values: npt.ArrayLike,
    mechanism: BiasMechanism,
    context: ReleaseContext,
    *,
    column: str,
    seed: int,
    stage: str = "stats",
) -> NoisyBias:
    """Measure a column's tails and excess under ``mechanism``; each query booked before it draws (replayed).

    Queries are named ``clipping tails(<column>)`` and ``clipping excess(<column>)``.
    """
    if not isinstance(mechanism, BiasMechanism):
        raise ParameterError("measure_bias: mechanism must be a BiasMechanism")
    answers = mechanism.exact_answers(values)
    noisy: dict[str, tuple[int, ...]] = {}
    records = []
    for name, part in mechanism.parts().items():
        result, record = measure(part, answers[name], context, stage=stage, query=f"clipping {name}({column})")
        noisy[name] = tuple(int(v) for v in result)
        records.append(record)
    return NoisyBias(column, mechanism, MappingProxyType(noisy), tuple(records), seed)


__all__ = ["BIAS_SHARE", "BIAS_SHARES", "CAP_FACTOR", "EXCESS_HALF_STEPS", "TAIL_CELLS", "BiasEstimate",
           "BiasMechanism", "ClipBounds", "NoisyBias", "measure_bias"]
