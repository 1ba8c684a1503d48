"""Bad input, one case per test: what is refused before the data is opened, before noise, or handled per row.

Three outcomes, each proved with a spy on the production noise sampler and the ledger:

- refused before the data file is opened (a bad spec or schema, a release over the remaining budget,
  a plan over the cell limit): the data file has been moved away and ``dprelease.tasks.ingest.open_parquet`` is
  spied on, so any read would show; nothing is charged and nothing stays reserved;
- refused before any noise is drawn (an unreadable, truncated or corrupted file; missing, duplicated or
  mistyped columns): the reservation is released (status ``failed``), nothing is charged or published;
- handled row by row (nulls, NaN, infinities, values outside bounds or domain, extra columns): the release
  completes, and the counts appear only in ``internal/row_handling.json``.

Error messages never hold a cell value: canary values sit in the cells and are looked for in the message.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

import dprelease.tasks.ingest
from dprelease.dp.accounting.budget import ZCDPBudget
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import BudgetExceededError, LedgerError, ParameterError
from dprelease.dp.mechanisms.random import OpenDPNoise
from dprelease.schemas.model import MAX_CELLS, SchemaError
from dprelease.schemas.plan import plan_release
from dprelease.schemas.spec import load_spec
from dprelease.schemas.table import load_schema
from dprelease.tasks.ingest import InputError
from tests.steward import steward_of

DATASET = "bad-input"
CANARY_TEXT = "CANARY_k3Vq9"
CANARY_NUMBER = 918273645
CANARY_FLOAT = 777.125  # above the public max of height: clamped, and never printed
ROWS = 600

SCHEMA: dict[str, Any] = {
    "table": "people",
    "columns": {
        "age": {"type": "int", "min": 0, "max": 100, "bins": {"width": 10}},
        "height": {"type": "float", "min": 100, "max": 220, "bins": {"count": 12}},
        "sex": {"type": "category", "categories": ["F", "M", "other"], "on_unknown": "other"},
        "colour": {"type": "category", "nullable": True, "categories": ["red", "green", "blue"]},
        "income": {"type": "int", "search_range": [0, 1048576], "bins": "log"},
    },
}
SPEC: dict[str, Any] = {
    "dataset": DATASET,
    "schema": "schema.yaml",
    "data": "people.parquet",
    "budget": {"epsilon": 1, "delta": 1e-9},
    "lifetime_budget": {"epsilon": 3, "delta": 1e-9},
    "allocation": {"bounds": 0.1, "one_way": 0.5, "two_way": 0.4},
    "two_way": [["age", "sex"]],
    "weighting": "equal",
}


def _columns(rows: int) -> dict[str, list[Any]]:
    """A clean table of ``rows`` rows (test data, not a release)."""
    return {
        "age": [20 + i % 60 for i in range(rows)],
        "height": [150.0 + (i % 50) for i in range(rows)],
        "sex": [("F", "M")[i % 2] for i in range(rows)],
        "colour": [("red", "green", "blue", None)[i % 4] for i in range(rows)],
        "income": [(i * 7919) % 90000 for i in range(rows)],
    }


def _table(columns: dict[str, list[Any]]) -> pa.Table:
    types = {"age": pa.int64(), "height": pa.float64(), "sex": pa.string(), "colour": pa.string(),
             "income": pa.int64()}
    return pa.table({name: pa.array(values, types.get(name)) for name, values in columns.items()})


def _example(folder: Path, table: pa.Table | None = None, *, schema: dict[str, Any] | None = None,
             **changes: Any) -> Path:
    """Schema, spec (with ``changes``) and, unless None, the data file in ``folder``; returns the spec."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "schema.yaml").write_text(yaml.safe_dump(schema or SCHEMA, sort_keys=False), encoding="utf-8")
    (folder / "release.yaml").write_text(yaml.safe_dump({**SPEC, **changes}, sort_keys=False), encoding="utf-8")
    if table is not None:
        pq.write_table(table, folder / "people.parquet", write_page_checksum=True)
    return folder / "release.yaml"


