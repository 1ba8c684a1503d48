"""Validating a sensitive table against its schema, without ever keeping a value read from it.

Two layers. :func:`structural_problems` checks the Arrow schema only (column names and physical
types; no row is read). :func:`validate_table` then runs a Great Expectations 1.x suite generated
from the schema by :func:`build_suite` (column exists, not null, values in the declared categories,
values between the public bounds or finite, whole numbers) on the columns that are structurally sound.

Great Expectations results are reduced at once to :class:`ExpectationOutcome` records that keep the
expectation type, the column, the outcome, two counts and a rule text written from the schema;
``observed_value``, ``partial_unexpected_list`` and every other field that could hold a value from
the table are dropped. Counts go to the steward-only internal report (:meth:`ValidationReport.to_dict`),
never to :meth:`ValidationReport.failed_rules`.

Great Expectations takes seconds to import, so it is imported inside the functions that use it:
``import quality.validation`` stays cheap.
"""

from __future__ import annotations

import logging
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dprelease.dp.errors import InternalError
from dprelease.schemas.model import Column, TableSchema

if TYPE_CHECKING:
    import great_expectations as gx
    import pandas as pd
    from great_expectations.core.expectation_validation_result import ExpectationSuiteValidationResult
    from great_expectations.expectations.expectation import Expectation

__all__ = ["ExpectationOutcome", "Problem", "ValidationReport", "build_suite", "preload_great_expectations",
           "structural_problems", "validate_batches", "validate_table"]

RESULT_FORMAT: dict[str, Any] = {"result_format": "BASIC", "partial_unexpected_count": 0}
"""Counts only: no partial or full lists of unexpected values are requested."""

_RULE_KEY = "dprelease_rule"
_EXISTS = "expect_column_to_exist"
_FINITE = sys.float_info.max
_NOT_ARGUMENTS = {"id", "rendered_content", "notes", "meta"}  # what GE ignores when it looks for a duplicate

# Pandas masked dtypes for Arrow integers: nullable without turning into float64, and recognised
# by GE's type-list check by class name (GE cannot name an ``ArrowDtype`` in a type list).
_INTEGER_DTYPE_NAMES = (
    "Int8Dtype", "Int16Dtype", "Int32Dtype", "Int64Dtype",
    "UInt8Dtype", "UInt16Dtype", "UInt32Dtype", "UInt64Dtype",
    "int64",  # numpy int64: an Arrow integer column without nulls (see _fast_array)
)


@dataclass(frozen=True)
class Problem:
    """A structural problem: a declared column is missing, duplicated or of the wrong type.

    Attributes:
        column: The declared column's name.
        rule: The rule it breaks; may name an Arrow type (file metadata), never a value.
    """

    column: str
    rule: str

    def __str__(self) -> str:
        return f"column {self.column!r}: {self.rule}"


@dataclass(frozen=True)
class ExpectationOutcome:
    """What is kept of one Great Expectations result: no value from the table.

    Attributes:
        expectation_type: The GE expectation, e.g. ``expect_column_values_to_be_in_set``.
        column: The column it checks.
        success: Whether the check passed.
        rule: Human-readable rule, written from the schema (public bounds and category counts).
        element_count: Rows checked, or None for checks on the column as a whole.
        unexpected_count: Rows breaking the rule (nulls excluded except by the not-null check),
            or None for checks on the column as a whole.
        errored: True when GE could not evaluate the check (counted as a failure).
    """

    expectation_type: str
    column: str
    success: bool
    rule: str
    element_count: int | None = None
    unexpected_count: int | None = None
    errored: bool = False

    def line(self) -> str:
        """The failed-rule line: column and rule, no counts, no values."""
        suffix = " (the check could not be evaluated)" if self.errored else ""
        return f"column {self.column!r}: {self.rule}{suffix}"


