"""Plan the budget and reserve it in the ledger, before any data is read."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task

from dp.accounting import Ledger, LedgerStatus
from dp.budget import describe
from schemas.model import load_spec
from schemas.plan import ReleasePlan, plan_release
from tasks import SENSITIVE


@task(name="plan_budget", **SENSITIVE)
def plan_budget(spec_path: str, release_id: str, ledger_path: str, seed: int) -> tuple[ReleasePlan, LedgerStatus]:
    """Load the spec, split its budget exactly, and reserve it in the ledger.

    Returns:
        The plan, and the dataset's ledger status before this reservation.

    Raises:
        BudgetExceededError: If the dataset's remaining lifetime budget is too small; nothing is
            read and nothing is reserved.
    """
    logger = get_run_logger()
    spec = load_spec(spec_path)
    plan = plan_release(spec, release_id, seed if spec.seed is None else spec.seed)
    with Ledger.open(Path(ledger_path)) as ledger:
        ledger.register(spec.dataset, spec.definition, spec.lifetime, spec.delta, spec.release_cap)
        before = ledger.reserve(spec.dataset, release_id, plan.total)
    logger.info(
        "reserved %s for release %s of %s; lifetime %s, spent before %s",
        describe(plan.total, spec.delta), release_id, spec.dataset,
        describe(spec.lifetime, spec.delta), f"{before.unit}={float(before.spent):.6g}",
    )
    return plan, before
