"""Reading the sensitive table: structure first (no rows), then row groups for the map step."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import get_run_logger, task

from dp.contributions import BoundedRows, bound_contributions
from schemas.model import PrivacyUnit, TableSchema, load_spec
from schemas.plan import ReleasePlan
from schemas.validation import structural_problems
from tasks import SENSITIVE


class InputError(ValueError):
    """The input file cannot be used: it names the file, the column and the rule, never a value."""


def open_parquet(path: Path) -> pq.ParquetFile:
    """Open a Parquet file with page checksums verified (a flipped byte is an error, not a change)."""
    try:
        return pq.ParquetFile(path, page_checksum_verification=True)
    except FileNotFoundError:
        raise InputError(f"{path.name}: file not found") from None
    except (pa.ArrowInvalid, OSError) as err:
        raise InputError(f"{path.name}: not a readable Parquet file ({type(err).__name__})") from None


def check_structure(path: Path, schema: TableSchema) -> list[str]:
    """Problems of the file's structure against the schema (column names and types only)."""
    parquet = open_parquet(path)
    return [str(p) for p in structural_problems(schema, parquet.schema_arrow)]


def row_groups(path: Path, columns: Sequence[str]) -> Iterator[pa.Table]:
    """The file's row groups, one table each, with only ``columns`` (the map step's input)."""
    parquet = open_parquet(path)
    for index in range(parquet.num_row_groups):
        try:
            yield parquet.read_row_group(index, columns=list(columns))
        except (pa.ArrowInvalid, OSError) as err:
            raise InputError(f"{path.name}: row group {index} cannot be read ({type(err).__name__})") from None


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
        id_type = open_parquet(path).schema_arrow.field(unit.id_column).type
        bounded = bound_contributions(pa.chunked_array(chunks, type=id_type), unit.max_rows)
    keep_rows = bounded.keep

    def filtered() -> Iterator[pa.Table]:
        offset = 0
        for batch in row_groups(path, columns):
            keep = keep_rows[offset:offset + batch.num_rows]
            offset += batch.num_rows
            yield batch.filter(pa.array(keep))

    return filtered(), bounded


def read_table(path: Path, columns: Sequence[str]) -> pa.Table:
    """The whole table with ``columns`` (used inside sensitive tasks only)."""
    return pa.concat_tables(list(row_groups(path, columns))) if open_parquet(path).num_row_groups else \
        open_parquet(path).schema_arrow.empty_table().select(list(columns))


@task(name="inspect_table", **SENSITIVE)
def inspect_table(plan: ReleasePlan) -> None:
    """Check the file's columns and physical types against the schema before any noise is drawn.

    Raises:
        InputError: Naming every structural problem (column and rule).
    """
    spec = load_spec(plan.spec_path)
    problems = check_structure(spec.data, spec.schema)
    if problems:
        raise InputError(f"{spec.data.name} does not match {Path(spec.schema.source).name}: " + "; ".join(problems))
    get_run_logger().info("%s: all %d declared columns present with declared types",
                          spec.data.name, len(spec.schema.columns))
