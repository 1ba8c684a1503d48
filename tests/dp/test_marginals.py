from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp.marginals import (
    Binning,
    ColumnRule,
    category_domain,
    count_all,
    count_marginal,
    encode_table,
    numeric_domain,
)


def test_log_bins_put_the_lower_bound_alone():
    d = numeric_domain("gain", "int", 0, 100, Binning("log"), nullable=False)
    assert d.edges[:4] == (0.0, 1.0, 2.0, 4.0)
    assert d.edges[-1] == 101.0
    assert d.labels()[0] == "0"


def test_count_bins_for_ints_cover_the_range():
    d = numeric_domain("w", "int", 10, 1000, Binning("count", 32), nullable=True)
    assert d.bins == 32 and d.size == 33 and d.edges[0] == 10 and d.edges[-1] == 1001


def test_encode_table_clamps_drops_and_maps():
    domains = [
        numeric_domain("age", "int", 17, 20, Binning("width", 1), nullable=False),
        category_domain("sex", ["F", "M"], nullable=False),
        category_domain("job", ["a", "b", "other"], nullable=True),
    ]
    table = pa.table({
        "age": pa.array([16, 18, 30, None, 19, 20], type=pa.int64()),
        "sex": ["F", "M", "M", "F", "X", "M"],
        "job": ["a", None, "zzz", "b", "a", "b"],
    })
    codes, handling = encode_table(table, domains, {"sex": ColumnRule("drop"), "job": ColumnRule("other")})
    assert handling.rows_in == 6 and handling.rows_kept == 4
    assert handling.dropped_null == {"age": 1}
    assert handling.dropped_unknown == {"sex": 1}
    assert handling.mapped_unknown == {"job": 1}
    assert handling.clamped == {"age": 2}
    assert codes["age"].tolist() == [0, 1, 3, 3]
    assert codes["job"].tolist() == [0, 3, 2, 1]


def test_count_is_additive_over_row_groups():
    domains = [category_domain("a", ["x", "y"], nullable=True), category_domain("b", ["u", "v", "w"], nullable=False)]
    t = pa.table({"a": ["x", "y", None, "x"], "b": ["u", "w", "v", "w"]})
    whole, _ = count_all([t], domains, {}, [("a",), ("a", "b")])
    parts, _ = count_all([t.slice(0, 1), t.slice(1, 3)], domains, {}, [("a",), ("a", "b")])
    for key in whole:
        assert np.array_equal(whole[key], parts[key])
    assert whole[("a", "b")].reshape(3, 3).tolist() == [[1, 0, 1], [0, 0, 1], [0, 1, 0]]


values = st.one_of(st.none(), st.integers(-(10**6), 10**6), st.floats(allow_nan=True, allow_infinity=True))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(values, st.sampled_from(["a", "b", "zz", None])), min_size=0, max_size=30),
       st.tuples(values, st.sampled_from(["a", "b", "zz", None])))
def test_adding_one_row_changes_each_marginal_by_at_most_one(rows, extra):
    """Sensitivity through the production encoder: L1 (and so L2) distance <= 1 per histogram."""
    domains = [numeric_domain("x", "float", -10, 10, Binning("count", 4), nullable=True),
               category_domain("c", ["a", "b"], nullable=False)]
    rules = {"c": ColumnRule("drop")}

    def table(rs):
        return pa.table({"x": pa.array([r[0] for r in rs], type=pa.float64()),
                         "c": pa.array([r[1] for r in rs], type=pa.string())})

    workload = [("x",), ("c",), ("x", "c")]
    before, _ = count_all([table(rows)], domains, rules, workload)
    after, _ = count_all([table([*rows, extra])], domains, rules, workload)
    for key in workload:
        assert int(np.abs(after[key] - before[key]).sum()) <= 1


def test_count_marginal_needs_columns():
    with pytest.raises(AssertionError):
        count_marginal({}, {}, [])
