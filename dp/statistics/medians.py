"""The median by an (epsilon, delta) method chosen in the spec: propose-test-release or smooth sensitivity.

One call per column: the share of rho the plan gives the median becomes the mechanism's epsilon (PTR: halves
for the test and the release; smooth: the whole), each booked under zCDP with its delta
(``docs/proofs/approximate_zcdp.md``). The outcome is the only thing that leaves: a value, or "refused" when
PTR's test fails (⊥ is the mechanism's output, itself DP; the noisy distance stays sealed in the ledger).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy.typing as npt

from dprelease.dp.accounting.budget import ZCDPBudget, pure_from_zcdp_share
from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext
from dprelease.dp.errors import ParameterError
from dprelease.dp.statistics.clipping import Grid
from dprelease.dp.statistics.ptr import PTRMedian, run_ptr_median
from dprelease.dp.statistics.smooth import SmoothMedian, measure_smooth_median

METHODS = ("ptr", "smooth")


@dataclass(frozen=True)
class MedianRelease:
    """One released median.

    Attributes:
        value: The released median (value units), or None when PTR refused.
        low: Lower end of the 95 % interval of the release noise, or None (refused; smooth: the width is private).
        high: Upper end, or None.
        outcome: ``released`` or ``refused``.
        records: The measurements booked (PTR: the test, and the release when it passed).
    """

    value: float | None
    low: float | None
    high: float | None
    outcome: str
    records: tuple[MeasurementRecord, ...]


def measure_median(values: npt.ArrayLike, grid: Grid, method: str, budget: ZCDPBudget, delta: Fraction,
                   context: ReleaseContext, *, column: str, proposed_bound: float | None = None) -> MedianRelease:
    """Release the median of ``values`` (clipped to ``grid``) by ``method``, booked within ``budget`` and ``delta``.

    Raises:
        ParameterError: For an unknown method, a budget that is not zCDP, or PTR without a proposed bound.
    """
    if not isinstance(budget, ZCDPBudget):
        raise ParameterError(f"median by {method}: the budget must be zCDP (rho); (epsilon, delta) methods are "
                             "booked as approximate zCDP")
    if method == "ptr":
        if proposed_bound is None:
            raise ParameterError("median by ptr: proposed_bound must be given")
        half = pure_from_zcdp_share(ZCDPBudget(budget.rho / 2))
        result = run_ptr_median(values, PTRMedian(grid, proposed_bound, half, half, delta), context, column=column)
        if result.value is None or result.halfwidth is None:
            return MedianRelease(None, None, None, "refused", result.records)
        low = max(grid.bounds.lower, result.value - result.halfwidth)
        high = min(grid.bounds.upper, result.value + result.halfwidth)
        return MedianRelease(result.value, low, high, "released", result.records)
    if method == "smooth":
        mechanism = SmoothMedian(grid, pure_from_zcdp_share(budget), delta)
        value, record = measure_smooth_median(values, mechanism, context, column=column)
        return MedianRelease(value, None, None, "released", (record,))
    raise ParameterError(f"median: method ({method!r}) must be one of {', '.join(METHODS)}")
