"""DP-safe Prefect: task settings, and no raw value anywhere Prefect keeps things.

1. Every task marked ``dp_sensitive`` (:func:`tasks.sensitive_task`) has no retries, no cache and no
   persisted result; every task of a module that reads raw data carries the mark (a new unmarked
   raw-data task fails here).
2. Releases and data-quality runs of a table seeded with canary strings and numbers, under a fresh
   PREFECT_HOME in a subprocess (a success, a structural validation failure, a stage that raises),
   on the command's embedded API server of that home (its output, ``embedded-server.log``, is in the
   home), then a byte search of everything Prefect wrote (database, -wal, -shm, storage, the server's
   output), the captured output, every artifact, log and state message read back through the API,
   and the public release.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dprelease import flows, tasks
from dprelease.tasks import is_sensitive, mark_sensitive
from tests.prefect_db import seed_home
from tests.steward import steward_of

ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT / "examples" / "adult"

# Modules whose tasks read the raw table (or the checks built on it): every task there is sensitive.
RAW_DATA_MODULES = {"dprelease.tasks.ingest", "dprelease.tasks.validate", "dprelease.tasks.measure",
                    "dprelease.tasks.bounds", "dprelease.tasks.evaluate", "dprelease.tasks.stats",
                    "dprelease.flows.check"}


# ---------------------------------------------------------------------------------------------
# 1. Task settings


def _all_tasks() -> list[tuple[str, object]]:
    """Every Prefect Task object defined at module level in the tasks and flows packages."""
    from prefect.tasks import Task

    found: dict[int, tuple[str, object]] = {}
    for package in (tasks, flows):
        names = [package.__name__] + [f"{package.__name__}.{m.name}" for m in pkgutil.iter_modules(package.__path__)]
        for name in names:
            module = importlib.import_module(name)
            for value in vars(module).values():
                if isinstance(value, Task):
                    found[id(value)] = (value.fn.__module__, value)
    return sorted(found.values(), key=lambda item: (item[0], item[1].name))


def _violations(found: list[tuple[str, object]]) -> list[str]:
    from prefect.cache_policies import NO_CACHE

    problems = []
    for module, task in found:
        label = f"{module}:{task.name}"
        if module in RAW_DATA_MODULES and not is_sensitive(task):
            problems.append(f"{label} reads raw data but is not marked dp_sensitive")
        if is_sensitive(task):
            if task.retries != 0:
                problems.append(f"{label}: retries must be 0 (found {task.retries})")
            if type(task.cache_policy) is not type(NO_CACHE):
                problems.append(f"{label}: cache_policy must be NO_CACHE (found {task.cache_policy!r})")
            if task.persist_result is not False:
                problems.append(f"{label}: persist_result must be False (found {task.persist_result!r})")
            if task.cache_key_fn is not None or task.result_storage is not None:
                problems.append(f"{label}: must have no cache key function and no result storage")
    return problems


def test_every_sensitive_task_has_dp_safe_settings_and_every_raw_data_task_is_marked():
    found = _all_tasks()
    modules = {module for module, _ in found}
    assert RAW_DATA_MODULES <= modules, f"no task found in {sorted(RAW_DATA_MODULES - modules)}"
    sensitive = [task.name for _, task in found if is_sensitive(task)]
    assert {"inspect_table", "validate_table", "measure_marginals", "discover_bounds", "evaluate_utility",
            "validate_quality", "plan_budget", "publish_release"} <= set(sensitive)
    assert _violations(found) == []


def test_the_walk_catches_an_unmarked_raw_data_task_and_unsafe_settings():
    from prefect import task
    from prefect.cache_policies import DEFAULT

    from dprelease.tasks import PUBLIC, SENSITIVE

    def read_raw(path: str) -> int:
        return len(path)

    unmarked = task(name="read_raw", **PUBLIC)(read_raw)
    retrying = mark_sensitive(task(name="read_raw_retrying", **{**SENSITIVE, "retries": 2})(read_raw))
    cached = mark_sensitive(task(name="read_raw_cached", retries=0, cache_policy=DEFAULT,
                                 persist_result=True)(read_raw))
    problems = _violations([("dprelease.tasks.ingest", unmarked), ("dprelease.tasks.measure", retrying),
                            ("dprelease.tasks.plan", cached)])
    assert any("dprelease.tasks.ingest:read_raw reads raw data but is not marked" in p for p in problems)
    assert any("read_raw_retrying: retries must be 0" in p for p in problems)
    assert any("read_raw_cached: cache_policy must be NO_CACHE" in p for p in problems)
    assert any("read_raw_cached: persist_result must be False" in p for p in problems)
    assert _violations([("dprelease.tasks.publish", task(name="copy_public", **PUBLIC)(read_raw))]) == []


# ---------------------------------------------------------------------------------------------
# 2. No canary anywhere Prefect keeps things

CANARY_TEXT = "CANARY_pfx_Hq8Zr2"  # an unknown occupation: validation flags it, the row is dropped
CANARY_AGE = 918273645  # far outside age's public bounds [17, 90]: validation flags it, it is clamped
CANARY_GAIN = 2**53 + 1  # capital-gain (no public bounds): the outlier of issue 11, beyond the search range, clamped
CANARY_BAD_TYPE = "CANARY_type_Wm4Kx"  # in a column of the wrong type: the release stops before any noise
CANARY_LIBRARY = "CANARY_lib_Zx81Qp"  # carried by a library exception raised inside each raw-data stage
LIBRARY_STAGES = ("inspect", "validate", "bounds", "measure", "evaluate", "publish", "check")
CANARIES = {
    "library": CANARY_LIBRARY.encode(),
    "text": CANARY_TEXT.encode(),
    "age": str(CANARY_AGE).encode(),
    "gain": str(CANARY_GAIN).encode(),
    "bad type": CANARY_BAD_TYPE.encode(),
}

RUNNER = r'''
"""Runs the scenarios of test_prefect_safety under this process's own PREFECT_HOME."""
import json
import sys
import traceback
from pathlib import Path

