"""End-to-end releases of the Adult table under the Prefect test harness."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import stat
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml

from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import BudgetExceededError
from dprelease.schemas.spec import load_spec
from dprelease.schemas.table import load_schema
from tests.steward import steward_of

pytestmark = pytest.mark.e2e
ADULT = Path(__file__).resolve().parents[2] / "examples" / "adult"
CANARY_TEXT = "CANARY_Zq7xW"
CANARY_NUMBER = 987654321


def _example(tmp_path: Path, table: pa.Table | None = None, spec: str = "release.yaml", **changes) -> Path:
    """A copy of the Adult example in tmp_path, optionally with another table, spec file and spec changes."""
    folder = tmp_path / "example"
    folder.mkdir()
    shutil.copy(ADULT / "schema.yaml", folder / "schema.yaml")
    if table is None:
        shutil.copy(ADULT / "adult.parquet", folder / "adult.parquet")
    else:
        pq.write_table(table, folder / "adult.parquet")
    doc = yaml.safe_load((ADULT / spec).read_text(encoding="utf-8"))
    doc.update(changes)
    (folder / "release.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    return folder / "release.yaml"


def _canary_table() -> pa.Table:
    """Adult with canary values in cells that row-level handling must clamp or drop."""
    table = pq.read_table(ADULT / "adult.parquet")
    occupation = table.column("occupation").to_pylist()
    occupation[5] = CANARY_TEXT
    gain = table.column("capital-gain").to_pylist()
    gain[7] = CANARY_NUMBER
    table = table.set_column(table.column_names.index("occupation"), "occupation", pa.array(occupation))
    return table.set_column(table.column_names.index("capital-gain"), "capital-gain", pa.array(gain, pa.int64()))


def _public_files(release: Path) -> list[Path]:
    return [p for p in release.rglob("*") if p.is_file()]  # a release folder holds public files only


class _Logs(logging.Handler):
    """What pytest's ``caplog`` holds after ``caplog.set_level(logging.DEBUG)``: every record reaching the
    root logger, at DEBUG and above, and their text in caplog's format."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(levelname)-8s %(name)s:%(filename)s:%(lineno)d %(message)s"))
        self.records: list[logging.LogRecord] = []
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.lines.append(self.format(record))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture(scope="module")
def adult_logs() -> _Logs:
    """The logs of :func:`adult_release`'s run, captured at DEBUG."""
    return _Logs()


@pytest.fixture(scope="module")
def adult_release(prefect_harness, tmp_path_factory, adult_logs):
    """One release of Adult with canary cells (shared by the module's tests), its logs in ``adult_logs``."""
    from dprelease.flows.release import release

    tmp = tmp_path_factory.mktemp("adult")
    spec = _example(tmp, _canary_table())
    ledger = tmp / "ledger.sqlite"
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.DEBUG)
    root.addHandler(adult_logs)
    try:
        target = release(spec=str(spec), out=str(tmp / "out"), ledger=str(ledger), release_id="r-e2e-1")
    finally:
        root.removeHandler(adult_logs)
        root.setLevel(level)
    return Path(target), spec, ledger


def test_synthetic_table_matches_the_schema(adult_release):
    target, _, _ = adult_release
    schema = load_schema(ADULT / "schema.yaml")
    table = pq.read_table(target / "synthetic" / "adult.parquet")
    assert table.column_names == list(schema.names)
    for column in schema.columns:
        arrow_type = table.schema.field(column.name).type
        if column.type == "category":
            assert arrow_type == pa.string()
            values = set(pc.unique(table.column(column.name)).to_pylist()) - {None}
            assert values <= set(column.categories), column.name
        else:
            assert arrow_type == pa.int64()
            if column.has_public_bounds:
                assert pc.min(table.column(column.name)).as_py() >= column.min
                assert pc.max(table.column(column.name)).as_py() <= column.max
        if not column.nullable:
            assert table.column(column.name).null_count == 0, column.name
    metadata = table.schema.metadata
    assert metadata[b"dprelease.release_id"] == b"r-e2e-1"


