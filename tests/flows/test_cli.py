"""The dprelease command line: check (the CI gate), plan, verify, report, and a --ledger that is not a ledger."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dprelease.flows.cli import main

ADULT = Path(__file__).resolve().parents[2] / "examples" / "adult"
FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "schemas" / "data" / "audit_adult.json"


def test_check_passes_on_adult(capsys):
    assert main(["check", str(ADULT / "schema.yaml"), str(ADULT / "adult.parquet")]) == 0
    assert "PASS" in capsys.readouterr().out


def test_check_fails_on_a_wrong_type(tmp_path, capsys):
    table = pq.read_table(ADULT / "adult.parquet")
    table = table.set_column(0, "age", pc.cast(table.column("age"), pa.string()))
    pq.write_table(table, tmp_path / "bad.parquet")
    code = main(["check", str(ADULT / "schema.yaml"), str(tmp_path / "bad.parquet"), "--summary",
                 str(tmp_path / "summary.json")])
    out = capsys.readouterr().out
    assert code == 1
    assert "'age'" in out and "integer" in out
    assert "39" not in out and "50" not in out  # the first ages of Adult: no data value is printed
    assert '"passed": false' in (tmp_path / "summary.json").read_text()


def test_check_fails_on_a_missing_column(tmp_path, capsys):
    table = pq.read_table(ADULT / "adult.parquet").drop_columns(["hours-per-week"])
    pq.write_table(table, tmp_path / "bad.parquet")
    assert main(["check", str(ADULT / "schema.yaml"), str(tmp_path / "bad.parquet")]) == 1
    assert "hours-per-week" in capsys.readouterr().out


def test_check_exit_2_on_a_bad_schema_or_unreadable_file(tmp_path, capsys):
    bad_schema = tmp_path / "schema.yaml"
    bad_schema.write_text("table: t\ncolumns: {age: {type: int, min: 9, max: 1}}\n")
    assert main(["check", str(bad_schema), str(ADULT / "adult.parquet")]) == 2
    (tmp_path / "x.parquet").write_bytes(b"not parquet")
    assert main(["check", str(ADULT / "schema.yaml"), str(tmp_path / "x.parquet")]) == 2
    assert "not a readable Parquet file" in capsys.readouterr().err


def test_plan_prints_the_budget_without_data(tmp_path, capsys):
    assert main(["plan", str(ADULT / "release-pairs.yaml"), "--ledger", str(tmp_path / "none.sqlite")]) == 0
    out = capsys.readouterr().out
    assert "reserved: rho=" in out and "marginal(income,education)" in out
    assert main(["plan", str(ADULT / "release.yaml"), "--ledger", str(tmp_path / "none.sqlite")]) == 0
    out = capsys.readouterr().out
    assert "13 cliques of up to 3 columns" in out and "second parents" in out


def test_verify_detects_a_flipped_byte(tmp_path, capsys):
    import json

    from dprelease.tasks.staging import file_entries, manifest_seal

    release = tmp_path / "rel"
    (release / "synthetic").mkdir(parents=True)
    (release / "synthetic" / "t.parquet").write_bytes(b"abcdef" * 100)
    (release / "audit.json").write_text("{}")
    manifest: dict[str, object] = {"release_id": "rel", "files": file_entries(release)}
    manifest["manifest_sha256"] = manifest_seal(manifest)
    (release / "manifest.json").write_text(json.dumps(manifest))
    assert main(["verify", str(release)]) == 0
    data = bytearray((release / "synthetic" / "t.parquet").read_bytes())
    data[17] ^= 0x01
    (release / "synthetic" / "t.parquet").write_bytes(bytes(data))
    assert main(["verify", str(release)]) == 1
    assert "synthetic/t.parquet: SHA-256 does not match" in capsys.readouterr().out
    (release / "extra.txt").write_text("x")
    assert main(["verify", str(release)]) == 1
    assert main(["verify", str(tmp_path / "nope")]) == 2


def test_report_re_renders_a_published_audit_and_refuses_another_document(tmp_path, capsys):
    import shutil

    from dprelease.reports.audit import render_markdown
    from dprelease.reports.audit_json import audit_from_json
    from dprelease.reports.html import render_html

    release = tmp_path / "rel"
    release.mkdir()
    shutil.copy(FIXTURE, release / "audit.json")
    assert main(["report", str(release)]) == 0
    audit = audit_from_json(FIXTURE.read_text(encoding="utf-8"))
    assert (release / "audit.html").read_text(encoding="utf-8") == render_html(audit)
    assert (release / "audit.md").read_text(encoding="utf-8") == render_markdown(audit)
    (release / "audit.json").write_text('{"format": "dprelease-ldp-audit/1"}')  # a local-DP collection's audit
    assert main(["report", str(release)]) == 2
    assert ("dprelease report: audit.json: format ('dprelease-ldp-audit/1') must be 'dprelease-audit/1'"
            in capsys.readouterr().err)
    assert main(["report", str(tmp_path)]) == 2


def test_a_ledger_path_that_is_not_a_ledger_is_refused_in_one_line_with_exit_2(tmp_path, capsys):
    notes = tmp_path / "notes.sqlite"
    notes.write_text("a steward's notes, not a database\n" * 100, encoding="utf-8")
    for argv in (["ledger", "show", "--ledger", str(notes)],
                 ["plan", str(ADULT / "release.yaml"), "--ledger", str(notes)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "notes.sqlite: is not an SQLite database (or is damaged)" in err[0], err
        assert "Traceback" not in err[0] and "steward's notes" not in err[0]
    assert notes.read_text(encoding="utf-8") == "a steward's notes, not a database\n" * 100
