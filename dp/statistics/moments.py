"""Clipped count, sum, mean, variance and standard deviation, with 95 % intervals and a clipping flag.

Measurement (:func:`measure_moments`): the values of a column are encoded on a public grid
(:class:`~dp.statistics.clipping.Grid`: clipped to public bounds, rounded to integers k in [-H, H]
around the bounds' centre) and three integer queries are measured with the additive mechanism of
the budget's kind (discrete Laplace for epsilon, discrete Gaussian for rho), each through
:func:`dp.mechanisms.noise.measure` (replay, else charge, draw from the secure source, seal):

* the count n (sensitivity c, for c rows per privacy unit),
* the sum S = Σ k (sensitivity c·H),
* the sum of squares Q = Σ k² (sensitivity c·H²),

each with its share of the budget (the textbook exercise: sequential composition of the three
queries, by default an even split; the weights are public parameters). Optionally a fourth share
measures the 2-cell histogram (rows below ``lower``, rows above ``upper``), sensitivity c: the
only source of the clipping-bias flag (the share of clipped rows is not public).

Privacy (:meth:`MomentsMechanism.privacy_loss`): the sum of the parts' losses (sequential
composition), each computed from the noise scale actually used; never above the budget.
Neighbouring relation: add or remove one privacy unit of at most c rows.

Post-processing (:class:`NoisyMoments`): mean = centre + step·S̃/ñ and variance =
step²·(Q̃/ñ − (S̃/ñ)²) (population variance of the clipped values), projected into their feasible
ranges. Intervals: the count's is the closed form of the noise (:meth:`ci95_halfwidth`); the sum's,
mean's, variance's and std's are simulated from the published mechanism (fresh noise of the
published scales added to the published, projected values, seeded generator; the basic
bootstrap interval). They cover the noise only: the statistic is the clipped data's. When the bounds can
clip on one side only (``ClipBounds.clip_side``), the mean's and the sum's 95 % intervals leave less of
their 5 % on the side the true value lies towards (:func:`~dp.statistics.simulate.interval_tails`).

>>> grid = Grid(ClipBounds(0.0, 100.0), half_steps=50)
>>> m = MomentsMechanism(grid, PureBudget(Fraction(3)))
>>> {name: (part.l1_sensitivity, part.privacy_loss().epsilon) for name, part in m.parts().items()}
{'count': (1, Fraction(1, 1)), 'sum': (50, Fraction(1, 1)), 'sum_of_squares': (2500, Fraction(1, 1))}
>>> m.privacy_loss()
PureBudget(epsilon=Fraction(3, 1))
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget, positive_integer
from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext
from dprelease.dp.errors import InternalError, ParameterError
from dprelease.dp.mechanisms.noise import Mechanism, additive_mechanism, measure
from dprelease.dp.mechanisms.random import IntArray, synthetic_generator
from dprelease.dp.statistics.clipping import ClipBounds, Grid
from dprelease.dp.statistics.simulate import SIMULATIONS, basic_interval, interval_tails, noise_draws

FloatArray = npt.NDArray[np.float64]

QUERIES = ("count", "sum", "sum_of_squares", "clipped")
DEFAULT_WEIGHTS: Mapping[str, int] = MappingProxyType({"count": 1, "sum": 1, "sum_of_squares": 1, "clipped": 0})
MEAN_WEIGHTS: Mapping[str, int] = MappingProxyType({"count": 1, "sum": 1, "sum_of_squares": 0, "clipped": 0})


@dataclass(frozen=True)
class MomentsMechanism:
    """The plan of one column's moments: grid, budget, split and contribution bound.

    Attributes:
        grid: The public grid (clipping bounds and resolution).
        budget: The whole budget of the column's moments (epsilon: discrete Laplace; rho: discrete Gaussian).
        weights: Shares of ``count``, ``sum``, ``sum_of_squares`` and ``clipped`` (0 leaves a query out;
            ``count`` is required, ``sum_of_squares`` only for a variance).
        contributions: The most rows one privacy unit has (c; 1 for row-level privacy).
    """

    grid: Grid
    budget: PureBudget | ZCDPBudget
    weights: Mapping[str, int | Fraction] = field(default_factory=lambda: DEFAULT_WEIGHTS)
    contributions: int = 1
    _parts: Mapping[str, Mechanism] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        owner = "MomentsMechanism"
        if not isinstance(self.grid, Grid):
            raise ParameterError(f"{owner}: grid must be a Grid")
        if not isinstance(self.budget, PureBudget | ZCDPBudget):
            raise ParameterError(f"{owner}: budget must be a PureBudget or a ZCDPBudget")
        unknown = set(self.weights) - set(QUERIES)
        if unknown:
            raise ParameterError(f"{owner}: weights ({sorted(unknown)}) must name only {list(QUERIES)}")
        object.__setattr__(self, "contributions", positive_integer(self.contributions, "contributions", owner))
        weights = {name: self.weights.get(name, 0) for name in QUERIES}
        if not weights["count"]:
            raise ParameterError(f"{owner}: weights.count must be positive; every statistic divides by the count")
        shares = self.budget.split(weights)
        c, h = self.contributions, self.grid.half_steps
        sensitivity = {"count": c, "sum": c * h, "sum_of_squares": c * h * h, "clipped": c}
        parts = {name: additive_mechanism(share, sensitivity[name]) for name, share in shares.items()}
        object.__setattr__(self, "_parts", MappingProxyType(parts))

    def parts(self) -> Mapping[str, Mechanism]:
        """The additive mechanism of each measured query (count, sum, ...)."""
        return self._parts

    def privacy_loss(self) -> PureBudget | ZCDPBudget:
        """The sum of the parts' actual losses (sequential composition); never above the budget."""
        losses = [part.privacy_loss() for part in self._parts.values()]
        total = sum((loss.amount for loss in losses), Fraction(0))
        result = PureBudget(total) if isinstance(self.budget, PureBudget) else ZCDPBudget(total)
        if result.amount > self.budget.amount:  # pragma: no cover - each part fits its share
            raise InternalError("MomentsMechanism: the parts' losses exceed the budget; this is a bug")
        return result

    def exact_answers(self, values: npt.ArrayLike) -> dict[str, npt.NDArray[np.int64]]:
        """The exact integer answers of the measured queries (raw data: never leaves this module un-noised)."""
        codes = self.grid.encode(values)
        answers = {
            "count": np.array([len(codes)], dtype=np.int64),
            "sum": np.array([int(codes.sum())], dtype=np.int64),
            "sum_of_squares": np.array([int(np.dot(codes, codes))], dtype=np.int64),
            "clipped": self.grid.clipped_counts(values),
        }
        return {name: answers[name] for name in self._parts}

    def exact_answers_by_group(self, values: npt.ArrayLike, groups: npt.ArrayLike,
                               count: int) -> dict[str, npt.NDArray[np.int64]]:
        """:meth:`exact_answers` of every group 0..count-1 at once, each query's answers in group order.

        One pass over the rows (sorted by group once), not one per group: the same integers as
        ``np.concatenate([exact_answers(values[groups == g])[name] for g in range(count)])``. Raw data.
        """
        array, group = np.asarray(values, dtype=np.float64), np.asarray(groups, dtype=np.int64)
        inside = (group >= 0) & (group < count)
        present = inside & ~np.isnan(array)
        order = np.argsort(group[present], kind="stable")
        codes, sorted_groups = self.grid.encode(array[present])[order], group[present][order]
        edges = np.searchsorted(sorted_groups, np.arange(count + 1))

        def per_group(terms: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
            running = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(terms, dtype=np.int64)])
            return np.asarray(running[edges[1:]] - running[edges[:-1]], dtype=np.int64)  # exact integers

        below = np.bincount(group[inside & (array < self.grid.bounds.lower)], minlength=count)
        above = np.bincount(group[inside & (array > self.grid.bounds.upper)], minlength=count)
        answers = {"count": np.diff(edges).astype(np.int64), "sum": per_group(codes),
                   "sum_of_squares": per_group(codes * codes),
                   "clipped": np.column_stack([below, above]).astype(np.int64).ravel()}
        return {name: answers[name] for name in self._parts}


