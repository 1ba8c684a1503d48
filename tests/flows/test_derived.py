"""Public dependencies in a release: categories derived from a category or a number hold exactly, at no cost."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from dprelease.dp.accounting.ledger import Ledger
from dprelease.flows.release import release
from dprelease.tasks.staging import verify_release
from tests.examples import adult_example

GROUPS = {"young": [17, 30], "middle": [30, 60], "senior": [60, 91]}
SCHOOLING = {"Bachelors": "college", "Masters": "college", "Doctorate": "college", "Prof-school": "college",
             "Assoc-acdm": "college", "Assoc-voc": "college", "Some-college": "college"}


def _group(age: int) -> str:
    return next(name for name, (low, high) in GROUPS.items() if low <= age < high)


@pytest.mark.e2e
def test_derived_categories_hold_exactly_in_the_synthetic_table_and_cost_nothing(prefect_harness, tmp_path):
    spec = adult_example(tmp_path, rows=8000)  # derived columns hold exactly whatever the table's size
    data = pq.read_table(spec.parent / "adult.parquet")
    doc = yaml.safe_load((spec.parent / "schema.yaml").read_text(encoding="utf-8"))
    education = doc["columns"]["education"]["categories"]
    data = data.append_column("age-group", pa.array([_group(a) for a in data.column("age").to_pylist()]))
    data = data.append_column("schooling", pa.array([SCHOOLING.get(e, "school")
                                                     for e in data.column("education").to_pylist()]))
    pq.write_table(data, spec.parent / "adult.parquet")
    doc["columns"]["age-group"] = {"type": "category", "categories": list(GROUPS), "derived_from": "age",
                                   "ranges": GROUPS}
    doc["columns"]["schooling"] = {"type": "category", "categories": ["school", "college"],
                                   "derived_from": "education",
                                   "mapping": {e: SCHOOLING.get(e, "school") for e in education}}
    (spec.parent / "schema.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    target = Path(release(spec=str(spec), out=str(out), ledger=str(ledger), release_id="d1"))
    assert verify_release(target) == []
    synthetic = pq.read_table(next((target / "synthetic").glob("*.parquet"))).to_pydict()
    assert synthetic["age-group"] == [_group(a) for a in synthetic["age"]]
    assert synthetic["schooling"] == [SCHOOLING.get(e, "school") for e in synthetic["education"]]
    with Ledger.open(ledger) as book:
        queries = {c.query for c in book.charges(release_id="d1")}
    assert not any("age-group" in q or "schooling" in q for q in queries)  # derived: never measured
