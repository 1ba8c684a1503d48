"""The bounds stage's schema keys: `mapping: private`, `bins: quantiles` and `spikes`, and their plan."""

from __future__ import annotations

import re

import pytest
import yaml

from dprelease.schemas.model import SchemaError
from dprelease.schemas.plan import plan_release
from dprelease.schemas.spec import load_spec
from dprelease.schemas.table import load_schema
from tests.examples import adult_example

SOURCE = {"type": "category", "categories": ["a", "b", "c"]}


def _schema(tmp_path, derived):  # a source column e and the column d under test
    path = tmp_path / "schema.yaml"
    path.write_text(yaml.safe_dump({"table": "t", "columns": {"e": SOURCE, "d": derived}}), encoding="utf-8")
    return path


def test_a_private_mapping_is_parsed_with_its_resolution(tmp_path):
    schema = load_schema(_schema(tmp_path, {"type": "float", "min": 16.3, "max": 52864.7, "derived_from": "e",
                                            "mapping": "private", "resolution": 0.1}))
    column = schema.column("d")
    assert column.derived and column.private_mapping and column.resolution == 0.1 and column.mapping == ()
    assert [c.name for c in schema.measured] == ["e"]


@pytest.mark.parametrize(
    ("derived", "message"),
    [
        ({"type": "float", "min": 0, "max": 1, "derived_from": "e", "mapping": "private"},
         "columns.d.resolution: is required with mapping: private"),
        ({"type": "float", "search_range": [0, 1], "derived_from": "e", "mapping": "private", "resolution": 0.1},
         "columns.d: mapping: private needs public min and max"),
        ({"type": "int", "min": 0, "max": 10, "derived_from": "e", "mapping": "private", "resolution": 0.5},
         "columns.d.resolution: (0.5) must be a positive whole number"),
        ({"type": "float", "min": 0, "max": 10, "derived_from": "e", "mapping": "private", "resolution": -1},
         "columns.d.resolution: (-1) must be a positive number"),
        ({"type": "float", "min": 0, "max": 10, "derived_from": "e", "mapping": "private", "resolution": 1e-6},
         "columns.d.resolution: (1e-06) would put more than 2**21 values between min and max"),
        ({"type": "float", "min": 0, "max": 10, "resolution": 0.1},
         "columns.d.resolution: applies to a derived column with mapping: private only"),
        ({"type": "float", "min": 0, "max": 10, "derived_from": "e", "mapping": "secret"},
         "columns.d.mapping: must map each category of the source column to a value, or be 'private'"),
    ],
)
def test_a_bad_private_mapping_is_one_line_naming_the_key_and_the_rule(tmp_path, derived, message):
    path = _schema(tmp_path, derived)
    with pytest.raises(SchemaError, match=re.escape(message)) as info:
        load_schema(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def _with_private_column(tmp_path, allocation):
    spec = adult_example(tmp_path, allocation=allocation)
    doc = yaml.safe_load((spec.parent / "schema.yaml").read_text(encoding="utf-8"))
    doc["columns"]["education-score"] = {"type": "float", "min": 0, "max": 100, "derived_from": "education",
                                         "mapping": "private", "resolution": 0.1}
    (spec.parent / "schema.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return spec


def test_the_plan_books_one_grouped_median_in_the_bounds_stage(tmp_path):
    spec = _with_private_column(tmp_path, {"bounds": 0.05, "one_way": 0.40, "selection": 0.04, "cliques": 0.46,
                                           "hierarchy": 0.05})
    plan = plan_release(load_spec(spec), "r", 1)
    (mapping,) = plan.mappings
    assert mapping.column == "education-score" and mapping.source == "education" and len(mapping.groups) == 16
    assert mapping.group_budget == mapping.budget  # row-level privacy: a row is in one group
    svt_runs = 2 * len(plan.bounds)
    assert mapping.budget.amount * (svt_runs + 1) == plan.stages["bounds"].amount
    assert any("median per education (16 groups in parallel)" in line for line in plan.lines())


def test_a_private_mapping_needs_a_bounds_share(tmp_path):
    spec = _with_private_column(tmp_path, {"one_way": 0.45, "selection": 0.04, "cliques": 0.46, "hierarchy": 0.05})
    doc = yaml.safe_load((spec.parent / "schema.yaml").read_text(encoding="utf-8"))
    for name in ("fnlwgt", "capital-gain", "capital-loss"):  # public bounds: nothing else needs the stage
        doc["columns"][name].pop("search_range", None)
        doc["columns"][name].update({"min": 0, "max": 1_500_000})
    (spec.parent / "schema.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    with pytest.raises(SchemaError, match=re.escape("allocation.bounds: must be positive: column 'education-score' "
                                                    "has mapping: private")):
        plan_release(load_spec(spec), "r", 1)


@pytest.mark.parametrize(
    ("column", "message"),
    [
        ({"type": "int", "min": 0, "max": 10, "bins": {"quantiles": 6}},
         "columns.d.bins.quantiles: (6) must be a power of two from 2 to 256"),
        ({"type": "int", "min": 0, "max": 10, "spikes": [11]},
         "columns.d.spikes[0]: (11) must lie within min..max (or the search_range)"),
        ({"type": "int", "min": 0, "max": 10, "spikes": [0.5]},
         "columns.d.spikes[0]: (0.5) must be a whole number for an int column"),
        ({"type": "int", "min": 0, "max": 10, "spikes": [1, 1]}, "columns.d.spikes[1]: (1) repeats an earlier value"),
        ({"type": "int", "min": 0, "max": 10, "spikes": []}, "columns.d.spikes: must be a list of 1 to 64 numbers"),
        ({"type": "category", "categories": ["a"], "spikes": [1]}, "columns.d.spikes: applies to numeric columns"),
        ({"type": "int", "min": 0, "max": 10, "bins": "deciles"},
         "columns.d.bins: must be 'log', 'quantiles', {width: W}, {count: N} or {quantiles: N}"),
    ],
)
def test_bad_quantile_bins_or_spikes_are_one_line_naming_the_key_and_the_rule(tmp_path, column, message):
    path = _schema(tmp_path, column)
    with pytest.raises(SchemaError, match=re.escape(message)) as info:
        load_schema(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_quantile_bins_and_spikes_are_planned_in_the_bounds_stage(tmp_path):
    spec = adult_example(tmp_path)
    doc = yaml.safe_load((spec.parent / "schema.yaml").read_text(encoding="utf-8"))
    doc["columns"]["capital-gain"].update({"bins": {"quantiles": 8}, "spikes": [0]})  # SVT bounds, then bins
    doc["columns"]["hours-per-week"]["bins"] = "quantiles"
    (spec.parent / "schema.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    plan = plan_release(load_spec(spec), "r", 1)
    assert [(b.column, b.bins, b.levels) for b in plan.bins] == [("capital-gain", 8, 3), ("hours-per-week", 16, 4)]
    units = 2 * len(plan.bounds) + 3 + 4
    assert all(b.level_budget.amount * units == plan.stages["bounds"].amount for b in plan.bins)
    assert any("capital-gain" in line and "8 quantile bins: 3 levels of medians" in line for line in plan.lines())
    assert load_spec(spec).schema.column("capital-gain").spikes == (0.0,)


def _derived_schema(tmp_path, derived):
    path = tmp_path / "schema.yaml"
    columns = {"e": SOURCE, "n": {"type": "int", "min": 0, "max": 99}, "d": derived}
    path.write_text(yaml.safe_dump({"table": "t", "columns": columns}), encoding="utf-8")
    return path


def test_categories_derive_from_a_category_by_a_mapping_and_from_a_number_by_ranges(tmp_path):
    schema = load_schema(_derived_schema(tmp_path, {"type": "category", "categories": ["low", "high"],
                                                    "derived_from": "e", "mapping": {"a": "low", "b": "low",
                                                                                     "c": "high"}}))
    assert schema.column("d").labels == (("a", "low"), ("b", "low"), ("c", "high"))
    (tmp_path / "r").mkdir()
    schema = load_schema(_derived_schema(tmp_path / "r", {"type": "category", "categories": ["young", "old"],
                                                          "derived_from": "n",
                                                          "ranges": {"old": [65, 100], "young": [0, 65]}}))
    assert schema.column("d").ranges == ((0.0, 65.0, "young"), (65.0, 100.0, "old"))
    assert [c.name for c in schema.measured] == ["e", "n"]


@pytest.mark.parametrize(
    ("derived", "message"),
    [
        ({"type": "category", "categories": ["x"], "derived_from": "e", "mapping": {"a": "x", "b": "x"}},
         "columns.d.mapping: must give exactly one category for every category of e"),
        ({"type": "category", "categories": ["x"], "derived_from": "e", "mapping": {"a": "x", "b": "x", "c": "y"}},
         "columns.d.mapping: maps to a value that is not one of this column's categories"),
        ({"type": "category", "categories": ["x", "y"], "derived_from": "n", "ranges": {"x": [0, 50], "y": [60, 100]}},
         "columns.d.ranges: must be contiguous and cover n's range [0, 99]"),
        ({"type": "category", "categories": ["x", "y"], "derived_from": "n", "ranges": {"x": [0, 50], "y": [50, 99]}},
         "columns.d.ranges: must be contiguous and cover n's range [0, 99]"),
        ({"type": "category", "categories": ["x"], "derived_from": "n", "ranges": {"x": [5, 5]}},
         "columns.d.ranges.x: low (5) must be below high (5)"),
        ({"type": "category", "categories": ["x"], "derived_from": "n", "mapping": {"a": "x"}},
         "columns.d.ranges: are required: a category derived from the number n"),
        ({"type": "category", "categories": ["x"], "ranges": {"x": [0, 100]}}, "columns.d.ranges: needs derived_from"),
        ({"type": "int", "min": 0, "max": 9, "derived_from": "n", "mapping": {"a": 1}},
         "columns.d.derived_from: a number is derived from a category column"),
    ],
)
def test_a_bad_derived_category_is_one_line_naming_the_key_and_the_rule(tmp_path, derived, message):
    path = _derived_schema(tmp_path, derived)
    with pytest.raises(SchemaError, match=re.escape(message)) as info:
        load_schema(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
