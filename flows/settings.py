"""Prefect settings for dprelease, applied before Prefect is imported.

The embedded default is Prefect's local ephemeral API on SQLite under a project-local
PREFECT_HOME (``.dprelease/prefect`` in the working directory). Telemetry is off; task results are
never cached or persisted by default. Settings the user already exported win.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import importlib.util
import os
import signal
import subprocess
import sys
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dprelease.dp.errors import ReleaseError

DEFAULTS = {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    # A fresh PREFECT_HOME needs its database migrated on first start; 20 s is too little here.
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
    # The default cache policy hashes every task input and may persist results: never for DP tasks.
    "PREFECT_TASKS_DEFAULT_NO_CACHE": "true",
    "PREFECT_RESULTS_PERSIST_BY_DEFAULT": "false",
    "PREFECT_SERVER_UI_ENABLED": "false",
    "PREFECT_LOGGING_LOG_PRINTS": "false",
    # A bounded thread pool for concurrent task submission.
    "PREFECT_TASKS_RUNNER_THREAD_POOL_MAX_WORKERS": "4",
}


def state_dir() -> Path:
    """The project-local state folder (Prefect home, default ledger, steward-only files): owner-only."""
    return Path(os.environ.get("DPRELEASE_HOME", ".dprelease")).resolve()


def _owner_only_folder(path: Path) -> None:
    """Create ``path`` (and parents) readable by the owner only, whatever the umask."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)


def configure() -> None:
    """Set Prefect's environment defaults (call before importing prefect).

    The state folder is owner-only: it holds the ledger, the steward-only files and Prefect's home.
    Prefect's local result storage (where a worker may pickle a failed run's exception even with
    persistence off) is pointed at a steward-only folder inside it.
    """
    state = state_dir()
    if not state.exists():
        _owner_only_folder(state)
    os.environ.setdefault("PREFECT_HOME", str(state / "prefect"))
    Path(os.environ["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_LOCAL_STORAGE_PATH", str(state / "prefect-storage"))
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)


_PR_SET_PDEATHSIG = 1


