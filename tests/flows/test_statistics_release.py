"""Summary statistics in a release (``stats:``): measured, booked in stage ``stats``, published, replayed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dprelease.dp.accounting.ledger import Ledger
from dprelease.flows.release import release
from dprelease.schemas.model import SchemaError
from dprelease.schemas.plan import plan_release
from dprelease.schemas.spec import load_spec
from dprelease.tasks.staging import verify_release
from tests.examples import adult_example
from tests.steward import steward_of

ALLOCATION = {"bounds": 0.05, "one_way": 0.35, "selection": 0.04, "cliques": 0.41, "hierarchy": 0.05, "stats": 0.10}
STATS = [
    {"column": "age", "statistics": ["count", "mean", "std", "median", "quantiles"], "quantiles": [0.1, 0.9]},
    # no public bounds: chosen for the mean (dp.statistics.means); the median on the bounds stage's
    {"column": "capital-gain", "statistics": ["mean", "median"]},
]
SLOPE = {"sample_and_aggregate": "slope", "x": "age", "y": "hours-per-week", "chunks": 1000, "range": [-1, 1]}


def test_the_plan_splits_the_stats_stage_over_columns_and_mechanisms(tmp_path):
    plan = plan_release(load_spec(adult_example(tmp_path, allocation=ALLOCATION, stats=STATS)), "r", 1)
    age, gain = plan.statistics
    assert [float(q) for q in age.quantiles] == [0.1, 0.5, 0.9]
    assert age.moments_budget.amount + age.quantiles_budget.amount <= plan.stages["stats"].amount / 2
    assert (age.lower, age.upper) != (None, None) and (gain.lower, gain.upper) == (None, None)
    assert gain.quantiles_budget is not None and gain.statistics == ("count", "mean", "median")
    assert any(line.strip().startswith("stats: age") for line in plan.lines())


@pytest.mark.parametrize(
    ("stats", "message"),
    [
        ([{"column": "sex", "statistics": ["mean"]}], r"stats\[0\]\.column: \('sex'\) must be a measured numeric"),
        ([{"column": "age", "statistics": ["mode"]}], r"stats\[0\]\.statistics: \('mode'\) must be one of"),
        ([{"column": "age", "statistics": ["quantiles"]}], r"stats\[0\]\.quantiles: must be given exactly when"),
        ([{"column": "age", "statistics": ["quantiles"], "quantiles": [1.5]}], r"must be a number strictly between"),
        ([{"column": "age", "statistics": ["quantiles"], "quantiles": [0.5, 0.5]}],
         r"stats\[0\]\.quantiles: \(0\.5\) is listed twice"),
        ([{"column": "age", "statistics": ["mean", "mean"]}], r"stats\[0\]\.statistics: \('mean'\) is listed twice"),
        ([{"column": "nope", "statistics": ["mean"]}], r"stats\[0\]\.column: \('nope'\) is not a declared column"),
        ([{"column": "age", "statistics": ["mean"], "by": "hours-per-week"}],
         r"stats\[0\]\.by: \('hours-per-week'\) must be a declared category column"),
        ([{"column": "age", "statistics": ["mean"], "by": "sex"}] * 2,
         r"stats\[1\]\.column: \('age'\) is listed twice by sex"),
        ([{**SLOPE, "sample_and_aggregate": "median_ratio"}],
         r"stats\[0\]\.sample_and_aggregate: \('median_ratio'\) must be a registered function: ratio, slope"),
        ([{**SLOPE, "x": "sex"}], r"stats\[0\]\.x: \('sex'\) must be a measured numeric column"),
        ([{**SLOPE, "y": "age"}], r"stats\[0\]\.y: must differ from x"),
        ([{**SLOPE, "range": [1, 1]}], r"stats\[0\]\.range: must have low < high"),
        ([{**SLOPE, "range": [0, float("inf")]}], r"stats\[0\]\.range: must be \[low, high\]: two finite"),
        ([{**SLOPE, "range": [-1e308, 1e308]}], r"stats\[0\]\.range: must be \[low, high\]: two finite numbers within"),
        ([{**SLOPE, "chunks": 1}], r"stats\[0\]\.chunks: must be a whole number from 2 to"),
        ([{**SLOPE, "column": "age"}], r"stats\[0\]\.column: is not a key of a sample_and_aggregate entry"),
        ([{k: v for k, v in SLOPE.items() if k != "chunks"}], r"stats\[0\]: missing required key 'chunks'"),
    ],
)
def test_a_bad_stats_section_is_one_line_naming_the_key_and_the_rule(tmp_path, stats, message):
    with pytest.raises(SchemaError, match=message):
        load_spec(adult_example(tmp_path, allocation=ALLOCATION, stats=stats))


def test_a_range_too_narrow_for_the_grid_is_refused_when_planned(tmp_path):
    spec = load_spec(adult_example(tmp_path, allocation=ALLOCATION, stats=[{**SLOPE, "range": [0, 5e-324]}]))
    with pytest.raises(SchemaError, match=r"sample_and_aggregate slope\(hours-per-week ~ age\).*too close"):
        plan_release(spec, "r", 1)


def test_stats_and_their_share_go_together(tmp_path):
    with pytest.raises(SchemaError, match=r"allocation\.stats: must be positive when stats are asked for"):
        load_spec(adult_example(tmp_path, stats=STATS))
    with pytest.raises(SchemaError, match=r"allocation\.stats: must be 0 or absent without stats"):
        (tmp_path / "b").mkdir()
        load_spec(adult_example(tmp_path / "b", allocation=ALLOCATION))


def age_bounds_text(entry):
    return f"[{entry['bounds']['lower']:g}, {entry['bounds']['upper']:g}] {entry['bounds']['source']}"


@pytest.mark.e2e
def test_statistics_are_published_booked_and_replayed(prefect_harness, tmp_path):
    spec = adult_example(tmp_path, allocation=ALLOCATION, stats=STATS)
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    target = Path(release(spec=str(spec), out=str(out), ledger=str(ledger), release_id="s1"))
    assert verify_release(target) == []
    manifest = json.loads((target / "manifest.json").read_text())
    assert "statistics/statistics.json" in {f["path"] for f in manifest["files"]}
    published = json.loads((target / "statistics" / "statistics.json").read_text())
    age, gain = published["columns"]
    real = pq.read_table(spec.parent / "adult.parquet", columns=["age"]).column("age").to_numpy()
    mean = next(e for e in age["estimates"] if e["statistic"] == "mean")
    assert mean["low95"] <= mean["estimate"] <= mean["high95"] and abs(mean["estimate"] - real.mean()) < 1.0
    assert [q["level"] for q in age["quantiles"]] == [0.1, 0.5, 0.9]
    assert abs(age["quantiles"][1]["value"] - float(sorted(real)[len(real) // 2])) <= 3
    assert gain["bounds"]["source"] == "svt" and age["bounds"]["source"] == "public"
    with Ledger.open(ledger) as book:
        charges = book.charges(release_id="s1")
    stats = [c for c in charges if c.stage == "stats"]
    assert {c.query for c in stats} >= {"count(age)", "sum(age)", "sum_of_squares(age)", "count(capital-gain)",
                                        "upper bound of capital-gain (mean)", "centre of capital-gain (mean)"}
    assert gain["bounds"]["lower"] <= gain["bounds"]["offset"] <= gain["bounds"]["upper"]
    # the median's bounds are the bounds stage's, not the mean's: published beside them, and on its row
    audit_bounds = json.loads((target / "audit.json").read_text())["private_choices"]["discovered_bounds"]
    assert gain["quantile_bounds"] == {**{k: audit_bounds["capital-gain"][k] for k in ("lower", "upper")},
                                       "source": "svt"} != {k: gain["bounds"][k] for k in ("lower", "upper", "source")}
    audit = json.loads((target / "audit.json").read_text())
    assert any(m["stage"] == "stats" for m in audit["measurements"])
    # The same figures as a table, in the audit (with a chart) and, beside the truth, in the steward's report.
    assert "statistics/statistics.parquet" in {f["path"] for f in manifest["files"]}
    table = pq.read_table(target / "statistics" / "statistics.parquet").to_pylist()
    assert [(r["subject"], r["statistic"]) for r in table][:3] == [("age", "count"), ("age", "mean"), ("age", "std")]
    assert table[1]["estimate"] == mean["estimate"] and table[1]["bounds"] == age_bounds_text(age)
    (gain_median,) = [r for r in table if r["subject"] == "capital-gain" and r["statistic"] == "quantile"]
    assert gain_median["bounds"] == age_bounds_text({"bounds": gain["quantile_bounds"]})
    assert [r["subject"] for r in audit["statistics"]] == [r["subject"] for r in table]
    assert "## Summary statistics" in (target / "audit.md").read_text()
    assert 'id="statistics"' in (target / "audit.html").read_text()
    truths = json.loads((steward_of(target) / "statistics.json").read_text())["statistics"]
    true_mean = next(t for t in truths if t["subject"] == "age" and t["statistic"] == "mean")
    assert abs(true_mean["true"] - real.mean()) < 1e-9
    # The published folder lost: a re-run of the same release id replays every draw, the same file.
    first = (target / "statistics" / "statistics.json").read_bytes()
    shutil.rmtree(target)
    again = Path(release(spec=str(spec), out=str(out), ledger=str(ledger), release_id="s1"))
    with Ledger.open(ledger) as book:
        assert len(book.charges(release_id="s1")) == len(charges)
    assert (again / "statistics" / "statistics.json").read_bytes() == first


@pytest.mark.e2e
def test_statistics_by_group_are_booked_once_per_query_and_published_per_group(prefect_harness, tmp_path):
    stats = [{"column": "age", "statistics": ["count", "mean", "median"], "by": "sex"},
             {"column": "hours-per-week", "statistics": ["mean"], "by": "race"}, SLOPE]
    spec = adult_example(tmp_path, allocation=ALLOCATION, stats=stats)
    plan = plan_release(load_spec(spec), "r", 1)
    assert plan.statistics[0].groups == ("Female", "Male") and plan.statistics[0].by == "sex"
    assert any("stats: age by sex (2 groups in parallel)" in line for line in plan.lines())
    assert plan.aggregates[0].budget == plan.statistics[1].moments_budget  # one equal share per entry (no quantiles)
    assert any("stats: slope(hours-per-week ~ age) by sample and aggregate over 1000 chunks" in line
               for line in plan.lines())
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    target = Path(release(spec=str(spec), out=str(out), ledger=str(ledger), release_id="g1"))
    assert verify_release(target) == []
    published = json.loads((target / "statistics" / "statistics.json").read_text())
    age, hours = published["columns"]
    assert age["by"] == "sex" and [g["group"] for g in age["groups"]] == ["Female", "Male"]
    real = pq.read_table(spec.parent / "adult.parquet", columns=["age", "sex"]).to_pydict()
    for group in age["groups"]:
        ages = [a for a, s in zip(real["age"], real["sex"], strict=True) if s == group["group"]]
        mean = next(e for e in group["estimates"] if e["statistic"] == "mean")
        assert abs(mean["estimate"] - sum(ages) / len(ages)) < 1.5 and mean["low95"] <= mean["estimate"]
        assert abs(group["quantiles"][0]["value"] - sorted(ages)[len(ages) // 2]) <= 3
    assert len(hours["groups"]) == 5
    # The slope by sample-and-aggregate: its noise interval, within a few widths of the whole table's slope.
    (slope,) = published["aggregates"]
    xy = pq.read_table(spec.parent / "adult.parquet", columns=["age", "hours-per-week"]).to_pydict()
    age_mean = sum(xy["age"]) / len(xy["age"])
    hours_mean = sum(xy["hours-per-week"]) / len(xy["age"])
    true_slope = (sum((a - age_mean) * (h - hours_mean) for a, h in zip(xy["age"], xy["hours-per-week"], strict=True))
                  / sum((a - age_mean) ** 2 for a in xy["age"]))
    assert slope["name"] == "slope(hours-per-week ~ age)" and -1 <= slope["low95"] <= slope["estimate"] <= 1
    assert 0 < slope["high95"] - slope["low95"] < 0.5
    assert abs(slope["estimate"] - true_slope) < 2 * (slope["high95"] - slope["low95"])
    with Ledger.open(ledger) as book:
        charges = [c for c in book.charges(release_id="g1") if c.stage == "stats"]
    queries = sorted(c.query for c in charges)
    assert "sample and aggregate slope(hours-per-week ~ age), k=1000" in queries
    assert queries.count("count(age by sex)") == 1 and "quantile 1/2(age by sex)" in queries
    assert not any("| Female" in q or "| Male" in q for q in queries)  # one charge for all groups
