"""Numeric columns with a finite public value set (``values: [...]``): one bin per value, decoded exactly."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest
import yaml

from dprelease.dp.measurement.marginals import Binning, encode_numeric, encode_table, numeric_domain
from dprelease.dp.synthesis.sampling import OutputColumn, decode
from dprelease.quality.validation import validate_table
from dprelease.schemas.model import SchemaError
from dprelease.schemas.table import load_schema


def test_each_bin_is_one_declared_value_and_decodes_to_it_exactly():
    d = numeric_domain("rate", "float", 0.0, 100.0, Binning("values", 3, (12.5, 0.5, 99.9)), nullable=True)
    assert d.points and d.edges[:3] == (0.5, 12.5, 99.9) and d.bins == 3
    assert encode_numeric(np.array([0.5, 12.5, 13.0, 99.9]), d).tolist() == [0, 1, 1, 2]  # 13 counts with 12.5
    table = decode({"rate": np.array([0, 1, 2, 3, 2])}, [OutputColumn("rate", "float", d)], 5,
                   np.random.default_rng(0))  # a test generator: decoding is post-processing
    assert table.column("rate").to_pylist() == [0.5, 12.5, 99.9, None, 99.9]
    ints = numeric_domain("n", "int", 0, 10, Binning("values", 2, (2.0, 7.0)), nullable=False)
    out = decode({"n": np.array([1, 0])}, [OutputColumn("n", "int", ints)], 2, np.random.default_rng(0))
    assert out.column("n").to_pylist() == [7, 2] and str(out.schema.field("n").type) == "int64"


def _schema(tmp_path, column):
    path = tmp_path / "schema.yaml"
    path.write_text(yaml.safe_dump({"table": "t", "columns": {"x": column}}), encoding="utf-8")
    return path


def test_a_value_set_is_parsed_sorted(tmp_path):
    column = load_schema(_schema(tmp_path, {"type": "int", "min": 0, "max": 10, "values": [5, 1, 3]})).column("x")
    assert column.bins == Binning("values", 3, (1.0, 3.0, 5.0))


@pytest.mark.parametrize(("column", "message"), [
    ({"type": "int", "min": 0, "max": 10, "values": [1, 1]}, "columns.x.values[1]: (1) repeats an earlier value"),
    ({"type": "int", "min": 0, "max": 10, "values": [11]}, "columns.x.values[0]: (11) must lie within the public"),
    ({"type": "int", "min": 0, "max": 10, "values": [1.5]}, "columns.x.values[0]: (1.5) must be a whole number"),
    ({"type": "int", "min": 0, "max": 10, "values": []}, "columns.x.values: must be a list of 1 to 10000 numbers"),
    ({"type": "int", "min": 0, "max": 10, "values": [1], "bins": "log"}, "columns.x.bins: does not apply with"),
    ({"type": "int", "search_range": [0, 10], "values": [1]}, "columns.x: values: needs public min and max"),
])
def test_a_bad_value_set_is_one_line_naming_the_key_and_the_rule(tmp_path, column, message):
    path = _schema(tmp_path, column)
    with pytest.raises(SchemaError, match=re.escape(message)):
        load_schema(path)


@pytest.mark.parametrize("arrow_type", [pa.int64(), pa.float64()], ids=["int-lookup", "float"])
def test_a_value_between_declared_ones_is_counted_as_clamped_and_fails_the_gate(tmp_path, arrow_type):
    """3 in {1, 5, 10} was binned with 1 silently: no row counted as clamped, and check passed the table."""
    column = {"type": "int" if arrow_type == pa.int64() else "float", "min": 0, "max": 10, "values": [1, 5, 10]}
    schema = load_schema(_schema(tmp_path, column))
    table = pa.table({"x": pa.array([1, 3, 5, 10, 12, None, 3], arrow_type)})
    domain = numeric_domain("x", schema.column("x").type, 0, 10, schema.column("x").bins, nullable=True)
    codes, handling = encode_table(table, [domain], {})
    assert codes["x"].tolist() == [0, 0, 1, 2, 2, 3, 0] and handling.clamped == {"x": 3}  # 3, 12, 3
    report = validate_table(table, replace(schema, columns=(replace(schema.column("x"), nullable=True),)))
    assert report.failed_rules() == ["column 'x': values must be one of the 3 declared values",
                                     "column 'x': values must be between 0 and 10"]
    assert [o.unexpected_count for o in report.expectations if not o.success] == [3, 1]