from dprelease.flows.settings import configure, spawn_embedded_server, without_heartbeats

configure()  # as the dprelease command does: before Prefect is imported
# The command's embedded API server on this PREFECT_HOME, spawned as the command spawns it: it boots while this
# process imports, and its output (embedded-server.log) lands in the home that is searched.
server = spawn_embedded_server()
# As the command does on its own server: no heartbeat thread per run. The block stays open for the whole
# process: the object is kept (a generator context manager collected while open would close its block).
NO_HEARTBEATS = without_heartbeats(True)
NO_HEARTBEATS.__enter__()

import dprelease.flows.release  # noqa: E402
import dprelease.tasks.validate  # noqa: E402
from dprelease.flows.check import check_quality  # noqa: E402

work = Path(sys.argv[1])
server.wait()
results = {}


def attempt(name, call):
    try:
        results[name] = {"ok": True, "value": call()}
    except Exception as err:  # the failure is the point: print it as a user would see it
        traceback.print_exc()
        results[name] = {"ok": False, "error": type(err).__name__, "message": str(err)}


def release(example, rid):
    return dprelease.flows.release.release(spec=str(work / example / "release.yaml"), out=str(work / "out"),
                                 ledger=str(work / f"ledger-{rid}.sqlite"), release_id=rid)


attempt("release_ok", lambda: release("canary", "r-safety-ok"))
attempt("release_bad_type", lambda: release("bad-type", "r-safety-bad-type"))


def broken_estimate(*args, **kwargs):
    raise RuntimeError("injected failure in estimate_model (stage raised after measuring)")


def broken_expectations(batches, schema, arrow_schema):
    table = next(iter(batches))
    rows = table.num_rows  # a raw row group is a local of this frame when it raises
    raise RuntimeError(f"injected failure inside the validation task ({rows > 0})")