@dataclass(frozen=True)
class Estimate:
    """One published statistic: its estimate and a 95 % interval of its noise.

    Attributes:
        statistic: ``count``, ``sum``, ``mean``, ``variance`` or ``std``.
        estimate: The DP estimate.
        low: Lower end of the 95 % interval.
        high: Upper end of the 95 % interval.
        method: How the interval was obtained (``closed form`` or ``simulation``).
    """

    statistic: str
    estimate: float
    low: float
    high: float
    method: str


@dataclass(frozen=True)
class ClippingReport:
    """What a DP count says about clipping (the true share of clipped rows is not public).

    Attributes:
        measured: Whether the clipped rows were counted (a share of the budget); if not, nothing is known.
        below: Noisy count of rows below the lower bound (None if not measured).
        above: Noisy count of rows above the upper bound.
        halfwidth: Half-width of a 95 % interval of each noisy count.
        flagged: True when either noisy count exceeds twice its 95 % half-width (when no row is clipped, a
            false flag has probability about 0.13 % per side under discrete Laplace noise, 0.01 % under
            discrete Gaussian): clipping is detected, and the
            clipped mean is biased upward (rows below) and/or downward (rows above) by an amount the
            release cannot bound (the clipped values are not known).
    """

    measured: bool
    below: int | None = None
    above: int | None = None
    halfwidth: float | None = None
    flagged: bool | None = None

    def share(self, count: float) -> tuple[float, float] | None:
        """Noisy shares of rows below and above, given a noisy count (None if not measured)."""
        if self.below is None or self.above is None:
            return None
        n = max(count, 1.0)
        return max(self.below, 0) / n, max(self.above, 0) / n