def test_row_count_comes_from_the_noisy_count(adult_release):
    target, _, _ = adult_release
    audit = json.loads((target / "audit.json").read_text())
    rows = pq.ParquetFile(target / "synthetic" / "adult.parquet").metadata.num_rows
    assert rows == audit["post_processing"]["synthetic_rows"]
    assert "inverse-variance" in audit["post_processing"]["row_count"]


def test_audit_lists_every_measurement_and_composes_exactly(adult_release):
    target, spec_path, ledger_path = adult_release
    spec = load_spec(spec_path)
    audit = json.loads((target / "audit.json").read_text())
    measurements = audit["measurements"]
    # 1-way, two SVT runs per column, 13 tree rounds and up to 12 second parents (the private structure;
    # a column whose tree parent shares a clique with one column only has a single candidate: not run),
    # 13 cliques, the two levels of the region > native-country hierarchy, and the extra pairs that the rounds
    # of noise-capped cliques buy (each choice booked, unless it had one candidate, and each pair measured),
    # and a capped clique measured again with the shares no extra pair took
    run = audit["private_choices"]["junction_tree"]["second_parent_selections"]["run"]
    skipped = audit["private_choices"]["junction_tree"]["second_parent_selections"]["skipped_single_candidate"]
    extra = [m for m in measurements if m["query"].startswith("extra pair")]
    pairs = [m for m in extra if m["query"].startswith("extra pair(")]
    assert len(pairs) <= 3 * (12 - run - skipped) and len(extra) - len(pairs) <= len(pairs)
    again = [m for m in measurements if m["stage"] == "cliques" and m["query"].endswith(") again")]
    assert len(again) <= 12 - run - skipped
    assert run + skipped <= 12 and len(measurements) == 14 + 2 * 3 + 13 + run + 13 + 2 + len(extra) + len(again)
    for m in measurements:
        assert m["mechanism"] and m["sensitivity"] and m["scale"] > 0
        assert Fraction(m["booked"]["rho"]["exact"]) > 0
    booked = sum(Fraction(m["booked"]["rho"]["exact"]) for m in measurements)
    assert booked == Fraction(audit["budget"]["booked"]["exact"])
    assert booked <= spec.budget.amount
    with Ledger.open(ledger_path) as ledger:
        charges = ledger.charges(release_id="r-e2e-1")
        assert sum(c.loss for c in charges) == booked
        assert ledger.release_status("r-e2e-1") == "published"
        ledger.verify()
    assert audit["budget"]["booked_as_epsilon_delta"]["epsilon"]["value"] <= 1


def test_public_files_hold_no_raw_or_internal_values(adult_release, caplog):
    target, _, _ = adult_release
    manifest = json.loads((target / "manifest.json").read_text())
    listed = {f["path"] for f in manifest["files"]}
    for path in _public_files(target):
        if path.name == "manifest.json":
            continue
        rel = path.relative_to(target).as_posix()
        assert rel in listed
        entry = next(f for f in manifest["files"] if f["path"] == rel)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"]
    for path in _public_files(target):
        data = path.read_bytes()
        assert CANARY_TEXT.encode() not in data, path
        assert str(CANARY_NUMBER).encode() not in data, path
    audit = json.loads((target / "audit.json").read_text())
    # The real row count is never published. The synthetic table's size is the post-processed noisy total,
    # which may equal 32561 by chance (a DP output): only that field may hold the number.
    assert isinstance(audit["post_processing"].pop("synthetic_rows"), int)
    assert "32561" not in json.dumps(audit)
    assert "sha256" not in audit["public_inputs"].get("input", {})


