"""Census-style category domains: integer codes, public ranges and code files; integer data columns."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import yaml

import dprelease.schemas.categories
from dprelease.dp.measurement.marginals import count_all
from dprelease.quality.validation import structural_problems, validate_table
from dprelease.schemas.encoding import domains_for, rules_for
from dprelease.schemas.model import SchemaError
from dprelease.schemas.spec import load_spec
from dprelease.schemas.table import load_schema

ADULT = Path(__file__).resolve().parents[2] / "examples" / "adult"


def _schema(folder: Path, categories: str, extra: str = "") -> Path:
    """A one-column schema whose ``categories:`` is written as YAML text (so ``010`` stays what YAML makes of it)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "schema.yaml"
    path.write_text(f"table: t\ncolumns:\n  code: {{type: category, categories: {categories}{extra}}}\n",
                    encoding="utf-8")
    return path


def _categories(folder: Path, categories: str, extra: str = "") -> tuple[str, ...]:
    return load_schema(_schema(folder, categories, extra)).column("code").categories


def _refused(folder: Path, categories: str, message: str) -> str:
    """The one-line error of a schema, checked to name the file, the key path and the rule."""
    path = _schema(folder, categories)
    with pytest.raises(SchemaError, match=re.escape(message)) as info:
        load_schema(path)
    text = str(info.value)
    assert text.startswith(f"{path}: columns.code.categories") and "\n" not in text
    return text


# --- integers in YAML ---------------------------------------------------------------------------------------------

def test_integer_codes_stand_for_their_decimal_strings(tmp_path):
    assert _categories(tmp_path, "[1, 2, 3]") == ("1", "2", "3")
    assert _categories(tmp_path, "[-1, 0, '07', 12, x]") == ("-1", "0", "07", "12", "x")
    assert _categories(tmp_path, "[1, 2]", ", on_unknown: 2") == ("1", "2")
    assert load_schema(_schema(tmp_path, "[1, 2]", ", on_unknown: 2")).column("code").on_unknown == "2"


@pytest.mark.parametrize(
    ("categories", "message"),
    [
        ("[1, '1']", "categories[1]: duplicates an earlier category (after Unicode normalisation), [0]; an "
                     "integer stands for its decimal string, so 1 and '1' are one category"),
        ("[true, false]", "categories[0]: (true) must be a string or a whole number (quote codes that are not plain "
                          "integers, such as '01' with its leading zero); unquoted true/false/yes/no/on/off"),
        ("[yes, no]", "categories[0]: (true) must be a string or a whole number"),
        ("[1.5]", "categories[0]: (1.5) must be a string or a whole number (quote codes that are not plain "
                  "integers, such as '01' with its leading zero); a number with a point is not a code"),
        ("[1, 2.0]", "categories[1]: (2.0) must be a string or a whole number"),
        ("[1, ~]", "categories[1]: (null) must be a string or a whole number (quote codes that are not plain "
                   "integers, such as '01' with its leading zero); a null is declared with nullable: true"),
        ("['']", "categories[0]: must be a non-empty string or a whole number"),
        ("[[1, 2]]", "categories[0]: must be a string or a whole number"),
        ("[01, 02]", "categories[0]: (01) is read by YAML as the number 1: quote the code ('01') to keep it as "
                     "written, or write 1"),
        ("[7, 010]", "categories[1]: (010) is read by YAML as the number 8: quote the code ('010')"),
        ("[0x1F]", "categories[0]: (0x1F) is read by YAML as the number 31"),
        ("[7, 2020-01-31]", "categories[1]: (2020-01-31) is read by YAML as a date: quote the code ('2020-01-31') "
                            "to keep it as text"),
        ("[7, 1E5]", "categories[1]: (1E5) is read by YAML as the number 100000: quote the code ('1E5') to keep it "
                     "as written"),
        ("[]", "categories: must be a non-empty list, {range: [LOW, HIGH]} or {file: PATH} for a category column"),
        ("{range: [1, 2], file: c.txt}", "categories: must be a non-empty list, {range: [LOW, HIGH]} or {file: PATH}"),
        ("{ranges: [1, 2]}", "categories: must be a non-empty list, {range: [LOW, HIGH]} or {file: PATH}"),
    ],
)
def test_listed_category_errors(tmp_path, categories, message):
    _refused(tmp_path, categories, message)


def test_at_most_max_categories_are_listed(tmp_path, monkeypatch):
    monkeypatch.setattr(dprelease.schemas.categories, "MAX_CATEGORIES", 3)
    assert _categories(tmp_path, "[1, 2, 3]") == ("1", "2", "3")
    _refused(tmp_path, "[1, 2, 3, 4]", "categories: lists 4 categories; at most 3 are allowed")


# --- ranges -------------------------------------------------------------------------------------------------------

def test_a_range_declares_every_integer_in_it(tmp_path):
    codes = _categories(tmp_path, "{range: [170, 9920]}")
    assert len(codes) == 9751 and codes[0] == "170" and codes[-1] == "9920" and "4970" in codes
    assert _categories(tmp_path, "{range: [-1, 1]}") == ("-1", "0", "1")
    assert _categories(tmp_path, "{range: [5, 5]}") == ("5",)
    assert len(_categories(tmp_path, "{range: [1, 100000]}")) == 100_000


