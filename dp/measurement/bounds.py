"""Clipping bounds of numeric columns found with the sparse vector technique (booked in the ledger).

:func:`discover_bounds` finds public clipping bounds for a numeric column without declared ones:
one AboveThreshold run for the lower bound (ascending geometric grid, queries "rows below g") and
one for the upper bound (descending grid, queries "rows above g"). Both queries have sensitivity 1
under add/remove-one-row and are monotone (:class:`dp.mechanisms.svt.MonotoneAboveThreshold`). A run
that never fires returns the end of the declared search range. The bounds are DP outputs, public
once released.

>>> grid = geometric_grid(0, 100)
>>> grid[:6], grid[-1]
((0.0, 1.0, 2.0, 4.0, 8.0, 16.0), 100.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dprelease.dp.accounting.budget import PureBudget
from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext
from dprelease.dp.errors import ParameterError
from dprelease.dp.mechanisms.random import IntArray
from dprelease.dp.mechanisms.selection import ExponentialMechanism, run_selection
from dprelease.dp.mechanisms.svt import FloatArray, MonotoneAboveThreshold, run_above_threshold, svt_threshold


def geometric_grid(low: float, high: float, ratio: float = 2.0) -> tuple[float, ...]:
    """Candidate bounds inside [low, high]: the ends, 0 when inside, and ±ratio^k offsets (k >= 0).

    For a range that does not contain 0, the powers of ``ratio`` are offsets from the end nearer 0.
    """
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ParameterError(f"search_range ({low}, {high}) must be finite with low below high")
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 1.01 <= ratio <= 16:
        raise ParameterError(f"grid ratio ({ratio!r}) must be a number in [1.01, 16]")
    points = {float(low), float(high)}
    if low < 0 < high:
        points.add(0.0)
        anchors = [(0.0, 1.0), (0.0, -1.0)]
    elif low >= 0:
        anchors = [(float(low), 1.0)]
    else:
        anchors = [(float(high), -1.0)]
    for origin, sign in anchors:
        k = 0
        while True:
            point = origin + sign * float(ratio) ** k
            if not low < point < high:
                break
            points.add(point)
            k += 1
    return tuple(sorted(points))


def tail_counts(values: FloatArray, grid: tuple[float, ...]) -> tuple[IntArray, IntArray]:
    """For each grid point g: rows with value < g, and rows with value > g.

    Each count has sensitivity 1 under add/remove-one-row. NaN (missing) rows are in neither
    count; -inf is below and +inf above every point. Counts over row groups add up, so this is
    the map step of a map-reduce.
    """
    finite_or_inf = values[~np.isnan(values)]
    ordered = np.sort(finite_or_inf)
    points = np.asarray(grid, dtype=np.float64)
    below = np.searchsorted(ordered, points, side="left").astype(np.int64)
    above = (len(ordered) - np.searchsorted(ordered, points, side="right")).astype(np.int64)
    return below, above


@dataclass(frozen=True)
class DiscoveredBounds:
    """Bounds found by SVT for one column: DP outputs, public once released.

    Attributes:
        column: The column.
        lower: The lower clipping bound.
        upper: The upper clipping bound.
        lower_found: False when the lower run never fired (fell back to the search range).
        upper_found: False when the upper run never fired.
        measurements: The two AboveThreshold runs' provenance.
        lower_steps: Grid points (doublings) between the lower bound and the search range's low end.
        upper_steps: Grid points (doublings) between the upper bound and the search range's high end.
        thresholds: The two runs' thresholds (public): a run fires once about that many rows lie beyond
            a point, so a found bound clamps about that many rows or fewer (plus the noise).
    """

    column: str
    lower: float
    upper: float
    lower_found: bool
    upper_found: bool
    measurements: tuple[MeasurementRecord, ...]
    lower_steps: int = 0
    upper_steps: int = 0
    thresholds: tuple[float, float] = (0.0, 0.0)

    def quality(self) -> tuple[str, str]:
        """A public quality flag of each bound, from the DP outputs and the public grid only."""
        def flag(found: bool, steps: int, threshold: float, end: str) -> str:
            if not found:
                return (f"not found: the {end} of the search range (fewer than about {threshold:.0f} rows lie beyond "
                        "any candidate; the bound may be far wider than the data)")
            edge = "at the search range's edge: the data may reach beyond it" if steps == 0 else \
                f"{steps} doubling{'s' if steps != 1 else ''} inside the search range's {end}"
            return f"found {edge}; about {threshold:.0f} rows or fewer (plus noise) lie beyond it"
        return (flag(self.lower_found, self.lower_steps, self.thresholds[0], "low end"),
                flag(self.upper_found, self.upper_steps, self.thresholds[1], "high end"))


def discover_bounds(
    column: str,
    counts: tuple[IntArray, IntArray],
    grid: tuple[float, ...],
    run_budget: PureBudget,
    context: ReleaseContext,
    *,
    sensitivity: int,
    stage: str = "bounds",
    cheap_widening: bool = False,
) -> DiscoveredBounds:
    """Discover lower and upper clipping bounds with two monotone AboveThreshold runs of ``run_budget`` each.

    Args:
        column: The column name (public).
        counts: ``tail_counts(values, grid)``, summed over row groups.
        grid: The candidate points, ascending.
        run_budget: Epsilon of each of the two runs (the column costs both, composed).
        context: The ledger and noise source.
        sensitivity: How much one privacy unit can move each tail count: 1 for row-level privacy,
            k when contributions are bounded to k rows per id.
        stage: The ledger stage name.
        cheap_widening: Whether a too wide bound costs little (public: the column is binned ``log``);
            then the threshold is lower (:func:`svt_threshold`).

    Returns:
        The bounds; lower < upper always holds (a crossing is resolved towards the search range).
    """
    below, above = counts
    # "Rows below g" over ascending g (and "rows above g" over descending g) are monotone: adding a
    # privacy unit raises every count of a scan by 0 to Δ, removing one lowers them all. So the
    # monotone AboveThreshold applies, with query noise 2Δ/ε instead of 4Δ/ε for the same ε.
    mechanism = MonotoneAboveThreshold(sensitivity, run_budget)
    # The grid's origin is 0 when the range holds it, else its end nearer 0 (geometric_grid): a side
    # whose candidates run away from it doubles the range with each spurious step.
    lower_threshold, upper_threshold = (
        svt_threshold(mechanism.query_scale(), len(grid), cheap_widening=cheap_widening, away_from_origin=away,
                      threshold_scale=mechanism.threshold_scale())
        for away in (grid[0] < 0, grid[-1] > 0)
    )

    # Lower bound: ascending scan of "rows below g"; the bound is the last point before it fires.
    hit, lower_record = run_above_threshold(
        mechanism, below, lower_threshold, context, stage=stage, query=f"lower bound of {column}"
    )
    lower_found = hit is not None and hit > 0
    lower = grid[hit - 1] if lower_found and hit is not None else grid[0]

    # Upper bound: descending scan of "rows above g"; the bound is the last point before it fires.
    descending = above[::-1].copy()
    hit, upper_record = run_above_threshold(
        mechanism, descending, upper_threshold, context, stage=stage, query=f"upper bound of {column}"
    )
    upper_found = hit is not None and hit > 0
    upper = grid[len(grid) - hit] if upper_found and hit is not None else grid[-1]
    if not lower < upper:
        lower, upper, lower_found, upper_found = grid[0], grid[-1], False, False
    return DiscoveredBounds(column, lower, upper, lower_found, upper_found, (lower_record, upper_record),
                            lower_steps=grid.index(lower), upper_steps=len(grid) - 1 - grid.index(upper),
                            thresholds=(float(lower_threshold), float(upper_threshold)))



EDGE_PRIOR_RATIO = 8
"""Base-measure ratio of :func:`select_edge_bounds`: each candidate one step further out weighs half."""


def edge_scores(beyond: IntArray, scale: float, prior_ratio: float = EDGE_PRIOR_RATIO) -> FloatArray:
    """Scores of :func:`select_edge_bounds` for candidates ordered outwards: −rows beyond − scale·j·ln(ratio).

    The second term is public (it depends on the candidate's position j only), so the scores'
    sensitivity is that of the counts; it is the base measure ratio^(−j) of the exponential mechanism.
    """
    steps = np.arange(len(beyond), dtype=np.float64)
    return np.asarray(-np.asarray(beyond, dtype=np.float64) - scale * math.log(prior_ratio) * steps, dtype=np.float64)


def select_edge_bounds(
    column: str,
    counts: tuple[IntArray, IntArray],
    grid: tuple[float, ...],
    run_budget: PureBudget,
    context: ReleaseContext,
    *,
    sensitivity: int,
    stage: str = "bounds",
    lower_public: bool = False,
    prior_ratio: float = EDGE_PRIOR_RATIO,
) -> DiscoveredBounds:
    """Clip bounds for a mean: each end chosen by the exponential mechanism near the data's edge.

    The upper bound is a candidate g selected with probability ∝ exp(−#{rows above g} / s) · r^(−j)
    (s the mechanism's scale 2Δ/ε, j the candidate's index from the bottom, r = ``prior_ratio``): the
    data's edge, where no row lies beyond, is likeliest, each doubling further out r times less likely
    (a wider bound costs noise; r = 8 makes the expected squared bound finite over any range), and a
    candidate inside the data k doublings is chosen over the edge only when fewer than about
    s·k·ln r rows lie beyond it (an early stop clips them: bias). The base measure counts from the
    range's low end, so a column whose bulk lies many doublings below its edge with few rows (small
    n·ε) is pulled inside: about s·ln r rows per doubling between the bulk and the edge. The lower bound mirrors it
    (−#{rows below g}, index from the top). Unlike the inward AboveThreshold scans of
    :func:`discover_bounds`, whose bound leaves about ln(m) noise scales of rows beyond, and an
    outward scan, which falls back to the range's end when its noisy threshold is high (about one
    run in twenty-five here), a selection always returns a candidate, and a range wider than the
    data reaches its end with probability about 2^(−doublings beyond the data).

    Privacy: the counts have sensitivity Δ per privacy unit and the base measure is public, so
    each selection is ``run_budget``-DP (:class:`~dp.mechanisms.selection.ExponentialMechanism`,
    McSherry & Talwar 2007); the column costs two selections. Each goes through
    :func:`~dp.mechanisms.selection.run_selection` (charge, draw, seal; a re-run replays).

    With ``lower_public`` only the upper end is selected (one selection) and the lower bound is the
    search range's low end (for a column known to lie above it, such as a count or a duration).

    Returns:
        The bounds; ``*_found`` is False when a bound is the search range's end; lower < upper
        always holds (a crossing moves the upper bound to the next candidate above the lower one).
    """
    if isinstance(prior_ratio, bool) or not isinstance(prior_ratio, int | float) or not 1 <= prior_ratio < math.inf:
        raise ParameterError(f"{column}: prior_ratio ({prior_ratio!r}) must be a finite number >= 1")
    below, above = counts
    mechanism = ExponentialMechanism(sensitivity, run_budget)
    scale = mechanism.scale()
    hit, upper_record = run_selection(mechanism, edge_scores(above, scale, prior_ratio), context, stage=stage,
                                      query=f"upper bound of {column} (edge)")
    upper, records = grid[hit], [upper_record]
    lower = grid[0]
    if not lower_public:
        hit, lower_record = run_selection(mechanism, edge_scores(np.asarray(below)[::-1], scale, prior_ratio), context,
                                          stage=stage, query=f"lower bound of {column} (edge)")
        lower = grid[len(grid) - 1 - hit]
        records.insert(0, lower_record)
    if not lower < upper:
        upper = grid[min(grid.index(lower) + 1, len(grid) - 1)]
        lower = grid[grid.index(upper) - 1]
    return DiscoveredBounds(column, lower, upper, lower != grid[0], upper != grid[-1], tuple(records),
                            lower_steps=grid.index(lower), upper_steps=len(grid) - 1 - grid.index(upper))
