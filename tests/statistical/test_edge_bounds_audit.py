"""Statistical privacy audit and power check of the edge bounds for a mean (``select_edge_bounds``).

Each end of :func:`dprelease.dp.measurement.bounds.select_edge_bounds` is one exponential-mechanism
selection over the geometric grid, on the production scores :func:`edge_scores` (−rows beyond − a
public base-measure term) at the production scale of :class:`ExponentialMechanism`. The audit draws
the selections vectorised (argmax of the scores plus Gumbel noise of that scale, from a seeded
generator: the Gumbel-max law is exactly the exponential mechanism's) on neighbouring data D and
D' = D plus one row, N = 100 000 runs per side, and for each outcome "upper (or lower) bound is the
i-th candidate", in both directions, a Clopper–Pearson lower bound of ln(P[E | num] / P[E | den])
(:func:`tests.statistical.audit.audit`); it must not exceed the booked epsilon of the run.
``test_selection_gets_the_audited_scores_and_scale`` pins that the production function hands exactly
these scores and scale to the selection (the production OpenDP draw of the exponential mechanism is
checked against its exact law in ``test_selection_audit.py``).

Power: the scores are monotone (one added row lowers every count-based score by 0 or 1), so the
correct mechanism's loss is at most half the booked epsilon and a variant with half the scale is
still within it; the audit must flag a variant whose score sensitivity is declared at a quarter of
its value (scale and base measure both at a quarter), and the probability that it would not is
bounded from the exact outcome probabilities (``power_failure_log10``) and asserted <= 1e-9.
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
from dprelease.dp.measurement.bounds import edge_scores, geometric_grid, select_edge_bounds, tail_counts
from dprelease.dp.mechanisms.selection import ExponentialMechanism
from tests.noise import SeededNoise
from tests.statistical.audit import Event, audit, power_failure_log10

pytestmark = pytest.mark.statistical

ALPHA = 1e-6
N = 100_000
RUN = PureBudget(Fraction(2))  # scale 1: the base measure 2^-j keeps every outcome's probability moderate
GRID = geometric_grid(0.0, 16.0)  # 0, 1, 2, 4, 8, 16
D = np.array([], dtype=np.float64)
RATIO = 2.0  # a public base-measure ratio that keeps the far candidates' probabilities measurable
NEIGHBOURS = {"upper": np.array([16.0]), "lower": np.array([0.0])}  # one row beyond every other candidate


def scores(values: np.ndarray, side: str, scale: float) -> np.ndarray:
    below, above = tail_counts(values, GRID)
    return edge_scores(above if side == "upper" else np.asarray(below)[::-1], scale, RATIO)


def selections(values: np.ndarray, side: str, scale: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)  # audit stand-in: the Gumbel-max law of the exponential mechanism
    u = scores(values, side, scale)
    return np.argmax(u + rng.gumbel(0.0, scale, (N, len(u))), axis=1)


def exact(values: np.ndarray, side: str, scale: float) -> np.ndarray:
    u = scores(values, side, scale)
    w = np.exp((u - u.max()) / scale)
    return w / w.sum()


def events() -> list[Event]:
    out = []
    for i in range(len(GRID)):
        out.append(Event(f"index == {i}", lambda o, i=i: o == i, "D"))
        out.append(Event(f"index == {i}", lambda o, i=i: o == i, "D'"))
    return out


@pytest.mark.parametrize("side", ["upper", "lower"])
def test_edge_selection_audit_stays_within_the_booked_loss(side):
    scale = ExponentialMechanism(1, RUN).scale()
    d2 = NEIGHBOURS[side]
    result = audit(selections(D, side, scale, 1), selections(d2, side, scale, 2), events(), statistic="epsilon",
                   alpha=ALPHA)
    print(f"\nedge {side}: empirical epsilon lower bound {result.value:.3f} (booked {float(RUN.epsilon)})")
    assert result.value <= float(RUN.epsilon)
    p, q = exact(D, side, scale), exact(d2, side, scale)
    assert float(np.max(np.abs(np.log(p / q)))) <= float(RUN.epsilon) / 2 + 1e-12  # monotone scores


@pytest.mark.parametrize("side", ["upper", "lower"])
def test_a_quarter_sensitivity_variant_is_flagged(side):
    scale = ExponentialMechanism(1, RUN).scale() / 4
    d2 = NEIGHBOURS[side]
    result = audit(selections(D, side, scale, 3), selections(d2, side, scale, 4), events(), statistic="epsilon",
                   alpha=ALPHA)
    print(f"\nedge {side}, quarter scale: empirical epsilon lower bound {result.value:.3f}")
    assert result.value > float(RUN.epsilon)
    p, q = exact(D, side, scale), exact(d2, side, scale)
    i = int(np.argmax(np.abs(np.log(p / q))))
    num, den = (q[i], p[i]) if q[i] > p[i] else (p[i], q[i])
    miss = power_failure_log10("epsilon", num, den, N, ALPHA / len(events()), float(RUN.epsilon))
    assert miss <= -9.0


def test_selection_gets_the_audited_scores_and_scale(tmp_path):
    class Spy(SeededNoise):
        calls: ClassVar[list[tuple[list[float], float]]] = []

        def gumbel_argmax(self, scores, scale):  # type: ignore[no-untyped-def]
            self.calls.append((list(scores), scale))
            return int(np.argmax(scores))

        def exponential_argmax(self, scores, scale):  # type: ignore[no-untyped-def]
            raise AssertionError("the edge bounds use the exponential mechanism")

    values = np.array([1.0, 3.0, 3.0, 9.0])
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        ledger.register("pop", "pure", PureBudget(Fraction(100)), Fraction(0))
        ledger.reserve("pop", "r", PureBudget(Fraction(50)))
        spy = Spy()
        found = select_edge_bounds("x", tail_counts(values, GRID), GRID, RUN, ReleaseContext(ledger, "r", "pure", spy),
                                   sensitivity=1, prior_ratio=RATIO)
        scale = ExponentialMechanism(1, RUN).scale()
        below, above = tail_counts(values, GRID)
        assert [c[1] for c in spy.calls] == [scale, scale]
        np.testing.assert_array_equal(spy.calls[0][0], edge_scores(above, scale, RATIO))
        np.testing.assert_array_equal(spy.calls[1][0], edge_scores(np.asarray(below)[::-1], scale, RATIO))
        # argmax at scale 1: lower 1 (no row below, score -ln 2 x 4 steps from the top); upper 4 (one row
        # above, -1 - 3 ln 2 = -3.08) over 16 (none above, -5 ln 2 = -3.47): one doubling is worth ln 2 rows
        assert (found.lower, found.upper) == (1.0, 4.0)
        charges = ledger.charges(release_id="r")
        assert [c.loss for c in charges] == [RUN.epsilon, RUN.epsilon]
        again = select_edge_bounds("x", tail_counts(values, GRID), GRID, RUN,
                                   ReleaseContext(ledger, "r", "pure", Spy()), sensitivity=1, prior_ratio=RATIO)
        assert again == found and len(ledger.charges(release_id="r")) == 2  # a re-run replays
