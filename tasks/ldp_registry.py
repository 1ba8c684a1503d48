"""The registry of local-DP collections (their fixed parameters) and the checks made before a collection run starts.

A collection is registered when a run first accepts one of its batches: a spec whose mistake leaves no batch
accepted (a misspelt folder, reports of other parameters) registers nothing, so it can still be corrected.
Everything that needs no report (the batch folder, the output folder, the registry file, the run id) is
checked before Prefect starts, with one line and exit 2.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from dprelease.dp.accounting.databases import connect_own
from dprelease.dp.errors import ParameterError
from dprelease.schemas.identifiers import inside, within
from dprelease.schemas.ldp import MAX_OLH_CELLS, Collection, CollectionError, load_collection
from dprelease.tasks.staging import MANIFEST, verify_release

_TABLE = ("CREATE TABLE IF NOT EXISTS collections (name TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, "
          "parameters TEXT NOT NULL, created_at REAL NOT NULL)")
_BATCHES = ("CREATE TABLE IF NOT EXISTS batches (collection TEXT NOT NULL, name TEXT NOT NULL, sha256 TEXT NOT NULL, "
            "accepted_at REAL NOT NULL, PRIMARY KEY (collection, name))")
"""The batches a run of each collection accepted, in the order first accepted: later runs check them first."""


@contextmanager
def _open(registry: Path) -> Iterator[sqlite3.Connection]:
    """The registry's connection; a folder, a file that is not SQLite or another application's database is refused."""
    if registry.parent.exists() and not registry.parent.is_dir():
        raise CollectionError(f"registry {registry}: {registry.parent} is not a folder")
    try:
        db = connect_own(registry, "registry", "collections", "give the registry's own file, or a new path")
    except ParameterError as err:
        raise CollectionError(str(err)) from None
    try:
        yield db
    finally:
        db.close()


def _refuse_changed(collection: Collection, fingerprint: str | None) -> None:
    if fingerprint is not None and fingerprint != collection.fingerprint():
        raise CollectionError(f"collection {collection.name!r}: its parameters are fixed since it was created "
                              f"(fingerprint {fingerprint}); this spec has {collection.fingerprint()}: create a new "
                              "collection instead")


def check_registered(registry: Path, collection: Collection) -> None:
    """Refuse a spec whose collection is registered with other parameters; writes nothing (a new file stays absent).

    Raises:
        CollectionError: If the parameters changed, or ``registry`` is not a registry.
    """
    if not registry.exists():
        if registry.parent.exists() and not registry.parent.is_dir():
            raise CollectionError(f"registry {registry}: {registry.parent} is not a folder")
        return
    if not registry.is_file():
        raise CollectionError(f"registry {registry}: must be a file (an SQLite database), not a folder or device")
    with _open(registry) as db:
        if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'collections'").fetchone() is None:
            return
        row = db.execute("SELECT fingerprint FROM collections WHERE name = ?", (collection.name,)).fetchone()
    _refuse_changed(collection, None if row is None else str(row[0]))


def register(registry: Path, collection: Collection, accepted: Sequence[tuple[str, str]] = ()) -> bool:
    """Record the collection's parameters on its first accepted run, and the batches (name, SHA-256) it accepted.

    A batch is recorded once, when a run first accepts it: :func:`accepted_before` gives later runs that order.

    Returns:
        True when the collection was new.

    Raises:
        CollectionError: If the collection exists with other parameters (they are fixed at creation); nothing is
            recorded then.
    """
    with _open(registry) as db:
        db.execute(_TABLE)
        db.execute(_BATCHES)
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute("SELECT fingerprint FROM collections WHERE name = ?", (collection.name,)).fetchone()
            _refuse_changed(collection, None if row is None else str(row[0]))
            now = time.time()
            if row is None:
                db.execute("INSERT INTO collections VALUES (?, ?, ?, ?)", (
                    collection.name, collection.fingerprint(), json.dumps(collection.parameters(), sort_keys=True),
                    now))
            db.executemany("INSERT OR IGNORE INTO batches VALUES (?, ?, ?, ?)",
                           [(collection.name, name, digest, now) for name, digest in accepted])
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
    return row is None


def accepted_before(registry: Path, collection: Collection) -> list[str]:
    """The batches earlier runs of the collection accepted, in the order first accepted (reads; creates nothing).

    The batch check takes these first, then new batches in order of arrival: a batch that repeats report ids of
    one already accepted is the one refused, whatever the file names (a retried upload named ``0-retry.parquet``
    no longer took the place of the day it repeated).
    """
    if not registry.is_file():
        return []
    with _open(registry) as db:
        if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'batches'").fetchone() is None:
            return []
        rows = db.execute("SELECT name FROM batches WHERE collection = ? ORDER BY accepted_at, rowid",
                          (collection.name,)).fetchall()
    return [str(row[0]) for row in rows]


def _reports_declared(batches: Path) -> int:
    """The reports the batches' Parquet footers declare (an unreadable file declares none: it is refused later)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    total = 0
    for path in batches.glob("*.parquet"):
        if path.is_file():
            try:
                total += pq.read_metadata(path).num_rows
            except (pa.ArrowInvalid, OSError):
                continue
    return total


