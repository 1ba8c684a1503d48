"""Great Expectations validation of the sensitive table; results go to the internal report only."""

from __future__ import annotations

import json
from pathlib import Path

from prefect import get_run_logger

from dprelease.quality.validation import validate_batches as run_expectations
from dprelease.schemas.plan import ReleasePlan
from dprelease.tasks import sensitive_task
from dprelease.tasks.ingest import batch_count, dataset_schema, row_groups
from dprelease.tasks.progress import StageProgress
from dprelease.tasks.staging import write_internal


@sensitive_task("validate_table")
def validate_table(plan: ReleasePlan, steward: str) -> None:
    """Validate the table against the schema's expectation suite; write the steward-only result.

    The table is validated row group by row group, so memory stays at one row group's frame.

    Row-level failures do not stop a release (they are handled row by row when counting, and a
    failure would itself reveal something about single rows); they are recorded in the release's
    steward-only folder ``steward``.
    """
    spec = plan.spec
    batches = StageProgress("validate").track(row_groups(spec.data, spec.schema.names), batch_count(spec.data))
    report = run_expectations(batches, spec.schema, dataset_schema(spec.data))
    write_internal(Path(steward), "validation.json", json.dumps(report.to_dict(), indent=2, default=str))
    get_run_logger().info("validation of %s finished; results are in the internal report", spec.data.name)
