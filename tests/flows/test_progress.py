"""Signs of life: stage start and end lines, row-group counters, no value in them."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

import dprelease.tasks.progress
from dprelease.tasks.progress import StageProgress

dprelease.tasks.progress._logger()  # Prefect configures logging on first use, dropping caplog's handler: not in a test


def test_a_pass_logs_its_position_at_the_last_row_group_and_every_interval(caplog, monkeypatch):
    clock = iter(float(t) for t in range(0, 1000, 3))  # each row group takes 3 s
    # the module's own name for the time module, not the global time.monotonic: Prefect's threads in this
    # process call that too, and took ticks of this clock (a flaky count, and a StopIteration at teardown)
    monkeypatch.setattr(dprelease.tasks.progress, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    progress = StageProgress("measure")
    with caplog.at_level(logging.INFO, logger="dprelease.progress"):
        assert list(progress.track(iter(range(10)), 10)) == list(range(10))
        assert list(progress.track(iter(["a"]), 1)) == ["a"]
    lines = [r.getMessage() for r in caplog.records]
    # every 5 s at most: row groups 2, 4, 6, 8 (6 s apart), then the last one; then the second pass's only one
    assert lines == ["measure: pass 1, row group 2/10", "measure: pass 1, row group 4/10",
                     "measure: pass 1, row group 6/10", "measure: pass 1, row group 8/10",
                     "measure: pass 1, row group 10/10", "measure: pass 2, row group 1/1"]


def test_other_stages_are_named_without_a_pass_number(caplog):
    with caplog.at_level(logging.INFO, logger="dprelease.progress"):
        list(StageProgress("validate").track(iter(range(3)), 3))
    assert [r.getMessage() for r in caplog.records] == ["validate, row group 3/3"]


@pytest.mark.e2e
def test_a_sensitive_stage_announces_its_start_and_end_and_keeps_a_progress_artifact(prefect_harness, caplog):
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterType

    from dprelease.tasks import sensitive_task

    @sensitive_task("count_things")
    def count_things() -> int:
        return sum(StageProgress("measure").track(iter(range(4)), 4))

    @flow(name="progress-demo", persist_result=False)
    def demo() -> tuple[int, str]:
        from prefect.runtime import flow_run

        return count_things(), flow_run.id

    with caplog.at_level(logging.INFO):
        total, run_id = demo()
    assert total == 6
    messages = [r.getMessage() for r in caplog.records]
    assert "stage count_things started" in messages
    assert any(m.startswith("stage count_things finished in ") and m.endswith(" s") for m in messages)
    assert "measure: pass 1, row group 4/4" in messages
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(type=ArtifactFilterType(any_=["progress"])))
    assert any(str(a.flow_run_id) == str(run_id) and float(a.data) == 100.0 for a in found)
