"""A clipping-bias estimate in a release (``clipping_bias: true``, a ``stats:`` key): booked, published, replayed."""

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
    {"column": "age", "statistics": ["mean"], "clipping_bias": True},  # public bounds [17, 90]: nothing to clip
    {"column": "capital-gain", "statistics": ["sum", "mean"], "clipping_bias": True},  # bounds chosen for the mean
]


@pytest.mark.parametrize(
    ("stats", "message"),
    [
        ([{"column": "age", "statistics": ["mean"], "clipping_bias": "yes"}],
         r"stats\[0\]\.clipping_bias: \('yes'\) must be true or false"),
        ([{"column": "age", "statistics": ["median"], "clipping_bias": True}],
         r"stats\[0\]\.clipping_bias: needs mean or sum in statistics"),
        ([{"column": "age", "statistics": ["mean"], "by": "sex", "clipping_bias": True}],
         r"stats\[0\]\.clipping_bias: is not available per group"),
    ],
)
def test_a_bad_clipping_bias_key_is_refused_before_any_budget(tmp_path, stats, message):
    with pytest.raises(SchemaError, match=message):
        load_spec(adult_example(tmp_path, allocation=ALLOCATION, stats=stats))


def test_the_key_is_off_by_default_and_planned_when_asked(tmp_path):
    plain = [{"column": "age", "statistics": ["mean"]}]
    assert not plan_release(load_spec(adult_example(tmp_path, allocation=ALLOCATION, stats=plain)), "r",
                            1).statistics[0].clipping_bias
    (tmp_path / "b").mkdir()
    planned = plan_release(load_spec(adult_example(tmp_path / "b", allocation=ALLOCATION, stats=STATS)), "r", 1)
    assert [p.clipping_bias for p in planned.statistics] == [True, True]


@pytest.mark.e2e
def test_clipping_bias_is_booked_published_flagged_and_replayed(prefect_harness, tmp_path):
    spec = adult_example(tmp_path, allocation=ALLOCATION, stats=STATS)
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    target = Path(release(spec=str(spec), out=str(out), ledger=str(ledger), release_id="b1"))
    assert verify_release(target) == []
    plan = plan_release(load_spec(spec), "b1", 1)
    with Ledger.open(ledger) as book:
        charges = book.charges(release_id="b1")
    stats = [c for c in charges if c.stage == "stats"]
    assert {c.query for c in stats} >= {"clipping tails(age)", "clipping tails(capital-gain)",
                                        "clipping excess(capital-gain)"}
    for planned in plan.statistics:  # the bias share comes out of the column's moments budget, never on top
        spent = sum((c.loss for c in stats if f"({planned.column})" in c.query or f"of {planned.column} " in c.query),
                    start=type(planned.moments_budget.amount)(0))
        assert 0 < spent <= planned.moments_budget.amount
    published = json.loads((target / "statistics" / "statistics.json").read_text())
    age, gain = published["columns"]
    names = [e["statistic"] for e in gain["estimates"]]
    assert names == ["count", "sum", "corrected sum", "mean", "corrected mean"]
    mean = gain["estimates"][3]
    corrected = gain["estimates"][4]
    clipping = mean["clipping"]
    assert set(clipping) == {"flag", "beyond_cap", "bias", "bias_low95", "bias_high95", "cap"}
    assert clipping["bias_low95"] <= clipping["bias"] <= clipping["bias_high95"]
    assert corrected["estimate"] == pytest.approx(mean["estimate"] + clipping["bias"])
    assert corrected["low95"] <= corrected["estimate"] <= corrected["high95"]
    assert clipping["cap"][0] <= gain["bounds"]["lower"] <= gain["bounds"]["upper"] <= clipping["cap"][1]
    # age's public bounds [17, 90] are the data's: no room below 17 in the schema's range? The cap is half a
    # radius out, so the excess is measured, and it says (almost surely) nothing is clipped.
    age_mean = next(e for e in age["estimates"] if e["statistic"] == "mean")
    assert age_mean["clipping"]["flag"] is False
    table = pq.read_table(target / "statistics" / "statistics.parquet").to_pylist()
    flagged = [r for r in table if r["clipping_flag"] is not None]
    assert {(r["subject"], r["statistic"]) for r in flagged} == {
        ("age", "mean"), ("age", "corrected mean"), ("capital-gain", "sum"), ("capital-gain", "corrected sum"),
        ("capital-gain", "mean"), ("capital-gain", "corrected mean")}
    assert all(r["clipping_flag"] is None for r in table if r["statistic"] == "count")
    audit = json.loads((target / "audit.json").read_text())
    rows = {(r["subject"], r["statistic"]): r for r in audit["statistics"]}
    assert rows[("capital-gain", "mean")]["clipping_bias"] == pytest.approx(clipping["bias"])
    assert "clipping_flag" not in rows[("capital-gain", "count")]  # absent where no bias was estimated
    markdown = (target / "audit.md").read_text()
    assert "clipping bias |" in markdown and "The flag (clips) says" in markdown
    assert "clipping bias" in (target / "audit.html").read_text()
    truths = json.loads((steward_of(target) / "statistics.json").read_text())["statistics"]
    real = pq.read_table(spec.parent / "adult.parquet", columns=["capital-gain"]).column("capital-gain").to_numpy()
    true_corrected = next(t for t in truths if t["subject"] == "capital-gain" and t["statistic"] == "corrected mean")
    assert true_corrected["true"] == pytest.approx(real.mean())
    first = (target / "statistics" / "statistics.json").read_bytes()
    shutil.rmtree(target)
    again = Path(release(spec=str(spec), out=str(out), ledger=str(ledger), release_id="b1"))
    with Ledger.open(ledger) as book:
        assert len(book.charges(release_id="b1")) == len(charges)
    assert (again / "statistics" / "statistics.json").read_bytes() == first