def die_with_parent_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to send SIGTERM to the child when its parent dies (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # the process's own symbols, libc's among them
    except (OSError, AttributeError):
        return None

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

    return hook


SERVER_ENV = {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
"""The environment Prefect gives its own temporary server: no UI, the services of an ephemeral server."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def server_command(port: int) -> list[str]:
    """Prefect's temporary API server on 127.0.0.1:``port``, started as Prefect starts it (uvicorn).

    The app is :func:`flows.server_app.create_app`; ``--app-dir`` is Prefect's site folder, not the cwd.
    """
    spec = importlib.util.find_spec("prefect")
    assert spec is not None and spec.origin is not None
    return [sys.executable, "-m", "uvicorn", "--app-dir", str(Path(spec.origin).parent.parent), "--factory",
            "dprelease.flows.server_app:create_app", "--host", "127.0.0.1", "--port", str(port),
            "--log-level", "error", "--lifespan", "on"]


class EmbeddedServer:
    """Prefect's temporary API server, spawned early and waited for later (the command's own, tied to it).

    Prefect would start the same server (uvicorn on ``prefect.server.api.server:create_app``; here
    through :func:`flows.server_app.create_app`, which builds it with the garbage collector paused) lazily,
    after importing its server package in this process too (about 2.7 s on 2 cores). Spawned here first,
    before anything imports Prefect, with ``PREFECT_API_URL`` pointing at it, the command checks its
    inputs and imports its stages while the server boots, and this process never imports the server
    package. The child gets ``PR_SET_PDEATHSIG`` (spawned from the main thread), so a ``kill -9`` of the
    command takes it along; a normal exit stops it.

    Its output goes to :attr:`log` in Prefect's home (the owner-only state folder), written anew each run,
    not to the terminal: stopped with the command, its services may log errors with tracebacks while they
    cancel their last writes (Prefect's event recorder, in about half of the quickest releases). A server
    that exits or does not answer is reported in one line that names that file.
    """

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/api"
        env = {**os.environ, **SERVER_ENV}
        env.pop("PREFECT_API_URL", None)
        home = Path(os.environ.get("PREFECT_HOME") or state_dir() / "prefect")
        home.mkdir(parents=True, exist_ok=True)
        self.log = home / "embedded-server.log"
        """The server's output (stdout and stderr) of this run."""
        with open(self.log, "wb") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(server_command(self.port), env=env, stdout=log, stderr=subprocess.STDOUT,
                                            preexec_fn=die_with_parent_hook())
        os.environ["PREFECT_API_URL"] = self.url
        self.ready = False
        """Whether the server has answered ``/api/health`` (:meth:`wait`)."""
        import atexit

        atexit.register(self.stop)

    def wait(self, timeout: float = 180.0) -> None:
        """Block until the server answers ``/api/health``.

        Raises:
            RuntimeError: If it exits or does not answer within ``timeout`` seconds.
        """
        import time
        import urllib.error
        import urllib.request

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ReleaseError(f"the embedded Prefect server exited with code {self.process.returncode} "
                                   f"(its output: {self.log})")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                    if response.status == 200:
                        self.ready = True
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise ReleaseError(f"the embedded Prefect server did not answer within {timeout:g} s (its output: {self.log})")

    def stop(self) -> None:
        """Stop the server: SIGTERM, then SIGKILL after 5 s; SIGKILL at once if it never answered.

        uvicorn holds a SIGTERM until its start-up is over (Prefect's import and, on a new home, every
        database migration: 5-15 s), so a server stopped while booting (the preflight refused the
        inputs) would keep the command waiting for the 5 s and burning CPU. It has served nothing
        then, and SQLite keeps its database consistent through a kill (each migration is one
        transaction: the next start resumes after the last one committed).
        """
        if self.process.poll() is None:
            if not self.ready:
                self.process.kill()
                self.process.wait()
                return
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def spawn_embedded_server() -> EmbeddedServer | None:
    """Spawn the command's temporary server now (call before Prefect is imported); None when an API URL is set."""
    if os.environ.get("PREFECT_API_URL"):
        return None
    return EmbeddedServer()


@contextmanager
def without_heartbeats(embedded: bool) -> Iterator[None]:
    """Flow runs in this block start no heartbeat thread when they run on the command's ``embedded`` server.

    On an API of the user's (``PREFECT_API_URL`` set: ``embedded`` false), Prefect's default stays.

    Prefect (``flows.heartbeat_frequency``, 180 s by default in Prefect 3.8) starts a thread with each flow
    run that emits a heartbeat event, so that an automation on a long-lived server can mark a run
    whose process died as crashed; at the run's end it joins that thread, which sleeps in steps of a
    second: about a second of waiting added to every run (1.2 s for a refused release, 0.2 s without).
    The command's embedded server stops with the command, and nothing watches it. The setting takes
    no "off" from the environment (an integer of at least 30), hence Prefect's settings context here;
    runs started by a Prefect worker keep Prefect's default.
    """
    if not embedded:
        yield
        return
    from prefect.settings import temporary_settings

    with temporary_settings(updates={"flows.heartbeat_frequency": None}):
        yield


def exit_now(code: int) -> None:
    """End the process now: run the exit handlers, flush, and skip tearing down the interpreter.

    The first steps of a normal exit run as CPython runs them (``Py_FinalizeEx``): the threading
    module's exit hooks and the join of every non-daemon thread (Prefect drains its queues of logs
    and events to the API there), then the ``atexit`` handlers (the embedded server is stopped,
    logging flushed). What is skipped is freeing every object and module one by one (Prefect, Great
    Expectations, pandas): about a second on 2 cores, several on a loaded machine, spent
    on nothing. Every file this command writes is closed by then (written through context
    managers), and the ledger commits each write.
    """
    import atexit
    import threading

    try:
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def without_sql() -> None:
    """Have Great Expectations find SQLAlchemy absent, as its ``compatibility`` layer allows (pandas only).

    Only for a process of its own that needs no SQL: ``check`` (importing SQLAlchemy is about a tenth
    of a check's time), and a ``release`` whose Prefect API is its own :class:`EmbeddedServer` (a
    separate process: this one is a client, and Prefect's client imports SQLAlchemy only to build a
    server's database URL, which :func:`client_needs_no_sql` rules out). Never in a process that
    runs Prefect's server in process (it needs SQLAlchemy).
    """
    if "sqlalchemy" not in sys.modules and "prefect" not in sys.modules:
        sys.modules["sqlalchemy"] = None  # type: ignore[assignment]  # an import of it raises ImportError


DEFERRED_MODULES = ("altair", "scipy.stats")
"""Modules Great Expectations imports at the top of an expectation module and uses only inside the
functions that render a chart (altair) or run a distribution test (``scipy.stats``): none of the
expectations dprelease builds calls them. Together about two fifths of the CPU time of importing Great
Expectations (4.4 s to 2.7 s on a loaded 2-core machine)."""


CHECK_DEFERRED_MODULES = ("jsonschema", "mistune", "asyncio")
"""Further modules Great Expectations imports (``import X``) and calls only off the path ``check`` takes:
``jsonschema`` (the JSON-schema expectation's metric), ``mistune`` (Data Docs' markdown) and ``asyncio``
(tqdm's asynchronous iterator). Deferred in ``check`` only: Prefect, in ``release``, uses them at once."""


class _Deferred(types.ModuleType):
    """A stand-in for a module in ``sys.modules`` that imports the real one at its first attribute use.

    ``import altair as alt`` binds the stand-in; ``alt.Chart`` (any attribute the stand-in lacks,
    ``__path__`` too, so importing a submodule loads it first) imports the real module in its place
    and answers from it. Code that never touches the module never pays for its import.
    """

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._dprelease_lock = threading.Lock()
        self._dprelease_real: types.ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:  # only for what the stand-in lacks (its own two fields it has)
        with self._dprelease_lock:
            if self._dprelease_real is None:
                if sys.modules.get(self.__name__) is self:
                    del sys.modules[self.__name__]
                self._dprelease_real = importlib.import_module(self.__name__)
        return getattr(self._dprelease_real, attr)


def defer_imports(names: Sequence[str] = DEFERRED_MODULES) -> None:
    """Put a :class:`_Deferred` stand-in in ``sys.modules`` for each module of ``names`` not yet imported.

    Only for a process of its own (``check``, ``release``): the modules still load, in full, the
    moment anything uses them. A module whose package is absent is left alone (its import fails as before).
    """
    for name in names:
        if name in sys.modules or importlib.util.find_spec(name.partition(".")[0]) is None:
            continue
        sys.modules[name] = _Deferred(name)


def client_needs_no_sql() -> bool:
    """True when no Prefect setting of this environment names a server database (the only client use of SQL)."""
    return not any(key.startswith(("PREFECT_API_DATABASE", "PREFECT_SERVER_DATABASE")) for key in os.environ)


def hold_gc() -> None:
    """Pause Python's cyclic garbage collector while the command imports its libraries.

    Importing Prefect, Great Expectations and pandas creates a few hundred thousand
    long-lived objects; every full collection on the way scans all of them again (about a second of
    a release's CPU on 2 cores). Imports make next to no cyclic garbage. :func:`settle_gc` resumes.
    """
    global _gc_held
    _gc_held = True
    gc.disable()


_gc_held = False


def settle_gc() -> None:
    """Resume the collector, with every object alive now (the imported modules) out of its scans.

    ``gc.freeze`` moves them to the permanent generation: later collections scan only what the
    command allocates from here on, and still collect all of its cyclic garbage. Does nothing
    unless :func:`hold_gc` paused it (a test calling the command in its own process keeps its GC as is).
    """
    global _gc_held
    if _gc_held:
        _gc_held = False
        gc.freeze()
        gc.enable()