def test_steward_folder_is_outside_the_release_and_owner_only(adult_release):
    target, _, _ = adult_release
    internal = steward_of(target)
    assert target not in internal.parents and not (target / "internal").exists()
    assert stat.S_IMODE(internal.stat().st_mode) == 0o700
    assert stat.S_IMODE(internal.parent.stat().st_mode) == 0o700  # the dataset's steward folder too
    # The public folder holds exactly what its manifest lists (and the manifest).
    manifest = json.loads((target / "manifest.json").read_text())
    listed = {f["path"] for f in manifest["files"]} | {"manifest.json"}
    assert {p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()} == listed
    names = {p.name for p in internal.iterdir()}
    assert {"validation.json", "utility.json", "row_handling.json", "input.json", "risk.json", "report.html"} <= names
    for path in internal.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    handling = json.loads((internal / "row_handling.json").read_text())
    assert handling["dropped_unknown"].get("occupation") == 1
    utility = json.loads((internal / "utility.json").read_text())
    assert 0 <= utility["tvd1"] < 0.05 and 0 <= utility["tvd2"] < 0.15
    assert set(utility["histograms"]) == set(load_schema(ADULT / "schema.yaml").names)


def test_internal_report_has_disclosure_risk_and_utility_charts(adult_release):
    target, _, _ = adult_release
    risk = json.loads((steward_of(target) / "risk.json").read_text())
    assert 0 <= risk["exact_match_share"] <= 1
    assert risk["dcr"]["synthetic_sample"] > 0 and risk["dcr"]["real_median"] >= 0
    assert risk["k_anonymity"]["real"]["rows"] > 0 and risk["k_anonymity"]["synthetic"]["k"] >= 1
    page = (steward_of(target) / "report.html").read_text()
    for heading in ("Internal", "Disclosure risk", "1-way marginals", "2-way marginals: worst and best",
                    "Real vs synthetic, per column"):
        assert heading in page, heading
    assert page.count('<svg class="chart"') >= 3


def test_public_html_report_is_the_rendering_of_audit_json(adult_release):
    from dprelease.reports.audit import render_markdown
    from dprelease.reports.audit_json import audit_from_json, audit_to_json
    from dprelease.reports.html import render_html

    target, _, _ = adult_release
    text = (target / "audit.json").read_text()
    audit = audit_from_json(text)
    assert audit_to_json(audit) == text  # reading the published audit back loses and reorders nothing
    html = (target / "audit.html").read_text()
    assert html == render_html(audit)
    assert (target / "audit.md").read_text() == render_markdown(audit)
    assert "audit.html" in {f["path"] for f in json.loads((target / "manifest.json").read_text())["files"]}
    assert "http://" not in html and "https://" not in html  # self-contained: nothing loads from a network
    assert '<svg class="chart"' in html


