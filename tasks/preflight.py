"""Preflight: every mistake that can be caught without reading a row, caught before the ledger reserves.

A release that would fail on a missing or unreadable data file, a file of another structure, an
output folder it cannot write or a Dask scheduler that does not answer is refused here, in seconds,
with one line naming the file or setting and the rule, and costs no budget. The checks read file
metadata (a Parquet footer: column names and types) and never a row.

No Prefect here: the command line runs it before it starts Prefect's API, and the release flow runs
it again as its first step (a deployment's run has no command line in front of it).
"""

from __future__ import annotations

import logging
import os
import socket
import stat
from fractions import Fraction
from pathlib import Path
from urllib.parse import urlsplit

from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import BudgetExceededError, LedgerError
from dprelease.schemas.identifiers import check_identifier, within
from dprelease.schemas.model import ReleaseSpec
from dprelease.schemas.plan import plan_release
from dprelease.schemas.spec import load_spec
from dprelease.tasks.tables import HIDDEN_PREFIXES, InputError, check_structure, check_writable, parquet_files

DASK_TIMEOUT_SECONDS = 5.0
"""How long the Dask scheduler has to accept a connection before the release is refused."""

_PARQUET_MAGIC = b"PAR1"


def check_data_files(spec: ReleaseSpec) -> None:
    """The data path holds regular, readable Parquet files with the schema's columns and types.

    A FIFO, a device or a socket would block or stream forever, so only regular files are opened.

    Raises:
        InputError: Naming the file (or folder) and the rule; never a value.
    """
    data = spec.data
    where = f"data {data.name}"
    try:
        info = data.stat()
    except FileNotFoundError:
        raise InputError(f"{where}: no such file or folder") from None
    except OSError as err:
        raise InputError(f"{where}: cannot be read ({type(err).__name__})") from None
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        raise InputError(f"{where}: must be a regular Parquet file or a folder of them (not a pipe or device)")
    files = parquet_files(data)
    if data.is_dir() and (skipped := sum(1 for p in data.glob("*.parquet") if p.name.startswith(HIDDEN_PREFIXES))):
        logging.getLogger("dprelease").warning("%s: %d file(s) named *.parquet beginning with . or _ are not part "
                                               "of the dataset (hidden files and a writer's own are skipped)",
                                               where, skipped)
    for file in files:
        try:
            mode = file.stat().st_mode
        except OSError as err:
            raise InputError(f"{where}: {file.name} cannot be read ({type(err).__name__})") from None
        if not stat.S_ISREG(mode):
            raise InputError(f"{where}: {file.name} must be a regular file (not a pipe or device)")
        if not os.access(file, os.R_OK):
            raise InputError(f"{where}: {file.name} is not readable by this user")
        with file.open("rb") as handle:
            head = handle.read(4)
            size = handle.seek(0, os.SEEK_END)
            if size >= 12:
                handle.seek(-4, os.SEEK_END)
            tail = handle.read(4) if size >= 12 else b""
        if head != _PARQUET_MAGIC or tail != _PARQUET_MAGIC:
            raise InputError(f"{where}: {file.name}: not a readable Parquet file (no PAR1 magic at both ends)")
    problems = check_structure(data, spec.schema)
    if problems:
        raise InputError(f"{where} does not match {Path(spec.schema.source).name}: " + "; ".join(problems))


def check_ledger_path(ledger: Path) -> None:
    """The ledger's folder is one this user can write (what the file holds, :meth:`Ledger.open` checks).

    Raises:
        InputError: Naming the ledger folder and the rule.
    """
    check_writable(ledger.parent, "ledger folder")


def check_dask(address: str, timeout: float = DASK_TIMEOUT_SECONDS) -> None:
    """The Dask scheduler at ``address`` accepts a TCP connection within ``timeout`` seconds.

    Raises:
        InputError: If the address is malformed or nothing answers in time.
    """
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.scheme not in ("tcp", "tls") or not parts.hostname or parts.port is None:
        raise InputError(f"dask address {address[:80]!r}: must be tcp://HOST:PORT (or tls://HOST:PORT)")
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=timeout):
            pass
    except OSError as err:
        raise InputError(
            f"dask address {address[:80]}: no scheduler answered within {timeout:g} s ({type(err).__name__})"
        ) from None


def check_budget(spec: ReleaseSpec, ledger_path: Path, release_id: str | None) -> None:
    """A new release fits what its dataset has left in the ledger (read only; the reservation re-checks).

    A release id already in the ledger is left to the ledger's resume rules.

    Raises:
        BudgetExceededError: If the release's budget exceeds the per-release cap or what remains.
        ParameterError: If the ledger path is a folder or device, or a file that is not a ledger (:meth:`Ledger.open`).
    """
    if not ledger_path.exists():
        return
    requested = plan_release(spec, "preflight", spec.seed or 0).total.amount
    with Ledger.open(ledger_path) as ledger:
        ledger.reclaim_stale(spec.dataset)  # reservations of processes that are gone free their undrawn rest
        if release_id is not None and ledger.release_plan(release_id) is not None:
            return
        try:
            status = ledger.status(spec.dataset)
        except LedgerError:
            return  # a dataset's first release: registered at reservation
    # With delta spent by ptr/smooth medians the usable cap shrinks (unless the ledger has yet to learn the declared
    # epsilon, which the reservation registers and re-checks).
    delta = spec.mechanism_delta if status.epsilon is not None else Fraction(0)
    limits = [("one release may take at most", status.release_cap),
              ("the lifetime budget has left", status.remaining_with(delta))]
    for rule, limit in limits:
        if limit is not None and requested > limit:
            raise BudgetExceededError(
                f"dataset {spec.dataset!r}: this release needs {status.unit}={float(requested):.6g} but {rule} "
                f"{status.unit}={float(limit):.6g} (lifetime {float(status.cap):.6g}, spent {float(status.spent):.6g}, "
                f"reserved by open releases {float(status.reserved):.6g})",
                dataset=spec.dataset, remaining=limit, requested=requested, unit=status.unit)


