"""Noise-capped cliques and the extra pairs their freed rounds buy (dp/measurement/cover.py)."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from dprelease.dp.accounting.budget import PureBudget
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.measurement.cliques import PlannedCliques, freed_rounds, select_cliques
from dprelease.dp.measurement.cover import capped, cover_pair, extra_candidates, residual_scores, select_extra_pairs
from dprelease.dp.measurement.draws import measure_plan
from dprelease.dp.measurement.marginals import ColumnDomain
from dprelease.dp.mechanisms.noise import additive_mechanism, measure
from dprelease.dp.mechanisms.random import secure_noise
from dprelease.dp.synthesis.junction import (
    FIT_CELL_STEPS,
    ITERATIONS,
    JunctionTree,
    Marginal,
    fit_steps,
    junction_parents,
    measured_start,
)
from dprelease.dp.synthesis.noisy import NoisyMarginal
from dprelease.schemas.plan import PlannedMeasurement
from tests.ledgers import charged_queries, pure_release


@pytest.fixture
def context(tmp_path: Path) -> Iterator[ReleaseContext]:
    with pure_release(tmp_path, Fraction(1000)) as opened:
        yield opened


_queries = charged_queries


def test_the_cap_is_expected_noise_against_rows_on_public_inputs():
    # sqrt(2/π) σ per cell: 10,080 cells at σ = 10.9 hold about 87,700 of noise against 32,561 rows
    assert capped(10.9, 10_080, 32_561.0) and not capped(10.9, 3_000, 32_561.0)
    assert not capped(10.9, 10_080, 32_561.0, cap=3.0)
    assert capped(1.0, 2, 1.0) and not capped(1.0, 1, 1.0)  # 1.596 > 1 > 0.798


def test_a_capped_second_parent_leaves_a_pair_and_frees_its_round(context):
    order = [("a", None), ("b", "a"), ("c", "b"), ("d", "b")]
    shapes = {"a": 2, "b": 2, "c": 2, "d": 40}
    triples = {(p, q, ch): np.ones(shapes[p] * shapes[q] * shapes[ch], dtype=np.int64)
               for p, q, ch in [("b", "a", "c"), ("b", "a", "d"), ("b", "c", "d")]}
    # σ = 10: (b, a, c) holds 64 of expected noise, (b, ·, d) at least 1,277: capped at 1,000, so d gets (b, d)
    cliques, records = select_cliques(order, triples, shapes, PureBudget(Fraction(1)), context, score_sensitivity=4,
                                      clique_sd=10.0, noise_cap=1000.0)
    assert cliques == [("a", "b"), ("b", "a", "c"), ("b", "d")] and records == []
    assert freed_rounds(cliques, records) == [2] and _queries(context) == []
    uncapped, _ = select_cliques(order, triples, shapes, PureBudget(Fraction(1)), context, score_sensitivity=4)
    assert len(uncapped[2]) == 3  # without the cap d's round runs (or its one candidate is taken)


def test_covering_a_pair_grows_the_path_and_keeps_a_junction_tree():
    cliques = [("a", "b"), ("a", "b", "c"), ("b", "c", "d"), ("d", "e"), ("b", "f")]
    grown = cover_pair(cliques, "a", "e")
    assert grown == [("a", "b"), ("a", "b", "c"), ("b", "c", "a", "d"), ("d", "a", "e"), ("b", "f")]
    JunctionTree(tuple(grown), junction_parents(grown), dict.fromkeys("abcdef", 2))  # valid: separators inside parents
    assert any({"a", "e"} <= set(c) for c in grown)
    assert cover_pair(cliques, "e", "f") is None  # different branches: no ancestor of f's clique holds e
    assert cover_pair(cliques, "c", "d") == cliques  # already held
    sizes = dict.fromkeys("abcdef", 2)
    held = sum(2 ** len(c) for c in cliques)  # 4 + 8 + 8 + 4 + 4
    found = [pair for pair, _ in extra_candidates(cliques, {("a", "e"): 1.0, ("e", "f"): 1.0}, sizes, held + 12)]
    assert found == [("a", "e")]  # grows (b, c, d) and (d, e) by 8 + 4 cells
    assert extra_candidates(cliques, {("a", "e"): 1.0}, sizes, held + 11) == []


def test_extra_pairs_follow_the_scores_and_are_booked_and_replayed(context):
    cliques = [("a", "b"), ("a", "b", "c"), ("b", "c", "d"), ("d", "e")]
    scores = {("a", "d"): 500.0, ("a", "e"): 5.0, ("b", "e"): 400.0}
    sizes = dict.fromkeys("abcde", 2)
    chosen, model, records = select_extra_pairs(cliques, 2, scores, sizes, PureBudget(Fraction(10)), context,
                                                score_sensitivity=1, cell_limit=10**6)
    assert chosen == [("a", "d"), ("b", "e")] and [r.query for r in records] == ["extra pair 1", "extra pair 2"]
    assert all(any(set(p) <= set(c) for c in model) for p in chosen)
    assert [q for _, q in _queries(context)] == ["extra pair 1", "extra pair 2"]
    again = select_extra_pairs(cliques, 2, dict.fromkeys(scores, 0.0), sizes, PureBudget(Fraction(10)), context,
                               score_sensitivity=1, cell_limit=10**6)
    assert again[0] == chosen and len(_queries(context)) == 2  # replayed, not redrawn


def test_a_release_books_the_extra_pairs_before_drawing_them_and_replays_them(context):
    rows = np.random.default_rng(5).integers(0, [2, 3, 2, 40], size=(1000, 4))  # test data
    rows[:, 2] = rows[:, 0]
    rows[:, 3] = (rows[:, 3] + 20 * rows[:, 0]) % 40  # d depends on a
    sizes = [2, 3, 2, 40]
    domains = [ColumnDomain("a", "category", ("x", "y")), ColumnDomain("b", "category", ("u", "v", "w")),
               ColumnDomain("c", "category", ("p", "q")),
               ColumnDomain("d", "category", tuple(f"k{i}" for i in range(40)))]

    def count_coarse(workload, maps):
        out = {}
        for columns in workload:
            index = ["abcd".index(c) for c in columns]
            shape = tuple(sizes[i] for i in index)
            flat = np.ravel_multi_index(tuple(rows[:, i] for i in index), shape)
            out[tuple(columns)] = np.bincount(flat, minlength=int(np.prod(shape)))
        return out

    exact = {(d.name,): np.bincount(rows[:, i], minlength=d.size) for i, d in enumerate(domains)}
    big, small = PureBudget(Fraction(2)), PureBudget(Fraction(1, 10))  # cliques at scale 10: σ ≈ 14
    pairs = tuple((a, b) for i, a in enumerate("abcd") for b in "abcd"[i + 1:])
    planned = PlannedCliques(3, big, 2, big, pairs, small, 2, None)  # a typical clique (2³ cells) is not capped
    plan = [PlannedMeasurement("one_way", (d.name,), big) for d in domains]
    measured = measure_plan(plan, exact, {}, domains, context, 1, cliques=planned, count_coarse=count_coarse)
    junction = measured.junction
    assert junction is not None
    queries = [q for _, q in _queries(context)]
    cliques = [m.columns for m in junction.cliques if not m.measurement.query.startswith("extra pair(")]
    extra = [m for m in junction.cliques if m.measurement.query.startswith("extra pair(")]
    freed = freed_rounds(cliques, [r for r in junction.records if r.query.startswith("second parent")])
    assert freed  # every 3-clique with d (40 categories) holds more than 1,000 of expected noise (1,800)
    assert all(len(cliques[i]) == 2 and "d" in cliques[i] for i in freed)
    assert extra  # d depends on a, which the 2-clique holding d lacks
    for m in extra:  # each drawn after its booking, at a third of half a clique's budget, inside the model
        assert queries.index(m.measurement.query) > max(queries.index(f"clique({','.join(c)})") for c in cliques)
        assert any(set(m.columns) <= set(c) for c in junction.model)
        assert m.measurement.scale > 2 * 10  # more noise than a whole clique's share
    JunctionTree(tuple(junction.model), junction_parents(junction.model),
                 {"a": 2, "b": 3, "c": 2, "d": 40})
    booked = len(queries)
    replayed = measure_plan(plan, exact, {}, domains, context, 1, cliques=planned, count_coarse=count_coarse).junction
    assert replayed is not None and len(_queries(context)) == booked  # replayed, not redrawn
    assert replayed.model == junction.model
    assert [m.counts.tolist() for m in replayed.cliques] == [m.counts.tolist() for m in junction.cliques]
    # where a typical clique (8³ cells) is itself noise-dominated, AIM's penalty applies instead: nothing is capped
    context.ledger.reserve("pop", "r2", PureBudget(Fraction(50)))
    other = ReleaseContext(context.ledger, "r2", "pure", secure_noise())
    dominated = PlannedCliques(3, big, 2, big, pairs, small, 8, None)
    plain = measure_plan(plan, exact, {}, domains, other, 1, cliques=dominated, count_coarse=count_coarse).junction
    assert plain is not None and plain.model == [m.columns for m in plain.cliques]
    assert not any("extra pair" in c.query for c in context.ledger.charges(release_id="r2"))


def test_one_row_moves_the_residual_score_by_at_most_one(context):
    generator = np.random.default_rng(7)  # test data
    cliques = [("a", "b"), ("a", "b", "c"), ("c", "d")]
    sizes = {"a": 2, "b": 3, "c": 2, "d": 4}
    mechanism = additive_mechanism(PureBudget(Fraction(10)), 1)
    measured = []  # noisy cliques, drawn and booked: the public model the score is measured against
    for clique in cliques:
        shape = tuple(sizes[c] for c in clique)
        noisy, record = measure(mechanism, generator.integers(0, 40, size=int(np.prod(shape))), context,
                                stage="cliques", query=f"clique({','.join(clique)})")
        measured.append(NoisyMarginal(clique, shape, noisy, record))
    candidates = extra_candidates(cliques, {("a", "d"): 0.0, ("b", "d"): 0.0}, sizes, 10**6)
    assert [p for p, _ in candidates] == [("a", "d"), ("b", "d")]
    exact = {("a", "d"): generator.integers(0, 30, size=8), ("b", "d"): generator.integers(0, 30, size=12)}
    before = residual_scores(candidates, measured, exact, sizes, 300.0)
    for cell in range(8):
        moved = {**exact, ("a", "d"): exact[("a", "d")] + np.eye(8, dtype=np.int64)[cell]}
        after = residual_scores(candidates, measured, moved, sizes, 300.0)
        assert abs(after[0] - before[0]) <= 1 + 1e-9 and after[1] == before[1]


def test_a_grown_model_takes_fewer_steps_and_starts_from_every_measurement_of_its_child():
    sizes = {"a": 2, "b": 3, "c": 4}
    generator = np.random.default_rng(11)  # test data
    joint = generator.dirichlet(np.ones(24)).reshape(2, 3, 4) * 5000  # over (a, b, c)
    bc, ac = joint.sum(axis=0), joint.sum(axis=1)
    ab = joint.sum(axis=2)
    measured = [Marginal(("a", "b"), ab, 1.0), Marginal(("b", "c"), bc, 1.0), Marginal(("a", "c"), ac, 1.0)]
    plain = JunctionTree((("a", "b"), ("b", "c")), (None, 0), sizes)
    assert fit_steps(plain, measured) == ITERATIONS  # every clique measured whole: the former steps
    grown = JunctionTree((("a", "b"), ("b", "a", "c")), (None, 0), sizes)  # (b, c) grew by a to hold (a, c)
    assert fit_steps(grown, measured) == round(ITERATIONS * FIT_CELL_STEPS * 6 / 30)
    start = measured_start(grown, measured, 5000.0)
    assert start is not None
    conditional = np.exp(start[1])
    assert np.allclose(conditional.sum(axis=2), 1.0)  # P(c | b, a)
    smoothed_bc, smoothed_ac = bc + 1.0, ac + 1.0
    p_c = smoothed_bc.sum(axis=0) / smoothed_bc.sum()
    expected = (smoothed_bc / smoothed_bc.sum(axis=1, keepdims=True))[:, None, :] \
        * (smoothed_ac / smoothed_ac.sum(axis=1, keepdims=True))[None, :, :] / p_c
    p_c_ac = smoothed_ac.sum(axis=0) / smoothed_ac.sum()
    expected = expected * p_c / p_c_ac  # the second table's own P(c) is divided out
    assert np.allclose(conditional, expected / expected.sum(axis=2, keepdims=True))


def test_extra_candidates_walk_the_tree_once_for_all_pairs_and_grow_as_cover_pair(monkeypatch):
    """A wide table has tens of thousands of candidate pairs: the tree's parents are computed once, not per pair."""
    import itertools

    from dprelease.dp.measurement import cover

    calls: list[int] = []
    real = cover.junction_parents
    monkeypatch.setattr(cover, "junction_parents", lambda cliques: calls.append(1) or real(cliques))
    model = [("a", "b"), ("a", "b", "c"), ("c", "d"), ("c", "d", "e"), ("a", "f")]
    sizes = {c: 3 for c in "abcdef"}
    scores = {pair: 0.0 for pair in itertools.combinations("abcdef", 2)}
    found = cover.extra_candidates(model, scores, sizes, 10**6)
    assert len(calls) == 1
    monkeypatch.setattr(cover, "junction_parents", real)
    assert found and all(grown == cover.cover_pair(model, *pair) for pair, grown in found)
    covered = {pair for pair, _ in found}
    assert ("a", "d") in covered and ("d", "f") not in covered  # d and f lie in different branches
    tight = cover.extra_candidates(model, scores, sizes, sum(cover.cells(c, sizes) for c in model) + 27)
    assert {pair for pair, _ in tight} < covered  # only pairs whose growth fits the cell limit