def test_public_audit_holds_no_forbidden_item(adult_release):
    target, _, _ = adult_release
    audit = json.loads((target / "audit.json").read_text())
    keys: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            keys.update(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(audit)
    forbidden = {"rows_in", "rows_kept", "dropped_null", "dropped_unknown", "mapped_unknown", "clamped",
                 "sha256_input", "input_sha256", "seconds", "elapsed", "duration", "started_at", "tvd1"}
    assert not keys & forbidden
    internal_hash = json.loads((steward_of(target) / "input.json").read_text())["sha256"]
    for path in ("audit.json", "audit.md", "audit.html", "manifest.json"):
        assert internal_hash not in (target / path).read_text(), path
    for required in ("privacy", "budget", "measurements", "private_choices", "lifetime", "public_inputs",
                     "post_processing", "provenance", "limitations"):
        assert required in audit, required


def test_second_release_beyond_the_lifetime_budget_is_refused_before_reading_data(prefect_harness, tmp_path):
    from dprelease.flows.release import release

    # The first 8,000 rows: the refusal comes from the ledger before the data is read, whatever its size.
    spec = _example(tmp_path, pq.read_table(ADULT / "adult.parquet").slice(0, 8000),
                    lifetime_budget={"epsilon": 1.2, "delta": 1e-9}, release_cap=None)
    ledger = tmp_path / "ledger.sqlite"
    release(spec=str(spec), out=str(tmp_path / "out"), ledger=str(ledger), release_id="first")
    (spec.parent / "adult.parquet").rename(spec.parent / "moved-away.parquet")  # reading it now would fail
    with pytest.raises(BudgetExceededError) as info:
        release(spec=str(spec), out=str(tmp_path / "out"), ledger=str(ledger), release_id="second")
    message = str(info.value)
    assert "us-cps-1994-adult" in message and "needs rho=" in message and "budget has left" in message
    assert not (tmp_path / "out" / "us-cps-1994-adult" / "second").exists()
    with Ledger.open(ledger) as book:
        assert [c.release_id for c in book.charges()] == ["first"] * len(book.charges())


def test_a_failing_stage_publishes_nothing_and_keeps_drawn_charges(prefect_harness, tmp_path, monkeypatch):
    import dprelease.flows.release

    def broken(*args, **kwargs):
        raise RuntimeError("injected failure after measurement")

    monkeypatch.setattr(dprelease.flows.release, "estimate_model", broken)
    spec = _example(tmp_path)
    ledger = tmp_path / "ledger.sqlite"
    with pytest.raises(RuntimeError, match="injected failure"):
        dprelease.flows.release.release(spec=str(spec), out=str(tmp_path / "out"), ledger=str(ledger),
                                        release_id="broken")
    dataset_dir = tmp_path / "out" / "us-cps-1994-adult"
    assert not dataset_dir.exists() or list(dataset_dir.iterdir()) == []
    with Ledger.open(ledger) as book:
        assert book.release_status("broken") == "failed"
        charges = book.charges(release_id="broken")  # drawn, never refunded
        second = sum(1 for c in charges if c.query.startswith("second parent of "))
        extra = sum(1 for c in charges if c.query.startswith("extra pair"))  # rounds freed by noise-capped cliques
        again = sum(1 for c in charges if c.query.endswith(") again"))  # their shares no extra pair took
        assert 6 <= second <= 12 and len(charges) == 14 + 6 + 13 + second + 13 + 2 + extra + again
        assert book.status("us-cps-1994-adult").reserved == 0


def test_logs_hold_no_raw_value(adult_release, adult_logs):
    caplog = adult_logs  # the release of Adult with canaries, its logs captured at DEBUG as caplog would
    assert caplog.records
    assert CANARY_TEXT not in caplog.text and str(CANARY_NUMBER) not in caplog.text


def test_prefect_artifacts_hold_the_public_budget_table_and_the_location(adult_release):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    target, _, _ = adult_release
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["budget-us-cps-1994-adult",
                                                                       "release-us-cps-1994-adult"]))
        )
    mine = {a.key: a for a in artifacts if "r-e2e-1" in f"{a.description} {a.data}"}
    assert set(mine) == {"budget-us-cps-1994-adult", "release-us-cps-1994-adult"}
    budget = mine["budget-us-cps-1994-adult"]
    assert budget.type == "table"
    rows = json.loads(budget.data) if isinstance(budget.data, str) else budget.data
    by_name = {r["budget"]: r for r in rows}
    audit = json.loads((target / "audit.json").read_text(encoding="utf-8"))
    stages = [f"stage {s['stage']}" for s in audit["budget"]["stages"]]
    assert "stage cliques" in stages and [r["budget"] for r in rows[:len(stages)]] == stages
    assert set(by_name) >= {"this release (booked)", "lifetime cap", "lifetime remaining after"}
    assert by_name["this release (booked)"]["rho"] == pytest.approx(audit["budget"]["booked"]["value"])
    # at most the spec's epsilon = 1 (a skipped single-candidate selection leaves a little unspent)
    assert 0.99 < by_name["this release (booked)"]["epsilon"] <= 1.0 + 1e-12
    assert by_name["lifetime remaining after"]["rho"] == pytest.approx(audit["lifetime"]["remaining_after"]["value"])
    location = mine["release-us-cps-1994-adult"]
    assert location.type == "markdown" and f"`{target.resolve()}`" in str(location.data)
    assert "file://" not in str(location.data)
    for artifact in mine.values():
        text = f"{artifact.description} {artifact.data}"
        assert CANARY_TEXT not in text and str(CANARY_NUMBER) not in text and "32561" not in text


