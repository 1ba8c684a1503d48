"""Each test process's Prefect server for the whole session, started before the process needs it.

Prefect's ``prefect_test_harness`` starts its server when the first test asks for it, after importing
Prefect's server package in the test process (``prefect.testing.utilities`` imports it to start one:
about 3 CPU-s on 2 cores, of no use to a process that is only the server's client). Here each
pytest-xdist process starts its server as its session starts, on a copy of the migrated database
(``tests/prefect_db.py``), so that it boots while the process collects the suite (about 14 s), in a
process of its own that imports the server package; the test process points Prefect's client at it
as the harness would (:func:`connect`). A real API on 127.0.0.1 and SQLite, as before.

One server per process, not one for the session: two processes' flow runs on one server wait for
each other (one event loop, one SQLite file: a refused one-row release took 16 s instead of 1 s
beside the other process's releases, the two processes then using about one core between them).
"""

from __future__ import annotations

import inspect
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from dprelease.flows.settings import SERVER_ENV, die_with_parent_hook, free_port, server_command

URL = "DPRELEASE_TEST_PREFECT_API"
"""The environment variable that carries this process's server's API address to its ``prefect_harness``."""
FOLDER = "DPRELEASE_TEST_PREFECT_FOLDER"
"""The environment variable naming the server's folder (its home, log, and a ``failed`` note)."""


class SessionServer:
    """Starts the server in a thread of this process (the migrated database may still be in the making).

    The thread spawns the server and then waits on it: the child's ``PR_SET_PDEATHSIG`` fires when
    the thread that spawned it ends, so the thread lives as long as the server does, and a ``kill -9``
    of pytest takes the server along.
    """

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="dprelease-test-server-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/api"
        os.environ[URL] = self.url  # for this process's fixture (and inherited, unused, by its subprocesses)
        os.environ[FOLDER] = str(self.folder)
        self.process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, name="prefect-test-server", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        from tests.prefect_db import seed_home

        try:
            home = self.folder / "home"
            seed_home(home)  # waits for the migrated database (made in the background: tests/prefect_db.py)
            env = {k: v for k, v in os.environ.items() if k not in {URL, FOLDER, "PREFECT_API_URL"}}
            env.update(SERVER_ENV, PREFECT_HOME=str(home))
            with self._lock:
                if self._stopping:  # the session ended before the migrated database was ready
                    shutil.rmtree(self.folder, ignore_errors=True)  # seed_home may have made it again
                    return
                with open(self.folder / "server.log", "wb") as log:  # the command's embedded server's command
                    self.process = subprocess.Popen(server_command(self.port), env=env, stdout=log,
                                                    stderr=subprocess.STDOUT, preexec_fn=die_with_parent_hook())
        except BaseException as err:  # a test process waiting for the server reads why, at once
            if self._stopping:
                shutil.rmtree(self.folder, ignore_errors=True)
                return
            (self.folder / "failed").write_text(f"{type(err).__name__}: {err}", encoding="utf-8")
            raise
        self.process.wait()

    def stop(self) -> None:
        """SIGINT (uvicorn's clean stop), SIGKILL after 10 s; SIGKILL at once if it never answered (still
        booting: it has served nothing, and its database is a copy removed with the folder); remove the folder.

        A session that ends while the migrated database is still being made (a few quick tests on a
        new machine) does not wait for it: the server is then never started.
        """
        with self._lock:
            self._stopping = True
            process = self.process
        if process is not None and process.poll() is None:
            if _answers(self.url):
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
            else:
                process.kill()
            process.wait()
            self._thread.join(10)
        shutil.rmtree(self.folder, ignore_errors=True)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def wait_until_healthy(url: str, folder: Path, timeout: float = 180.0) -> None:
    """Block until ``url``'s ``/health`` answers; fail at once, with the reason, if the start failed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (folder / "failed").exists():
            raise RuntimeError("this process's Prefect server did not start: " + (folder / "failed").read_text())
        if _answers(url):
            return
        time.sleep(0.1)
    log = folder / "server.log"
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
    raise RuntimeError(f"this process's Prefect server did not answer within {timeout:g} s:\n{tail}")


@contextmanager
def connect() -> Iterator[None]:
    """Point this process's Prefect client at its server, as ``prefect_test_harness`` does, and
    run flows without heartbeats, as the command does on its embedded server.

    The address goes into Prefect's settings (not the environment: a command a test runs without an
    API address starts its own embedded server, and that is tested), both the current and the
    process-global settings context (code in a context copied earlier sees it too). At the end, the
    log and event workers are drained, so nothing is left queued for a server that is about to stop.
    """
    url, folder = os.environ.get(URL), os.environ.get(FOLDER)
    if not url or not folder:
        raise RuntimeError(f"{URL} is not set: tests/conftest.py starts this process's Prefect server")
    wait_until_healthy(url, Path(folder))

    import prefect.context
    import prefect.settings
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.utilities.asyncutils import run_coro_as_sync

    with ExitStack() as stack:
        # No heartbeat threads, as the command on its embedded server (flows.settings.without_heartbeats):
        # nothing watches this process's server for crashed runs, and each run's end would wait a second.
        stack.enter_context(prefect.settings.temporary_settings(
            updates={prefect.settings.PREFECT_API_URL: url, "flows.heartbeat_frequency": None}))
        stack.enter_context(prefect.context._temporary_global_settings_context(prefect.context.get_settings_context()))
        yield

        async def drain() -> None:  # as the harness: awaited on one loop whatever the caller's context
            try:
                result = APILogWorker.instance().drain()
                if inspect.isawaitable(result):
                    await result
            except RuntimeError:  # not started: this process logged nothing to the API
                pass
            result = EventsWorker.drain_all()
            if inspect.isawaitable(result):
                await result

        run_coro_as_sync(drain())
