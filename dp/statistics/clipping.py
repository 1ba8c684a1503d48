"""Public clipping bounds and the public integer grid that clipped values are rounded to.

Every statistic here is computed from *encoded* values: a value x is clipped to [lower, upper]
and rounded to the nearest point of a public grid of ``2 * half_steps + 1`` points centred on
(lower + upper) / 2, i.e. to the integer ``k = rint((clip(x) - centre) / step)`` in
[-half_steps, half_steps] with ``step = (upper - lower) / (2 * half_steps)``. The map is a fixed
row-by-row function of public parameters, so it changes no sensitivity argument: one row
contributes one integer of absolute value at most ``half_steps``. Integers are what the exact
samplers add noise to. Rounding moves each value by at most step / 2 (a bias of at most step / 2
on a mean, (upper - lower) / 4096 at the default resolution).

Missing values (NaN) belong to no statistic: they are dropped before encoding. Bounds are public:
declared in a schema, or found by :func:`dp.measurement.bounds.discover_bounds` (DP outputs).

>>> grid = Grid(ClipBounds(0.0, 10.0), half_steps=5)
>>> grid.step, grid.centre
(1.0, 5.0)
>>> grid.encode(np.array([-3.0, 0.0, 4.4, 12.0, np.nan])).tolist()
[-5, -5, -1, 5]
>>> grid.decode(np.array([-5, 5])).tolist()
[0.0, 10.0]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dprelease.dp.accounting.budget import PureBudget, positive_integer
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.errors import ParameterError
from dprelease.dp.measurement.bounds import (
    DiscoveredBounds,
    discover_bounds,
    geometric_grid,
    select_edge_bounds,
    tail_counts,
)
from dprelease.dp.mechanisms.random import IntArray

FloatArray = npt.NDArray[np.float64]

DEFAULT_HALF_STEPS = 1024


@dataclass(frozen=True)
class ClipBounds:
    """Public clipping bounds of a numeric column.

    Attributes:
        lower: The lower bound (finite).
        upper: The upper bound (finite, above ``lower``).
        source: ``"public"`` (declared) or ``"svt"`` (a DP output of the sparse vector technique).
        clip_side: ``"upper"`` when only rows above ``upper`` can be clipped (``lower`` is the end of the
            public range, beyond which no row is declared to lie), ``"lower"`` for the mirror image, None
            when both or neither can (or it is not known). A clipped mean is then biased one way only,
            which the intervals of a mean and a sum use (:data:`dp.statistics.simulate.CLIPPED_SIDE_TAILS`).
    """

    lower: float
    upper: float
    source: str = "public"
    clip_side: str | None = None

    def __post_init__(self) -> None:
        for name in ("lower", "upper"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
                raise ParameterError(f"ClipBounds: {name} ({value!r}) must be a number")
            if not math.isfinite(float(value)):
                raise ParameterError(f"ClipBounds: {name} ({value}) must be finite")
            object.__setattr__(self, name, float(value))
        if not self.lower < self.upper:
            raise ParameterError(f"ClipBounds: lower ({self.lower:g}) must be below upper ({self.upper:g})")
        if not math.isfinite(self.upper - self.lower):
            raise ParameterError(f"ClipBounds: the width of [{self.lower:g}, {self.upper:g}] must be a finite number")
        if self.source not in ("public", "svt"):
            raise ParameterError(f"ClipBounds: source ({self.source!r}) must be 'public' or 'svt'")
        if self.clip_side not in (None, "upper", "lower"):
            raise ParameterError(f"ClipBounds: clip_side ({self.clip_side!r}) must be 'upper', 'lower' or None")

    @classmethod
    def from_discovered(cls, bounds: DiscoveredBounds) -> ClipBounds:
        """The bounds found by :func:`dp.measurement.bounds.discover_bounds` (already booked)."""
        return cls(bounds.lower, bounds.upper, "svt")


def svt_bounds(
    values: npt.ArrayLike,
    column: str,
    search_range: tuple[float, float],
    run_budget: PureBudget,
    context: ReleaseContext,
    *,
    contributions: int = 1,
    stage: str = "bounds",
    scan: str = "inward",
    lower_public: bool = False,
    prior_ratio: float = 8.0,
) -> tuple[ClipBounds, DiscoveredBounds]:
    """Clip bounds found by the book's SVT discovery (:func:`dp.measurement.bounds.discover_bounds`), booked.

    Two monotone AboveThreshold runs of ``run_budget`` each over the geometric grid of the public
    ``search_range`` (the column costs 2 × ``run_budget``); replayed on a re-run like every charge.
    ``scan="inward"`` is the book's discovery (:func:`~dp.measurement.bounds.discover_bounds`: it stops
    once about ln(m) noise scales of rows lie beyond a bound); ``scan="edge"``
    (:func:`~dp.measurement.bounds.select_edge_bounds`) selects each end near the data's edge with the
    exponential mechanism (two selections of ``run_budget``): the bounds for a mean, whose clipping bias
    is what rows beyond cost.

    Returns:
        The clip bounds (source ``svt``) and the discovery's record (which runs fired).
    """
    low, high = search_range
    grid = geometric_grid(low, high)
    counts = tail_counts(np.asarray(values, dtype=np.float64), grid)
    sensitivity = positive_integer(contributions, "contributions", "svt_bounds")
    if scan == "edge":
        found = select_edge_bounds(column, counts, grid, run_budget, context, sensitivity=sensitivity, stage=stage,
                                   lower_public=lower_public, prior_ratio=prior_ratio)
    elif scan == "inward":
        found = discover_bounds(column, counts, grid, run_budget, context, sensitivity=sensitivity, stage=stage)
    else:
        raise ParameterError(f"{column}: scan ({scan!r}) must be 'inward' or 'edge'")
    return ClipBounds.from_discovered(found), found


@dataclass(frozen=True)
class Grid:
    """The public integer grid of clipped values (see the module docstring).

    Attributes:
        bounds: The clipping bounds.
        half_steps: Grid points on each side of the centre (H); encoded values lie in [-H, H].
        offset: The value encoded as 0 (public), inside the bounds; None for their midpoint. The step is
            then max(upper - offset, offset - lower) / H, so [lower, upper] still encodes into [-H, H]
            (a row moves a sum by at most H steps): an offset near the data's bulk makes a mean's
            count noise matter less (:mod:`dp.statistics.means`).
    """

    bounds: ClipBounds
    half_steps: int = DEFAULT_HALF_STEPS
    offset: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.bounds, ClipBounds):
            raise ParameterError("Grid: bounds must be a ClipBounds")
        object.__setattr__(self, "half_steps", positive_integer(self.half_steps, "half_steps", "Grid"))
        if self.half_steps > 2**20:
            raise ParameterError(f"Grid: half_steps ({self.half_steps}) must be at most 2**20; sums of squares "
                                 "must fit in 64-bit integers")
        if self.offset is not None:
            offset = float(self.offset)
            if not self.bounds.lower <= offset <= self.bounds.upper:
                raise ParameterError(f"Grid: offset ({offset:g}) must lie within the bounds")
            object.__setattr__(self, "offset", offset)
        if not self.step > 0:  # bounds a few subnormals apart: every value would encode as NaN
            raise ParameterError(f"Grid: the bounds [{self.bounds.lower:g}, {self.bounds.upper:g}] are too close for "
                                 f"{self.points} grid points")

    @property
    def centre(self) -> float:
        """The value encoded as 0: the offset, else the bounds' midpoint."""
        return (self.bounds.lower + self.bounds.upper) / 2 if self.offset is None else self.offset

    @property
    def step(self) -> float:
        """The distance between neighbouring grid points."""
        if self.offset is None:
            return (self.bounds.upper - self.bounds.lower) / (2 * self.half_steps)
        return max(self.bounds.upper - self.offset, self.offset - self.bounds.lower) / self.half_steps

    @property
    def points(self) -> int:
        """The number of grid points, 2H + 1."""
        return 2 * self.half_steps + 1

    def encode(self, values: npt.ArrayLike) -> IntArray:
        """Drop NaN, clip to the bounds, round to the grid: integers in [-H, H] (the input is not mutated)."""
        array = np.asarray(values, dtype=np.float64)
        if array.ndim != 1:
            raise ParameterError(f"Grid: values (of shape {array.shape}) must be a vector")
        present = array[~np.isnan(array)]
        clipped = np.clip(present, self.bounds.lower, self.bounds.upper)
        codes = np.rint((clipped - self.centre) / self.step)
        return np.clip(codes, -self.half_steps, self.half_steps).astype(np.int64)

    def decode(self, codes: npt.ArrayLike) -> FloatArray:
        """Grid values of integer codes (or of real-valued code estimates)."""
        return np.asarray(self.centre + self.step * np.asarray(codes, dtype=np.float64), dtype=np.float64)

    def clipped_counts(self, values: npt.ArrayLike) -> IntArray:
        """Rows below ``lower`` and rows above ``upper`` (NaN in neither): a 2-cell histogram.

        One row is in at most one cell, so the vector has L1 and L2 sensitivity 1 per row.
        """
        array = np.asarray(values, dtype=np.float64)
        return np.array([int(np.sum(array < self.bounds.lower)), int(np.sum(array > self.bounds.upper))],
                        dtype=np.int64)
