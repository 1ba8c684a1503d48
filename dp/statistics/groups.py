"""One quantile per public group, in one charge: the exponential mechanism under parallel composition.

The rows are split by a public key (a category column's declared categories, and null when it is
nullable) into disjoint groups, and one :class:`~dp.statistics.quantiles.QuantileMechanism` runs on
each group's values. Adding or removing one privacy unit of at most c rows changes the rows of at
most min(c, G) of the G groups, and inside each of those the scores move by at most the mechanism's
Δ = c·max(q, 1 − q) (the quantile module's sensitivity covers all c rows landing in one group). The
other groups' outputs have the same law on both inputs, and the groups' draws are independent, so
the vector of released values is (min(c, G)·ε)-DP and (min(c, G)·ε²/8)-zCDP, ε the per-group loss
(parallel composition, McSherry 2009, Thm. 4, with the per-group mechanism's bounded range).
``docs/proofs/grouped_quantiles.md`` writes the argument out. With row-level privacy (c = 1) the
whole vector costs what one group costs.

The release's use: a numeric column that is a public function of a category column whose values are
not public (``mapping: private`` in a schema: the population density of each geography unit) gets
each group's median on a grid of the column's declared resolution. When every row of a group holds
the same grid value, that value is one run of the quantile mechanism's candidates with score 0 and
every other candidate scores −n_g/2, so the released value is the group's own with probability at
least 1 − (M + 1)·exp(−ε n_g / 2) — exact, not blurred (an empty group gets a uniform grid point).

>>> from fractions import Fraction
>>> from dprelease.dp.accounting.budget import PureBudget
>>> grid = resolution_grid(0.0, 1.0, 0.25)
>>> grid.points, grid.step
(5, 0.25)
>>> m = GroupedQuantile(QuantileMechanism(grid, Fraction(1, 2), PureBudget(Fraction(1))), groups=3)
>>> m.privacy_loss(), m.zcdp_loss()
(PureBudget(epsilon=Fraction(1, 1)), ZCDPBudget(rho=Fraction(1, 8)))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget, positive_integer
from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext, noisy_result
from dprelease.dp.errors import ParameterError
from dprelease.dp.measurement.marginals import ColumnDomain, encode_category
from dprelease.dp.mechanisms.random import IntArray, NoiseSource
from dprelease.dp.mechanisms.selection import SelectionNoise
from dprelease.dp.statistics.clipping import ClipBounds, Grid
from dprelease.dp.statistics.quantiles import SECURE_UNIFORM, QuantileMechanism, UniformSource

FloatArray = npt.NDArray[np.float64]

MAX_HALF_STEPS = 2**20
"""The largest grid a resolution may ask for (:class:`~dp.statistics.clipping.Grid`'s limit)."""


def resolution_grid(lower: float, upper: float, resolution: float) -> Grid:
    """The grid lower, lower + r, lower + 2r, ... reaching ``upper`` (extended by at most one step).

    Raises:
        ParameterError: If the resolution is not positive and finite, or asks for more than 2**21 steps.
    """
    if not (math.isfinite(resolution) and resolution > 0):
        raise ParameterError(f"resolution ({resolution!r}) must be a positive finite number")
    steps = math.ceil((upper - lower) / resolution - 1e-9)
    half = max(1, math.ceil(steps / 2))
    if half > MAX_HALF_STEPS:
        raise ParameterError(f"resolution ({resolution:g}) over [{lower:g}, {upper:g}] needs {2 * half} grid steps; "
                             f"at most {2 * MAX_HALF_STEPS} are supported")
    return Grid(ClipBounds(lower, lower + 2 * half * resolution), half_steps=half)


def grid_value(grid: Grid, index: int, decimals: int) -> float:
    """The value of grid point ``index`` (0..M), rounded to ``decimals`` (post-processing of a DP output)."""
    return round(grid.bounds.lower + index * grid.step, decimals)


def decimals_of(resolution: float) -> int:
    """Decimal places that write every multiple of ``resolution`` (0.1 -> 1, 0.25 -> 2, 5 -> 0)."""
    for places in range(0, 13):
        if abs(round(resolution, places) - resolution) <= 1e-12 * max(1.0, abs(resolution)):
            return places
    return 12


@dataclass(frozen=True)
class GroupedQuantile:
    """The same quantile mechanism on each of ``groups`` disjoint groups: one charge (parallel composition).

    Attributes:
        mechanism: The per-group mechanism (grid, level, per-group budget, rows per privacy unit).
        groups: The public number of groups G.
    """

    mechanism: QuantileMechanism
    groups: int

    name = "exponential mechanism over intervals, per group (parallel composition)"

    def __post_init__(self) -> None:
        if not isinstance(self.mechanism, QuantileMechanism):
            raise ParameterError("GroupedQuantile: mechanism must be a QuantileMechanism")
        object.__setattr__(self, "groups", positive_integer(self.groups, "groups", "GroupedQuantile"))

    def touched(self) -> int:
        """Groups one privacy unit can change: min(c, G)."""
        return min(self.mechanism.contributions, self.groups)

    def privacy_loss(self) -> PureBudget:
        """min(c, G)·ε, ε the per-group loss."""
        return PureBudget(self.mechanism.privacy_loss().epsilon * self.touched())

    def zcdp_loss(self) -> ZCDPBudget:
        """min(c, G)·ε²/8: zCDP of the touched groups' bounded-range draws, composed."""
        return ZCDPBudget(self.mechanism.zcdp_loss().rho * self.touched())

    def scale(self) -> float:
        """The per-group exponential mechanism's scale."""
        return self.mechanism.scale()

    def sensitivity_text(self) -> str:
        """The per-group score sensitivity and the parallel composition."""
        return f"{self.mechanism.sensitivity_text()}; {self.groups} disjoint groups, a unit in at most {self.touched()}"

    def noise_sd(self) -> float | None:
        """No additive noise (see :meth:`QuantileMechanism.rank_error_bound`)."""
        return None

    def ci95_halfwidth(self) -> float | None:
        """No additive noise."""
        return None

    def draw(self, codes: Sequence[IntArray], noise: NoiseSource | SelectionNoise,
             uniform: UniformSource) -> list[int]:
        """One grid index (0..M) per group; releases go through :func:`measure_group_quantiles`."""
        if len(codes) != self.groups:
            raise ParameterError(f"GroupedQuantile: {len(codes)} groups of values for {self.groups} declared")
        return [self.mechanism.draw(group, noise, uniform) for group in codes]


def group_index(column: pa.ChunkedArray, categories: Sequence[str], on_unknown: str = "drop") -> IntArray:
    """Each row's group, 0..len(categories)-1, or -1 (a null; a label outside them with ``on_unknown: drop``).

    Labels are matched by the marginals' own matching (:func:`dp.measurement.marginals.encode_category`): as
    strings (an integer code 7 is the category ``"7"``), in Unicode NFC, and a label outside the categories goes
    where the schema's ``on_unknown`` sends it. A row-by-row public rule: one row is in one group at most.

    >>> group_index(pa.chunked_array([["b", "cafe\u0301", None, "x"]]), ["b", "café"]).tolist()
    [0, 1, -1, -1]
    >>> group_index(pa.chunked_array([[7, 9]]), ["7", "8"], on_unknown="8").tolist()
    [0, 1]
    """
    code, missing, unknown = encode_category(column, ColumnDomain("groups", "category", tuple(categories)))
    groups = code.astype(np.int64)
    if unknown is not None:
        groups[unknown] = -1 if on_unknown == "drop" else list(categories).index(on_unknown)
    if missing is not None:
        groups[missing] = -1
    return groups


def group_codes(values: FloatArray, groups: IntArray, count: int, grid: Grid) -> list[IntArray]:
    """Each group's values on the grid (NaN dropped, clipped): rows with group g in 0..count-1; others dropped."""
    if values.shape != groups.shape:
        raise ParameterError("group_codes: values and groups must have the same length")
    order = np.argsort(groups, kind="stable")
    sorted_groups = groups[order]
    edges = np.searchsorted(sorted_groups, np.arange(count + 1))
    return [grid.encode(values[order[edges[g]:edges[g + 1]]]) for g in range(count)]


def measure_group_quantiles(
    codes: Sequence[IntArray],
    mechanism: GroupedQuantile,
    context: ReleaseContext,
    *,
    query: str,
    stage: str = "bounds",
    uniform: UniformSource = SECURE_UNIFORM,
) -> tuple[list[int], MeasurementRecord]:
    """Every group's released grid index, booked once (replayed on a re-run of the release).

    Args:
        codes: Each group's values, encoded on the mechanism's grid (:func:`group_codes`). Raw.
        mechanism: The grouped mechanism.
        context: The ledger and the secure noise source.
        query: What is measured (public), unique within the release.
        stage: The ledger stage.
        uniform: The source of the point inside a selected run (the secure one in releases).

    Returns:
        One grid index per group and the measurement's record.
    """
    def draw(noise: NoiseSource) -> list[int]:
        return mechanism.draw(codes, noise, uniform)

    return noisy_result(mechanism, context, draw, stage=stage, query=query,
                        cells=mechanism.groups * mechanism.mechanism.grid.points, sealed_as="indices",
                        encode=list, decode=lambda payload: [int(i) for i in payload])


def value_grid(lower: float, upper: float, kind: str) -> Grid:
    """The candidate grid of a column's quantiles.

    Whole numbers for an int column (step 1, or a power of two when the range is wider than 2**21), 2**21
    steps for a float column.
    """
    if kind == "int":
        step = 1.0
        while (upper - lower) / step > 2 * MAX_HALF_STEPS:
            step *= 2
        return resolution_grid(math.floor(lower), upper, step)
    return Grid(ClipBounds(lower, upper), half_steps=MAX_HALF_STEPS)


def quantile_edges(
    values: FloatArray,
    grid: Grid,
    bins: int,
    group_budget: PureBudget | ZCDPBudget,
    context: ReleaseContext,
    *,
    column: str,
    kind: str,
    upper: float,
    contributions: int = 1,
    spikes: Sequence[float] = (),
    stage: str = "bounds",
    uniform: UniformSource = SECURE_UNIFORM,
) -> tuple[tuple[float, ...], tuple[MeasurementRecord, ...]]:
    """Bin edges at DP quantiles, by recursive medians: level ℓ splits each of the 2^ℓ ranges at its median.

    Level 1 releases the median of all values; level 2 the medians of the values below it and of those
    at or above it; and so on for log2(``bins``) levels. The ranges of a level are fixed by the earlier
    levels' released values (public), so each level is one :class:`GroupedQuantile` (one charge of
    ``group_budget`` times the groups a unit can touch, parallel composition), and the levels compose
    sequentially. A released point outside its range is moved to the nearer end (post-processing).

    Edges (:func:`edges_from_quantiles`): the lower bound, the released values, the upper bound, and after
    a value released twice (or equal to the lower bound) the next grid value, so that a spike (zero income,
    a top code) gets a bin of its own.

    Args:
        values: The column's raw values (NaN for null: dropped), any length.
        grid: The candidate grid (:func:`value_grid`), its lower end the column's lower bound.
        bins: A power of two: 2^levels ranges.
        group_budget: Each group's median budget.
        context: The ledger and the secure noise source.
        column: The column (public), for the ledger's queries.
        kind: ``int`` or ``float``.
        upper: The column's upper bound (the grid may reach one step beyond it).
        contributions: Rows per privacy unit.
        spikes: Public values with a bin of their own: rows holding one are left out of the medians (a
            choice made row by row, so the sensitivity is unchanged).
        stage: The ledger stage.
        uniform: The source of the point inside a selected run.

    Returns:
        The edges (strictly ascending) and one record per level.
    """
    levels = int(bins).bit_length() - 1
    if levels < 1 or 2**levels != bins:
        raise ParameterError(f"quantile bins ({bins!r}) must be a power of two, at least 2")
    lower = grid.bounds.lower
    finite = np.asarray(values, dtype=np.float64)
    finite = np.clip(finite[~np.isnan(finite)], lower, upper)
    if spikes:
        finite = finite[~np.isin(finite, np.asarray(spikes, dtype=np.float64))]
    released: list[float] = []
    records = []
    places = decimals_of(grid.step) if kind == "int" else 15
    for level in range(levels):
        cuts = sorted(released)
        ranges = [lower, *cuts, upper]
        groups = np.searchsorted(np.asarray(cuts, dtype=np.float64), finite, side="right").astype(np.int64)
        codes = group_codes(finite, groups, 2**level, grid)
        mechanism = GroupedQuantile(QuantileMechanism(grid, Fraction(1, 2), group_budget, contributions), 2**level)
        drawn, record = measure_group_quantiles(codes, mechanism, context, stage=stage, uniform=uniform,
                                                query=f"quantile bins of {column}: level {level + 1} of {levels}")
        for g, index in enumerate(drawn):
            released.append(min(max(grid_value(grid, index, places), ranges[g]), ranges[g + 1]))
        records.append(record)
    return edges_from_quantiles(released, lower, upper, kind, grid.step), tuple(records)


def edges_from_quantiles(released: Sequence[float], lower: float, upper: float, kind: str,
                         step: float) -> tuple[float, ...]:
    """Bin edges from released quantiles (post-processing); a repeated value (or the lower bound) is a spike.

    >>> edges_from_quantiles([0, 0, 5, 40], -10, 100, "int", 1.0)
    (-10.0, 0.0, 1.0, 5.0, 40.0, 101.0)
    >>> edges_from_quantiles([2.5, 7.5], 0.0, 10.0, "float", 0.5)
    (0.0, 2.5, 7.5, 10.0)
    """
    top = math.floor(upper) + 1.0 if kind == "int" else float(upper)
    low = float(math.floor(lower)) if kind == "int" else float(lower)
    points = [low, *(float(v) for v in released)]
    seen: dict[float, int] = {}
    for v in points:
        seen[v] = seen.get(v, 0) + 1
    edges = {low, top, *points}
    for v, times in seen.items():
        if times > 1 and v + step < top:
            edges.add(v + step)
    return tuple(sorted(e for e in edges if low <= e <= top))