@dataclass(frozen=True)
class NoisyMoments:
    """The noisy count, sum and sum of squares of one column's encoded values, and their post-processing.

    Attributes:
        column: The column (public).
        grid: The public grid.
        mechanism: The plan the values were measured with.
        noisy: The noisy integer answers by query name.
        records: The measurements' provenance.
        seed: The public seed of the interval simulations.
    """

    column: str
    grid: Grid
    mechanism: MomentsMechanism
    noisy: Mapping[str, tuple[int, ...]]
    records: tuple[MeasurementRecord, ...]
    seed: int
    _drawn: dict[str, FloatArray] = field(default_factory=dict, init=False, repr=False, compare=False)
    _generator: list[np.random.Generator] = field(default_factory=list, init=False, repr=False, compare=False)

    def _plug_in(self) -> tuple[float, float, float]:
        """The noisy (n, S, Q) projected onto the feasible set: n >= 1, |S| <= H n, S²/n <= Q <= H² n."""
        h = self.grid.half_steps
        n = max(float(self.noisy["count"][0]), 1.0)
        s = float(np.clip(self.noisy["sum"][0], -h * n, h * n)) if "sum" in self.noisy else 0.0
        q = float(np.clip(self.noisy["sum_of_squares"][0], s * s / n, h * h * n)) \
            if "sum_of_squares" in self.noisy else s * s / n
        return n, s, q

    def _replicates(self, names: tuple[str, ...]) -> dict[str, FloatArray]:
        """Simulated answers of ``names``, drawn in that order from the generator of :attr:`seed`.

        The statistics ask for prefixes of one order (count, sum, sum of squares), so the draws are kept with
        the generator after them and a longer prefix continues it: the same numbers as drawing afresh, each
        drawn once per object (a group's mean and std drew the count and the sum twice). Read-only arrays.
        """
        drawn: dict[str, FloatArray] = self._drawn
        have = tuple(drawn)
        if names[:len(have)] != have[:len(names)]:  # not a prefix of what was drawn: afresh, not kept
            return self._draw(names, synthetic_generator(self.seed), {})
        if len(names) > len(have):
            rng = self._generator[0] if have else synthetic_generator(self.seed)
            self._draw(names[len(have):], rng, drawn)
            self._generator[:] = [rng]
        return {name: drawn[name] for name in names}

    def _draw(self, names: tuple[str, ...], rng: np.random.Generator,
              into: dict[str, FloatArray]) -> dict[str, FloatArray]:
        parts = self.mechanism.parts()
        n, s, q = self._plug_in()
        plug = {"count": n, "sum": s, "sum_of_squares": q}
        for name in names:
            into[name] = plug[name] + noise_draws(parts[name], SIMULATIONS, rng)
            into[name].flags.writeable = False
        return into

    def count(self) -> Estimate:
        """The noisy count of non-missing rows, with the closed-form interval of its noise."""
        noisy = float(self.noisy["count"][0])
        half = float(self.mechanism.parts()["count"].ci95_halfwidth())
        return Estimate("count", noisy, noisy - half, noisy + half, "closed form")

    def sum(self) -> Estimate:
        """The clipped sum centre·ñ + step·S̃, with a simulated interval (the noise of two queries)."""
        self._require("sum")
        raw_n, raw_s = float(self.noisy["count"][0]), float(self.noisy["sum"][0])
        estimate = self.grid.centre * raw_n + self.grid.step * raw_s
        sims = self._replicates(("count", "sum"))
        # The sum is linear: its noise is centre·Z_n + step·Z_s whatever the truth.
        n, s, _ = self._plug_in()
        noise = self.grid.centre * (sims["count"] - n) + self.grid.step * (sims["sum"] - s)
        low, high = basic_interval(estimate, estimate + noise, tails=interval_tails(self.grid.bounds.clip_side))
        return Estimate("sum", estimate, low, high, "simulation")

    def mean(self) -> Estimate:
        """The clipped mean, centre + step·S̃/ñ, within the bounds, with a simulated interval."""
        self._require("sum")
        n, s, _ = self._plug_in()
        sims = self._replicates(("count", "sum"))
        estimate = float(self._mean(np.array([n]), np.array([s]))[0])
        # Replicates unclipped: noise that pushed the estimate onto a bound has a spread on both sides of it;
        # clipped, every replicate beyond the bound would sit on it and the interval collapse to the bound.
        replicates = self.grid.centre + self.grid.step * sims["sum"] / np.maximum(sims["count"], 1.0)
        low, high = basic_interval(estimate, replicates, tails=interval_tails(self.grid.bounds.clip_side))
        lower, upper = self.grid.bounds.lower, self.grid.bounds.upper
        return Estimate("mean", estimate, max(low, lower), min(high, upper), "simulation")

    def variance(self) -> Estimate:
        """The clipped population variance, step²·(Q̃/ñ − (S̃/ñ)²) in [0, (upper − lower)²/4], simulated interval."""
        self._require("sum", "sum_of_squares")
        n, s, q = self._plug_in()
        sims = self._replicates(("count", "sum", "sum_of_squares"))
        estimate = float(self._variance(np.array([n]), np.array([s]), np.array([q]))[0])
        replicates = self._variance(np.maximum(sims["count"], 1.0), sims["sum"], sims["sum_of_squares"])
        low, high = basic_interval(estimate, replicates)
        return Estimate("variance", estimate, max(low, 0.0), min(high, self._max_variance()), "simulation")

    def std(self) -> Estimate:
        """The square root of :meth:`variance`; its interval is the square root of the variance's."""
        variance = self.variance()
        return Estimate("std", math.sqrt(variance.estimate), math.sqrt(variance.low), math.sqrt(variance.high),
                        "simulation")

    def clipping(self) -> ClippingReport:
        """What the DP count of clipped rows says (nothing when it was not measured)."""
        if "clipped" not in self.noisy:
            return ClippingReport(measured=False)
        below, above = self.noisy["clipped"]
        half = float(self.mechanism.parts()["clipped"].ci95_halfwidth())
        return ClippingReport(True, int(below), int(above), half, bool(below > 2 * half or above > 2 * half))

    def estimates(self) -> list[Estimate]:
        """Every statistic the measured queries support, in a fixed order."""
        out = [self.count()]
        if "sum" in self.noisy:
            out += [self.sum(), self.mean()]
        if "sum_of_squares" in self.noisy:
            out += [self.variance(), self.std()]
        return out

    def _mean(self, n: FloatArray, s: FloatArray) -> FloatArray:
        return clipped_mean(self.grid, n, s)

    def _variance(self, n: FloatArray, s: FloatArray, q: FloatArray) -> FloatArray:
        return clipped_variance(self.grid, n, s, q)

    def _max_variance(self) -> float:
        return (self.grid.bounds.upper - self.grid.bounds.lower) ** 2 / 4

    def _require(self, *names: str) -> None:
        missing = [name for name in names if name not in self.noisy]
        if missing:
            raise ParameterError(f"{self.column}: the statistic needs {missing}, which got no budget (weights)")


