"""A scheduled release that the ledger refuses pauses its deployment's schedules.

A dataset's lifetime budget is never renewed: once it is spent, every later scheduled run would be
refused the same way and turn red until someone noticed. The release flow's ``on_failure`` hook
(:func:`pause_schedules_when_refused`) pauses the schedules of the deployment that started the run
(manual runs stay possible, e.g. after a steward raises the cap) and logs one line saying why; the
run's own state message is the ledger's one-line refusal. A run outside a deployment, or one that
failed for any other reason, is left alone.
"""

from __future__ import annotations

import logging
from typing import Any

from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import FlowRun, State
from prefect.logging import get_logger

from dprelease.dp.errors import BudgetExceededError


def refused_by_budget(state: State[Any]) -> bool:
    """Whether a failed run's exception is the ledger's budget refusal."""
    try:
        outcome = state.result(raise_on_failure=False)
    except Exception:  # the exception is not available (e.g. read back from the API): use the message
        return (state.message or "").startswith("Flow run encountered an exception: BudgetExceededError")
    return isinstance(outcome, BudgetExceededError)


def pause_deployment_schedules(deployment_id: Any) -> int:
    """Deactivate every active schedule of a deployment; the number paused."""
    paused = 0
    with get_client(sync_client=True) as client:
        for schedule in client.read_deployment_schedules(deployment_id):
            if schedule.active:
                client.update_deployment_schedule(deployment_id, schedule.id, active=False)
                paused += 1
    return paused


def pause_schedules_when_refused(flow: Any, flow_run: FlowRun, state: State[Any]) -> None:
    """``on_failure`` hook of the release flow: pause the deployment's schedules after a budget refusal."""
    if flow_run.deployment_id is None or not refused_by_budget(state):
        return
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = get_logger("dprelease.schedules")
    try:
        paused = pause_deployment_schedules(flow_run.deployment_id)
    except Exception as err:  # the refusal stands; a failed pause must not mask it
        logger.warning("the budget was refused but the deployment's schedules could not be paused (%s)",
                       type(err).__name__)
        return
    if paused:
        logger.warning("the lifetime budget refused this release: paused %d schedule(s) of deployment %s; "
                       "resume them with `prefect deployment schedule resume` once the budget allows", paused,
                       flow_run.deployment_id)
