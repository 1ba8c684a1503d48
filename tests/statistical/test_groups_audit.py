"""Statistical privacy audit of the grouped median (dp.statistics.groups): parallel composition.

D holds one row in each of two groups (at the upper bound); D' adds one row to group 0. The released pair (y0, y1) is
drawn by the vectorised stand-in of the quantile audit (``quantile_draws``: Gumbel argmax over the
production runs and scale, then a uniform point; pinned to the production draw by
``tests/statistical/test_statistics_audit.py``), one independent draw per group, as
:meth:`GroupedQuantile.draw` does. Events are joint: {y0 <= s and y1 <= t} and their complements
for every (s, t) where all exact probabilities are >= 1 %, so an event can see both groups at once.

The booked loss is the per-group epsilon (one row touches one group). False alarm <= 1e-6
(Clopper–Pearson, Bonferroni over the events). Power: a broken variant in which the added row also
enters group 1 (groups that overlap, so parallel composition does not apply, while the same
epsilon is booked) must be flagged, and the probability that it would not be is bounded rigorously
from the exact event probabilities and asserted <= 1e-9.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dprelease.dp.accounting.budget import PureBudget
from dprelease.dp.statistics.groups import GroupedQuantile
from dprelease.dp.statistics.quantiles import QuantileMechanism
from tests.statistical.audit import Event, audit, power_failure_log10
from tests.statistical.test_statistics_audit import ALPHA, POWER_MISS_LOG10_MAX, Q_GRID, N, quantile_draws

pytestmark = pytest.mark.statistical

POINTS = Q_GRID.points
D = (np.array([10.0]), np.array([10.0]))  # found by a search over small datasets for the most powerful events
D2 = (np.r_[D[0], 3.0], D[1])  # one row added to group 0
D2_OVERLAPPING = (np.r_[D[0], 3.0], np.r_[D[1], 3.0])  # the broken variant: the row is in both groups


def pairs(mechanism: QuantileMechanism, data: tuple[np.ndarray, np.ndarray], seed: int) -> np.ndarray:
    """N released pairs, encoded y0 * POINTS + y1."""
    return quantile_draws(mechanism, data[0], seed) * POINTS + quantile_draws(mechanism, data[1], seed + 1000)


def law(mechanism: QuantileMechanism, data: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The exact joint law of the pair (independent groups), flattened like :func:`pairs`."""
    p0, p1 = (mechanism.probabilities(Q_GRID.encode(values)) for values in data)
    return np.outer(p0, p1).ravel()


def joint_events(mechanism: QuantileMechanism) -> list[Event]:
    outputs = np.arange(POINTS * POINTS)
    laws = [law(mechanism, data) for data in (D, D2, D2_OVERLAPPING)]
    events = []
    for s in range(POINTS - 1):
        for t in range(POINTS - 1):
            def low(out, s=s, t=t):
                return (out // POINTS <= s) & (out % POINTS <= t)
            p = [float(p_[low(outputs)].sum()) for p_ in laws]
            if min(min(p), 1 - max(p)) < 0.01:
                continue
            for side in ("D", "D'"):
                events.append(Event(f"y0 <= {s} and y1 <= {t}", low, side))
                events.append(Event(f"not (y0 <= {s} and y1 <= {t})", lambda out, low=low: ~low(out), side))
    return events


def test_grouped_median_audit_stays_within_the_per_group_loss_and_flags_overlapping_groups():
    per_group = QuantileMechanism(Q_GRID, Fraction(1, 2), PureBudget(Fraction(1)))
    booked = float(GroupedQuantile(per_group, groups=2).privacy_loss().epsilon)
    assert booked == float(per_group.privacy_loss().epsilon)
    events = joint_events(per_group)
    result = audit(pairs(per_group, D, 1), pairs(per_group, D2, 2), events, statistic="epsilon", alpha=ALPHA)
    assert result.value <= booked, result.as_dict()
    flagged = audit(pairs(per_group, D, 3), pairs(per_group, D2_OVERLAPPING, 4), events, statistic="epsilon",
                    alpha=ALPHA)
    assert flagged.value > booked, flagged.as_dict()
    outputs = np.arange(POINTS * POINTS)
    base, broken = law(per_group, D), law(per_group, D2_OVERLAPPING)
    misses = []
    for event in events:
        hit = event.indicator(outputs)
        num, den = (base, broken) if event.numerator == "D" else (broken, base)
        misses.append(power_failure_log10("epsilon", float(num[hit].sum()), float(den[hit].sum()), N,
                                          ALPHA / len(events), booked))
    print(f"\ngrouped median audit: epsilon_hat={result.value:.3f} (booked {booked}), overlapping groups "
          f"{flagged.value:.3f}, {len(events)} events, log10 P(miss) <= {min(misses):.1f}")
    assert min(misses) <= POWER_MISS_LOG10_MAX