def clipped_mean(grid: Grid, n: npt.ArrayLike, s: npt.ArrayLike) -> FloatArray:
    """The mean centre + step·S/max(n, 1), clipped to the bounds (vectorised post-processing of noisy n and S)."""
    count = np.maximum(np.asarray(n, dtype=np.float64), 1.0)
    mean = grid.centre + grid.step * np.asarray(s, dtype=np.float64) / count
    return np.asarray(np.clip(mean, grid.bounds.lower, grid.bounds.upper), dtype=np.float64)


def clipped_variance(grid: Grid, n: npt.ArrayLike, s: npt.ArrayLike, q: npt.ArrayLike) -> FloatArray:
    """step²·(Q/n − (S/n)²) with n >= 1, clipped to [0, (upper − lower)²/4] (vectorised post-processing)."""
    count = np.maximum(np.asarray(n, dtype=np.float64), 1.0)
    mean_code = np.asarray(s, dtype=np.float64) / count
    variance = grid.step**2 * (np.asarray(q, dtype=np.float64) / count - mean_code**2)
    return np.asarray(np.clip(variance, 0.0, (grid.bounds.upper - grid.bounds.lower) ** 2 / 4), dtype=np.float64)


def measure_moments(
    values: npt.ArrayLike,
    mechanism: MomentsMechanism,
    context: ReleaseContext,
    *,
    column: str,
    seed: int,
    stage: str = "stats",
    group: str | None = None,
) -> NoisyMoments:
    """Measure a column's count, sum, sum of squares (and clipped rows) under ``mechanism``; book each part.

    Each query goes through :func:`dp.mechanisms.noise.measure`: a re-run of the same release
    replays the sealed values. Queries are named ``<query>(<column>[ | <group>])``.

    Args:
        values: The column's raw values (floats; NaN for missing) of one group.
        mechanism: Grid, budget, split and contribution bound.
        context: The ledger and the secure noise source.
        column: The column name (public).
        seed: A public seed for the interval simulations (post-processing).
        stage: The ledger stage.
        group: The public group value, when the column is summarised per group (parallel composition).

    Returns:
        The noisy answers and their post-processing.
    """
    if not isinstance(mechanism, MomentsMechanism):
        raise ParameterError("measure_moments: mechanism must be a MomentsMechanism")
    answers = mechanism.exact_answers(values)
    suffix = f"{column} | {group}" if group is not None else column
    noisy: dict[str, tuple[int, ...]] = {}
    records = []
    for name, part in mechanism.parts().items():
        result, record = measure(part, answers[name], context, stage=stage, query=f"{name}({suffix})")
        noisy[name] = tuple(int(v) for v in result)
        records.append(record)
    return NoisyMoments(column, mechanism.grid, mechanism, MappingProxyType(noisy), tuple(records), seed)


