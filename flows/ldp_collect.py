"""The ldp-collect flow: check batches of locally randomised reports, count them, decode, publish estimates.

Reports arrive already randomised by each person's device (local DP): the aggregator never holds a raw
value, so the counts and everything computed from them are differentially private by construction (the
tasks below may be retried; nothing in them needs the central release's no-retry, no-persistence rules).
A collection's parameters are fixed when a run first accepts one of its batches (registered with their
fingerprint); a spec that changes them is refused, and so is every report made with other parameters.
"""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow, get_run_logger, task

from dprelease.dp.accounting.processes import release_lock
from dprelease.dp.errors import LedgerError
from dprelease.schemas.identifiers import check_identifier, inside
from dprelease.schemas.ldp import CollectionError, load_collection
from dprelease.tasks import PUBLIC
from dprelease.tasks.ldp import (
    BatchCheck,
    aggregate,
    check_batches,
    estimates_table,
    refused_summary,
    write_manifest,
    write_outputs,
)
from dprelease.tasks.ldp_registry import accepted_before, preflight, published_run, register


@task(name="check_batches", **PUBLIC)
def check_task(spec: str, first: list[str]) -> list[BatchCheck]:
    """Great Expectations checks of every batch (reports are already randomised: no raw value here).

    ``first``: the batches earlier runs accepted, whose report ids a new batch may not take over.
    """
    return check_batches(load_collection(spec), first)


@task(name="decode_and_publish", **PUBLIC)
def decode_task(spec: str, checks: list[BatchCheck], staging: str) -> dict[str, object]:
    """Count the accepted reports, estimate or decode, and write the public outputs into ``staging``."""
    collection = load_collection(spec)
    table, summary = estimates_table(collection, aggregate(collection, [c for c in checks if c.accepted]))
    write_outputs(collection, Path(staging), table, summary, checks)
    return summary


@flow(name="ldp-collect", log_prints=False, persist_result=False, validate_parameters=True)
def ldp_collect(spec: str, out: str = "releases-ldp", registry: str = ".dprelease/ldp.sqlite",
                run_id: str | None = None) -> str:
    """Decode a local-DP collection's accepted batches and publish estimates with intervals, a chart and an audit.

    Args:
        spec: The collection spec (YAML).
        out: Folder under which ``<collection>/<run_id>/`` is published.
        registry: The SQLite registry of collections and their fixed parameters.
        run_id: The run's id (default: the UTC time).

    Returns:
        The published folder (a run id already published is verified and returned as it is: nothing runs).

    Raises:
        CollectionError: If the spec is invalid, its parameters changed, no batch was accepted, or the run id is
            published and does not verify.
    """
    logger = get_run_logger()
    rid = check_identifier("run id", run_id or f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}")
    root, book = Path(out).resolve(), Path(registry).resolve()
    collection = preflight(spec, root, book, run_id)
    if run_id is not None and (done := published_run(root, collection, rid)) is not None:
        logger.info("%s run %s is already published and verifies: %s", collection.name, rid, done)
        return str(done)
    checks = check_task(str(collection.source), accepted_before(book, collection))
    accepted = [c.name for c in checks if c.accepted]
    refused = [c for c in checks if not c.accepted]
    logger.info("%s: %d batch(es) accepted (%d reports), %d refused (%d reports)", collection.name, len(accepted),
                sum(c.rows for c in checks if c.accepted), len(refused), sum(c.rows for c in refused))
    if refused:
        logger.warning("refused batches (left in place, not used): %s", refused_summary(checks))
    if not accepted:
        raise CollectionError(f"collection {collection.name!r}: no batch in {collection.batches} was accepted"
                              + (f" ({refused_summary(checks)})" if refused else " (the folder has no batch)"))
    if register(book, collection, [(c.name, c.sha256) for c in checks if c.accepted]):  # once one is accepted
        logger.info("collection %s registered with parameter fingerprint %s", collection.name,
                    collection.fingerprint())
    target = inside(root, collection.name, rid)
    with release_lock(book, f"{collection.name}.{rid}"):  # one run of a run id at a time; held while it stages
        if target.exists() or target.is_symlink():  # published by a run of this id since the check above
            if run_id is None:  # a default id of the same second: another run's
                raise CollectionError(f"{target}: already published; use another run id")
            done = published_run(root, collection, rid)
            logger.info("%s run %s is already published and verifies: %s", collection.name, rid, done)
            return str(done)
        sweep_stagings(root / collection.name, book, collection.name)
        staging = inside(root, collection.name, f".staging-{rid}")
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
        (staging / STAGING_MARK).write_text(rid, encoding="utf-8")
        try:
            decode_task(str(collection.source), checks, str(staging))
            (staging / STAGING_MARK).unlink()
            write_manifest(collection, staging)  # over exactly the files published
            os.chmod(staging, 0o755)
            os.rename(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    logger.info("published %s estimates of %s to %s", collection.protocol, collection.name, target)
    return str(target)


STAGING_MARK = ".dprelease-staging"
"""The file a run writes first into its staging folder: only folders holding it are ever swept."""


def sweep_stagings(folder: Path, registry: Path, collection: str) -> None:
    """Remove the staging folders that runs killed mid-way left in ``folder`` (their run id's lock is free).

    A run holds its run id's lock (:func:`dp.accounting.processes.release_lock`, beside the registry) while its
    staging folder exists, so a folder whose lock can be taken belongs to a run that is gone. Only folders
    named ``.staging-<run id>`` holding :data:`STAGING_MARK` are touched (none this project did not create).
    """
    for staging in sorted(folder.glob(".staging-*")) if folder.is_dir() else ():
        rid = staging.name.removeprefix(".staging-")
        if not (staging / STAGING_MARK).is_file():
            continue
        try:
            with release_lock(registry, f"{collection}.{rid}"):
                shutil.rmtree(staging, ignore_errors=True)
        except LedgerError:
            continue  # its run is still going
