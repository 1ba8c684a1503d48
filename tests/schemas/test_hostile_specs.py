"""Specs and schemas nobody here would write: bombs, deep nesting, bad bytes, loops, absurd numbers, short shares."""

from __future__ import annotations

import shutil
import time
import unicodedata
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from dprelease.dp.measurement.marginals import ColumnDomain, count_all
from dprelease.reports.audit import build_audit  # noqa: F401  (the audit module loads with the new fields)
from dprelease.schemas.encoding import domains_for, rules_for
from dprelease.schemas.model import SchemaError
from dprelease.schemas.plan import plan_release
from dprelease.schemas.reading import MAX_YAML_ALIASES
from dprelease.schemas.spec import load_spec
from dprelease.schemas.table import load_schema
from dprelease.tasks.ingest import COALESCE_ROWS, batch_count, row_groups

ADULT = Path(__file__).resolve().parents[2] / "examples" / "adult"


def _example(tmp_path: Path, text: str | None = None, **changes: object) -> Path:
    folder = tmp_path / "example"
    folder.mkdir(exist_ok=True)
    for name in ("schema.yaml", "adult.parquet"):
        if not (folder / name).exists():
            shutil.copy(ADULT / name, folder / name)
    if text is None:
        doc = yaml.safe_load((ADULT / "release.yaml").read_text(encoding="utf-8"))
        doc.update(changes)
        text = yaml.safe_dump(doc)
    (folder / "release.yaml").write_text(text, encoding="utf-8")
    return folder / "release.yaml"


def _bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("key", ["weighting", "root", "dask"])
def test_an_alias_bomb_is_refused_without_being_expanded(tmp_path, key):
    base = (ADULT / "release.yaml").read_text(encoding="utf-8")
    text = _bomb() + base + f"{key}: *a8\n"
    spec = _example(tmp_path, text)
    start = time.monotonic()
    with pytest.raises(SchemaError, match=f"more than {MAX_YAML_ALIASES} aliases") as info:
        load_spec(spec)
    assert time.monotonic() - start < 10 and len(str(info.value)) < 300  # an expanded bomb takes minutes


