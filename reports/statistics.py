"""The published summary statistics as rows: a Parquet table beside ``statistics.json``, and the audit's section.

Post-processing of DP outputs only: everything here reads the public document the stats task wrote
(``statistics/statistics.json``: estimates, intervals, bounds, mechanisms and budgets), never the data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dprelease.reports.audit_records import PublishedStatistic
from dprelease.reports.charts import intervals_chart
from dprelease.reports.html_parts import _code, _esc, _section, _table, _unit

STATISTICS_FILE = "statistics/statistics.json"
"""Where the statistics are published, relative to the release folder."""
STATISTICS_PARQUET = "statistics/statistics.parquet"
"""The statistics as one table (a row a statistic and group), relative to the release folder."""

_SCHEMA = pa.schema([
    ("subject", pa.string()), ("by", pa.string()), ("group", pa.string()), ("statistic", pa.string()),
    ("level", pa.float64()), ("estimate", pa.float64()), ("low95", pa.float64()), ("high95", pa.float64()),
    ("mechanism", pa.string()), ("bounds", pa.string()), ("budget", pa.float64()),
    ("clipping_flag", pa.bool_()), ("clipping_bias", pa.float64()), ("clipping_bias_low95", pa.float64()),
    ("clipping_bias_high95", pa.float64()),
])

EXPLANATION = (
    "Each interval covers the noise its mechanism added, with 95 % probability; it does not cover sampling error, nor"
    " the bias of clipping values to the bounds shown (values outside them were moved to the nearer bound before "
    "measuring: a mean or a quantile near a bound can be pulled towards it). When only one bound can clip (a private "
    "upper bound over a range starting at 0, say), a mean's or a sum's interval puts 1.5 % of its 5 % chance of "
    "missing on that side and 3.5 % on the other, so that a small pull stays inside it. Bounds marked svt were found "
    "privately by the release's bounds stage; public ones come from the schema. A private bound stops where only a "
    "handful of rows lie beyond it; a few rows far out (a missing-value code entered as a number, say) are beyond "
    "what its share of the budget can detect and are clipped, and the interval then misses the true value: declare a "
    "public bound for such a column. A median by smooth sensitivity has no interval (its width would reveal the "
    "private noise scale); one by propose-test-release is either released or refused."
)

CLIPPING_EXPLANATION = (
    "Where a column asked for its clipping bias (clipping_bias: true), part of its budget measured, privately, how "
    "many rows lie beyond each bound and how far, out to caps a quarter of a radius beyond the bounds (the radius "
    "is the larger distance from the sum's offset to a bound): the clipping bias "
    "column is that estimate of the true statistic minus the clipped one, with its 95 % noise interval. The flag "
    "(clips) says the estimate is beyond twice its half-width: the bounds clip materially, and the clipped "
    "statistic's interval does not cover the true value. The corrected row adds the estimate to the clipped "
    "statistic; its interval combines both noises and covers the true value when no row lies beyond the caps "
    "(rows further out are still clipped, so a flagged column's corrected value can still fall short)."
)


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _bounds(bounds: Mapping[str, Any]) -> str:
    return f"[{float(bounds['lower']):g}, {float(bounds['upper']):g}] {bounds['source']}"


def _clipping(estimate: Mapping[str, Any]) -> dict[str, Any]:
    clipping = estimate.get("clipping")
    if not clipping:
        return {}
    return {"clipping_flag": bool(clipping["flag"]), "clipping_bias": _number(clipping["bias"]),
            "clipping_bias_low95": _number(clipping["bias_low95"]),
            "clipping_bias_high95": _number(clipping["bias_high95"])}


def _part(subject: str, bounds: str, by: str | None, group: str | None, part: Mapping[str, Any],
          quantile_bounds: str | None = None) -> list[PublishedStatistic]:
    rows = [PublishedStatistic(subject, by, group, str(e["statistic"]), None, _number(e["estimate"]),
                               _number(e["low95"]), _number(e["high95"]), str(e.get("mechanism", "")), bounds,
                               _number(e.get("budget")), **_clipping(e))
            for e in part.get("estimates", ())]
    rows += [PublishedStatistic(subject, by, group, "quantile", float(q["level"]), _number(q["value"]),
                                _number(q["low95"]), _number(q["high95"]), str(q.get("mechanism", "")),
                                quantile_bounds or bounds, _number(q.get("budget")))
             for q in part.get("quantiles", ())]
    return rows


def statistic_rows(document: Mapping[str, Any]) -> list[PublishedStatistic]:
    """Flatten ``statistics.json`` to one row per statistic (and group, and quantile level)."""
    rows: list[PublishedStatistic] = []
    for column in document.get("columns", ()):
        bounds, by = _bounds(column["bounds"]), column.get("by")
        quantile_bounds = _bounds(column["quantile_bounds"]) if "quantile_bounds" in column else None
        if by is None:
            rows += _part(str(column["column"]), bounds, None, None, column, quantile_bounds)
        else:
            for group in column["groups"]:
                rows += _part(str(column["column"]), bounds, str(by), str(group["group"]), group, quantile_bounds)
    for aggregate in document.get("aggregates", ()):
        low, high = aggregate["range"]
        rows.append(PublishedStatistic(
            str(aggregate["name"]), None, None, str(aggregate["function"]), None, _number(aggregate["estimate"]),
            _number(aggregate["low95"]), _number(aggregate["high95"]), str(aggregate.get("mechanism", "")),
            f"range [{float(low):g}, {float(high):g}] public", _number(aggregate.get("budget"))))
    return rows


def write_statistics_parquet(rows: Sequence[PublishedStatistic], path: Path) -> None:
    """Write the rows as a Parquet table (one row a statistic; null where a value is not published)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    names = [f.name for f in fields(PublishedStatistic)]
    columns = {name: [getattr(row, name) for row in rows] for name in names}  # fields of str, float, None
    pq.write_table(pa.table(columns, schema=_SCHEMA), path)


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def _interval(row: PublishedStatistic) -> str:
    return "-" if row.low95 is None or row.high95 is None else f"[{row.low95:.6g}, {row.high95:.6g}]"


