"""The published summary statistics as rows: the Parquet table, the audit's section, the steward's truths."""

from __future__ import annotations

import dataclasses
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dprelease.quality.statistics_truth import true_statistics
from dprelease.reports.audit import build_audit, render_markdown
from dprelease.reports.audit_json import audit_from_json, audit_to_json
from dprelease.reports.html import render_html
from dprelease.reports.internal_html import render_internal_html
from dprelease.reports.statistics import statistic_rows, write_statistics_parquet
from tests.schemas.test_audit_json import _inputs

DOCUMENT = {
    "budget_unit": "rho",
    "columns": [
        {"column": "age", "bounds": {"lower": 17.0, "upper": 90.0, "source": "public"},
         "estimates": [{"statistic": "count", "estimate": 4.2, "low95": 1.0, "high95": 7.4, "mechanism": "g",
                        "budget": 0.01},
                       {"statistic": "mean", "estimate": 30.5, "low95": 20.0, "high95": 41.0, "mechanism": "g",
                        "budget": 0.01}],
         "quantiles": [{"level": 0.5, "value": None, "low95": None, "high95": None, "mechanism": "ptr",
                        "budget": 0.02, "outcome": "refused"}]},
        {"column": "hours", "by": "sex", "bounds": {"lower": 0.0, "upper": 99.0, "source": "svt"},
         "quantile_bounds": {"lower": 0.0, "upper": 128.0, "source": "svt"},
         "groups": [{"group": "F", "estimates": [{"statistic": "mean", "estimate": 35.0, "low95": 33.0,
                                                  "high95": 37.0, "mechanism": "g", "budget": 0.01}],
                     "quantiles": [{"level": 0.25, "value": 30.0, "low95": 28.0, "high95": 33.0,
                                    "mechanism": "exponential mechanism", "budget": 0.01}]},
                    {"group": "M", "estimates": [{"statistic": "mean", "estimate": 50.0, "low95": 48.0,
                                                  "high95": 52.0, "mechanism": "g", "budget": 0.01}]}]},
    ],
    "aggregates": [{"function": "slope", "x": "age", "y": "hours", "name": "slope(hours ~ age)", "chunks": 2,
                    "range": [-1, 1], "estimate": 0.5, "low95": 0.25, "high95": 0.75, "mechanism": "g",
                    "budget": 0.01}],
}
REAL = pa.table({"age": [20.0, 30.0, 40.0, None], "hours": [30.0, 40.0, 60.0, 10.0], "sex": ["F", "F", "M", "M"]})


def test_every_statistic_group_and_level_is_one_row(tmp_path):
    rows = statistic_rows(DOCUMENT)
    assert [(r.subject, r.group, r.statistic, r.level) for r in rows] == [
        ("age", None, "count", None), ("age", None, "mean", None), ("age", None, "quantile", 0.5),
        ("hours", "F", "mean", None), ("hours", "F", "quantile", 0.25), ("hours", "M", "mean", None),
        ("slope(hours ~ age)", None, "slope", None)]
    assert rows[2].estimate is None and rows[3].bounds == "[0, 99] svt" and rows[6].bounds == "range [-1, 1] public"
    assert rows[4].bounds == "[0, 128] svt"  # a quantile's own clipping bounds, where they differ from the moments'
    assert rows[0].bounds == rows[2].bounds == "[17, 90] public"
    write_statistics_parquet(rows, tmp_path / "s.parquet")
    table = pq.read_table(tmp_path / "s.parquet")
    assert table.num_rows == 7 and table.column("estimate").null_count == 1
    assert table.column("group").to_pylist()[3:6] == ["F", "F", "M"]


def test_the_audit_carries_them_and_reads_them_back():
    rows = statistic_rows(DOCUMENT)
    audit = build_audit(**_inputs("zcdp-cliques"), statistics=rows)
    again = audit_from_json(audit_to_json(audit))
    assert again == audit and again.statistics == tuple(rows)
    markdown = render_markdown(audit)
    assert "## Summary statistics" in markdown and "| hours | quantile 0.25 (sex = F) | 30 | [28, 33] |" in markdown
    page = render_html(audit)
    assert 'id="statistics"' in page and 'href="#statistics"' in page and page.count('<svg class="chart"') > 3
    without = build_audit(**_inputs("zcdp-cliques"))
    assert "statistics" not in json.loads(audit_to_json(without))  # absent, not empty: older audits unchanged
    assert 'id="statistics"' not in render_html(without)


