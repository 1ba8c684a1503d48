"""The data-quality flow: validate a table against its schema (the CI gate, as a Prefect flow)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from prefect import flow, get_run_logger

from schemas.model import load_schema
from schemas.validation import validate_batches
from tasks import DPReleaseError, sensitive_task
from tasks.ingest import check_structure, dataset_schema, row_groups


def junit_report(suite_name: str, cases: list[tuple[str, str, str | None, bool]]) -> bytes:
    """A JUnit XML report: one testcase per (column, rule), failed ones with the rule as message.

    Args:
        suite_name: The testsuite's name (file names only).
        cases: ``(column, rule, failure, errored)``: ``failure`` is None when the rule passed;
            ``errored`` marks a check that could not be evaluated.

    Returns:
        The UTF-8 encoded document. It names columns and rules from the schema, never a value.
    """
    failures = sum(1 for _, _, failure, errored in cases if failure is not None and not errored)
    errors = sum(1 for _, _, failure, errored in cases if failure is not None and errored)
    counts = {"tests": str(len(cases)), "failures": str(failures), "errors": str(errors), "skipped": "0"}
    root = ET.Element("testsuites", {"name": "dprelease check", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": suite_name, **counts})
    for column, rule, failure, errored in cases:
        case = ET.SubElement(suite, "testcase", {"classname": f"column {column}", "name": rule})
        if failure is not None:
            ET.SubElement(case, "error" if errored else "failure",
                          {"message": failure, "type": "error" if errored else "rule"}).text = failure
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


class DataQualityError(DPReleaseError, ValueError):
    """The table fails its schema; the message names columns and rules, never a value."""


@sensitive_task("validate_quality")
def validate_quality(schema_path: str, data_path: str) -> list[str]:
    """Failed rules (column and rule, never a value); empty when the data passes."""
    schema = load_schema(schema_path)
    problems = check_structure(Path(data_path), schema)
    if problems:
        return problems
    data = Path(data_path)
    return validate_batches(row_groups(data, schema.names), schema, dataset_schema(data)).failed_rules()


# The parameters are not called ``schema`` and ``data``: a parameter named ``schema`` shadows a
# pydantic BaseModel attribute, and Prefect's parameter validation then refuses the flow.
@flow(name="check-quality", log_prints=False, persist_result=False, validate_parameters=True)
def check_quality(schema_path: str, data_path: str) -> bool:
    """Validate the table at ``data_path`` against the schema at ``schema_path``.

    The run fails when the data fails the schema, so that a deployment's run state is the gate.
    Parameters are public paths; only the names of failed columns and rules are logged.

    Args:
        schema_path: Path of the table schema (YAML).
        data_path: Path of the table (Parquet).

    Returns:
        True when the table passes its schema.

    Raises:
        DataQualityError: Listing the failed rules (columns and rules only).
    """
    schema_file, data_file = Path(schema_path).resolve(), Path(data_path).resolve()
    failed = validate_quality(str(schema_file), str(data_file))
    logger = get_run_logger()
    if failed:
        raise DataQualityError(f"{data_file.name} fails {schema_file.name}: " + "; ".join(failed))
    logger.info("%s passes %s", data_file.name, schema_file.name)
    return True
