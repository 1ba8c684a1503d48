"""The sparse vector technique, and clip-bound discovery built on it.

:class:`AboveThreshold` is Dwork & Roth's Algorithm 1 ("The Algorithmic Foundations of
Differential Privacy", 2014, Sec. 3.6) over integer-valued queries of L1 sensitivity Δ, with exact
discrete Laplace noise: the threshold gets noise of scale 2Δ/ε, each query noise of scale 4Δ/ε, and
the output is the index of the first query whose noisy answer reaches the noisy threshold (or
None). The proof only uses that the noise density ratio between neighbouring shifts is bounded by
exp(shift / scale), which the discrete Laplace shares with the continuous one for integer shifts;
queries and threshold are integers, so every shift is an integer. The mechanism is ε-DP however
many queries it examines, and so (ε²/2)-zCDP.

Drawing the noise of all queries in one vectorised call and then scanning is the same algorithm:
the output is the same function of the same independent random variables; noise drawn for queries
after the first positive one never influences the output.

:func:`discover_bounds` finds public clipping bounds for a numeric column without declared ones:
one AboveThreshold run for the lower bound (ascending geometric grid, queries "rows below g") and
one for the upper bound (descending grid, queries "rows above g"). Both queries have sensitivity 1
under add/remove-one-row. A run that never fires returns the end of the declared search range.

>>> grid = geometric_grid(0, 100)
>>> grid[:6], grid[-1]
((0.0, 1.0, 2.0, 4.0, 8.0, 16.0), 100.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dp.accounting import Measurement, ReleaseContext, charge
from dp.budget import PureBudget
from dp.errors import ParameterError
from dp.random import IntArray, NoiseSource

FloatArray = npt.NDArray[np.float64]


def _float_at_least(x: Fraction) -> float:
    f = float(x)
    return f if Fraction(f) >= x else math.nextafter(f, math.inf)


@dataclass(frozen=True)
class AboveThreshold:
    """Reports the first query whose noisy answer reaches a noisy threshold.

    Privacy: epsilon-DP for any number of queries, each of L1 sensitivity ``l1_sensitivity``,
    under the neighbouring relation of those queries (Dwork & Roth 2014, Thm. 3.23). The booked
    loss is recomputed from the rounded-up noise scales: max(2Δ / threshold_scale, 4Δ / query_scale).

    Attributes:
        l1_sensitivity: Sensitivity of each query (a positive integer).
        budget: The epsilon of the whole run.
    """

    l1_sensitivity: int
    budget: PureBudget
    _threshold_scale: float = field(init=False, repr=False, compare=False)
    _query_scale: float = field(init=False, repr=False, compare=False)

    name = "AboveThreshold (discrete Laplace)"

    def __post_init__(self) -> None:
        sensitivity = self.l1_sensitivity
        if isinstance(sensitivity, bool) or not isinstance(sensitivity, int) or sensitivity <= 0:
            raise ParameterError(f"AboveThreshold: l1_sensitivity ({self.l1_sensitivity!r}) must be a positive integer")
        if not isinstance(self.budget, PureBudget):
            raise ParameterError("AboveThreshold: budget must be a PureBudget (epsilon)")
        delta_q = Fraction(self.l1_sensitivity)
        object.__setattr__(self, "_threshold_scale", _float_at_least(2 * delta_q / self.budget.epsilon))
        object.__setattr__(self, "_query_scale", _float_at_least(4 * delta_q / self.budget.epsilon))

    def threshold_scale(self) -> float:
        """Scale of the threshold noise, >= 2Δ/ε."""
        return self._threshold_scale

    def query_scale(self) -> float:
        """Scale of each query's noise, >= 4Δ/ε."""
        return self._query_scale

    def scale(self) -> float:
        """The query noise scale (recorded in the ledger)."""
        return self._query_scale

    def sensitivity_text(self) -> str:
        """The declared per-query sensitivity, for the ledger."""
        return f"L1={self.l1_sensitivity} per query"

    def privacy_loss(self) -> PureBudget:
        """Epsilon implied by the scales actually used; never above the budget."""
        delta_q = Fraction(self.l1_sensitivity)
        return PureBudget(
            max(2 * delta_q / Fraction(self._threshold_scale), 4 * delta_q / Fraction(self._query_scale))
        )

    def run(self, answers: IntArray, threshold: int, noise: NoiseSource) -> int | None:
        """The index of the first query with noisy answer >= noisy threshold, or None.

        Callers go through :func:`run_above_threshold`, which charges the ledger first.
        """
        noisy_threshold = int(noise.discrete_laplace(np.asarray([threshold], dtype=np.int64), self._threshold_scale)[0])
        noisy = noise.discrete_laplace(np.asarray(answers, dtype=np.int64), self._query_scale)
        hits = np.flatnonzero(noisy >= noisy_threshold)
        return int(hits[0]) if hits.size else None


