"""Reading the sensitive table in the release: the inspect task, contribution bounding, the counting map.

Files, structure and row groups are read by :mod:`tasks.tables` (no Prefect), whose names are
re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from prefect import get_run_logger

from dprelease.dp.measurement.contributions import BoundedRows, bound_contributions
from dprelease.dp.measurement.marginals import ColumnDomain, ColumnRule, IntArray, RowHandling, count_all
from dprelease.schemas.model import PrivacyUnit, TableSchema
from dprelease.schemas.plan import ReleasePlan
from dprelease.tasks import guard_raw_errors, sensitive_task
from dprelease.tasks.tables import (
    COALESCE_ROWS,
    InputError,
    RowGroupRef,
    batch_count,
    check_structure,
    dataset_schema,
    open_parquet,
    parquet_files,
    read_row_groups,
    row_group_refs,
    row_groups,
    table_rows,
)

__all__ = [
    "COALESCE_ROWS", "InputError", "RowGroupRef", "batch_count", "categories_as_strings", "check_structure",
    "count_partition", "dataset_schema", "inspect_table", "open_parquet", "parquet_files", "read_row_groups",
    "read_table", "remote_count_partition", "row_group_refs", "row_groups", "table_rows", "unit_row_groups",
]


def unit_row_groups(
    path: Path, columns: Sequence[str], unit: PrivacyUnit, bounded: BoundedRows | None = None
) -> tuple[Iterator[pa.Table], BoundedRows | None]:
    """The row groups after contribution bounding (at most ``unit.max_rows`` rows per id), and the bounding.

    With row-level privacy this is :func:`row_groups` and no bounding. Otherwise the id column is
    read first (one column, every row group), the rows to keep are chosen (or ``bounded``, from an
    earlier pass of the same stage, is reused), and each row group is filtered as it is read, so the
    map-reduce over row groups is unchanged.
    """
    if unit.id_column is None:
        return row_groups(path, columns), None
    if bounded is None:
        ids = [batch.column(unit.id_column) for batch in row_groups(path, [unit.id_column])]
        chunks = [chunk for column in ids for chunk in column.chunks]
        id_type = dataset_schema(path).field(unit.id_column).type
        bounded = bound_contributions(pa.chunked_array(chunks, type=id_type), unit.max_rows)
    keep_rows = bounded.keep

    def filtered() -> Iterator[pa.Table]:
        offset = 0
        for batch in row_groups(path, columns):
            keep = keep_rows[offset:offset + batch.num_rows]
            offset += batch.num_rows
            yield batch.filter(pa.array(keep))

    return filtered(), bounded


def categories_as_strings(table: pa.Table, schema: TableSchema) -> pa.Table:
    """``table`` with its integer-typed category columns as decimal strings (7 becomes ``"7"``).

    Integer-coded categories are declared, counted and released as the decimal strings of their codes
    (``schemas.categories``, ``dp.measurement.marginals``): the synthetic table's category columns are
    strings. Real rows compared with synthetic ones take the same form first.
    """
    for column in schema.columns:
        if column.type != "category" or column.name not in table.column_names:
            continue
        index = table.column_names.index(column.name)
        if pa.types.is_integer(table.schema.field(index).type):
            table = table.set_column(index, column.name, pc.cast(table.column(index), pa.string()))
    return table


def read_table(path: Path, columns: Sequence[str]) -> pa.Table:
    """The whole table with ``columns`` (used inside sensitive tasks only)."""
    groups = list(row_groups(path, columns))
    return pa.concat_tables(groups) if groups else dataset_schema(path).empty_table().select(list(columns))


def count_partition(
    refs: Sequence[RowGroupRef],
    domains: Sequence[ColumnDomain],
    rules: Mapping[str, ColumnRule],
    workload: Sequence[tuple[str, ...]],
    maps: Mapping[str, npt.NDArray[np.integer[Any]]] | None = None,
) -> tuple[dict[tuple[str, ...], IntArray], RowHandling]:
    """The map: exact counts of the workload over some row groups, read here (row-level privacy only).

    The same :func:`dp.measurement.marginals.count_all` as the in-process pass, over the referenced row groups.
    """
    return count_all(read_row_groups(refs, [d.name for d in domains]), domains, rules, workload, maps)


remote_count_partition = guard_raw_errors("count_row_groups", count_partition)
""":func:`count_partition` for a Dask worker: a plain function (no Prefect task run, so the workers need
no Prefect API), submitted by :class:`tasks.measure.Counter`. It reads its own row groups by (file,
index), so raw rows never cross the network; it returns exact partial counts (raw aggregates) to the
measure task only. What it raises carries no message out (:func:`tasks.guard_raw_errors`): the full
text goes to the steward-only failure folder on the worker, the client sees a message-free error."""


@sensitive_task("inspect_table")
def inspect_table(plan: ReleasePlan) -> None:
    """Check the file's columns and physical types against the schema before any noise is drawn.

    With a dataset folder every file must have the same Arrow schema (checked here as well).

    Raises:
        InputError: Naming every structural problem (column and rule).
    """
    spec = plan.spec
    problems = check_structure(spec.data, spec.schema)
    if problems:
        raise InputError(f"{spec.data.name} does not match {Path(spec.schema.source).name}: " + "; ".join(problems))
    get_run_logger().info("%s: all %d declared columns present with declared types",
                          spec.data.name, len(spec.schema.columns))
