"""Reading the sensitive table: structure first (no rows), then row groups for the map step.

The table is one Parquet file or a folder of Parquet files (``*.parquet``, sorted by name) that
all share one Arrow schema; its row groups, file by file, are the partitions of the map-reduce.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from prefect import get_run_logger

from dprelease.dp.errors import DPReleaseError
from dprelease.dp.measurement.contributions import BoundedRows, bound_contributions
from dprelease.dp.measurement.marginals import ColumnDomain, ColumnRule, IntArray, RowHandling, count_all
from dprelease.quality.validation import structural_problems
from dprelease.schemas.model import PrivacyUnit, TableSchema
from dprelease.schemas.plan import ReleasePlan
from dprelease.tasks import guard_raw_errors, sensitive_task

RowGroupRef = tuple[str, int]
"""One partition of the map: a Parquet file's path and the index of one of its row groups."""


class InputError(DPReleaseError, ValueError):
    """The input file cannot be used: it names the file, the column and the rule, never a value."""


def open_parquet(path: Path) -> pq.ParquetFile:
    """Open a Parquet file with page checksums verified (a flipped byte is an error, not a change)."""
    try:
        return pq.ParquetFile(path, page_checksum_verification=True)
    except FileNotFoundError:
        raise InputError(f"{path.name}: file not found") from None
    except (pa.ArrowInvalid, OSError) as err:
        raise InputError(f"{path.name}: not a readable Parquet file ({type(err).__name__})") from None


def parquet_files(data: Path) -> list[Path]:
    """The files of a dataset: ``data`` itself, or the ``*.parquet`` files of a folder sorted by name.

    Raises:
        InputError: If ``data`` is a folder without any ``*.parquet`` file.
    """
    if not data.is_dir():
        return [data]
    files = sorted((p for p in data.glob("*.parquet") if p.is_file()), key=lambda p: p.name)
    if not files:
        raise InputError(f"{data.name}: the folder holds no *.parquet file")
    return files


def _first_difference(expected: pa.Schema, found: pa.Schema) -> str:
    """The first column (by position) where two Arrow schemas differ in name, type or nullability."""
    for position in range(max(len(expected), len(found))):
        if position >= len(found):
            return str(expected.field(position).name)
        if position >= len(expected):
            return str(found.field(position).name)
        mine, theirs = expected.field(position), found.field(position)
        if mine.name != theirs.name or mine.type != theirs.type or mine.nullable != theirs.nullable:
            return str(mine.name)
    return str(expected.field(0).name) if len(expected) else "?"  # pragma: no cover - equal schemas


def dataset_schema(data: Path) -> pa.Schema:
    """The Arrow schema shared by every file of the dataset (metadata ignored).

    Raises:
        InputError: Naming the first file whose schema differs from the first file's, and the first
            differing column (never a value).
    """
    files = parquet_files(data)
    schema = open_parquet(files[0]).schema_arrow
    for path in files[1:]:
        other = open_parquet(path).schema_arrow
        if not other.equals(schema, check_metadata=False):
            raise InputError(f"{data.name}/{path.name}: column {_first_difference(schema, other)!r} does not match "
                             f"{files[0].name} (every file of a dataset folder must have the same Arrow schema)")
    return schema


def check_structure(path: Path, schema: TableSchema) -> list[str]:
    """Problems of the dataset's structure against the schema (column names and types only).

    Raises:
        InputError: If a file cannot be read or the files of a folder disagree in schema.
    """
    return [str(p) for p in structural_problems(schema, dataset_schema(path))]


def row_group_refs(data: Path) -> list[RowGroupRef]:
    """Every row group of the dataset, file by file, as (file path, row group index): the map's partitions."""
    return [(str(path), index) for path in parquet_files(data) for index in range(open_parquet(path).num_row_groups)]


def read_row_groups(refs: Sequence[RowGroupRef], columns: Sequence[str]) -> Iterator[pa.Table]:
    """The referenced row groups, one table each, with only ``columns`` (checksums verified)."""
    opened: dict[str, pq.ParquetFile] = {}
    for file, index in refs:
        path = Path(file)
        if file not in opened:
            opened.clear()  # refs come file by file: keep one file open at a time
            opened[file] = open_parquet(path)
        try:
            yield opened[file].read_row_group(index, columns=list(columns))
        except (pa.ArrowInvalid, OSError) as err:
            raise InputError(f"{path.name}: row group {index} cannot be read ({type(err).__name__})") from None


COALESCE_ROWS = 65_536
"""Row groups smaller than this on average are read in batches of this many rows instead (validation and
counting then cost per row, not per row group: 20,000 one-row groups are 1 batch, not 20,000)."""


def _coalesced(file: pq.ParquetFile) -> bool:
    meta = file.metadata
    return bool(meta.num_row_groups > 1 and meta.num_rows < COALESCE_ROWS * meta.num_row_groups)


def row_groups(path: Path, columns: Sequence[str]) -> Iterator[pa.Table]:
    """The dataset's rows in batches (every file's, in order), one table each, with only ``columns``.

    A batch is a row group, or up to :data:`COALESCE_ROWS` rows across tiny row groups.
    """
    for file in parquet_files(path):
        opened = open_parquet(file)
        if not _coalesced(opened):
            yield from read_row_groups([(str(file), i) for i in range(opened.num_row_groups)], columns)
            continue
        try:
            for batch in opened.iter_batches(batch_size=COALESCE_ROWS, columns=list(columns)):
                yield pa.Table.from_batches([batch])
        except (pa.ArrowInvalid, OSError) as err:
            raise InputError(f"{file.name}: a row group cannot be read ({type(err).__name__})") from None


def table_rows(path: Path) -> int:
    """The dataset's row count from the Parquet footers (used only to decide where to count, never released)."""
    return sum(open_parquet(file).metadata.num_rows for file in parquet_files(path))


def batch_count(path: Path) -> int:
    """How many tables :func:`row_groups` yields for the dataset (for progress counters)."""
    total = 0
    for file in parquet_files(path):
        meta = open_parquet(file).metadata
        total += -(-meta.num_rows // COALESCE_ROWS) if _coalesced(open_parquet(file)) else meta.num_row_groups
    return total


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
