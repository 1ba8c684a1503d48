"""Write the audit report and manifest, then publish the staged release atomically."""

from __future__ import annotations

import json
import os
import shutil
from importlib import metadata
from pathlib import Path

from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact

import dprelease
from dprelease.dp.accounting.charges import MeasurementRecord
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.accounting.ledger_rows import LedgerStatus
from dprelease.dp.accounting.processes import fault_point
from dprelease.dp.errors import ReleaseError
from dprelease.dp.measurement.bounds import DiscoveredBounds
from dprelease.reports.audit import budget_table, build_audit, render_markdown
from dprelease.reports.audit_json import audit_from_json, audit_to_json
from dprelease.reports.audit_records import PublishedStatistic
from dprelease.reports.html import render_html
from dprelease.reports.statistics import STATISTICS_FILE, statistic_rows
from dprelease.schemas.plan import ReleasePlan
from dprelease.tasks import public_task, sensitive_task
from dprelease.tasks.measure import Measured
from dprelease.tasks.staging import (
    MANIFEST,
    file_entries,
    file_sha256,
    final_dir,
    make_public,
    manifest_seal,
    verify_release,
)
from dprelease.tasks.synthesize import SynthesisResult

PACKAGES = ("dprelease", "opendp", "prefect", "great-expectations", "numpy", "pyarrow", "pandas")


def provenance() -> dict[str, str]:
    """Package versions and the code commit (public)."""
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    out["commit"] = dprelease.commit()
    return out


@public_task("write_report")
def write_report(
    plan: ReleasePlan,
    before: LedgerStatus,
    ledger_path: str,
    bounds: list[DiscoveredBounds],
    measured: Measured,
    synthesis: SynthesisResult,
    staging: str,
    statistics: list[MeasurementRecord] | None = None,
    domain: list[MeasurementRecord] | None = None,
) -> None:
    """Render ``audit.json``, ``audit.md`` and ``audit.html`` from the plan, the ledger and the DP outputs.

    ``statistics`` are the records of the summary statistics (``stats:``), listed after the synthesis's;
    ``domain`` those of the bounds stage's private mappings and quantile bins, listed after the bounds'.
    """
    spec = plan.spec
    with Ledger.open(Path(ledger_path)) as ledger:
        charges = ledger.charges(release_id=plan.release_id)
    measurements = ([m for b in bounds for m in b.measurements] + list(domain or [])
                    + measured.records() + list(statistics or []))
    audit = build_audit(
        plan=plan, spec=spec, schema_sha256=file_sha256(spec.schema_path), charges=charges, before=before,
        measurements=measurements,
        discovered_bounds={b.column: (b.lower, b.upper, b.lower_found, b.upper_found) for b in bounds},
        synthetic_rows=synthesis.rows, model_edges=synthesis.model_edges, provenance=provenance(),
        selected_pairs=measured.pairs() if spec.auto_pairs else measured.tree,
        cliques=synthesis.cliques,
        coarse_bins={c: int(m.max()) + 1 for c, m in measured.maps.items()},
        bound_quality={b.column: b.quality() for b in bounds},
        statistics=_published_statistics(Path(staging)),
    )
    root = Path(staging)
    (root / "audit.json").write_text(audit_to_json(audit), encoding="utf-8")
    (root / "audit.md").write_text(render_markdown(audit), encoding="utf-8")
    (root / "audit.html").write_text(render_html(audit), encoding="utf-8")


def _published_statistics(root: Path) -> list[PublishedStatistic]:
    """The summary statistics the stats task staged (public DP outputs), as the audit's rows."""
    document = root / STATISTICS_FILE
    if not document.exists():
        return []
    return statistic_rows(json.loads(document.read_text(encoding="utf-8")))


def _manifest(plan: ReleasePlan, root: Path, ledger_path: str | None = None) -> dict[str, object]:
    spec = plan.spec
    manifest: dict[str, object] = {
        "release_id": plan.release_id,
        "dataset": plan.dataset,
        "files": file_entries(root),
        "spec": Path(plan.spec_path).read_text(encoding="utf-8"),
        "schema": spec.schema_path.read_text(encoding="utf-8"),
        "provenance": provenance(),
    }
    if ledger_path is not None:
        with Ledger.open(Path(ledger_path)) as ledger:  # the ledger's head at publication: deleted rows show
            manifest["ledger_head"] = ledger.head().to_dict()
    manifest["manifest_sha256"] = manifest_seal(manifest)
    return manifest


@sensitive_task("publish_release")
def publish_release(plan: ReleasePlan, staging: str, out: str, ledger_path: str) -> str:
    """Write the manifest, verify it, rename the staging folder into place and close the ledger entry."""
    root = Path(staging)
    make_public(root)  # 0644 files, 0755 folders, whatever the umask
    manifest = _manifest(plan, root, ledger_path)
    (root / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    os.chmod(root / MANIFEST, 0o644)
    problems = verify_release(root)
    if problems:
        raise ReleaseError(f"staged release does not verify against its manifest: {problems[0]}")
    target = final_dir(Path(out), plan.dataset, plan.release_id)
    if target.exists():
        raise ReleaseError(f"release folder {target} already exists")
    os.rename(root, target)
    fault_point("after_publish_rename")
    with Ledger.open(Path(ledger_path)) as ledger:
        ledger.publish(plan.release_id)
    _artifacts(plan, target)
    get_run_logger().info("published release %s to %s", plan.release_id, target)
    return str(target)


def _artifacts(plan: ReleasePlan, target: Path) -> None:
    """Prefect artifacts with public content only: the budget table and where the release is.

    The location is a plain path in Markdown (a ``file://`` link is blocked by browsers from an http UI).
    """
    audit = audit_from_json((target / "audit.json").read_text(encoding="utf-8"))
    key = "".join(ch if ch.isalnum() else "-" for ch in plan.dataset.lower())
    create_table_artifact(table=budget_table(audit), key=f"budget-{key}",
                          description=f"privacy budget of release {plan.release_id} of {plan.dataset} (public)")
    create_markdown_artifact(
        markdown=f"### Release `{plan.release_id}` of `{plan.dataset}`\n\nPublished to `{target.resolve()}` "
                 f"(check it with `dprelease verify {target.resolve()}`).",
        key=f"release-{key}", description="where the published release folder is")


def abort_release(release_id: str, staging: Path | None, ledger_path: str) -> None:
    """After a failure: remove the staging folder, close the reservation as failed.

    Drawn charges stay in the ledger; the undrawn rest of the reservation is released.
    """
    if staging is not None and staging.exists():
        shutil.rmtree(staging, ignore_errors=True)
    with Ledger.open(Path(ledger_path)) as ledger:
        try:
            if ledger.release_status(release_id) == "reserved":
                ledger.fail(release_id)
        except Exception:
            return
