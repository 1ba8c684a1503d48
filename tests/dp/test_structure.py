"""Private choice of 2-way marginals: independence scores and the spanning tree grown by the exponential mechanism."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.measurement.structure import independence_scores, select_spanning_tree
from dprelease.dp.mechanisms.random import secure_noise


def _context(ledger: Ledger) -> ReleaseContext:
    ledger.register("pop", "zcdp", ZCDPBudget(Fraction(10**6)), Fraction(1, 10**9))
    ledger.reserve("pop", "r", ZCDPBudget(Fraction(10**5)))
    return ReleaseContext(ledger, "r", "zcdp", secure_noise())


def test_with_little_noise_the_maximum_spanning_tree_is_chosen_and_every_round_is_booked(tmp_path):
    columns = ["a", "b", "c", "d"]
    scores = {("a", "b"): 100.0, ("a", "c"): 5.0, ("a", "d"): 90.0, ("b", "c"): 80.0, ("b", "d"): 95.0,
              ("c", "d"): 1.0}
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        context = _context(ledger)
        chosen, records = select_spanning_tree(columns, list(scores), scores, PureBudget(Fraction(200)), context,
                                              score_sensitivity=1)
        assert chosen == [("a", "b"), ("b", "d"), ("b", "c")]  # Kruskal on the scores; (a, d) would close a cycle
        charges = ledger.charges(release_id="r")
        assert [c.query for c in charges] == [f"spanning tree edge {i}" for i in (1, 2, 3)]
        # epsilon²/8 each (the exponential mechanism is epsilon-bounded-range), from the Gumbel scale actually
        # used (rounded up to a double: never above the budget); the native loss stays epsilon
        assert all(Fraction(4999, 1) < c.loss <= Fraction(200) ** 2 / 8 for c in charges)
        assert all(r.loss.amount == r.native_loss.amount ** 2 / 8 for r in records)
        assert [r.query for r in records] == [c.query for c in charges]
        # A re-run of the same release replays the sealed choices: same tree, no new charge.
        again, _ = select_spanning_tree(columns, list(scores), {p: -s for p, s in scores.items()},
                                        PureBudget(Fraction(200)), context, score_sensitivity=1)
        assert again == chosen and len(ledger.charges(release_id="r")) == 3


def test_candidates_that_cannot_connect_every_column_give_a_forest(tmp_path):
    scores = {("a", "b"): 1.0}
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        chosen, records = select_spanning_tree(["a", "b", "c"], [("a", "b")], scores, PureBudget(Fraction(1)),
                                               _context(ledger), score_sensitivity=1)
    assert chosen == [("a", "b")] and len(records) == 1


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.integers(1, 5), st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4)), max_size=60),
       st.tuples(st.integers(0, 3), st.integers(0, 4)), st.integers(0, 2**32 - 1))
def test_one_row_moves_every_score_by_at_most_one(size_a, size_b, rows, extra, seed):
    generator = np.random.default_rng(seed)  # the noisy 1-ways: any fixed distributions
    distributions = {"a": generator.dirichlet(np.ones(size_a)), "b": generator.dirichlet(np.ones(size_b))}
    total = float(generator.integers(0, 100))
    cells = [(r % size_a, c % size_b) for r, c in rows]

    def counts(data):
        flat = np.array([r * size_b + c for r, c in data], dtype=np.int64)
        return np.bincount(flat, minlength=size_a * size_b).astype(np.int64)

    neighbour = [*cells, (extra[0] % size_a, extra[1] % size_b)]
    score = independence_scores({("a", "b"): counts(cells)}, distributions, total)[("a", "b")]
    other = independence_scores({("a", "b"): counts(neighbour)}, distributions, total)[("a", "b")]
    assert abs(score - other) <= 1 + 1e-9
