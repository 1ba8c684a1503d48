"""Sensitivity of the exact marginals, through the production path, under add/remove-one-row.

The release adds noise calibrated to the sensitivities declared by ``dp.mechanisms.noise.additive_mechanism``.
Here a schema is loaded with ``schemas.table.load_schema``, its domains and rules are built with
``schemas.encoding`` as ``measure_marginals`` does, and ``dp.measurement.marginals.count_all`` counts every
1-way and 2-way marginal of a hypothesis-generated table D and of a neighbour D' (one row, possibly
adversarial, inserted anywhere; or one row removed), each split into row groups at arbitrary
places. For every marginal the exact integer difference must have L1 norm <= the declared L1
sensitivity and L2 norm <= the declared L2 sensitivity. Zero tolerance: integers only.

Generated values include nulls, NaN, +-inf, huge and out-of-bounds numbers, declared and undeclared
categories (also Unicode look-alikes), in every Arrow type the structural check admits.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget
from dprelease.dp.measurement.contributions import unit_sensitivity
from dprelease.dp.measurement.marginals import ColumnDomain, ColumnRule, _bin_lookup, count_all
from dprelease.dp.mechanisms.noise import DiscreteGaussian, DiscreteLaplace
from dprelease.dp.mechanisms.noise import additive_mechanism as _mechanism
from dprelease.schemas.encoding import domains_for, rules_for
from dprelease.schemas.table import load_schema

SCHEMA = {
    "table": "t",
    "columns": {
        "age": {"type": "int", "min": 17, "max": 90, "bins": {"width": 5}},
        "hours": {"type": "int", "nullable": True, "min": 1, "max": 99},
        "gain": {"type": "int", "search_range": [0, 1048576], "bins": "log"},
        "weight": {"type": "int", "nullable": True, "search_range": [0, 2**26], "bins": {"count": 8}},
        "score": {"type": "float", "nullable": True, "min": -1.5, "max": 2.5, "bins": {"count": 4}},
        "ratio": {"type": "float", "min": 0, "max": 1, "bins": {"width": 0.25}},
        "sex": {"type": "category", "categories": ["F", "M"]},
        "job": {"type": "category", "nullable": True, "categories": ["a", "b", "other"], "on_unknown": "other"},
        "city": {"type": "category", "nullable": True, "categories": ["x", "\u00e9", "z"]},
        "sex-code": {"type": "int", "min": 0, "max": 1, "derived_from": "sex", "mapping": {"F": 0, "M": 1}},
    },
}
# What SVT would discover; weight's span is too wide for the lookup table (the search-sorted path).
DISCOVERED = {"gain": (0.0, 5000.0), "weight": (1000.0, 2.0**24)}

INT_TYPES = (pa.int64(), pa.int32(), pa.int8(), pa.uint16(), pa.uint64())
FLOAT_TYPES = (pa.float64(), pa.float32(), pa.int64())
CATEGORY_TYPES = (pa.string(), pa.large_string(), pa.string_view(), pa.dictionary(pa.int32(), pa.string()))
INT64 = (-(2**63), 2**63 - 1)


@pytest.fixture(scope="module")
def release_encoding(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[ColumnDomain], dict[str, ColumnRule]]:
    path = Path(tmp_path_factory.mktemp("schema")) / "schema.yaml"
    path.write_text(yaml.safe_dump(SCHEMA, allow_unicode=True, sort_keys=False), encoding="utf-8")
    schema = load_schema(path)
    return domains_for(schema, DISCOVERED), rules_for(schema)


def declared_sensitivities() -> tuple[int, int]:
    """The L1 and L2 sensitivities the release declares for every marginal."""
    row_level = unit_sensitivity(None)  # what the release uses when each row is its own privacy unit
    laplace = _mechanism(PureBudget(Fraction(1)), row_level)
    gaussian = _mechanism(ZCDPBudget(Fraction(1)), row_level)
    assert isinstance(laplace, DiscreteLaplace) and isinstance(gaussian, DiscreteGaussian)
    return int(laplace.l1_sensitivity), int(gaussian.l2_sensitivity)


def _edges(domain: ColumnDomain) -> list[float]:
    return [*domain.edges, *(e - 1 for e in domain.edges), *(e + 0.5 for e in domain.edges)]


def column_values(domain: ColumnDomain, arrow_type: pa.DataType) -> st.SearchStrategy[Any]:
    """A strategy for one cell of a column stored as ``arrow_type`` (adversarial values included)."""
    if domain.kind == "category":
        undeclared = ["", "f", "F ", "\uff26", "e\u0301", "E\u0301", "y", "<null>", "None", "nan", "other "]
        return st.one_of(st.none(), st.sampled_from(domain.categories), st.sampled_from(undeclared),
                         st.text(max_size=3))
    if pa.types.is_integer(arrow_type):
        near = [int(e) for e in _edges(domain) if float(e).is_integer()]
        return st.one_of(st.none(), st.sampled_from([*near, 0, -1, *INT64, 2**53 + 1, -(2**53) - 1]),
                         st.integers(int(domain.edges[0]) - 3, int(domain.edges[-1]) + 3), st.integers(*INT64))
    return st.one_of(st.none(), st.sampled_from([*_edges(domain), float("nan"), float("inf"), float("-inf"),
                                                 -0.0, 5e-324, 1e308, -1e308]),
                     st.floats(allow_nan=True, allow_infinity=True))


def build_table(rows: Sequence[dict[str, Any]], types: dict[str, pa.DataType]) -> pa.Table:
    """A table of ``rows`` with each column in its Arrow type (integers wrap into narrow types)."""
    columns = {}
    for name, arrow_type in types.items():
        values = [row[name] for row in rows]
        if pa.types.is_dictionary(arrow_type):
            columns[name] = pa.array(values, type=pa.string()).dictionary_encode()
        elif pa.types.is_integer(arrow_type):
            columns[name] = pc.cast(pa.array(values, type=pa.int64()), arrow_type, safe=False)
        elif pa.types.is_floating(arrow_type):
            columns[name] = pc.cast(pa.array(values, type=pa.float64()), arrow_type, safe=False)
        else:
            columns[name] = pa.array(values, type=arrow_type)
    return pa.table(columns)


def row_groups(table: pa.Table, cuts: list[int], rechunk: bool) -> list[pa.Table]:
    """The table split at ``cuts`` (empty row groups allowed); optionally each group in several chunks."""
    bounds = [0, *sorted(min(c, table.num_rows) for c in cuts), table.num_rows]
    groups = [table.slice(a, b - a) for a, b in itertools.pairwise(bounds)]
    if rechunk:
        groups = [pa.concat_tables([g.slice(0, g.num_rows // 2), g.slice(g.num_rows // 2)]) for g in groups]
    return groups


@st.composite
def neighbours(draw: st.DrawFn, domains: list[ColumnDomain]) -> dict[str, Any]:
    """A table, a neighbour (one row added anywhere or one removed), and row-group splits of both."""
    types = {}
    for d in domains:
        choices = CATEGORY_TYPES if d.kind == "category" else INT_TYPES if d.kind == "int" else FLOAT_TYPES
        types[d.name] = draw(st.sampled_from(choices))
    types["sex-code"] = pa.int64()  # derived: present in the file, never measured
    cells = {d.name: column_values(d, types[d.name]) for d in domains}
    cells["sex-code"] = st.sampled_from([0, 1, None])
    row = st.fixed_dictionaries(cells)
    rows = draw(st.lists(row, max_size=25))
    if rows and draw(st.booleans()):
        position = draw(st.integers(0, len(rows) - 1))
        changed, other = rows[position], [*rows[:position], *rows[position + 1 :]]
        smaller, larger = other, rows
    else:
        changed, position = draw(row), draw(st.integers(0, len(rows)))
        smaller, larger = rows, [*rows[:position], changed, *rows[position:]]
    split = st.lists(st.integers(0, len(larger)), max_size=4)
    return {
        "smaller": row_groups(build_table(smaller, types), draw(split), draw(st.booleans())),
        "larger": row_groups(build_table(larger, types), draw(split), draw(st.booleans())),
        "row": build_table([changed], types),
    }


def workload(domains: list[ColumnDomain]) -> list[tuple[str, ...]]:
    names = [d.name for d in domains]
    return [(n,) for n in names] + list(itertools.combinations(names, 2))


def test_the_release_declares_sensitivity_one():
    assert declared_sensitivities() == (1, 1)


def test_the_schema_exercises_every_encoding_path(release_encoding):
    domains, rules = release_encoding
    assert [d.name for d in domains] == ["age", "hours", "gain", "weight", "score", "ratio", "sex", "job", "city"]
    assert {d.name for d in domains if d.nullable} == {"hours", "weight", "score", "job", "city"}
    assert rules["job"] == ColumnRule("other") and rules["sex"] == ColumnRule("drop")
    weight = domains[3]
    assert (weight.edges[0], weight.edges[-1]) == (1000.0, 2.0**24 + 1)
    # Both numeric paths: binary search for weight's wide span, the lookup table for the others.
    assert _bin_lookup(weight) is None
    assert all(_bin_lookup(d) is not None for d in domains if d.kind == "int" and d is not weight)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_one_row_changes_every_marginal_within_its_declared_sensitivity(release_encoding, data):
    domains, rules = release_encoding
    case = data.draw(neighbours(domains))
    l1_sensitivity, l2_sensitivity = declared_sensitivities()
    queries = workload(domains)
    small, small_rows = count_all(case["smaller"], domains, rules, queries)
    large, large_rows = count_all(case["larger"], domains, rules, queries)
    alone, alone_rows = count_all([case["row"]], domains, rules, queries)

    assert abs(large_rows.rows_kept - small_rows.rows_kept) <= 1
    for key in queries:
        assert small[key].dtype == large[key].dtype == np.int64
        diff = [int(b) - int(a) for a, b in zip(small[key].tolist(), large[key].tolist(), strict=True)]
        assert sum(abs(x) for x in diff) <= l1_sensitivity, key
        assert sum(x * x for x in diff) <= l2_sensitivity**2, key
        # Every kept row is counted exactly once in every marginal.
        assert int(small[key].sum()) == small_rows.rows_kept and int(large[key].sum()) == large_rows.rows_kept
        # Row-level handling depends on the row alone: the difference is that row's own count.
        assert diff == alone[key].tolist(), key
    assert large_rows.rows_kept - small_rows.rows_kept == alone_rows.rows_kept


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_row_groups_do_not_change_the_counts(release_encoding, data):
    domains, rules = release_encoding
    case = data.draw(neighbours(domains))
    queries = workload(domains)
    whole = pa.concat_tables(case["larger"])
    split, split_rows = count_all(case["larger"], domains, rules, queries)
    one, one_rows = count_all([whole], domains, rules, queries)
    assert split_rows == one_rows
    for key in queries:
        assert split[key].tolist() == one[key].tolist()
