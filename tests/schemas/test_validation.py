from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dprelease.quality.validation import (
    ExpectationOutcome,
    Problem,
    ValidationReport,
    build_suite,
    structural_problems,
    validate_table,
)
from dprelease.schemas.model import Column, TableSchema
from dprelease.schemas.table import load_schema

ROOT = Path(__file__).parents[2]
ADULT = ROOT / "examples" / "adult"

SCHEMA = TableSchema(
    "people",
    (
        Column("age", "int", min=17, max=90),
        Column("hours", "float", min=0, max=99.5),
        Column("sex", "category", categories=("Female", "Male")),
        Column("work", "category", nullable=True, categories=("Private", "State-gov", "Never-worked")),
        Column("children", "int", nullable=True, min=0, max=20),
        Column("weight", "float", nullable=True, search_range=(0, 1e6)),
    ),
)


def _good(**replace: pa.Array) -> pa.Table:
    """A small table that passes SCHEMA; keyword arguments replace or add columns."""
    columns: dict[str, pa.Array] = {
        "age": pa.array([17, 35, 90], pa.int64()),
        "hours": pa.array([0.0, 40.0, 99.5]),
        "sex": pa.array(["Female", "Male", "Female"]),
        "work": pa.array(["Private", None, "Never-worked"]),
        "children": pa.array([0, None, 3], pa.int32()),
        "weight": pa.array([1.5, None, 12.25]),
    }
    columns.update(replace)
    return pa.table(columns)


def _failed(report: ValidationReport) -> dict[tuple[str, str], ExpectationOutcome]:
    return {(e.column, e.expectation_type): e for e in report.expectations if not e.success}


# ---------------------------------------------------------------------------------------------
# The Adult example


def test_adult_table_passes_its_schema():
    schema = load_schema(ADULT / "schema.yaml")
    table = pq.read_table(ADULT / "adult.parquet")
    assert structural_problems(schema, table.schema) == []
    report = validate_table(table, schema)
    assert report.success, report.failed_rules()
    assert report.failed_rules() == []
    assert {e.column for e in report.expectations} == set(schema.names)
    in_set = {e.column: e for e in report.expectations if e.expectation_type == "expect_column_values_to_be_in_set"}
    assert in_set["workclass"].rule == "values must be in the 8 declared categories"
    assert in_set["workclass"].element_count == table.num_rows
    between = {e.column: e for e in report.expectations if e.expectation_type == "expect_column_values_to_be_between"}
    assert between["age"].rule == "values must be between 17 and 90"
    json.dumps(report.to_dict())


# ---------------------------------------------------------------------------------------------
# Structure


def test_good_table_passes_and_extra_columns_are_ignored():
    report = validate_table(_good(extra=pa.array([{"x": 1}, None, {"x": 2}])), SCHEMA)
    assert report.success, report.failed_rules()
    assert report.structural == []


def test_wrong_physical_type_is_a_structural_problem_naming_the_column():
    table = _good(age=pa.array(["17", "35", "90"]))
    report = validate_table(table, SCHEMA)
    assert not report.success
    assert report.structural == [Problem("age", "must have an integer type (found string)")]
    assert report.failed_rules() == ["column 'age': must have an integer type (found string)"]
    # The other columns are still checked; the mistyped one only by existence.
    checked = {e.column for e in report.expectations if e.expectation_type != "expect_column_to_exist"}
    assert "age" not in checked and "sex" in checked
    exists = {e.column: e.success for e in report.expectations if e.expectation_type == "expect_column_to_exist"}
    assert exists["age"] is True


@pytest.mark.parametrize(
    ("column", "array", "rule"),
    [
        ("age", pa.array([1.0, 2.0, 3.0]), "must have an integer type (found double)"),
        ("hours", pa.array(["a", "b", "c"]), "must have a floating-point or integer type (found string)"),
        ("sex", pa.array([1.0, 2.0, 3.0]), "must have a string, dictionary-of-string or integer type (found double)"),
        ("sex", pa.array([1, 2, 1]).dictionary_encode(), "must have a string, dictionary-of-string or integer type "
         "(found dictionary<values=int64, indices=int32, ordered=0>)"),
        ("sex", pa.array([True, False, True]), "must have a string, dictionary-of-string or integer type (found bool); "
         "store a boolean as 0/1 integers (categories [0, 1]) or as text"),
    ],
)
def test_type_rules(column, array, rule):
    assert structural_problems(SCHEMA, _good(**{column: array}).schema) == [Problem(column, rule)]