@dataclass(frozen=True)
class ValidationReport:
    """The outcome of validating one table against its schema.

    Attributes:
        table: The schema's table name.
        structural: Problems with the Arrow schema (names and types).
        expectations: Outcomes of the Great Expectations suite, in suite order.
    """

    table: str
    structural: list[Problem] = field(default_factory=list)
    expectations: list[ExpectationOutcome] = field(default_factory=list)

    @property
    def success(self) -> bool:
        """True when there is no structural problem and every expectation passed."""
        return not self.structural and all(e.success for e in self.expectations)

    def failed_rules(self) -> list[str]:
        """One line per failed check, naming the column and the rule (no values, no counts).

        A missing column is named once although both the structural check and GE's
        column-exists expectation fail for it.
        """
        lines = [str(p) for p in self.structural]
        lines += [e.line() for e in self.expectations if not e.success]
        return list(dict.fromkeys(lines))

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form for the steward-only internal report (counts included)."""
        return {
            "table": self.table,
            "success": self.success,
            "structural": [asdict(p) for p in self.structural],
            "expectations": [asdict(e) for e in self.expectations],
        }


# ---------------------------------------------------------------------------------------------
# Structure (no rows read)


def _is_string(arrow_type: pa.DataType) -> bool:
    return bool(pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
                or pa.types.is_string_view(arrow_type))


_DECIMAL = re.compile(r"0|-?[1-9][0-9]*")
"""The decimal string of an integer: the categories an integer column's values can be."""


def _type_rule(column: Column, arrow_type: pa.DataType) -> str | None:
    """The type rule ``arrow_type`` breaks for ``column``, or None when it fits."""
    if column.type == "int":
        if not pa.types.is_integer(arrow_type):
            return f"must have an integer type (found {arrow_type})"
    elif column.type == "float":
        if not (pa.types.is_floating(arrow_type) or pa.types.is_integer(arrow_type)):
            return f"must have a floating-point or integer type (found {arrow_type})"
    elif not (_is_string(arrow_type) or pa.types.is_integer(arrow_type)
              or (pa.types.is_dictionary(arrow_type) and _is_string(arrow_type.value_type))):
        hint = ("; store a boolean as 0/1 integers (categories [0, 1]) or as text" if pa.types.is_boolean(arrow_type)
                else "")
        return f"must have a string, dictionary-of-string or integer type (found {arrow_type}){hint}"
    elif pa.types.is_integer(arrow_type) and not any(_DECIMAL.fullmatch(c) for c in column.categories):
        return (f"has an integer type ({arrow_type}) but no declared category is a plain integer code (integers "
                "are matched as decimal strings: 7 is '7', never '07'); declare the codes as integers, or store "
                "the column as strings")
    return None


def structural_problems(schema: TableSchema, arrow_schema: pa.Schema) -> list[Problem]:
    """Problems of a file's Arrow schema against the table schema; no data is read.

    Every declared column (derived ones too) must be present exactly once with a fitting
    physical type: an Arrow integer for ``int``; floating-point or integer for ``float``;
    string, large_string, string_view, dictionary-of-string or integer (7 is the category ``"7"``)
    for ``category``. Undeclared columns are ignored (duplicated ones included).

    Args:
        schema: The table schema.
        arrow_schema: The file's Arrow schema.

    Returns:
        The problems, in schema order; empty when the structure fits.
    """
    counts = Counter(arrow_schema.names)
    problems = []
    for column in schema.columns:
        found = counts[column.name]
        if found == 0:
            problems.append(Problem(column.name, "must be present"))
        elif found > 1:
            problems.append(Problem(column.name, f"must appear only once (found {found} columns with this name)"))
        else:
            rule = _type_rule(column, arrow_schema.field(column.name).type)
            if rule is not None:
                problems.append(Problem(column.name, rule))
    unit = schema.privacy_unit.id_column
    if unit is not None:
        found = counts[unit]
        if found != 1:
            problems.append(Problem(unit, "must be present exactly once (the privacy-unit id column)"))
        else:
            id_type = arrow_schema.field(unit).type
            if not (pa.types.is_integer(id_type) or _is_string(id_type)):
                problems.append(Problem(unit, "must be integers or strings (the privacy-unit id column)"))
    return problems


# ---------------------------------------------------------------------------------------------
# The expectation suite (public: generated from the schema only)


def _number(value: float, whole: bool) -> str:
    return str(int(value)) if whole or float(value).is_integer() else repr(float(value))


