"""Release ids are identifiers, public and steward folders are apart, verify is strict, modes ignore the umask."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from dprelease.flows.cli import main
from dprelease.schemas.identifiers import FolderError, IdentifierError, check_identifier, inside
from dprelease.schemas.model import SchemaError
from dprelease.schemas.spec import load_spec
from dprelease.tasks.ingest import InputError
from dprelease.tasks.preflight import check_apart_from_output, check_steward_root
from dprelease.tasks.staging import STAGING_RECORD, create_staging, create_steward, manifest_seal, verify_release
from tests.examples import adult_example
from tests.steward import steward_of

ADULT = Path(__file__).resolve().parents[2] / "examples" / "adult"
DATASET = "us-cps-1994-adult"
HOSTILE_IDS = ["../../good1", "../../../../../../../x/victim", ".staging-foo", "/tmp/abs", "a/b", "id\nnext", "..",
               ".", "", "-rf", "x" * 129, "a b", "caf\u00e9"]


@pytest.mark.parametrize("rid", HOSTILE_IDS)
def test_a_hostile_release_id_is_refused(rid):
    with pytest.raises(IdentifierError) as info:
        check_identifier("release id", rid)
    message = str(info.value)
    assert message.startswith("release id ") and "\n" not in message and len(message) < 300


@pytest.mark.parametrize("rid", ["20261124T135157Z-a97987", "good1", "r_1.2-b", "A" * 128])
def test_ordinary_ids_are_identifiers(rid):
    assert check_identifier("release id", rid) == rid


@pytest.mark.parametrize("rid", ["../../good1", "/tmp/abs", "a/b", "id\nnext", ".staging-foo"])
def test_the_command_refuses_a_hostile_id_before_anything_starts(tmp_path, capsys, rid):
    spec = adult_example(tmp_path)
    (tmp_path / "out" / DATASET / "good1").mkdir(parents=True)
    (tmp_path / "out" / DATASET / "good1" / "keep.txt").write_text("published")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    with pytest.raises(SystemExit) as info:
        main(["release", str(spec), "--out", str(tmp_path / "out"), "--ledger", str(tmp_path / "l.sqlite"),
              "--release-id", rid])
    assert info.value.code == 2 and "release id" in capsys.readouterr().err
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before  # nothing created, nothing deleted


@pytest.mark.e2e
@pytest.mark.parametrize("rid", ["../../good1", "a/b"])
def test_the_flow_refuses_a_hostile_id_before_the_ledger(prefect_harness, tmp_path, rid):
    from dprelease.flows.release import release

    spec = adult_example(tmp_path)
    with pytest.raises(IdentifierError):
        release(spec=str(spec), out=str(tmp_path / "out"), ledger=str(tmp_path / "l.sqlite"), release_id=rid)
    assert not (tmp_path / "l.sqlite").exists() and not (tmp_path / "out").exists()


def test_a_dataset_name_with_a_newline_is_refused(tmp_path):
    with pytest.raises(SchemaError, match="dataset"):
        load_spec(adult_example(tmp_path, dataset="adult\n"))


def test_paths_stay_inside_their_root(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "link").symlink_to(tmp_path)
    assert inside(tmp_path / "root", "a", "b") == (tmp_path / "root" / "a" / "b").resolve()
    for parts in (("..", "x"), ("link", "x"), ("/etc",)):
        with pytest.raises(FolderError):
            inside(tmp_path / "root", *parts)


def test_a_folder_the_release_did_not_create_is_never_deleted(tmp_path):
    steward = create_steward(tmp_path / "internal" / DATASET / "r1")
    staging = tmp_path / "out" / DATASET / ".staging-r1"
    staging.mkdir(parents=True)
    (staging / "precious.txt").write_text("someone else's")
    with pytest.raises(FolderError, match="not created by a run of this release"):
        create_staging(staging, steward)
    assert (staging / "precious.txt").read_text() == "someone else's"
    # A staging folder this release's own crashed run left behind is reclaimed.
    shutil.rmtree(staging)
    create_staging(staging, steward)
    (staging / "half-written.parquet").write_bytes(b"x")
    assert (steward / STAGING_RECORD).read_text() == str(staging)
    create_staging(staging, steward)
    assert list(staging.iterdir()) == []


def test_the_steward_root_must_lie_outside_the_output_folder(tmp_path):
    with pytest.raises(InputError, match="outside the output folder"):
        check_steward_root(tmp_path / "out" / "internal", tmp_path / "out")
    with pytest.raises(InputError, match="outside the output folder"):
        check_steward_root(tmp_path, tmp_path / "out")
    check_steward_root(tmp_path / "internal", tmp_path / "out")


def test_data_and_ledger_lie_outside_the_output_folder_and_the_output_outside_the_data(tmp_path):
    spec = load_spec(adult_example(tmp_path))  # data: example/adult.parquet
    with pytest.raises(InputError, match=r"^data adult.parquet: must lie outside the output folder .* rows along$"):
        check_apart_from_output(spec, tmp_path, tmp_path / "l.sqlite")  # the public tree would hold the rows
    with pytest.raises(InputError, match=r"data adult\.parquet: must lie outside the output folder"):
        check_apart_from_output(spec, tmp_path / "example", tmp_path / "l.sqlite")
    with pytest.raises(InputError, match=r"^ledger l.sqlite: must lie outside the output folder"):
        check_apart_from_output(spec, tmp_path / "out", tmp_path / "out" / "l.sqlite")
    check_apart_from_output(spec, tmp_path / "out", tmp_path / "l.sqlite")
    rows = tmp_path / "rows"
    rows.mkdir()
    shutil.copy(tmp_path / "example" / "adult.parquet", rows / "part-0.parquet")
    (tmp_path / "b").mkdir()
    by_folder = load_spec(adult_example(tmp_path / "b", data=str(rows)))
    for out in (rows, rows / "public"):
        with pytest.raises(InputError, match="must lie outside the"):
            check_apart_from_output(by_folder, out, tmp_path / "l.sqlite")


def test_the_command_refuses_an_output_folder_among_the_rows_before_anything_is_written(tmp_path, capsys):
    spec = adult_example(tmp_path)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    code = main(["release", str(spec), "--out", str(tmp_path), "--ledger", str(tmp_path.parent / f"{tmp_path.name}.db"),
                 "--internal", str(tmp_path.parent / f"{tmp_path.name}-internal")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("dprelease release: data adult.parquet: must lie outside")
    assert "\n" not in err and sorted(str(p) for p in tmp_path.rglob("*")) == before
    assert not (tmp_path.parent / f"{tmp_path.name}.db").exists()


def _release_folder(root: Path) -> Path:
    (root / "synthetic").mkdir(parents=True)
    (root / "synthetic" / "t.parquet").write_bytes(b"abcdef" * 100)
    (root / "audit.json").write_text("{}")
    from dprelease.tasks.staging import file_entries

    manifest: dict[str, object] = {"release_id": "r", "dataset": "d", "spec": "budget: {epsilon: 1}\n",
                                   "files": file_entries(root)}
    manifest["manifest_sha256"] = manifest_seal(manifest)
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return root


def test_verify_catches_an_added_file_a_manifest_edit_and_a_symlink(tmp_path):
    release = _release_folder(tmp_path / "rel")
    assert verify_release(release) == []
    (release / "internal").mkdir()
    (release / "internal" / "row_handling.json").write_text("{}")
    assert verify_release(release) == ["internal/row_handling.json: not listed in the manifest"]
    shutil.rmtree(release / "internal")

    manifest = json.loads((release / "manifest.json").read_text())
    manifest["spec"] = manifest["spec"].replace("epsilon: 1", "epsilon: 0.01")
    (release / "manifest.json").write_text(json.dumps(manifest, indent=2))
    assert any("do not match its manifest_sha256" in p for p in verify_release(release))

    release = _release_folder(tmp_path / "rel2")
    (release / "audit.json").unlink()
    (release / "audit.json").symlink_to(tmp_path / "rel" / "audit.json")
    assert verify_release(release) == ["audit.json: a symbolic link; refused"]
    (tmp_path / "linked").symlink_to(release)
    assert verify_release(tmp_path / "linked") == ["linked: is a symbolic link; refused"]


@pytest.mark.e2e
def test_a_release_under_umask_0_keeps_public_and_steward_modes_and_reclaims_its_crashed_staging(
    prefect_harness, tmp_path
):
    from dprelease.flows.release import release

    spec = adult_example(tmp_path, rows=8000)  # file modes and the reclaimed staging do not depend on the size
    out, internal = tmp_path / "out", tmp_path / "steward-root"
    # What a killed run of this release left: its steward record and a half-written staging folder.
    steward = create_steward(internal / DATASET / "r-umask")
    create_staging(out / DATASET / ".staging-r-umask", steward)
    (out / DATASET / ".staging-r-umask" / "partial.bin").write_bytes(b"partial")
    previous = os.umask(0)
    try:
        target = Path(release(spec=str(spec), out=str(out), ledger=str(tmp_path / "l.sqlite"), release_id="r-umask",
                              internal=str(internal)))
    finally:
        os.umask(previous)
    assert target == out / DATASET / "r-umask" and not (out / DATASET / ".staging-r-umask").exists()
    assert verify_release(target) == []
    for path in [target, *target.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o755 if path.is_dir() else 0o644), (path, oct(mode))
    folder = steward_of(target, internal)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert {"validation.json", "row_handling.json", "utility.json"} <= {p.name for p in folder.iterdir()}
    for path in folder.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert not list(out.rglob("row_handling.json"))
