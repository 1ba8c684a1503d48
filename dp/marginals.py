"""Public encodings of columns, marginal counting, and noisy marginals.

Every column is turned into integer codes from its *public* domain: a category's index in the
declared list, a numeric value's bin between public (or SVT-discovered) bounds, and one extra code
for null where the schema allows nulls. Counting a marginal is then a ``bincount`` over combined
codes; counts of several row groups (or partitions) simply add up.

Row-level handling keeps the sensitivity of every marginal at one row: a value outside the bounds
is clamped into the first or last bin; a row with a null (or NaN) in a non-nullable column, or a
category outside the domain with ``on_unknown: drop``, is dropped. Each of these is a function of
one row alone, so adding or removing a row still changes each histogram by at most one count.

>>> d = numeric_domain("age", "int", 17, 20, Binning("width", 1), nullable=False)
>>> d.labels()
('17', '18', '19', '20')
>>> encode_numeric(np.array([16.0, 17.0, 20.0, 99.0]), d).tolist()
[0, 0, 3, 3]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from dp.accounting import Measurement
from dp.errors import DomainError, InternalError, ParameterError

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Binning:
    """How a numeric range is cut: ``width`` W, ``count`` N equal bins, or ``log`` (doubling widths)."""

    kind: Literal["width", "count", "log"]
    value: float = 0


@dataclass(frozen=True)
class ColumnDomain:
    """The public integer encoding of one column.

    Attributes:
        name: Column name.
        kind: ``category``, ``int`` or ``float``.
        categories: Declared categories (category columns).
        edges: Bin edges of a numeric column, ascending; bin i is [edges[i], edges[i+1]), the last
            bin is closed. For int columns the edges are whole numbers and the last edge is max + 1.
        nullable: Whether the last code stands for null.
    """

    name: str
    kind: Literal["category", "int", "float"]
    categories: tuple[str, ...] = ()
    edges: tuple[float, ...] = ()
    nullable: bool = False

    @property
    def bins(self) -> int:
        """Number of non-null codes."""
        return len(self.categories) if self.kind == "category" else len(self.edges) - 1

    @property
    def size(self) -> int:
        """Number of codes, null included."""
        return self.bins + (1 if self.nullable else 0)

    @property
    def null_code(self) -> int | None:
        """The code of null, or None."""
        return self.bins if self.nullable else None

    def labels(self) -> tuple[str, ...]:
        """Human-readable label of every code (for published marginals)."""
        if self.kind == "category":
            out = list(self.categories)
        elif self.kind == "int":
            out = []
            for lo, hi in zip(self.edges[:-1], self.edges[1:], strict=True):
                a, b = int(lo), int(hi) - 1
                out.append(str(a) if a == b else f"{a}-{b}")
        else:
            out = [f"[{lo:g}, {hi:g})" for lo, hi in zip(self.edges[:-1], self.edges[1:], strict=True)]
        if self.nullable:
            out.append("<null>")
        return tuple(out)


def category_domain(name: str, categories: Sequence[str], *, nullable: bool) -> ColumnDomain:
    """The domain of a category column."""
    if not categories:
        raise ParameterError(f"column {name!r}: categories must not be empty")
    return ColumnDomain(name, "category", categories=tuple(categories), nullable=nullable)


def numeric_domain(
    name: str, kind: Literal["int", "float"], low: float, high: float, binning: Binning, *, nullable: bool
) -> ColumnDomain:
    """The domain of a numeric column binned inside [low, high] (public or DP-derived bounds)."""
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ParameterError(f"column {name!r}: bounds ({low}, {high}) must be finite with min below max")
    top = high + 1 if kind == "int" else high  # int bins are half-open over whole numbers
    if kind == "int":
        low, top = math.floor(low), math.floor(high) + 1
    if binning.kind == "width":
        width = binning.value
        count = max(1, math.ceil((top - low) / width))
        edges = [low + i * width for i in range(count)] + [top]
    elif binning.kind == "count":
        count = int(binning.value)
        if kind == "int":
            count = min(count, int(top - low))
            edges = sorted({low + math.floor(i * (top - low) / count) for i in range(count)} | {top})
        else:
            edges = list(np.linspace(low, top, count + 1))
    elif binning.kind == "log":
        # {low}, then bins doubling in width: [low+1, low+2), [low+2, low+4), ...
        edges, offset = [low], 1.0
        while low + offset < top:
            edges.append(low + offset)
            offset *= 2
        edges.append(top)
    else:  # pragma: no cover
        raise ParameterError(f"column {name!r}: unknown binning {binning.kind!r}")
    return ColumnDomain(name, kind, edges=tuple(float(e) for e in edges), nullable=nullable)


def encode_numeric(values: FloatArray, domain: ColumnDomain) -> IntArray:
    """Bin codes of finite or infinite values, clamped into the first/last bin (NaN not allowed)."""
    inner = np.asarray(domain.edges[1:-1], dtype=np.float64)
    return np.searchsorted(inner, values, side="right").astype(np.int64)


@dataclass
class RowHandling:
    """Counts of rows changed by row-level handling: internal to the steward, never published."""

    dropped_null: dict[str, int] = field(default_factory=dict)
    dropped_unknown: dict[str, int] = field(default_factory=dict)
    mapped_unknown: dict[str, int] = field(default_factory=dict)
    clamped: dict[str, int] = field(default_factory=dict)
    rows_in: int = 0
    rows_kept: int = 0

    def add(self, other: RowHandling) -> None:
        """Accumulate another row group's counts."""
        for name in ("dropped_null", "dropped_unknown", "mapped_unknown", "clamped"):
            mine, theirs = getattr(self, name), getattr(other, name)
            for key, value in theirs.items():
                mine[key] = mine.get(key, 0) + value
        self.rows_in += other.rows_in
        self.rows_kept += other.rows_kept


