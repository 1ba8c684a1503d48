"""The bounds stage in a release: private mappings and quantile bins are booked there, published, replayed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml

from dprelease.dp.accounting.ledger import Ledger
from dprelease.flows.release import release
from dprelease.tasks.staging import verify_release
from tests.examples import adult_example

ALLOCATION = {"bounds": 0.05, "one_way": 0.40, "selection": 0.04, "cliques": 0.46, "hierarchy": 0.05}


def _score(education: str) -> float:
    """A per-category value with one decimal (a stand-in for a public rate per category)."""
    return round(10 + (sum(map(ord, education)) % 900) / 10, 1)


@pytest.mark.e2e
def test_private_mapping_values_are_released_exactly_booked_once_and_replayed(prefect_harness, tmp_path):
    spec = adult_example(tmp_path, allocation=ALLOCATION)
    data = pq.read_table(spec.parent / "adult.parquet")
    scores = pa.array([_score(e) for e in data.column("education").to_pylist()], type=pa.float64())
    pq.write_table(data.append_column("education-score", scores), spec.parent / "adult.parquet")
    doc = yaml.safe_load((spec.parent / "schema.yaml").read_text(encoding="utf-8"))
    doc["columns"]["education-score"] = {"type": "float", "min": 0, "max": 100, "derived_from": "education",
                                         "mapping": "private", "resolution": 0.1}
    (spec.parent / "schema.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"

    target = Path(release(spec=str(spec), out=str(out), ledger=str(ledger), release_id="m1"))
    assert verify_release(target) == []
    synthetic = pq.read_table(next((target / "synthetic").glob("*.parquet")))
    pairs = set(zip(synthetic.column("education").to_pylist(), synthetic.column("education-score").to_pylist(),
                    strict=True))
    released = dict(pairs)
    assert len(released) == len(pairs)  # a function of education in the synthetic table
    counts = {row["values"]: row["counts"] for row in pc.value_counts(data.column("education")).to_pylist()}
    for education, value in released.items():
        assert 0 <= value <= 100 and round(value * 10) == value * 10
        if counts[education] >= 1500:  # P(another value) <= 1001 exp(-epsilon n / 2) < 1e-5 at this budget
            assert value == _score(education)
    with Ledger.open(ledger) as book:
        charges = book.charges(release_id="m1")
    medians = [c for c in charges if c.query == "median(education-score | education)"]
    assert len(medians) == 1 and medians[0].stage == "bounds"
    audit = json.loads((target / "audit.json").read_text())
    assert any(m["query"] == "median(education-score | education)" for m in audit["measurements"])

    # The published folder lost: a re-run replays the sealed medians (no second charge, the same values).
    shutil.rmtree(target)
    again = Path(release(spec=str(spec), out=str(out), ledger=str(ledger), release_id="m1"))
    replayed = pq.read_table(next((again / "synthetic").glob("*.parquet")))
    assert dict(zip(replayed.column("education").to_pylist(), replayed.column("education-score").to_pylist(),
                    strict=True)) == released
    with Ledger.open(ledger) as book:
        assert len(book.charges(release_id="m1")) == len(charges)


@pytest.mark.e2e
def test_a_private_mapping_groups_rows_as_the_marginals_count_them(prefect_harness, tmp_path):
    # Every Some-college row written "some college": outside the categories, mapped back by on_unknown, as the
    # marginals count it. The mapping's median used to match raw strings: that group was empty, its value noise.
    spec = adult_example(tmp_path, allocation=ALLOCATION)
    data = pq.read_table(spec.parent / "adult.parquet")
    scores = pa.array([_score(e) for e in data.column("education").to_pylist()], type=pa.float64())
    relabelled = pc.replace_substring(data.column("education"), "Some-college", "some college")
    data = data.set_column(data.schema.get_field_index("education"), "education", relabelled)
    pq.write_table(data.append_column("education-score", scores), spec.parent / "adult.parquet")
    doc = yaml.safe_load((spec.parent / "schema.yaml").read_text(encoding="utf-8"))
    doc["columns"]["education"]["on_unknown"] = "Some-college"
    doc["columns"]["education-score"] = {"type": "float", "min": 0, "max": 100, "derived_from": "education",
                                         "mapping": "private", "resolution": 0.1}
    (spec.parent / "schema.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    target = Path(release(spec=str(spec), out=str(tmp_path / "out"), ledger=str(tmp_path / "l.sqlite"),
                          release_id="m2"))
    synthetic = pq.read_table(next((target / "synthetic").glob("*.parquet")))
    released = dict(zip(synthetic.column("education").to_pylist(), synthetic.column("education-score").to_pylist(),
                        strict=True))
    assert released["Some-college"] == _score("Some-college")  # 7,291 rows: another value has P < 1e-5


@pytest.mark.e2e
def test_quantile_bins_are_released_by_the_bounds_stage_and_set_the_published_bins(prefect_harness, tmp_path):
    spec = adult_example(tmp_path, allocation=ALLOCATION)
    doc = yaml.safe_load((spec.parent / "schema.yaml").read_text(encoding="utf-8"))
    doc["columns"]["capital-gain"].update({"bins": {"quantiles": 8}, "spikes": [0]})  # SVT bounds first
    doc["columns"]["hours-per-week"]["bins"] = "quantiles"
    (spec.parent / "schema.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    target = Path(release(spec=str(spec), out=str(out), ledger=str(ledger), release_id="q1"))
    assert verify_release(target) == []
    gain = pq.read_table(target / "marginals" / "capital-gain.parquet").to_pydict()
    labels = next(iter(gain.values()))
    assert labels[0] == "0" and 2 <= len(labels) <= 8 * 2 + 1  # zero has a bin of its own, ranges above it
    hours = pq.read_table(target / "marginals" / "hours-per-week.parquet").num_rows
    assert 8 <= hours <= 32
    with Ledger.open(ledger) as book:
        levels = [c for c in book.charges(release_id="q1") if c.query.startswith("quantile bins of ")]
    assert sorted(c.query for c in levels)[:3] == [f"quantile bins of capital-gain: level {i} of 3" for i in (1, 2, 3)]
    assert len(levels) == 3 + 4 and {c.stage for c in levels} == {"bounds"}
    synthetic = pq.read_table(next((target / "synthetic").glob("*.parquet")), columns=["capital-gain"])
    share_zero = pc.mean(pc.cast(pc.equal(synthetic.column("capital-gain"), 0), pa.int64())).as_py()
    assert 0.85 < share_zero < 0.97  # the real share is 0.92: the spike is decoded exactly, not spread
    # The published folder lost: a re-run replays every level's medians (no new charge, the same bins).
    shutil.rmtree(target)
    again = Path(release(spec=str(spec), out=str(out), ledger=str(ledger), release_id="q1"))
    with Ledger.open(ledger) as book:
        assert len([c for c in book.charges(release_id="q1") if c.query.startswith("quantile bins of ")]) == 7
    replayed = pq.read_table(again / "marginals" / "capital-gain.parquet").to_pydict()
    assert next(iter(replayed.values())) == labels
