"""Crash tests: ``dprelease release`` killed (SIGKILL) at a stage boundary or between a charge and its seal.

Each run is a real subprocess of the command (talking to the session's Prefect test API), killed by
``DPRELEASE_FAULT`` at the named point. After the kill: no public release (at most the staging
folder). Then the same release id is run again and must publish, with the ledger consistent: the
release closed as published, nothing left reserved, every query charged once plus once per draw lost
in a crash (never drawn again without being booked), and the ledger's spent equal to what was drawn.
The default run covers three kills; the sweep over every stage boundary is marked slow.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.accounting.processes import FAULT_ENV
from dprelease.tasks.staging import verify_release
from tests.examples import adult_example

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT / "examples" / "adult"
DATASET = "us-cps-1994-adult"
STAGES = ["plan_budget", "inspect_table", "validate_table", "discover_bounds", "measure_marginals",
          "estimate_model", "sample_synthetic", "write_report", "publish_release"]


@pytest.fixture
def example(tmp_path: Path) -> Path:
    # The first 8,000 rows: what a kill leaves and a re-run settles does not depend on the table's size.
    return adult_example(tmp_path, rows=8000)


def _release(tmp_path: Path, spec: Path, rid: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    from prefect.settings import PREFECT_API_URL

    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_") and k != FAULT_ENV}
    env.update(DPRELEASE_HOME=str(tmp_path / "state"), PYTHONPATH=str(ROOT),
               PREFECT_API_URL=str(PREFECT_API_URL.value()))
    if fault:
        env[FAULT_ENV] = fault
    return subprocess.run([sys.executable, "-m", "dprelease", "release", str(spec), "--out", str(tmp_path / "out"),
                           "--ledger", str(tmp_path / "ledger.sqlite"), "--release-id", rid],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)


def _killed_then_replayed(tmp_path: Path, spec: Path, rid: str, fault: str) -> None:
    killed = _release(tmp_path, spec, rid, fault)
    assert killed.returncode == -signal.SIGKILL, (fault, killed.returncode, killed.stderr[-2000:])
    published = tmp_path / "out" / DATASET / rid
    if fault not in ("after_publish_rename", "after_stage:publish_release"):
        assert not published.exists(), fault  # no partial public release
    rerun = _release(tmp_path, spec, rid)
    assert rerun.returncode == 0, (fault, rerun.stderr[-2000:])
    assert verify_release(published) == []
    assert not (tmp_path / "out" / DATASET / f".staging-{rid}").exists()
    with Ledger.open(tmp_path / "ledger.sqlite") as ledger:
        assert ledger.release_status(rid) == "published"
        status = ledger.status(DATASET)
        charges = ledger.charges(release_id=rid)
        assert status.reserved == 0 and status.spent == sum(c.loss for c in ledger.charges(dataset=DATASET))
        (release,) = [r for r in ledger.releases(DATASET) if r["release_id"] == rid]
        per_query = collections.Counter(f"{c.stage}/{c.query}" for c in charges)
        lost = int(str(release["lost_draws"]))
        # Every query charged once, plus once for each draw lost in the crash: never drawn unbooked.
        assert sum(per_query.values()) == len(per_query) + lost
        assert lost == (1 if fault.startswith("charge_before_seal") else 0)
        assert all(ledger.sealed(rid, key) is not None for key in per_query)


def test_a_kill_between_a_charge_and_its_seal_is_booked_as_lost_and_the_rerun_publishes(
    prefect_harness, tmp_path, example
):
    _killed_then_replayed(tmp_path, example, "r-seal", "charge_before_seal:5")


def test_a_kill_after_the_publishing_rename_is_settled_by_the_rerun(prefect_harness, tmp_path, example):
    _killed_then_replayed(tmp_path, example, "r-rename", "after_publish_rename")


def test_a_reservation_held_by_a_killed_run_is_reclaimed_by_the_next_release(prefect_harness, tmp_path, example):
    killed = _release(tmp_path, example, "r-held", "after_stage:plan_budget")
    assert killed.returncode == -signal.SIGKILL
    with Ledger.open(tmp_path / "ledger.sqlite") as ledger:
        assert ledger.release_status("r-held") == "reserved" and ledger.status(DATASET).reserved > 0
    other = _release(tmp_path, example, "r-next")
    assert other.returncode == 0, other.stderr[-2000:]
    with Ledger.open(tmp_path / "ledger.sqlite") as ledger:
        assert ledger.release_status("r-held") == "failed"  # reclaimed: nothing drawn, nothing kept
        assert ledger.charges(release_id="r-held") == [] and ledger.status(DATASET).reserved == 0


@pytest.mark.slow
@pytest.mark.parametrize("stage", STAGES)
def test_a_kill_after_each_stage_then_a_rerun_publishes_consistently(prefect_harness, tmp_path, example, stage):
    _killed_then_replayed(tmp_path, example, f"r-{stage.replace('_', '-')}", f"after_stage:{stage}")
