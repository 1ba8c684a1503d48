"""Server side: unbiased counts from support counts, with their exact variance and confidence intervals.

For a pure protocol with support probabilities p* (own value) and q* (another given value), n reports and
C_v reports supporting v, ĉ_v = (C_v − n q*) / (p* − q*) is unbiased, and its exact variance is

    Var ĉ_v = n q*(1 − q*) / (p* − q*)² + c_v (1 − p* − q*) / (p* − q*)

(Wang, Blocki, Li, Jha 2017, eq. (2) with the c_v term kept). Intervals use the plug-in of this exact
variance (c_v by max(ĉ_v, 0)): without the second term they under-cover at large epsilon. Consistency
post-processing (non-negative, summing to n) is offered beside the unbiased estimates, never instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dprelease.dp.synthesis.postprocess import project_simplex

FloatArray = npt.NDArray[np.float64]

Z95 = 1.959963984540054
"""The two-sided 95 % normal quantile."""


@dataclass(frozen=True)
class CountEstimate:
    """Unbiased counts of every value with standard errors and 95 % intervals.

    Attributes:
        counts: ĉ_v, unbiased (may be negative).
        std: The plug-in standard error of each ĉ_v (exact formula).
        low, high: 95 % normal intervals.
        reports: n.
    """

    counts: FloatArray
    std: FloatArray
    low: FloatArray
    high: FloatArray
    reports: int

    def shares(self) -> FloatArray:
        """ĉ_v / n."""
        return self.counts / max(self.reports, 1)


def exact_variance(n: int, true_counts: npt.ArrayLike, p: Fraction, q: Fraction) -> FloatArray:
    """Var ĉ_v for true counts c_v (the formula of the module docstring)."""
    gap = float(p - q)
    c = np.asarray(true_counts, dtype=np.float64)
    return n * float(q) * (1 - float(q)) / gap**2 + c * (1 - float(p) - float(q)) / gap


def estimate(support: npt.ArrayLike, n: int, p: Fraction, q: Fraction) -> CountEstimate:
    """ĉ_v = (C_v − n q*) / (p* − q*) with its exact plug-in variance and a 95 % interval."""
    c = np.asarray(support, dtype=np.float64)
    gap = float(p - q)
    counts = (c - n * float(q)) / gap
    std = np.sqrt(np.maximum(exact_variance(n, np.maximum(counts, 0.0), p, q), 0.0))
    return CountEstimate(counts, std, counts - Z95 * std, counts + Z95 * std, n)


def consistent(counts: npt.ArrayLike, n: int) -> FloatArray:
    """Post-processing: the closest non-negative vector summing to n (Euclidean projection onto the simplex).

    Published beside the unbiased estimates, never instead: it is biased.
    """
    return project_simplex(np.asarray(counts, dtype=np.float64), float(n))