@pytest.fixture
def draws(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts every call of the production noise sampler."""
    calls: list[str] = []
    laplace, gaussian = OpenDPNoise.discrete_laplace, OpenDPNoise.discrete_gaussian

    def spy_laplace(self: OpenDPNoise, values: Any, scale: float) -> Any:
        calls.append("laplace")
        return laplace(self, values, scale)

    def spy_gaussian(self: OpenDPNoise, values: Any, sigma: float) -> Any:
        calls.append("gaussian")
        return gaussian(self, values, sigma)

    monkeypatch.setattr(OpenDPNoise, "discrete_laplace", spy_laplace)
    monkeypatch.setattr(OpenDPNoise, "discrete_gaussian", spy_gaussian)
    return calls


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Records every path given to ``dprelease.tasks.ingest.open_parquet`` (the one way the data file is opened)."""
    paths: list[Path] = []
    real = dprelease.tasks.ingest.open_parquet

    def spy(path: Path) -> Any:
        paths.append(path)
        return real(path)

    monkeypatch.setattr(dprelease.tasks.ingest, "open_parquet", spy)
    return paths


def _run(spec: Path, tmp_path: Path, release_id: str) -> Path:
    from dprelease.flows.release import release

    return Path(release(spec=str(spec), out=str(tmp_path / "out"), ledger=str(tmp_path / "ledger.sqlite"),
                        release_id=release_id))


def _assert_nothing_charged(tmp_path: Path, release_id: str, *, reserved_then_failed: bool) -> None:
    ledger_path = tmp_path / "ledger.sqlite"
    if ledger_path.exists():
        with Ledger.open(ledger_path) as ledger:
            assert ledger.charges() == []
            if reserved_then_failed:
                assert ledger.release_status(release_id) == "failed"
            else:
                assert ledger.release_plan(release_id) is None  # never reserved
            try:
                status = ledger.status(DATASET)
            except LedgerError:  # the dataset was never registered: nothing reserved
                status = None
            if status is not None:
                assert status.reserved == 0 and status.spent == 0
    else:
        assert not reserved_then_failed
    dataset_dir = tmp_path / "out" / DATASET
    assert not dataset_dir.exists() or list(dataset_dir.iterdir()) == []


def _spec_error(folder: Path, *, schema: dict[str, Any] | None = None, **changes: Any) -> str:
    """The SchemaError (or ParameterError) message of loading and planning a spec without data."""
    spec = _example(folder, schema=schema, **changes)
    assert not (folder / "people.parquet").exists()  # any attempt to read it would raise another error
    with pytest.raises((SchemaError, ParameterError)) as info:
        plan_release(load_spec(spec), "r", 1)
    return str(info.value)


# --- rejected before the data file is opened: spec and schema checks (no flow run) ----------------------------

@pytest.mark.parametrize(
    ("epsilon", "rule"),
    [
        (0, "epsilon (0) must be positive"),
        (-0.5, "epsilon (-0.5) must be positive"),
        (float("nan"), "epsilon (nan) must be a finite number"),
        (float("inf"), "epsilon (inf) must be a finite number"),
        (float("-inf"), "epsilon (-inf) must be a finite number"),
        ("1", "epsilon ('1') must be a number"),
        ("one", "epsilon ('one') must be a number"),
        (True, "epsilon (a boolean) must be a number"),
    ],
)
def test_bad_epsilon_is_refused(tmp_path: Path, epsilon: object, rule: str) -> None:
    message = _spec_error(tmp_path, budget={"epsilon": epsilon, "delta": 1e-9})
    assert f"budget: {rule}" in message


@pytest.mark.parametrize("rho", [0, -1, float("nan"), float("inf"), float("-inf"), True])
def test_bad_rho_is_refused(rho: object) -> None:
    with pytest.raises(ParameterError, match=r"^rho \(.*\) must be"):
        ZCDPBudget(rho)  # type: ignore[arg-type]


def test_rho_is_not_a_spec_key(tmp_path: Path) -> None:
    message = _spec_error(tmp_path, budget={"rho": 0.1})
    assert "budget: unknown key 'rho'" in message


@pytest.mark.parametrize(("delta", "shown"), [(1, "1"), (1.5, "1.5"), (-1e-9, "-1e-09"), (0, "0")])
def test_bad_delta_is_refused(tmp_path: Path, delta: float, shown: str) -> None:
    message = _spec_error(tmp_path, budget={"epsilon": 1, "delta": delta},
                          lifetime_budget={"epsilon": 3, "delta": delta})
    assert f"budget: delta ({shown}) must be in (0, 1)" in message


def test_allocation_shares_over_one_in_exact_arithmetic_are_refused(tmp_path: Path) -> None:
    # 0.1 + 0.2 is 0.30000000000000004 in floating point; written as 0.1 and 0.2 it is exactly 0.3.
    exact = _example(tmp_path / "exact", allocation={"bounds": 0.1, "one_way": 0.2, "two_way": 0.7})
    assert sum(load_spec(exact).allocation.values()) == 1
    message = _spec_error(tmp_path / "over", allocation={"bounds": 0.1, "one_way": 0.2, "two_way": 0.7000000001})
    assert "allocation: shares sum to" in message and "they must sum to at most 1" in message


@pytest.mark.parametrize(
    ("parents", "levels", "rule"),
    [
        ({"region": {"A": ["a", "b"]}}, ["region"], "child 'c' has no parent"),
        ({"region": {"A": ["a", "b", "c"], "B": ["c"]}}, ["region"], "child 'c' has two parents"),
        ({"region": {"A": ["a", "b", "c"]}}, ["region", "code"], "must name each level once, and not the column"),
        ({"region": {"A": ["a", "b", "c", "zz"]}}, ["region"], "child 'zz' is not among the declared categories"),
    ],
    ids=["no-parent", "two-parents", "cycle", "outside-domain"],
)
def test_bad_hierarchy_is_refused(tmp_path: Path, parents: dict[str, Any], levels: list[str], rule: str) -> None:
    schema = {"table": "codes", "columns": {"code": {"type": "category", "categories": ["a", "b", "c"]}},
              "hierarchies": {"h": {"column": "code", "levels": levels, "parents": parents}}}
    message = _spec_error(tmp_path, schema=schema, two_way=None,
                          allocation={"one_way": 0.5, "hierarchy": 0.5})
    assert rule in message


@pytest.mark.parametrize(
    ("column", "rule"),
    [
        ({"type": "int", "min": 90, "max": 17}, "min (90) must be below max (17)"),
        ({"type": "int", "min": 5, "max": 5}, "min (5) must be below max (5)"),
        ({"type": "float", "min": float("nan"), "max": 1.0}, "min: (nan) must be a finite number"),
        ({"type": "float", "min": 0.0, "max": float("inf")}, "max: (inf) must be a finite number"),
        ({"type": "int", "search_range": [10, 0]}, "low (10) must be below high (0)"),
    ],
    ids=["inverted", "empty", "nan-min", "inf-max", "inverted-search-range"],
)
def test_bad_bounds_are_refused(tmp_path: Path, column: dict[str, Any], rule: str) -> None:
    schema = {"table": "t", "columns": {"age": column}}
    with pytest.raises(SchemaError, match=r"columns\.age") as info:
        load_schema(_write(tmp_path / "schema.yaml", schema))
    assert rule in str(info.value)


@pytest.mark.parametrize(
    ("categories", "rule"),
    [
        ([], "must be a non-empty list"),
        (["a", ""], "categories[1]: must be a non-empty string"),
        (["a", "a"], "categories[1]: duplicates an earlier category"),
        (["caf\u00e9", "cafe\u0301"], "categories[1]: duplicates an earlier category (after Unicode normalisation)"),
    ],
    ids=["empty-list", "empty-string", "duplicate", "duplicate-after-nfc"],
)
def test_empty_or_duplicate_categories_are_refused(tmp_path: Path, categories: list[str], rule: str) -> None:
    schema = {"table": "t", "columns": {"c": {"type": "category", "categories": categories}}}
    with pytest.raises(SchemaError) as info:
        load_schema(_write(tmp_path / "schema.yaml", schema))
    assert rule in str(info.value)


def test_a_nullable_column_may_not_declare_the_label_of_null(tmp_path: Path) -> None:
    """Its published 1-way read [<null>: 161, a: 162, <null>: 177]: which row was the category, which null?"""
    column = {"type": "category", "categories": ["<null>", "a"]}
    assert load_schema(_write(tmp_path / "ok.yaml", {"table": "t", "columns": {"c": column}})).columns[0].categories
    with pytest.raises(SchemaError) as info:
        load_schema(_write(tmp_path / "schema.yaml", {"table": "t", "columns": {"c": {**column, "nullable": True}}}))
    assert str(info.value).endswith("columns.c.categories: declares '<null>', the label of null in a published "
                                    "marginal: in a nullable column the two would read alike; rename the category")


def test_marginal_over_the_cell_limit_is_refused(tmp_path: Path) -> None:
    message = _spec_error(tmp_path, **_wide())
    assert f"the limit is {MAX_CELLS}" in message and "marginal(wide,age)" in message


def test_a_cell_count_past_any_limit_is_said_in_a_few_characters(tmp_path: Path) -> None:
    """Bins of width 1e-300 over [100, 220] once printed a count of 303 digits in the one-line message."""
    schema = {**SCHEMA, "columns": {**SCHEMA["columns"],
                                    "height": {"type": "float", "min": 100, "max": 220, "bins": {"width": 1e-300}}}}
    message = _spec_error(tmp_path, schema=schema)
    assert message.endswith(f"marginal(height) would have up to more than 10^302 cells; the limit is {MAX_CELLS}")


def _wide() -> dict[str, Any]:
    """Spec changes whose 2-way marginal (wide x age) has more than MAX_CELLS cells."""
    schema = {"table": "people", "columns": {
        "wide": {"type": "int", "min": 0, "max": 20000},
        "age": {"type": "int", "min": 0, "max": 100}}}
    return {"schema": schema, "two_way": [["wide", "age"]], "allocation": {"one_way": 0.5, "two_way": 0.5}}


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


# --- rejected before the data file is opened: the flow ----------------------------------------------------------

@pytest.mark.e2e
def test_flow_refuses_a_bad_spec_before_the_ledger_or_the_data(prefect_harness, tmp_path, draws, opened):
    spec = _example(tmp_path / "example", budget={"epsilon": float("nan"), "delta": 1e-9})  # no data file at all
    with pytest.raises(SchemaError, match=re.escape("budget: epsilon (nan) must be a finite number")):
        _run(spec, tmp_path, "bad-spec")
    assert opened == [] and draws == []
    assert not (tmp_path / "ledger.sqlite").exists()  # refused before the ledger was opened
    _assert_nothing_charged(tmp_path, "bad-spec", reserved_then_failed=False)


@pytest.mark.e2e
def test_flow_refuses_a_plan_over_the_cell_limit_before_reserving(prefect_harness, tmp_path, draws, opened):
    spec = _example(tmp_path / "example", **_wide())
    with pytest.raises(SchemaError, match=re.escape(f"the limit is {MAX_CELLS}")):
        _run(spec, tmp_path, "too-wide")
    assert opened == [] and draws == []
    _assert_nothing_charged(tmp_path, "too-wide", reserved_then_failed=False)


BAD_STATS: list[tuple[list[dict[str, Any]], dict[str, Any], str]] = [
    ([{"column": "age", "statistics": ["quantiles"], "quantiles": [0.5, 1.0]}], {},
     "stats[0].quantiles: (1.0) must be a number strictly between 0 and 1"),
    ([{"column": "sex", "statistics": ["mean"]}], {}, "stats[0].column: ('sex') must be a measured numeric column"),
    ([{"column": "age", "statistics": ["mean"], "by": "height"}], {},
     "stats[0].by: ('height') must be a declared category column"),
    ([{"column": "age", "statistics": ["mean"], "sample_and_aggregate": {"function": "slope"}}], {},
     "sample_and_aggregate"),
    ([{"sample_and_aggregate": "median_of_ratios", "x": "age", "y": "height", "chunks": 10, "range": [0, 1]}], {},
     "stats[0].sample_and_aggregate: ('median_of_ratios') must be a registered function: ratio, slope"),
    ([{"column": "age", "statistics": ["median"], "method": "ptr", "proposed_bound": 1, "delta": 1e-10}],
     {"budget": {"epsilon": 1}, "lifetime_budget": {"epsilon": 3}},
     "stats[0].method: ptr is (epsilon, delta)-DP: it needs a budget with delta (zCDP), not pure epsilon"),
    ([{"column": "age", "statistics": ["mean"], "method": "smooth", "delta": 1e-10}], {},
     "stats[0].method: applies to median and quantiles only"),
]


@pytest.mark.e2e
def test_flow_refuses_bad_statistics_before_reserving(prefect_harness, tmp_path, draws, opened):
    allocation = {"bounds": 0.1, "one_way": 0.4, "two_way": 0.4, "stats": 0.1}
    for i, (stats, changes, rule) in enumerate(BAD_STATS):
        folder = tmp_path / f"case{i}"
        spec = _example(folder / "example", _table(_columns(ROWS)), allocation=allocation, stats=stats, **changes)
        with pytest.raises(SchemaError, match=re.escape(rule)) as refused:
            _run(spec, folder, f"bad-stats-{i}")
        assert "\n" not in str(refused.value)
        assert opened == [] and draws == []
        _assert_nothing_charged(folder, f"bad-stats-{i}", reserved_then_failed=False)


@pytest.mark.e2e
def test_release_over_the_remaining_budget_is_refused_not_scaled_down(prefect_harness, tmp_path, draws, opened):
    spec_path = _example(tmp_path / "example")  # no data file: any read would raise another error
    spec = load_spec(spec_path)
    ledger_path = tmp_path / "ledger.sqlite"
    with Ledger.open(ledger_path) as ledger:  # an earlier release spent 95% of the lifetime rho
        ledger.register(DATASET, spec.definition, spec.lifetime, spec.delta, spec.release_cap)
        ledger.reserve(DATASET, "earlier", ZCDPBudget(spec.lifetime.amount * Fraction(19, 20)))
        ledger.charge("earlier", stage="one_way", query="marginal(age)", mechanism="test", sensitivity="L2=1",
                      scale="1", loss=ZCDPBudget(spec.lifetime.amount * Fraction(19, 20)))
        ledger.publish("earlier")
        before = ledger.status(DATASET)
    assert before.remaining < spec.budget.amount
    with pytest.raises(BudgetExceededError) as info:
        _run(spec_path, tmp_path, "too-big")
    assert info.value.requested == spec.budget.amount  # the whole budget was asked for, never a scaled one
    assert opened == [] and draws == []
    with Ledger.open(ledger_path) as ledger:
        assert [c.release_id for c in ledger.charges()] == ["earlier"]
        assert ledger.release_plan("too-big") is None
        after = ledger.status(DATASET)
        assert (after.spent, after.reserved) == (before.spent, 0)
    assert not (tmp_path / "out" / DATASET / "too-big").exists()


# --- rejected before any noise is drawn, reservation released ---------------------------------------------------

def _flip_a_data_byte(path: Path) -> None:
    """Flip one byte inside the dictionary page of column ``age``: footer and page headers stay valid.

    The file is rewritten uncompressed, so that without page-checksum verification the flip goes
    unnoticed and silently changes the column (checked here); only the CRC of the page reveals it.
    """
    table = pq.read_table(path)
    pq.write_table(table, path, write_page_checksum=True, compression="none")
    meta = pq.ParquetFile(path).metadata.row_group(0).column(table.column_names.index("age"))
    assert meta.dictionary_page_offset is not None
    data = bytearray(path.read_bytes())
    data[meta.dictionary_page_offset + (meta.data_page_offset - meta.dictionary_page_offset) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    assert not pq.ParquetFile(path).read_row_group(0, columns=["age"]).equals(table.select(["age"]))


def _not_parquet(path: Path) -> None:
    path.write_text(f"age,sex\n{CANARY_NUMBER},{CANARY_TEXT}\n", encoding="utf-8")


def _truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _missing_column(path: Path) -> None:
    table = pq.read_table(path)
    pq.write_table(table.drop_columns(["height"]), path)


def _duplicated_column(path: Path) -> None:
    table = pq.read_table(path)
    extra = pa.array([CANARY_NUMBER] * table.num_rows, pa.int64())
    pq.write_table(pa.Table.from_arrays([*table.columns, extra], names=[*table.column_names, "age"]), path)


def _wrong_type(path: Path) -> None:
    table = pq.read_table(path)
    ages = pa.array([str(v) for v in table.column("age").to_pylist()[:-1]] + [CANARY_TEXT])
    pq.write_table(table.set_column(table.column_names.index("age"), "age", ages), path)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("damage", "rule", "reserved"),
    [  # Caught by the preflight (file metadata only) before anything is reserved, except a flipped page byte.
        (_not_parquet, "people.parquet: not a readable Parquet file", False),
        (_truncated, "people.parquet: not a readable Parquet file", False),
        (_flip_a_data_byte, "people.parquet: row group 0 cannot be read", True),
        (_missing_column, "column 'height': must be present", False),
        (_duplicated_column, "column 'age': must appear only once", False),
        (_wrong_type, "column 'age': must have an integer type (found string)", False),
    ],
    ids=["not-parquet", "truncated", "flipped-byte", "missing-column", "duplicated-column", "wrong-type"],
)
def test_unusable_file_is_refused_before_any_noise(
    prefect_harness, tmp_path, draws, damage: Callable[[Path], None], rule: str, reserved: bool
):
    spec = _example(tmp_path / "example", _table(_columns(ROWS)))
    damage(spec.parent / "people.parquet")
    with pytest.raises(InputError) as info:
        _run(spec, tmp_path, "damaged")
    message = str(info.value)
    assert rule in message
    assert CANARY_TEXT not in message and str(CANARY_NUMBER) not in message
    assert draws == []
    _assert_nothing_charged(tmp_path, "damaged", reserved_then_failed=reserved)



@pytest.mark.e2e
def test_dataset_folder_whose_files_disagree_in_schema_is_refused_before_any_noise(prefect_harness, tmp_path, draws):
    spec = _example(tmp_path / "example", data="people")
    folder = spec.parent / "people"
    folder.mkdir()
    clean = _table(_columns(ROWS))
    pq.write_table(clean, folder / "part-0.parquet")
    other = clean.set_column(clean.column_names.index("age"), "age",
                             pa.array([CANARY_NUMBER] * ROWS, pa.int32()))  # int32 here, int64 in part-0
    pq.write_table(other, folder / "part-1.parquet")
    with pytest.raises(InputError) as info:
        _run(spec, tmp_path, "folder")
    message = str(info.value)
    assert "part-1.parquet" in message and "'age'" in message and "same Arrow schema" in message
    assert str(CANARY_NUMBER) not in message
    assert draws == []
    _assert_nothing_charged(tmp_path, "folder", reserved_then_failed=False)  # the preflight reads footers only

# --- handled row by row, never failing a run ---------------------------------------------------------------------

def _awkward_table() -> pa.Table:
    """The clean table with one awkward cell per row 0-9 and an undeclared column, canaries in the cells."""
    columns = _columns(ROWS)
    columns["age"][0] = None  # null in a non-null column: dropped
    columns["height"][1] = math.nan  # NaN is not a null in Arrow: dropped all the same
    columns["height"][2] = math.inf  # clamped to the upper bound
    columns["height"][3] = -math.inf  # clamped to the lower bound
    columns["height"][4] = CANARY_FLOAT  # above the public max: clamped
    columns["age"][5] = CANARY_NUMBER  # above the public max: clamped
    columns["sex"][6] = CANARY_TEXT  # outside the domain, on_unknown: other: mapped
    columns["colour"][7] = CANARY_TEXT  # outside the domain, on_unknown: drop: dropped
    columns["income"][8] = None  # null in a non-null column (no public bounds): dropped
    columns["income"][9] = CANARY_NUMBER  # beyond the search range: clamped to the discovered bound
    columns["secret"] = [f"{CANARY_TEXT}-{i}" for i in range(ROWS)]  # undeclared: ignored
    table = _table(columns)
    for name, row in (("sex", 10), ("colour", 11)):  # text that is not UTF-8: outside the domain, mapped or dropped
        raw = pa.array([(b"\xff" + CANARY_TEXT.encode()) if i == row else None if v is None else v.encode()
                        for i, v in enumerate(columns[name])], pa.binary())
        table = table.set_column(table.column_names.index(name), name,
                                 pa.Array.from_buffers(pa.string(), len(raw), raw.buffers(), raw.null_count))
    return table


def _charged(ledger_path: Path, release_id: str) -> list[tuple[str, str]]:
    with Ledger.open(ledger_path) as ledger:
        return [(c.stage, c.query) for c in ledger.charges(release_id=release_id)]


def _public_bytes(target: Path) -> list[bytes]:
    return [p.read_bytes() for p in target.rglob("*")
            if p.is_file()]


@pytest.fixture(scope="module")
def handled(prefect_harness, tmp_path_factory) -> dict[str, Any]:
    """One release of the awkward table, with the noise spy and every log record captured."""
    tmp = tmp_path_factory.mktemp("handled")
    spec = _example(tmp / "example", _awkward_table())
    calls: list[str] = []
    laplace, gaussian = OpenDPNoise.discrete_laplace, OpenDPNoise.discrete_gaussian
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append  # type: ignore[method-assign]
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(OpenDPNoise, "discrete_laplace",
                          lambda self, v, s: (calls.append("laplace"), laplace(self, v, s))[1])
            patch.setattr(OpenDPNoise, "discrete_gaussian",
                          lambda self, v, s: (calls.append("gaussian"), gaussian(self, v, s))[1])
            target = _run(spec, tmp, "handled")
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    logs = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in records)
    handling = json.loads((steward_of(target) / "row_handling.json").read_text())
    return {"target": target, "draws": len(calls), "charged": _charged(tmp / "ledger.sqlite", "handled"),
            "logs": logs, "handling": handling}


