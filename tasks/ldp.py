"""Tasks of a local-DP collection: check each batch of reports, count the accepted ones, decode, publish.

Reports are already randomised on the devices (local DP): counts of reports are differentially private
by construction, so these tasks may be retried and their results persisted without weakening the
guarantee (unlike the central release's raw-data tasks). They still carry no report content into logs.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dprelease.dp.errors import InternalError
from dprelease.dp.local.estimators import consistent, estimate
from dprelease.dp.local.rappor import cohort_counts, decode
from dprelease.reports.charts import estimates_chart
from dprelease.schemas.ldp import Collection, CollectionError
from dprelease.tasks.staging import MANIFEST, file_entries, manifest_seal

DECODE_ALPHA = 0.1
DECODE_ERROR = "per-family two-stage"
"""RAPPOR decoding in the flow: E[values no one holds that are reported] <= 0.1 (``dp.local.rappor.two_stage``)."""

REQUIRED = {"GRR": ("value",), "SUE": ("bits",), "OUE": ("bits",), "OLH": ("seed", "value"),
            "RAPPOR": ("cohort", "bits")}

BITS = r"^[01]+\Z"
"""A bit vector: '0' and '1' only (``\\Z``, not ``$``: ``$`` also matches before a final newline)."""


def _is_string(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        return _is_string(kind.value_type)
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _is_integer(kind: pa.DataType) -> bool:
    return bool(pa.types.is_integer(kind))


def _is_identifier(kind: pa.DataType) -> bool:
    return _is_string(kind) or _is_integer(kind)


TYPES = {"report_id": (_is_identifier, "a string or integer"),
         "params": (_is_string, "a string"), "bits": (_is_string, "a string"),
         "value": (_is_integer, "an integer"), "seed": (_is_integer, "an integer"),
         "cohort": (_is_integer, "an integer")}
"""The Arrow type each report column must have (a float seed or cohort would be rounded into another report)."""


def _type_problems(schema: pa.Schema, collection: Collection) -> list[str]:
    """The columns of the collection's report format that are missing or of a wrong Arrow type (no values)."""
    problems = []
    for column in ("report_id", "params", *REQUIRED[collection.protocol]):
        index = schema.get_field_index(column)
        if index < 0:  # named as Great Expectations would (pyarrow refuses a repeated column)
            problems.append(f"column {column!r}: ColumnToExist")
            continue
        accepts, rule = TYPES[column]
        kind = schema.field(index).type
        if not accepts(kind):
            problems.append(f"column {column!r}: must be {rule} (is {kind})")
    return problems


@dataclass
class BatchCheck:
    """One batch's outcome: accepted, or refused with the rules it broke (columns and rules, no values)."""

    name: str
    rows: int
    problems: list[str] = field(default_factory=list)
    sha256: str = ""
    """The checked bytes' digest: :func:`aggregate` counts exactly these bytes, or refuses a batch changed since."""

    @property
    def accepted(self) -> bool:
        """Whether the batch's reports are used."""
        return not self.problems


def _expectations(collection: Collection) -> list[Any]:
    from great_expectations.expectations import (  # type: ignore[attr-defined]
        ExpectColumnToExist,
        ExpectColumnValueLengthsToEqual,
        ExpectColumnValuesToBeBetween,
        ExpectColumnValuesToBeInSet,
        ExpectColumnValuesToBeUnique,
        ExpectColumnValuesToMatchRegex,
        ExpectColumnValuesToNotBeNull,
        ExpectTableRowCountToBeBetween,
    )

    checks: list[Any] = [ExpectTableRowCountToBeBetween(min_value=1),
                         ExpectColumnToExist(column="report_id"), ExpectColumnValuesToNotBeNull(column="report_id"),
                         ExpectColumnValuesToBeUnique(column="report_id"),
                         ExpectColumnToExist(column="params"), ExpectColumnValuesToNotBeNull(column="params"),
                         ExpectColumnValuesToBeInSet(column="params", value_set=[collection.fingerprint()])]
    for column in REQUIRED[collection.protocol]:
        checks += [ExpectColumnToExist(column=column), ExpectColumnValuesToNotBeNull(column=column)]
    width = collection.width()
    if width is not None:
        checks += [ExpectColumnValueLengthsToEqual(column="bits", value=width),
                   ExpectColumnValuesToMatchRegex(column="bits", regex=BITS)]
    if collection.protocol == "GRR":
        checks.append(ExpectColumnValuesToBeBetween(column="value", min_value=0, max_value=collection.k - 1))
    if collection.protocol == "OLH":
        checks.append(ExpectColumnValuesToBeBetween(column="value", min_value=0,
                                                    max_value=collection.randomizer().g - 1))  # type: ignore[union-attr]
    if collection.protocol == "RAPPOR":
        assert collection.rappor is not None
        checks.append(ExpectColumnValuesToBeBetween(column="cohort", min_value=0, max_value=collection.rappor.m - 1))
    return checks


