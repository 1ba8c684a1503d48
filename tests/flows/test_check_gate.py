"""The CI data-quality gate: ``dprelease check`` exit codes, its JUnit XML report and the check-quality flow."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dprelease.flows.cli import main
from dprelease.schemas.table import load_schema

ADULT = Path(__file__).resolve().parents[2] / "examples" / "adult"
SCHEMA = ADULT / "schema.yaml"
CANARY_TEXT = "CANARY_gate_Vb3q"
CANARY_NUMBER = 918273645  # far outside age's public bounds [17, 90]


def _replace(table: pa.Table, name: str, values: list, type_: pa.DataType | None = None) -> pa.Table:
    return table.set_column(table.column_names.index(name), name, pa.array(values, type_))


def _table_with_value_failures() -> pa.Table:
    """Adult with a canary category in occupation and a canary age: right types, wrong values."""
    table = pq.read_table(ADULT / "adult.parquet")
    occupation = table.column("occupation").to_pylist()
    occupation[3] = CANARY_TEXT
    age = table.column("age").to_pylist()
    age[11] = CANARY_NUMBER
    table = _replace(table, "occupation", occupation, pa.string())
    return _replace(table, "age", age, table.schema.field("age").type)


def _table_with_a_wrong_type() -> pa.Table:
    """Adult whose age column holds strings (one of them a canary): a structural failure."""
    table = pq.read_table(ADULT / "adult.parquet")
    age = pc.cast(table.column("age"), pa.string()).to_pylist()
    age[0] = CANARY_TEXT
    return _replace(table, "age", age, pa.string())


def _run(args: list[str], capsys) -> tuple[int, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _cases(path: Path) -> tuple[ET.Element, list[ET.Element]]:
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    return suites[0], suites[0].findall("testcase")


def _failures(cases: list[ET.Element]) -> dict[tuple[str, str], str]:
    found = {}
    for case in cases:
        for tag in ("failure", "error"):
            for node in case.findall(tag):
                found[(case.get("classname"), case.get("name"))] = node.get("message")
    return found


def _assert_no_canary(*texts: str | bytes) -> None:
    for text in texts:
        data = text.encode() if isinstance(text, str) else text
        assert CANARY_TEXT.encode() not in data
        assert str(CANARY_NUMBER).encode() not in data


def test_adult_passes_with_one_passing_testcase_per_column_rule(tmp_path, capsys):
    report = tmp_path / "report.xml"
    code, out = _run(["check", str(SCHEMA), str(ADULT / "adult.parquet"), "--junit", str(report)], capsys)
    assert code == 0, out
    assert "PASS" in out
    suite, cases = _cases(report)
    assert int(suite.get("tests")) == len(cases) and int(suite.get("failures")) == 0 and int(suite.get("errors")) == 0
    assert _failures(cases) == {}
    schema = load_schema(SCHEMA)
    # Every declared column has its structure testcase and at least one value rule.
    columns = {c.name for c in schema.columns}
    assert {case.get("classname") for case in cases} == {f"column {name}" for name in columns}
    structure = [c for c in cases if c.get("name") == "must be present once with its declared type"]
    assert len(structure) == len(columns)
    assert len(cases) > 2 * len(columns)
    names = {(c.get("classname"), c.get("name")) for c in cases}
    assert len(names) == len(cases)  # one testcase per (column, rule)
    assert ("column age", "values must be between 17 and 90") in names


def test_value_failures_exit_1_and_name_column_and_rule_never_a_value(tmp_path, capsys):
    data = tmp_path / "bad.parquet"
    pq.write_table(_table_with_value_failures(), data)
    report, summary = tmp_path / "report.xml", tmp_path / "summary.json"
    code, out = _run(["check", str(SCHEMA), str(data), "--junit", str(report), "--summary", str(summary)], capsys)
    assert code == 1, out
    suite, cases = _cases(report)
    failed = _failures(cases)
    assert set(failed) == {("column age", "values must be between 17 and 90"),
                           ("column occupation", "values must be in the 14 declared categories")}
    assert int(suite.get("failures")) == 2 and int(suite.get("errors")) == 0
    for message in failed.values():
        assert message.startswith("column 'age'") or message.startswith("column 'occupation'")
    assert json.loads(summary.read_text())["passed"] is False
    _assert_no_canary(out, report.read_bytes(), summary.read_bytes())


def test_a_wrong_type_exit_1_with_a_failing_structure_testcase(tmp_path, capsys):
    data = tmp_path / "bad.parquet"
    pq.write_table(_table_with_a_wrong_type(), data)
    report = tmp_path / "report.xml"
    code, out = _run(["check", str(SCHEMA), str(data), "--junit", str(report)], capsys)
    assert code == 1, out
    _, cases = _cases(report)
    failed = _failures(cases)
    assert list(failed) == [("column age", "must be present once with its declared type")]
    assert "integer" in failed[("column age", "must be present once with its declared type")]
    assert len(cases) == len(load_schema(SCHEMA).columns)  # values are not checked when the structure is wrong
    _assert_no_canary(out, report.read_bytes())


def test_usage_and_schema_errors_exit_2_with_an_error_testcase(tmp_path, capsys):
    bad_schema = tmp_path / "schema.yaml"
    bad_schema.write_text("table: t\ncolumns: {age: {type: int, min: 9, max: 1}}\n")
    report = tmp_path / "report.xml"
    code, out = _run(["check", str(bad_schema), str(ADULT / "adult.parquet"), "--junit", str(report)], capsys)
    assert code == 2, out
    suite, cases = _cases(report)
    assert int(suite.get("errors")) == 1 and list(_failures(cases)) == [("schema", "must be readable")]

    (tmp_path / "x.parquet").write_bytes(b"not parquet " + CANARY_TEXT.encode())
    code, out = _run(["check", str(SCHEMA), str(tmp_path / "x.parquet"), "--junit", str(report)], capsys)
    assert code == 2
    assert "not a readable Parquet file" in out
    assert list(_failures(_cases(report)[1])) == [("input", "must be readable")]
    _assert_no_canary(out, report.read_bytes())

    with pytest.raises(SystemExit) as info:  # argparse: a missing argument is a usage error
        main(["check", str(SCHEMA)])
    assert info.value.code == 2


@pytest.mark.parametrize(("junit", "summary", "said"), [
    ("data.parquet", None, "--junit data.parquet: is the data"),
    (None, "schema.yaml", "--summary schema.yaml: is the schema"),
    ("r.xml", "r.xml", "--junit r.xml: is the --summary report"),
    ("folder/report.parquet", None, "--junit folder/report.parquet: is inside the data folder"),
])
def test_a_report_never_overwrites_an_input(tmp_path, capsys, monkeypatch, junit, summary, said):
    """``--junit data.parquet`` (a slip of completion) replaced the sensitive table by the report."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(SCHEMA, "schema.yaml")
    shutil.copy(ADULT / "adult.parquet", "data.parquet")
    Path("folder").mkdir()
    shutil.copy(ADULT / "adult.parquet", "folder/part.parquet")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    data = "folder" if junit and junit.startswith("folder") else "data.parquet"
    options = [*(["--junit", junit] if junit else []), *(["--summary", summary] if summary else [])]
    code, out = _run(["check", "schema.yaml", data, *options], capsys)
    assert code == 2 and out.strip() == f"dprelease check: {said}; a report never overwrites an input or another report"
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_rows_it_cannot_read_exit_2_with_both_reports(tmp_path, capsys):
    """A page whose checksum fails is found only when its rows are read: the gate cannot decide (2), and says why in
    --junit and --summary alike (the summary was not written)."""
    path = tmp_path / "bad.parquet"
    pq.write_table(pq.read_table(ADULT / "adult.parquet"), path, write_page_checksum=True, compression="none")
    meta = pq.ParquetFile(path).metadata.row_group(0).column(0)  # age
    data = bytearray(path.read_bytes())
    data[(meta.dictionary_page_offset + meta.data_page_offset) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    report, summary = tmp_path / "report.xml", tmp_path / "summary.json"
    code, out = _run(["check", str(SCHEMA), str(path), "--junit", str(report), "--summary", str(summary)], capsys)
    rule = "bad.parquet: row group 0 cannot be read (OSError)"
    assert code == 2 and out.strip() == f"dprelease check: {rule}"
    assert _failures(_cases(report)[1]) == {("input", "must be readable"): rule}
    assert json.loads(summary.read_text()) == {"schema": str(SCHEMA), "data": "bad.parquet", "passed": False,
                                               "error": rule}


def test_text_that_is_not_utf8_fails_its_rule_like_any_unknown_category(tmp_path, capsys):
    """One row's malformed bytes are that row's problem (exit 1, the in-set rule), not an unexpected error (was 2)."""
    table = pq.read_table(ADULT / "adult.parquet")
    raw = pa.array([(b"\xff" + CANARY_TEXT.encode()) if i == 5 else v.encode()
                    for i, v in enumerate(table.column("sex").to_pylist())], pa.binary())
    table = table.set_column(table.column_names.index("sex"), "sex",
                             pa.Array.from_buffers(pa.string(), len(raw), raw.buffers()))
    pq.write_table(table, tmp_path / "bad.parquet")
    code, out = _run(["check", str(SCHEMA), str(tmp_path / "bad.parquet"), "--junit", str(tmp_path / "r.xml")], capsys)
    rule = "values must be in the 2 declared categories"
    assert code == 1 and f"column 'sex': {rule}" in out
    assert list(_failures(_cases(tmp_path / "r.xml")[1])) == [("column sex", rule)]
    _assert_no_canary(out, (tmp_path / "r.xml").read_bytes())


@pytest.mark.e2e
def test_check_quality_flow_passes_on_adult_and_fails_on_a_bad_table(prefect_harness, tmp_path, caplog):
    from dprelease.flows.check import DataQualityError, check_quality

    assert check_quality(schema_path=str(SCHEMA), data_path=str(ADULT / "adult.parquet")) is True

    data = tmp_path / "bad.parquet"
    pq.write_table(_table_with_value_failures(), data)
    state = check_quality(schema_path=str(SCHEMA), data_path=str(data), return_state=True)
    assert state.is_failed()
    with pytest.raises(DataQualityError) as info:
        state.result()
    message = str(info.value)
    assert "column 'age': values must be between 17 and 90" in message
    assert "column 'occupation'" in message
    _assert_no_canary(message, caplog.text)

    # Every rule's outcome, columns and rules only, in a table artifact of the run.
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        found = ArtifactFilter(key=ArtifactFilterKey(any_=["quality-schema"]))
        artifacts = client.read_artifacts(artifact_filter=found)
    latest = max((a for a in artifacts if a.flow_run_id == state.state_details.flow_run_id), key=lambda a: a.created)
    rows = json.loads(latest.data) if isinstance(latest.data, str) else latest.data
    assert latest.type == "table" and {tuple(sorted(r)) for r in rows} == {("column", "outcome", "rule")}
    outcomes = {(r["column"], r["rule"]): r["outcome"] for r in rows}
    assert outcomes[("age", "values must be between 17 and 90")] == "fail"
    assert outcomes[("education", "must be present once with its declared type")] == "pass"
    assert {r["column"] for r in rows} == set(load_schema(SCHEMA).names)
    _assert_no_canary(json.dumps(rows), latest.description or "")


@pytest.mark.e2e
def test_check_quality_flow_names_a_missing_column_in_its_rule_outcomes(prefect_harness, tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from dprelease.flows.check import DataQualityError, check_quality

    data = tmp_path / "no-age.parquet"
    pq.write_table(pq.read_table(ADULT / "adult.parquet").drop_columns(["age"]), data)
    state = check_quality(schema_path=str(SCHEMA), data_path=str(data), return_state=True)
    with pytest.raises(DataQualityError, match="age"):
        state.result()
    with get_client(sync_client=True) as client:
        found = ArtifactFilter(key=ArtifactFilterKey(any_=["quality-schema"]))
        artifacts = [a for a in client.read_artifacts(artifact_filter=found)
                     if a.flow_run_id == state.state_details.flow_run_id]
    rows = json.loads(artifacts[0].data) if isinstance(artifacts[0].data, str) else artifacts[0].data
    outcomes = {r["column"]: r["outcome"] for r in rows}
    assert outcomes["age"] == "fail" and outcomes["education"] == "pass"


def test_the_gate_and_the_preflight_run_without_importing_prefect(tmp_path):
    """``dprelease check`` runs no flow, so it loads no Prefect (about a second of every check)."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    summary = tmp_path / "summary.json"
    argv = ["check", str(SCHEMA), str(ADULT / "adult.parquet"), "--summary", str(summary)]
    code = (f"import sys; from dprelease.flows.cli import main; code = main({argv!r}); "
            "import dprelease.tasks.preflight, dprelease.tasks.tables; "
            "print(code, sorted(m for m in sys.modules if m == 'prefect' or m.startswith('prefect.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True,
                         env={**os.environ, "PYTHONPATH": str(root), "DPRELEASE_HOME": str(tmp_path)})
    assert out.stdout.strip().splitlines()[-1] == "0 []"
    assert json.loads(summary.read_text())["passed"] is True


def test_the_command_in_a_process_of_its_own_still_validates_every_rule(tmp_path):
    """``python -m dprelease check`` (GE without SQLAlchemy, quick exit): the same failures, exit code 1."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    data, report = tmp_path / "bad.parquet", tmp_path / "report.xml"
    pq.write_table(_table_with_value_failures(), data)
    out = subprocess.run([sys.executable, "-m", "dprelease", "check", str(SCHEMA), str(data), "--junit", str(report)],
                         capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(root), "DPRELEASE_HOME": str(tmp_path)})
    assert out.returncode == 1, out.stdout + out.stderr
    assert set(_failures(_cases(report)[1])) == {("column age", "values must be between 17 and 90"),
                                                ("column occupation", "values must be in the 14 declared categories")}
    assert "FAIL: bad.parquet does not match schema.yaml" in out.stdout and out.stdout.rstrip().endswith("logs")
    _assert_no_canary(out.stdout + out.stderr, report.read_bytes(), b"")
