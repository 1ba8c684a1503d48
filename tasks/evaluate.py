"""Steward-only checks that compare the synthetic table with the real one (never published)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq
from prefect import get_run_logger, task

from dp.evaluation import utility
from dp.risk import disclosure_risk
from schemas.model import load_spec
from schemas.plan import ReleasePlan
from schemas.report_html import render_internal_html
from tasks import SENSITIVE
from tasks.ingest import parquet_files, read_table
from tasks.staging import file_sha256, write_internal


@task(name="evaluate_utility", **SENSITIVE)
def evaluate_utility(plan: ReleasePlan, staging: str, table_file: str) -> None:
    """Write the internal report: utility (TVD yardstick), disclosure risk, the input's fingerprint.

    Everything here is computed from the raw table without noise, so it goes to ``internal/``
    only (the steward's eyes), as JSON and as a self-contained HTML page with charts.
    """
    spec = load_spec(plan.spec_path)
    columns = list(spec.schema.names)
    real = read_table(spec.data, columns)
    synthetic = pq.read_table(Path(staging) / table_file, columns=columns)
    report = utility(real, synthetic, columns).to_dict()
    quasi = list(spec.schema.quasi_identifiers)
    risk = disclosure_risk(real, synthetic, columns, quasi, seed=plan.seed).to_dict() if quasi else {
        "note": "the schema declares no quasi_identifiers"}
    root = Path(staging)
    write_internal(root, "utility.json", json.dumps(report, indent=2))
    write_internal(root, "risk.json", json.dumps(risk, indent=2))
    write_internal(root, "input.json", json.dumps(_fingerprint(spec.data, real.num_rows), indent=2))
    audit = json.loads((root / "audit.json").read_text(encoding="utf-8"))
    histograms = report.pop("histograms")
    write_internal(root, "report.html", render_internal_html(audit, report, histograms, risk if quasi else None))
    get_run_logger().info("internal report (utility, disclosure risk) written")


def _fingerprint(data: Path, rows: int) -> dict[str, object]:
    """The input's name, SHA-256 and row count; a folder's SHA-256 is over its files' names and hashes."""
    if not data.is_dir():
        return {"file": data.name, "sha256": file_sha256(data), "rows": rows}
    files = [{"file": path.name, "sha256": file_sha256(path)} for path in parquet_files(data)]
    digest = hashlib.sha256("".join(f"{f['sha256']}  {f['file']}\n" for f in files).encode()).hexdigest()
    return {"folder": data.name, "sha256": digest, "rows": rows, "files": files}
