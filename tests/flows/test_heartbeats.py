"""Flow runs on the command's embedded server start no heartbeat thread (flows.settings.without_heartbeats)."""

from __future__ import annotations

import logging

import pytest

from dprelease.flows.settings import without_heartbeats

STARTED = "Started flow run heartbeat context"  # Prefect's flow engine logs it when it starts the thread


class _Messages(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _run_a_flow() -> list[str]:
    """The flow engine's log messages of one run (its logger does not propagate to pytest's capture)."""
    from prefect import flow

    @flow(name="heartbeat-probe", persist_result=False)
    def probe() -> int:
        return 1

    logger, handler = logging.getLogger("prefect.flow_runs"), _Messages()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        assert probe() == 1
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
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
