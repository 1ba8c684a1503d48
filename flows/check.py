"""The data-quality flow: validate a table against its schema (the CI gate, as a Prefect flow)."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task

from schemas.model import load_schema
from schemas.validation import validate_table
from tasks import SENSITIVE
from tasks.ingest import check_structure, read_table


@task(name="validate_quality", **SENSITIVE)
def validate_quality(schema_path: str, data_path: str) -> list[str]:
    """Failed rules (column and rule, never a value); empty when the data passes."""
    schema = load_schema(schema_path)
    problems = check_structure(Path(data_path), schema)
    if problems:
        return problems
    return validate_table(read_table(Path(data_path), schema.names), schema).failed_rules()


@flow(name="check-quality", log_prints=False, persist_result=False)
def check_quality(schema: str, data: str) -> bool:
    """Validate ``data`` against ``schema``; the run fails when the data fails the schema.

    Raises:
        ValueError: Listing the failed rules (columns and rules only).
    """
    failed = validate_quality(str(Path(schema).resolve()), str(Path(data).resolve()))
    logger = get_run_logger()
    if failed:
        raise ValueError(f"{Path(data).name} fails {Path(schema).name}: " + "; ".join(failed))
    logger.info("%s passes %s", Path(data).name, Path(schema).name)
    return True