def test_the_steward_sees_the_true_value_beside_each_estimate():
    truths = true_statistics(statistic_rows(DOCUMENT), DOCUMENT, REAL)
    by_key = {(t["subject"], t["group"], t["statistic"], t["level"]): t for t in truths}
    assert by_key[("age", None, "count", None)]["true"] == 3 and by_key[("age", None, "count", None)]["inside"]
    assert by_key[("age", None, "mean", None)]["true"] == 30.0 and by_key[("age", None, "mean", None)]["inside"]
    assert by_key[("age", None, "quantile", 0.5)]["inside"] is None  # refused: nothing to compare
    assert by_key[("hours", "F", "quantile", 0.25)]["true"] == 30.0
    assert by_key[("hours", "M", "mean", None)]["true"] == 35.0 and not by_key[("hours", "M", "mean", None)]["inside"]
    assert abs(by_key[("slope(hours ~ age)", None, "slope", None)]["true"] - 1.5) < 1e-12
    audit = build_audit(**_inputs("zcdp-cliques"), statistics=statistic_rows(DOCUMENT))
    page = render_internal_html(audit, {"tvd1": 0.1, "tvd2": 0.2, "tvd3": None}, None, None, truths)
    assert "published against true" in page and "<strong>no</strong>" in page


def test_the_steward_compares_with_the_rows_the_release_grouped():
    # One "M" written "m " (outside the categories, mapped to M by on_unknown): the release counts that row in M,
    # so the steward's true mean of M is taken over the same rows.
    real = REAL.set_column(2, "sex", pa.array(["F", "F", "M", "m "]))
    raw = {(t["subject"], t["group"], t["statistic"]): t["true"] for t in true_statistics(
        statistic_rows(DOCUMENT), DOCUMENT, real)}
    grouped = {(t["subject"], t["group"], t["statistic"]): t["true"] for t in true_statistics(
        statistic_rows(DOCUMENT), DOCUMENT, real, {"sex": (("F", "M"), "M")})}
    assert raw[("hours", "M", "mean")] == 60.0  # the raw label match leaves the "m " row out
    assert grouped[("hours", "M", "mean")] == 35.0 and grouped[("hours", "F", "mean")] == 35.0


def test_rows_are_frozen():
    row = statistic_rows(DOCUMENT)[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.estimate = 0.0  # type: ignore[misc]


CLIPPED = {"flag": True, "beyond_cap": False, "bias": 2.5, "bias_low95": 1.0, "bias_high95": 4.0, "cap": [0.0, 120.0]}
BIASED = {**DOCUMENT, "columns": [{
    "column": "stay", "bounds": {"lower": 0.0, "upper": 100.0, "source": "svt", "offset": 5.0},
    "estimates": [{"statistic": "mean", "estimate": 7.0, "low95": 6.9, "high95": 7.1, "mechanism": "g", "budget": 0.1,
                   "clipping": CLIPPED},
                  {"statistic": "corrected mean", "estimate": 9.5, "low95": 8.0, "high95": 11.0, "mechanism": "g",
                   "budget": 0.1, "interval": "simulation (clipping bias estimated)", "clipping": CLIPPED}]}]}


def test_a_clipping_flag_and_bias_are_published_and_read_back_where_estimated(tmp_path):
    rows = statistic_rows(BIASED)
    mean, corrected = rows[0], rows[1]
    assert (mean.clipping_flag, mean.clipping_bias, mean.clipping_bias_low95, mean.clipping_bias_high95) == \
        (True, 2.5, 1.0, 4.0)
    assert corrected.statistic == "corrected mean" and corrected.clipping_flag
    write_statistics_parquet(rows, tmp_path / "s.parquet")
    table = pq.read_table(tmp_path / "s.parquet").to_pylist()
    assert table[0]["clipping_flag"] is True and table[0]["clipping_bias"] == 2.5
    assert table[2]["clipping_flag"] is None  # the slope: no bias estimated
    audit = build_audit(**_inputs("zcdp-cliques"), statistics=rows)
    text = audit_to_json(audit)
    assert audit_from_json(text) == audit
    written = json.loads(text)["statistics"]
    assert written[0]["clipping_bias"] == 2.5 and "clipping_flag" not in written[2]
    markdown = render_markdown(audit)
    assert "| +2.5 [1, 4] clips |" in markdown and "The flag (clips) says" in markdown
    assert "clipping bias" in render_html(audit)


def test_statistics_without_a_bias_estimate_read_back_as_they_were_written():
    audit = build_audit(**_inputs("zcdp-cliques"), statistics=statistic_rows(DOCUMENT))
    text = audit_to_json(audit)
    assert all(not key.startswith("clipping") for row in json.loads(text)["statistics"] for key in row)
    assert audit_to_json(audit_from_json(text)) == text
    assert "clipping bias" not in render_markdown(audit)
