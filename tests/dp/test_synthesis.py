"""The forest model on the junction-tree path (1- and 2-cliques), and decoding codes back to values."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dprelease.dp.accounting.budget import ZCDPBudget
from dprelease.dp.accounting.charges import MeasurementRecord
from dprelease.dp.errors import InternalError, ParameterError
from dprelease.dp.measurement.marginals import Binning, category_domain, numeric_domain
from dprelease.dp.synthesis.junction import JunctionEstimate, fit_junction, forest_cliques, spanning_forest
from dprelease.dp.synthesis.noisy import NoisyMarginal
from dprelease.dp.synthesis.sampling import OutputColumn, decode, sample_junction


def _noisy(columns, shape, counts, std=1.0):
    record = MeasurementRecord(stage="s", query=str(columns), mechanism="discrete Gaussian", sensitivity="L2=1",
                               scale=std, loss=ZCDPBudget(Fraction(1)), native_loss=ZCDPBudget(Fraction(1)), std=std,
                               ci95=1.96 * std, cells=len(counts))
    return NoisyMarginal(tuple(columns), tuple(shape), np.asarray(counts, dtype=np.int64), record)


def _forest(columns, sizes, marginals, total, consistent=None) -> JunctionEstimate:
    """The release's forest path: the forest's cliques, fitted to the noisy marginals inside them."""
    cliques, fitted = forest_cliques(columns, marginals)
    return fit_junction(cliques, fitted, {}, consistent or {}, sizes, total)


def _sample(model, sizes, rows, rng, exact=None):
    return sample_junction(model.cliques, model.fitted.marginal, sizes, model.maps, model.fine, rows, rng, exact)


def test_forest_skips_cycles_and_isolated_columns_are_roots():
    order = spanning_forest(["a", "b", "c", "d"], [("a", "b"), ("b", "a"), ("c", "b")])
    assert order == [("a", None), ("b", "a"), ("c", "b"), ("d", None)]


def test_forest_cliques_are_roots_and_edges_and_leave_a_cycle_out_of_the_fit():
    marginals = [_noisy(("a",), (2,), [5, 5]), _noisy(("a", "b"), (2, 2), [5, 0, 0, 5]),
                 _noisy(("c", "b"), (2, 2), [5, 0, 0, 5]), _noisy(("a", "c"), (2, 2), [5, 0, 0, 5])]
    cliques, fitted = forest_cliques(["a", "b", "c", "d"], marginals)
    assert cliques == [("a",), ("a", "b"), ("b", "c"), ("d",)]
    assert [m.columns for m in fitted] == [("a",), ("a", "b"), ("c", "b")]  # (a, c) closes a cycle
    model = fit_junction(cliques, fitted, {}, {}, {"a": 2, "b": 2, "c": 2, "d": 3}, 10)
    assert model.edges() == [("a", "b"), ("b", "c")]
    with pytest.raises(ParameterError, match="no clique contains"):
        fit_junction(cliques, marginals, {}, {}, {"a": 2, "b": 2, "c": 2, "d": 3}, 10)


def test_forest_fit_recovers_consistent_two_ways():
    generator = np.random.default_rng(1)  # test data
    joint = generator.dirichlet(np.ones(12)).reshape(2, 3, 2)  # over (a, b, c)
    ab, bc = np.round(joint.sum(axis=2) * 1000), np.round(joint.sum(axis=0) * 1000)
    marginals = [_noisy(("a", "b"), (2, 3), ab.ravel()), _noisy(("c", "b"), (2, 3), bc.T.ravel())]
    model = _forest(["a", "b", "c"], {"a": 2, "b": 3, "c": 2}, marginals, 1000)
    assert model.cliques == [("a",), ("a", "b"), ("b", "c")]
    assert np.allclose(model.fitted.marginal(("a", "b")) * 1000, ab, atol=1.5)
    assert np.allclose(model.fitted.marginal(("c", "b")) * 1000, bc.T, atol=1.5)


def test_forest_cliques_published_as_marginals_are_not_published_again():
    marginals = [_noisy(("a",), (2,), [5, 5]), _noisy(("a", "b"), (2, 2), [5, 0, 0, 5])]
    consistent = {("a",): np.array([5, 5]), ("b", "a"): np.array([5, 0, 0, 5])}
    model = _forest(["a", "b", "c"], {"a": 2, "b": 2, "c": 2}, marginals, 10, consistent)
    assert list(model.counts) == [("c",)]  # the model's only clique without a published marginal
    assert int(model.counts[("c",)].sum()) == 10


def test_tree_reproduces_a_deterministic_dependency(rng):
    one = [_noisy(("a",), (2,), [50, 50]), _noisy(("b",), (2,), [50, 50])]
    two = [_noisy(("a", "b"), (2, 2), [50, 0, 0, 50])]  # b == a
    model = _forest(["a", "b"], {"a": 2, "b": 2}, [*one, *two], 100)
    codes = _sample(model, {"a": 2, "b": 2}, 1000, rng)
    assert np.array_equal(codes["a"], codes["b"])


def test_the_release_path_starts_from_the_consistent_tables_and_keeps_a_dependency(rng):
    from dprelease.dp.synthesis.junction import WARM_ITERATIONS
    from dprelease.dp.synthesis.postprocess import consistent_marginals

    marginals = [_noisy(("a",), (3,), [612, 1, 387], 5.0), _noisy(("b",), (2,), [590, 410], 5.0),
                 _noisy(("a", "b"), (3, 2), [598, -4, 3, -2, 6, 395], 5.0)]  # b == (a == 2), with noise
    consistent = consistent_marginals(marginals, 1000)
    model = _forest(["a", "b"], {"a": 3, "b": 2}, marginals, 1000, consistent)
    assert WARM_ITERATIONS < 300 and list(model.counts) == []  # every clique is published as a marginal
    codes = _sample(model, {"a": 3, "b": 2}, 1000, rng)
    assert (codes["b"] == (codes["a"] == 2)).mean() > 0.98  # noise of sigma 5 a cell: a few rows off it


def test_empty_parent_row_falls_back_to_the_child_marginal(rng):
    def marginal(columns):  # no mass in either row of (a, b): each falls back to b's 1-way
        return {("a",): np.array([1.0, 0.0]), ("b",): np.array([0.3, 0.7]), ("a", "b"): np.zeros((2, 2))}[columns]

    exact = {"a": np.array([500, 500])}
    codes = sample_junction([("a",), ("a", "b")], marginal, {"a": 2, "b": 2}, {}, {}, 1000, rng, exact)
    for value in (0, 1):
        assert abs(np.bincount(codes["b"][codes["a"] == value], minlength=2)[0] - 150) <= 1  # systematic: within 1


def test_several_components_and_lone_columns_are_sampled_with_their_own_roots(rng):
    one = [_noisy((c,), (2,), [40, 60] if c == "c" else [60, 40]) for c in "abcde"]
    two = [_noisy(("a", "b"), (2, 2), [60, 0, 0, 40]), _noisy(("d", "c"), (2, 2), [0, 60, 40, 0])]  # c = 1 - d
    sizes = dict.fromkeys("abcde", 2)
    model = _forest(list("abcde"), sizes, [*one, *two], 100)
    assert model.cliques == [("a",), ("a", "b"), ("c",), ("c", "d"), ("e",)]
    codes = _sample(model, sizes, 1000, rng)
    # Mirror descent nears an empty cell as 1/iterations (0.1 % of the mass left after 300 steps here).
    assert (codes["a"] != codes["b"]).mean() < 0.01 and (codes["c"] == codes["d"]).mean() < 0.01
    for column, zeros in (("a", 600), ("c", 400), ("e", 600)):  # each root drawn from its own 1-way
        assert abs(np.bincount(codes[column], minlength=2)[0] - zeros) <= 1  # systematically: within one
    assert 0.3 < (codes["a"] == codes["c"]).mean() < 0.7  # components independent (expected 0.48)


def test_sampling_is_deterministic_given_the_seed():
    one = [_noisy(("a",), (3,), [50, 30, 20]), _noisy(("b",), (2,), [60, 40])]
    model = _forest(["a", "b"], {"a": 3, "b": 2}, [*one, _noisy(("a", "b"), (3, 2), [40, 10, 15, 15, 5, 15])], 100)
    first = _sample(model, {"a": 3, "b": 2}, 500, np.random.default_rng(7))
    again = _sample(model, {"a": 3, "b": 2}, 500, np.random.default_rng(7))
    other = _sample(model, {"a": 3, "b": 2}, 500, np.random.default_rng(8))
    assert all(np.array_equal(first[c], again[c]) for c in "ab")
    assert not all(np.array_equal(first[c], other[c]) for c in "ab")


def test_decode_types_nulls_bins_and_derived_columns(rng):
    age = numeric_domain("age", "int", 17, 90, Binning("width", 5), nullable=False)
    edu = category_domain("edu", ["HS", "BA"], nullable=True)
    codes = {"age": np.array([0, 14, 3]), "edu": np.array([0, 1, 2])}
    columns = [OutputColumn("age", "int", age), OutputColumn("edu", "category", edu),
               OutputColumn("edu_num", "int", derived_from="edu", mapping={"HS": 9, "BA": 13})]
    table = decode(codes, columns, 3, rng)
    assert table.column_names == ["age", "edu", "edu_num"]
    ages = table.column("age").to_pylist()
    assert 17 <= ages[0] <= 21 and 87 <= ages[1] <= 90 and 32 <= ages[2] <= 36
    assert table.column("edu").to_pylist() == ["HS", "BA", None]
    assert table.column("edu_num").to_pylist() == [9, 13, None]
    assert str(table.schema.field("age").type) == "int64"


def test_exact_root_counts_are_reproduced_and_children_follow_them(rng):
    one = [_noisy(("geo",), (3,), [700, 0, 300]), _noisy(("b",), (2,), [500, 500])]
    two = [_noisy(("geo", "b"), (3, 2), [700, 0, 0, 0, 0, 300])]  # b is 0 in geo 0, 1 in geo 2
    model = _forest(["geo", "b"], {"geo": 3, "b": 2}, [*one, *two], 1000)
    exact = np.array([612, 1, 387])
    codes = _sample(model, {"geo": 3, "b": 2}, 1000, rng, {"geo": exact})
    assert np.bincount(codes["geo"], minlength=3).tolist() == [612, 1, 387]
    assert (codes["b"][codes["geo"] == 2] == 1).all()


def test_exact_counts_must_be_a_model_column_and_sum_to_the_rows(rng):
    one = [_noisy(("a",), (2,), [5, 5]), _noisy(("b",), (2,), [5, 5])]
    model = _forest(["a", "b"], {"a": 2, "b": 2}, [*one, _noisy(("a", "b"), (2, 2), [5, 0, 0, 5])], 10)
    with pytest.raises(InternalError, match="must be a model column's"):
        _sample(model, {"a": 2, "b": 2}, 10, rng, {"c": np.array([5, 5])})
    with pytest.raises(InternalError, match="sum to the row count"):
        _sample(model, {"a": 2, "b": 2}, 10, rng, {"a": np.array([5, 4])})
    with pytest.raises(InternalError, match="comes after it"):
        sample_junction([("a", "b"), ("c", "d", "e")], model.fitted.marginal, dict.fromkeys("abcde", 2), {}, {}, 10,
                        rng)


def test_the_fit_starts_from_the_tree_of_the_post_processed_tables():
    from dprelease.dp.synthesis.junction import START_SMOOTHING, JunctionTree, _start, junction_parents

    consistent = {("a",): np.array([600, 400]), ("b", "a"): np.array([500, 0, 100, 400])}  # over (b, a)
    cliques = (("a",), ("a", "b"), ("c",))
    tree = JunctionTree(cliques, junction_parents(cliques), {"a": 2, "b": 2, "c": 3})
    start = _start(tree, consistent, {})
    assert start is not None and np.array_equal(start[2], np.zeros(3))  # no table for c: uniform
    probabilities = [np.exp(b) for b in tree.calibrate(start)]
    assert np.allclose(probabilities[0], [0.6, 0.4], atol=1e-3)
    smoothed = np.array([[500, 100], [0, 400]]) + START_SMOOTHING  # (a, b): the table transposed
    assert np.allclose(probabilities[1], smoothed / smoothed.sum(), atol=1e-3)
    assert probabilities[1][1, 0] > 0  # a cell rounded to 0 keeps a little mass: the fit can still move it
    # Tables over coarsened columns are not the cliques' (coarse codes), and without tables there is no start:
    # the measured cliques of ``cliques: auto`` start from the uniform distribution, as before.
    assert _start(tree, consistent, {"a": np.array([0, 1]), "b": np.array([0, 1])}) is None
    assert _start(tree, {}, {}) is None
