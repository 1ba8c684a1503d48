"""The deployments of prefect.yaml, for real: a local server, a process pool, a worker, runs.

The test starts ``prefect server start`` on 127.0.0.1 (a free port, a temporary PREFECT_HOME),
creates the process work pool, deploys every deployment of a copy of ``prefect.yaml`` whose shared
release parameters point into tmp_path (``prefect --no-prompt deploy --all --prefect-file``, run
from the project folder), starts a worker with ``PROJECT_DIR`` set (the pull step's working
directory), triggers the manual release and the data-quality deployment, then adds a short
interval schedule to the monthly deployment and waits for a scheduled run to publish a release
under a fresh release id. Worker (SIGINT) and server are always stopped.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from tests.prefect_db import seed_home

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".venv" / "bin"
DATASET = "us-cps-1994-adult"
FRESH_ID = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{6}$")  # flows.release.new_release_id
DEADLINE = 600.0  # seconds for all runs of the module together: a liveness bound (the suite runs two files at once)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _default_sigint() -> None:
    # A child of a backgrounded shell may inherit SIGINT as ignored; the worker must see it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                preexec_fn=_default_sigint, start_new_session=True)


def _stop(proc: subprocess.Popen, sig: int, timeout: float) -> int | None:
    """Signal ``proc``; after ``timeout`` seconds kill its whole process group."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
            return None
    return proc.returncode


def _tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


class Api:
    """Plain HTTP calls to the server's REST API (the test's own Prefect settings stay untouched)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, body: dict | None = None) -> object:
        """One call; a 503 (SQLite busy: the scheduler, the worker and a run write to the same file) is
        retried after a short wait, up to 5 times, as Prefect's own client retries it."""
        data = None if body is None else json.dumps(body).encode()
        for attempt in range(6):
            request = urllib.request.Request(f"{self.url}{path}", data=data, method=method,
                                             headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=20) as response:
                    return json.loads(response.read() or b"null")
            except urllib.error.HTTPError as err:
                if err.code != 503 or attempt == 5:
                    raise
            time.sleep(0.5 * 2**attempt)
        raise AssertionError("unreachable")

    def healthy(self) -> bool:
        try:
            return self.call("GET", "/health") is True
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
            return False

    def deployment(self, flow: str, name: str) -> dict:
        return self.call("GET", f"/deployments/name/{flow}/{name}")

    def flow_runs(self, deployment_id: str) -> list[dict]:
        body = {"deployments": {"id": {"any_": [deployment_id]}}, "sort": "EXPECTED_START_TIME_ASC", "limit": 200}
        return self.call("POST", "/flow_runs/filter", body)

    def flow_run(self, run_id: str) -> dict:
        return self.call("GET", f"/flow_runs/{run_id}")


def _wait_for(what: str, probe, deadline: float, logs: list[Path]):
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.5)  # plain reads of the API: cheap enough to poll often
    pytest.fail(f"timed out waiting for {what}\n" + "\n".join(f"--- {p.name}\n{_tail(p)}" for p in logs))