def build_suite(schema: TableSchema, *, checkable: Collection[str] | None = None) -> gx.ExpectationSuite:
    """The Great Expectations suite of a schema; each expectation carries its rule in ``meta``.

    Every declared column must exist. Columns in ``checkable`` (default: all) also get value
    checks: not null (non-nullable columns); values in the declared categories or ``values:`` set
    (GE's in-set check ignores nulls); values between the public bounds (numeric columns with
    public bounds) or finite (float columns without them); whole numbers (``int`` columns:
    a nullable integer dtype, see :func:`validate_table`).

    Args:
        schema: The table schema.
        checkable: Columns whose values are checked (structurally sound ones).

    Returns:
        A suite that is not attached to any Data Context.
    """
    _quiet_great_expectations()
    import great_expectations as gx
    from great_expectations.expectations.core.expect_column_to_exist import ExpectColumnToExist
    from great_expectations.expectations.core.expect_column_values_to_be_between import (
        ExpectColumnValuesToBeBetween,
    )
    from great_expectations.expectations.core.expect_column_values_to_be_in_set import ExpectColumnValuesToBeInSet
    from great_expectations.expectations.core.expect_column_values_to_be_in_type_list import (
        ExpectColumnValuesToBeInTypeList,
    )
    from great_expectations.expectations.core.expect_column_values_to_not_be_null import ExpectColumnValuesToNotBeNull

    # Handed to the suite at once: ``add_expectation`` compares each one with every one added before
    # (quadratic in the columns). The same duplicates as GE's (equal type and arguments) are dropped here.
    expectations: dict[tuple[str, str], Expectation] = {}

    def add(expectation: Expectation, rule: str) -> None:
        expectation.meta = {_RULE_KEY: rule}
        key = (expectation.expectation_type, repr(sorted(expectation.dict(exclude=_NOT_ARGUMENTS).items())))
        expectations.setdefault(key, expectation)

    for column in schema.columns:
        name = column.name
        add(ExpectColumnToExist(column=name), "must be present")
        if checkable is not None and name not in checkable:
            continue
        if not column.nullable:
            add(ExpectColumnValuesToNotBeNull(column=name), "values must not be null")
        if column.type == "category":
            count = len(column.categories)
            noun = "category" if count == 1 else "categories"
            add(ExpectColumnValuesToBeInSet(column=name, value_set=list(column.categories)),
                f"values must be in the {count} declared {noun}")
            continue
        if column.bins is not None and column.bins.kind == "values":  # a public value set: nothing in between
            add(ExpectColumnValuesToBeInSet(column=name, value_set=list(column.bins.points)),
                f"values must be one of the {len(column.bins.points)} declared values")
        if column.has_public_bounds:
            assert column.min is not None and column.max is not None
            whole = column.type == "int"
            add(ExpectColumnValuesToBeBetween(column=name, min_value=column.min, max_value=column.max),
                f"values must be between {_number(column.min, whole)} and {_number(column.max, whole)}")
        elif column.type == "float":
            add(ExpectColumnValuesToBeBetween(column=name, min_value=-_FINITE, max_value=_FINITE),
                "values must be finite numbers")
        if column.type == "int":
            add(ExpectColumnValuesToBeInTypeList(column=name, type_list=list(_INTEGER_DTYPE_NAMES)),
                "values must be whole numbers")
    return gx.ExpectationSuite(name=f"dprelease-{schema.table}", expectations=list(expectations.values()))


# ---------------------------------------------------------------------------------------------
# Running the suite


def preload_great_expectations() -> None:
    """Import Great Expectations now (quietly): a caller with time to spare may do so in a thread.

    The import takes about two seconds; the validation task imports it anyway, and waits for an
    import already under way in another thread (Python's per-module import lock).
    """
    _quiet_great_expectations()
    import great_expectations  # noqa: F401


def _quiet_great_expectations() -> None:
    """Hold GE's logging at WARNING before it is imported: its DEBUG/INFO output is copious."""
    gx_logger = logging.getLogger("great_expectations")
    if gx_logger.getEffectiveLevel() < logging.WARNING:
        gx_logger.setLevel(logging.WARNING)


def _canonical(chunked: pa.ChunkedArray, column: Column) -> pa.ChunkedArray:
    """One type per kind: NFC strings for categories (7 becomes "7"), float64 for floats, integers unchanged."""
    if column.type == "category":
        return pc.utf8_normalize(chunked.cast(pa.string()), "NFC")
    if pa.types.is_floating(chunked.type):
        return chunked.cast(pa.float64())
    return chunked