def test_accepted_physical_types():
    table = _good(
        age=pa.array([17, 35, 90], pa.uint8()),
        hours=pa.array([0, 40, 99], pa.int16()),          # float columns accept integers
        sex=pa.array(["Female", "Male", "Female"]).dictionary_encode(),
        work=pa.array(["Private", None, "Never-worked"], pa.large_string()),
        weight=pa.array([1.5, None, 2.0], pa.float32()),
    ).append_column("unused", pa.array([1, 2, 3]))
    assert structural_problems(SCHEMA, table.schema) == []
    assert validate_table(table, SCHEMA).success
    view = _good(sex=pa.array(["Female", "Male", "Female"], pa.string_view()))
    assert structural_problems(SCHEMA, view.schema) == []
    assert validate_table(view, SCHEMA).success


def test_missing_column_fails_naming_it_once():
    table = _good().drop_columns(["hours"])
    report = validate_table(table, SCHEMA)
    assert report.structural == [Problem("hours", "must be present")]
    assert not report.success
    exists = {e.column: e.success for e in report.expectations if e.expectation_type == "expect_column_to_exist"}
    assert exists["hours"] is False
    assert report.failed_rules() == ["column 'hours': must be present"]


def test_derived_columns_must_be_present_too():
    schema = load_schema(ADULT / "schema.yaml")
    arrow_schema = pq.read_schema(ADULT / "adult.parquet")
    trimmed = pa.schema([f for f in arrow_schema if f.name != "education-num"])
    assert structural_problems(schema, trimmed) == [Problem("education-num", "must be present")]


def test_duplicate_column_names_are_detected():
    good = _good()
    table = pa.Table.from_arrays([*good.columns, pa.array(["Male", "Male", "Female"])],
                                 names=[*good.column_names, "sex"])
    problem = Problem("sex", "must appear only once (found 2 columns with this name)")
    assert structural_problems(SCHEMA, table.schema) == [problem]
    report = validate_table(table, SCHEMA)
    assert report.structural == [problem]
    assert not report.success
    assert str(problem) in report.failed_rules()


def test_problem_str():
    assert str(Problem("age", "must have an integer type (found string)")) == \
        "column 'age': must have an integer type (found string)"


# ---------------------------------------------------------------------------------------------
# Values


def test_out_of_domain_category_fails():
    report = validate_table(_good(sex=pa.array(["Female", "Other", "Male"])), SCHEMA)
    assert not report.success and report.structural == []
    failed = _failed(report)
    assert list(failed) == [("sex", "expect_column_values_to_be_in_set")]
    outcome = failed["sex", "expect_column_values_to_be_in_set"]
    assert (outcome.element_count, outcome.unexpected_count) == (3, 1)
    assert report.failed_rules() == ["column 'sex': values must be in the 2 declared categories"]


def test_a_category_written_in_another_normal_form_passes_as_it_is_counted(monkeypatch):
    """An NFD café is counted as the category café (README): check failed it as outside the declared categories."""
    import dprelease.quality.validation as validation

    schema = TableSchema("places", (Column("place", "category", categories=("caf\u00e9", "x")),))
    table = pa.table({"place": pa.array(["caf\u00e9", "cafe\u0301", "cafe", "cafe\u0301"] * 3)})
    report = validate_table(table, schema)
    assert report.failed_rules() == ["column 'place': values must be in the 2 declared categories"]
    assert _failed(report)["place", "expect_column_values_to_be_in_set"].unexpected_count == 3  # "cafe" alone
    monkeypatch.setattr(validation, "_fast_array", lambda chunked, column: None)
    assert validate_table(table, schema) == report


def test_out_of_bounds_numbers_fail():
    report = validate_table(_good(age=pa.array([16, 35, 91]), hours=pa.array([0.0, 99.75, 1.0])), SCHEMA)
    failed = _failed(report)
    assert set(failed) == {("age", "expect_column_values_to_be_between"),
                           ("hours", "expect_column_values_to_be_between")}
    assert failed["age", "expect_column_values_to_be_between"].unexpected_count == 2
    assert report.failed_rules() == ["column 'age': values must be between 17 and 90",
                                     "column 'hours': values must be between 0 and 99.5"]


def test_null_in_non_nullable_column_fails():
    report = validate_table(_good(sex=pa.array(["Female", None, "Male"]), age=pa.array([17, None, 90])), SCHEMA)
    failed = _failed(report)
    assert set(failed) == {("sex", "expect_column_values_to_not_be_null"),
                           ("age", "expect_column_values_to_not_be_null")}
    assert report.failed_rules() == ["column 'age': values must not be null", "column 'sex': values must not be null"]


def test_nulls_in_nullable_columns_pass_and_integers_stay_integers():
    # `children` (int, nullable) holds a null: it must not become float64 and fail "whole numbers".
    table = _good(children=pa.array([None, None, 2], pa.int64()), work=pa.array([None, None, None], pa.string()))
    report = validate_table(table, SCHEMA)
    assert report.success, report.failed_rules()
    whole = [e for e in report.expectations if e.expectation_type == "expect_column_values_to_be_in_type_list"]
    assert {e.column for e in whole} == {"age", "children"} and all(e.success for e in whole)