PLAUSIBLE_EPSILON = 10
"""Above this epsilon (release or lifetime) preflight logs a warning: such a release protects little."""
PLAUSIBLE_DELTA = Fraction(1, 100_000)
"""From this delta on preflight logs a warning: delta should be far below 1/rows."""


def warn_implausible(spec: ReleaseSpec) -> list[str]:
    """Log (and return) one warning line for each implausible but allowed budget of the spec."""
    lines = []
    for what, epsilon in (("budget", spec.epsilon), ("lifetime_budget", spec.lifetime_epsilon)):
        if epsilon > PLAUSIBLE_EPSILON:
            lines.append(f"{spec.source}: {what}: epsilon {float(epsilon):g} is above {PLAUSIBLE_EPSILON}: "
                         "such a release protects little")
    if spec.delta >= PLAUSIBLE_DELTA:
        lines.append(f"{spec.source}: budget: delta {float(spec.delta):g} is not far below 1/rows "
                     f"(use at most {float(PLAUSIBLE_DELTA):g}, typically 1e-9)")
    for line in lines:
        logging.getLogger("dprelease").warning("%s", line)
    return lines


def steward_root(spec: ReleaseSpec, internal: str | None) -> Path:
    """The steward-only root of a release.

    ``--internal`` (or the flow's ``internal``), else the spec's ``internal:``, else ``internal/`` in
    the state folder (``$DPRELEASE_HOME``, default ``.dprelease``).
    """
    if internal:
        return Path(internal).resolve()
    if spec.internal is not None:
        return spec.internal
    return Path(os.environ.get("DPRELEASE_HOME", ".dprelease")).resolve() / "internal"


def check_steward_root(root: Path, out: Path) -> None:
    """The steward-only root is writable and lies outside the public output folder (and vice versa).

    Raises:
        InputError: If it is inside ``out`` (copying the public tree would publish it) or contains it.
    """
    root, out = root.resolve(), out.resolve()
    if within(root, out) or within(out, root):
        raise InputError(f"steward folder {root}: must lie outside the output folder {out} (and not contain it): "
                         "copying or syncing the public tree must never take steward-only files along")
    check_writable(root, "steward folder")


def check_apart_from_output(spec: ReleaseSpec, out: Path, ledger: Path) -> None:
    """The data and the ledger lie outside the public output folder, and the output folder outside the data.

    A public tree that holds the data (or the ledger) would take it along wherever it is copied or synced;
    an output folder inside a data folder puts the published files among the rows the next release reads.

    Raises:
        InputError: Naming the path and the rule.
    """
    out, data = out.resolve(), spec.data.resolve()
    if within(data, out):
        raise InputError(f"data {spec.data.name}: must lie outside the output folder {out}: copying or syncing "
                         "the public tree must never take the rows along")
    if within(out, data):
        raise InputError(f"output folder {out}: must lie outside the data folder {data}: the published files would "
                         "sit among the rows a later release reads")
    if within(ledger, out):
        raise InputError(f"ledger {ledger.name}: must lie outside the output folder {out}: copying or syncing the "
                         "public tree must never take the steward's ledger along")


def preflight(
    spec_path: str, out: str, ledger: str, dask: str | None = None, release_id: str | None = None,
    internal: str | None = None,
) -> ReleaseSpec:
    """Every check that needs no row, in the order a user would fix them; returns the loaded spec.

    Args:
        spec_path: The release spec.
        out: The public output folder.
        ledger: The ledger's path.
        dask: A Dask scheduler address given on the command line (else the spec's, if any).
        release_id: The release's id, when given (a re-run of an id in the ledger is not budget-checked here).
        internal: The steward-only root given on the command line (else the spec's, else the default).

    Raises:
        SchemaError: If the spec or schema breaks a rule.
        BudgetExceededError: If a new release would not fit the dataset's budget.
        InputError: If a file, folder or the Dask scheduler cannot be used.
    """
    if release_id is not None:
        check_identifier("release id", release_id)
    spec = load_spec(spec_path)
    warn_implausible(spec)
    plan_release(spec, "preflight", spec.seed or 0)  # the plan's own rules (cell limits), still without data
    check_ledger_path(Path(ledger))
    check_budget(spec, Path(ledger), release_id)  # opening the ledger refuses a file that is not one
    check_data_files(spec)
    check_writable(Path(out), "output folder")
    check_apart_from_output(spec, Path(out), Path(ledger))
    check_steward_root(steward_root(spec, internal), Path(out))
    address = dask or spec.dask_address
    if address:
        check_dask(address)
    return spec