@pytest.mark.parametrize(
    ("categories", "message"),
    [
        ("{range: [9920, 170]}", "categories.range: low (9920) must be at most high (170)"),
        ("{range: [0, 100000]}", "categories.range: ([0, 100000]) holds 100001 codes; at most 100000 categories are "
                                 "allowed (declare a coarser public grouping, or a numeric column)"),
        ("{range: [1, 2, 3]}", "categories.range: must be [LOW, HIGH], two plain whole numbers (every integer from "
                               "LOW to HIGH, inclusive)"),
        ("{range: [1.0, 9]}", "categories.range: must be [LOW, HIGH], two plain whole numbers"),
        ("{range: [true, 9]}", "categories.range: must be [LOW, HIGH], two plain whole numbers"),
        ("{range: [0170, 9920]}", "categories.range: must be [LOW, HIGH], two plain whole numbers"),
        ("{range: 170}", "categories.range: must be [LOW, HIGH], two plain whole numbers"),
    ],
)
def test_range_errors(tmp_path, categories, message):
    _refused(tmp_path, categories, message)


# --- code files ---------------------------------------------------------------------------------------------------

def test_a_code_file_lists_codes_relative_to_the_schema(tmp_path, monkeypatch):
    folder = tmp_path / "schemas"
    (folder / "codes").mkdir(parents=True)
    text = "\ufeff# PUMS industry codes (public)\n0170\n\n  0180  # crops, with its leading zero\n9920\ncafe\u0301\n"
    (folder / "codes" / "indp.txt").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # the path is the schema file's, not the working folder's
    assert _categories(folder, "{file: codes/indp.txt}") == ("0170", "0180", "9920", "caf\u00e9")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("1\n2\n# 3\n1\n", "categories.file: ('codes.txt') line 4 repeats the code '1' of line 1"),
        ("# nothing but comments\n\n   \n", "categories.file: ('codes.txt') holds no code (one code a line; blank "
                                           "lines and # comments are ignored)"),
        ("", "categories.file: ('codes.txt') holds no code"),
        (b"1\n\xff\xfe\n", "categories.file: ('codes.txt') is not UTF-8 text (byte 2)"),
    ],
)
def test_code_file_errors(tmp_path, content, message):
    path = tmp_path / "codes.txt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    _refused(tmp_path, "{file: codes.txt}", message)


def test_missing_large_and_odd_code_files_are_refused(tmp_path, monkeypatch):
    _refused(tmp_path, "{file: nope.txt}", "categories.file: ('nope.txt') names no file (paths are relative to the "
                                           "schema file)")
    (tmp_path / "folder").mkdir()
    _refused(tmp_path, "{file: folder}", "categories.file: ('folder') is not a regular file")
    _refused(tmp_path, "{file: 7}", "categories.file: must be the path of a code file, relative to the schema file")
    (tmp_path / "codes.txt").write_text("1\n2\n3\n4\n", encoding="utf-8")
    monkeypatch.setattr(dprelease.schemas.categories, "MAX_CATEGORIES", 3)
    _refused(tmp_path, "{file: codes.txt}", "categories.file: ('codes.txt') holds more than 3 codes; at most 3 "
                                            "categories are allowed")
    monkeypatch.setattr(dprelease.schemas.categories, "MAX_CODE_FILE_BYTES", 4)
    _refused(tmp_path, "{file: codes.txt}", "categories.file: ('codes.txt') is larger than 0 MiB")


# --- integer codes with hierarchies and derived columns -----------------------------------------------------------

def test_integer_codes_work_with_prefix_hierarchies_and_mappings(tmp_path):
    doc = ("table: t\ncolumns:\n"
           "  puma: {type: category, categories: [2500100, 2500200, 3300100]}\n"
           "  sex: {type: category, categories: [1, 2]}\n"
           "  weight: {type: int, min: 0, max: 9, derived_from: sex, mapping: {1: 3, 2: 4}}\n"
           "hierarchies:\n  geo: {column: puma, levels: [state], parents: {state: {prefix: 2}}}\n")
    (tmp_path / "schema.yaml").write_text(doc, encoding="utf-8")
    schema = load_schema(tmp_path / "schema.yaml")
    assert schema.hierarchies[0].labels == (("25", "33"),)
    assert dict(schema.column("weight").mapping) == {"1": 3, "2": 4}


# --- integer data columns -----------------------------------------------------------------------------------------

