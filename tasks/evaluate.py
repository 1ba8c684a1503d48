"""Steward-only checks that compare the synthetic table with the real one (never published).

At scale the checks run on samples (numbers in :data:`EVALUATION_ROWS` and the other limits):
the TVD yardstick, k-anonymity and the distance to closest record on a uniform sample of real
rows chosen by the secure source, against a seeded sample of as many synthetic rows; the
exact-match share compares a sample of synthetic rows with *every* real row, row group by row
group. A table within the limits is evaluated whole. What was sampled is written into the
reports, so a figure is never mistaken for one over the whole table.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq
from prefect import get_run_logger

from dprelease.dp.errors import InternalError
from dprelease.quality.kanonymity import k_anonymity_comparison
from dprelease.quality.risk import closest_record_distances, exact_match_share
from dprelease.quality.statistics_truth import true_statistics
from dprelease.quality.utility import utility
from dprelease.reports.audit_json import audit_from_json
from dprelease.reports.internal_html import render_internal_html
from dprelease.reports.statistics import STATISTICS_FILE, statistic_rows
from dprelease.schemas.model import TableSchema
from dprelease.schemas.plan import ReleasePlan
from dprelease.tasks import sensitive_task
from dprelease.tasks.ingest import categories_as_strings, dataset_schema, open_parquet, parquet_files, row_groups
from dprelease.tasks.staging import file_sha256, write_internal

IntArray = npt.NDArray[np.int64]

EVALUATION_ROWS = 500_000
"""Real rows (a uniform secure sample) and synthetic rows (seeded) compared by the TVD yardstick and
k-anonymity. At this size the yardstick's own sampling error is small (a bootstrap of Adult's
32,561 rows scores tvd3 0.025; it shrinks as 1/√rows) and the evaluation takes seconds."""

EXACT_MATCH_ROWS = 100_000
"""Synthetic rows each compared with every real row for the exact-match share (standard error of
the share at most 0.0016)."""

DCR_REFERENCE_ROWS = 100_000
"""Real rows that distances to the closest record are measured against (a uniform sample, for the
synthetic rows and for the real-to-real baseline alike)."""

DCR_SAMPLE = 2000
"""Synthetic rows (and real rows for the baseline) whose distance to the closest record is measured."""


def secure_order(population: int, size: int, random_bytes: Callable[[int], bytes] = secrets.token_bytes) -> IntArray:
    """``size`` distinct row numbers below ``population``, uniformly at random and in random order.

    Real rows are chosen by the secure source (a seeded generator never chooses among sensitive
    rows): each row gets 64 random bits, the rows with the smallest keys are taken, smallest first.
    Any prefix of the result is itself a uniform sample.
    """
    keys = np.frombuffer(random_bytes(8 * population), dtype=np.uint64)
    if size >= population:
        return np.argsort(keys, kind="stable").astype(np.int64)
    chosen = np.argpartition(keys, size)[:size]
    return chosen[np.argsort(keys[chosen], kind="stable")].astype(np.int64)


def take_rows(batches: Iterable[pa.Table | pa.RecordBatch], rows: IntArray) -> pa.Table:
    """The rows numbered ``rows`` (ascending) of a table given batch by batch; memory: one batch and the rows."""
    parts = []
    offset = 0
    for batch in batches:
        start, stop = np.searchsorted(rows, [offset, offset + batch.num_rows])
        if stop > start:
            taken = batch.take(pa.array(rows[start:stop] - offset))
            parts.append(taken if isinstance(taken, pa.Table) else pa.Table.from_batches([taken]))
        offset += batch.num_rows
    if not parts:
        raise InternalError("take_rows needs at least one batch holding the requested rows")
    return pa.concat_tables(parts)


class _RealPass:
    """One pass over the real row groups that keeps a uniform secure sample of the rows.

    Iterating yields every row group (for the exact-match check, which needs them all) and keeps
    the sampled rows of each on the way, so the raw table is read once. A table with at most
    :data:`EVALUATION_ROWS` rows is kept whole.
    """

    def __init__(self, data: Path, schema: TableSchema, rows: int) -> None:
        self.data, self.schema, self.columns = data, schema, list(schema.names)
        order = secure_order(rows, min(rows, EVALUATION_ROWS)) if rows else np.zeros(0, dtype=np.int64)
        self.ascending = np.sort(order)
        self.order = np.searchsorted(self.ascending, order).astype(np.int64)
        """For each sampled row in random order, its position in :attr:`sample` (any prefix is uniform)."""
        self.parts: list[pa.Table] = []
        self.done = False

    def __iter__(self) -> Iterator[pa.Table]:
        offset = 0
        for raw in row_groups(self.data, self.columns):
            batch = categories_as_strings(raw, self.schema)  # integer codes in the synthetic table's form
            start, stop = np.searchsorted(self.ascending, [offset, offset + batch.num_rows])
            if stop - start == batch.num_rows:
                self.parts.append(batch)
            elif stop > start:
                self.parts.append(batch.take(pa.array(self.ascending[start:stop] - offset)))
            offset += batch.num_rows
            yield batch
        self.done = True

    def sample(self) -> pa.Table:
        """The sampled rows in file order (reads the table first if no one has iterated)."""
        if not self.done:
            for _ in self:
                pass
        if not self.parts:
            return categories_as_strings(dataset_schema(self.data).empty_table().select(self.columns), self.schema)
        return pa.concat_tables(self.parts)


def _sample_synthetic(path: Path, columns: Sequence[str], chooser: np.random.Generator) -> tuple[pa.Table, int]:
    """A seeded uniform sample of at most :data:`EVALUATION_ROWS` synthetic rows, and the table's row count."""
    file = pq.ParquetFile(path)
    rows = file.metadata.num_rows
    if rows <= EVALUATION_ROWS:
        return file.read(columns=list(columns)), rows
    picked = np.sort(chooser.choice(rows, size=EVALUATION_ROWS, replace=False))
    return take_rows(file.iter_batches(batch_size=1 << 20, columns=list(columns)), picked), rows