def _fast_array(chunked: pa.ChunkedArray, column: Column) -> Any:
    """A column as GE's vectorised paths want it, or None when only the exact slow path is safe.

    GE's between check is vectorised only for numpy ``int``/``float`` dtypes (otherwise it calls
    a Python function per value), and its null, in-set and type checks are fastest on numpy and
    categorical data. Conversions that would change a result are not made: an integer column
    with nulls stays a masked ``Int64`` (numpy has no null integer), a float column holding a NaN
    stays an ``ArrowDtype`` (numpy would make the NaN a null, and a NaN must fail the bounds check).
    """
    import pandas as pd

    if column.type == "category":  # in NFC, as counted (data written in NFD is its declared category)
        encoded = pc.dictionary_encode(chunked.cast(pa.string())).combine_chunks()
        labels: dict[str, int] = {}
        nfc = [labels.setdefault(unicodedata.normalize("NFC", v), len(labels)) for v in encoded.dictionary.to_pylist()]
        codes = np.asarray(encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
        return pd.Categorical.from_codes(np.array([*nfc, -1], dtype=np.int64)[codes],
                                         categories=pd.Index(list(labels), dtype=object))
    if pa.types.is_integer(chunked.type):
        if chunked.null_count or chunked.type == pa.uint64():
            return None
        return np.asarray(chunked.to_numpy(), dtype=np.int64)
    if pa.types.is_floating(chunked.type):
        values = chunked.cast(pa.float64())
        if pc.any(pc.is_nan(values)).as_py():
            return None
        return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float64)  # a null becomes NaN
    return None


def _dataframe(table: pa.Table, schema: TableSchema, checkable: Collection[str]) -> pd.DataFrame:
    """The frame GE sees: checkable columns converted; other present ones as empty placeholders.

    Checkable columns take GE's vectorised paths where that is exact (:func:`_fast_array`):
    categories as pandas categoricals, integers without nulls as int64, floats without NaN as
    float64. Otherwise integers become pandas masked dtypes (``Int64``...), so nulls do not turn
    them into float64, and floats stay ``ArrowDtype`` (a float NaN stays distinct from a null,
    and so fails a bounds check instead of passing as missing). A column that is present but
    unsound (wrong type, duplicated) gets an all-null object placeholder so that GE's
    column-exists check reflects the file; its values are never checked or converted.
    """
    import pandas as pd

    masked = {
        pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(),
        pa.int64(): pd.Int64Dtype(), pa.uint8(): pd.UInt8Dtype(), pa.uint16(): pd.UInt16Dtype(),
        pa.uint32(): pd.UInt32Dtype(), pa.uint64(): pd.UInt64Dtype(),
    }

    def dtype_for(arrow_type: pa.DataType) -> Any:
        return masked.get(arrow_type) or pd.ArrowDtype(arrow_type)

    index = pd.RangeIndex(table.num_rows)
    columns: dict[str, Any] = {}
    present = set(table.column_names)
    for column in schema.columns:
        if column.name in checkable:
            chunked = table[column.name]
            fast = _fast_array(chunked, column)
            if fast is not None:
                columns[column.name] = pd.Series(fast, index=index, copy=False)
            else:
                slow = pa.table([_canonical(chunked, column)], names=[column.name])
                columns[column.name] = slow.to_pandas(types_mapper=dtype_for)[column.name]
        elif column.name in present:
            columns[column.name] = pd.Series([None] * table.num_rows, index=index, dtype=object)
    return pd.DataFrame(columns, index=index)


def _count(result: dict[str, Any], key: str) -> int | None:
    value = result.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _raised(exception_info: Any) -> bool:
    """Whether GE could not evaluate a check (its messages and tracebacks are never kept).

    GE reports an expectation's own exception as ``{"raised_exception": ..., ...}`` and failed
    metrics as ``{metric_id: exception_info, ...}``.
    """
    if not isinstance(exception_info, dict) or not exception_info:
        return False
    if "raised_exception" in exception_info:
        return bool(exception_info["raised_exception"])
    return True


def _column_of(expectation: Expectation) -> str:
    return str(expectation.configuration.kwargs.get("column"))