def test_an_integer_column_is_matched_as_decimal_strings_and_unknown_codes_follow_on_unknown(tmp_path):
    doc = ("table: t\ncolumns:\n"
           "  race: {type: category, categories: {range: [1, 9]}}\n"
           "  sex: {type: category, nullable: true, categories: ['1', '2', other], on_unknown: other}\n")
    (tmp_path / "schema.yaml").write_text(doc, encoding="utf-8")
    schema = load_schema(tmp_path / "schema.yaml")
    table = pa.table({"race": pa.array([1, 9, 9, 4, 99], pa.int64()),
                      "sex": pa.array([1, 2, None, 7, 1], pa.uint8())})
    assert structural_problems(schema, table.schema) == []
    counts, handling = count_all([table], domains_for(schema, {}), rules_for(schema), [("race",), ("sex",)])
    assert counts[("race",)].tolist() == [1, 0, 0, 1, 0, 0, 0, 0, 2]  # 99 is unknown: dropped
    assert counts[("sex",)].tolist() == [1, 1, 1, 1]  # 7 mapped to other; a null has its own code
    assert handling.dropped_unknown == {"race": 1} and handling.mapped_unknown == {"sex": 1}


def test_validation_counts_unknown_integer_codes_without_naming_them(tmp_path):
    (tmp_path / "schema.yaml").write_text("table: t\ncolumns:\n  race: {type: category, categories: [1, 2, 3]}\n",
                                          encoding="utf-8")
    schema = load_schema(tmp_path / "schema.yaml")
    good = validate_table(pa.table({"race": pa.array([1, 2, 3, 3], pa.int32())}), schema)
    assert good.success
    canary = 918273645
    report = validate_table(pa.table({"race": pa.array(np.array([1, 2, canary, 3]), pa.int64())}), schema)
    assert report.failed_rules() == ["column 'race': values must be in the 3 declared categories"]
    (in_set,) = [e for e in report.expectations if e.expectation_type == "expect_column_values_to_be_in_set"]
    assert in_set.unexpected_count == 1
    assert str(canary) not in str(report.to_dict())
    padded = load_schema(_schema(tmp_path / "padded", "['01', '02', other]"))
    assert [str(p) for p in structural_problems(padded, pa.schema([("code", pa.int64())]))] == [
        "column 'code': has an integer type (int64) but no declared category is a plain integer code (integers are "
        "matched as decimal strings: 7 is '7', never '07'); declare the codes as integers, or store the column as "
        "strings"]
    assert structural_problems(padded, pa.schema([("code", pa.string())])) == []
    floats = pa.table({"race": pa.array([1.0, 2.0])})
    assert [str(p) for p in structural_problems(schema, floats.schema)] == [
        "column 'race': must have a string, dictionary-of-string or integer type (found double)"]


# --- stage shares with nothing to spend on ------------------------------------------------------------------------

def _spec(tmp_path: Path, hierarchies: bool, drop: tuple[str, ...], **changes: object) -> Path:
    """The Adult example's spec and schema in ``tmp_path``: ``drop`` removes spec keys, ``changes`` sets others."""
    schema = yaml.safe_load((ADULT / "schema.yaml").read_text(encoding="utf-8"))
    if not hierarchies:
        del schema["hierarchies"]
    (tmp_path / "schema.yaml").write_text(yaml.safe_dump(schema), encoding="utf-8")
    doc = yaml.safe_load((ADULT / "release.yaml").read_text(encoding="utf-8"))
    doc.update(schema="schema.yaml", data="adult.parquet", **changes)
    for key in drop:
        doc.pop(key, None)
    path = tmp_path / "release.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


NOT_AUTO = ("cliques", "root", "clique_bins")


@pytest.mark.parametrize(
    ("hierarchies", "drop", "changes", "message"),
    [
        (False, (), {}, "allocation.hierarchy: must be 0 or absent: the schema declares no hierarchy; drop the key "
                        "or move its share to one_way or cliques"),
        (False, NOT_AUTO, {"two_way": [["age", "sex"]],
                           "allocation": {"bounds": 0.05, "one_way": 0.45, "two_way": 0.4, "hierarchy": 0.1}},
         "allocation.hierarchy: must be 0 or absent: the schema declares no hierarchy; drop the key or move its "
         "share to one_way or two_way"),
        (True, (), {"allocation": {"bounds": 0.05, "one_way": 0.4, "selection": 0.04, "cliques": 0.41,
                                   "hierarchy": 0.05, "stats": 0.05}},
         "allocation.stats: must be 0 or absent without stats; drop the key or move its share to one_way or cliques "
         "(or ask for stats:)"),
        (True, NOT_AUTO, {"two_way": [["age", "sex"]]},
         "allocation.cliques: must be 0 or absent unless cliques is auto; drop the key or move its share to one_way "
         "or two_way (or set cliques: auto)"),
        (True, NOT_AUTO, {"allocation": {"bounds": 0.05, "one_way": 0.8, "selection": 0.1, "hierarchy": 0.05}},
         "allocation.selection: must be 0 or absent unless two_way or cliques is auto; drop the key or move its "
         "share to one_way"),
    ],
)
def test_a_share_with_nothing_to_spend_on_says_where_it_should_go(tmp_path, hierarchies, drop, changes, message):
    path = _spec(tmp_path, hierarchies, drop, **changes)
    with pytest.raises(SchemaError, match=re.escape(message)) as info:
        load_spec(path)
    assert str(info.value).startswith(f"{path}: allocation.") and "\n" not in str(info.value)
