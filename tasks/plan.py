"""Plan the budget and reserve it in the ledger, before any data is read."""

from __future__ import annotations

import hashlib
from fractions import Fraction
from pathlib import Path

from prefect import get_run_logger

from dprelease.dp.accounting.budget import describe
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.accounting.ledger_rows import LedgerStatus
from dprelease.dp.errors import LedgerError
from dprelease.schemas.model import ReleaseSpec
from dprelease.schemas.plan import ReleasePlan, plan_release
from dprelease.tasks import sensitive_task
from dprelease.tasks.ingest import parquet_files


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def data_fingerprint(data: Path) -> str:
    """SHA-256 over the dataset's files (names and contents, streamed): a re-run must read the same input."""
    digest = hashlib.sha256()
    for path in parquet_files(data):
        digest.update(path.name.encode("utf-8") + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _facts(spec: ReleaseSpec, seed: int, before: LedgerStatus) -> dict[str, object]:
    """Facts kept with the reservation (steward-only ledger), so that a re-run replays the same release."""
    return {
        "seed": seed,
        "spec_sha256": _sha256(Path(spec.source)),
        "schema_sha256": _sha256(spec.schema_path),
        "data_sha256": data_fingerprint(spec.data),
        "spent_before": str(before.spent),
        "reserved_before": str(before.reserved),
        **({"delta_spent_before": str(before.delta_spent)} if before.delta_spent else {}),
    }


@sensitive_task("plan_budget")
def plan_budget(spec: ReleaseSpec, release_id: str, ledger_path: str, seed: int) -> tuple[ReleasePlan, LedgerStatus]:
    """Split the spec's budget exactly, and reserve it in the ledger; the plan carries the spec on.

    ``spec`` is the one parse of the release spec (the preflight's): no stage reads the file again.

    A release id already in the ledger is resumed instead: its seed and ledger snapshot are taken
    from the reservation, and its sealed measurements will be replayed, never redrawn.

    Returns:
        The plan, and the dataset's ledger status before this release was first reserved.

    Raises:
        BudgetExceededError: If the dataset's remaining lifetime budget is too small; nothing is
            read and nothing is reserved.
        LedgerError: If a re-run's spec differs from the first run's, or it cannot be replayed.
    """
    logger = get_run_logger()
    with Ledger.open(Path(ledger_path)) as ledger:
        ledger.register(spec.dataset, spec.definition, spec.lifetime, spec.delta, spec.release_cap,
                        epsilon=spec.lifetime_epsilon if spec.definition == "zcdp" else None)
        for reclaimed in ledger.reclaim_stale(spec.dataset):
            logger.warning("release %s of %s was left open by a process that is gone: closed as failed "
                           "(what it drew stays booked)", reclaimed, spec.dataset)
        facts = ledger.release_plan(release_id)
        if facts is None:
            chosen = seed if spec.seed is None else spec.seed
            plan = plan_release(spec, release_id, chosen)
            current = ledger.status(spec.dataset)
            before = ledger.reserve(spec.dataset, release_id, plan.total, _facts(spec, chosen, current),
                                    delta=spec.mechanism_delta)
            logger.info(
                "reserved %s for release %s of %s; lifetime %s, spent before %s",
                describe(plan.total, spec.delta), release_id, spec.dataset,
                describe(spec.lifetime, spec.delta), f"{before.unit}={float(before.spent):.6g}",
            )
            return plan, before
        if (facts.get("spec_sha256"), facts.get("schema_sha256")) != (
            _sha256(Path(spec.source)), _sha256(spec.schema_path)
        ):
            raise LedgerError(
                f"release {release_id!r} was first run with another spec or schema; a release id cannot be "
                "re-run with changed inputs (use a new release id)"
            )
        if "data_sha256" in facts and facts["data_sha256"] != data_fingerprint(spec.data):
            raise LedgerError(
                f"release {release_id!r} was reserved against other data (the input's fingerprint differs); "
                "a release id cannot be re-run on changed data (use a new release id)"
            )
        plan = plan_release(spec, release_id, int(str(facts["seed"])))
        lost = ledger.resume(release_id)
        if lost:
            logger.warning("release %s: draws whose results were never sealed (a crash) are booked as lost "
                           "(%s); they will be booked again if drawn again", release_id, describe(
                               plan.total.__class__(lost), spec.delta))
        now = ledger.status(spec.dataset)
    before = LedgerStatus(
        now.dataset, now.definition, now.cap, now.delta, Fraction(str(facts["spent_before"])),
        Fraction(str(facts["reserved_before"])), now.release_cap, now.epsilon,
        Fraction(str(facts.get("delta_spent_before", "0"))),
    )
    logger.info("resuming release %s of %s: sealed measurements are replayed, not redrawn",
                release_id, spec.dataset)
    return plan, before
