"""The true value of every published summary statistic, for the steward's internal report (never published).

Computed from the raw rows without noise and without clipping, so the steward sees the DP estimate, its
interval and the truth side by side: a true value outside the interval shows noise, clipping bias or (for
sample-and-aggregate) the chunks' sampling error. Statistics are the release's definitions: variance with
divisor n, quantiles the smallest value whose empirical CDF reaches the level, the slope by least squares,
the ratio Σy/Σx over rows where both columns are set.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from dprelease.dp.statistics.aggregate import REGISTERED
from dprelease.dp.statistics.groups import group_index

FloatArray = npt.NDArray[np.float64]


class _Row(Protocol):
    """A published statistic's row (``reports.audit_records.PublishedStatistic``), as read here."""

    @property
    def subject(self) -> str: ...
    @property
    def by(self) -> str | None: ...
    @property
    def group(self) -> str | None: ...
    @property
    def statistic(self) -> str: ...
    @property
    def level(self) -> float | None: ...
    @property
    def estimate(self) -> float | None: ...
    @property
    def low95(self) -> float | None: ...
    @property
    def high95(self) -> float | None: ...


def _floats(table: pa.Table, column: str) -> FloatArray:
    # unchecked: an integer beyond ±2^53 becomes the nearest double, as in the measurement (tasks/stats.py)
    return np.asarray(pc.cast(table.column(column), pa.float64(), safe=False).to_numpy(zero_copy_only=False),
                      dtype=np.float64)


def _moment(values: FloatArray, statistic: str, level: float | None) -> float | None:
    values = values[~np.isnan(values)]
    if statistic == "count":
        return float(len(values))
    if not len(values):
        return None
    statistic = statistic.removeprefix("corrected ")  # a corrected mean or sum estimates the same true value
    if statistic == "sum":
        return float(values.sum())
    if statistic == "mean":
        return float(values.mean())
    if statistic in ("variance", "std"):
        variance = float(values.var())
        return variance if statistic == "variance" else math.sqrt(variance)
    if statistic == "quantile" and level is not None:
        return float(np.quantile(values, level, method="inverted_cdf"))
    return None


def _function(table: pa.Table, aggregate: Mapping[str, Any]) -> float | None:
    x, y = _floats(table, str(aggregate["x"])), _floats(table, str(aggregate["y"]))
    both = ~(np.isnan(x) | np.isnan(y))
    value = REGISTERED[str(aggregate["function"])](np.column_stack([x[both], y[both]]))
    return None if math.isnan(value) else value


def true_statistics(rows: Sequence[_Row], document: Mapping[str, Any], table: pa.Table,
                    groups: Mapping[str, tuple[Sequence[str], str]] | None = None) -> list[dict[str, Any]]:
    """Each published row with its true value and whether its interval holds it (raw data: steward only).

    Args:
        rows: The published statistics (``reports.statistics.statistic_rows`` of ``document``).
        document: The published ``statistics.json`` (for the functions' columns).
        table: The real rows (categories as strings).
        groups: For each ``by:`` column, its declared categories and ``on_unknown``: rows join their group as
            the release joined them (:func:`dp.statistics.groups.group_index`: NFC, ``on_unknown``); a column
            not given is matched by its raw labels.
    """
    used = {row.by for row in rows if row.by is not None}
    grouped = {by: group_index(table.column(by), list(categories), on_unknown)
               for by, (categories, on_unknown) in (groups or {}).items() if by in used}
    functions = {str(a["name"]): a for a in document.get("aggregates", ())}
    columns: dict[str, FloatArray] = {}
    split: dict[tuple[str, str], dict[str, FloatArray]] = {}

    def group_values(subject: str, by: str, group: str) -> FloatArray:
        """The subject's values in the group: each (subject, by) split once, every group a slice of it."""
        if (subject, by) not in split:  # rows in file order within each group, as values[mask] gives them
            if by in grouped:
                index, names = grouped[by], [str(name) for name in (groups or {})[by][0]]
            else:  # matched by raw label
                labels = table.column(by).cast(pa.string()).to_pylist()
                names = [str(name) for name in dict.fromkeys(label for label in labels if label is not None)]
                position = {name: g for g, name in enumerate(names)}
                index = np.array([-1 if label is None else position[label] for label in labels], dtype=np.int64)
            order = np.argsort(index, kind="stable")
            edges = np.searchsorted(index[order], np.arange(len(names) + 1))
            ordered = columns[subject][order]
            split[subject, by] = {name: ordered[edges[g]:edges[g + 1]] for g, name in enumerate(names)}
        return split[subject, by].get(group, np.zeros(0, dtype=np.float64))

    out = []
    for row in rows:
        if row.subject in functions:
            truth = _function(table, functions[row.subject])
        else:
            if row.subject not in columns:
                columns[row.subject] = _floats(table, row.subject)
            values = columns[row.subject]
            if row.by is not None and row.group is not None:
                values = group_values(row.subject, row.by, row.group)
            truth = _moment(values, row.statistic, row.level)
        inside = (None if truth is None or row.low95 is None or row.high95 is None
                  else bool(row.low95 <= truth <= row.high95))
        out.append({"subject": row.subject, "group": row.group, "by": row.by, "statistic": row.statistic,
                    "level": row.level, "estimate": row.estimate, "low95": row.low95, "high95": row.high95,
                    "true": truth, "inside": inside})
    return out