def test_an_alias_bomb_in_a_column_type_is_refused(tmp_path):
    spec = _example(tmp_path)
    schema = spec.parent / "schema.yaml"
    schema.write_text(_bomb() + schema.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(SchemaError, match="aliases"):
        load_schema(schema)


def test_deep_nesting_non_utf8_and_symlink_loops_give_one_line(tmp_path):
    spec = _example(tmp_path, "a: " + "[" * 200 + "]" * 200 + "\n")
    with pytest.raises(SchemaError, match="nested more than"):
        load_spec(spec)
    spec.write_bytes(b"dataset: caf\xe9\n")
    with pytest.raises(SchemaError, match="is not UTF-8"):
        load_spec(spec)
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(tmp_path / "loop2.yaml")
    (tmp_path / "loop2.yaml").symlink_to(loop)
    with pytest.raises(SchemaError, match="cannot be read"):
        load_spec(loop)
    doc = yaml.safe_load((ADULT / "release.yaml").read_text(encoding="utf-8"))
    doc["data"] = "loop.parquet"
    (spec.parent / "loop.parquet").symlink_to(spec.parent / "loop.parquet")
    spec.write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(SchemaError, match="symbolic link loop"):
        load_spec(spec)
    huge = tmp_path / "huge.yaml"
    huge.write_text("a: " + "x" * (1 << 21) + "\n")
    with pytest.raises(SchemaError, match="larger than"):
        load_spec(huge)


@pytest.mark.parametrize(("budget", "rule"), [
    ({"epsilon": "1"}, "epsilon ('1') must be a number (not quoted)"),
    ({"epsilon": 1, "delta": "1.0e-9"}, "delta ('1.0e-9') must be a number (not quoted)"),
    ({"epsilon": 1e44}, "must be at most 100"),
    ({"epsilon": 1, "delta": 0.5}, "must be below 0.01"),
])
def test_absurd_or_quoted_budgets_are_refused(tmp_path, budget, rule):
    with pytest.raises(SchemaError, match=rule.replace("(", r"\(").replace(")", r"\)")):
        load_spec(_example(tmp_path, budget=budget, lifetime_budget={"epsilon": 100, "delta": 1e-9}))


def test_numbers_in_exponent_notation_without_a_point_are_numbers_and_quoted_ones_are_refused(tmp_path):
    """YAML 1.1 reads ``1e-9`` as text; a steward (and YAML 1.2) means a number."""
    text = (ADULT / "release.yaml").read_text(encoding="utf-8")
    budget = "budget: {epsilon: 1, delta: 1.0e-9}"
    assert budget in text
    spec = load_spec(_example(tmp_path, text.replace(budget, "budget: {epsilon: 5e-1, delta: 1e-9}")))
    assert spec.epsilon == Fraction(1, 2) and float(spec.delta) == 1e-9
    with pytest.raises(SchemaError, match=r"budget: delta \('1e-9'\) must be a number \(not quoted\)"):
        load_spec(_example(tmp_path, text.replace(budget, "budget: {epsilon: 1, delta: '1e-9'}")))
    schema = tmp_path / "example" / "schema.yaml"
    source = schema.read_text(encoding="utf-8")
    assert "search_range: [0, 1048576]" in source
    schema.write_text(source.replace("search_range: [0, 1048576]", "search_range: [0, 1E6]"), encoding="utf-8")
    assert ("capital-gain", 0, 1e6) in [(c.name, c.search_range[0], c.search_range[1])
                                        for c in load_schema(schema).columns if c.search_range]


@pytest.mark.parametrize("key", ["data", "schema"])
def test_a_url_for_the_data_or_schema_is_refused_naming_the_rule(tmp_path, key):
    with pytest.raises(SchemaError, match=rf"{key}: \('s3://bucket/adult.parquet'\) is a URL; dprelease reads local"):
        load_spec(_example(tmp_path, **{key: "s3://bucket/adult.parquet"}))


def test_a_search_range_beyond_2_53_is_refused(tmp_path):
    spec = _example(tmp_path)
    schema = spec.parent / "schema.yaml"
    doc = yaml.safe_load(schema.read_text(encoding="utf-8"))
    doc["columns"]["capital-gain"]["search_range"] = [0, 1e300]
    schema.write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(SchemaError, match=r"search_range\[1\].*within ±2\^53"):
        load_schema(schema)


def test_a_tiny_epsilon_is_refused_at_plan_time_in_milliseconds(tmp_path):
    spec = load_spec(_example(tmp_path, budget={"epsilon": 1e-12, "delta": 1e-9}))
    start = time.monotonic()
    with pytest.raises(SchemaError, match="noise of scale"):
        plan_release(spec, "r", 0)
    assert time.monotonic() - start < 10  # a blow-up, not a speed target: the refusal takes milliseconds


@pytest.mark.parametrize("entry", [
    {"column": "age", "statistics": ["mean", "median"]},
    {"sample_and_aggregate": "slope", "x": "age", "y": "hours-per-week", "chunks": 100, "range": [-1, 1]},
])
def test_a_tiny_stats_share_is_refused_at_plan_time_like_any_measurement(tmp_path, entry):
    allocation = {"bounds": 0.05, "one_way": 0.39, "selection": 0.04, "cliques": 0.46, "hierarchy": 0.05,
                  "stats": 1e-14}
    spec = load_spec(_example(tmp_path, allocation=allocation, stats=[entry]))
    with pytest.raises(SchemaError, match=r"stats\(.*\) would get noise of scale"):
        plan_release(spec, "r", 0)


def test_a_quantile_list_that_leaves_each_level_a_tiny_share_is_refused_at_plan_time(tmp_path):
    allocation = {"bounds": 0.05, "one_way": 0.35, "selection": 0.04, "cliques": 0.46, "hierarchy": 0.05, "stats": 1e-7}
    levels = [round(i / 100_001, 9) for i in range(1, 100_001, 2)]  # 50,000 levels, each 1/50,000 of the share
    mean = [{"column": "age", "statistics": ["mean"]}]
    plan_release(load_spec(_example(tmp_path, allocation=allocation, stats=mean)), "r", 0)  # the share is not too small
    spec = load_spec(_example(tmp_path, allocation=allocation,
                              stats=[{"column": "age", "statistics": ["quantiles"], "quantiles": levels}]))
    with pytest.raises(SchemaError, match=r"stats\(age\) would get noise of scale"):
        plan_release(spec, "r", 0)


def test_shares_below_1_spend_only_that_fraction(tmp_path):
    full = plan_release(load_spec(_example(tmp_path)), "r", 0)
    doc = yaml.safe_load((ADULT / "release.yaml").read_text(encoding="utf-8"))
    half = {stage: share / 2 for stage, share in doc["allocation"].items()}
    halved = plan_release(load_spec(_example(tmp_path, allocation=half)), "r", 0)
    assert halved.total.amount == full.total.amount / 2 and halved.spent_share == Fraction(1, 2)
    assert all(halved.stages[s].amount == full.stages[s].amount / 2 for s in full.stages)
    assert any("only that fraction" in line for line in halved.lines())
    assert full.spent_share == 1


def test_nfd_data_matches_nfc_categories():
    cafe = unicodedata.normalize("NFC", "café")
    domain = ColumnDomain("drink", "category", categories=(cafe, "tea"))
    values = [unicodedata.normalize("NFD", "café")] * 100 + ["tea"] * 5 + ["other"]
    counts, handling = count_all([pa.table({"drink": values})], [domain], {}, [("drink",)])
    assert counts[("drink",)].tolist() == [100, 5]
    assert sum(handling.dropped_unknown.values()) == 1


def test_twenty_thousand_one_row_row_groups_are_read_in_a_few_batches(tmp_path):
    table = pq.read_table(ADULT / "adult.parquet").slice(0, 20_000)
    path = tmp_path / "tiny-groups.parquet"
    pq.write_table(table, path, row_group_size=1)
    assert pq.ParquetFile(path).num_row_groups == 20_000
    batches = list(row_groups(path, ["age", "education"]))
    assert len(batches) == batch_count(path) == -(-20_000 // COALESCE_ROWS)
    assert sum(b.num_rows for b in batches) == 20_000
    schema = load_schema(ADULT / "schema.yaml")
    domains = domains_for(schema, {"fnlwgt": (0, 2**20), "capital-gain": (0, 2**17), "capital-loss": (0, 2**12)})
    counts, _ = count_all(row_groups(path, [d.name for d in domains]), domains, rules_for(schema),
                          [(d.name,) for d in domains])
    expected, _ = count_all([table.select([d.name for d in domains])], domains, rules_for(schema),
                            [(d.name,) for d in domains])
    assert all(np.array_equal(counts[k], expected[k]) for k in expected)


def test_implausible_budgets_are_allowed_with_a_warning(tmp_path, caplog):
    from dprelease.tasks.preflight import warn_implausible

    spec = load_spec(_example(tmp_path, budget={"epsilon": 20, "delta": 1e-4},
                              lifetime_budget={"epsilon": 50, "delta": 1e-4}, release_cap=None))
    with caplog.at_level("WARNING", logger="dprelease"):
        lines = warn_implausible(spec)
    assert len(lines) == 3 and [r.getMessage() for r in caplog.records] == lines
    assert warn_implausible(load_spec(_example(tmp_path))) == []
