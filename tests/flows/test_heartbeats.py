"""Flow runs on the command's embedded server start no heartbeat thread (flows.settings.without_heartbeats)."""

from __future__ import annotations

import logging

import pytest

from dprelease.flows.settings import without_heartbeats
from tests.messages import messages_of

STARTED = "Started flow run heartbeat context"  # Prefect's flow engine logs it when it starts the thread


def _run_a_flow() -> list[str]:
    """The flow engine's log messages of one run (its logger does not propagate to pytest's capture)."""
    from prefect import flow

    @flow(name="heartbeat-probe", persist_result=False)
    def probe() -> int:
        return 1

    with messages_of(logging.getLogger("prefect.flow_runs")) as handler:
        assert probe() == 1
    return handler.messages


@pytest.mark.e2e
def test_a_run_inside_starts_no_heartbeat_thread_and_one_outside_does(prefect_harness):
    from prefect.settings import get_current_settings, temporary_settings

    # Prefect's default (the session's harness turns heartbeats off as the command does: put it back here).
    with temporary_settings(updates={"flows.heartbeat_frequency": 180}):
        assert STARTED in _run_a_flow()  # the check below can see a heartbeat thread start
        with without_heartbeats(True):
            assert get_current_settings().flows.heartbeat_frequency is None
            assert STARTED not in _run_a_flow()
        with without_heartbeats(False):  # the command on an API of the user's: Prefect's default stays
            assert STARTED in _run_a_flow()
        assert get_current_settings().flows.heartbeat_frequency == 180  # only inside the block
