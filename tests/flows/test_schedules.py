"""A scheduled release refused by the lifetime budget pauses its deployment's schedules (real Prefect API).

The deployment is registered on the session's Prefect test server (a real API on 127.0.0.1, SQLite),
a flow run is created from it as the scheduler would, and the real release flow runs as that flow
run; the ledger refuses it, and its ``on_failure`` hook pauses the deployment's schedules.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import DeploymentScheduleCreate
from prefect.client.schemas.schedules import IntervalSchedule
from prefect.flow_engine import run_flow

from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import BudgetExceededError
from dprelease.schemas.spec import load_spec
from tests.examples import adult_example

pytestmark = pytest.mark.e2e
ADULT = Path(__file__).resolve().parents[2] / "examples" / "adult"


def _deployment(name: str) -> tuple[object, object]:
    with get_client(sync_client=True) as client:
        flow_id = client.create_flow_from_name("release")
        deployment_id = client.create_deployment(
            flow_id, name, entrypoint="flows/release.py:release",
            schedules=[DeploymentScheduleCreate(schedule=IntervalSchedule(interval=timedelta(hours=1)), active=True)])
        flow_run = client.create_flow_run_from_deployment(deployment_id)
    return deployment_id, flow_run


def _active(deployment_id: object) -> list[bool]:
    with get_client(sync_client=True) as client:
        return [s.active for s in client.read_deployment_schedules(deployment_id)]  # type: ignore[arg-type]


def test_a_budget_refusal_pauses_the_deployments_schedules(prefect_harness, tmp_path):
    from dprelease.flows.release import release

    # A lifetime budget that admits one release like this one: the first spends it, the second is refused.
    # The first is booked in the ledger as a published release of this spec's budget (what matters here is
    # the refusal's hook, not how the budget was spent; tests/flows/test_release.py runs two real releases).
    spec = adult_example(tmp_path, lifetime_budget={"epsilon": 1.2, "delta": 1e-9}, release_cap=None)
    common = {"spec": str(spec), "out": str(tmp_path / "out"), "ledger": str(tmp_path / "ledger.sqlite")}
    loaded = load_spec(spec)
    with Ledger.open(tmp_path / "ledger.sqlite") as ledger:
        ledger.register(loaded.dataset, loaded.definition, loaded.lifetime, loaded.delta, loaded.release_cap)
        ledger.reserve(loaded.dataset, "first", loaded.budget)
        ledger.charge("first", stage="one_way", query="marginal(age)", mechanism="test", sensitivity="L2=1",
                      scale="1", loss=loaded.budget)
        ledger.publish("first")
    deployment_id, flow_run = _deployment("refused-schedule")
    assert _active(deployment_id) == [True]
    parameters = {**common, "release_id": "refused"}
    state = run_flow(release, flow_run=flow_run, parameters=parameters, return_type="state")
    assert state.is_failed()
    assert isinstance(state.result(raise_on_failure=False), BudgetExceededError)
    assert _active(deployment_id) == [False]
    assert not (tmp_path / "out" / "us-cps-1994-adult" / "refused").exists()


def test_other_failures_leave_the_schedules_alone(prefect_harness, tmp_path):
    from dprelease.flows.release import release

    spec = adult_example(tmp_path)
    (spec.parent / "adult.parquet").write_bytes(b"not parquet")  # an input error, not a budget refusal
    deployment_id, flow_run = _deployment("input-error-schedule")
    parameters = {"spec": str(spec), "out": str(tmp_path / "out"), "ledger": str(tmp_path / "ledger.sqlite"),
                  "release_id": "bad-input"}
    state = run_flow(release, flow_run=flow_run, parameters=parameters, return_type="state")
    assert state.is_failed() and not isinstance(state.result(raise_on_failure=False), BudgetExceededError)
    assert _active(deployment_id) == [True]
