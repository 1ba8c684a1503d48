"""The degree-2 junction-tree model: clique choice, its score's sensitivity, estimation and sampling."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import ParameterError
from dprelease.dp.measurement.cliques import (
    CONDITIONAL_L1_SENSITIVITY,
    candidate_triples,
    coarse_map,
    conditional_l1_score,
    hub,
    leaf_scores,
    noise_dominated,
    select_cliques,
    select_root,
    tree_order,
)
from dprelease.dp.measurement.structure import independence_scores
from dprelease.dp.mechanisms.random import secure_noise
from dprelease.dp.synthesis.arrays import align, sum_to
from dprelease.dp.synthesis.junction import JunctionTree, Marginal, estimate, junction_parents, measured_start
from dprelease.dp.synthesis.sampling import (
    _alias_tables,
    _group_draw,
    adjust_to_counts,
    sample_junction,
    systematic_draw,
)


@settings(max_examples=400, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4),
       st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)), max_size=40),
       st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)))
def test_one_row_moves_the_conditional_l1_score_by_less_than_four(n_pa, n_q, n_ch, rows, extra):
    def table(data):
        x = np.zeros((n_pa, n_q, n_ch), dtype=np.int64)
        for a, b, c in data:
            x[a % n_pa, b % n_q, c % n_ch] += 1
        return x

    before = conditional_l1_score(table(rows))
    after = conditional_l1_score(table([*rows, extra]))
    assert abs(after - before) < CONDITIONAL_L1_SENSITIVITY


def test_the_sensitivity_bound_is_nearly_attained():
    # One large slice where the new row's child disagrees with every earlier row: the change approaches 4.
    x = np.zeros((1, 2, 2))
    x[0, 0, 0] = 1000
    y = x.copy()
    y[0, 1, 1] += 1
    assert 3.9 < abs(conditional_l1_score(y) - conditional_l1_score(x)) < 4


def test_coarse_map_is_contiguous_and_balanced():
    mapping = coarse_map(np.full(100, 0.01), 8)
    assert (np.diff(mapping) >= 0).all() and mapping[0] == 0 and mapping.max() == 7
    sizes = np.bincount(mapping)
    assert (sizes[:-1] == 13).all() and sizes[-1] == 9  # each bin closes once it holds 1/8 of the mass
    assert coarse_map(np.array([0.9, 0.05, 0.05]), 4).tolist() == [0, 1, 2]  # the rest shares 3 bins
    with pytest.raises(ParameterError):
        coarse_map(np.ones(3), 0)


def test_coarse_map_gives_a_spike_its_own_bin_and_splits_its_neighbours():
    # hours-per-week: a spike at 40 between two runs; capital-gain: a spike at 0 and a thin tail.
    hours = np.zeros(99)
    hours[:39], hours[39], hours[40:] = 0.25 / 39, 0.47, 0.28 / 59
    mapping = coarse_map(hours, 8)
    assert (np.diff(mapping) >= 0).all() and mapping.max() == 7
    assert np.flatnonzero(mapping == mapping[39]).tolist() == [39]  # the spike alone
    assert mapping[38] < mapping[39] < mapping[40]
    gain = np.zeros(60)
    gain[0], gain[1:] = 0.92, 0.08 / 59
    mapping = coarse_map(gain, 8)
    assert mapping.tolist().count(0) == 1 and mapping.max() == 7  # the tail keeps 7 bins, not one
    # a thin remainder at the end of a run joins the bin before it
    assert coarse_map(np.array([0.1] * 9 + [0.01]), 4).tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 2]


def test_tree_order_hub_and_candidates():
    edges = [("a", "b"), ("b", "c"), ("b", "d")]
    assert hub(["a", "b", "c", "d"], edges) == "b"
    order = tree_order(["a", "b", "c", "d"], edges, "a")
    assert order == [("a", None), ("b", "a"), ("c", "b"), ("d", "b")]
    assert ("b", "a", "c") in candidate_triples(order) and ("b", "c", "c") not in candidate_triples(order)


def _pair_counts(data: np.ndarray, sizes: tuple[int, ...]) -> dict[tuple[str, str], np.ndarray]:
    names = "abcd"[: data.shape[1]]
    return {(names[i], names[j]): np.bincount(data[:, i] * sizes[j] + data[:, j], minlength=sizes[i] * sizes[j])
            for i in range(len(names)) for j in range(i + 1, len(names))}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 1), st.integers(0, 2), st.integers(0, 1)), max_size=40),
       st.tuples(st.integers(0, 2), st.integers(0, 1), st.integers(0, 2), st.integers(0, 1)),
       st.sampled_from([[("a", "b"), ("b", "c"), ("b", "d")], [("a", "b"), ("b", "c"), ("c", "d")]]))
def test_one_row_moves_every_leaf_score_by_at_most_one(rows, extra, edges):
    # The root's score is a mean of independence scores (each of sensitivity 1) under fixed public 1-ways
    # and total: one more row moves it by at most 1. The sum would not (the power check below).
    sizes = (3, 2, 3, 2)
    p = {n: np.full(k, 1.0 / k) for n, k in zip("abcd", sizes, strict=True)}
    data = np.array(rows, dtype=np.int64).reshape(-1, 4)
    bigger = np.vstack([data, np.array([extra])])
    names = ["a", "b", "c", "d"]
    before = leaf_scores(names, edges, independence_scores(_pair_counts(data, sizes), p, 20.0))
    after = leaf_scores(names, edges, independence_scores(_pair_counts(bigger, sizes), p, 20.0))
    assert before.keys() == after.keys() and all(abs(after[c] - before[c]) <= 1 + 1e-9 for c in before)


def test_a_summed_leaf_score_would_move_by_more_than_one():
    # Power check of the property above: the leaf a of a path a-b-c-d has two pairs outside the tree;
    # with uniform 1-ways their summed scores move by 2 for one row, their mean by 1.
    p = {n: np.full(2, 0.5) for n in "abcd"}
    edges = [("a", "b"), ("b", "c"), ("c", "d")]
    data = np.zeros((0, 4), dtype=np.int64)
    one = np.zeros((1, 4), dtype=np.int64)
    s0 = independence_scores(_pair_counts(data, (2, 2, 2, 2)), p, 0.0)
    s1 = independence_scores(_pair_counts(one, (2, 2, 2, 2)), p, 0.0)
    outside = [("a", "c"), ("a", "d")]
    assert sum(s1[k] - s0[k] for k in outside) == 2
    assert leaf_scores(list("abcd"), edges, s1)["a"] - leaf_scores(list("abcd"), edges, s0)["a"] == 1


def test_the_root_is_the_leaf_with_most_dependence_outside_the_tree_booked_and_replayed(tmp_path):
    edges = [("a", "b"), ("b", "c"), ("b", "d")]
    scores = {("a", "b"): 9.0, ("a", "c"): 50.0, ("a", "d"): 40.0, ("b", "c"): 9.0, ("b", "d"): 9.0, ("c", "d"): 1.0}
    assert leaf_scores(["a", "b", "c", "d"], edges, scores) == {"a": 45.0, "c": 25.5, "d": 20.5}
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        ledger.register("pop", "zcdp", ZCDPBudget(Fraction(10**6)), Fraction(1, 10**9))
        ledger.reserve("pop", "r", ZCDPBudget(Fraction(10**5)))
        context = ReleaseContext(ledger, "r", "zcdp", secure_noise())
        root, records = select_root(["a", "b", "c", "d"], edges, scores, PureBudget(Fraction(100)), context,
                                    score_sensitivity=1)
        assert root == "a" and [r.query for r in records] == ["root of the junction tree"]
        assert [c.query for c in ledger.charges(release_id="r")] == ["root of the junction tree"]
        again, _ = select_root(["a", "b", "c", "d"], edges, {k: 0.0 for k in scores}, PureBudget(Fraction(100)),
                               context, score_sensitivity=1)
        assert again == "a" and len(ledger.charges(release_id="r")) == 1  # replayed, not redrawn
        # two columns: no leaf has a pair outside the tree, so the hub is the root and nothing is drawn
        assert select_root(["a", "b"], [("a", "b")], {("a", "b"): 3.0}, PureBudget(Fraction(100)), context,
                           score_sensitivity=1) == ("a", [])


ORDER = [("a", None), ("b", "a"), ("c", "b"), ("d", "b")]
SHAPES = {"a": 2, "b": 2, "c": 2, "d": 2}


def _triples_where_c_copies_a() -> dict[tuple[str, ...], np.ndarray]:
    """Exact counts of every candidate triple of ORDER over 2,000 rows in which c copies a (test data)."""
    data = np.random.default_rng(0).integers(0, 2, size=(2000, 4))
    data[:, 2] = data[:, 0]  # c copies a: given b, a predicts c perfectly
    triples = {}
    for triple in candidate_triples(ORDER):
        index = ["abcd".index(v) for v in triple]
        flat = data[:, index[0]] * 4 + data[:, index[1]] * 2 + data[:, index[2]]
        triples[triple] = np.bincount(flat, minlength=8)
    return triples


def test_second_parents_follow_the_scores_with_little_noise_and_are_booked_and_replayed(tmp_path):
    order, shapes, triples = ORDER, SHAPES, _triples_where_c_copies_a()
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        ledger.register("pop", "zcdp", ZCDPBudget(Fraction(10**6)), Fraction(1, 10**9))
        ledger.reserve("pop", "r", ZCDPBudget(Fraction(10**5)))
        context = ReleaseContext(ledger, "r", "zcdp", secure_noise())
        cliques, records = select_cliques(order, triples, shapes, PureBudget(Fraction(100)), context,
                                          score_sensitivity=4)
        assert cliques == [("a", "b"), ("b", "a", "c"), ("b", cliques[2][1], "d")]
        # c's only candidate is a (the one clique so far is (a, b)): not run, nothing booked; d chooses.
        assert [r.query for r in records] == ["second parent of d"]
        assert [c.query for c in ledger.charges(release_id="r")] == ["second parent of d"]
        again, _ = select_cliques(order, {k: np.zeros_like(v) for k, v in triples.items()}, shapes,
                                  PureBudget(Fraction(100)), context, score_sensitivity=4)
        assert again == cliques and len(ledger.charges(release_id="r")) == 1  # replayed, not redrawn
    # (b, a, d) sits under the first clique holding {a, b}; (b, c, d) under the one holding {b, c}
    assert junction_parents(cliques) == (None, 0, 0 if "a" in cliques[2] else 1)


def test_estimation_recovers_exact_marginals_and_is_consistent():
    generator = np.random.default_rng(1)  # test data
    joint = generator.dirichlet(np.ones(12)).reshape(2, 3, 2)  # over (a, b, c)
    ab = joint.sum(axis=2) * 1000
    bc = joint.sum(axis=0) * 1000
    cliques = (("a", "b"), ("b", "c"))
    tree = JunctionTree(cliques, junction_parents(cliques), {"a": 2, "b": 3, "c": 2})
    fitted = estimate(tree, [Marginal(("a", "b"), ab, 1.0), Marginal(("b", "c"), bc, 1.0)], 1000.0, iterations=400)
    assert np.allclose(fitted.marginal(("a", "b")) * 1000, ab, atol=0.5)
    assert np.allclose(fitted.marginal(("b", "c")) * 1000, bc, atol=0.5)
    assert np.allclose(fitted.cliques[0].sum(axis=0), fitted.cliques[1].sum(axis=1), atol=1e-9)  # consistent on b


def test_the_measured_start_is_the_network_read_off_the_noisy_cliques():
    generator = np.random.default_rng(2)  # test data
    joint = generator.dirichlet(np.ones(12)).reshape(2, 3, 2) * 1000  # over (a, b, c)
    cliques = (("a", "b"), ("b", "c", "a"))
    tree = JunctionTree(cliques, junction_parents(cliques), {"a": 2, "b": 3, "c": 2})
    noisy_ab = joint.sum(axis=2) + np.array([[-400.0, 0, 0], [0, 0, 0]])  # a negative count is clipped to 0
    measured = [Marginal(("a",), joint.sum(axis=(1, 2)), 1.0), Marginal(("a", "b"), noisy_ab, 1.0),
                Marginal(("a", "b", "c"), joint, 1.0)]  # the second clique measured in another column order
    start = measured_start(tree, measured, 1000.0)
    assert start is not None
    beliefs = [np.exp(b) for b in tree.calibrate(start)]
    ab = np.maximum(noisy_ab, 0) + 1.0
    assert np.allclose(beliefs[0], ab / ab.sum())  # the root clique: the clipped, smoothed noisy table
    bca = np.transpose(joint, (1, 2, 0)) + 1.0
    conditional = bca / bca.sum(axis=1, keepdims=True)  # P(c | b, a) of the second table
    assert np.allclose(beliefs[1] / beliefs[1].sum(axis=1, keepdims=True), conditional)
    assert measured_start(tree, measured[:1], 1000.0) is None  # no clique measured whole: the uniform start
    # a clique whose expected noise (sqrt(2/π) σ per cell: 12 cells at σ = 110 is about 1,053) exceeds the
    # rows starts uniform given its separator; the other still starts from its table
    noisy = [measured[1], Marginal(("a", "b", "c"), joint, 110.0**2)]
    mixed = measured_start(tree, noisy, 1000.0)
    assert mixed is not None and np.allclose(mixed[1], 0.0) and not np.allclose(mixed[0], 0.0)
    assert not np.allclose(measured_start(tree, noisy, 1100.0)[1], 0.0)  # type: ignore[index]


def test_a_fit_from_the_measured_start_gets_further_in_the_same_steps():
    generator = np.random.default_rng(3)  # test data: a noisy degree-2 chain
    sizes = {"a": 4, "b": 5, "c": 6, "d": 4}
    joint = generator.dirichlet(np.full(480, 0.3)).reshape(4, 5, 6, 4) * 20000
    cliques = (("a", "b", "c"), ("b", "c", "d"))
    tree = JunctionTree(cliques, junction_parents(cliques), sizes)
    measured = [Marginal(("a", "b", "c"), joint.sum(axis=3) + generator.normal(0, 10, (4, 5, 6)), 100.0),
                Marginal(("b", "c", "d"), joint.sum(axis=0) + generator.normal(0, 10, (5, 6, 4)), 100.0),
                Marginal(("a",), joint.sum(axis=(1, 2, 3)) + generator.normal(0, 3, 4), 9.0)]
    cold = estimate(tree, measured, 20000.0, iterations=40)
    warm = estimate(tree, measured, 20000.0, iterations=40, start=measured_start(tree, measured, 20000.0))
    assert warm.loss < 0.5 * cold.loss


def test_a_marginal_outside_every_clique_is_refused():
    tree = JunctionTree((("a", "b"),), (None,), {"a": 2, "b": 2, "c": 2})
    with pytest.raises(ParameterError, match="no clique contains"):
        estimate(tree, [Marginal(("a", "c"), np.ones((2, 2)), 1.0)], 4.0)


def test_estimation_may_start_from_given_potentials():
    tree = JunctionTree((("a", "b"),), (None,), {"a": 2, "b": 2})
    start = np.log(np.array([[0.3, 0.1], [0.1, 0.5]]))
    unmoved = estimate(tree, [Marginal(("a", "b"), np.array([[30.0, 10.0], [10.0, 50.0]]), 1.0)], 100.0,
                       iterations=0, start=[start])
    assert np.allclose(unmoved.cliques[0], [[0.3, 0.1], [0.1, 0.5]]) and unmoved.loss < 1e-9
    with pytest.raises(ParameterError, match="one log-potential per clique"):
        estimate(tree, [], 100.0, start=[np.zeros(3)])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=8), st.integers(0, 500), st.integers(0, 2**32 - 1))
def test_systematic_draw_counts_are_within_one_of_expectation(weights, n, seed):
    p = np.asarray(weights) + 1e-9
    counts = np.bincount(systematic_draw(p, n, np.random.default_rng(seed)), minlength=len(p))
    assert counts.sum() == n
    assert (np.abs(counts - n * p / p.sum()) <= 1 + 1e-9).all()


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 5), st.integers(1, 6), st.integers(0, 400), st.integers(0, 2**32 - 1))
def test_group_draw_is_a_systematic_draw_in_every_group(groups, width, rows, seed):
    generator = np.random.default_rng(seed)
    keys = generator.integers(0, groups, size=rows)
    table = generator.random((groups, width)) * (generator.random((groups, width)) > 0.3)
    table[0] = 0.0  # a group without mass draws uniformly, as systematic_draw does
    out = _group_draw(keys, table, np.random.default_rng(seed + 1))
    assert out.shape == (rows,) and ((out >= 0) & (out < width)).all()
    for group in range(groups):
        drawn = out[keys == group]
        p = table[group] / table[group].sum() if table[group].sum() > 0 else np.full(width, 1 / width)
        counts = np.bincount(drawn, minlength=width)
        assert (np.abs(counts - len(drawn) * p) <= 1 + 1e-9).all()
        assert (counts[p == 0] == 0).all()


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 4), st.integers(1, 9), st.integers(0, 2**32 - 1))
def test_alias_tables_give_each_code_exactly_its_share(groups, width, seed):
    generator = np.random.default_rng(seed)
    weights = generator.random((groups, width)) * (generator.random((groups, width)) > 0.3) + 1e-300
    keep, alias = _alias_tables(weights)
    for g in range(groups):
        p = np.bincount(np.arange(width), weights=keep[g], minlength=width)
        p += np.bincount(alias[g], weights=1.0 - keep[g], minlength=width)
        assert np.allclose(p / width, weights[g] / weights[g].sum(), atol=1e-12)


def test_large_tables_draw_independently_from_each_groups_distribution(monkeypatch):
    import dprelease.dp.synthesis.sampling as sampling

    monkeypatch.setattr(sampling, "SYSTEMATIC_ROWS", 1000)
    generator = np.random.default_rng(5)
    keys = generator.integers(0, 3, size=60_000)
    table = np.array([[0.7, 0.2, 0.1, 0.0], [0.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.0, 0.5]])
    out = _group_draw(keys, table, np.random.default_rng(6))
    for group, p in enumerate([table[0], np.full(4, 0.25), table[2]]):
        drawn = out[keys == group]
        counts = np.bincount(drawn, minlength=4)
        assert (counts[p == 0] == 0).all()
        expected = len(drawn) * p
        assert (np.abs(counts - expected) <= 5 * np.sqrt(expected * (1 - p)) + 1e-9).all()  # 5 sd: false alarm < 1e-5


def test_group_draw_shuffles_the_rows_of_a_group():
    keys = np.zeros(1000, dtype=np.int64)
    out = _group_draw(keys, np.array([[0.5, 0.5]]), np.random.default_rng(3))
    assert np.bincount(out).tolist() == [500, 500]
    assert 400 < np.count_nonzero(out[:-1] != out[1:]) < 600  # random order: about half the neighbours differ


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6), st.integers(0, 300), st.integers(0, 2**32 - 1))
def test_adjust_to_counts_meets_the_targets_exactly(codes_count, rows, seed):
    generator = np.random.default_rng(seed)
    codes = generator.integers(0, codes_count, size=rows)
    targets = generator.multinomial(rows, np.ones(codes_count) / codes_count)
    likelihood = generator.random((rows, codes_count))
    out = adjust_to_counts(codes, lambda which, code: likelihood[which, code], targets, generator)
    assert np.bincount(out, minlength=codes_count).tolist() == targets.tolist()


def test_junction_sampling_follows_the_model_and_reproduces_exact_counts():
    # b is a copy of a; c is coarsened 4 -> 2 and independent of both.
    cliques = [("a", "b"), ("b", "c")]
    sizes = {"a": 3, "b": 3, "c": 4}
    maps = {"c": np.array([0, 0, 1, 1])}
    ab = np.diag([0.5, 0.3, 0.2])
    bc = np.outer([0.5, 0.3, 0.2], [0.5, 0.5])

    def marginal(columns):
        table = {("a", "b"): ab, ("b", "c"): bc}.get(tuple(columns))
        if table is not None:
            return table
        return {"a": ab.sum(1), "b": ab.sum(0), "c": bc.sum(0)}[columns[0]]

    fine = {"a": ab.sum(1), "b": ab.sum(0), "c": np.array([0.4, 0.1, 0.25, 0.25])}
    exact = {"b": np.array([480, 330, 190])}
    codes = sample_junction(cliques, marginal, sizes, maps, fine, 1000, np.random.default_rng(5), exact)
    assert np.bincount(codes["b"], minlength=3).tolist() == [480, 330, 190]
    assert (codes["a"] == codes["b"]).mean() > 0.95  # only the few adjusted rows may disagree
    within = np.bincount(codes["c"], minlength=4)
    assert abs(within[0] / within[:2].sum() - 0.8) < 0.05  # refined within the coarse bin by the fine 1-way


def test_a_marginal_may_carry_one_variance_per_cell():
    tree = JunctionTree((("a", "b"),), (None,), {"a": 2, "b": 2})
    joint = Marginal(("a", "b"), np.array([[30.0, 10.0], [10.0, 50.0]]), 100.0)
    # a precise first cell and a vague second one: the fit follows the precise one
    one_way = Marginal(("a",), np.array([60.0, 20.0]), np.array([1e-4, 1e4]))
    fit = estimate(tree, [joint, one_way], 100.0, iterations=300)
    assert abs(fit.marginal(("a",))[0] * 100 - 60) < 1
    with pytest.raises(ParameterError, match="one number or one per cell"):
        estimate(tree, [Marginal(("a",), np.array([60.0, 40.0]), np.array([1.0, 1.0, 1.0]))], 100.0)
    with pytest.raises(ParameterError, match="variance must be positive"):
        estimate(tree, [Marginal(("a",), np.array([60.0, 40.0]), np.array([1.0, 0.0]))], 100.0)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_logsumexp_matches_scipy(rows, cols, seed):
    from scipy.special import logsumexp as reference

    from dprelease.dp.synthesis.arrays import logsumexp

    array = np.random.default_rng(seed).normal(0, 50, size=(rows, cols, 3))
    for axis in (None, 0, 1, (0, 2), (0, 1, 2)):
        assert np.allclose(logsumexp(array, axis=axis), reference(array, axis=axis), rtol=1e-12, atol=1e-9)


def test_noise_aware_second_parents_drop_a_parent_whose_cells_would_hold_more_noise_than_it_explains(tmp_path):
    order, shapes, triples = ORDER, SHAPES, _triples_where_c_copies_a()  # a explains c (score about 2000)
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        ledger.register("pop", "zcdp", ZCDPBudget(Fraction(10**6)), Fraction(1, 10**9))
        ledger.reserve("pop", "r", ZCDPBudget(Fraction(10**5)))
        context = ReleaseContext(ledger, "r", "zcdp", secure_noise())
        # sigma 100: a second parent adds 4 cells, about 319 of L1 error; a's gain for c is far larger, while d
        # is independent of everything (its best score is small): d gets no second parent.
        cliques, records = select_cliques(order, triples, shapes, PureBudget(Fraction(200)), context,
                                          score_sensitivity=4, noise_sd=100.0)
    assert cliques == [("a", "b"), ("b", "a", "c"), ("b", "d")]
    assert [r.query for r in records] == ["second parent of c", "second parent of d"]  # "none" is a candidate
    assert noise_dominated(46.0, 8, 7634) and not noise_dominated(30.0, 8, 32561)


@settings(max_examples=60, deadline=None)
@given(st.permutations(["a", "b", "c"]), st.integers(0, 3), st.integers(0, 2**32 - 1))
def test_sum_to_and_align_agree_with_einsum(order, kept, seed):
    generator = np.random.default_rng(seed)  # test data
    sizes = {"a": 2, "b": 3, "c": 4}
    source = tuple(order)
    array = generator.normal(size=[sizes[c] for c in source])
    keep = tuple(order[:kept][::-1])  # a subset, in another order
    letters = {"a": "i", "b": "j", "c": "k"}
    expected = np.einsum("".join(letters[c] for c in source) + "->" + "".join(letters[c] for c in keep), array)
    assert np.allclose(sum_to(array, source, keep), expected)
    assert np.allclose(sum_to(array, source, keep, log=True), np.log(np.einsum(
        "".join(letters[c] for c in source) + "->" + "".join(letters[c] for c in keep), np.exp(array))))
    laid = align(expected, keep, source)
    assert laid.shape == tuple(sizes[c] if c in keep else 1 for c in source)
    copies = array.size // max(expected.size, 1)  # the cells of the columns ``keep`` lacks
    assert np.allclose(sum_to(np.broadcast_to(laid, array.shape), source, keep), expected * copies)
