"""``method:`` in a stats entry: the median by propose-test-release or smooth sensitivity, with delta booked."""

from __future__ import annotations

import json
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from dprelease.dp.accounting.approximate import release_budget
from dprelease.dp.accounting.budget import pure_from_zcdp_share
from dprelease.dp.accounting.conversions import zcdp_from_approx_cks
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.statistics.clipping import ClipBounds, Grid
from dprelease.dp.statistics.smooth import SmoothMedian, smooth_sensitivity
from dprelease.flows.release import release
from dprelease.reports.audit import budget_table
from dprelease.reports.audit_json import audit_from_json
from dprelease.schemas.model import SchemaError
from dprelease.schemas.plan import plan_release
from dprelease.schemas.spec import load_spec
from dprelease.tasks.staging import verify_release
from tests.examples import adult_example

ALLOCATION = {"bounds": 0.05, "one_way": 0.35, "selection": 0.04, "cliques": 0.41, "hierarchy": 0.05, "stats": 0.10}
STATS = [
    {"column": "age", "statistics": ["mean", "median"], "method": "ptr", "proposed_bound": 2, "delta": 1.0e-10},
    {"column": "hours-per-week", "statistics": ["median"], "method": "smooth", "delta": 1.0e-10},
]
PURE = {"budget": {"epsilon": 1}, "lifetime_budget": {"epsilon": 3}, "release_cap": {"epsilon": 1.5}}


def test_the_release_budget_leaves_the_mechanisms_delta_out_of_the_conversion(tmp_path):
    spec = load_spec(adult_example(tmp_path, allocation=ALLOCATION, stats=STATS))
    assert spec.mechanism_delta == Fraction(2, 10**10)
    assert spec.budget == release_budget(Fraction(1), Fraction(1, 10**9), Fraction(2, 10**10))
    assert spec.budget.amount < zcdp_from_approx_cks(1, Fraction(1, 10**9)).rho
    plan = plan_release(spec, "r", 1)
    age, hours = plan.statistics
    assert (age.method, age.proposed_bound, age.delta) == ("ptr", 2.0, Fraction(1, 10**10))
    assert (hours.method, hours.delta) == ("smooth", Fraction(1, 10**10)) and hours.quantiles == (Fraction(1, 2),)


@pytest.mark.parametrize(
    ("stats", "changes", "message"),
    [
        ([{"column": "age", "statistics": ["median"], "method": "bogus"}], {},
         r"stats\[0\]\.method: \('bogus'\) must be one of exponential, ptr, smooth"),
        ([{"column": "age", "statistics": ["mean"], "method": "exponential"}], {},
         r"stats\[0\]\.method: applies to median and quantiles only"),
        ([{"column": "age", "statistics": ["median", "quantiles"], "quantiles": [0.9], "method": "ptr",
           "proposed_bound": 1, "delta": 1e-10}], {}, r"stats\[0\]\.method: ptr releases the median only"),
        ([{"column": "age", "statistics": ["median"], "by": "sex", "method": "smooth", "delta": 1e-10}], {},
         r"stats\[0\]\.method: smooth is not available per group"),
        ([{"column": "age", "statistics": ["median"], "method": "ptr", "proposed_bound": 1}], {},
         r"stats\[0\]\.delta: must be given for method ptr"),
        ([{"column": "age", "statistics": ["median"], "method": "ptr", "delta": 1e-10}], {},
         r"stats\[0\]\.proposed_bound: must be given for method ptr: a positive number"),
        ([{"column": "age", "statistics": ["median"], "method": "ptr", "delta": 1e-10, "proposed_bound": -1}], {},
         r"stats\[0\]\.proposed_bound: must be given for method ptr: a positive number"),
        ([{"column": "age", "statistics": ["median"], "method": "smooth", "delta": 1e-10, "proposed_bound": 1}], {},
         r"stats\[0\]\.proposed_bound: is a setting of method ptr only"),
        ([{"column": "age", "statistics": ["median"], "delta": 1e-10}], {},
         r"stats\[0\]\.delta: is a setting of method ptr or smooth"),
        ([{"column": "age", "statistics": ["median"], "method": "smooth", "delta": 1e-9}], {},
         r"stats: the deltas of ptr and smooth medians \(1e-09 in all\) must add up to less than budget\.delta"),
        ([{"column": "age", "statistics": ["median"], "method": "ptr", "proposed_bound": 1, "delta": 1e-10}], PURE,
         r"stats\[0\]\.method: ptr is \(epsilon, delta\)-DP: it needs a budget with delta \(zCDP\)"),
        ([{"column": "age", "statistics": ["median"], "method": "smooth", "delta": 1e-10}], PURE,
         r"stats\[0\]\.method: smooth is \(epsilon, delta\)-DP"),
        ([{"column": "age", "statistics": ["median"], "method": "smooth", "delta": 5e-10}],
         {"release_cap": {"epsilon": 0.99, "delta": 1e-9}},
         r"budget: with the deltas of ptr and smooth medians taken out, must not exceed release_cap"),
    ],
)
def test_a_bad_method_is_one_line_naming_the_key_and_the_rule(tmp_path, stats, changes, message):
    with pytest.raises(SchemaError, match=message) as raised:
        load_spec(adult_example(tmp_path, allocation=ALLOCATION, stats=stats, **changes))
    assert "\n" not in str(raised.value)


