"""Sample-and-aggregate (Nissim, Raskhodnikova & Smith 2007; Dwork & Roth 2014, Sec. 7.3) for a registered function.

For a function with no useful sensitivity bound (a ratio of sums, a regression slope) the rows
are split into k disjoint chunks by labels drawn independently of the data (one secure label per
row), the function is evaluated on every chunk, each result is clamped to a public output range
[a, b] (a chunk with no defined result counts as the range's centre) and encoded on a public grid
over [a, b] (:class:`~dp.statistics.clipping.Grid`, integers in [−H, H]), and the sum of the k codes
is measured with the additive mechanism through :func:`dp.mechanisms.noise.measure`. The released
estimate is centre + step·S̃/k, clamped to [a, b].

Privacy: adding or removing one row changes one chunk (its label is independent of every other
row), whose code moves by at most 2H; with c rows per privacy unit at most c chunks change, so the
sum has L1 and L2 sensitivity at most 2Hc. The release is epsilon-DP (discrete Laplace) or rho-zCDP
(discrete Gaussian) at the loss of that mechanism, computed from its scale. The chunk labels are
drawn from the operating system's secure source (their distribution does not enter the argument,
only their independence from the data); a re-run replays the sealed noisy sum.

Error bar (closed form): ± step·h/k with h the noise's 95 % half-width. It covers the noise only:
the average of chunk results is itself an estimate of the function on the whole data, with the
sampling error of chunks of n/k rows (and the bias of clamping).

>>> float(REGISTERED["slope"](np.array([[0.0, 1.0], [1.0, 3.0], [2.0, 5.0]])))
2.0
>>> float(REGISTERED["ratio"](np.array([[2.0, 1.0], [2.0, 3.0]])))
1.0
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction  # noqa: F401  (doctest)
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget, positive_integer
from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext
from dprelease.dp.errors import ParameterError
from dprelease.dp.mechanisms.noise import Mechanism, additive_mechanism, measure
from dprelease.dp.mechanisms.random import IntArray
from dprelease.dp.statistics.clipping import DEFAULT_HALF_STEPS, ClipBounds, Grid

FloatArray = npt.NDArray[np.float64]
Function = Callable[[FloatArray], float]


def ratio_of_sums(rows: FloatArray) -> float:
    """Σ y / Σ x over rows (x, y); NaN when Σ x = 0."""
    x, y = rows[:, 0].sum(), rows[:, 1].sum()
    return float(y / x) if x != 0 else math.nan


def regression_slope(rows: FloatArray) -> float:
    """The least-squares slope of y on x over rows (x, y); NaN with fewer than 2 rows or constant x."""
    if len(rows) < 2:
        return math.nan
    x, y = rows[:, 0], rows[:, 1]
    dx = x - x.mean()
    denominator = float(np.dot(dx, dx))
    return float(np.dot(dx, y - y.mean()) / denominator) if denominator > 0 else math.nan


REGISTERED: Mapping[str, Function] = MappingProxyType({"ratio": ratio_of_sums, "slope": regression_slope})
"""The functions a release may aggregate, by name: each takes rows (x, y) of shape (m, 2)."""


def secure_labels(rows: int, chunks: int) -> IntArray:
    """One chunk label per row from the secure source (independent of the data; tiny modulo bias is harmless)."""
    raw = np.frombuffer(secrets.token_bytes(8 * rows), dtype=np.uint64)
    return np.asarray(raw % np.uint64(chunks), dtype=np.int64)


@dataclass(frozen=True)
class SampleAndAggregate:
    """Sample-and-aggregate of a registered function (see the module docstring).

    Attributes:
        function: The registered function's name.
        chunks: k, the number of chunks (public, >= 2).
        output_range: The public range [a, b] each chunk's result is clamped to.
        budget: Epsilon (discrete Laplace) or rho (discrete Gaussian).
        half_steps: H of the output grid.
        contributions: Rows per privacy unit (c).
    """

    function: str
    chunks: int
    output_range: ClipBounds
    budget: PureBudget | ZCDPBudget
    half_steps: int = DEFAULT_HALF_STEPS
    contributions: int = 1
    _mechanism: Mechanism = field(init=False, repr=False, compare=False)
    _grid: Grid = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        owner = "SampleAndAggregate"
        if self.function not in REGISTERED:
            raise ParameterError(f"{owner}: function ({self.function!r}) must be registered: {sorted(REGISTERED)}")
        object.__setattr__(self, "chunks", positive_integer(self.chunks, "chunks", owner))
        if self.chunks < 2:
            raise ParameterError(f"{owner}: chunks ({self.chunks}) must be at least 2")
        if not isinstance(self.output_range, ClipBounds):
            raise ParameterError(f"{owner}: output_range must be a ClipBounds")
        if not isinstance(self.budget, PureBudget | ZCDPBudget):
            raise ParameterError(f"{owner}: budget must be a PureBudget or a ZCDPBudget")
        object.__setattr__(self, "contributions", positive_integer(self.contributions, "contributions", owner))
        grid = Grid(self.output_range, self.half_steps)
        object.__setattr__(self, "_grid", grid)
        sensitivity = 2 * grid.half_steps * self.contributions
        object.__setattr__(self, "_mechanism", additive_mechanism(self.budget, sensitivity))

    @property
    def grid(self) -> Grid:
        """The public grid over the output range."""
        return self._grid

    def mechanism(self) -> Mechanism:
        """The additive mechanism of the sum of codes (sensitivity 2Hc)."""
        return self._mechanism

    def privacy_loss(self) -> PureBudget | ZCDPBudget:
        """The additive mechanism's loss at its scale; never above the budget."""
        return self._mechanism.privacy_loss()

    def chunk_codes(self, rows: npt.ArrayLike, labels: IntArray) -> IntArray:
        """Each chunk's result, clamped and encoded (NaN results count as the centre, code 0): raw data."""
        table = np.asarray(rows, dtype=np.float64)
        if table.ndim != 2 or table.shape[1] != 2:
            raise ParameterError(f"SampleAndAggregate: rows (of shape {table.shape}) must have two columns (x, y)")
        if len(labels) != len(table):
            raise ParameterError("SampleAndAggregate: labels must give one chunk per row")
        function = REGISTERED[self.function]
        results = np.array([function(table[labels == j]) for j in range(self.chunks)], dtype=np.float64)
        codes = np.zeros(self.chunks, dtype=np.int64)
        defined = ~np.isnan(results)
        codes[defined] = self._grid.encode(results[defined])
        return codes

    def estimate(self, noisy_sum: npt.ArrayLike) -> FloatArray:
        """The estimate centre + step·S̃/k, clamped to the output range (vectorised post-processing)."""
        mean_code = np.asarray(noisy_sum, dtype=np.float64) / self.chunks
        value = self._grid.centre + self._grid.step * mean_code
        return np.asarray(np.clip(value, self.output_range.lower, self.output_range.upper), dtype=np.float64)


