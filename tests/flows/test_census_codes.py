"""A census-style table end to end: integer-coded categories in YAML and in Parquet, a code file, a range."""

from __future__ import annotations

import json
import logging
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml

from dprelease.dp.accounting.ledger import Ledger
from dprelease.schemas.spec import load_spec
from dprelease.schemas.table import load_schema
from tests.messages import messages_of
from tests.steward import steward_of

pytestmark = pytest.mark.e2e
CANARY_CODE = 918273645  # an unknown race code in one row: dropped, and never printed
CANARY_INDUSTRY = 76543219  # an unknown industry code in one row: mapped to 9920, and never printed
ROWS = 3000
PUMAS = [2500100, 2500200, 2500300, 3300100, 3300200]
INDUSTRY = ["170", "180", "290", "370", "4970", "7860", "9920"]
SCHEMA = """\
table: census
columns:
  PUMA: {type: category, categories: [2500100, 2500200, 2500300, 3300100, 3300200]}
  AGEP: {type: int, min: 0, max: 99, bins: {width: 10}}
  SEX: {type: category, categories: [1, 2]}
  RAC1P: {type: category, categories: {range: [1, 9]}}     # unknown codes are dropped
  HISP: {type: category, categories: ['01', '02', '03']}   # codes with leading zeros stay quoted strings
  INDP: {type: category, nullable: true, categories: {file: industry.txt}, on_unknown: '9920'}
hierarchies:
  geo: {column: PUMA, levels: [state], parents: {state: {prefix: 2}}}
"""


def _table() -> pa.Table:
    chooser = np.random.default_rng(5)  # test data, not a release
    age = chooser.integers(0, 100, size=ROWS)
    race = chooser.integers(1, 10, size=ROWS)
    race[17] = CANARY_CODE
    industry: list[int | None] = [int(INDUSTRY[i]) if age[r] >= 16 else None
                                  for r, i in enumerate(chooser.integers(0, len(INDUSTRY), size=ROWS))]
    industry[23] = CANARY_INDUSTRY
    return pa.table({
        "PUMA": pa.array(chooser.choice(PUMAS, size=ROWS), pa.int64()),
        "AGEP": pa.array(age, pa.int64()),
        "SEX": pa.array(1 + (chooser.random(ROWS) < 0.5 + 0.002 * age), pa.int8()),
        "RAC1P": pa.array(race, pa.int64()),
        "HISP": pa.array([f"{c:02d}" for c in chooser.integers(1, 4, size=ROWS)]),
        "INDP": pa.array(industry, pa.int32()),
    })


