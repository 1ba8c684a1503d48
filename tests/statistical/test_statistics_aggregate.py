"""Privacy audit of sample-and-aggregate (dp/statistics/aggregate.py), with a power check.

Neighbours under a fixed partition (labels are independent of the data, so conditioning on them
is the worst case the proof covers): D has k = 4 chunks whose ratios are all at the bottom of the
output range [0, 10]; D' adds one row to chunk 0 that moves its ratio to the top, so the sum of
codes moves by 2H. The released estimate is produced by the production ``sample`` of the plan's
mechanism (seeded discrete Laplace source, N = 100 000 per side) and ``estimate``. Events
"estimate >= c" and "< c" at four thresholds; false alarm <= 1e-6 (Clopper–Pearson, Bonferroni).
Broken variant: the sensitivity declared as H (a chunk moving by "at most half the range"): its
true loss is twice the booked one; the chance the audit misses it is bounded from the exact
discrete Laplace tails and asserted <= 1e-9.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np
import pytest

from dprelease.dp.accounting.budget import PureBudget
from dprelease.dp.mechanisms.noise import DiscreteLaplace
from dprelease.dp.statistics.aggregate import SampleAndAggregate
from dprelease.dp.statistics.clipping import ClipBounds
from tests.noise import SeededNoise
from tests.statistical.audit import Event, audit, power_failure_log10

pytestmark = pytest.mark.statistical

ALPHA = 1e-6
N = 100_000
PLAN = SampleAndAggregate("ratio", 4, ClipBounds(0.0, 10.0), PureBudget(Fraction(1)), half_steps=8)
LABELS_D = np.array([0, 1, 2, 3])
ROWS_D = np.array([[1.0, 0.0]] * 4)  # every chunk's ratio is 0
LABELS_D2 = np.r_[LABELS_D, 0]
ROWS_D2 = np.r_[ROWS_D, [[1.0, 1000.0]]]  # chunk 0's ratio jumps to 500 -> clamped to 10
THRESHOLDS = (1.0, 2.0, 3.0, 4.0)


def exact_sum(rows: np.ndarray, labels: np.ndarray) -> int:
    return int(PLAN.chunk_codes(rows, labels).sum())


def releases(mechanism: DiscreteLaplace, total: int, seed: int) -> np.ndarray:
    return PLAN.estimate(mechanism.sample(np.full(N, total, dtype=np.int64), SeededNoise(seed)))


def tail(t: float, scale: float) -> float:
    """P(Z >= t) for the discrete Laplace and integer t."""
    q = math.exp(-1 / scale)
    return q**t / (1 + q) if t >= 0 else 1 - q ** (1 - t) / (1 + q)


def event_probability(total: int, threshold: float, scale: float) -> float:
    """P(estimate >= threshold) exactly: S~ >= k (threshold - centre) / step."""
    need = math.ceil(PLAN.chunks * (threshold - PLAN.grid.centre) / PLAN.grid.step - 1e-9) - total
    return tail(need, scale)


def test_aggregate_audit_stays_within_the_booked_loss_and_flags_a_halved_sensitivity():
    start = time.perf_counter()
    s_d, s_d2 = exact_sum(ROWS_D, LABELS_D), exact_sum(ROWS_D2, LABELS_D2)
    assert s_d2 - s_d == 2 * PLAN.grid.half_steps  # the neighbour moves one chunk across the whole range
    good = PLAN.mechanism()
    assert isinstance(good, DiscreteLaplace)
    broken = DiscreteLaplace(PLAN.grid.half_steps, PLAN.budget)  # sensitivity H instead of 2H: half the scale
    booked = float(PLAN.privacy_loss().epsilon)
    events = []
    for c in THRESHOLDS:
        events.append(Event(f"estimate >= {c}", lambda out, c=c: out >= c, "D'"))
        events.append(Event(f"estimate < {c}", lambda out, c=c: out < c, "D"))
    result = audit(releases(good, s_d, 1), releases(good, s_d2, 2), events, statistic="epsilon", alpha=ALPHA)
    assert result.value <= booked, result.as_dict()
    flagged = audit(releases(broken, s_d, 3), releases(broken, s_d2, 4), events, statistic="epsilon", alpha=ALPHA)
    assert flagged.value > booked, flagged.as_dict()
    misses = []
    for c in THRESHOLDS:
        p, p2 = (event_probability(s, c, broken.scale()) for s in (s_d, s_d2))
        misses.append(power_failure_log10("epsilon", p2, p, N, ALPHA / len(events), booked))
        misses.append(power_failure_log10("epsilon", 1 - p, 1 - p2, N, ALPHA / len(events), booked))
    print(f"\nsample-and-aggregate audit: epsilon_hat={result.value:.3f} (booked {booked}), broken "
          f"{flagged.value:.3f}, log10 P(miss) <= {min(misses):.1f}, {time.perf_counter() - start:.1f} s")
    assert min(misses) <= -9