@pytest.mark.e2e
def test_ptr_and_smooth_medians_are_published_booked_with_delta_and_replayed(prefect_harness, tmp_path):
    spec = adult_example(tmp_path, allocation=ALLOCATION, stats=STATS)
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    target = Path(release(spec=str(spec), out=str(out), ledger=str(ledger), release_id="m1"))
    assert verify_release(target) == []
    published = json.loads((target / "statistics" / "statistics.json").read_text())
    age, hours = published["columns"]
    real = pq.read_table(spec.parent / "adult.parquet", columns=["age", "hours-per-week"]).to_pydict()
    [median] = age["quantiles"]
    assert median["method"] == "ptr" and median["outcome"] == "released" and median["delta"] == 1e-10
    audit = json.loads((target / "audit.json").read_text())
    rows = {m["query"]: m for m in audit["measurements"]}
    # The release noise's scale is public (grid steps): the median is within 15 scales of the truth (P > 1 − 1e-6).
    step = (age["bounds"]["upper"] - age["bounds"]["lower"]) / 2048
    error = abs(median["value"] - sorted(real["age"])[(len(real["age"]) + 1) // 2 - 1])
    assert error <= 15 * rows["ptr release(median age)"]["scale"] * step + step
    assert median["low95"] <= median["value"] <= median["high95"]
    [smooth] = hours["quantiles"]
    assert smooth["method"] == "smooth" and smooth["low95"] is None and smooth["high95"] is None
    # Its scale c·S(D) is private and never published; the test (steward side) recomputes it from the data.
    planned = plan_release(load_spec(spec), "m1", 1).statistics[1]
    grid = Grid(ClipBounds(hours["bounds"]["lower"], hours["bounds"]["upper"]))
    mechanism = SmoothMedian(grid, pure_from_zcdp_share(planned.quantiles_budget), planned.delta)
    codes = grid.encode(np.asarray(real["hours-per-week"], dtype=np.float64))
    scale = mechanism.scale() * smooth_sensitivity(codes, grid, mechanism.beta())
    truth = sorted(real["hours-per-week"])[(len(real["hours-per-week"]) + 1) // 2 - 1]
    assert abs(smooth["value"] - truth) <= (15 * scale + 1) * grid.step  # P > 1 − 1e-6
    with Ledger.open(ledger) as book:
        charges = book.charges(release_id="m1")
        status = book.status("us-cps-1994-adult")
    booked = {c.query: c for c in charges if c.stage == "stats"}
    assert booked["ptr test(median age)"].delta == Fraction(1, 10**10)
    assert booked["ptr release(median age)"].delta == 0
    assert booked["smooth median(hours-per-week)"].delta == Fraction(1, 10**10)
    assert status.delta_spent == Fraction(2, 10**10) and status.epsilon == 3
    assert audit["budget"]["delta_spent"] == pytest.approx(2e-10)
    assert audit["budget"]["booked_as_epsilon_delta"]["epsilon"]["value"] <= 1
    # The Prefect budget table converts at the delta the mechanisms left, as the audit's total does.
    table = {row["budget"]: row for row in budget_table(audit_from_json((target / "audit.json").read_text()))}
    assert table["this release (booked)"]["epsilon"] == pytest.approx(
        audit["budget"]["booked_as_epsilon_delta"]["epsilon"]["value"], rel=1e-9)
    with Ledger.open(ledger) as book:  # the lifetime left is the usable cap at the delta left, less what was spent
        usable = book.status("us-cps-1994-adult").remaining
    assert audit["lifetime"]["remaining_after"]["value"] == pytest.approx(float(usable))
    assert usable < float(zcdp_from_approx_cks(3, Fraction(1, 10**9)).rho) - sum(float(c.loss) for c in charges)
    assert rows["smooth median(hours-per-week)"]["delta"] == pytest.approx(1e-10)
    assert "beta=" in rows["smooth median(hours-per-week)"]["sensitivity"]
    assert "delta 1e-10" in (target / "audit.md").read_text()
    # Re-run with the published folder lost: every draw replayed (the PTR test and the smooth median included).
    first = (target / "statistics" / "statistics.json").read_bytes()
    shutil.rmtree(target)
    again = Path(release(spec=str(spec), out=str(out), ledger=str(ledger), release_id="m1"))
    with Ledger.open(ledger) as book:
        assert len(book.charges(release_id="m1")) == len(charges)
    assert (again / "statistics" / "statistics.json").read_bytes() == first


def _households(tmp_path: Path, stats: list[dict[str, object]]) -> Path:
    """People in households of 1..6 (a privacy unit of at most 2 rows), with ``stats``; the spec's path."""
    import pyarrow as pa
    import yaml

    chooser = np.random.default_rng(5)  # test data, not a release
    sizes = chooser.integers(1, 7, size=3000)
    household = np.repeat(np.arange(len(sizes)), sizes)
    rows = len(household)
    table = pa.table({"household": pa.array(household, pa.int64()),
                      "tenure": pa.array(chooser.choice(["own", "rent"], size=rows).tolist()),
                      "age": pa.array(chooser.integers(18, 90, size=rows))})
    folder = tmp_path / "hh"
    folder.mkdir()
    pq.write_table(table, folder / "people.parquet")
    schema = {"table": "people", "privacy_unit": {"id_column": "household", "max_rows": 2}, "columns": {
        "tenure": {"type": "category", "categories": ["own", "rent"]}, "age": {"type": "int", "min": 0, "max": 100}}}
    (folder / "schema.yaml").write_text(yaml.safe_dump(schema, sort_keys=False))
    spec = {"dataset": "households", "schema": "schema.yaml", "data": "people.parquet",
            "budget": {"epsilon": 1, "delta": 1e-9}, "lifetime_budget": {"epsilon": 2, "delta": 1e-9},
            "allocation": {"one_way": 0.5, "stats": 0.5}, "stats": stats}
    (folder / "release.yaml").write_text(yaml.safe_dump(spec))
    return folder / "release.yaml"


def test_ptr_and_smooth_are_refused_with_a_privacy_unit_id_column(tmp_path):
    stats = [{"column": "age", "statistics": ["median"], "method": "smooth", "delta": 1e-10}]
    with pytest.raises(SchemaError, match=r"stats\[0\]\.method: smooth is not available with privacy_unit\.id_column"):
        load_spec(_households(tmp_path, stats))


@pytest.mark.e2e
def test_statistics_bound_each_units_rows_and_scale_their_sensitivities(prefect_harness, tmp_path):
    stats = [{"column": "age", "statistics": ["mean", "median"]},
             {"column": "age", "statistics": ["mean", "median"], "by": "tenure"}]
    spec = _households(tmp_path, stats)
    target = Path(release(spec=str(spec), out=str(tmp_path / "out"), ledger=str(tmp_path / "l.sqlite"),
                          release_id="hh-s"))
    audit = json.loads((target / "audit.json").read_text())
    sensitivities = {m["query"]: m["sensitivity"] for m in audit["measurements"] if m["stage"] == "stats"}
    assert sensitivities["count(age)"] == "L2=2" and sensitivities["count(age by tenure)"] == "L2=2"
    assert sensitivities["sum(age)"] == "L2=2048"  # 2 rows × 1024 half-steps
    assert sensitivities["quantile 1/2(age)"].startswith("score sensitivity=1 ")  # 2 × max(q, 1 − q)
    assert "a unit in at most 2" in sensitivities["quantile 1/2(age by tenure)"]
    published = json.loads((target / "statistics" / "statistics.json").read_text())
    count = next(e for e in published["columns"][0]["estimates"] if e["statistic"] == "count")
    kept = pq.read_table(spec.parent / "people.parquet", columns=["household"]).column("household").to_numpy()
    sizes = np.bincount(kept)
    assert abs(count["estimate"] - int(np.minimum(sizes, 2).sum())) < 200  # the bounded rows, noisily