def test_nan_is_not_a_null_and_fails_the_float_checks():
    table = _good(hours=pa.array([1.0, float("nan"), 2.0]), weight=pa.array([float("inf"), None, float("nan")]))
    report = validate_table(table, SCHEMA)
    assert report.failed_rules() == ["column 'hours': values must be between 0 and 99.5",
                                     "column 'weight': values must be finite numbers"]
    failed = _failed(report)
    assert failed["weight", "expect_column_values_to_be_between"].unexpected_count == 2


def test_empty_table_passes():
    assert validate_table(_good().slice(0, 0), SCHEMA).success


def test_build_suite_follows_the_schema():
    suite = build_suite(SCHEMA)
    kinds: dict[str, set[str]] = {}
    for expectation in suite.expectations:
        kinds.setdefault(expectation.column, set()).add(expectation.expectation_type)
        assert expectation.meta["dprelease_rule"]
    exists = "expect_column_to_exist"
    assert kinds["age"] == {exists, "expect_column_values_to_not_be_null", "expect_column_values_to_be_between",
                            "expect_column_values_to_be_in_type_list"}
    assert kinds["work"] == {exists, "expect_column_values_to_be_in_set"}
    assert kinds["weight"] == {exists, "expect_column_values_to_be_between"}
    assert kinds["sex"] == {exists, "expect_column_values_to_not_be_null", "expect_column_values_to_be_in_set"}
    only_exists = build_suite(SCHEMA, checkable=())
    assert {e.expectation_type for e in only_exists.expectations} == {exists}


def test_the_suite_holds_what_ge_would_keep_adding_one_at_a_time():
    """Handed to GE at once, with GE's own duplicates dropped: equal type and arguments (the rule text aside)."""
    import dataclasses

    import great_expectations as gx

    gx.get_context(mode="ephemeral")  # GE's add_expectation looks the suite up in the current context
    age, hours = SCHEMA.columns[:2]
    other_bounds = dataclasses.replace(hours, max=50.0)
    doubled = dataclasses.replace(SCHEMA, columns=(*SCHEMA.columns, age, other_bounds))
    ours = build_suite(doubled).expectations
    one_at_a_time = gx.ExpectationSuite(name="one-at-a-time")
    for expectation in ours + build_suite(SCHEMA).expectations:  # every one offered twice
        one_at_a_time.add_expectation(expectation.copy(update={"id": None}))

    def args(suite_expectations: list) -> list[tuple[str, dict]]:
        return [(e.expectation_type, e.dict(exclude={"id", "meta", "notes", "rendered_content"}))
                for e in suite_expectations]

    assert args(ours) == args(one_at_a_time.expectations)
    assert len(ours) == len(build_suite(SCHEMA).expectations) + 1  # the second age dropped, hours' other bounds kept
    assert ours[-1].max_value == 50.0 and ours[-1].meta["dprelease_rule"] == "values must be between 0 and 50"


# ---------------------------------------------------------------------------------------------
# No value from the table leaves validate_table


def test_no_raw_value_reaches_the_report_or_the_logs(caplog, capsys):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="great_expectations")
    canaries = ("CANARY_7f3a", "CANARY_c0de", "987654321", "98765.4321", "123456789")
    table = _good(
        age=pa.array([17, 987654321, None], pa.int64()),
        hours=pa.array([98765.4321, 1.0, 2.0]),
        sex=pa.array(["CANARY_7f3a", None, "Male"]),
        work=pa.array(["CANARY_c0de", "Private", None]).dictionary_encode(),
        children=pa.array([123456789, 1, 2], pa.int64()),
    ).append_column("secret", pa.array(["CANARY_7f3a", "x", "y"]))
    report = validate_table(table, SCHEMA)
    assert not report.success
    assert {e.column for e in report.expectations if not e.success} == {"age", "hours", "sex", "work", "children"}

    out = capsys.readouterr()
    texts = {
        "to_dict": json.dumps(report.to_dict()),
        "failed_rules": str(report.failed_rules()),
        "repr": repr(report),
        "logs": caplog.text + "".join(str(r.args) for r in caplog.records),
        "stdout/stderr": out.out + out.err,
    }
    for where, text in texts.items():
        for canary in canaries:
            assert canary not in text, f"{canary} leaked into {where}"
    assert "Calculating Metrics" not in out.err   # GE's progress bar is off
    assert report.failed_rules() == [   # column and rule only: no values, no counts
        "column 'age': values must not be null",
        "column 'age': values must be between 17 and 90",
        "column 'hours': values must be between 0 and 99.5",
        "column 'sex': values must not be null",
        "column 'sex': values must be in the 2 declared categories",
        "column 'work': values must be in the 3 declared categories",
        "column 'children': values must be between 0 and 20",
    ]