@pytest.mark.e2e
def test_awkward_rows_never_fail_a_release(handled):
    target = handled["target"]
    assert (target / "manifest.json").exists() and handled["draws"] > 0 and handled["charged"]
    with Ledger.open(target.parents[2] / "ledger.sqlite") as ledger:
        assert ledger.release_status("handled") == "published"
        assert ledger.status(DATASET).reserved == 0


@pytest.mark.e2e
def test_null_in_a_non_null_column_drops_the_row(handled):
    assert handled["handling"]["dropped_null"].get("age") == 1
    assert handled["handling"]["dropped_null"].get("income") == 1


@pytest.mark.e2e
def test_nan_drops_the_row(handled):
    assert handled["handling"]["dropped_null"].get("height") == 1


@pytest.mark.e2e
def test_infinities_and_numbers_outside_the_bounds_are_clamped(handled):
    clamped = handled["handling"]["clamped"]
    assert clamped.get("height") == 3  # +inf, -inf and the canary
    assert clamped.get("age") == 1
    assert clamped.get("income", 0) >= 1  # the canary lies beyond any bound SVT can discover


@pytest.mark.e2e
def test_categories_outside_the_domain_are_mapped_or_dropped_as_declared(handled):
    assert handled["handling"]["mapped_unknown"] == {"sex": 2}  # the canary and the text that is not UTF-8
    assert handled["handling"]["dropped_unknown"] == {"colour": 2}
    synthetic = pq.read_table(handled["target"] / "synthetic" / "people.parquet")
    assert set(synthetic.column("sex").to_pylist()) <= {"F", "M", "other"}


