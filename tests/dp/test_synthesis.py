from __future__ import annotations

import numpy as np

from dprelease.dp.measurement.marginals import Binning, category_domain, numeric_domain
from dprelease.dp.synthesis.estimation import fit_tree, spanning_forest
from dprelease.dp.synthesis.sampling import OutputColumn, decode, sample_codes


def test_forest_skips_cycles_and_isolated_columns_are_roots():
    order = spanning_forest(["a", "b", "c", "d"], [("a", "b"), ("b", "a"), ("c", "b")])
    assert order == [("a", None), ("b", "a"), ("c", "b"), ("d", None)]


def test_tree_reproduces_a_deterministic_dependency(rng):
    one = {"a": np.array([50, 50]), "b": np.array([50, 50])}
    two = {("a", "b"): np.array([50, 0, 0, 50])}  # b == a
    model = fit_tree(["a", "b"], {"a": 2, "b": 2}, one, two)
    codes = sample_codes(model, 1000, rng)
    assert np.array_equal(codes["a"], codes["b"])


def test_empty_parent_row_falls_back_to_the_child_marginal(rng):
    one = {"a": np.array([100, 0]), "b": np.array([30, 70])}
    two = {("a", "b"): np.array([0, 0, 0, 0])}
    model = fit_tree(["a", "b"], {"a": 2, "b": 2}, one, two)
    assert np.allclose(model.conditionals["b"], [[0.3, 0.7], [0.3, 0.7]])


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
    one = {"geo": np.array([700, 0, 300]), "b": np.array([500, 500])}
    two = {("geo", "b"): np.array([700, 0, 0, 0, 0, 300])}  # b is 0 in geo 0, 1 in geo 2
    model = fit_tree(["geo", "b"], {"geo": 3, "b": 2}, one, two)
    exact = np.array([612, 1, 387])
    codes = sample_codes(model, 1000, rng, {"geo": exact})
    assert np.bincount(codes["geo"], minlength=3).tolist() == [612, 1, 387]
    assert (codes["b"][codes["geo"] == 2] == 1).all()


def test_exact_counts_must_be_a_root_and_sum_to_the_rows(rng):
    import pytest

    from dprelease.dp.errors import InternalError

    one = {"a": np.array([5, 5]), "b": np.array([5, 5])}
    model = fit_tree(["a", "b"], {"a": 2, "b": 2}, one, {("a", "b"): np.array([5, 0, 0, 5])})
    with pytest.raises(InternalError, match="must be a model root"):
        sample_codes(model, 10, rng, {"b": np.array([5, 5])})
    with pytest.raises(InternalError, match="sum to the row count"):
        sample_codes(model, 10, rng, {"a": np.array([5, 4])})
