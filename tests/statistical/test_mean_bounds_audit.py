"""Statistical privacy audit and power check of a mean's bounds and offset (``dp.statistics.means``).

:func:`dprelease.dp.statistics.means.select_mean_bounds` runs up to three exponential-mechanism
selections: the upper bound (production scores :func:`bound_scores` of the rows above each candidate),
the lower bound (the mirror image) and the offset (:func:`centre_scores`, −|rows below − rows above|,
over the candidates between the selected bounds, public by then). The audit draws each selection
vectorised (argmax of the production scores plus Gumbel noise at the production scale of
:class:`ExponentialMechanism`, from a seeded generator: the Gumbel-max law is exactly the exponential
mechanism's) on neighbouring data D and D' = D plus one row, N = 100 000 runs per side, and for each
outcome "the i-th candidate", in both directions, takes a Clopper–Pearson lower bound of
ln(P[E | num] / P[E | den]) (:func:`tests.statistical.audit.audit`); it must not exceed the booked
epsilon of the selection. ``test_production_hands_the_audited_scores_and_scales`` pins that the
production function gives exactly these scores and scales to the selection (the production OpenDP
draw is checked against its exact law in ``test_selection_audit.py``).

The bounds are drawn by :class:`MonotoneExponentialMechanism` at scale Δ/ε (their scores are monotone:
an added row lowers each by 0 or 1), the offset by :class:`ExponentialMechanism` at 2Δ/ε; the exact
log-ratio of every outcome is also checked against the booked epsilon (for the bounds it reaches it:
the monotone scale spends the whole epsilon). Power: the audit must flag a bound variant at half the
monotone scale (the scale of a broken claim that the scores move by 1/2) and an offset variant at a
third of its scale. For each, the probability that the audit would miss it is bounded from the
exact outcome probabilities (``power_failure_log10``) and asserted <= 1e-9.
False alarms: <= 1e-6 per audit (Bonferroni over the events and the two one-sided bounds).
"""

from __future__ import annotations

from fractions import Fraction
from typing import ClassVar

import numpy as np
import pytest

from dprelease.dp.accounting.budget import PureBudget
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.measurement.bounds import tail_counts
from dprelease.dp.mechanisms.selection import ExponentialMechanism, MonotoneExponentialMechanism
from dprelease.dp.statistics.means import bound_scores, centre_scores, mean_grid, select_mean_bounds
from tests.noise import SeededNoise
from tests.statistical.audit import Event, audit, power_failure_log10

pytestmark = pytest.mark.statistical

ALPHA = 1e-6
N = 100_000
RUN = PureBudget(Fraction(2))  # scale 1
SIGNED = mean_grid(-1.5, 1.5)  # -1.5, -1.331, -1.21, -1.1, -1, 0, 1, 1.1, 1.21, 1.331, 1.5: both ends searched
ANCHOR = SIGNED.index(0.0)
# (D, D'): one row beyond every candidate of the side but its last; for the offset, a row that raises the
# scores below it and lowers those above (non-monotone: the full epsilon).
CASES = {
    "upper": (np.array([0.5]), np.array([0.5, 1.5])),
    "lower": (np.array([-0.5]), np.array([-0.5, -1.5])),
    "centre": (np.array([1.05, 1.05]), np.array([1.05, 1.05, -0.5])),
}


def scores(values: np.ndarray, side: str, scale: float) -> np.ndarray:
    below, above = tail_counts(values, SIGNED)
    if side == "upper":
        return bound_scores(above[ANCHOR:], scale)
    if side == "lower":
        return bound_scores(np.asarray(below[:ANCHOR + 1])[::-1], scale)
    return centre_scores(below, above)  # the offset among all candidates (the bounds at the grid's ends)


def selections(values: np.ndarray, side: str, scale: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)  # audit stand-in: the Gumbel-max law of the exponential mechanism
    u = scores(values, side, scale)
    return np.argmax(u + rng.gumbel(0.0, scale, (N, len(u))), axis=1)


def exact(values: np.ndarray, side: str, scale: float) -> np.ndarray:
    u = scores(values, side, scale)
    w = np.exp((u - u.max()) / scale)
    return w / w.sum()


