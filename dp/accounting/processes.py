"""Processes around the ledger: a file lock, the liveness of a lease's holder, fault points.

One run per release id at a time (:func:`release_lock`); whether the process holding a lease is still alive;
the fault points of the crash tests (``DPRELEASE_FAULT``).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from dprelease.dp.errors import LedgerError

FAULT_ENV = "DPRELEASE_FAULT"
"""Fault injection for the crash tests: ``DPRELEASE_FAULT=<point>`` kills the process (SIGKILL) at that point.

Points: ``after_reserve``, ``charge_before_seal`` (between a charge and its seal; ``charge_before_seal:N``
for the N-th charge of the process), ``after_stage:<task name>``, ``after_publish_rename``.
"""

_FAULT_COUNTS: dict[str, int] = {}


def fault_point(name: str) -> None:
    """Kill this process with SIGKILL when ``$DPRELEASE_FAULT`` names this point (crash tests only)."""
    wanted = os.environ.get(FAULT_ENV)
    if not wanted:
        return
    point, _, nth = wanted.partition(":") if wanted.startswith("charge_before_seal") else (wanted, "", "")
    if point != name:
        return
    _FAULT_COUNTS[name] = _FAULT_COUNTS.get(name, 0) + 1
    if not nth or _FAULT_COUNTS[name] == int(nth):
        os.kill(os.getpid(), signal.SIGKILL)


def _process_start(pid: int) -> str:
    """An id of the process ``pid``'s start (its start time in clock ticks on Linux), or "" if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def _alive(pid: int, started: str) -> bool:
    """Whether the process that took a lease still runs (same pid, same start)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    current = _process_start(pid)
    return not (started and current and current != started)


@contextmanager
def release_lock(ledger: Path | str, release_id: str) -> Iterator[None]:
    """Hold the lock of one release id on one ledger: one run per release id at a time.

    An exclusive ``flock`` on ``<ledger>.lock-<release id>`` beside the ledger, released when the run ends
    (or its process dies, which the kernel handles). The file is removed when the run ends, while the lock
    is still held, so that a ledger's folder does not collect one file per release ever run. A process
    that opened the file before that removal and locks it afterwards holds a lock on a file no longer
    there: it checks that the path still names the file it locked, and else starts again on the new one.

    Raises:
        LedgerError: If another process runs this release id right now.
    """
    import fcntl

    file = Path(ledger)
    file.parent.mkdir(parents=True, exist_ok=True)
    target = file.with_name(f"{file.name}.lock-{release_id}")
    while True:
        fd = os.open(target, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LedgerError(f"release {release_id!r} is being run by another process right now; "
                              "wait for it to finish (one run per release id at a time)") from None
        if _names(target, fd):
            break
        os.close(fd)  # the holder before us removed it as it finished: lock the file now at the path
    try:
        yield
    finally:
        with suppress(FileNotFoundError):
            os.unlink(target)
        os.close(fd)


def _names(path: Path, fd: int) -> bool:
    """Whether ``path`` is, right now, the file open as ``fd``."""
    try:
        here = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino)