def _outcomes(suite: gx.ExpectationSuite, results: ExpectationSuiteValidationResult) -> list[ExpectationOutcome]:
    """Reduce GE results to outcomes in suite order, keeping counts and never a value."""
    order = {(e.expectation_type, _column_of(e)): i for i, e in enumerate(suite.expectations)}
    outcomes = []
    for res in results.results:
        config = res.expectation_config
        if config is None:
            raise InternalError("a Great Expectations result has no expectation configuration")
        column = str(config.kwargs.get("column"))
        errored = _raised(res.exception_info)
        raw = res.result if isinstance(res.result, dict) else {}
        outcomes.append(ExpectationOutcome(
            expectation_type=str(config.type),
            column=column,
            success=bool(res.success) and not errored,
            rule=str((config.meta or {}).get(_RULE_KEY, config.type)),
            element_count=_count(raw, "element_count"),
            unexpected_count=_count(raw, "unexpected_count"),
            errored=errored,
        ))
    outcomes.sort(key=lambda o: order.get((o.expectation_type, o.column), len(order)))
    return outcomes


BATCH_ROWS = 1_000_000
"""Rows GE validates at once: an in-memory table is cut into slices of this many rows, so GE's
frames (and its copies of them) stay bounded whatever the table's size."""


def validate_table(table: pa.Table, schema: TableSchema) -> ValidationReport:
    """Validate a table against its schema: structure, then a Great Expectations suite.

    The table is validated in slices of :data:`BATCH_ROWS` rows (:func:`validate_batches`).

    Args:
        table: The sensitive table (extra columns are ignored).
        schema: The table schema.

    Returns:
        The report; ``success`` is False when any structural check or expectation fails.
    """
    slices = (table.slice(start, BATCH_ROWS) for start in range(0, table.num_rows, BATCH_ROWS))
    return validate_batches(slices, schema, table.schema)


def validate_batches(batches: Iterable[pa.Table], schema: TableSchema, arrow_schema: pa.Schema) -> ValidationReport:
    """Validate a table given batch by batch (e.g. its Parquet row groups); memory stays per batch.

    Structure is checked once against ``arrow_schema``. The suite (:func:`build_suite`) then runs
    in one fresh ephemeral Data Context on a pandas frame of each batch's structurally sound
    columns (a missing or mistyped column is reported, not fatal), and the outcomes are merged:
    a check succeeds when it succeeds on every batch; its counts are the sums over the batches,
    so the report is the one a single batch of the whole table would give. A table without rows
    is validated as one empty batch. Results are requested without value lists and reduced to
    :class:`ExpectationOutcome` records.

    Args:
        batches: The table's rows, batch by batch, every batch with ``arrow_schema``.
        schema: The table schema.
        arrow_schema: The Arrow schema of every batch.

    Returns:
        The report; ``success`` is False when any structural check or expectation fails.
    """
    structural = structural_problems(schema, arrow_schema)
    unsound = {p.column for p in structural}
    checkable = {c.name for c in schema.columns} - unsound

    _quiet_great_expectations()
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    batch_definition = (
        context.data_sources.add_pandas("dprelease")
        .add_dataframe_asset(schema.table)
        .add_batch_definition_whole_dataframe("whole-table")
    )
    suite = build_suite(schema, checkable=checkable)
    merged: list[ExpectationOutcome] | None = None
    for table in batches:
        if table.num_rows == 0 and merged is not None:
            continue
        batch = batch_definition.get_batch(batch_parameters={"dataframe": _dataframe(table, schema, checkable)})
        outcomes = _outcomes(suite, batch.validate(suite, result_format=dict(RESULT_FORMAT)))
        merged = outcomes if merged is None else _merge(merged, outcomes)
    if merged is None:
        empty = arrow_schema.empty_table()
        batch = batch_definition.get_batch(batch_parameters={"dataframe": _dataframe(empty, schema, checkable)})
        merged = _outcomes(suite, batch.validate(suite, result_format=dict(RESULT_FORMAT)))
    return ValidationReport(schema.table, structural, merged)


def _sum(a: int | None, b: int | None) -> int | None:
    return None if a is None and b is None else (a or 0) + (b or 0)


def _merge(first: list[ExpectationOutcome], second: list[ExpectationOutcome]) -> list[ExpectationOutcome]:
    """Outcomes of two batches (same suite, same order) as one: all must pass; counts add up."""
    if [(o.expectation_type, o.column) for o in first] != [(o.expectation_type, o.column) for o in second]:
        raise InternalError("Great Expectations returned different checks for two batches of one table")
    return [replace(a, success=a.success and b.success, errored=a.errored or b.errored,
                    element_count=_sum(a.element_count, b.element_count),
                    unexpected_count=_sum(a.unexpected_count, b.unexpected_count))
            for a, b in zip(first, second, strict=True)]