def _check_hierarchy_release(target: Path, name: str, names: list[str], column: str) -> list[list[dict]]:
    """Every level is consistent (parents are exact sums), the root is the row count, leaves are reproduced."""
    (table_file,) = (target / "synthetic").iterdir()
    synthetic = pq.read_table(table_file)
    levels = [pq.read_table(target / "marginals" / f"hierarchy-{name}-{depth}-{level}.parquet").to_pylist()
              for depth, level in enumerate(names)]
    assert [r["count"] for r in levels[0]] == [synthetic.num_rows]
    for depth in range(1, len(levels)):
        above = {r[names[depth - 1]]: r["count"] for r in levels[depth - 1]}
        sums: dict[str, int] = {}
        for r in levels[depth]:
            assert r["count"] >= 0
            sums[r["parent"]] = sums.get(r["parent"], 0) + r["count"]
        assert sums == {k: v for k, v in above.items() if k in sums} and set(sums) == set(above)
    counted = pc.value_counts(synthetic.column(column)).to_pylist()
    actual = {("<null>" if c["values"] is None else c["values"]): c["counts"] for c in counted}
    assert {r[column]: r["count"] for r in levels[-1] if r["count"]} == actual
    return levels


def test_synthetic_table_reproduces_the_published_hierarchy_counts(adult_release):
    target, _, _ = adult_release
    levels = _check_hierarchy_release(target, "geography", ["total", "region", "native-country"], "native-country")
    assert len(levels[1]) == 5 and len(levels[2]) == 42
    audit = json.loads((target / "audit.json").read_text())
    assert [m["query"] for m in audit["measurements"] if m["stage"] == "hierarchy"] == [
        "hierarchy(geography: region)", "hierarchy(geography: native-country)"]
    assert audit["public_inputs"]["hierarchies"][0]["nodes_per_level"] == [5]


