"""The sparse vector technique: AboveThreshold (also for monotone queries) and Sparse.

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
after the first positive one never influences the output. The argument, its preconditions and the
code lines it relies on are in ``docs/proofs/above_threshold.md``.

:class:`Sparse` is Dwork & Roth's Algorithm 2: up to ``cutoff`` (c) positive answers, each found by
an AboveThreshold run of epsilon/c with a freshly drawn threshold noise. Both mechanisms share one
scan, :func:`_scan_batch`, which also takes a batch of independent runs; statistical audits run
the very code a release runs, only with many rows.

Applications: clip-bound discovery (:mod:`dp.measurement.bounds`) and range queries
(:mod:`dp.mechanisms.range_queries`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dprelease.dp.accounting.budget import PureBudget, float_at_least, positive_integer
from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext, ReleasesNoValues, noisy_result
from dprelease.dp.errors import ParameterError
from dprelease.dp.mechanisms.random import IntArray, NoiseSource

FloatArray = npt.NDArray[np.float64]




@dataclass(frozen=True)
class AboveThreshold(ReleasesNoValues):
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
        object.__setattr__(self, "_threshold_scale", float_at_least(2 * delta_q / self.budget.epsilon))
        object.__setattr__(self, "_query_scale", float_at_least(4 * delta_q / self.budget.epsilon))

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

        Draws the threshold noise (one value), then every query's noise (one vectorised call),
        then scans: :meth:`run_batch` with a single row. Callers go through
        :func:`run_above_threshold`, which charges the ledger first.
        """
        hit = int(self.run_batch(np.asarray(answers, dtype=np.int64).reshape(1, -1), threshold, noise)[0])
        return hit if hit >= 0 else None

    def run_batch(self, answers: IntArray, threshold: int, noise: NoiseSource) -> IntArray:
        """Independent runs, one per row of ``answers`` (shape (runs, queries)); -1 stands for None.

        Each row is a separate run with its own noise, so rows computed from the same data cost
        ``runs`` times :meth:`privacy_loss`; releases use :meth:`run` (one row). Audits call this
        to repeat the production scan many times with two noise calls.
        """
        hits = _scan_batch(_answer_matrix(answers), threshold, 1, self.threshold_scale(), self.query_scale(), noise)
        return hits[:, 0]


def run_above_threshold(
    mechanism: AboveThreshold,
    answers: IntArray,
    threshold: int,
    context: ReleaseContext,
    *,
    stage: str,
    query: str,
) -> tuple[int | None, MeasurementRecord]:
    """Charge the ledger for one AboveThreshold run, run it and seal its outcome (or replay it)."""
    return noisy_result(mechanism, context, lambda noise: mechanism.run(answers, threshold, noise), stage=stage,
                        query=query, cells=len(answers), sealed_as="index")


def _answer_matrix(answers: IntArray) -> IntArray:
    matrix = np.asarray(answers)
    if matrix.ndim != 2:
        raise ParameterError(f"answers (of shape {matrix.shape}) must be a matrix of shape (runs, queries)")
    return np.asarray(matrix, dtype=np.int64)


def _scan_batch(
    answers: IntArray, threshold: int, cutoff: int, threshold_scale: float, query_scale: float, noise: NoiseSource
) -> IntArray:
    """Dwork & Roth's Algorithm 2 (Sparse) on each row of ``answers``, all rows at once.

    The one implementation of the scan, shared by :class:`AboveThreshold` (cutoff 1) and
    :class:`Sparse`. Noise calls, in this order: the first round's threshold noise (one value per
    row); every query's noise (one value per query and row, drawn once: a query is examined in at
    most one round, so no noise value is used twice); then, for each later round, fresh threshold
    noise for the rows whose previous round answered positive and that have queries left. Noise
    of queries after a row's last examined query is drawn and discarded; it never influences the
    output (``docs/proofs/above_threshold.md``, "Vectorised draws").

    Returns:
        Shape (rows, cutoff): each row's positive indices in increasing order, padded with -1.
    """
    rows, queries = answers.shape
    hits = np.full((rows, cutoff), -1, dtype=np.int64)
    noisy_threshold = noise.discrete_laplace(np.full(rows, threshold, dtype=np.int64), threshold_scale)
    noisy = noise.discrete_laplace(answers.reshape(-1), query_scale).reshape(rows, queries)
    if queries == 0:
        return hits
    position = np.arange(queries)
    start = np.zeros(rows, dtype=np.int64)  # each row's first query not examined yet
    active = np.arange(rows)  # the rows whose current round is running
    for round_ in range(cutoff):
        if round_ > 0:
            active = active[start[active] < queries]
            if active.size == 0:
                break
            # Dwork & Roth, Alg. 2: fresh threshold noise after every positive answer.
            noisy_threshold = noise.discrete_laplace(np.full(active.size, threshold, dtype=np.int64), threshold_scale)
        above = (noisy[active] >= noisy_threshold[:, np.newaxis]) & (position >= start[active][:, np.newaxis])
        fired = above.any(axis=1)
        first = above.argmax(axis=1)[fired]
        active = active[fired]
        hits[active, round_] = first
        start[active] = first + 1
    return hits