def _prefect(args: list[str], env: dict[str, str], timeout: float = 120) -> str:
    proc = subprocess.run([str(BIN / "prefect"), "--no-prompt", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, f"prefect {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[SimpleNamespace]:
    """A Prefect server and a worker on this machine, with the project's deployments deployed."""
    tmp = tmp_path_factory.mktemp("deployments")
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api"
    base = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}  # conftest's harness settings
    base.update(PREFECT_HOME=str(tmp / "prefect-home"), DO_NOT_TRACK="1", PREFECT_SERVER_ANALYTICS_ENABLED="false",
                PREFECT_SERVER_UI_ENABLED="false", PYTHONUNBUFFERED="1")
    seed_home(tmp / "prefect-home")  # Prefect's migrations already run (tests/prefect_db.py)
    # The scheduler service looks for new scheduled runs every 5 s instead of 60 s.
    server_env = {**base, "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "5"}
    client_env = {**base, "PREFECT_API_URL": url}
    worker_env = {**client_env, "PROJECT_DIR": str(ROOT), "PREFECT_WORKER_QUERY_SECONDS": "2"}

    # The project's prefect.yaml with the shared release parameters pointing into tmp.
    doc = yaml.safe_load((ROOT / "prefect.yaml").read_text(encoding="utf-8"))
    shared = doc["definitions"]["parameters"]["adult"]
    releases = [d for d in doc["deployments"] if d["entrypoint"] == "flows/release.py:release"]
    assert releases and all(d["parameters"] is shared for d in releases)  # a YAML alias of the definitions
    shared.update(out=str(tmp / "out"), ledger=str(tmp / "ledger.sqlite"))
    prefect_file = tmp / "prefect.yaml"
    prefect_file.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    pool = doc["definitions"]["work_pools"]["local"]["name"]

    server_log, worker_log = tmp / "server.log", tmp / "worker.log"
    server = _start([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                    server_env, server_log)
    worker = None
    try:
        api = Api(url)
        _wait_for("the server's /api/health", api.healthy, time.monotonic() + 120, [server_log])
        created = _prefect(["work-pool", "create", pool, "--type", "process"], client_env)
        assert f"Created work pool {pool!r}" in created
        deployed = _prefect(["deploy", "--all", "--prefect-file", str(prefect_file)], client_env, timeout=180)
        assert deployed.count("successfully created") == len(doc["deployments"]), deployed
        worker = _start([str(BIN / "prefect"), "worker", "start", "--pool", pool], worker_env, worker_log)
        yield SimpleNamespace(api=api, env=client_env, tmp=tmp, doc=doc, logs=[worker_log, server_log],
                              deadline=time.monotonic() + DEADLINE)
    finally:
        try:
            if worker is not None:
                code = _stop(worker, signal.SIGINT, 30)
                assert code is not None, "the worker did not stop within 30 s of SIGINT\n" + _tail(worker_log)
        finally:
            _stop(server, signal.SIGINT, 30)


def _run(stack, deployment: str, *params: str) -> str:
    out = _prefect(["deployment", "run", deployment, *[f"--param={p}" for p in params]], stack.env)
    match = re.search(r"UUID: ([0-9a-f-]{36})", out)
    assert match, out
    return match.group(1)


def _finished(stack, run_id: str) -> dict:
    def probe():
        run = stack.api.flow_run(run_id)
        return run if run["state_type"] in {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"} else None

    return _wait_for(f"flow run {run_id}", probe, stack.deadline, stack.logs)


def _verify(folder: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["DPRELEASE_HOME"] = str(folder.parents[2] / "verify-state")
    proc = subprocess.run([str(BIN / "dprelease"), "verify", str(folder)], cwd=folder, capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("OK: every public file")


def test_deployments_are_registered_as_declared(stack):
    monthly = stack.api.deployment("release", "adult-monthly")
    manual = stack.api.deployment("release", "adult-manual")
    quality = stack.api.deployment("check-quality", "adult-data-quality")
    pool = stack.doc["definitions"]["work_pools"]["local"]["name"]
    for deployment in (monthly, manual, quality):
        assert deployment["work_pool_name"] == pool
        assert deployment["enforce_parameter_schema"] is True
        env = deployment["job_variables"]["env"]  # the DP-safe defaults reach worker-started runs
        assert env["PREFECT_TASKS_DEFAULT_NO_CACHE"] == "true" and env["PREFECT_RESULTS_PERSIST_BY_DEFAULT"] == "false"
        assert env["PREFECT_LOCAL_STORAGE_PATH"] == ".dprelease/prefect-storage"  # steward-only, not ~/.prefect
        # Machine-independent: the working directory comes from the worker's environment at run time.
        assert deployment["pull_steps"] == [
            {"prefect.deployments.steps.set_working_directory": {"directory": "{{ $PROJECT_DIR }}"}}]
    assert [s["schedule"].get("cron") for s in monthly["schedules"]] == ["0 6 1 * *"]
    assert manual["schedules"] == [] and quality["schedules"] == []
    assert monthly["parameters"]["spec"] == manual["parameters"]["spec"] == "examples/adult/release.yaml"
    assert manual["parameters"]["out"] == str(stack.tmp / "out")


def test_manual_release_and_data_quality_runs_complete(stack):
    release_run = _run(stack, "release/adult-manual", "release_id=e2e-manual")
    quality_run = _run(stack, "check-quality/adult-data-quality")
    for run_id in (release_run, quality_run):
        run = _finished(stack, run_id)
        assert run["state_type"] == "COMPLETED", (run["state"], *map(_tail, stack.logs))
    folder = stack.tmp / "out" / DATASET / "e2e-manual"
    assert (folder / "audit.json").is_file() and (folder / "manifest.json").is_file()
    _verify(folder)


def test_an_interval_schedule_publishes_a_release_with_a_fresh_id(stack):
    started = datetime.now(UTC)
    # The documented way to watch a scheduled run without waiting a month: a second, short schedule. Its
    # anchor 10 s back puts the first run 10 s from now instead of a whole interval (the scheduler looks
    # for new schedules every 5 s).
    anchor = (started - timedelta(seconds=10)).isoformat()
    out = _prefect(["deployment", "schedule", "create", "release/adult-monthly", "--interval", "20",
                    "--anchor-date", anchor], stack.env)
    assert "Created deployment schedule" in out
    monthly = stack.api.deployment("release", "adult-monthly")
    (short,) = [s["id"] for s in monthly["schedules"] if s["schedule"].get("interval") == 20]
    paused = []

    def scheduled_run():
        for run in stack.api.flow_runs(monthly["id"]):
            expected = datetime.fromisoformat(run["expected_start_time"].replace("Z", "+00:00"))
            if not run["auto_scheduled"] or expected < started or run["state_type"] == "SCHEDULED":
                continue
            if not paused:  # one run is enough: the schedule's next runs are deleted, not started and killed
                stack.api.call("PATCH", f"/deployments/{monthly['id']}/schedules/{short}", {"active": False})
                paused.append(short)
            if run["state_type"] in {"COMPLETED", "FAILED", "CRASHED"}:
                return run
        return None

    run = _wait_for("a scheduled run of release/adult-monthly", scheduled_run, stack.deadline, stack.logs)
    assert run["state_type"] == "COMPLETED", (run["state"], *map(_tail, stack.logs))
    assert run["parameters"].get("release_id") is None  # the flow makes a fresh id for each scheduled run
    published = [p for p in (stack.tmp / "out" / DATASET).iterdir() if FRESH_ID.match(p.name)]
    assert published, sorted(p.name for p in (stack.tmp / "out" / DATASET).iterdir())
    assert f"Flow run '{run['name']}'" in (stack.tmp / "worker.log").read_text()  # our worker ran it
    for folder in published:
        _verify(folder)
