"""Reading the sensitive table without Prefect: its files, structure (no rows) and row groups.

The table is one Parquet file or a folder of Parquet files (``*.parquet``, sorted by name) that
all share one Arrow schema; its row groups, file by file, are the partitions of the map-reduce.
This module imports no Prefect (nor does the ``tasks`` package itself until a task is declared), so
the preflight and ``dprelease check`` read files without paying for it; the release's tasks that
read rows are in :mod:`tasks.ingest`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dprelease.dp.errors import DPReleaseError
from dprelease.quality.validation import structural_problems
from dprelease.schemas.identifiers import short
from dprelease.schemas.model import TableSchema

RowGroupRef = tuple[str, int]
"""One partition of the map: a Parquet file's path and the index of one of its row groups."""


class InputError(DPReleaseError, ValueError):
    """The input file cannot be used: it names the file, the column and the rule, never a value."""


def check_writable(folder: Path, what: str) -> None:
    """``folder`` exists or can be created, is a folder, and accepts a new file.

    Raises:
        InputError: Naming the setting (``what``) and the rule.
    """
    existing = folder
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise InputError(f"{what} {folder}: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"{what} {folder}: {existing} is not writable by this user")
    if folder.is_dir():
        try:
            with tempfile.TemporaryFile(dir=folder):
                pass
        except OSError as err:
            raise InputError(f"{what} {folder}: a file cannot be created there ({type(err).__name__})") from None


def open_parquet(path: Path) -> pq.ParquetFile:
    """Open a Parquet file with page checksums verified (a flipped byte is an error, not a change)."""
    try:
        return pq.ParquetFile(path, page_checksum_verification=True)
    except FileNotFoundError:
        raise InputError(f"{path.name}: file not found") from None
    except (pa.ArrowInvalid, OSError) as err:
        raise InputError(f"{path.name}: not a readable Parquet file ({type(err).__name__})") from None


HIDDEN_PREFIXES = (".", "_")
"""Names a folder's reader skips, as pyarrow's datasets, Spark and Hive do: hidden files (``._part-0.parquet``,
the AppleDouble twin a copy from macOS leaves beside each file) and a writer's own (``_metadata``, ``_temporary``)."""


def parquet_files(data: Path) -> list[Path]:
    """The files of a dataset: ``data`` itself, or the ``*.parquet`` files of a folder sorted by name.

    A folder's files whose names begin with ``.`` or ``_`` are not part of it (:data:`HIDDEN_PREFIXES`).

    Raises:
        InputError: If ``data`` is a folder without any ``*.parquet`` file.
    """
    if not data.is_dir():
        return [data]
    files = sorted((p for p in data.glob("*.parquet") if p.is_file() and not p.name.startswith(HIDDEN_PREFIXES)),
                   key=lambda p: p.name)
    if not files:
        raise InputError(f"{data.name}: the folder holds no *.parquet file (names beginning with . or _ are skipped)")
    return files


def _first_difference(expected: pa.Schema, found: pa.Schema, first: str) -> str:
    """The first column (by position) where two Arrow schemas differ, and how: name, type or nullability.

    Only file metadata is named (column names, cut at 128 characters; Arrow types; positions), never a value.
    """
    for position in range(max(len(expected), len(found))):
        if position >= len(found):
            return f"column {short(expected.field(position).name, 128)} of {first} is missing"
        if position >= len(expected):
            return f"column {short(found.field(position).name, 128)} is not in {first}"
        mine, theirs = expected.field(position), found.field(position)
        name = short(mine.name, 128)
        if mine.name != theirs.name:
            return f"column {position + 1} is {short(theirs.name, 128)} where {first} has {name}"
        if mine.type != theirs.type:
            return f"column {name} is {theirs.type} where {first} has {mine.type}"
        if mine.nullable != theirs.nullable:
            nullable = {True: "nullable", False: "required (not null)"}
            return f"column {name} is {nullable[theirs.nullable]} where {first} has it {nullable[mine.nullable]}"
    return "the schemas differ"  # pragma: no cover - equal schemas


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
            raise InputError(f"{data.name}/{path.name}: {_first_difference(schema, other, files[0].name)} (every "
                             "file of a dataset folder must have the same Arrow schema)")
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


def _utf8(table: pa.Table) -> pa.Table:
    """``table`` with any text that is not UTF-8 repaired as Python's ``errors="replace"`` does (U+FFFD).

    pyarrow reads a Parquet string column unchecked, and a library decoding a malformed value fails with
    an error quoting its bytes (a release failed in a stage, a check with an unexpected error). Such a
    value is one row's, handled like any value outside the domain (dropped or mapped when counted, failing
    the in-set rule when validated): whether a release is published never depends on one row.
    """
    for index, column in enumerate(table.columns):
        kind = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            continue  # a string_view column is never read from Parquet (pyarrow gives string or large_string)
        try:
            column.validate(full=True)
        except pa.ArrowInvalid:
            raw = column.cast(kind).cast(pa.large_binary()).to_pylist()  # the rows of this one batch only
            text = pa.array([None if v is None else v.decode("utf-8", "replace") for v in raw], kind)
            table = table.set_column(index, table.field(index), text.dictionary_encode().cast(column.type)
                                     if pa.types.is_dictionary(column.type) else text)
    return table


def read_row_groups(refs: Sequence[RowGroupRef], columns: Sequence[str]) -> Iterator[pa.Table]:
    """The referenced row groups, one table each, with only ``columns`` (checksums verified)."""
    opened: dict[str, pq.ParquetFile] = {}
    for file, index in refs:
        path = Path(file)
        if file not in opened:
            opened.clear()  # refs come file by file: keep one file open at a time
            opened[file] = open_parquet(path)
        try:
            group = opened[file].read_row_group(index, columns=list(columns))
        except (pa.ArrowInvalid, OSError) as err:
            raise InputError(f"{path.name}: row group {index} cannot be read ({type(err).__name__})") from None
        yield _utf8(group)


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
        batches = opened.iter_batches(batch_size=COALESCE_ROWS, columns=list(columns))
        while True:
            try:
                batch = next(batches, None)
            except (pa.ArrowInvalid, OSError) as err:
                raise InputError(f"{file.name}: a row group cannot be read ({type(err).__name__})") from None
            if batch is None:
                break
            yield _utf8(pa.Table.from_batches([batch]))


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