def svt_threshold(
    query_scale: float, queries: int, *, cheap_widening: bool = False, away_from_origin: bool = False,
    threshold_scale: float | None = None,
) -> int:
    """The public count threshold: the query noise's (1 - 1/m) quantile scale, at least 1.

    A run fires once about this many rows lie beyond a candidate; queries with no such rows fire
    spuriously with probability about 1/(2m) each, so the whole scan with probability ~1/2 at most
    (which only widens the bounds, never narrows them below the data).

    A scan ``away_from_origin`` (the upper bound of a range starting at or above 0, where
    consecutive candidates double) widens the range by a factor of 2 or more with each spurious
    step, which equal-width bins pay in resolution (fnlwgt in 32 bins over [16384, 4194304] instead
    of [16384, 524288]: tvd1 0.14, in about 8% of runs at epsilon 1). It uses the quantile 1 - 1/(4m):
    spurious firing 4 times rarer, for ln 4 noise scales more rows beyond the bound. (On the side of
    the origin a spurious step moves the bound by at most its distance from the origin.)

    With ``cheap_widening`` (a column binned ``log``: a bound one doubling too wide adds one nearly
    empty bin, while a bound too narrow clamps a whole tail, such as capital-gain >= 3411 at small
    epsilon) the threshold is one noise scale: the scan fires earlier, wider bounds are more frequent
    and fewer rows are clamped.

    >>> svt_threshold(100.0, 23), svt_threshold(100.0, 23, away_from_origin=True)
    (314, 453)
    >>> svt_threshold(100.0, 23, cheap_widening=True)
    100

    With ``threshold_scale`` (the monotone scan, whose two noises have one scale) the quantile is that of
    the difference of the two noises, at the same spurious-firing rates:

    >>> svt_threshold(50.0, 23, threshold_scale=50.0)
    214
    >>> svt_threshold(50.0, 23, away_from_origin=True, threshold_scale=50.0)
    295
    """
    if threshold_scale is not None:
        return _threshold_for_both_noises(query_scale, threshold_scale, queries, cheap_widening=cheap_widening,
                                          away_from_origin=away_from_origin)
    if cheap_widening:
        return max(1, math.ceil(query_scale))
    return max(1, math.ceil(query_scale * math.log(max(2, queries) * (4 if away_from_origin else 1))))


def _difference_tail(x: float, query_scale: float, threshold_scale: float) -> float:
    """P(Z_q − Z_t > x) for independent Laplace noises of the two scales, x >= 0."""
    a, b = query_scale, threshold_scale
    if math.isclose(a, b, rel_tol=1e-9):
        return math.exp(-x / a) * (2 + x / a) / 4
    return (a * a * math.exp(-x / a) - b * b * math.exp(-x / b)) / (2 * (a * a - b * b))


def _threshold_for_both_noises(query_scale: float, threshold_scale: float, queries: int, *,
                               cheap_widening: bool, away_from_origin: bool) -> int:
    """The threshold at which an empty candidate fires spuriously with probability about 1/(2m).

    1/(8m) away from the origin; counting both the query's and the threshold's noise (the monotone scan,
    where the two have the same scale, so the threshold's noise cannot be left out). With cheap widening,
    the spurious rate of the general scan's cheap threshold.
    """
    if cheap_widening:
        # The general scan's cheap threshold is one query scale (4Δ/ε against threshold noise 2Δ/ε): keep
        # its per-candidate spurious rate, P(Z_q − Z_t > 4Δ/ε) ≈ 0.223, under the monotone scan's noises.
        target = _difference_tail(2.0, 2.0, 1.0)
    else:
        target = 1 / (2 * max(2, queries) * (4 if away_from_origin else 1))
    low, high = 0.0, 64 * max(query_scale, threshold_scale)
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if _difference_tail(middle, query_scale, threshold_scale) > target else (low, middle)
    return max(1, math.ceil(high))


