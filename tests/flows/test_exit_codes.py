"""Every documented exit code of ``dprelease release`` and ``check``, with one clean line per failure.

0 published; 1 an unexpected failure; 2 a usage, spec, schema or input error (caught by the preflight
before anything is reserved, in seconds); 3 refused by the ledger.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import dprelease.tasks.validate
from dprelease.dp.accounting.budget import ZCDPBudget
from dprelease.dp.accounting.ledger import Ledger
from dprelease.flows.cli import EXIT_CODES, main
from dprelease.schemas.spec import load_spec
from dprelease.tasks.preflight import DASK_TIMEOUT_SECONDS

ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT / "examples" / "adult"
DATASET = "us-cps-1994-adult"


def _example(folder: Path, rows: int | None = 3000) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(ADULT / "schema.yaml", folder / "schema.yaml")
    shutil.copy(ADULT / "release.yaml", folder / "release.yaml")
    table = pq.read_table(ADULT / "adult.parquet")
    pq.write_table(table if rows is None else table.slice(0, rows), folder / "adult.parquet")
    return folder / "release.yaml"


def _cli(*args: str, cwd: Path, timeout: float = 120) -> tuple[int, str, str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(DPRELEASE_HOME=str(cwd / ".dprelease"), PYTHONPATH=str(ROOT))
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "dprelease", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_every_exit_code_is_documented_in_the_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert set(EXIT_CODES) == {0, 1, 2, 3}
    for code in EXIT_CODES:
        assert f"| {code} |" in readme, code


def test_missing_data_exits_2_in_seconds_and_leaves_no_ledger(tmp_path):
    spec = _example(tmp_path / "example")
    (tmp_path / "example" / "adult.parquet").unlink()
    code, _, err, _ = _cli("release", str(spec), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert code == 2
    assert _one_line(err) == "dprelease release: data adult.parquet: no such file or folder"
    assert not (tmp_path / ".dprelease" / "ledger.sqlite").exists() and not (tmp_path / "out").exists()


def test_a_file_that_is_not_parquet_exits_2(tmp_path):
    spec = _example(tmp_path / "example")
    (tmp_path / "example" / "adult.parquet").write_text("age,sex\n39,Male\n", encoding="utf-8")
    code, _, err, _ = _cli("release", str(spec), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert code == 2 and "adult.parquet: not a readable Parquet file" in _one_line(err)
    assert "39" not in err
    assert not (tmp_path / ".dprelease" / "ledger.sqlite").exists()


def test_a_fifo_as_data_exits_2_instead_of_hanging(tmp_path):
    spec = _example(tmp_path / "example")
    data = tmp_path / "example" / "adult.parquet"
    data.unlink()
    os.mkfifo(data)
    code, _, err, _ = _cli("release", str(spec), "--out", str(tmp_path / "out"), cwd=tmp_path, timeout=60)
    assert code == 2 and "must be a regular Parquet file" in _one_line(err)


def test_an_unreachable_dask_scheduler_exits_2_within_10_seconds_with_the_ledger_untouched(tmp_path):
    spec = _example(tmp_path / "example")
    ledger = tmp_path / "ledger.sqlite"
    with Ledger.open(ledger) as opened:
        loaded = load_spec(spec)
        opened.register(DATASET, loaded.definition, loaded.lifetime, loaded.delta, loaded.release_cap)
    before = ledger.read_bytes()
    code, _, err, seconds = _cli("release", str(spec), "--out", str(tmp_path / "out"), "--ledger", str(ledger),
                                 "--dask", "tcp://127.0.0.1:9", cwd=tmp_path)
    assert code == 2
    # The refusal comes from the preflight's TCP probe (its message), which waits at most DASK_TIMEOUT_SECONDS,
    # before Prefect or distributed start; the wall-time bound is only a guard against a hang (two test files
    # run at once on 2 cores, so a command's own start can take several seconds).
    assert _one_line(err).startswith("dprelease release: dask address tcp://127.0.0.1:9: no scheduler answered")
    assert DASK_TIMEOUT_SECONDS <= 10
    assert seconds < 60
    assert ledger.read_bytes() == before


def test_a_bad_spec_exits_2(tmp_path):
    spec = _example(tmp_path / "example")
    spec.write_text(spec.read_text(encoding="utf-8").replace("budget: {epsilon: 1,", "budget: {epsilon: -1,"),
                    encoding="utf-8")
    code, _, err, _ = _cli("release", str(spec), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert code == 2 and "epsilon" in _one_line(err)


def test_a_release_over_the_remaining_budget_exits_3_before_prefect_starts(tmp_path):
    spec = _example(tmp_path / "example")
    loaded = load_spec(spec)
    ledger = tmp_path / "ledger.sqlite"
    assert loaded.release_cap is not None
    left = loaded.budget.amount / 2  # earlier releases leave half of what this one needs
    with Ledger.open(ledger) as opened:
        opened.register(DATASET, loaded.definition, loaded.lifetime, loaded.delta, loaded.release_cap)
        to_spend, number = loaded.lifetime.amount - left, 0
        while to_spend > 0:
            amount = min(to_spend, loaded.release_cap.amount)
            opened.reserve(DATASET, f"earlier-{number}", ZCDPBudget(amount))
            opened.charge(f"earlier-{number}", stage="one_way", query="marginal(age)", mechanism="test",
                          sensitivity="L2=1", scale="1", loss=ZCDPBudget(amount))
            opened.publish(f"earlier-{number}")
            to_spend, number = to_spend - amount, number + 1
    code, _, err, _ = _cli("release", str(spec), "--out", str(tmp_path / "out"), "--ledger", str(ledger),
                           cwd=tmp_path)
    assert code == 3
    line = _one_line(err)
    assert line.startswith("dprelease release: refused by the budget: dataset 'us-cps-1994-adult'")
    assert "lifetime budget has left" in line
    assert not (tmp_path / "out").exists()


def test_check_exits_2_before_validating_when_its_report_cannot_be_written(tmp_path, capsys):
    code = main(["check", str(ADULT / "schema.yaml"), str(ADULT / "adult.parquet"), "--junit",
                 str(tmp_path / "missing" / "deeper" / "r.xml")])
    assert code == 2
    captured = capsys.readouterr()
    assert "PASS" not in captured.out and "FAIL" not in captured.out  # refused before validating
    assert "--junit folder" in captured.err


def test_check_says_its_results_are_not_private(capsys):
    assert main(["check", str(ADULT / "schema.yaml"), str(ADULT / "adult.parquet")]) == 0
    assert "not differentially private" in capsys.readouterr().out


@pytest.mark.e2e
def test_published_exits_0_and_an_unexpected_stage_failure_exits_1_with_one_line(
    harness_api, tmp_path, capsys, monkeypatch
):
    spec = _example(tmp_path / "example")
    out, ledger = tmp_path / "out", tmp_path / "ledger.sqlite"
    assert main(["release", str(spec), "--out", str(out), "--ledger", str(ledger), "--release-id", "ok"]) == 0
    assert (out / DATASET / "ok" / "manifest.json").is_file()
    capsys.readouterr()

    def broken(*args, **kwargs):
        raise RuntimeError("a failure whose text could hold a value: 918273645")

    monkeypatch.setattr(dprelease.tasks.validate, "run_expectations", broken)
    code = main(["release", str(spec), "--out", str(out), "--ledger", str(ledger), "--release-id", "broken"])
    assert code == 1
    err = capsys.readouterr().err
    assert "dprelease release: stage validate_table failed with RuntimeError" in err
    assert "918273645" not in err and "Traceback" not in err
    assert not (out / DATASET / "broken").exists()


def test_a_full_disk_is_named_as_the_system_refusal_it_is_not_an_unexpected_failure(tmp_path):
    # /dev/full: every write fails with ENOSPC, as on a full disk (a real refusal of the kernel, no privilege needed)
    code, _, err, _ = _cli("check", str(ADULT / "schema.yaml"), str(ADULT / "adult.parquet"), "--summary", "/dev/full",
                           cwd=tmp_path)
    assert code == 2
    assert _one_line(err) == "dprelease check: the system refused: No space left on device"


def test_only_the_systems_own_refusals_are_worded_and_never_by_the_exceptions_text():
    import errno

    from dprelease.flows.failures import describe_failure

    full = OSError(errno.ENOSPC, "disk full near value 41234", "/srv/out/.staging-r1/synthetic/part-0.parquet")
    line = describe_failure(full, "release")
    assert line.startswith("the system refused at /srv/out/.staging-r1/synthetic/part-0.parquet: No space left on "
                           "device; whatever this release drew stays booked: run it again with the same --release-id")
    assert "41234" not in line  # the standard wording of the code, not the exception's text
    assert describe_failure(OSError(errno.EROFS, "x"), "check") == "the system refused: Read-only file system"
    for other in (OSError("a library's message quoting a value 41234"), OSError(errno.ENOENT, "gone", "/a/b")):
        expected = f"unexpected failure ({type(other).__name__}); run with --debug for the traceback"
        assert describe_failure(other, "release") == expected


def _full_after(pages: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ledger connection may grow its file by ``pages`` pages: SQLite then refuses as on a full disk.

    ``PRAGMA max_page_count`` is SQLite's own limit; the refusal (SQLITE_FULL) is SQLite's, not a stand-in.
    """
    import dprelease.dp.accounting.ledger as ledger_module

    real = ledger_module.connect_own

    def limited(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        db = real(*args, **kwargs)  # type: ignore[arg-type]
        size = int(db.execute("PRAGMA page_count").fetchone()[0])
        db.execute(f"PRAGMA max_page_count = {size + pages}")
        return db

    monkeypatch.setattr(ledger_module, "connect_own", limited)


@pytest.mark.e2e
def test_a_ledger_on_a_full_disk_is_one_line_naming_it_and_the_same_release_id_then_replays(
    harness_api, tmp_path, capsys, monkeypatch
):
    spec = _example(tmp_path / "example")
    out, ledger = tmp_path / "out", tmp_path / "ledger.sqlite"
    with Ledger.open(ledger):
        pass  # the ledger's tables exist: the release runs until its draws no longer fit
    _full_after(4, monkeypatch)
    argv = ["release", str(spec), "--out", str(out), "--ledger", str(ledger), "--release-id", "full"]
    assert main(argv) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err == [f"dprelease release: ledger {ledger}: could not be written: its disk is full (or its quota or "
                   "file size limit reached); free space on its disk (or move it to a disk with room) and run the "
                   "same release id again: what it drew is replayed from the ledger, not drawn again (a draw whose "
                   "result could not be written stays booked, as lost)"], err
    monkeypatch.undo()
    with Ledger.open(ledger) as book:  # it opens: the hash chain and the head are intact
        before = [c.seq for c in book.charges(release_id="full")]
    assert before  # it failed after drawing: the case where the advice matters
    assert main(argv) == 0
    with Ledger.open(ledger) as book:
        charges = book.charges(release_id="full")
        assert book.release_status("full") == "published"
    assert [c.seq for c in charges][:len(before)] == before
    # Replayed, not drawn again: only the draw whose result could not be sealed is booked (as lost) twice.
    assert len(charges) - len({(c.stage, c.query) for c in charges}) <= 1
