from __future__ import annotations

import bisect
import itertools
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dprelease.dp.measurement.marginals import (
    Binning,
    ColumnDomain,
    ColumnRule,
    _bin_lookup,
    category_domain,
    count_all,
    count_marginal,
    encode_numeric,
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


INT_DOMAINS = [
    numeric_domain("w1", "int", 17, 90, Binning("width", 1), nullable=False),
    numeric_domain("w5", "int", 17, 90, Binning("width", 5), nullable=True),
    numeric_domain("neg", "int", -5, 40, Binning("count", 7), nullable=False),
    numeric_domain("log", "int", 0, 1000, Binning("log"), nullable=True),
    numeric_domain("one", "int", 3, 9, Binning("count", 1), nullable=False),
    numeric_domain("wide", "int", -300, 300, Binning("width", 1), nullable=True),  # int16 codes
]
EXTREMES = [-(2**63), 2**63 - 1, 2**53 + 1, -(2**53) - 1, 2**62, -1, 0, 1]


WIDE_DOMAINS = [
    numeric_domain("gain", "int", 0, 2**20, Binning("log"), nullable=False),
    numeric_domain("weight", "int", 1000, 2**21 + 999, Binning("count", 32), nullable=True),
    numeric_domain("fine", "int", -(2**20), 2**20 - 1, Binning("width", 8192), nullable=False),
]


@pytest.mark.parametrize("domain", INT_DOMAINS + WIDE_DOMAINS, ids=lambda d: d.name)
def test_int_lookup_table_is_the_binary_search_at_every_whole_number(domain):
    table = _bin_lookup(domain)
    assert table is not None and table.dtype == np.dtype(np.int8 if domain.size <= 128 else np.int16)
    whole = np.arange(int(domain.edges[0]), int(domain.edges[-1]))
    assert table.tolist() == encode_numeric(whole.astype(np.float64), domain).tolist()


def test_lookup_applies_to_int_domains_of_moderate_span_only():
    assert _bin_lookup(numeric_domain("f", "float", 0, 10, Binning("count", 4), nullable=False)) is None
    assert _bin_lookup(numeric_domain("w", "int", 0, 2**21, Binning("count", 8), nullable=False)) is None
    assert _bin_lookup(ColumnDomain("odd", "int", edges=(0.0, 2.5, 5.0))) is None  # edges not whole
    assert _bin_lookup(ColumnDomain("dup", "int", edges=(0.0, 3.0, 3.0, 5.0))) is None  # not ascending
    assert _bin_lookup(numeric_domain("w", "int", 0, 2**21 - 1, Binning("count", 8), nullable=False)) is not None


@pytest.mark.parametrize("domain", INT_DOMAINS, ids=lambda d: d.name)
@pytest.mark.parametrize("arrow_type", [pa.int64(), pa.int32(), pa.uint16(), pa.uint64()], ids=str)
def test_integer_columns_get_the_codes_of_their_float_values(domain, arrow_type):
    low, high = int(domain.edges[0]), int(domain.edges[-1])
    values = [*range(low - 3, high + 3), *EXTREMES]
    column = pc.cast(pa.array(values, type=pa.int64()), arrow_type, safe=False)
    codes, handling = encode_table(pa.table({domain.name: column}), [domain], {})
    as_float = np.asarray(pc.cast(column, pa.float64(), safe=False))
    assert codes[domain.name].dtype == np.int64
    assert codes[domain.name].tolist() == encode_numeric(as_float, domain).tolist()
    outside = int(((as_float < domain.edges[0]) | (as_float >= domain.edges[-1])).sum())
    assert handling.clamped == ({domain.name: outside} if outside else {})


def test_wide_marginals_use_wider_combined_codes():
    big = category_domain("big", [f"c{i}" for i in range(200)], nullable=True)  # 201 codes
    num = numeric_domain("n", "int", 0, 199, Binning("width", 1), nullable=False)  # 200 codes
    flag = category_domain("flag", ["y"], nullable=True)
    rows = 5000
    rng = np.random.default_rng(7)
    table = pa.table({
        "big": pa.array([f"c{i}" if i < 200 else None for i in rng.integers(0, 201, rows)]),
        "n": pa.array(rng.integers(-5, 205, rows)),
        "flag": pa.array(["y" if i else None for i in rng.integers(0, 2, rows)]),
    })
    domains = [big, num, flag]
    workload = [("big",), ("big", "n"), ("n", "big", "flag"), ("flag", "n")]
    counts, _ = count_all([table.slice(0, 2000), table.slice(2000)], domains, {}, workload)
    codes, _ = encode_table(table, domains, {})
    by_name = {d.name: d for d in domains}
    for cols in workload:
        expected = np.zeros([by_name[c].size for c in cols], dtype=np.int64)
        np.add.at(expected, tuple(codes[c] for c in cols), 1)
        assert counts[cols].dtype == np.int64 and counts[cols].tolist() == expected.ravel().tolist()
        assert count_marginal(codes, by_name, cols).tolist() == expected.ravel().tolist()


REF_DOMAINS = [
    numeric_domain("i", "int", -5, 40, Binning("count", 7), nullable=True),
    numeric_domain("g", "int", 0, 3000, Binning("log"), nullable=False),
    numeric_domain("f", "float", -2.5, 7.25, Binning("count", 5), nullable=True),
    category_domain("c", ["a", "b", "other"], nullable=False),
    category_domain("d", [f"v{i}" for i in range(150)], nullable=True),
]
REF_RULES = {"c": ColumnRule("other"), "d": ColumnRule("drop")}


def reference_count(rows, domains, rules, workload):
    """Per-row encoding in plain Python (bisect over the edges), the specification of encode_table."""
    counts = {cols: {} for cols in workload}
    for row in rows:
        codes = {}
        for d in domains:
            value = row[d.name]
            if value is None or (isinstance(value, float) and math.isnan(value)):
                code = d.null_code
            elif d.kind == "category":
                target = value if value in d.categories else rules.get(d.name, ColumnRule()).on_unknown
                code = None if target == "drop" else d.categories.index(target)
            else:
                code = bisect.bisect_right(d.edges[1:-1], float(value))
            if code is None:
                break
            codes[d.name] = code
        else:
            for cols in workload:
                key = tuple(codes[c] for c in cols)
                counts[cols][key] = counts[cols].get(key, 0) + 1
    out = {}
    for cols in workload:
        shape = [next(d for d in domains if d.name == c).size for c in cols]
        table = np.zeros(shape, dtype=np.int64)
        for key, n in counts[cols].items():
            table[key] = n
        out[cols] = table.ravel().tolist()
    return out


ref_rows = st.fixed_dictionaries({
    "i": st.one_of(st.none(), st.integers(-10, 50), st.sampled_from(EXTREMES)),
    "g": st.one_of(st.none(), st.integers(-3, 5000), st.sampled_from(EXTREMES)),
    "f": st.one_of(st.none(), st.floats(-5, 10), st.floats(allow_nan=True, allow_infinity=True)),
    "c": st.one_of(st.none(), st.sampled_from(["a", "b", "other", "zz", ""])),
    "d": st.one_of(st.none(), st.sampled_from([f"v{i}" for i in range(155)])),
})


@settings(max_examples=150, deadline=None)
@given(st.lists(ref_rows, max_size=40), st.lists(st.integers(0, 40), max_size=3))
def test_count_all_matches_a_per_row_reference(rows, cuts):
    workload = [(d.name,) for d in REF_DOMAINS] + [("i", "d"), ("d", "g"), ("f", "c", "d"), ("c", "i", "g")]
    table = pa.table({d.name: pa.array([r[d.name] for r in rows],
                                       type=pa.string() if d.kind == "category" else
                                       pa.int64() if d.kind == "int" else pa.float64()) for d in REF_DOMAINS})
    bounds = [0, *sorted(min(c, len(rows)) for c in cuts), len(rows)]
    groups = [table.slice(a, b - a) for a, b in itertools.pairwise(bounds)]
    counts, handling = count_all(groups, REF_DOMAINS, REF_RULES, workload)
    expected = reference_count(rows, REF_DOMAINS, REF_RULES, workload)
    for cols in workload:
        assert counts[cols].dtype == np.int64
        assert counts[cols].tolist() == expected[cols], cols
    assert handling.rows_in == len(rows) and handling.rows_kept == sum(expected[("i",)])


def test_log_bins_of_a_signed_range_are_anchored_at_zero():
    d = numeric_domain("income", "int", -9000, 1_341_000, Binning("log"), nullable=False)
    assert d.edges[0] == -9000 and d.edges[-1] == 1_341_001
    zero = d.edges.index(0.0)
    assert d.edges[zero - 2: zero + 3] == (-2.0, -1.0, 0.0, 1.0, 2.0)  # zero alone: never with -808 or 7,383
    assert all(a < b for a, b in itertools.pairwise(d.edges))
    assert numeric_domain("x", "int", 0, 20, Binning("log"), nullable=False).edges == (0, 1, 2, 4, 8, 16, 21)