dprelease.flows.release.estimate_model, original = broken_estimate, dprelease.flows.release.estimate_model
attempt("release_stage_raises", lambda: release("canary", "r-safety-stage"))
dprelease.flows.release.estimate_model = original
original_expectations = dprelease.tasks.validate.run_expectations
dprelease.tasks.validate.run_expectations = broken_expectations
attempt("release_sensitive_task_raises", lambda: release("canary", "r-safety-sensitive"))
dprelease.tasks.validate.run_expectations = original_expectations

# A library's exception (pyarrow's) carrying a canary, raised inside each stage that handles raw rows.
import pyarrow as pa  # noqa: E402

import dprelease.flows.check  # noqa: E402
import dprelease.tasks.bounds  # noqa: E402
import dprelease.tasks.evaluate  # noqa: E402
import dprelease.tasks.ingest  # noqa: E402
import dprelease.tasks.measure  # noqa: E402
import dprelease.tasks.publish  # noqa: E402

LIBRARY_CANARY = sys.argv[2]


def library_failure(*args, **kwargs):
    raise pa.ArrowInvalid(f"could not convert {LIBRARY_CANARY} with type str: tried to convert to int64")


for stage, module, name in [("inspect", dprelease.tasks.ingest, "check_structure"),
                            ("validate", dprelease.tasks.validate, "run_expectations"),
                            ("bounds", dprelease.tasks.bounds, "tail_counts"),
                            ("measure", dprelease.tasks.measure, "count_all"),
                            ("evaluate", dprelease.tasks.evaluate, "utility"),
                            ("publish", dprelease.tasks.publish, "file_entries")]:
    kept = getattr(module, name)
    setattr(module, name, library_failure)
    attempt(f"library_{stage}", lambda stage=stage: release("canary", f"r-library-{stage}"))
    setattr(module, name, kept)
dprelease.flows.check.validate_batches, kept = library_failure, dprelease.flows.check.validate_batches
attempt("library_check", lambda: check_quality(schema_path=str(work / "canary" / "schema.yaml"),
                                               data_path=str(work / "canary" / "adult.parquet")))
dprelease.flows.check.validate_batches = kept

attempt("check_fails", lambda: check_quality(schema_path=str(work / "canary" / "schema.yaml"),
                                             data_path=str(work / "canary" / "adult.parquet")))
attempt("check_bad_type", lambda: check_quality(schema_path=str(work / "bad-type" / "schema.yaml"),
                                                data_path=str(work / "bad-type" / "adult.parquet")))

# Everything the API holds about these runs: runs, task runs, states, logs, artifacts.
from prefect.client.orchestration import get_client  # noqa: E402

with get_client(sync_client=True) as client:
    dump = {
        "flow_runs": [r.model_dump(mode="json") for r in client.read_flow_runs(limit=200)],
        "task_runs": [r.model_dump(mode="json") for r in client.read_task_runs(limit=200)],
        "logs": [r.model_dump(mode="json") for r in client.read_logs(limit=200)],
        "artifacts": [r.model_dump(mode="json") for r in client.read_artifacts(limit=200)],
    }
    offset = 200
    while len(batch := client.read_logs(limit=200, offset=offset)):
        dump["logs"] += [r.model_dump(mode="json") for r in batch]
        offset += 200
