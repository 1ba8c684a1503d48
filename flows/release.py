"""The release flow: one differentially private synthetic-data release, stage by stage."""

from __future__ import annotations

import secrets
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow, get_run_logger

from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.accounting.processes import release_lock
from dprelease.dp.errors import ReleaseError
from dprelease.dp.mechanisms.random import secure_seed
from dprelease.flows.schedules import pause_schedules_when_refused
from dprelease.schemas.identifiers import check_identifier
from dprelease.schemas.model import ReleaseSpec
from dprelease.tasks import DPReleaseError, steward_area
from dprelease.tasks.bounds import find_bins, find_bounds, find_mappings
from dprelease.tasks.cross import measure_cross_pairs
from dprelease.tasks.evaluate import evaluate_utility
from dprelease.tasks.ingest import inspect_table
from dprelease.tasks.measure import measure_marginals
from dprelease.tasks.plan import plan_budget
from dprelease.tasks.preflight import preflight, steward_root
from dprelease.tasks.publish import abort_release, provenance, publish_release, write_report
from dprelease.tasks.staging import (
    check_staging,
    create_staging,
    create_steward,
    final_dir,
    staging_dir,
    steward_dir,
    verify_release,
    write_internal,
)
from dprelease.tasks.stats import measure_statistics
from dprelease.tasks.synthesize import estimate_model, sample_synthetic
from dprelease.tasks.validate import validate_table


def new_release_id() -> str:
    """A fresh, sortable release id: UTC time plus a random suffix."""
    return f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


@flow(name="release", log_prints=False, persist_result=False, validate_parameters=True,
      on_failure=[pause_schedules_when_refused])
def release(
    spec: str,
    out: str = "releases",
    ledger: str = ".dprelease/ledger.sqlite",
    release_id: str | None = None,
    dask: str | None = None,
    internal: str | None = None,
) -> str:
    """Run one release described by ``spec``; returns the published release folder.

    Re-running a release id is safe: a published, intact release is returned as it is; an
    unfinished one resumes, replaying every measurement already drawn (sealed in the ledger)
    rather than drawing fresh noise, and reproduces the same public files byte for byte.
    Parameters are public identifiers only (paths and an id), never data.

    The public folder ``<out>/<dataset>/<release_id>/`` holds exactly the files its manifest
    lists; steward-only files (validation, exact row handling, the internal report, stage
    failures) go to ``<internal>/<dataset>/<release_id>/``, owner-only. The internal report is
    computed after publication: its failure is recorded there and never fails the release.

    Args:
        spec: Path of the release spec (YAML).
        out: Folder under which ``<dataset>/<release_id>/`` is published.
        ledger: Path of the privacy ledger (SQLite).
        release_id: Id of the release; a fresh one is made when omitted.
        dask: Scheduler address of an existing Dask cluster for the counting map (wins over the
            spec's ``dask.address``); None for the spec's setting or in process.
        internal: The steward-only root (wins over the spec's ``internal:``); None for the spec's
            or ``internal/`` in the state folder.
    """
    logger = get_run_logger()
    rid = check_identifier("release id", release_id or new_release_id())
    spec_path = str(Path(spec).resolve())
    out_dir = Path(out).resolve()
    if Path(out).is_symlink():
        logger.info("output folder %s is a symbolic link to %s", out, out_dir)
    ledger_path = str(Path(ledger).resolve())
    # Everything that can be checked without reading a row, before the ledger is touched.
    loaded = preflight(spec_path, str(out_dir), ledger_path, dask, rid, internal)
    with release_lock(ledger_path, rid):  # one run per release id at a time
        return _run(spec_path, out_dir, ledger_path, rid, loaded, steward_root(loaded, internal), dask)


def _run(spec_path: str, out_dir: Path, ledger_path: str, rid: str, loaded: ReleaseSpec, internal_root: Path,
         dask: str | None) -> str:
    logger = get_run_logger()
    dataset = loaded.dataset
    steward = steward_dir(internal_root, dataset, rid)
    published = final_dir(out_dir, dataset, rid)
    if published.exists() or published.is_symlink():
        problems = verify_release(published)
        if problems:
            raise ReleaseError(f"release {rid} exists but does not verify: {problems[0]}")
        with Ledger.open(Path(ledger_path)) as book:  # a kill after the rename left the ledger behind
            if book.release_plan(rid) is not None and book.release_status(rid) != "published":
                book.settle_published(rid)
                logger.info("release %s was published before its run was cut off: marked published", rid)
        logger.info("release %s is already published and verifies: %s", rid, published)
        return str(published)

    create_steward(steward)
    check_staging(staging_dir(out_dir, dataset, rid), steward)  # a path this release did not make: refused now
    with steward_area(steward):
        plan, before = plan_budget(loaded, rid, ledger_path, secure_seed())
        staging: Path | None = None
        try:
            staging = create_staging(staging_dir(out_dir, plan.dataset, rid), steward)
            inspect_table(plan)
            validate_table(plan, str(steward))
            bounds = find_bounds(plan, ledger_path)
            mappings = find_mappings(plan, ledger_path) if plan.mappings else []
            bins = find_bins(plan, bounds, ledger_path) if plan.bins else []
            summarised = plan.statistics or plan.aggregates
            statistics = measure_statistics(plan, bounds, ledger_path, str(staging)) if summarised else []
            measured = measure_marginals(plan, bounds, ledger_path, str(steward), dask,
                                         {b.column: b.edges for b in bins})
            estimate = estimate_model(plan, bounds, measured)
            cross = measure_cross_pairs(plan, ledger_path, estimate) if plan.cross is not None else None
            measured = replace(measured, cross=cross.records) if cross is not None else measured
            synthesis = sample_synthetic(plan, bounds, estimate, str(staging), provenance()["dprelease"], mappings,
                                         cross)
            write_report(plan, before, ledger_path, bounds, measured, synthesis, str(staging), statistics,
                         [*(m.record for m in mappings), *(r for b in bins for r in b.records)])
            target = publish_release(plan, str(staging), str(out_dir), ledger_path)
        except BaseException:
            abort_release(rid, staging, ledger_path)
            raise
        logger.info("release %s published: %s", rid, target)
        # The internal report (non-private: utility, disclosure risk) comes after publication and
        # never fails, delays the publication of, or un-publishes the release.
        try:
            evaluate_utility(plan, target, synthesis.table_file, str(steward))
        except Exception as err:  # recorded for the steward: the release stands
            kind = type(err).__name__
            write_internal(steward, "evaluation-error.txt",
                           f"the internal report failed ({kind}); the release is published and unaffected\n"
                           + (str(err) if isinstance(err, DPReleaseError) else "") + "\n")
            logger.warning("the internal report of release %s failed (%s); the release is published and "
                           "unaffected; details in the steward folder", rid, kind)
    return target
