"""The release flow: one differentially private synthetic-data release, stage by stage."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow, get_run_logger

from dp.random import secure_seed
from flows.schedules import pause_schedules_when_refused
from flows.settings import state_dir
from tasks import DPReleaseError, steward_area
from tasks.bounds import find_bounds
from tasks.evaluate import evaluate_utility
from tasks.ingest import inspect_table
from tasks.measure import measure_marginals
from tasks.plan import plan_budget
from tasks.preflight import preflight
from tasks.publish import abort_release, provenance, publish_release, write_report
from tasks.staging import create_staging, final_dir, staging_dir, verify_release
from tasks.synthesize import estimate_model, sample_synthetic
from tasks.validate import validate_table


class ReleaseError(DPReleaseError, RuntimeError):
    """A release cannot proceed (named by release id and rule; never a data value)."""


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
) -> str:
    """Run one release described by ``spec``; returns the published release folder.

    Re-running a release id is safe: a published, intact release is returned as it is; an
    unfinished one resumes, replaying every measurement already drawn (sealed in the ledger)
    rather than drawing fresh noise, and reproduces the same public files byte for byte.
    Parameters are public identifiers only (paths and an id), never data.

    Args:
        spec: Path of the release spec (YAML).
        out: Folder under which ``<dataset>/<release_id>/`` is published.
        ledger: Path of the privacy ledger (SQLite).
        release_id: Id of the release; a fresh one is made when omitted.
        dask: Scheduler address of an existing Dask cluster for the counting map (wins over the
            spec's ``dask.address``); None for the spec's setting or in process.
    """
    logger = get_run_logger()
    spec_path = str(Path(spec).resolve())
    out_dir = Path(out).resolve()
    ledger_path = str(Path(ledger).resolve())
    rid = release_id or new_release_id()
    # Everything that can be checked without reading a row, before the ledger is touched.
    dataset = preflight(spec_path, str(out_dir), ledger_path, dask, release_id).dataset

    published = final_dir(out_dir, dataset, rid)
    if published.exists():
        problems = verify_release(published)
        if problems:
            raise ReleaseError(f"release {rid} exists but does not verify: {problems[0]}")
        logger.info("release %s is already published and verifies: %s", rid, published)
        return str(published)

    with steward_area(state_dir() / "internal" / dataset / rid):
        plan, before = plan_budget(spec_path, rid, ledger_path, secure_seed())
        staging: Path | None = None
        try:
            staging = create_staging(staging_dir(out_dir, plan.dataset, rid))
            inspect_table(plan)
            validate_table(plan, str(staging))
            bounds = find_bounds(plan, ledger_path)
            measured = measure_marginals(plan, bounds, ledger_path, str(staging), dask)
            estimate = estimate_model(plan, bounds, measured)
            synthesis = sample_synthetic(plan, bounds, estimate, str(staging), provenance()["dprelease"])
            write_report(plan, before, ledger_path, bounds, measured, synthesis, str(staging))
            evaluate_utility(plan, str(staging), synthesis.table_file)
            target = publish_release(plan, str(staging), str(out_dir), ledger_path)
        except BaseException:
            abort_release(rid, staging, ledger_path)
            raise
    logger.info("release %s published: %s", rid, target)
    return target
