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

import itertools
import math
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from dprelease.dp.errors import DomainError, InternalError, ParameterError
from dprelease.dp.measurement.spikes import with_spikes

IntArray = npt.NDArray[np.int64]
NULL_MARGINAL_LABEL = "<null>"
"""The label of null in a published marginal (a nullable category column may not declare it as a category)."""
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Binning:
    """How a numeric range is cut: ``width`` W, ``count`` N equal bins, ``log`` (doubling widths), or ``quantiles``.

    ``quantiles`` N: about N bins of equal mass at DP quantiles, released by the bounds stage
    (:func:`dp.statistics.groups.quantile_edges`); a value holding a quantile twice gets a bin of its own.
    ``values``: a finite public value set (``points``), one bin per value, decoded to exactly that value.
    """

    kind: Literal["width", "count", "log", "quantiles", "values"]
    value: float = 0
    points: tuple[float, ...] = ()


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
        points: Whether each bin stands for its lower edge alone (a public value set): decoded exactly.
    """

    name: str
    kind: Literal["category", "int", "float"]
    categories: tuple[str, ...] = ()
    edges: tuple[float, ...] = ()
    nullable: bool = False
    points: bool = False

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
            out.append(NULL_MARGINAL_LABEL)
        return tuple(out)


def category_domain(name: str, categories: Sequence[str], *, nullable: bool) -> ColumnDomain:
    """The domain of a category column."""
    if not categories:
        raise ParameterError(f"column {name!r}: categories must not be empty")
    return ColumnDomain(name, "category", categories=tuple(categories), nullable=nullable)


def numeric_domain(
    name: str, kind: Literal["int", "float"], low: float, high: float, binning: Binning, *, nullable: bool,
    spikes: Sequence[float] = (),
) -> ColumnDomain:
    """The domain of a numeric column binned inside [low, high] (public or DP-derived bounds).

    Each of ``spikes`` (public values) gets a bin of its own: [s, s + 1) for an int column, [s, next double)
    for a float one.
    """
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
    elif binning.kind == "log" and low < 0 < top:
        # A signed range is anchored at zero: [0, 1) alone, doubling widths above it and, mirrored, below it
        # (..., [-4, -2), [-2, -1), [-1, 0)), so zero and small values never share a bin with the far tail.
        points, offset = {low, 0.0, 1.0 if 1.0 < top else top, top}, 1.0
        while offset < max(-low, top):
            for point in (offset, -offset):
                if low < point < top:
                    points.add(point)
            offset *= 2
        edges = sorted(points)
    elif binning.kind == "log":
        # {low}, then bins doubling in width: [low+1, low+2), [low+2, low+4), ...
        edges, offset = [low], 1.0
        while low + offset < top:
            edges.append(low + offset)
            offset *= 2
        edges.append(top)
    elif binning.kind == "quantiles":
        raise ParameterError(f"column {name!r}: quantile bins come from the bounds stage (edges_domain)")
    elif binning.kind == "values":
        # One bin per public value, [v_i, v_(i+1)); a value between two declared ones is counted with the
        # one below (clamped like any out-of-range value); each bin is decoded to its value exactly.
        declared = sorted(float(v) for v in binning.points)
        after = declared[-1] + 1.0 if kind == "int" else math.nextafter(declared[-1], math.inf)
        return ColumnDomain(name, kind, edges=(*declared, after), nullable=nullable, points=True)
    else:  # pragma: no cover
        raise ParameterError(f"column {name!r}: unknown binning {binning.kind!r}")
    return ColumnDomain(name, kind, edges=with_spikes(edges, spikes, kind), nullable=nullable)



def edges_domain(name: str, kind: Literal["int", "float"], edges: Sequence[float], *, nullable: bool) -> ColumnDomain:
    """The domain of a numeric column from released bin edges (DP outputs): strictly ascending, at least two."""
    points = [float(e) for e in edges]
    ascending = all(a < b for a, b in itertools.pairwise(points))
    if len(points) < 2 or any(not math.isfinite(e) for e in points) or not ascending:
        raise ParameterError(f"column {name!r}: bin edges must be at least two finite, strictly ascending numbers")
    if kind == "int" and any(not e.is_integer() for e in points):
        raise ParameterError(f"column {name!r}: bin edges of an int column must be whole numbers")
    return ColumnDomain(name, kind, edges=tuple(points), nullable=nullable)


def encode_numeric(values: FloatArray, domain: ColumnDomain) -> IntArray:
    """Bin codes of finite or infinite values, clamped into the first/last bin (NaN not allowed)."""
    inner = np.asarray(domain.edges[1:-1], dtype=np.float64)
    return np.searchsorted(inner, values, side="right").astype(np.int64)


def _code_dtype(size: int) -> np.dtype[np.signedinteger[Any]]:
    """The narrowest signed integer type that holds the codes ``0 .. size - 1``.

    >>> [str(_code_dtype(n)) for n in (2, 128, 129, 40_000)]
    ['int8', 'int8', 'int16', 'int32']
    """
    for dtype in (np.int8, np.int16, np.int32):
        if size - 1 <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


# Integer columns of an int domain are binned by table lookup when the bounds span at most this
# many whole numbers (one byte or two per entry): a gather instead of a binary search per value.
_LOOKUP_SPAN = 1 << 21
_EXACT_FLOAT = 2.0**53


@lru_cache(maxsize=32)
def _bin_lookup(domain: ColumnDomain) -> npt.NDArray[np.signedinteger[Any]] | None:
    """Code of every whole number in [edges[0], edges[-1] - 1], or None when lookup does not apply.

    The table gives exactly the codes of ``encode_numeric`` for integer values: with whole, strictly
    ascending edges exact in float64, the whole numbers of [edges[i], edges[i+1]) are those with i
    inner edges at or below them, and every integer below (above) the range falls in the first
    (last) bin. ``test_int_lookup_table_is_the_binary_search_at_every_whole_number`` checks it.
    """
    edges = domain.edges
    if domain.kind != "int" or len(edges) < 2 or edges[-1] - edges[0] > _LOOKUP_SPAN:
        return None
    if any(not float(e).is_integer() or abs(e) > _EXACT_FLOAT for e in edges):
        return None
    if any(a >= b for a, b in itertools.pairwise(edges)):
        return None
    widths = [int(b) - int(a) for a, b in itertools.pairwise(edges)]
    table = np.repeat(np.arange(domain.bins, dtype=_code_dtype(domain.size)), widths)
    table.flags.writeable = False
    return table


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


Codes = npt.NDArray[np.signedinteger[Any]]


def encode_table(
    table: pa.Table, domains: Sequence[ColumnDomain], rules: Mapping[str, ColumnRule]
) -> tuple[dict[str, IntArray], RowHandling]:
    """Encode the measured columns of one row group into codes, applying row-level handling.

    Returns:
        Codes of the kept rows per column, and the (internal) row-handling counts.

    Raises:
        DomainError: If a declared column is missing (a structural error, checked earlier).
    """
    codes, handling = _encode_compact(table, domains, rules)
    return {name: code.astype(np.int64) for name, code in codes.items()}, handling


def _encode_compact(
    table: pa.Table, domains: Sequence[ColumnDomain], rules: Mapping[str, ColumnRule]
) -> tuple[dict[str, Codes], RowHandling]:
    """``encode_table`` with each column's codes in the narrowest integer type of its domain.

    Masks are None when no row is concerned, so the common case (nothing dropped) copies nothing.
    """
    handling = RowHandling(rows_in=table.num_rows)
    keep: BoolArray | None = None  # None: every row kept so far
    codes: dict[str, Codes] = {}
    for domain in domains:
        if domain.name not in table.column_names:
            raise DomainError(f"column {domain.name!r} is missing from the table", column=domain.name)
        column = table.column(domain.name)
        if domain.kind == "category":
            code, missing, unknown = encode_category(column, domain)
            if unknown is not None:
                target = rules.get(domain.name, ColumnRule()).on_unknown
                if target == "drop":
                    handling.dropped_unknown[domain.name] = _kept(unknown, keep)
                    keep = _drop(keep, unknown)
                else:
                    handling.mapped_unknown[domain.name] = _kept(unknown, keep)
                    code[unknown] = domain.categories.index(target)
        else:
            code, missing, clamped = _encode_number(column, domain)
            if clamped:
                handling.clamped[domain.name] = clamped
        if missing is not None:
            if domain.nullable:
                assert domain.null_code is not None
                code[missing] = domain.null_code
            else:
                handling.dropped_null[domain.name] = _kept(missing, keep)
                keep = _drop(keep, missing)
        codes[domain.name] = code
    if keep is None:
        handling.rows_kept = table.num_rows
        return codes, handling
    handling.rows_kept = int(np.count_nonzero(keep))
    return {name: code[keep] for name, code in codes.items()}, handling


def _kept(rows: BoolArray, keep: BoolArray | None) -> int:
    """How many of ``rows`` are still kept."""
    return int(np.count_nonzero(rows if keep is None else rows & keep))


def _drop(keep: BoolArray | None, rows: BoolArray) -> BoolArray:
    """The keep mask without ``rows``."""
    if keep is None:
        return ~rows
    keep &= ~rows
    return keep


def _null_mask(column: pa.ChunkedArray) -> BoolArray | None:
    """Where the column is null, or None when it has no null."""
    if column.null_count == 0:
        return None
    return np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def _nfc_retry(strings: pa.ChunkedArray, index: pa.ChunkedArray, domain: ColumnDomain) -> pa.ChunkedArray:
    """Codes for values outside the domain whose NFC form is a category (e.g. ``café`` written in NFD).

    Schema categories are NFC (``schemas.model``); data may arrive in another normal form. Only the
    distinct values that were not found are normalised, so the common case costs nothing.
    """
    unmatched = pc.unique(pc.filter(strings, pc.and_(pc.is_null(index), pc.is_valid(strings))))
    position = {c: i for i, c in enumerate(domain.categories)}
    raw: list[str] = []
    codes: list[int] = []
    for value in unmatched.to_pylist():
        code = position.get(unicodedata.normalize("NFC", value))
        if code is not None:
            raw.append(value)
            codes.append(code)
    if not raw:
        return index
    found = pc.take(pa.array(codes, type=pa.int32()), pc.index_in(strings, value_set=pa.array(raw, pa.string())))
    return pc.coalesce(pc.cast(index, pa.int32()), found)


def encode_category(column: pa.ChunkedArray, domain: ColumnDomain) -> tuple[Codes, BoolArray | None, BoolArray | None]:
    """Codes of a category column, with its null and unknown (outside the domain) rows, or None.

    The one matching of labels to categories (the marginals', and a statistic's or mapping's groups).

    Values are matched as strings: an integer column's value 7 is the category ``"7"`` (its decimal
    string, how integer codes are declared), never ``"07"``.
    """
    if pa.types.is_dictionary(column.type):
        column = pc.cast(column, pa.string())
    lookup = pa.array(domain.categories, type=pa.string())
    strings = pc.cast(column, pa.string())
    index = pc.index_in(strings, value_set=lookup)
    if index.null_count != column.null_count:
        index = _nfc_retry(strings, index, domain)
    missing = _null_mask(column)
    unknown: BoolArray | None = None
    # index_in gives null for a null value and for a value outside the domain, and for nothing else.
    if index.null_count != column.null_count:
        unknown = ~np.asarray(index.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        if missing is not None:
            unknown &= ~missing
    code = np.asarray(index.fill_null(0).to_numpy(zero_copy_only=False)).astype(_code_dtype(domain.size))
    return code, missing, unknown


def _encode_number(column: pa.ChunkedArray, domain: ColumnDomain) -> tuple[Codes, BoolArray | None, int]:
    """Bin codes of a numeric column, its missing rows (null, or NaN) or None, and how many were clamped.

    A missing row gets an arbitrary code here (it is recoded to null or dropped by the caller) and
    is not counted as clamped.
    """
    missing = _null_mask(column)
    low, high = domain.edges[0], domain.edges[-1]
    lookup = _bin_lookup(domain)
    if lookup is not None and (pa.types.is_signed_integer(column.type) or (
            pa.types.is_unsigned_integer(column.type) and column.type.bit_width < 64)):
        whole = np.asarray(column.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
        offset = np.clip(whole, int(low), int(high) - 1)
        outside = offset != whole
        if domain.points:  # a value between two declared ones is counted with the one below: clamped too
            outside |= ~np.isin(whole, np.asarray(domain.edges[:-1], dtype=np.int64))
        if missing is not None:
            outside &= ~missing
        if low:
            offset -= int(low)
        return lookup.take(offset), missing, int(np.count_nonzero(outside))
    values = np.asarray(
        pc.cast(column, pa.float64(), safe=False).fill_null(low).to_numpy(zero_copy_only=False), dtype=np.float64
    )
    if not pa.types.is_integer(column.type):
        nan = np.isnan(values)
        if nan.any():
            missing = nan if missing is None else missing | nan
    code = encode_numeric(values, domain).astype(_code_dtype(domain.size))
    # Nulls were filled with the lower bound and NaN compares false: neither counts as clamped.
    above = values >= high if domain.kind == "int" else values > high
    clamped = int(np.count_nonzero(values < low)) + int(np.count_nonzero(above))
    if domain.points:  # between two declared values (NaN and nulls, filled with the first, are not)
        clamped += int(np.count_nonzero((values >= low) & ~above & ~np.isin(values, domain.edges[:-1])))
    return code, missing, clamped


def marginal_key(columns: Sequence[str]) -> str:
    """The query name of a marginal, e.g. ``marginal(age,income)``."""
    return f"marginal({','.join(columns)})"


class _Scratch:
    """Reusable buffers for combined codes, one per integer type: counting allocates them once."""

    def __init__(self) -> None:
        self._buffers: dict[np.dtype[Any], Codes] = {}

    def get(self, dtype: np.dtype[Any], rows: int) -> Codes:
        buffer = self._buffers.get(dtype)
        if buffer is None or len(buffer) < rows:
            buffer = self._buffers[dtype] = np.empty(rows, dtype=dtype)
        return buffer[:rows]


def _count(
    codes: Mapping[str, Codes], domains: Mapping[str, int], columns: Sequence[str], scratch: _Scratch
) -> IntArray:
    """``count_marginal``, building the combined code in place in a scratch buffer (``domains``: column sizes)."""
    if not columns:
        raise InternalError("count_marginal needs at least one column")
    sizes = [domains[name] for name in columns]
    size = math.prod(sizes)
    first = codes[columns[0]]
    if len(columns) == 1:
        flat = first
    else:
        # Wide enough for every combined code and for every input (so out-of-range input codes
        # are counted, or rejected, exactly as in int64); bincount reads any integer type.
        dtype = np.result_type(_code_dtype(size), *(codes[name].dtype for name in columns))
        if dtype.kind != "i":
            dtype = np.dtype(np.int64)
        flat = scratch.get(dtype, len(first))
        np.multiply(first, sizes[1], out=flat, dtype=dtype)
        np.add(flat, codes[columns[1]], out=flat, dtype=dtype)
        for name, width in zip(columns[2:], sizes[2:], strict=True):
            np.multiply(flat, width, out=flat, dtype=dtype)
            np.add(flat, codes[name], out=flat, dtype=dtype)
    return np.asarray(np.bincount(flat, minlength=size), dtype=np.int64)


def count_marginal(
    codes: Mapping[str, IntArray], domains: Mapping[str, ColumnDomain], columns: Sequence[str]
) -> IntArray:
    """The flattened contingency table of ``columns`` (row-major in the given column order)."""
    return _count(codes, {name: d.size for name, d in domains.items()}, columns, _Scratch())


def count_all(
    batches: Iterable[pa.Table],
    domains: Sequence[ColumnDomain],
    rules: Mapping[str, ColumnRule],
    workload: Sequence[tuple[str, ...]],
    maps: Mapping[str, npt.NDArray[np.integer[Any]]] | None = None,
) -> tuple[dict[tuple[str, ...], IntArray], RowHandling]:
    """Map-reduce: encode each row group, count every marginal of the workload, sum.

    Each row group is encoded once into narrow integer codes; every marginal's combined code is
    built in one reused buffer of the narrowest type that holds it, then counted with ``bincount``.

    Args:
        batches: The row groups.
        domains: The public encodings of the measured columns.
        rules: Row-level rules of the category columns.
        workload: The marginals to count.
        maps: Columns counted in coarser codes: ``maps[c][code]`` is the coarse code of a fine
            code (a public map, e.g. computed from noisy 1-ways); the coarse size is its maximum + 1.

    Returns:
        Exact counts per marginal (raw: never leaves the release except through a mechanism)
        and the (internal) row-handling counts.
    """
    sizes = {d.name: d.size for d in domains}
    coarse: dict[str, Codes] = {}
    for name, fine_to_coarse in (maps or {}).items():
        array = np.asarray(fine_to_coarse)
        if array.shape != (sizes[name],) or array.min(initial=0) < 0:
            raise InternalError(f"the coarse map of column {name!r} must give a code for each of its codes")
        sizes[name] = int(array.max()) + 1
        coarse[name] = array.astype(_code_dtype(sizes[name]))
    totals: dict[tuple[str, ...], IntArray] = {
        cols: np.zeros(int(np.prod([sizes[c] for c in cols])), dtype=np.int64) for cols in workload
    }
    handling = RowHandling()
    scratch = _Scratch()
    for batch in batches:
        codes, part = _encode_compact(batch, domains, rules)
        handling.add(part)
        for name, lookup in coarse.items():
            codes[name] = lookup[codes[name]]
        for cols in workload:
            totals[cols] += _count(codes, sizes, cols, scratch)
    return totals, handling