@sensitive_task("evaluate_utility")
def evaluate_utility(plan: ReleasePlan, release_dir: str, table_file: str, steward: str) -> None:
    """Write the internal report: utility, disclosure risk, the input's fingerprint, statistics beside the truth.

    Runs after publication, on the published synthetic table (``release_dir``/``table_file``).
    Everything here is computed from the raw table without noise, so it goes to the release's
    steward-only folder ``steward`` only (the steward's eyes), as JSON and as a self-contained HTML
    page with charts. Memory stays at one row group plus the samples, whatever the table's size
    (see the module's docstring).
    """
    spec = plan.spec
    columns = list(spec.schema.names)
    root = Path(release_dir)
    out = Path(steward)
    real_rows = sum(open_parquet(path).metadata.num_rows for path in parquet_files(spec.data))
    chooser = np.random.default_rng(plan.seed)  # evaluation only: choosing *synthetic* rows to compare
    synthetic, synthetic_rows = _sample_synthetic(root / table_file, columns, chooser)
    matching = synthetic if synthetic.num_rows <= EXACT_MATCH_ROWS else \
        synthetic.take(pa.array(np.sort(chooser.choice(synthetic.num_rows, EXACT_MATCH_ROWS, replace=False))))
    quasi = list(spec.schema.quasi_identifiers)
    checks = bool(quasi) and real_rows >= 2 and synthetic_rows >= 1
    real_pass = _RealPass(spec.data, spec.schema, real_rows)
    exact = exact_match_share(real_pass, matching, columns) if checks else None  # the one read of the real rows
    real = real_pass.sample()
    evaluated = {
        "real_rows": real_rows, "real_rows_evaluated": real.num_rows,
        "synthetic_rows": synthetic_rows, "synthetic_rows_evaluated": synthetic.num_rows,
        "sampling": "real rows: uniform without replacement, by the secure source; synthetic rows: uniform "
                    "without replacement, by a generator seeded with the release's seed",
    }
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dprelease-risk") as pool:
        # The disclosure-risk checks (numpy, mostly without the GIL) run beside the utility scores
        # (mostly Python): the two cores at once.
        pending = pool.submit(_risk, real, synthetic, columns, quasi, checks, real_pass, plan.seed, exact,
                              {**evaluated, "exact_match": f"{matching.num_rows} synthetic rows against all "
                                                           f"{real_rows} real rows"})
        report = utility(real, synthetic, columns).to_dict()
        report["evaluated"] = evaluated
        write_internal(out, "utility.json", json.dumps(report, indent=2))
        write_internal(out, "input.json", json.dumps(_fingerprint(spec.data, real_rows), indent=2))
        audit = audit_from_json((root / "audit.json").read_text(encoding="utf-8"))
        histograms = cast("dict[str, Any]", report.pop("histograms"))
        truths = None
        if (root / STATISTICS_FILE).exists():  # the published statistics beside their true values (steward only)
            document = json.loads((root / STATISTICS_FILE).read_text(encoding="utf-8"))
            by = {c.name: (c.categories, c.on_unknown) for c in spec.schema.columns if c.type == "category"}
            truths = true_statistics(statistic_rows(document), document, real, by)
            write_internal(out, "statistics.json",
                           json.dumps({"evaluated": evaluated, "statistics": truths}, indent=2))

        def risk_drawn() -> dict[str, Any] | None:
            risk = pending.result()
            return risk if "dcr" in risk else None

        page = render_internal_html(audit, report, histograms, risk_drawn, truths)  # the risk section comes last
        write_internal(out, "risk.json", json.dumps(pending.result(), indent=2))
    write_internal(out, "report.html", page)
    get_run_logger().info("internal report (utility, disclosure risk) written")


def _risk(real: pa.Table, synthetic: pa.Table, columns: list[str], quasi: list[str], checks: bool,
          real_pass: _RealPass, seed: int, exact: float | None, evaluated: dict[str, Any]) -> dict[str, Any]:
    """``internal/risk.json``: the exact-match share ``exact``, distances to the closest record, k-anonymity."""
    if not quasi:
        return {"note": "the schema declares no quasi_identifiers"}
    if not checks:
        return {"note": "too few rows for the disclosure-risk checks"}
    reference = real if real.num_rows <= DCR_REFERENCE_ROWS else \
        real.take(pa.array(np.sort(real_pass.order[:DCR_REFERENCE_ROWS])))
    return {
        "exact_match_share": exact,
        "dcr": closest_record_distances(reference, synthetic, columns, sample=DCR_SAMPLE, seed=seed).to_dict(),
        "k_anonymity": k_anonymity_comparison(real, synthetic, quasi).to_dict(),
        "evaluated": {**evaluated, "dcr_reference_rows": reference.num_rows},
    }


def _fingerprint(data: Path, rows: int) -> dict[str, object]:
    """The input's name, SHA-256 and row count; a folder's SHA-256 is over its files' names and hashes."""
    if not data.is_dir():
        return {"file": data.name, "sha256": file_sha256(data), "rows": rows}
    files = [{"file": path.name, "sha256": file_sha256(path)} for path in parquet_files(data)]
    digest = hashlib.sha256("".join(f"{f['sha256']}  {f['file']}\n" for f in files).encode()).hexdigest()
    return {"folder": data.name, "sha256": digest, "rows": rows, "files": files}