(work / "api.json").write_text(json.dumps(dump, default=str))
(work / "results.json").write_text(json.dumps(results))
'''


def _example(folder: Path, table: pa.Table) -> None:
    folder.mkdir(parents=True)
    shutil.copy(ADULT / "schema.yaml", folder / "schema.yaml")
    shutil.copy(ADULT / "release.yaml", folder / "release.yaml")
    pq.write_table(table, folder / "adult.parquet")


def _set(table: pa.Table, name: str, values: list) -> pa.Table:
    return table.set_column(table.column_names.index(name), name, pa.array(values, table.schema.field(name).type))


# The first rows of Adult: where a canary can end up does not depend on the table's size, and the 13 runs
# cost less (a release's fixed cost stays: every stage, chart and Prefect record is still made).
ROWS = 8000


def _canary_table() -> pa.Table:
    table = pq.read_table(ADULT / "adult.parquet").slice(0, ROWS)
    occupation, age, gain = (table.column(n).to_pylist() for n in ("occupation", "age", "capital-gain"))
    occupation[5], age[6], gain[7] = CANARY_TEXT, CANARY_AGE, CANARY_GAIN
    table = table.set_column(table.column_names.index("occupation"), "occupation", pa.array(occupation, pa.string()))
    return _set(_set(table, "age", age), "capital-gain", gain)


def _bad_type_table() -> pa.Table:
    """hours-per-week as strings, the first ones canaries: fails the schema's structure."""
    table = pq.read_table(ADULT / "adult.parquet").slice(0, ROWS)
    hours = [str(v) for v in table.column("hours-per-week").to_pylist()]
    hours[:3] = [CANARY_BAD_TYPE, CANARY_BAD_TYPE + "1", str(CANARY_GAIN)]
    return table.set_column(table.column_names.index("hours-per-week"), "hours-per-week", pa.array(hours))


def _environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home / "prefect"), DPRELEASE_HOME=str(home / "state"),
               PREFECT_LOGGING_LEVEL="DEBUG", PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    return env


@pytest.fixture(scope="module")
def canary_runs(tmp_path_factory):
    work = tmp_path_factory.mktemp("safety")
    _example(work / "canary", _canary_table())
    _example(work / "bad-type", _bad_type_table())
    (work / "runner.py").write_text(RUNNER, encoding="utf-8")
    home = work / "home"
    seed_home(home / "prefect")  # Prefect's migrations already run (tests/prefect_db.py)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, str(work / "runner.py"), str(work), CANARY_LIBRARY], cwd=ROOT,
                          env=_environment(home), capture_output=True, timeout=420, check=False)
    seconds = time.monotonic() - started
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output.decode(errors="replace")[-4000:]
    return SimpleNamespace(work=work, home=home / "prefect", output=output, seconds=seconds,
                           results=json.loads((work / "results.json").read_text()),
                           api=(work / "api.json").read_bytes())


def _prefect_files(home: Path) -> list[Path]:
    return [p for p in home.rglob("*") if p.is_file()]


def _public_files(release: Path) -> list[Path]:
    return [p for p in release.rglob("*") if p.is_file()]  # a release folder holds public files only


@pytest.mark.e2e
def test_the_scenarios_ran_as_intended(canary_runs):
    results = canary_runs.results
    assert results["release_ok"]["ok"], results["release_ok"]
    assert not results["release_bad_type"]["ok"]
    assert results["release_bad_type"]["error"] == "InputError"
    assert "'hours-per-week'" in results["release_bad_type"]["message"]
    assert results["release_stage_raises"]["message"].startswith("injected failure in estimate_model")
    # A sensitive stage's own unexpected error leaves it message-free: stage and type only.
    assert results["release_sensitive_task_raises"]["error"] == "StageFailed"
    message = results["release_sensitive_task_raises"]["message"]
    assert message.startswith("stage validate_table failed with RuntimeError")
    assert results["check_fails"]["error"] == "DataQualityError"
    assert "column 'age'" in results["check_fails"]["message"]
    assert "column 'occupation'" in results["check_fails"]["message"]
    assert results["check_bad_type"]["error"] == "DataQualityError"
    published = canary_runs.work / "out" / "us-cps-1994-adult"
    # Failures publish nothing; a failed internal report (after publication) leaves the release published.
    assert sorted(p.name for p in published.iterdir()) == ["r-library-evaluate", "r-safety-ok"]
    for stage in LIBRARY_STAGES:
        outcome = results[f"library_{stage}"]
        if stage == "evaluate":
            assert outcome["ok"], outcome
            steward = steward_of(published / "r-library-evaluate", canary_runs.work / "home" / "state" / "internal")
            note = (steward / "evaluation-error.txt").read_text()
            assert "StageFailed" in note and CANARY_LIBRARY not in note
            continue
        assert not outcome["ok"] and outcome["error"] == "StageFailed", (stage, outcome)
        assert "ArrowInvalid" in outcome["message"], (stage, outcome)
    # The canaries were really read: validation flagged their cells and row handling dropped or clamped them.
    internal = steward_of(published / "r-safety-ok", canary_runs.work / "home" / "state" / "internal")
    validation = json.loads((internal / "validation.json").read_text())
    flagged = {(e["column"], e["rule"]) for e in validation["expectations"] if not e["success"]}
    assert ("age", "values must be between 17 and 90") in flagged
    assert any(column == "occupation" and "declared categories" in rule for column, rule in flagged)
    handling = json.loads((internal / "row_handling.json").read_text())
    assert handling["dropped_unknown"].get("occupation") == 1
    assert handling["clamped"].get("age", 0) >= 1 and handling["clamped"].get("capital-gain", 0) >= 1


@pytest.mark.e2e
def test_the_search_is_not_vacuous(canary_runs):
    """The database really holds the runs: their release ids, flow names and failure messages."""
    stored = b"".join(p.read_bytes() for p in _prefect_files(canary_runs.home))
    names = {p.name for p in _prefect_files(canary_runs.home)}
    assert "prefect.db" in names
    for needle in (b"r-safety-ok", b"r-safety-bad-type", b"r-safety-stage", b"injected failure in estimate_model",
                   b"check-quality", b"budget-us-cps-1994-adult"):
        assert needle in stored, needle
    api = json.loads(canary_runs.api)
    assert len(api["flow_runs"]) == 6 + len(LIBRARY_STAGES) and api["artifacts"] and len(api["logs"]) > 20
    assert {"Completed", "Failed"} == {r["state_name"] for r in api["flow_runs"]}
    assert b"r-safety-ok" in canary_runs.output and b"injected failure" in canary_runs.output


@pytest.mark.e2e
@pytest.mark.parametrize("kind", sorted(CANARIES))
def test_no_canary_in_the_prefect_home(canary_runs, kind):
    needle = CANARIES[kind]
    files = _prefect_files(canary_runs.home)
    assert any(p.name.endswith("-wal") or p.name == "prefect.db" for p in files)
    leaked = [str(p.relative_to(canary_runs.home)) for p in files if needle in p.read_bytes()]
    assert leaked == []


@pytest.mark.e2e
@pytest.mark.parametrize("kind", sorted(CANARIES))
def test_no_canary_in_output_api_or_public_release(canary_runs, kind):
    needle = CANARIES[kind]
    assert needle not in canary_runs.output
    assert needle not in canary_runs.api
    release = canary_runs.work / "out" / "us-cps-1994-adult" / "r-safety-ok"
    public = _public_files(release)
    assert any(p.name == "audit.json" for p in public) and any(p.suffix == ".parquet" for p in public)
    assert [str(p) for p in public if needle in p.read_bytes()] == []


@pytest.mark.e2e
def test_a_library_failure_is_recorded_in_full_for_the_steward_only(canary_runs):
    """The canary of every stage's library exception reached the steward-only area, and nowhere else."""
    state = canary_runs.home.parent / "state"
    records = [p for p in state.rglob("failure-*.txt") if CANARIES["library"] in p.read_bytes()]
    stages = {p.name.split("-")[1] for p in records}
    assert {"inspect_table", "validate_table", "discover_bounds", "measure_marginals", "evaluate_utility",
            "publish_release", "validate_quality"} <= stages
    for record in records:
        assert record.stat().st_mode & 0o077 == 0  # owner-only
    public = canary_runs.work / "out"
    assert [str(p) for p in public.rglob("*") if p.is_file() and CANARIES["library"] in p.read_bytes()] == []


@pytest.mark.e2e
def test_the_published_release_verifies(canary_runs):
    from dprelease.tasks.staging import verify_release

    assert verify_release(canary_runs.work / "out" / "us-cps-1994-adult" / "r-safety-ok") == []
    print(f"canary runs took {canary_runs.seconds:.0f} s")