def _label(row: PublishedStatistic) -> str:
    statistic = f"quantile {row.level:g}" if row.level is not None else row.statistic
    return statistic + (f" ({row.by} = {row.group})" if row.group is not None else "")


def _bias(row: PublishedStatistic) -> str:
    """The clipping bias cell: ``+293 [251, 336] clips``, ``-`` where none was estimated."""
    if row.clipping_bias is None:
        return "-"
    interval = (f" [{row.clipping_bias_low95:.6g}, {row.clipping_bias_high95:.6g}]"
                if row.clipping_bias_low95 is not None and row.clipping_bias_high95 is not None else "")
    return f"{row.clipping_bias:+.6g}{interval}" + (" clips" if row.clipping_flag else "")


def _has_bias(rows: Sequence[PublishedStatistic]) -> bool:
    return any(row.clipping_bias is not None for row in rows)


def markdown_section(rows: Iterable[PublishedStatistic], unit: str) -> list[str]:
    """The audit.md section: a table of every statistic with its interval, mechanism, bounds and budget.

    A clipping-bias column and its explanation appear only where a column asked for the bias.
    """
    rows = list(rows)
    if not rows:
        return []
    bias = _has_bias(rows)
    lines = ["", "## Summary statistics", "", EXPLANATION, "", *([CLIPPING_EXPLANATION, ""] if bias else []),
             f"| of | statistic | estimate | 95 % interval | mechanism | bounds | {unit} |"
             + (" clipping bias |" if bias else ""),
             "|---|---|---|---|---|---|---|" + ("---|" if bias else "")]
    for row in rows:
        lines.append(f"| {row.subject} | {_label(row)} | {_cell(row.estimate)} | {_interval(row)} | {row.mechanism} | "
                     f"{row.bounds} | {_cell(row.budget)} |" + (f" {_bias(row)} |" if bias else ""))
    return lines


def _plotted(rows: Sequence[PublishedStatistic]) -> dict[str, list[PublishedStatistic]]:
    """Per subject, the rows drawn in the chart: means, quantiles and functions (one scale per subject)."""
    panels: dict[str, list[PublishedStatistic]] = {}
    for row in rows:
        if row.estimate is not None and row.statistic not in ("count", "sum", "corrected sum", "variance", "std"):
            panels.setdefault(row.subject, []).append(row)
    return panels


def _panel_rows(rows: Sequence[PublishedStatistic]) -> list[tuple[str, float, float | None, float | None, bool]]:
    """The rows of one subject's panel: (group, estimate, low, high, is a quantile)."""
    return [(row.group or "all rows", float(row.estimate), row.low95, row.high95, row.level is not None)
            for row in rows if row.estimate is not None]


def html_section(rows: Sequence[PublishedStatistic], unit: str) -> str:
    """The audit.html section: a chart of the means, quantiles and functions with their intervals, and the table."""
    if not rows:
        return ""
    panels = _plotted(rows)
    chart = ""
    if panels:
        chart = intervals_chart([(subject, _panel_rows(rows)) for subject, rows in panels.items()],
                                "The published means, quantiles and functions with their 95 % noise intervals")

    bias = _has_bias(rows)
    table = _table(["of", "statistic", "estimate", "95 % interval", "mechanism", "bounds", _esc(_unit(unit)),
                    *(["clipping bias"] if bias else [])],
                   [[_code(row.subject), _esc(_label(row)), _esc(_cell(row.estimate)), _esc(_interval(row)),
                     _esc(row.mechanism), _esc(row.bounds), _esc(_cell(row.budget)),
                     *([_esc(_bias(row))] if bias else [])] for row in rows])
    key = ('<p class="small">Dot: a mean or a function\'s estimate; tick: a quantile; bar: its 95 % noise '
           "interval. Counts, sums, variances and standard deviations are in the table.</p>") if chart else ""
    return _section("statistics", "Summary statistics", key + chart + table,
                    EXPLANATION + (" " + CLIPPING_EXPLANATION if bias else ""))