@pytest.mark.e2e
def test_undeclared_columns_are_ignored(handled):
    synthetic = pq.read_table(handled["target"] / "synthetic" / "people.parquet")
    assert synthetic.column_names == list(SCHEMA["columns"])
    assert handled["handling"]["rows_in"] == ROWS
    assert handled["handling"]["rows_kept"] == ROWS - 5  # the two null rows, the NaN row, the dropped categories


@pytest.mark.e2e
def test_row_counts_and_cell_values_stay_internal(handled):
    target = handled["target"]
    for data in _public_bytes(target):
        for secret in (CANARY_TEXT, str(CANARY_NUMBER), str(CANARY_FLOAT), "dropped_null", "clamped",
                       "mapped_unknown", "dropped_unknown", "rows_kept"):
            assert secret.encode() not in data
    assert "row_handling.json" in {p.name for p in (steward_of(target)).iterdir()}
    assert handled["logs"]
    for secret in (CANARY_TEXT, str(CANARY_NUMBER), str(CANARY_FLOAT)):
        assert secret not in handled["logs"]


# --- the empty and the one-row table take the same path as any other ---------------------------------------------

@pytest.mark.e2e
@pytest.mark.parametrize("rows", [0, 1], ids=["empty", "one-row"])
def test_empty_and_one_row_tables_take_the_same_path(handled, tmp_path, draws, rows):
    spec = _example(tmp_path / "example", _table(_columns(rows)))
    target = _run(spec, tmp_path, f"rows-{rows}")
    synthetic = pq.read_table(target / "synthetic" / "people.parquet")
    assert synthetic.column_names == list(SCHEMA["columns"])
    assert len(draws) == handled["draws"]  # the same measurements, noise drawn for each
    assert _charged(tmp_path / "ledger.sqlite", f"rows-{rows}") == handled["charged"]
    handling = json.loads((steward_of(target) / "row_handling.json").read_text())
    assert (handling["rows_in"], handling["rows_kept"]) == (rows, rows)
    with Ledger.open(tmp_path / "ledger.sqlite") as ledger:
        assert ledger.release_status(f"rows-{rows}") == "published"
        assert ledger.status(DATASET).reserved == 0
