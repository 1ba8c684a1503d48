"""Data nobody here designed: extreme values and labels outside every domain still publish, quietly."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from dprelease.flows.release import release
from tests.steward import steward_of

ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT / "examples" / "adult"
DATASET = "us-cps-1994-adult"
OUTLIER = 2**53 + 1  # a valid int64 that no double holds exactly


def _example(folder: Path, table: pa.Table, spec: str = "release.yaml") -> Path:
    folder.mkdir(parents=True)
    shutil.copy(ADULT / "schema.yaml", folder / "schema.yaml")
    shutil.copy(ADULT / spec, folder / "release.yaml")
    pq.write_table(table, folder / "adult.parquet")
    return folder / "release.yaml"


def _set(table: pa.Table, name: str, values: list) -> pa.Table:
    index = table.column_names.index(name)
    return table.set_column(index, name, pa.array(values, table.schema.field(index).type))


@pytest.mark.e2e
def test_one_extreme_row_does_not_decide_publication(prefect_harness, tmp_path, caplog):
    table = pq.read_table(ADULT / "adult.parquet").slice(0, 4000)
    gains = table.column("capital-gain").to_pylist()
    gains[7] = OUTLIER
    # the spec with summary statistics: capital-gain's mean reads the column too (no checked cast to double)
    spec = _example(tmp_path / "example", _set(table, "capital-gain", gains), "release-stats.yaml")
    target = Path(release(spec=str(spec), out=str(tmp_path / "out"), ledger=str(tmp_path / "ledger.sqlite"),
                          release_id="outlier"))
    assert (target / "manifest.json").is_file()
    needle = str(OUTLIER).encode()
    public = [p for p in target.rglob("*") if p.is_file()]  # a release folder holds public files only
    assert [str(p) for p in public if needle in p.read_bytes()] == []
    assert str(OUTLIER) not in caplog.text
    assert (target / "statistics" / "statistics.json").is_file()
    assert not (steward_of(target) / "evaluation-error.txt").exists()  # the true statistics read it too


@pytest.mark.e2e
@pytest.mark.slow  # 30 s on 2 cores; test_one_extreme_row_does_not_decide_publication covers the default run
def test_columns_full_of_labels_outside_their_domain_publish_in_bounded_memory(prefect_harness, tmp_path):
    """Every value of three category columns is a fresh label: dense joint counts would need ~10¹¹ cells."""
    table = pq.read_table(ADULT / "adult.parquet").slice(0, 5000)
    for name in ("occupation", "workclass", "native-country"):
        table = table.set_column(table.column_names.index(name), name,
                                 pa.array([f"{name}-{i}" for i in range(table.num_rows)], pa.string()))
    spec = _example(tmp_path / "example", table)
    target = Path(release(spec=str(spec), out=str(tmp_path / "out"), ledger=str(tmp_path / "ledger.sqlite"),
                          release_id="labels"))
    assert (target / "manifest.json").is_file()
    utility = steward_of(target) / "utility.json"
    assert utility.is_file(), "the internal evaluation ran and wrote its utility report"
    assert json.loads(utility.read_text())["tvd1"] > 0


@pytest.mark.e2e
def test_marginals_of_columns_whose_names_join_alike_are_all_published(prefect_harness, tmp_path):
    """The 1-way of ``a__b`` and the 2-way of ``a`` and ``b`` (and ``A``'s 1-way beside ``a``'s) are separate files."""
    folder = tmp_path / "example"
    folder.mkdir()
    names = ["a", "b", "a__b", "A"]
    category = {"type": "category", "categories": ["x", "y"]}
    schema = {"table": "t", "columns": {name: category for name in names}}
    spec = {"dataset": "joined-names", "schema": "schema.yaml", "data": "t.parquet",
            "budget": {"epsilon": 1, "delta": 1e-9}, "lifetime_budget": {"epsilon": 1, "delta": 1e-9},
            "allocation": {"one_way": 0.5, "two_way": 0.5}, "two_way": [["a", "b"]]}
    (folder / "schema.yaml").write_text(yaml.safe_dump(schema), encoding="utf-8")
    (folder / "release.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    pq.write_table(pa.table({name: [("x", "y")[(i >> k) % 2] for i in range(400)]
                             for k, name in enumerate(names)}), folder / "t.parquet")
    target = Path(release(spec=str(folder / "release.yaml"), out=str(tmp_path / "out"),
                          ledger=str(tmp_path / "ledger.sqlite"), release_id="joined"))
    listed = [f["path"] for f in json.loads((target / "manifest.json").read_text())["files"]]
    marginals = sorted(tuple(pq.read_schema(target / path).names[:-1]) for path in listed
                       if path.startswith("marginals/"))
    assert marginals == [("A",), ("a",), ("a", "b"), ("a__b",), ("b",)]