# ---------------------------------------------------------------------------------------------
# Sparse: up to c positive answers (Dwork & Roth, Algorithm 2)



def _integer_threshold(threshold: object, owner: str) -> int:
    if isinstance(threshold, bool) or not isinstance(threshold, int | np.integer):
        raise ParameterError(
            f"{owner}: threshold ({threshold!r}) must be an integer; the privacy argument shifts it by integers"
        )
    return int(threshold)


def _integer_answers(answers: IntArray, owner: str, *, ndim: int) -> IntArray:
    array = np.asarray(answers)
    shape = "a vector" if ndim == 1 else "a matrix of shape (runs, queries)"
    if array.ndim != ndim:
        raise ParameterError(f"{owner}: answers (of shape {array.shape}) must be {shape}")
    if array.size and array.dtype.kind not in "iu":
        raise ParameterError(f"{owner}: answers (of dtype {array.dtype}) must be integers")
    return array.astype(np.int64)


@dataclass(frozen=True)
class Sparse(ReleasesNoValues):
    """Reports the indices of up to ``cutoff`` queries whose noisy answers reach a noisy threshold.

    Privacy: epsilon-DP for any number of queries, each of L1 sensitivity ``l1_sensitivity``,
    under the neighbouring relation of those queries (Dwork & Roth 2014, Sec. 3.6, Algorithm 2
    "Sparse" with delta = 0): c = ``cutoff`` AboveThreshold runs of epsilon/c each, composed, where
    each run starts after the previous positive answer with fresh threshold noise. The threshold noise has
    scale 2cΔ/ε and each query's noise 4cΔ/ε (rounded up); the booked loss is recomputed from them:
    c · max(2Δ / threshold_scale, 4Δ / query_scale). Only indices are released, never a noisy
    answer. Argument: ``docs/proofs/above_threshold.md``.

    >>> sparse = Sparse(l1_sensitivity=1, budget=PureBudget(Fraction(1)), cutoff=2)
    >>> sparse.threshold_scale(), sparse.query_scale(), sparse.privacy_loss()
    (4.0, 8.0, PureBudget(epsilon=Fraction(1, 1)))
    >>> class NoNoise:  # shows the scan only; a release always uses the secure source
    ...     def discrete_laplace(self, values, scale):
    ...         return values
    >>> sparse.run(np.array([0, 7, 0, 9, 8]), 5, NoNoise())
    [1, 3]

    Attributes:
        l1_sensitivity: Sensitivity of each query (a positive integer).
        budget: The epsilon of the whole run, for all ``cutoff`` positive answers together.
        cutoff: The most positive answers reported (c); the scan stops at the c-th.
    """

    l1_sensitivity: int
    budget: PureBudget
    cutoff: int
    _round: AboveThreshold = field(init=False, repr=False, compare=False)

    name = "Sparse (discrete Laplace)"

    def __post_init__(self) -> None:
        object.__setattr__(self, "l1_sensitivity", positive_integer(self.l1_sensitivity, "l1_sensitivity", "Sparse"))
        object.__setattr__(self, "cutoff", positive_integer(self.cutoff, "cutoff", "Sparse"))
        if not isinstance(self.budget, PureBudget):
            raise ParameterError("Sparse: budget must be a PureBudget (epsilon)")
        round_budget = PureBudget(self.budget.epsilon / self.cutoff)
        object.__setattr__(self, "_round", AboveThreshold(self.l1_sensitivity, round_budget))

    def threshold_scale(self) -> float:
        """Scale of each threshold noise, >= 2cΔ/ε."""
        return self._round.threshold_scale()

    def query_scale(self) -> float:
        """Scale of each query's noise, >= 4cΔ/ε."""
        return self._round.query_scale()

    def scale(self) -> float:
        """The query noise scale (recorded in the ledger)."""
        return self.query_scale()

    def sensitivity_text(self) -> str:
        """The declared per-query sensitivity and the cutoff, for the ledger."""
        return f"L1={self.l1_sensitivity} per query, cutoff {self.cutoff}"

    def privacy_loss(self) -> PureBudget:
        """Epsilon implied by the scales actually used, for all c rounds; never above the budget."""
        return PureBudget(self.cutoff * self._round.privacy_loss().epsilon)

    def run(self, answers: IntArray, threshold: int, noise: NoiseSource) -> list[int]:
        """The indices of the positive answers, increasing, at most ``cutoff`` of them.

        Callers go through :func:`run_sparse`, which charges the ledger first.
        """
        matrix = _integer_answers(answers, "Sparse", ndim=1).reshape(1, -1)
        return [int(i) for i in self.run_batch(matrix, threshold, noise)[0] if i >= 0]

    def run_batch(self, answers: IntArray, threshold: int, noise: NoiseSource) -> IntArray:
        """Independent runs, one per row of ``answers`` (shape (runs, queries)).

        Each row is a separate run with its own noise (rows computed from the same data cost
        ``runs`` times :meth:`privacy_loss`); releases use :meth:`run`.

        Returns:
            Shape (runs, cutoff): each row's positive indices, increasing, padded with -1.
        """
        matrix = _integer_answers(answers, "Sparse", ndim=2)
        threshold = _integer_threshold(threshold, "Sparse")
        return _scan_batch(matrix, threshold, self.cutoff, self.threshold_scale(), self.query_scale(), noise)