def _rule(expectation: Any) -> str:
    kind = type(expectation).__name__.removeprefix("Expect")
    column = getattr(expectation, "column", None)
    return f"column {column!r}: {kind}" if column else kind


CHECK_ROWS = 1 << 18
"""Reports validated at once: a batch of any size is checked in slices of at most this many rows."""
CHECK_CELLS = 1 << 26
"""Characters of bit vectors validated at once (64 MiB): wide reports (OUE over 10⁵ values) take fewer rows."""
ROW_COUNT = "TableRowCountToBeBetween"
UNIQUE = "column 'report_id': ColumnValuesToBeUnique"


def _open(path: Path) -> tuple[pq.ParquetFile, str]:
    """A batch and the SHA-256 of the bytes it is read from (one read: what is checked is what is hashed)."""
    data = path.read_bytes()
    return pq.ParquetFile(pa.BufferReader(data)), hashlib.sha256(data).hexdigest()


def _unreadable(err: Exception) -> str:
    return f"not a readable Parquet file ({type(err).__name__})"


def _check_file(path: Path, collection: Collection, validate: Callable[[Any], list[str]],
                seen: dict[str, str]) -> BatchCheck:
    """One batch's check, slice by slice; its report ids join ``seen`` when it is accepted."""
    try:
        parquet, digest = _open(path)
        schema, rows = parquet.schema_arrow, parquet.metadata.num_rows
    except (pa.ArrowInvalid, OSError) as err:
        return BatchCheck(path.name, 0, [_unreadable(err)])
    check = BatchCheck(path.name, rows, _type_problems(schema, collection), digest)
    if not check.accepted:
        return check
    if rows == 0:
        check.problems.append(ROW_COUNT)
        return check
    mine: set[str] = set()
    repeated, again = False, None
    try:
        for chunk in parquet.iter_batches(batch_size=max(1, min(CHECK_ROWS, CHECK_CELLS // (collection.width() or 1)))):
            check.problems += [rule for rule in validate(chunk.to_pandas()) if rule not in check.problems]
            for report in chunk.column("report_id").cast(pa.string()).to_pylist():
                repeated = repeated or report in mine
                again = again or seen.get(report)
                mine.add(report)
    except (pa.ArrowInvalid, OSError) as err:  # a damaged page after a sound footer: its row count is not believed
        return BatchCheck(path.name, 0, [_unreadable(err)], digest)
    if repeated and UNIQUE not in check.problems:  # two slices of one batch
        check.problems.append(UNIQUE)
    if check.accepted and again is not None:
        check.problems.append(f"column 'report_id': report ids already used in batch {again}")
    if check.accepted:
        seen.update(dict.fromkeys(mine, path.name))
    return check


def arrival_order(files: Sequence[Path], first: Sequence[str] = ()) -> list[Path]:
    """The batches in the order their report ids are claimed: ``first`` (accepted by earlier runs), then by arrival.

    Arrival is the file's modification time (then its name): a batch copied in later is later, whatever its name.
    """
    rank = {name: index for index, name in enumerate(first)}

    def arrived(path: Path) -> int:
        try:
            return path.lstat().st_mtime_ns
        except OSError:
            return 0

    return sorted(files, key=lambda p: (0, rank[p.name], 0, p.name) if p.name in rank else (1, 0, arrived(p), p.name))


def check_batches(collection: Collection, first: Sequence[str] = ()) -> list[BatchCheck]:
    """Validate every batch of the collection with Great Expectations; duplicates across batches refuse the later.

    Later is by :func:`arrival_order`: the batches earlier runs accepted (``first``, from the registry) keep their
    report ids, then new batches in order of arrival, never by file name.

    A batch is refused whole when it breaks any rule (wrong parameter fingerprint, a malformed bit vector,
    a value out of range, a missing column, a duplicate report id, no rows): its reports are not used, it is
    named and counted, and it stays where it is (nothing is deleted). Each batch is validated in slices of
    :data:`CHECK_ROWS` reports, so a huge batch needs no more memory than its file and one slice.
    """
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    files = arrival_order(list(collection.batches.glob("*.parquet")), first) if collection.batches.is_dir() else []
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    definition = (context.data_sources.add_pandas("ldp").add_dataframe_asset(collection.name)
                  .add_batch_definition_whole_dataframe("batch"))
    suite = gx.ExpectationSuite(name=f"ldp-{collection.name}")
    for expectation in _expectations(collection):
        suite.add_expectation(expectation)

    def validate(frame: Any) -> list[str]:
        result = definition.get_batch(batch_parameters={"dataframe": frame}).validate(
            suite, result_format={"result_format": "BOOLEAN_ONLY"})
        return [_rule(outcome.expectation_config.to_domain_obj()) for outcome in result.results
                if not outcome.success and outcome.expectation_config is not None]

    seen: dict[str, str] = {}
    out: list[BatchCheck] = []
    for path in files:
        if not path.name.isprintable():  # a newline or an escape sequence would reach the terminal and the logs
            out.append(BatchCheck(path.name.encode("unicode_escape").decode("ascii"), 0,
                                  ["file name must be printable (no control character)"]))
        elif not path.is_file():  # a folder would be read as a dataset, a pipe would block
            out.append(BatchCheck(path.name, 0, ["not a regular file"]))
        else:
            out.append(_check_file(path, collection, validate, seen))
    return out


def _bits(table: pa.Table, width: int) -> np.ndarray:
    joined = "".join(table.column("bits").cast(pa.string()).to_pylist()).encode("ascii")
    out = (np.frombuffer(joined, dtype=np.uint8) - ord("0")).reshape(-1, width)
    if out.size and out.max() > 1:
        raise InternalError("a bit vector other than 0/1 passed the batch checks")
    return out


CHUNK_CELLS = 1 << 24
"""Report bits decoded at once (16 MiB of uint8): memory stays bounded however many and wide the reports."""


def _chunks(collection: Collection, accepted: list[BatchCheck]) -> Iterator[pa.Table]:
    """The accepted batches, one at a time, as they were checked, in slices of at most :data:`CHUNK_CELLS` bits."""
    rows = max(1, CHUNK_CELLS // (collection.width() or 1))
    for check in accepted:
        parquet, digest = _open(collection.batches / check.name)
        if digest != check.sha256:
            raise CollectionError(f"batch {check.name}: changed since it was checked (replaced during the run); "
                                  "nothing was published: run again")
        for chunk in parquet.iter_batches(batch_size=rows):
            yield pa.Table.from_batches([chunk])


def aggregate(collection: Collection, accepted: list[BatchCheck]) -> dict[str, Any]:
    """Support counts (or RAPPOR's per-cohort bit counts) over the accepted batches, as they were checked.

    Batches are read and counted one by one, and bit vectors decoded in slices: a collection that grows
    by a batch a day is never held in memory whole.

    Raises:
        CollectionError: If a batch's bytes changed since it was checked (replaced while the run ran).
    """
    n = 0
    if collection.protocol == "RAPPOR":
        assert collection.rappor is not None
        counts = np.zeros((collection.rappor.m, collection.rappor.k), dtype=np.int64)
        per_cohort = np.zeros(collection.rappor.m, dtype=np.int64)
        for t in _chunks(collection, accepted):
            c, m = cohort_counts(_bits(t, collection.rappor.k), t.column("cohort").to_numpy(), collection.rappor)
            counts += c
            per_cohort += m
            n += t.num_rows
        return {"reports": n, "counts": counts, "per_cohort": per_cohort}
    protocol = collection.randomizer()
    support = np.zeros(collection.k, dtype=np.int64)
    for t in _chunks(collection, accepted):
        if collection.protocol == "GRR":
            support += protocol.support(t.column("value").to_numpy())
        elif collection.protocol == "OLH":
            support += protocol.support((t.column("seed").to_numpy(), t.column("value").to_numpy()))
        else:
            support += protocol.support(_bits(t, collection.k))  # type: ignore[arg-type]
        n += t.num_rows
    return {"reports": n, "support": support}


def estimates_table(collection: Collection, counts: dict[str, Any]) -> tuple[pa.Table, dict[str, Any]]:
    """The published estimates (one row per value) and the decoding's summary."""
    n = int(counts["reports"])
    values = list(collection.values)
    if collection.protocol == "RAPPOR":
        assert collection.rappor is not None
        decoded = decode(counts["counts"], counts["per_cohort"], values, collection.rappor, alpha=DECODE_ALPHA,
                         error=DECODE_ERROR)
        table = pa.table({"value": values, "estimate": decoded.counts, "std": decoded.std,
                          "p_value": decoded.p_values, "detected": list(decoded.detected),
                          "share": decoded.counts / max(n, 1)})
        return table, {"reports": n, "detected": int(sum(decoded.detected)), "explained_share": decoded.explained,
                       "method": decoded.method}
    protocol = collection.randomizer()
    p, q = protocol.support_probabilities
    result = estimate(counts["support"], n, p, q)
    table = pa.table({"value": values, "estimate": result.counts, "std": result.std, "low95": result.low,
                      "high95": result.high, "share": result.shares(),
                      "consistent_estimate": consistent(result.counts, n)})
    return table, {"reports": n, "method": "unbiased (C - n q*)/(p* - q*) with the exact plug-in variance; "
                                          "consistent_estimate (non-negative, summing to n) is post-processing "
                                          "published beside, never instead"}


def write_outputs(collection: Collection, target: Path, table: pa.Table, summary: dict[str, Any],
                  checks: list[BatchCheck]) -> None:
    """estimates.parquet, estimates.csv, chart.svg and audit.json into ``target`` (public; 0644)."""
    target.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, target / "estimates.parquet")
    table.to_pandas().to_csv(target / "estimates.csv", index=False)
    reports = max(summary["reports"], 1)
    shares = [float(x) for x in table.column("share").to_pylist()]
    intervals = None
    if "low95" in table.column_names:
        intervals = [(float(a) / reports, float(b) / reports) for a, b in
                     zip(table.column("low95").to_pylist(), table.column("high95").to_pylist(), strict=True)]
    title = f"{collection.name}: {collection.protocol}, {summary['reports']} reports (95 % intervals)"
    chart = estimates_chart(title, [str(v) for v in table.column("value").to_pylist()], shares, intervals,
                            f"Bar chart of the estimated share of reports per value: {title}")
    (target / "chart.svg").write_text(chart + "\n", encoding="utf-8")
    audit = {"format": "dprelease-ldp-audit/1", "collection": collection.name, "protocol": collection.protocol,
             "parameters": collection.parameters(), "fingerprint": collection.fingerprint(),
             "guarantee": collection.guarantee(), "estimation": summary,
             "batches": {"accepted": [c.name for c in checks if c.accepted],
                         "refused": {c.name: c.problems for c in checks if not c.accepted},
                         "reports_used": sum(c.rows for c in checks if c.accepted),
                         "reports_refused": sum(c.rows for c in checks if not c.accepted)}}
    (target / "audit.json").write_text(json.dumps(audit, indent=2, default=float) + "\n", encoding="utf-8")
    for path in target.iterdir():
        os.chmod(path, 0o644)


def write_manifest(collection: Collection, target: Path) -> None:
    """``manifest.json``: every file of ``target`` with its size and SHA-256, sealed by ``manifest_sha256``.

    Written last, over the folder as it is published; a re-run of the run id verifies it
    (:func:`tasks.ldp_registry.published_run`), as a re-run of a central release verifies its manifest.
    """
    manifest: dict[str, object] = {"format": "dprelease-ldp-manifest/1", "collection": collection.name,
                                   "fingerprint": collection.fingerprint(), "files": file_entries(target)}
    manifest["manifest_sha256"] = manifest_seal(manifest)
    (target / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.chmod(target / MANIFEST, 0o644)


def refused_summary(checks: list[BatchCheck]) -> str:
    """One line naming the refused batches and the first rule each broke."""
    refused = [c for c in checks if not c.accepted]
    return "; ".join(f"{c.name}: {c.problems[0]}" for c in refused)
