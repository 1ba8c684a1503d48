"""The embedded Prefect server dies with the command that started it (no orphan after ``kill -9``)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.prefect_db import seed_home

ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT / "examples" / "adult"


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _cmdline(pid: int) -> bytes:
    """The process's command line; empty when it has exited since it was listed (a short-lived child)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.e2e
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_killing_the_command_takes_the_embedded_server_with_it(tmp_path):
    for name in ("schema.yaml", "release.yaml", "adult.parquet"):
        shutil.copy(ADULT / name, tmp_path / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(DPRELEASE_HOME=str(tmp_path / ".dprelease"), PYTHONPATH=str(ROOT))
    seed_home(tmp_path / ".dprelease" / "prefect")  # Prefect's migrations already run (tests/prefect_db.py)
    proc = subprocess.Popen([sys.executable, "-m", "dprelease", "release", str(tmp_path / "release.yaml"), "--out",
                             str(tmp_path / "out")], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline, servers = time.monotonic() + 180, []
        while time.monotonic() < deadline and not servers:
            servers = [c for c in _children(proc.pid) if b"uvicorn" in _cmdline(c)]
            if proc.poll() is not None:
                pytest.fail("the release ended before its server was seen")
            time.sleep(0.2)
        assert servers, "no embedded server was started"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(_alive(s) for s in servers):
            time.sleep(0.2)
        assert not any(_alive(s) for s in servers), "the embedded server outlived its command"
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.e2e
def test_a_finished_command_exits_at_once_with_its_logs_and_states_sent_and_its_server_stopped(tmp_path):
    """The command skips the interpreter's teardown (``flows.settings.exit_now``), never what a normal exit sends.

    Its output is complete, its exit code is the command's, no server outlives it, and the embedded
    server's database (read after it stopped) holds the flow run's final state, every task run's,
    and the last log lines, which Prefect sends from its queues only as the process exits.
    """
    import sqlite3

    for name in ("schema.yaml", "release.yaml", "adult.parquet"):
        shutil.copy(ADULT / name, tmp_path / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(DPRELEASE_HOME=str(tmp_path / ".dprelease"), PYTHONPATH=str(ROOT))
    seed_home(tmp_path / ".dprelease" / "prefect")  # Prefect's migrations already run (tests/prefect_db.py)
    proc = subprocess.Popen([sys.executable, "-m", "dprelease", "release", str(tmp_path / "release.yaml"), "--out",
                             str(tmp_path / "out"), "--release-id", "quick-exit"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    servers: list[int] = []
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not servers and proc.poll() is None:
            servers = [c for c in _children(proc.pid) if b"uvicorn" in _cmdline(c)]
            time.sleep(0.1)
        output, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output[-2000:]
    assert "Release published in" in output and output.rstrip().endswith("internal report)")
    assert servers and not any(_alive(s) for s in servers), "the embedded server outlived its command"
    # The server's own output (its services may log errors while they are stopped) went to its log, not here.
    assert "prefect.server" not in output and "Traceback" not in output, output[-2000:]
    assert (tmp_path / ".dprelease" / "prefect" / "embedded-server.log").is_file()
    with sqlite3.connect(tmp_path / ".dprelease" / "prefect" / "prefect.db") as db:
        (flow_state,) = db.execute("SELECT state_type FROM flow_run").fetchone()
        task_states = {row[0] for row in db.execute("SELECT state_type FROM task_run")}
        messages = [row[0] for row in db.execute("SELECT message FROM log")]
    assert flow_state == "COMPLETED" and task_states == {"COMPLETED"}
    assert "Finished in state Completed()" in messages
    assert any(m.startswith("stage evaluate_utility finished") for m in messages)


@pytest.mark.e2e
def test_a_server_stopped_while_it_boots_is_killed_at_once(tmp_path, monkeypatch):
    """uvicorn holds a SIGTERM until its start-up ends (Prefect's import, a new home's migrations), so a
    server stopped before it answered (the preflight refused the inputs) is killed, not waited for 5 s."""
    from dprelease.flows.settings import EmbeddedServer

    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    monkeypatch.setenv("PREFECT_API_URL", "restored-after-the-test")  # the server sets it in this process
    server = EmbeddedServer()
    time.sleep(1.5)  # uvicorn is importing the app: its signal handlers are installed
    assert server.process.poll() is None and not server.ready
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 2.5 and server.process.returncode == -signal.SIGKILL


def test_a_server_that_exits_at_start_is_one_line_naming_its_log(tmp_path, monkeypatch):
    import dprelease.flows.settings
    from dprelease.dp.errors import ReleaseError
    from dprelease.flows.settings import EmbeddedServer

    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    monkeypatch.setenv("PREFECT_API_URL", "restored-after-the-test")  # the server sets it in this process
    monkeypatch.setattr(dprelease.flows.settings, "server_command",
                        lambda port: [sys.executable, "-c", "import sys; print('port taken'); sys.exit(3)"])
    server = EmbeddedServer()
    log = tmp_path / "prefect" / "embedded-server.log"
    with pytest.raises(ReleaseError, match=f"exited with code 3 \\(its output: {log}\\)$"):
        server.wait(timeout=60)
    assert log.read_text().strip() == "port taken"
