"""Range queries answered with the sparse vector technique (Near & Abuah, the sparse vector chapter).

:func:`range_query_answers`: Sparse picks the range counts above a threshold, and only those are measured
with discrete Laplace noise.

Library code that no release flow calls yet: kept for the statistics work, tested with the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dprelease.dp.accounting.budget import PureBudget
from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext
from dprelease.dp.errors import ParameterError
from dprelease.dp.mechanisms.noise import DiscreteLaplace, measure
from dprelease.dp.mechanisms.random import IntArray
from dprelease.dp.mechanisms.svt import FloatArray, Sparse, run_sparse

# ---------------------------------------------------------------------------------------------
# Range queries (Near & Abuah, "Programming Differential Privacy", sparse vector chapter)


def range_counts(values: FloatArray, ranges: Sequence[tuple[float, float]]) -> IntArray:
    """For each range [low, high): the rows with low <= value < high.

    Each count has sensitivity 1 under add/remove-one-row. NaN (missing) rows are in no range.

    >>> range_counts(np.array([0.0, 1.0, 1.5, 2.0, np.nan]), [(0, 1), (1, 2), (0, 10)]).tolist()
    [1, 2, 4]
    """
    ordered = np.sort(values[~np.isnan(values)])
    lows = np.asarray([r[0] for r in ranges], dtype=np.float64)
    highs = np.asarray([r[1] for r in ranges], dtype=np.float64)
    inside = np.searchsorted(ordered, highs, side="left") - np.searchsorted(ordered, lows, side="left")
    return inside.astype(np.int64)


def overlap_depth(ranges: Sequence[tuple[float, float]]) -> int:
    """The largest number of ranges [low, high) sharing a point.

    One row lies in at most this many of the ranges, so it is the L1 sensitivity of their counts
    as one vector under add/remove-one-row (it is 1 for disjoint ranges, and at most their number).

    >>> overlap_depth([(0, 1), (1, 2), (2, 3)]), overlap_depth([(0, 10), (2, 3), (2.5, 4)])
    (1, 3)
    """
    # At a shared coordinate the end (-1) sorts before the start (+1): [a, b) and [b, c) are disjoint.
    steps = sorted([(float(low), 1) for low, _ in ranges] + [(float(high), -1) for _, high in ranges])
    depth = deepest = 0
    for _, step in steps:
        depth += step
        deepest = max(deepest, depth)
    return deepest


def _check_ranges(ranges: Sequence[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    checked = []
    if len(ranges) == 0:
        raise ParameterError("range_query_answers: ranges must not be empty")
    for i, pair in enumerate(ranges):
        try:
            low, high = (float(x) for x in pair)
        except (TypeError, ValueError):
            raise ParameterError(f"range_query_answers: ranges[{i}] must be a pair of numbers (low, high)") from None
        if not low < high:
            raise ParameterError(f"range_query_answers: ranges[{i}] ({low:g}, {high:g}) must have low below high")
        checked.append((low, high))
    return tuple(checked)


@dataclass(frozen=True)
class NoisyRangeCounts:
    """Noisy counts of the range queries that Sparse reported above the threshold (a DP output).

    Attributes:
        ranges: All range queries asked, each [low, high) (public).
        indices: The queries Sparse reported above the threshold, increasing, at most ``cutoff``.
        counts: Their noisy counts, aligned with ``indices``. The noise is drawn after, and
            independently of, the selection, so each is unbiased for its range's true count.
        scale: The discrete Laplace scale of ``counts``; None when nothing was selected.
        measurements: Provenance: the Sparse run, then the counts' measurement (if any).
    """

    ranges: tuple[tuple[float, float], ...]
    indices: tuple[int, ...]
    counts: IntArray
    scale: float | None
    measurements: tuple[MeasurementRecord, ...]


def range_query_answers(
    values: FloatArray,
    ranges: Sequence[tuple[float, float]],
    threshold: int,
    budget: PureBudget,
    cutoff: int,
    context: ReleaseContext,
    *,
    stage: str,
    query: str,
) -> NoisyRangeCounts:
    """Answer the range counts that are large: Sparse selects up to ``cutoff``, Laplace measures them.

    The book's method (Near & Abuah, "Programming Differential Privacy", sparse vector chapter,
    range queries): half the budget runs Sparse over all range counts (each of sensitivity 1
    under add/remove-one-row) to find up to c of them above ``threshold``; the other half
    measures only those. The book measures each selected count separately at epsilon/(2c), noise
    scale 2c/ε. Here the selected counts are measured as one vector whose L1 sensitivity is their
    ranges' overlap depth d (public: it depends on the public ranges and on Sparse's output only),
    at epsilon/2: scale 2d/ε, never more than the book's since d <= c. The total is
    epsilon/2 + epsilon/2 = epsilon by sequential composition; when nothing is selected the
    measurement half is neither drawn nor charged.

    Counts below the threshold are not released; that they were not selected is part of the
    (private) output. The threshold must be public, chosen without looking at the data.

    Args:
        values: One column, one row per privacy unit (sensitive).
        ranges: The range queries, each [low, high) with low < high (public).
        threshold: The public count threshold (an integer).
        budget: Epsilon of the whole procedure.
        cutoff: The most queries answered (c).
        context: The ledger and noise source.
        sensitivity: How much one privacy unit can move each tail count: 1 for row-level privacy,
            k when contributions are bounded to k rows per id.
        stage: The ledger stage name.
        query: A public label; the ledger rows are ``{query}: select`` and ``{query}: counts``.

    Returns:
        The selected indices and their noisy counts.

    Raises:
        ParameterError: For an empty or malformed range list, a non-integer threshold, a bad cutoff
            or budget; raised before anything is charged.
    """
    checked = _check_ranges(ranges)
    if not isinstance(budget, PureBudget):
        raise ParameterError("range_query_answers: budget must be a PureBudget (epsilon)")
    parts = budget.split({"select": 1, "counts": 1})
    sparse = Sparse(1, parts["select"], cutoff)
    counts = range_counts(np.asarray(values, dtype=np.float64), checked)
    selected, select_record = run_sparse(sparse, counts, threshold, context, stage=stage, query=f"{query}: select")
    if not selected:
        return NoisyRangeCounts(checked, (), np.zeros(0, dtype=np.int64), None, (select_record,))
    depth = overlap_depth([checked[i] for i in selected])
    laplace = DiscreteLaplace(l1_sensitivity=depth, budget=parts["counts"])
    noisy, count_record = measure(laplace, counts[selected], context, stage=stage, query=f"{query}: counts")
    return NoisyRangeCounts(checked, tuple(selected), noisy, laplace.scale(), (select_record, count_record))