def test_three_level_geography_release(prefect_harness, tmp_path):
    """A generated table with state > county > tract (5 x 20 x 10) goes through the same release path."""
    from dprelease.flows.release import release

    tracts = [f"S{s}C{c:02d}T{t}" for s in range(5) for c in range(20) for t in range(10)]
    chooser = np.random.default_rng(7)  # test data, not a release
    rows = 20_000
    tract = chooser.choice(len(tracts), size=rows, p=chooser.dirichlet(np.ones(len(tracts)) * 0.5))
    income = (chooser.random(rows) < 0.2 + 0.1 * (tract // 200)).astype(int)
    table = pa.table({"tract": pa.array([tracts[i] for i in tract]),
                      "income": pa.array(np.where(income == 1, "high", "low").tolist()),
                      "age": pa.array(chooser.integers(18, 90, size=rows), pa.int64())})
    folder = tmp_path / "geo"
    folder.mkdir()
    pq.write_table(table, folder / "people.parquet", row_group_size=5_000)
    schema = {"table": "people", "columns": {
        "tract": {"type": "category", "categories": tracts},
        "income": {"type": "category", "categories": ["low", "high"]},
        "age": {"type": "int", "min": 18, "max": 89, "bins": {"width": 5}}},
        "hierarchies": {"geo": {"column": "tract", "levels": ["state", "county"],
                                "parents": {"state": {"prefix": 2}, "county": {"prefix": 5}}}}}
    (folder / "schema.yaml").write_text(yaml.safe_dump(schema))
    spec = {"dataset": "geo-test", "schema": "schema.yaml", "data": "people.parquet",
            "budget": {"epsilon": 1, "delta": 1e-9}, "lifetime_budget": {"epsilon": 2, "delta": 1e-9},
            "allocation": {"one_way": 0.3, "two_way": 0.3, "hierarchy": 0.4},
            "hierarchy_split": {"geo": {"state": 1, "county": 1, "tract": 2}},
            "two_way": [["tract", "income"], ["income", "age"]], "seed": 11}
    (folder / "release.yaml").write_text(yaml.safe_dump(spec))
    target = Path(release(spec=str(folder / "release.yaml"), out=str(tmp_path / "out"),
                          ledger=str(tmp_path / "l.sqlite"), release_id="geo-1"))
    levels = _check_hierarchy_release(target, "geo", ["total", "state", "county", "tract"], "tract")
    assert [len(level) for level in levels] == [1, 5, 100, 1000]
    assert abs(levels[0][0]["count"] - rows) < 300  # a noisy total, never the true one


def test_auto_pairs_are_chosen_privately_booked_and_replayed(prefect_harness, tmp_path, monkeypatch):
    import dprelease.flows.release

    folder = tmp_path / "example"
    folder.mkdir()
    for name in ("schema.yaml", "release-auto.yaml"):
        shutil.copy(ADULT / name, folder / name)
    # The first 8,000 rows: a private choice of 13 pairs, its booking and its replay do not depend on the size.
    pq.write_table(pq.read_table(ADULT / "adult.parquet").slice(0, 8000), folder / "adult.parquet")
    spec_path = folder / "release-auto.yaml"
    ledger = tmp_path / "l.sqlite"
    out = tmp_path / "out"
    with monkeypatch.context() as patch:
        patch.setattr(dprelease.flows.release, "estimate_model",
                      lambda *a, **k: (_ for _ in ()).throw(RuntimeError("fault")))
        with pytest.raises(RuntimeError, match="fault"):
            dprelease.flows.release.release(spec=str(spec_path), out=str(out), ledger=str(ledger), release_id="auto-1")
    with Ledger.open(ledger) as book:
        drawn = book.charges(release_id="auto-1")
    selections = [c for c in drawn if c.stage == "selection"]
    assert len(selections) == 13 and all(c.query.startswith("spanning tree edge ") for c in selections)
    assert [c.seq for c in selections] < [c.seq for c in drawn if c.stage == "two_way"]  # chosen, then measured

    target = Path(dprelease.flows.release.release(spec=str(spec_path), out=str(out), ledger=str(ledger),
                                                  release_id="auto-1"))
    with Ledger.open(ledger) as book:
        assert len(book.charges(release_id="auto-1")) == len(drawn)  # the re-run replayed every draw
    audit = json.loads((target / "audit.json").read_text())
    spec = load_spec(spec_path)
    chosen = audit["private_choices"]["selected_pairs"]
    assert len(chosen["pairs"]) == 13 and audit["public_inputs"]["two_way_pairs"].startswith("auto")
    measured = [m["query"] for m in audit["measurements"] if m["stage"] == "two_way"]
    assert measured == [f"marginal({a},{b})" for a, b in chosen["pairs"]]
    booked = sum(Fraction(m["booked"]["rho"]["exact"]) for m in audit["measurements"])
    assert booked <= spec.budget.amount
    assert Fraction(chosen["booked"]["exact"]) <= spec.budget.amount * spec.allocation["selection"]
    names = {c for pair in chosen["pairs"] for c in pair}
    assert names == {c.name for c in spec.schema.measured}  # a spanning tree touches every measured column
    table = pq.read_table(target / "synthetic" / "adult.parquet")
    assert table.column_names == list(spec.schema.names)


def test_contributions_are_bounded_per_privacy_unit(prefect_harness, tmp_path):
    """Households of 1-6 rows, at most 2 kept each: every mechanism is calibrated to sensitivity 2."""
    from dprelease.flows.release import release

    chooser = np.random.default_rng(3)  # test data, not a release
    sizes = chooser.integers(1, 7, size=3000)
    household = np.repeat(np.arange(len(sizes)), sizes)
    rows = len(household)
    table = pa.table({"household": pa.array(household, pa.int64()),
                      "tenure": pa.array(chooser.choice(["own", "rent"], size=rows).tolist()),
                      "income": pa.array(chooser.gamma(2.0, 20000.0, size=rows).round().astype(np.int64))})
    folder = tmp_path / "hh"
    folder.mkdir()
    pq.write_table(table, folder / "people.parquet", row_group_size=4000)
    schema = {"table": "people", "privacy_unit": {"id_column": "household", "max_rows": 2}, "columns": {
        "tenure": {"type": "category", "categories": ["own", "rent"]},
        "income": {"type": "int", "search_range": [0, 1048576], "bins": "log"}}}
    (folder / "schema.yaml").write_text(yaml.safe_dump(schema, sort_keys=False))
    spec = {"dataset": "households", "schema": "schema.yaml", "data": "people.parquet",
            "budget": {"epsilon": 1, "delta": 1e-9}, "lifetime_budget": {"epsilon": 2, "delta": 1e-9},
            "allocation": {"bounds": 0.1, "one_way": 0.4, "two_way": 0.5}, "two_way": [["tenure", "income"]]}
    (folder / "release.yaml").write_text(yaml.safe_dump(spec))
    target = Path(release(spec=str(folder / "release.yaml"), out=str(tmp_path / "out"),
                          ledger=str(tmp_path / "l.sqlite"), release_id="hh-1"))
    audit = json.loads((target / "audit.json").read_text())
    assert "at most 2 rows kept per id" in audit["privacy"]["unit"]
    sensitivities = {m["query"]: m["sensitivity"] for m in audit["measurements"]}
    assert sensitivities["marginal(tenure)"] == "L2=2" and sensitivities["marginal(tenure,income)"] == "L2=2"
    assert sensitivities["lower bound of income"].startswith("L1=2")
    synthetic = pq.read_table(target / "synthetic" / "people.parquet")
    assert synthetic.column_names == ["tenure", "income"]  # the id column is never released
    handling = json.loads((steward_of(target) / "row_handling.json").read_text())
    bounding = handling["contribution_bounding"]
    assert bounding["max_rows_per_id"] == 2 and bounding["dropped_over_cap"] == int(np.maximum(sizes - 2, 0).sum())
    assert abs(synthetic.num_rows - int(np.minimum(sizes, 2).sum())) < 200  # about the kept rows, noisily


def test_single_candidate_second_parents_are_skipped_and_reported(adult_release):
    target, _, _ = adult_release
    audit = json.loads((target / "audit.json").read_text())
    tree = audit["private_choices"]["junction_tree"]
    selections = tree["second_parent_selections"]
    three = [c for c in tree["cliques"] if len(c) == 3]
    assert selections["run"] + selections["skipped_single_candidate"] == len(three)
    booked = [m for m in audit["measurements"] if m["query"].startswith("second parent of ")]
    assert len(booked) == selections["run"]


def test_discovered_bounds_carry_a_public_quality_flag(adult_release):
    target, _, _ = adult_release
    bounds = json.loads((target / "audit.json").read_text())["private_choices"]["discovered_bounds"]
    assert set(bounds) == {"fnlwgt", "capital-gain", "capital-loss"}
    for b in bounds.values():
        for side in ("lower", "upper"):
            flag = b[f"{side}_quality"]
            assert flag.startswith(("found", "not found")) and ("doubling" in flag or "edge" in flag
                                                               or flag.startswith("not found"))
    markdown = (target / "audit.md").read_text()
    assert "- fnlwgt: lower " in markdown
