"""A dataset folder (``data:`` naming a folder of Parquet files) released like one file."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from dprelease.tasks.ingest import InputError, check_structure, dataset_schema, read_table, row_group_refs
from tests.steward import steward_of

pytestmark = pytest.mark.e2e
ADULT = Path(__file__).resolve().parents[2] / "examples" / "adult"
DATASET = "us-cps-1994-adult"


def _split(table: pa.Table, folder: Path, parts: int = 3) -> list[Path]:
    folder.mkdir()
    size = -(-table.num_rows // parts)
    files = []
    for i in range(parts):
        files.append(folder / f"part-{i}.parquet")
        pq.write_table(table.slice(i * size, size), files[-1], row_group_size=5000)
    return files


def _example(tmp: Path, table: pa.Table) -> tuple[Path, Path]:
    """A copy of the Adult example whose ``data:`` is a folder of 3 files of ``table``."""
    folder = tmp / "example"
    folder.mkdir()
    shutil.copy(ADULT / "schema.yaml", folder / "schema.yaml")
    _split(table, folder / "adult")
    doc = yaml.safe_load((ADULT / "release.yaml").read_text(encoding="utf-8"))
    doc["data"] = "adult"
    (folder / "release.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    return folder / "release.yaml", folder / "adult"


def test_a_folder_reads_as_its_files_in_name_order(tmp_path):
    table = pq.read_table(ADULT / "adult.parquet")
    _split(table, tmp_path / "d")
    assert [Path(f).name for f, _ in row_group_refs(tmp_path / "d")][:1] == ["part-0.parquet"]
    assert len(row_group_refs(tmp_path / "d")) == 3 * 3  # 10854 rows per file in row groups of 5000
    assert read_table(tmp_path / "d", ["age", "workclass"]).equals(table.select(["age", "workclass"]))


def test_hidden_files_and_a_writers_own_are_not_part_of_a_folder(tmp_path):
    """A copy from macOS leaves ``._part-0.parquet`` (AppleDouble, not Parquet) beside each file; Spark ``_SUCCESS``."""
    table = pq.read_table(ADULT / "adult.parquet")
    files = _split(table, tmp_path / "d")
    (tmp_path / "d" / "._part-0.parquet").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X")
    shutil.copy(files[0], tmp_path / "d" / "_part-0.parquet")  # a writer's leftover: its rows are not counted twice
    for name in (".DS_Store", "_SUCCESS", ".part-0.parquet.crc"):
        (tmp_path / "d" / name).write_bytes(b"\x00")
    assert [Path(f).name for f, _ in row_group_refs(tmp_path / "d")][::3] == [f.name for f in files]
    assert read_table(tmp_path / "d", ["age"]).num_rows == table.num_rows


def test_the_preflight_says_how_many_files_of_a_folder_it_skips(tmp_path, caplog):
    from dprelease.schemas.spec import load_spec
    from dprelease.tasks.preflight import check_data_files
    from tests.examples import adult_example

    files = _split(pq.read_table(ADULT / "adult.parquet"), tmp_path / "d")
    shutil.copy(files[0], tmp_path / "d" / "_part-0.parquet")
    shutil.copy(files[1], tmp_path / "d" / ".part-1.parquet")
    spec = load_spec(adult_example(tmp_path, data=str(tmp_path / "d")))
    with caplog.at_level(logging.WARNING, logger="dprelease"):
        check_data_files(spec)
    assert [r.getMessage() for r in caplog.records] == [
        "data d: 2 file(s) named *.parquet beginning with . or _ are not part of the dataset (hidden files and a "
        "writer's own are skipped)"]


def test_files_that_disagree_in_schema_are_named_with_the_first_differing_column(tmp_path):
    table = pq.read_table(ADULT / "adult.parquet")
    files = _split(table, tmp_path / "d")
    odd = pq.read_table(files[1])
    odd = odd.set_column(odd.column_names.index("hours-per-week"), "hours-per-week",
                         odd.column("hours-per-week").cast(pa.float64()))
    pq.write_table(odd, files[1])
    with pytest.raises(InputError) as info:
        dataset_schema(tmp_path / "d")
    assert "part-1.parquet: column 'hours-per-week' is double where part-0.parquet has int64" in str(info.value)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match=r"no \*\.parquet file"):
        check_structure(empty, None)  # type: ignore[arg-type]


@pytest.mark.parametrize(("change", "said"), [
    (lambda t: t.cast(pa.schema([f.with_nullable(f.name == "age" or f.nullable) for f in t.schema])),
     "column 'age' is nullable where part-0.parquet has it required (not null)"),
    (lambda t: t.select([*t.column_names[1:], "age"]), "column 1 is 'workclass' where part-0.parquet has 'age'"),
    (lambda t: t.drop_columns(["income"]), "column 'income' of part-0.parquet is missing"),
    (lambda t: t.append_column("extra", pa.nulls(t.num_rows, pa.int8())), "column 'extra' is not in part-0.parquet"),
    (lambda t: t.append_column("x" * 10_000, pa.nulls(t.num_rows, pa.int8())),
     f"column {'x' * 128!r}... is not in part-0.parquet"),  # a name written by a program: one line still
])
def test_a_folder_file_that_disagrees_is_told_how(tmp_path, change, said):
    """Files of the same types read "column 'age' does not match" when a writer marked a column required."""
    files = _split(pq.read_table(ADULT / "adult.parquet"), tmp_path / "d")
    pq.write_table(change(pq.read_table(files[2])), files[2])
    with pytest.raises(InputError) as info:
        dataset_schema(tmp_path / "d")
    rule = "every file of a dataset folder must have the same Arrow schema"
    assert str(info.value) == f"d/part-2.parquet: {said} ({rule})"


@pytest.fixture(scope="module")
def folder_release(prefect_harness, tmp_path_factory):
    from dprelease.flows.release import release

    tmp = tmp_path_factory.mktemp("folder")
    spec, _ = _example(tmp, pq.read_table(ADULT / "adult.parquet"))
    target = release(spec=str(spec), out=str(tmp / "out"), ledger=str(tmp / "ledger.sqlite"), release_id="r-folder")
    return Path(target)


def test_a_release_of_adult_split_into_three_files(folder_release):
    table = pq.read_table(folder_release / "synthetic" / "adult.parquet")
    assert table.num_rows > 30_000
    fingerprint = json.loads((steward_of(folder_release) / "input.json").read_text())
    assert fingerprint["folder"] == "adult" and fingerprint["rows"] == 32561
    assert [f["file"] for f in fingerprint["files"]] == ["part-0.parquet", "part-1.parquet", "part-2.parquet"]
    handling = json.loads((steward_of(folder_release) / "row_handling.json").read_text())
    assert handling["rows_in"] == 32561


def test_a_folder_whose_files_disagree_is_refused_before_any_noise(prefect_harness, tmp_path):
    from dprelease.flows.release import release

    spec, folder = _example(tmp_path, pq.read_table(ADULT / "adult.parquet"))
    odd = pq.read_table(folder / "part-2.parquet").drop_columns(["education"])
    pq.write_table(odd, folder / "part-2.parquet")
    ledger = tmp_path / "ledger.sqlite"
    with pytest.raises(InputError) as info:
        release(spec=str(spec), out=str(tmp_path / "out"), ledger=str(ledger), release_id="r-odd")
    assert "part-2.parquet" in str(info.value) and "education" in str(info.value)
    # Preflight refuses it before the ledger is even created: nothing reserved, nothing charged.
    assert not ledger.exists()