def run_sparse(
    mechanism: Sparse,
    answers: IntArray,
    threshold: int,
    context: ReleaseContext,
    *,
    stage: str,
    query: str,
) -> tuple[list[int], MeasurementRecord]:
    """Charge the ledger for one Sparse run, run it and seal its outcome (or replay it).

    The arguments are checked before anything is charged; the charge is booked before any noise
    is drawn.

    Returns:
        The indices of the positive answers and the run's public provenance.
    """
    values = _integer_answers(answers, "Sparse", ndim=1)
    _integer_threshold(threshold, "Sparse")
    return noisy_result(mechanism, context, lambda noise: mechanism.run(values, threshold, noise), stage=stage,
                        query=query, cells=len(values), sealed_as="indices",
                        decode=lambda payload: [int(i) for i in payload])


# ---------------------------------------------------------------------------------------------
# Monotone queries


@dataclass(frozen=True)
class MonotoneAboveThreshold(AboveThreshold):
    """AboveThreshold for monotone queries: query noise of scale 2Δ/ε instead of 4Δ/ε.

    Privacy: epsilon-DP with epsilon = Δ / threshold_scale + Δ / query_scale, provided that for
    every pair of neighbouring datasets either every query's answer moves up by between 0 and Δ,
    or every query's answer moves down by between 0 and Δ (Lyu, Su & Li 2017, "Understanding the
    Sparse Vector Technique for Differential Privacy", PVLDB 10(6), the monotonic-query case).
    The mechanism cannot check this; the caller's queries must have it. Counts of rows below (or
    above) a sequence of points are monotone under add/remove-one-row: one added row raises each
    count by 0 or 1. Argument: ``docs/proofs/above_threshold.md``, "Monotone queries".

    >>> m = MonotoneAboveThreshold(l1_sensitivity=1, budget=PureBudget(Fraction(1, 2)))
    >>> m.threshold_scale(), m.query_scale(), m.privacy_loss()
    (4.0, 4.0, PureBudget(epsilon=Fraction(1, 2)))
    """

    name = "AboveThreshold, monotone queries (discrete Laplace)"

    def __post_init__(self) -> None:
        super().__post_init__()
        # Both noises get half the budget: scale Δ / (ε/2) = 2Δ/ε each, rounded up.
        query_scale = float_at_least(2 * Fraction(self.l1_sensitivity) / self.budget.epsilon)
        object.__setattr__(self, "_query_scale", query_scale)

    def sensitivity_text(self) -> str:
        """The declared per-query sensitivity and the monotonicity it relies on, for the ledger."""
        return f"L1={self.l1_sensitivity} per query, monotone"

    def privacy_loss(self) -> PureBudget:
        """Δ / threshold_scale + Δ / query_scale, from the scales actually used; never above the budget."""
        delta_q = Fraction(self.l1_sensitivity)
        return PureBudget(delta_q / Fraction(self._threshold_scale) + delta_q / Fraction(self._query_scale))
