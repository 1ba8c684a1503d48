"""The data-quality flow: validate a table against its schema (the CI gate, as a Prefect flow)."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger
from prefect.artifacts import create_table_artifact

from dprelease.quality.validation import structural_problems, validate_batches
from dprelease.reports.junit import junit_report
from dprelease.schemas.table import load_schema
from dprelease.tasks import DPReleaseError, sensitive_task
from dprelease.tasks.tables import dataset_schema, row_groups

__all__ = ["DataQualityError", "Outcome", "check_quality", "junit_report", "validate_quality"]


class DataQualityError(DPReleaseError, ValueError):
    """The table fails its schema; the message names columns and rules, never a value."""


Outcome = dict[str, str]
"""One rule's outcome for the flow's table artifact: ``column``, ``rule`` and ``outcome`` (pass, fail, error)."""


@sensitive_task("validate_quality")
def validate_quality(schema_path: str, data_path: str) -> tuple[list[str], list[Outcome]]:
    """Failed rules (column and rule, never a value; empty when the data passes) and every rule's outcome."""
    schema = load_schema(schema_path)
    data = Path(data_path)
    problems = structural_problems(schema, dataset_schema(data))
    unsound = {p.column for p in problems}
    outcomes = [{"column": c.name, "rule": "must be present once with its declared type",
                 "outcome": "fail" if c.name in unsound else "pass"} for c in schema.columns]
    if problems:
        return [str(p) for p in problems], outcomes
    report = validate_batches(row_groups(data, schema.names), schema, dataset_schema(data))
    outcomes += [{"column": o.column, "rule": o.rule,
                  "outcome": "error" if o.errored else "pass" if o.success else "fail"}
                 for o in report.expectations if o.expectation_type != "expect_column_to_exist"]
    return report.failed_rules(), outcomes


# The parameters are not called ``schema`` and ``data``: a parameter named ``schema`` shadows a
# pydantic BaseModel attribute, and Prefect's parameter validation then refuses the flow.
@flow(name="check-quality", log_prints=False, persist_result=False, validate_parameters=True)
def check_quality(schema_path: str, data_path: str) -> bool:
    """Validate the table at ``data_path`` against the schema at ``schema_path``.

    The run fails when the data fails the schema, so that a deployment's run state is the gate.
    Parameters are public paths; only the names of failed columns and rules are logged. Every
    rule's outcome (column, rule, pass/fail/error: no value, no count) goes to a table artifact
    ``quality-<schema file stem>``. Like the gate itself, it is not differentially private: it
    belongs to the steward's Prefect, not to public logs.

    Args:
        schema_path: Path of the table schema (YAML).
        data_path: Path of the table (Parquet).

    Returns:
        True when the table passes its schema.

    Raises:
        DataQualityError: Listing the failed rules (columns and rules only).
    """
    schema_file, data_file = Path(schema_path).resolve(), Path(data_path).resolve()
    failed, outcomes = validate_quality(str(schema_file), str(data_file))
    key = "quality-" + "".join(ch if ch.isalnum() else "-" for ch in schema_file.stem.lower())
    create_table_artifact(table=outcomes, key=key,
                          description=f"data-quality rules of {data_file.name} against {schema_file.name} "
                                      "(not differentially private: steward only)")
    logger = get_run_logger()
    if failed:
        raise DataQualityError(f"{data_file.name} fails {schema_file.name}: " + "; ".join(failed))
    logger.info("%s passes %s", data_file.name, schema_file.name)
    return True
