"""The ldp-collect flow: simulated batches of randomised reports decoded end to end; bad batches refused and counted."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from dprelease.dp.local.bits import SeededBits
from dprelease.dp.local.simulate import STATES, population
from dprelease.flows.cli import main
from dprelease.schemas.ldp import CollectionError, encode_batch, load_collection

pytestmark = pytest.mark.e2e
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ldp-covid"


def _collection(tmp_path: Path, spec: str = "collection.yaml", people: int = 20_000, days: int = 2) -> Path:
    folder = tmp_path / "ldp"
    folder.mkdir(exist_ok=True)
    shutil.copy(EXAMPLE / spec, folder / spec)
    collection = load_collection(folder / spec)
    collection.batches.mkdir(parents=True, exist_ok=True)
    for day in range(days):
        codes = population(people // days, seed=100 + day)
        batch = encode_batch(collection, codes, SeededBits(200 + day), first_id=day * people, prefix="r")
        pq.write_table(batch, collection.batches / f"day-{day + 1}.parquet")
    return folder / spec


@pytest.mark.parametrize("spec", ["collection.yaml", "rappor.yaml"])
def test_a_collection_is_decoded_and_published_with_its_guarantee(prefect_harness, tmp_path, spec):
    from dprelease.flows.ldp_collect import ldp_collect

    path = _collection(tmp_path, spec, people=40_000)
    target = Path(ldp_collect(spec=str(path), out=str(tmp_path / "out"), registry=str(tmp_path / "reg.sqlite"),
                              run_id="day2"))
    assert {p.name for p in target.iterdir()} == {"estimates.parquet", "estimates.csv", "chart.svg", "audit.json",
                                                  "manifest.json"}
    chart = ET.parse(target / "chart.svg").getroot()  # a standalone SVG file: namespace declared
    assert chart.tag == "{http://www.w3.org/2000/svg}svg" and len(chart.findall("{http://www.w3.org/2000/svg}rect")) > 1
    audit = json.loads((target / "audit.json").read_text())
    assert audit["batches"]["reports_used"] == 40_000 and audit["batches"]["refused"] == {}
    estimates = pq.read_table(target / "estimates.parquet").to_pandas()
    truth = np.bincount(np.concatenate([population(20_000, seed=100), population(20_000, seed=101)]),
                        minlength=len(STATES))
    if spec == "collection.yaml":
        assert audit["guarantee"]["epsilon_per_report"] <= np.log(3)
        z = (estimates["estimate"].to_numpy() - truth) / estimates["std"].to_numpy()
        assert np.abs(z).max() < 4.5
        covered = (estimates["low95"] <= truth) & (truth <= estimates["high95"])
        assert covered.mean() > 0.8
    else:
        assert audit["guarantee"]["epsilon_one_report"] == pytest.approx(1.0460, abs=1e-3)
        assert audit["guarantee"]["epsilon_longitudinal"] == pytest.approx(1.8765, abs=1e-3)
        assert estimates["detected"].iloc[0] and audit["estimation"]["detected"] >= 3
        assert "two-stage per-family correction" in audit["estimation"]["method"]  # the flow's default


def test_bad_batches_are_refused_counted_and_left_in_place(prefect_harness, tmp_path):
    from dprelease.flows.ldp_collect import ldp_collect

    path = _collection(tmp_path, people=10_000, days=2)
    collection = load_collection(path)
    good = pq.read_table(collection.batches / "day-1.parquet")
    wrong = good.set_column(1, "params", pa.array(["0123456789abcdef"] * good.num_rows))
    pq.write_table(wrong, collection.batches / "wrong-params.parquet")
    bits = good.column("bits").to_pylist()
    bits[3] = bits[3][:-1]
    pq.write_table(good.set_column(good.column_names.index("bits"), "bits", pa.array(bits)),
                   collection.batches / "short-vector.parquet")
    ids = good.column("report_id").to_pylist()
    ids[5] = ids[4]
    pq.write_table(good.set_column(0, "report_id", pa.array(ids)).slice(0, 100), collection.batches / "dup-in.parquet")
    pq.write_table(good.slice(0, 50), collection.batches / "dup-across.parquet")  # ids of day-1 again
    pq.write_table(good.slice(0, 0), collection.batches / "empty.parquet")
    (collection.batches / "junk.parquet").write_bytes(b"not parquet")
    before = sorted(p.name for p in collection.batches.iterdir())
    target = Path(ldp_collect(spec=str(path), out=str(tmp_path / "out"), registry=str(tmp_path / "reg.sqlite")))
    audit = json.loads((target / "audit.json").read_text())
    refused = audit["batches"]["refused"]
    assert sorted(audit["batches"]["accepted"]) == ["day-1.parquet", "day-2.parquet"]
    assert set(refused) == {"wrong-params.parquet", "short-vector.parquet", "dup-in.parquet", "dup-across.parquet",
                            "empty.parquet", "junk.parquet"}
    assert any("'params'" in p for p in refused["wrong-params.parquet"])
    assert any("'bits'" in p for p in refused["short-vector.parquet"])
    assert any("Unique" in p for p in refused["dup-in.parquet"])
    assert any("already used in batch day-1.parquet" in p for p in refused["dup-across.parquet"])
    assert any("RowCount" in p for p in refused["empty.parquet"])
    assert audit["batches"]["reports_used"] == 10_000
    assert sorted(p.name for p in collection.batches.iterdir()) == before  # nothing deleted or moved
    assert load_collection(path).fingerprint() != "0123456789abcdef"


def test_changed_parameters_and_no_accepted_batch_are_refused(prefect_harness, tmp_path):
    from dprelease.flows.ldp_collect import ldp_collect

    path = _collection(tmp_path, people=2_000, days=1)
    registry = str(tmp_path / "reg.sqlite")
    ldp_collect(spec=str(path), out=str(tmp_path / "out"), registry=registry, run_id="first")
    doc = yaml.safe_load(path.read_text())
    doc["epsilon"] = 2.0
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(CollectionError, match="parameters are fixed"):
        ldp_collect(spec=str(path), out=str(tmp_path / "out"), registry=registry, run_id="second")
    doc["collection"] = "fresh-collection"
    path.write_text(yaml.safe_dump(doc))  # a new collection at epsilon 2: the old batches carry another fingerprint
    with pytest.raises(CollectionError, match=r"no batch .* was accepted"):
        ldp_collect(spec=str(path), out=str(tmp_path / "out"), registry=registry, run_id="third")


def test_a_bad_collection_spec_is_one_line_and_exit_2(tmp_path, capsys):
    spec = tmp_path / "c.yaml"
    spec.write_text("collection: x\nprotocol: OUE\nepsilon: '1'\nvalues: [a, b]\nbatches: r/\n")
    assert main(["ldp-collect", str(spec)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "epsilon" in err[0] and "must be a number" in err[0]
    spec.write_text("collection: x\nprotocol: OUE\nepsilon: 1\nvalues: [a, b]\nbatches: 's3://bucket/r/'\n")
    assert main(["ldp-collect", str(spec)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "batches: ('s3://bucket/r/') is a URL; dprelease reads local files" in err[0], err


def _renumbered(table: pa.Table, prefix: str) -> pa.Table:
    return table.set_column(0, "report_id", pa.array([f"{prefix}{i}" for i in range(table.num_rows)]))


def _with(table: pa.Table, column: str, values: pa.Array) -> pa.Table:
    return table.set_column(table.column_names.index(column), column, values)


def test_reports_that_only_look_well_formed_are_refused(tmp_path):
    from dprelease.tasks.ldp import aggregate, check_batches

    path = _collection(tmp_path, people=1_000, days=1)
    collection = load_collection(path)
    good = pq.read_table(collection.batches / "day-1.parquet")
    bits = good.column("bits").to_pylist()
    newline = _with(good, "bits", pa.array([b[:-1] + "\n" for b in bits]))  # '$' matches before a final newline
    pq.write_table(_renumbered(newline, "nl"), collection.batches / "newline.parquet")
    no_params = _with(good, "params", pa.array([None] * good.num_rows, pa.string()))
    pq.write_table(_renumbered(no_params, "np"), collection.batches / "null-params.parquet")
    pq.write_table(_renumbered(_with(good, "bits", pa.array([b.encode() for b in bits], pa.binary())), "bin"),
                   collection.batches / "binary-bits.parquet")
    pq.write_table(_renumbered(good.drop(["params"]), "nop"), collection.batches / "no-params.parquet")
    (collection.batches / "folder.parquet").mkdir()  # pyarrow would read a folder as a dataset
    shutil.copy(collection.batches / "day-1.parquet", collection.batches / "x\n\x1b[2J.parquet")  # one-line output
    checks = {c.name: c for c in check_batches(collection)}
    assert [name for name, c in checks.items() if c.accepted] == ["day-1.parquet"]
    assert checks["newline.parquet"].problems == ["column 'bits': ColumnValuesToMatchRegex"]
    assert checks["null-params.parquet"].problems == ["column 'params': ColumnValuesToNotBeNull"]
    assert checks["binary-bits.parquet"].problems == ["column 'bits': must be a string (is binary)"]
    assert checks["no-params.parquet"].problems == ["column 'params': ColumnToExist"]  # not first NotBeNull
    assert checks["folder.parquet"].problems == ["not a regular file"]
    assert checks["x\\n\\x1b[2J.parquet"].problems == ["file name must be printable (no control character)"]
    support = aggregate(collection, [checks["day-1.parquet"]])["support"]
    assert support.sum() == sum(b.count("1") for b in bits)


@pytest.mark.parametrize(("protocol", "column", "array"), [
    ("OLH", "seed", lambda t: pa.array(t.column("seed").to_numpy().astype(float))),  # rounded to another hash
    ("OLH", "seed", lambda t: pa.array([str(s) for s in t.column("seed").to_pylist()])),
    ("GRR", "value", lambda t: pa.array([bool(v % 2) for v in t.column("value").to_pylist()])),
    ("GRR", "value", lambda t: pa.array(t.column("value").to_numpy().astype(float))),
])
def test_a_payload_of_another_type_is_refused_by_its_type(tmp_path, protocol, column, array):
    from dprelease.tasks.ldp import check_batches

    path = _collection(tmp_path, people=500, days=1)
    doc = yaml.safe_load(path.read_text())
    doc.update(protocol=protocol, collection=f"typed-{protocol.lower()}")
    path.write_text(yaml.safe_dump(doc))
    collection = load_collection(path)
    good = encode_batch(collection, population(500, seed=3), SeededBits(4), prefix="g")
    pq.write_table(good, collection.batches / "day-1.parquet")
    bad = _renumbered(_with(good, column, array(good)), "x")
    pq.write_table(bad, collection.batches / "typed.parquet")
    checks = {c.name: c for c in check_batches(collection)}
    assert checks["day-1.parquet"].accepted
    kind = bad.schema.field(column).type
    assert checks["typed.parquet"].problems == [f"column {column!r}: must be an integer (is {kind})"]


def test_a_run_that_accepts_no_batch_registers_nothing(prefect_harness, tmp_path):
    from dprelease.flows.ldp_collect import ldp_collect

    path = _collection(tmp_path, people=1_000, days=1)
    registry = tmp_path / "reg.sqlite"
    right = path.read_text()
    doc = yaml.safe_load(right)
    doc["epsilon"] = 2.0  # a typo: the devices report at ln 3
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(CollectionError, match=r"no batch .* was accepted \(day-1.parquet: column 'params'"):
        ldp_collect(spec=str(path), out=str(tmp_path / "out"), registry=str(registry), run_id="typo")
    path.write_text(right)  # corrected: the collection was not fixed to the typo
    target = Path(ldp_collect(spec=str(path), out=str(tmp_path / "out"), registry=str(registry), run_id="fixed"))
    assert json.loads((target / "audit.json").read_text())["batches"]["reports_used"] == 1_000


def _registry_rows(registry: Path) -> list[tuple[str, ...]]:
    import sqlite3

    db = sqlite3.connect(registry)
    try:
        return [tuple(map(str, row)) for row in db.execute("SELECT * FROM sqlite_master")]
    finally:
        db.close()


@pytest.mark.parametrize("mistake", ["no-folder", "empty-folder", "out-is-a-file", "registry-is-a-folder",
                                     "registry-not-sqlite", "registry-of-another-application", "published-run-id",
                                     "out-above-the-batches", "out-among-the-batches"])
def test_a_mistake_that_needs_no_report_is_one_line_exit_2_and_registers_nothing(tmp_path, capsys, mistake):
    import sqlite3

    path = _collection(tmp_path, people=200, days=1)
    batches = load_collection(path).batches
    out, registry = tmp_path / "out", tmp_path / "reg.sqlite"
    if mistake == "no-folder":
        shutil.rmtree(batches)
    elif mistake == "empty-folder":
        (batches / "day-1.parquet").unlink()
    elif mistake == "out-is-a-file":
        out.write_text("")
    elif mistake == "registry-is-a-folder":
        registry.mkdir()
    elif mistake == "registry-not-sqlite":
        registry.write_text("not a database\n" * 100)
    elif mistake in ("out-above-the-batches", "out-among-the-batches"):
        out = batches.parent if mistake == "out-above-the-batches" else batches / "public"
    elif mistake == "registry-of-another-application":
        db = sqlite3.connect(registry)
        db.execute("CREATE TABLE datasets (name TEXT)")
        db.commit()
        db.close()
    else:
        (out / "covid-states" / "day1").mkdir(parents=True)  # no manifest: it does not verify
    before = _registry_rows(registry) if registry.is_file() and mistake != "registry-not-sqlite" else None
    code = main(["ldp-collect", str(path), "--out", str(out), "--registry", str(registry), "--run-id", "day1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    expected = {"no-folder": "does not exist", "empty-folder": "holds no *.parquet batch",
                "out-is-a-file": "is not a folder", "registry-is-a-folder": "must be a file",
                "registry-not-sqlite": "is not an SQLite database",
                "published-run-id": "already published but does not verify",
                "registry-of-another-application": "is an SQLite database of something else",
                "out-above-the-batches": "must lie apart from the batch folder",
                "out-among-the-batches": "must lie apart from the batch folder"}[mistake]
    assert expected in err[0]
    if before is not None:
        assert _registry_rows(registry) == before  # another application's database is left untouched
    elif mistake != "registry-is-a-folder" and mistake != "registry-not-sqlite":
        assert not registry.exists()


def test_a_batch_replaced_after_its_check_is_not_counted(tmp_path):
    from dprelease.tasks.ldp import aggregate, check_batches

    path = _collection(tmp_path, people=400, days=2)
    collection = load_collection(path)
    checks = check_batches(collection)
    assert all(c.accepted for c in checks)
    other = load_collection(path)  # the same format, other reports: only the bytes tell them apart
    pq.write_table(encode_batch(other, population(200, seed=9), SeededBits(9), prefix="late"),
                   collection.batches / "day-2.parquet")
    with pytest.raises(CollectionError, match=r"^batch day-2.parquet: changed since it was checked"):
        aggregate(collection, checks)
    assert aggregate(collection, checks[:1])["reports"] == 200


@pytest.mark.parametrize("spec", ["collection.yaml", "rappor.yaml"])
def test_counting_in_slices_gives_the_counts_of_whole_batches(tmp_path, monkeypatch, spec):
    from dprelease.tasks import ldp

    path = _collection(tmp_path, spec, people=1_000, days=2)
    collection = load_collection(path)
    checks = ldp.check_batches(collection)
    whole = ldp.aggregate(collection, checks)
    monkeypatch.setattr(ldp, "CHUNK_CELLS", 7 * 32)  # 7 reports a slice: slices end inside each batch
    sliced = ldp.aggregate(collection, checks)
    assert whole["reports"] == sliced["reports"] == 1_000
    for key in ("support", "counts", "per_cohort"):
        if key in whole:
            assert (whole[key] == sliced[key]).all() and whole[key].sum() > 0


@pytest.mark.parametrize(("limit", "value"), [("CHECK_ROWS", 100), ("CHECK_CELLS", 26 * 100)])
def test_a_batch_checked_in_slices_is_refused_for_a_fault_in_any_slice(tmp_path, monkeypatch, limit, value):
    from dprelease.tasks import ldp

    monkeypatch.setattr(ldp, limit, value)  # a batch of 500 reports of 26 bits is checked in 5 slices
    slices: list[int] = []
    check_file = ldp._check_file

    def counted(path, collection, validate, seen):
        return check_file(path, collection, lambda frame: slices.append(len(frame)) or validate(frame), seen)

    monkeypatch.setattr(ldp, "_check_file", counted)
    path = _collection(tmp_path, people=500, days=1)
    collection = load_collection(path)
    good = pq.read_table(collection.batches / "day-1.parquet")
    ids = good.column("report_id").to_pylist()
    ids[450] = ids[10]  # the same id in the first and the fifth slice
    pq.write_table(_renumbered(good, "a").set_column(0, "report_id", pa.array([f"a{i}" for i in ids])),
                   collection.batches / "repeated-id.parquet")
    bits = good.column("bits").to_pylist()
    bits[480] = "2" + bits[480][1:]
    pq.write_table(_renumbered(_with(good, "bits", pa.array(bits)), "b"), collection.batches / "late-fault.parquet")
    checks = {c.name: c for c in ldp.check_batches(collection)}
    assert checks["day-1.parquet"].accepted and checks["day-1.parquet"].rows == 500
    assert checks["repeated-id.parquet"].problems == ["column 'report_id': ColumnValuesToBeUnique"]
    assert checks["late-fault.parquet"].problems == ["column 'bits': ColumnValuesToMatchRegex"]
    assert ldp.aggregate(collection, [checks["day-1.parquet"]])["reports"] == 500
    assert slices == [100] * 15


def test_a_batch_with_a_sound_footer_and_a_damaged_page_is_refused_with_no_rows(tmp_path):
    from dprelease.tasks.ldp import check_batches

    path = _collection(tmp_path, people=2_000, days=1)
    batches = load_collection(path).batches
    data = bytearray((batches / "day-1.parquet").read_bytes())
    for i in range(len(data) // 3, len(data) // 3 + 2_000):  # inside the pages: the footer still reads
        data[i] ^= 0x5A
    (batches / "damaged.parquet").write_bytes(bytes(data))
    assert pq.ParquetFile(batches / "damaged.parquet").metadata.num_rows == 2_000
    checks = {c.name: c for c in check_batches(load_collection(path))}
    assert (checks["damaged.parquet"].rows, checks["damaged.parquet"].problems[0][:29]) == (
        0, "not a readable Parquet file (")


def test_staging_folders_of_killed_runs_are_swept_and_a_running_ones_kept(tmp_path):
    from dprelease.dp.accounting.processes import release_lock
    from dprelease.flows.ldp_collect import STAGING_MARK, sweep_stagings

    folder, registry = tmp_path / "out" / "covid-states", tmp_path / "reg.sqlite"
    for rid in ("dead", "running", "foreign"):
        (folder / f".staging-{rid}").mkdir(parents=True)
        (folder / f".staging-{rid}" / "estimates.parquet").write_bytes(b"half written")
    for rid in ("dead", "running"):
        (folder / f".staging-{rid}" / STAGING_MARK).write_text(rid)
    with release_lock(registry, "covid-states.running"):  # a run of another process, still going
        sweep_stagings(folder, registry, "covid-states")
    assert sorted(p.name for p in folder.iterdir()) == [".staging-foreign", ".staging-running"]  # not ours: kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no lock file left beside the registry


def test_a_published_run_id_run_again_is_verified_exit_0_and_refused_in_one_line_when_it_does_not_verify(
        prefect_harness, tmp_path, capsys):
    from dprelease.flows.ldp_collect import ldp_collect

    path = _collection(tmp_path, people=2_000, days=1)
    out, registry = tmp_path / "out", tmp_path / "reg.sqlite"
    target = Path(ldp_collect(spec=str(path), out=str(out), registry=str(registry), run_id="day1"))
    published = {p.name: p.read_bytes() for p in target.iterdir()}
    argv = ["ldp-collect", str(path), "--out", str(out), "--registry", str(registry), "--run-id", "day1"]
    capsys.readouterr()
    assert main(argv) == 0  # as `release` of a published id: verified, nothing run
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert len(lines) == 1 and "covid-states run day1 is already published and verifies" in lines[0], lines
    assert not captured.err.strip()
    assert ldp_collect(spec=str(path), out=str(out), registry=str(registry), run_id="day1") == str(target)
    assert {p.name: p.read_bytes() for p in target.iterdir()} == published
    for damage in ("edited", "added"):
        if damage == "edited":
            (target / "estimates.csv").write_text("value,estimate\nCA,1\n")
            expected = "estimates.csv: SHA-256 does not match the manifest"
        else:
            (target / "estimates.csv").write_bytes(published["estimates.csv"])
            (target / "extra.txt").write_text("x")
            expected = "extra.txt: not listed in the manifest"
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "already published but does not verify" in err[0] and expected in err[0], err
        with pytest.raises(CollectionError, match=re.escape(expected)):
            ldp_collect(spec=str(path), out=str(out), registry=str(registry), run_id="day1")
    assert (target / "extra.txt").read_text() == "x"  # nothing of it removed or rewritten


def test_an_olh_collection_beyond_the_decoding_limit_is_one_line_before_anything_is_registered(
        tmp_path, capsys, monkeypatch):
    from dprelease.tasks.ldp_registry import preflight

    folder = tmp_path / "ldp"
    folder.mkdir()
    doc = yaml.safe_load((EXAMPLE / "collection.yaml").read_text())
    doc["protocol"] = "OLH"
    (folder / "olh.yaml").write_text(yaml.safe_dump(doc))
    collection = load_collection(folder / "olh.yaml")
    collection.batches.mkdir()
    for day in (1, 2):
        batch = encode_batch(collection, population(500, seed=day), SeededBits(day), first_id=day * 500, prefix="r")
        pq.write_table(batch, collection.batches / f"day-{day}.parquet")
    out, registry = tmp_path / "out", tmp_path / "reg.sqlite"
    monkeypatch.setattr("dprelease.tasks.ldp_registry.MAX_OLH_CELLS", 1000 * 26 - 1)
    code = main(["ldp-collect", str(folder / "olh.yaml"), "--out", str(out), "--registry", str(registry)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert (f"olh.yaml: values: OLH hashes every report with every value, and 1000 reports in {collection.batches} "
            "x 26 values is above the limit of 25,999 per run") in err[0]
    assert not registry.exists() and not out.exists()
    monkeypatch.setattr("dprelease.tasks.ldp_registry.MAX_OLH_CELLS", 1000 * 26)  # at the limit: it runs
    assert preflight(folder / "olh.yaml", out, registry, None) == collection


def test_a_batch_repeating_report_ids_is_refused_by_arrival_never_by_its_file_name(prefect_harness, tmp_path):
    import os

    from dprelease.flows.ldp_collect import ldp_collect
    from dprelease.tasks.ldp import check_batches

    path = _collection(tmp_path, people=2_000, days=1)
    collection = load_collection(path)
    out, registry = str(tmp_path / "out"), str(tmp_path / "reg.sqlite")
    first = Path(ldp_collect(spec=str(path), out=out, registry=registry, run_id="first"))
    assert json.loads((first / "audit.json").read_text())["batches"]["accepted"] == ["day-1.parquet"]
    # A client's retry re-sends 50 reports of day 1, in a file whose name sorts first.
    day1 = pq.read_table(collection.batches / "day-1.parquet")
    pq.write_table(day1.slice(0, 50), collection.batches / "0-retry.parquet")
    again = Path(ldp_collect(spec=str(path), out=out, registry=registry, run_id="again"))
    batches = json.loads((again / "audit.json").read_text())["batches"]
    assert batches["accepted"] == ["day-1.parquet"] and batches["reports_used"] == 2_000  # the day is kept
    assert batches["refused"] == {"0-retry.parquet": ["column 'report_id': report ids already used in batch "
                                                      "day-1.parquet"]}
    # With no run before (nothing registered), the batch that arrived first keeps its ids.
    os.utime(collection.batches / "0-retry.parquet", ns=(2_000_000_000 * 10**9,) * 2)  # arrived after day 1
    os.utime(collection.batches / "day-1.parquet", ns=(1_000_000_000 * 10**9,) * 2)
    checks = {c.name: c for c in check_batches(collection)}
    assert checks["day-1.parquet"].accepted and not checks["0-retry.parquet"].accepted