def production_scale(side: str) -> float:
    """The scale select_mean_bounds uses for a selection of RUN: monotone for the bounds, not for the offset."""
    return (ExponentialMechanism if side == "centre" else MonotoneExponentialMechanism)(1, RUN).scale()


def events(side: str) -> list[Event]:
    size = len(SIGNED) if side == "centre" else ANCHOR + 1
    return [Event(f"index == {i}", lambda o, i=i: o == i, who) for i in range(size) for who in ("D", "D'")]


@pytest.mark.parametrize("side", ["upper", "lower", "centre"])
def test_mean_bounds_audit_stays_within_the_booked_loss(side):
    scale = production_scale(side)
    d, d2 = CASES[side]
    result = audit(selections(d, side, scale, 1), selections(d2, side, scale, 2), events(side), statistic="epsilon",
                   alpha=ALPHA)
    print(f"\nmean {side}: empirical epsilon lower bound {result.value:.3f} (booked {float(RUN.epsilon)})")
    assert result.value <= float(RUN.epsilon)
    worst = float(np.max(np.abs(np.log(exact(d, side, scale) / exact(d2, side, scale)))))
    assert worst <= float(RUN.epsilon) + 1e-12


@pytest.mark.parametrize(("side", "divisor"), [("upper", 2), ("lower", 2), ("centre", 3)])
def test_an_under_scaled_variant_is_flagged(side, divisor):
    scale = production_scale(side) / divisor
    d, d2 = CASES[side]
    result = audit(selections(d, side, scale, 3), selections(d2, side, scale, 4), events(side), statistic="epsilon",
                   alpha=ALPHA)
    print(f"\nmean {side}, scale / {divisor}: empirical epsilon lower bound {result.value:.3f}")
    assert result.value > float(RUN.epsilon)
    p, q = exact(d, side, scale), exact(d2, side, scale)
    # The audit misses only if every event misses: bounded by the best single event's miss probability.
    miss = min(power_failure_log10("epsilon", max(a, b), min(a, b), N, ALPHA / len(events(side)), float(RUN.epsilon))
               for a, b in zip(p, q, strict=True))
    assert miss <= -9.0


def test_production_hands_the_audited_scores_and_scales(tmp_path):
    class Spy(SeededNoise):
        calls: ClassVar[list[tuple[list[float], float]]] = []

        def gumbel_argmax(self, scores, scale):  # type: ignore[no-untyped-def]
            self.calls.append((list(scores), scale))
            return int(np.argmax(scores))

        def exponential_argmax(self, scores, scale):  # type: ignore[no-untyped-def]
            raise AssertionError("the mean's bounds use the exponential mechanism")

    values = np.array([-0.5, 1.05, 1.05, 1.4])
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        ledger.register("pop", "pure", PureBudget(Fraction(100)), Fraction(0))
        ledger.reserve("pop", "r", PureBudget(Fraction(50)))
        found = select_mean_bounds(values, "x", (-1.5, 1.5), PureBudget(Fraction(4)), RUN,
                                   ReleaseContext(ledger, "r", "pure", Spy()))
        scale, centre_scale = production_scale("upper"), production_scale("centre")
        below, above = tail_counts(values, SIGNED)
        assert [c[1] for c in Spy.calls] == [scale, scale, centre_scale]  # bounds 4 split over two ends: 2 each
        np.testing.assert_array_equal(Spy.calls[0][0], bound_scores(above[ANCHOR:], scale))
        np.testing.assert_array_equal(Spy.calls[1][0], bound_scores(np.asarray(below[:ANCHOR + 1])[::-1], scale))
        lo, hi = SIGNED.index(found.selected[0]), SIGNED.index(found.selected[1])
        np.testing.assert_array_equal(Spy.calls[2][0], centre_scores(below[lo:hi + 1], above[lo:hi + 1]))
        charges = ledger.charges(release_id="r")
        assert [c.loss for c in charges] == [RUN.epsilon] * 3
        assert [c.sensitivity.endswith("monotone") for c in charges] == [True, True, False]