def measure_moments_by_group(
    values: npt.ArrayLike,
    groups: npt.ArrayLike,
    labels: Sequence[str],
    mechanism: MomentsMechanism,
    context: ReleaseContext,
    *,
    column: str,
    by: str,
    seed: int,
    stage: str = "stats",
) -> list[NoisyMoments]:
    """Each group's moments, one charge per query for all groups together (parallel composition).

    Every query is measured as one vector over the groups: adding or removing a unit of c rows moves the
    vector by at most what it moves one group's answer (the rows' contributions add up across groups in L1
    and, squared, in L2: sqrt(Σ d_g²) <= Σ |d_g| <= c·Δ_row), so the part's mechanism, calibrated to the
    scalar sensitivity, covers the vector at the same loss.

    Args:
        values: The column's raw values (NaN for missing).
        groups: Each row's group, 0..len(labels)-1, or -1 for none (a null or undeclared ``by`` value).
        labels: The groups' public names (the ``by`` column's declared categories).
        mechanism: Grid, budget, split and contribution bound (as for one column).
        context: The ledger and the secure noise source.
        column: The column name (public).
        by: The grouping column's name (public).
        seed: A public seed for the interval simulations (post-processing).
        stage: The ledger stage.

    Returns:
        One :class:`NoisyMoments` per group, in ``labels`` order, sharing the records.
    """
    if not isinstance(mechanism, MomentsMechanism):
        raise ParameterError("measure_moments_by_group: mechanism must be a MomentsMechanism")
    array = np.asarray(values, dtype=np.float64)
    group = np.asarray(groups, dtype=np.int64)
    if array.shape != group.shape:
        raise ParameterError("measure_moments_by_group: values and groups must have the same length")
    count = len(labels)
    exact = mechanism.exact_answers_by_group(array, group, count)
    noisy_vectors: dict[str, IntArray] = {}
    records = []
    for name, part in mechanism.parts().items():
        answers = exact[name] if count else np.zeros(0, dtype=np.int64)
        result, record = measure(part, answers, context, stage=stage, query=f"{name}({column} by {by})")
        noisy_vectors[name] = np.asarray(result, dtype=np.int64)
        records.append(record)
    out = []
    for g in range(count):
        noisy = {}
        for name, vector in noisy_vectors.items():
            width = len(vector) // count
            noisy[name] = tuple(int(v) for v in vector[g * width:(g + 1) * width])
        out.append(NoisyMoments(column, mechanism.grid, mechanism, MappingProxyType(noisy), tuple(records), seed + g))
    return out


__all__ = ["ClipBounds", "ClippingReport", "Estimate", "Grid", "MomentsMechanism", "NoisyMoments", "clipped_mean",
           "clipped_variance", "measure_moments", "measure_moments_by_group"]