@dataclass(frozen=True)
class AggregateResult:
    """One released sample-and-aggregate estimate.

    Attributes:
        function: The registered function.
        estimate: The released value.
        low: Lower end of the 95 % noise interval.
        high: Upper end.
        record: The measurement's provenance.
    """

    function: str
    estimate: float
    low: float
    high: float
    record: MeasurementRecord


def measure_aggregate(
    rows: npt.ArrayLike,
    plan: SampleAndAggregate,
    context: ReleaseContext,
    *,
    name: str,
    stage: str = "stats",
    labels: Callable[[int, int], IntArray] = secure_labels,
) -> AggregateResult:
    """Split, evaluate, clamp, encode, and measure the sum of chunk codes (booked, replayed on a re-run).

    Args:
        rows: The raw rows (x, y), shape (n, 2).
        plan: The function, chunks, output range and budget.
        context: The ledger and noise source.
        name: A public name of the estimate, e.g. ``slope(hours ~ age)``.
        stage: The ledger stage.
        labels: The chunk labels' source (the secure one in releases).

    Returns:
        The estimate with its closed-form 95 % noise interval.
    """
    table = np.asarray(rows, dtype=np.float64)
    codes = plan.chunk_codes(table, labels(len(table), plan.chunks))
    exact = np.array([int(codes.sum())], dtype=np.int64)
    noisy, record = measure(plan.mechanism(), exact, context, stage=stage,
                            query=f"sample and aggregate {plan.function}({name}), k={plan.chunks}")
    estimate = float(plan.estimate(noisy)[0])
    half = plan.grid.step * float(plan.mechanism().ci95_halfwidth()) / plan.chunks
    low = max(plan.output_range.lower, estimate - half)
    high = min(plan.output_range.upper, estimate + half)
    return AggregateResult(plan.function, estimate, low, high, record)
