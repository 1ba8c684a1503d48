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
    proc = subprocess.Popen([sys.executable, "-m", "dprelease", "release", str(tmp_path / "release.yaml"), "--out",
                             str(tmp_path / "out")], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline, servers = time.monotonic() + 180, []
        while time.monotonic() < deadline and not servers:
            servers = [c for c in _children(proc.pid) if b"uvicorn" in Path(f"/proc/{c}/cmdline").read_bytes()]
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