def run_above_threshold(
    mechanism: AboveThreshold,
    answers: IntArray,
    threshold: int,
    context: ReleaseContext,
    *,
    stage: str,
    query: str,
) -> tuple[int | None, Measurement]:
    """Charge the ledger for one AboveThreshold run, then run it."""
    record = charge(mechanism, context, stage=stage, query=query, cells=len(answers))
    return mechanism.run(answers, threshold, context.noise), record


def geometric_grid(low: float, high: float) -> tuple[float, ...]:
    """Candidate bounds inside [low, high]: the ends, 0 when inside, and ±2^k offsets.

    For a range that does not contain 0, the powers of two are offsets from the end nearer 0.
    """
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ParameterError(f"search_range ({low}, {high}) must be finite with low below high")
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
            point = origin + sign * 2.0**k
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
    """

    column: str
    lower: float
    upper: float
    lower_found: bool
    upper_found: bool
    measurements: tuple[Measurement, ...]


def svt_threshold(query_scale: float, queries: int) -> int:
    """The public count threshold: the query noise's (1 - 1/m) quantile scale, at least 1.

    A run fires once about this many rows lie beyond a candidate; queries with no such rows fire
    spuriously with probability about 1/(2m) each, so the whole scan with probability ~1/2 at most
    (which only widens the bounds, never narrows them below the data).
    """
    return max(1, math.ceil(query_scale * math.log(max(2, queries))))


def discover_bounds(
    column: str,
    counts: tuple[IntArray, IntArray],
    grid: tuple[float, ...],
    run_budget: PureBudget,
    context: ReleaseContext,
    *,
    stage: str = "bounds",
) -> DiscoveredBounds:
    """Discover lower and upper clipping bounds with two AboveThreshold runs of ``run_budget`` each.

    Args:
        column: The column name (public).
        counts: ``tail_counts(values, grid)``, summed over row groups.
        grid: The candidate points, ascending.
        run_budget: Epsilon of each of the two runs (the column costs both, composed).
        context: The ledger and noise source.
        stage: The ledger stage name.

    Returns:
        The bounds; lower < upper always holds (a crossing is resolved towards the search range).
    """
    below, above = counts
    mechanism = AboveThreshold(1, run_budget)
    threshold = svt_threshold(mechanism.query_scale(), len(grid))

    # Lower bound: ascending scan of "rows below g"; the bound is the last point before it fires.
    hit, lower_record = run_above_threshold(
        mechanism, below, threshold, context, stage=stage, query=f"lower bound of {column}"
    )
    lower_found = hit is not None and hit > 0
    lower = grid[hit - 1] if lower_found and hit is not None else grid[0]

    # Upper bound: descending scan of "rows above g"; the bound is the last point before it fires.
    descending = above[::-1].copy()
    hit, upper_record = run_above_threshold(
        mechanism, descending, threshold, context, stage=stage, query=f"upper bound of {column}"
    )
    upper_found = hit is not None and hit > 0
    upper = grid[len(grid) - hit] if upper_found and hit is not None else grid[-1]
    if not lower < upper:
        lower, upper, lower_found, upper_found = grid[0], grid[-1], False, False
    return DiscoveredBounds(column, lower, upper, lower_found, upper_found, (lower_record, upper_record))