def preflight(spec: Path | str, out: Path, registry: Path, run_id: str | None) -> Collection:
    """The collection of ``spec``, and what a run can check without a report, before anything starts or is registered.

    Raises:
        CollectionError: Naming the setting and the rule: a bad spec, no batch folder or no ``*.parquet`` in it, an
            output folder that is a file, a registry that is not one, changed parameters, an OLH collection whose
            batches hold more reports × values than :data:`schemas.ldp.MAX_OLH_CELLS` (a run id already published
            is :func:`published_run`'s).
    """
    collection = load_collection(spec)
    batches = collection.batches
    if not batches.is_dir():
        what = "is not a folder" if batches.exists() else "does not exist"
        raise CollectionError(f"{collection.source}: batches: {batches} {what}; name the folder of report batches")
    if not any(batches.glob("*.parquet")):
        raise CollectionError(f"{collection.source}: batches: {batches} holds no *.parquet batch")
    if collection.protocol == "OLH" and (reports := _reports_declared(batches)) * collection.k > MAX_OLH_CELLS:
        raise CollectionError(f"{collection.source}: values: OLH hashes every report with every value, and "
                              f"{reports} reports in {batches} x {collection.k} values is above the limit of "
                              f"{MAX_OLH_CELLS:,} per run (about 5 minutes); decode fewer batches per run (move "
                              "decoded ones out of the folder), or collect a long value list with RAPPOR")
    if out.exists() and not out.is_dir():
        raise CollectionError(f"--out {out}: is not a folder")
    if within(batches, out) or within(out, batches):
        raise CollectionError(f"--out {out}: must lie apart from the batch folder {batches.resolve()} (neither "
                              "inside the other): the public tree must never take the reports along")
    check_registered(registry, collection)
    return collection


def published_run(out: Path, collection: Collection, run_id: str) -> Path | None:
    """The run id's published folder when it is there and verifies; None when nothing is at its path.

    As a central release's re-run of a published id, a re-run of a published run id runs nothing: the folder
    must hold exactly the files its ``manifest.json`` lists, with their sizes and SHA-256, the manifest must
    match its own seal, and the collection's fingerprint must be the spec's.

    Raises:
        CollectionError: If something is at the run id's path and does not verify (nothing is run or written).
    """
    target = inside(out, collection.name, run_id)
    if not (target.exists() or target.is_symlink()):
        return None
    problems = verify_release(target) if target.is_dir() or target.is_symlink() else [f"{target.name}: not a folder"]
    if not problems:
        try:
            fingerprint = json.loads((target / MANIFEST).read_text(encoding="utf-8")).get("fingerprint")
        except (ValueError, AttributeError):
            fingerprint = None
        if fingerprint != collection.fingerprint():
            problems.append(f"{MANIFEST}: its parameter fingerprint is not this collection's")
    if problems:
        raise CollectionError(f"{target}: run id {run_id!r} is already published but does not verify ({problems[0]}); "
                              "nothing was run: restore the folder, or use another run id")
    return target