def test_report_to_dict_is_json_and_keeps_counts_only():
    report = validate_table(_good(sex=pa.array(["Female", "Other", "Male"])), SCHEMA)
    doc = json.loads(json.dumps(report.to_dict()))
    assert doc["success"] is False and doc["table"] == "people"
    keys = {"expectation_type", "column", "success", "rule", "element_count", "unexpected_count", "errored"}
    assert all(set(e) == keys for e in doc["expectations"])


def test_errored_outcome_line():
    outcome = ExpectationOutcome("expect_column_values_to_be_in_set", "sex", False, "values must be in x", errored=True)
    assert outcome.line() == "column 'sex': values must be in x (the check could not be evaluated)"


def test_import_is_cheap():
    code = "import sys, quality.validation; print('great_expectations' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


def test_a_check_ge_cannot_evaluate_is_a_failure_without_its_message(monkeypatch):
    import dprelease.quality.validation as validation

    original = validation._canonical

    def strings_for_hours(chunked, column):   # simulate a conversion bug: numbers arrive as text
        return chunked.cast(pa.string()) if column.name == "hours" else original(chunked, column)

    fast = validation._fast_array
    monkeypatch.setattr(validation, "_canonical", strings_for_hours)
    monkeypatch.setattr(validation, "_fast_array", lambda chunked, column: None if column.name == "hours"
                        else fast(chunked, column))
    report = validate_table(_good(hours=pa.array([1.0, 2.0, 98765.4321])), SCHEMA)
    failed = _failed(report)
    outcome = failed["hours", "expect_column_values_to_be_between"]
    assert outcome.errored and outcome.element_count is None
    assert report.failed_rules() == [
        "column 'hours': values must be between 0 and 99.5 (the check could not be evaluated)"]
    assert "98765" not in json.dumps(report.to_dict())


# ---------------------------------------------------------------------------------------------
# Batches and GE's fast paths give the report of the whole table


def _mixed_failures() -> pa.Table:
    """Failures of every kind, spread over the rows, with nulls, NaN and out-of-domain values."""
    rows = 40
    return pa.table({
        "age": pa.array([16 if i % 7 == 0 else 30 + i for i in range(rows)], pa.int64()),
        "hours": pa.array([float("nan") if i % 11 == 0 else (120.0 if i % 5 == 0 else 40.0) for i in range(rows)]),
        "sex": pa.array([None if i % 13 == 0 else ("Other" if i % 3 == 0 else "Male") for i in range(rows)]),
        "work": pa.array([None if i % 2 else ("Unknown" if i % 4 == 0 else "Private") for i in range(rows)]),
        "children": pa.array([None if i % 6 == 0 else (25 if i % 9 == 0 else 1) for i in range(rows)], pa.int32()),
        "weight": pa.array([None if i % 8 == 0 else float(i) for i in range(rows)]),
    })


def test_batches_give_the_whole_tables_report(monkeypatch):
    import dprelease.quality.validation as validation

    table = _mixed_failures()
    whole = validate_table(table, SCHEMA)
    assert not whole.success
    assert {e.column for e in whole.expectations if not e.success} == {"age", "hours", "sex", "work", "children"}
    batched = validation.validate_batches([table.slice(0, 7), table.slice(7, 0), table.slice(7, 33)],
                                          SCHEMA, table.schema)
    assert batched == whole
    monkeypatch.setattr(validation, "BATCH_ROWS", 3)
    assert validate_table(table, SCHEMA) == whole


def test_fast_paths_give_the_exact_slow_paths_report(monkeypatch):
    import dprelease.quality.validation as validation

    table = _mixed_failures().set_column(5, "weight", pa.array([None if i % 8 == 0 else float(i) for i in range(40)]))
    fast = validate_table(table, SCHEMA)
    assert validation._fast_array(table["sex"], SCHEMA.column("sex")) is not None
    assert validation._fast_array(table["age"], SCHEMA.column("age")) is not None
    assert validation._fast_array(table["children"], SCHEMA.column("children")) is None  # nulls: masked Int32
    assert validation._fast_array(table["hours"], SCHEMA.column("hours")) is None        # NaN: ArrowDtype
    assert validation._fast_array(table["weight"], SCHEMA.column("weight")) is not None  # nulls but no NaN
    monkeypatch.setattr(validation, "_fast_array", lambda chunked, column: None)
    assert validate_table(table, SCHEMA) == fast


def test_empty_batches_are_one_empty_table():
    import dprelease.quality.validation as validation

    table = _good()
    report = validation.validate_batches(iter(()), SCHEMA, table.schema)
    assert report.success and report == validate_table(table.slice(0, 0), SCHEMA)