@pytest.fixture(scope="module")
def census_release(prefect_harness, tmp_path_factory):
    from dprelease.flows.release import release

    folder = tmp_path_factory.mktemp("census")
    (folder / "schema.yaml").write_text(SCHEMA, encoding="utf-8")
    (folder / "industry.txt").write_text("# public industry codes\n" + "\n".join(INDUSTRY) + "\n", encoding="utf-8")
    pq.write_table(_table(), folder / "census.parquet", row_group_size=1000)
    spec = {"dataset": "census-codes", "schema": "schema.yaml", "data": "census.parquet",
            "budget": {"epsilon": 1, "delta": 1e-9}, "lifetime_budget": {"epsilon": 2, "delta": 1e-9},
            "allocation": {"one_way": 0.4, "selection": 0.1, "cliques": 0.4, "hierarchy": 0.1},
            "cliques": "auto", "seed": 3}
    (folder / "release.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    with messages_of(logging.getLogger()) as lines:  # every log message of the release (a module-scoped caplog)
        target = Path(release(spec=str(folder / "release.yaml"), out=str(folder / "out"),
                              ledger=str(folder / "ledger.sqlite"), release_id="census-1"))
    return target, folder, "\n".join(lines.messages)


def test_integer_coded_categories_release_end_to_end_as_strings(census_release):
    target, folder, _ = census_release
    schema = load_schema(folder / "schema.yaml")
    synthetic = pq.read_table(target / "synthetic" / "census.parquet")
    assert synthetic.column_names == list(schema.names)
    for column in schema.columns:
        if column.type != "category":
            continue
        assert synthetic.schema.field(column.name).type == pa.string(), column.name
        values = set(pc.unique(synthetic.column(column.name)).to_pylist()) - {None}
        assert values and values <= set(column.categories), column.name
    assert set(synthetic.column("RAC1P").to_pylist()) <= {str(c) for c in range(1, 10)}
    assert set(synthetic.column("INDP").to_pylist()) - {None} <= set(INDUSTRY)
    # the public hierarchy over integer PUMA codes: the state level's counts add up to the synthetic rows
    states = pq.read_table(target / "marginals" / "hierarchy-geo-1-state.parquet").to_pylist()
    assert {r["state"] for r in states} == {"25", "33"}
    assert sum(r["count"] for r in states) == synthetic.num_rows


def test_unknown_codes_follow_on_unknown_and_stay_internal(census_release):
    target, _, logs = census_release
    steward = steward_of(target)
    handling = json.loads((steward / "row_handling.json").read_text())
    assert handling["rows_in"] == ROWS and handling["rows_kept"] == ROWS - 1
    assert handling["dropped_unknown"] == {"RAC1P": 1}
    assert handling["mapped_unknown"] == {"INDP": 1}
    validation = json.loads((steward / "validation.json").read_text())
    assert validation["structural"] == []
    in_set = {e["column"]: e for e in validation["expectations"]
              if e["expectation_type"] == "expect_column_values_to_be_in_set"}
    assert in_set["RAC1P"]["unexpected_count"] == 1 and in_set["INDP"]["unexpected_count"] == 1
    assert in_set["SEX"]["success"] and in_set["PUMA"]["success"]
    assert (steward / "utility.json").is_file()  # real integer codes compared with synthetic strings
    assert logs
    for path in [*target.rglob("*"), *steward.rglob("*")]:
        if path.is_file():
            data = path.read_bytes()
            assert str(CANARY_CODE).encode() not in data and str(CANARY_INDUSTRY).encode() not in data, path.name
    assert str(CANARY_CODE) not in logs and str(CANARY_INDUSTRY) not in logs


def test_the_release_books_at_most_its_budget(census_release):
    target, folder, _ = census_release
    spec = load_spec(folder / "release.yaml")
    audit = json.loads((target / "audit.json").read_text())
    booked = sum(Fraction(m["booked"]["rho"]["exact"]) for m in audit["measurements"])
    assert 0 < booked <= spec.budget.amount
    with Ledger.open(folder / "ledger.sqlite") as ledger:
        assert ledger.release_status("census-1") == "published"


def test_check_accepts_integer_codes_and_a_bad_code_file_exits_2_with_one_line(tmp_path, capsys):
    from dprelease.flows.cli import main

    (tmp_path / "schema.yaml").write_text(SCHEMA, encoding="utf-8")
    (tmp_path / "industry.txt").write_text("\n".join(INDUSTRY) + "\n", encoding="utf-8")
    table = _table()
    table = table.set_column(3, "RAC1P", pc.if_else(pc.equal(table["RAC1P"], CANARY_CODE), 9, table["RAC1P"]))
    table = table.set_column(5, "INDP", pc.if_else(pc.equal(table["INDP"], CANARY_INDUSTRY), 9920, table["INDP"]))
    pq.write_table(table, tmp_path / "census.parquet")
    assert main(["check", str(tmp_path / "schema.yaml"), str(tmp_path / "census.parquet")]) == 0
    assert "FAIL" not in capsys.readouterr().out
    (tmp_path / "industry.txt").write_text("170\n180\n170\n", encoding="utf-8")
    assert main(["check", str(tmp_path / "schema.yaml"), str(tmp_path / "census.parquet")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "Traceback" not in err[0]
    assert f"{tmp_path / 'schema.yaml'}: columns.INDP.categories.file: ('industry.txt') line 3 repeats the code " \
           "'170' of line 1" in err[0]
