"""Retry-safe publication: a failure publishes nothing; re-running a release id replays, never redraws."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import LedgerError, StageFailed
from dprelease.dp.mechanisms.random import OpenDPNoise
from dprelease.tasks.staging import public_files, verify_release
from tests.examples import adult_example

pytestmark = pytest.mark.e2e
DATASET = "us-cps-1994-adult"


@pytest.fixture
def example(tmp_path: Path) -> Path:
    # The first 8,000 rows (as in test_faults.py): what a re-run replays or refuses does not depend on the
    # table's size; the release has the same measurements (14 1-ways, 13 cliques, 2 levels, 3 SVT scans).
    return adult_example(tmp_path, rows=8000)


@pytest.fixture
def draws(monkeypatch) -> list[str]:
    """Counts every call of the production noise sampler."""
    calls: list[str] = []
    laplace, gaussian = OpenDPNoise.discrete_laplace, OpenDPNoise.discrete_gaussian

    def spy_laplace(self, values, scale):
        calls.append("laplace")
        return laplace(self, values, scale)

    def spy_gaussian(self, values, sigma):
        calls.append("gaussian")
        return gaussian(self, values, sigma)

    monkeypatch.setattr(OpenDPNoise, "discrete_laplace", spy_laplace)
    monkeypatch.setattr(OpenDPNoise, "discrete_gaussian", spy_gaussian)
    return calls


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in public_files(folder)}


def _run(example: Path, tmp_path: Path, release_id: str) -> Path:
    from dprelease.flows.release import release

    return Path(release(spec=str(example), out=str(tmp_path / "out"), ledger=str(tmp_path / "l.sqlite"),
                        release_id=release_id))


def test_rerun_of_a_published_release_replays_byte_identical_files(prefect_harness, example, tmp_path, draws):
    first = _run(example, tmp_path, "r1")
    drawn = len(draws)
    # 14 1-ways, 13 cliques, 2 hierarchy levels; per SVT run a threshold and a query vector (the 25
    # selections of the structure draw through OpenDP's noisy max: the ledger count below covers them)
    assert drawn == 14 + 13 + 2 + 2 * 3 * 2
    files = _snapshot(first)
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        charges = len(ledger.charges(release_id="r1"))

    assert _run(example, tmp_path, "r1") == first  # intact: returned as it is
    shutil.rmtree(first)  # the published folder is lost: the re-run republishes by replay
    again = _run(example, tmp_path, "r1")
    assert len(draws) == drawn, "a re-run drew fresh noise"
    assert _snapshot(again) == files
    assert verify_release(again) == []
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        assert len(ledger.charges(release_id="r1")) == charges
        assert ledger.release_status("r1") == "published"


@pytest.mark.parametrize(
    ("stage", "target"),
    [  # one stage by default (the last, the publishing rename); every stage with -m slow
        pytest.param("measure", "dprelease.flows.release.estimate_model", marks=pytest.mark.slow),
        pytest.param("estimate", "dprelease.flows.release.sample_synthetic", marks=pytest.mark.slow),
        pytest.param("sample", "dprelease.flows.release.write_report", marks=pytest.mark.slow),
        ("publish", "dprelease.tasks.publish.os.rename"),
    ],
)
def test_fault_after_each_stage_publishes_nothing_and_the_rerun_replays(
    prefect_harness, example, tmp_path, draws, monkeypatch, stage, target
):
    def broken(*args, **kwargs):
        raise RuntimeError(f"injected failure after {stage}")

    with monkeypatch.context() as patch:
        patch.setattr(target, broken)
        with pytest.raises(Exception) as info:
            _run(example, tmp_path, f"fault-{stage}")
    if stage == "publish":  # inside a sensitive task: message-free, stage and type only
        assert isinstance(info.value, StageFailed) and "publish_release failed with RuntimeError" in str(info.value)
    else:  # raised by the flow itself, between stages
        assert isinstance(info.value, RuntimeError) and "injected failure" in str(info.value)
    dataset_dir = tmp_path / "out" / DATASET
    assert not dataset_dir.exists() or list(dataset_dir.iterdir()) == []
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        assert ledger.release_status(f"fault-{stage}") == "failed"
        charges = ledger.charges(release_id=f"fault-{stage}")
        # Every drawn charge stays booked, each with its sealed result (how many second-parent selections
        # run depends on the privately chosen tree: one with a single candidate is skipped).
        assert len(charges) >= 55 and all(ledger.sealed(f"fault-{stage}", f"{c.stage}/{c.query}") for c in charges)
    drawn = len(draws)

    target_dir = _run(example, tmp_path, f"fault-{stage}")
    assert len(draws) == drawn, "the re-run drew fresh noise"
    files = _snapshot(target_dir)
    shutil.rmtree(target_dir)
    assert _snapshot(_run(example, tmp_path, f"fault-{stage}")) == files
    assert len(draws) == drawn


def test_rerun_with_a_changed_spec_is_refused(prefect_harness, example, tmp_path):
    from dprelease.flows.release import release

    with pytest.raises(RuntimeError):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("dprelease.flows.release.estimate_model",
                          lambda *a, **k: (_ for _ in ()).throw(RuntimeError("x")))
            release(spec=str(example), out=str(tmp_path / "out"), ledger=str(tmp_path / "l.sqlite"), release_id="c1")
    doc = yaml.safe_load(example.read_text())
    doc["allocation"] = {"bounds": 0.1, "one_way": 0.13, "selection": 0.09, "cliques": 0.63, "hierarchy": 0.05}
    example.write_text(yaml.safe_dump(doc))
    with pytest.raises(LedgerError, match="was first run with another spec"):
        release(spec=str(example), out=str(tmp_path / "out"), ledger=str(tmp_path / "l.sqlite"), release_id="c1")


def test_rerun_on_changed_data_is_refused_before_any_draw(prefect_harness, example, tmp_path, draws):
    import pyarrow.parquet as pq

    from dprelease.flows.release import release

    with pytest.raises(RuntimeError):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("dprelease.flows.release.estimate_model",
                          lambda *a, **k: (_ for _ in ()).throw(RuntimeError("x")))
            release(spec=str(example), out=str(tmp_path / "out"), ledger=str(tmp_path / "l.sqlite"), release_id="d1")
    drawn = len(draws)
    table = pq.read_table(example.parent / "adult.parquet")
    pq.write_table(table.slice(1), example.parent / "adult.parquet")  # one row fewer: other data
    with pytest.raises(LedgerError, match="reserved against other data"):
        release(spec=str(example), out=str(tmp_path / "out"), ledger=str(tmp_path / "l.sqlite"), release_id="d1")
    assert len(draws) == drawn
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        assert ledger.release_status("d1") == "failed"


CROSS = {"bounds": 0.05, "one_way": 0.4, "selection": 0.04, "cliques": 0.36, "cross": 0.1, "hierarchy": 0.05}


def test_cross_pairs_are_booked_keep_the_hierarchy_exact_and_replay_after_a_fault(
    prefect_harness, tmp_path, draws, monkeypatch
):
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    example = adult_example(tmp_path, rows=8000, allocation=CROSS, cross_pairs=3)
    with monkeypatch.context() as patch:  # the fault comes after the cross stage drew
        patch.setattr("dprelease.flows.release.sample_synthetic",
                      lambda *a, **k: (_ for _ in ()).throw(RuntimeError("injected failure after cross")))
        with pytest.raises(RuntimeError, match="injected failure after cross"):
            _run(example, tmp_path, "x1")
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        booked = [c.query for c in ledger.charges(release_id="x1") if c.stage == "cross"]
    assert booked == ["cross pair 1", booked[1], "cross pair 2", booked[3], "cross pair 3", booked[5]]
    assert all(q.startswith("cross pair(") for q in booked[1::2])
    drawn = len(draws)
    published = _run(example, tmp_path, "x1")
    assert len(draws) == drawn, "the re-run drew fresh noise"
    assert verify_release(published) == []
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        assert [c.query for c in ledger.charges(release_id="x1") if c.stage == "cross"] == booked
    audit = (published / "audit.md").read_text(encoding="utf-8")
    assert all(f"`{q}`" in audit for q in booked) and "raked by iterative proportional fitting" in audit
    synthetic = pq.read_table(published / "synthetic" / "adult.parquet")
    leaves = pq.read_table(next((published / "marginals").glob("hierarchy-geography-2-*.parquet")))
    counts = dict(zip(leaves.column(0).to_pylist(), leaves.column("count").to_pylist(), strict=True))
    drawn_counts = {v["values"] or "<null>": v["counts"]
                    for v in pc.value_counts(synthetic.column("native-country")).to_pylist()}
    assert {k: v for k, v in counts.items() if v} == drawn_counts  # the leaf counts stay exact through the raking
