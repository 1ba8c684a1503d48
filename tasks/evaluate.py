"""Steward-only checks that compare the synthetic table with the real one (never published)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from prefect import get_run_logger, task

from dp.evaluation import utility
from schemas.model import load_spec
from schemas.plan import ReleasePlan
from tasks import SENSITIVE
from tasks.ingest import read_table
from tasks.staging import file_sha256, write_internal


@task(name="evaluate_utility", **SENSITIVE)
def evaluate_utility(plan: ReleasePlan, staging: str, table_file: str) -> None:
    """Write the TVD yardstick and the input's fingerprint to ``internal/``."""
    spec = load_spec(plan.spec_path)
    columns = list(spec.schema.names)
    real = read_table(spec.data, columns)
    synthetic = pq.read_table(Path(staging) / table_file, columns=columns)
    report = utility(real, synthetic, columns)
    write_internal(Path(staging), "utility.json", json.dumps(report.to_dict(), indent=2))
    write_internal(Path(staging), "input.json", json.dumps(
        {"file": spec.data.name, "sha256": file_sha256(spec.data), "rows": real.num_rows}, indent=2))
    get_run_logger().info("utility of the synthetic table written to the internal report")
