"""Post-processing of noisy measurements: free of privacy cost, never sees raw data.

* :func:`estimate_total` combines the totals of all noisy marginals by inverse-variance weighting
  (a marginal of k cells with per-cell variance v has a total of variance k·v).
* :func:`project_simplex` is the Euclidean projection of a noisy table onto the non-negative
  tables with a given total (the closest consistent table in L2).
* :func:`round_preserving_sum` turns a non-negative real table into integers with exactly the
  given total (largest remainder), each cell moved by less than one.

>>> project_simplex(np.array([5.0, -2.0, 1.0]), 4.0).tolist()
[4.0, 0.0, 0.0]
>>> round_preserving_sum(np.array([1.5, 1.5, 1.0]), 4).tolist()
[2, 1, 1]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from dp.errors import InternalError
from dp.marginals import NoisyMarginal

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class NoisyCounts(Protocol):
    """Noisy counts that partition the rows (a marginal, a hierarchy level), with their cell variance."""

    @property
    def counts(self) -> IntArray: ...  # noqa: D102

    @property
    def variance(self) -> float: ...  # noqa: D102


def estimate_total(marginals: Sequence[NoisyCounts]) -> float:
    """Inverse-variance-weighted estimate of the row count from the totals of noisy partitions of the rows."""
    if not marginals:
        raise InternalError("estimate_total needs at least one noisy marginal")
    weights = np.array([1.0 / (len(m.counts) * m.variance) for m in marginals])
    totals = np.array([float(m.counts.sum()) for m in marginals])
    return float((weights * totals).sum() / weights.sum())


def project_simplex(values: FloatArray, total: float) -> FloatArray:
    """The nearest (Euclidean) vector x >= 0 with sum(x) == total.

    Finds the shift tau with sum(max(values - tau, 0)) == total (Duchi et al. 2008).
    """
    v = np.asarray(values, dtype=np.float64)
    if total <= 0 or v.size == 0:
        return np.zeros_like(v)
    ordered = np.sort(v)[::-1]
    cumulative = np.cumsum(ordered) - total
    index = np.arange(1, v.size + 1)
    valid = ordered - cumulative / index > 0
    kept = np.nonzero(valid)[0]
    # The largest element is always kept; with a subnormal total the test above can round it away.
    rho = int(kept[-1]) if kept.size else 0
    tau = cumulative[rho] / (rho + 1)
    out: FloatArray = np.maximum(v - tau, 0.0)
    return out


def round_preserving_sum(values: FloatArray, total: int) -> IntArray:
    """Integers that sum to ``total`` exactly, each within one of the (non-negative) input.

    Ties are broken by position, so the result is deterministic.
    """
    v = np.maximum(np.asarray(values, dtype=np.float64), 0.0)
    if total < 0:
        raise InternalError("round_preserving_sum needs a non-negative total")
    if v.size == 0:
        return np.zeros(0, dtype=np.int64)
    if v.sum() <= 0:
        v = np.ones_like(v)
    scaled = (v / v.sum()) * total
    base: IntArray = np.floor(scaled).astype(np.int64)
    short = int(total - base.sum())
    if short > 0:
        order = np.argsort(-(scaled - base), kind="stable")
        base[order[:short]] += 1
    elif short < 0:  # pragma: no cover - floor never overshoots
        raise InternalError("round_preserving_sum overshot its total")
    return base


def consistent_counts(marginal: NoisyMarginal, total: int) -> IntArray:
    """Non-negative integer counts of ``marginal`` that sum to ``total`` (projection, then rounding)."""
    return round_preserving_sum(project_simplex(marginal.counts.astype(np.float64), float(total)), total)