@dataclass(frozen=True)
class ColumnRule:
    """Row-level rules of one column: where unknown categories go."""

    on_unknown: str = "drop"


def _as_float(array: pa.ChunkedArray | pa.Array) -> tuple[FloatArray, BoolArray]:
    """Values as float64 and a missing mask (null, or NaN in a float column)."""
    chunked = array if isinstance(array, pa.ChunkedArray) else pa.chunked_array([array])
    missing = np.asarray(chunked.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    values = np.asarray(
        pc.cast(chunked, pa.float64(), safe=False).fill_null(0).to_numpy(zero_copy_only=False), dtype=np.float64
    )
    missing |= np.isnan(values)
    return values, missing


def encode_table(
    table: pa.Table, domains: Sequence[ColumnDomain], rules: Mapping[str, ColumnRule]
) -> tuple[dict[str, IntArray], RowHandling]:
    """Encode the measured columns of one row group into codes, applying row-level handling.

    Returns:
        Codes of the kept rows per column, and the (internal) row-handling counts.

    Raises:
        DomainError: If a declared column is missing (a structural error, checked earlier).
    """
    handling = RowHandling(rows_in=table.num_rows)
    keep = np.ones(table.num_rows, dtype=bool)
    codes: dict[str, IntArray] = {}
    for domain in domains:
        if domain.name not in table.column_names:
            raise DomainError(f"column {domain.name!r} is missing from the table", column=domain.name)
        column = table.column(domain.name)
        if domain.kind == "category":
            code, missing, unknown = _encode_category(column, domain)
            target = rules.get(domain.name, ColumnRule()).on_unknown
            if unknown.any():
                if target == "drop":
                    handling.dropped_unknown[domain.name] = int((unknown & keep).sum())
                    keep &= ~unknown
                else:
                    handling.mapped_unknown[domain.name] = int((unknown & keep).sum())
                    code[unknown] = domain.categories.index(target)
        else:
            values, missing = _as_float(column)
            code = encode_numeric(values, domain)
            out = ~missing & ((values < domain.edges[0]) | (values > domain.edges[-1]) | (
                (values == domain.edges[-1]) & (domain.kind == "int")))
            if out.any():
                handling.clamped[domain.name] = int(out.sum())
        if missing.any():
            if domain.nullable:
                assert domain.null_code is not None
                code[missing] = domain.null_code
            else:
                handling.dropped_null[domain.name] = int((missing & keep).sum())
                keep &= ~missing
        codes[domain.name] = code
    handling.rows_kept = int(keep.sum())
    return {name: c[keep] for name, c in codes.items()}, handling


def _encode_category(column: pa.ChunkedArray, domain: ColumnDomain) -> tuple[IntArray, BoolArray, BoolArray]:
    if pa.types.is_dictionary(column.type):
        column = pc.cast(column, pa.string())
    lookup = pa.array(domain.categories, type=pa.string())
    index = pc.index_in(pc.cast(column, pa.string()), value_set=lookup)
    missing = np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    found = np.asarray(index.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    code = np.asarray(index.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    unknown = ~found & ~missing
    return code, missing, unknown


def marginal_key(columns: Sequence[str]) -> str:
    """The query name of a marginal, e.g. ``marginal(age,income)``."""
    return f"marginal({','.join(columns)})"


def count_marginal(
    codes: Mapping[str, IntArray], domains: Mapping[str, ColumnDomain], columns: Sequence[str]
) -> IntArray:
    """The flattened contingency table of ``columns`` (row-major in the given column order)."""
    flat: IntArray | None = None
    size = 1
    for name in columns:
        domain = domains[name]
        code = codes[name]
        flat = code.copy() if flat is None else flat * domain.size + code
        size *= domain.size
    if flat is None:
        raise InternalError("count_marginal needs at least one column")
    return np.bincount(flat, minlength=size).astype(np.int64)


def count_all(
    batches: Iterable[pa.Table],
    domains: Sequence[ColumnDomain],
    rules: Mapping[str, ColumnRule],
    workload: Sequence[tuple[str, ...]],
) -> tuple[dict[tuple[str, ...], IntArray], RowHandling]:
    """Map-reduce: encode each row group, count every marginal of the workload, sum.

    Returns:
        Exact counts per marginal (raw: never leaves the release except through a mechanism)
        and the (internal) row-handling counts.
    """
    by_name = {d.name: d for d in domains}
    totals: dict[tuple[str, ...], IntArray] = {
        cols: np.zeros(int(np.prod([by_name[c].size for c in cols])), dtype=np.int64) for cols in workload
    }
    handling = RowHandling()
    for batch in batches:
        codes, part = encode_table(batch, domains, rules)
        handling.add(part)
        for cols in workload:
            totals[cols] += count_marginal(codes, by_name, cols)
    return totals, handling


@dataclass(frozen=True)
class NoisyMarginal:
    """A noisy contingency table: a DP output, safe to publish and to post-process.

    Attributes:
        columns: The measured columns, in axis order.
        shape: Domain size of each column.
        counts: Noisy counts, flattened row-major; may be negative before post-processing.
        measurement: The mechanism, scale and booked loss that produced it.
    """

    columns: tuple[str, ...]
    shape: tuple[int, ...]
    counts: IntArray
    measurement: Measurement

    def __post_init__(self) -> None:
        if int(np.prod(self.shape)) != len(self.counts):
            raise InternalError("NoisyMarginal: counts do not match the shape")

    @property
    def variance(self) -> float:
        """Noise variance of each cell."""
        std = self.measurement.std
        if std is None:
            raise InternalError("NoisyMarginal without a noise standard deviation")
        return std * std

    def table(self) -> npt.NDArray[np.int64]:
        """The counts as an array of ``shape``."""
        return self.counts.reshape(self.shape)
