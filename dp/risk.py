"""Disclosure-risk checks of a synthetic table against the real one.

INTERNAL ONLY: these figures are computed from the raw table without noise. They go to the
steward's internal report, never into a public release. Every result is an aggregate (a count, a
share or a distance); no row and no value of either table is ever returned or put in an error.

Three checks, each a different way a synthetic table can leak a real record:

* **Exact matches**: the share of synthetic rows identical to some real row on the given columns.
* **Distance to closest record (DCR)**: for sampled synthetic rows, the Gower distance to the
  nearest real row, compared with the same distance from sampled real rows to the nearest *other*
  real row (the baseline a synthetic table should not beat).
* **k-anonymity** over quasi-identifiers (numeric ones optionally cut into bins), for both tables.

Gower distance, averaged over columns: a numeric column contributes ``|x - y| / range``, where the
range is the real column's (a synthetic value outside it is clamped to it, which can only shorten
distances: conservative for a risk check); any other column contributes 0 if equal, 1 if not. Null
against null is 0, null against a value is 1; a float NaN counts as null. A numeric column whose
real values are all equal (or all null) is compared by equality.

>>> real = pa.table({"age": [23, 24, 37], "sex": ["F", "F", "M"]})
>>> exact_match_share(real, pa.table({"age": [23, 50], "sex": ["F", "F"]}), ["age", "sex"])
0.5
>>> k_anonymity(real, ["age", "sex"], numeric_bins={"age": [20, 25, 30, 35, 40]}).k
1
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from scipy.spatial.distance import cdist

from dprelease.dp.errors import ParameterError

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

SMALL_CLASS_THRESHOLDS: tuple[int, ...] = (2, 5, 10)
"""Class sizes below which rows are counted as poorly protected by k-anonymity."""

_BLOCK = 1 << 19
"""Target number of pairwise distances held at once (a few MB, so each block stays in cache)."""

_KEY_LIMIT = 1 << 62
"""Combined row keys are re-numbered before they could overflow int64."""


def _is_numeric(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t))


def _null_mask(column: pa.ChunkedArray) -> BoolArray:
    mask = pc.is_null(column, nan_is_null=True) if pa.types.is_floating(column.type) else pc.is_null(column)
    return np.asarray(mask.to_numpy(zero_copy_only=False), dtype=np.bool_)


def _floats(column: pa.ChunkedArray) -> FloatArray:
    """The column as float64, nulls as NaN."""
    return np.asarray(pc.cast(column, pa.float64(), safe=False).to_numpy(zero_copy_only=False), dtype=np.float64)


def _check_columns(columns: Sequence[str], tables: Mapping[str, pa.Table], what: str = "columns") -> list[str]:
    names = list(columns)
    if not names:
        raise ParameterError(f"{what} (empty) must name at least one column")
    if len(set(names)) != len(names):
        raise ParameterError(f"{what} must not repeat a column")
    for label, table in tables.items():
        for name in names:
            if name not in table.column_names:
                raise ParameterError(f"{what} ({name!r}) must be a column of the {label} table")
    return names


def _check_rows(table: pa.Table, label: str, minimum: int = 1) -> None:
    if table.num_rows < minimum:
        raise ParameterError(f"the {label} table must have at least {minimum} row{'s' if minimum > 1 else ''}")


def _exact_codes(real: pa.ChunkedArray, synthetic: pa.ChunkedArray, name: str) -> tuple[IntArray, int]:
    """Codes of the exact values of one column in both tables (real rows first); a null is a code of its own.

    Returns the codes and their count.
    """
    both: pa.ChunkedArray
    if _is_numeric(real.type) and _is_numeric(synthetic.type):
        target = pa.int64() if pa.types.is_integer(real.type) and pa.types.is_integer(synthetic.type) else pa.float64()
        try:
            both = pa.chunked_array(pc.cast(real, target).chunks + pc.cast(synthetic, target).chunks, type=target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            # An integer beyond int64 (uint64): compare as doubles, unchecked; never fail on a value.
            target = pa.float64()
            both = pa.chunked_array(pc.cast(real, target, safe=False).chunks
                                    + pc.cast(synthetic, target, safe=False).chunks, type=target)
        nulls = _null_mask(both)
        values = np.asarray(pc.fill_null(both, 0).to_numpy(zero_copy_only=False))
        _, inverse = np.unique(values[~nulls], return_inverse=True)
        size = int(inverse.max()) + 1 if inverse.size else 0
        codes = np.full(len(values), size, dtype=np.int64)
        codes[~nulls] = inverse.reshape(-1)
        return codes, size + 1
    try:
        other = synthetic if synthetic.type == real.type else pc.cast(synthetic, real.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise ParameterError(f"columns ({name!r}) must have compatible types in both tables") from e
    both = pa.chunked_array(real.chunks + other.chunks, type=real.type)
    encoded = pc.dictionary_encode(both).combine_chunks()
    size = len(encoded.dictionary)
    indices = np.asarray(encoded.indices.fill_null(size).to_numpy(zero_copy_only=False), dtype=np.int64)
    return indices, size + 1


def _row_keys(columns: Sequence[tuple[IntArray, int]], rows: int) -> IntArray:
    """One integer per row, equal for two rows exactly when all their codes are equal."""
    key = np.zeros(rows, dtype=np.int64)
    size = 1
    for codes, count in columns:
        if size * count >= _KEY_LIMIT:
            uniques, inverse = np.unique(key, return_inverse=True)
            key, size = inverse.reshape(-1).astype(np.int64), len(uniques)
        key = key * count + codes
        size *= count
    return key


def _possible_matches(
    real: pa.Table, synthetic: pa.Table, names: Sequence[str], value_sets: dict[str, pa.Array]
) -> pa.Table:
    """The real rows that could equal some synthetic row: each value occurs in its synthetic column.

    Only a filter (the exact comparison follows), applied on columns of one non-floating type in
    both tables, where Arrow's set lookup agrees with exact equality (a null matches a null). On
    a large real table most rows fail on some column, so few rows are left to encode.
    """
    mask: pa.ChunkedArray | None = None
    for name in names:
        column, other = real.column(name), synthetic.column(name)
        if column.type != other.type or pa.types.is_floating(column.type):
            continue
        if name not in value_sets:
            value_sets[name] = pc.unique(other.combine_chunks() if isinstance(other, pa.ChunkedArray) else other)
        found = pc.is_in(column, value_set=value_sets[name], skip_nulls=False)
        mask = found if mask is None else pc.and_(mask, found)
    return real if mask is None else real.filter(mask)


def exact_match_share(
    real: pa.Table | Iterable[pa.Table | pa.RecordBatch], synthetic: pa.Table, columns: Sequence[str]
) -> float:
    """Share of synthetic rows identical to at least one real row on ``columns``.

    Rows are compared through exact per-column codes (nulls equal to nulls, NaN as null) combined
    into one integer key per row, so the cost is a few sorts, not a pairwise comparison. The real
    table may come batch by batch (e.g. its Parquet row groups): each synthetic row is compared
    with every real row of every batch, and memory stays at one batch.

    Args:
        real: The raw table, or its batches (each with ``columns``).
        synthetic: The synthetic table; it must hold ``columns`` with compatible types.
        columns: The columns compared.

    Returns:
        The share in [0, 1].

    Raises:
        ParameterError: A column is missing or of incompatible types, or ``synthetic`` is empty.
    """
    batches = [real] if isinstance(real, pa.Table) else real
    names: list[str] | None = None
    matched: BoolArray | None = None
    value_sets: dict[str, pa.Array] = {}
    for part in batches:
        batch = pa.Table.from_batches([part]) if isinstance(part, pa.RecordBatch) else part
        names = _check_columns(columns, {"real": batch, "synthetic": synthetic})
        _check_rows(synthetic, "synthetic")
        batch = _possible_matches(batch, synthetic, names, value_sets)
        coded = [_exact_codes(batch.column(c), synthetic.column(c), c) for c in names]
        keys = _row_keys(coded, batch.num_rows + synthetic.num_rows)
        found = np.isin(keys[batch.num_rows:], keys[: batch.num_rows])
        matched = found if matched is None else matched | found
    if matched is None:  # no batch at all: no real row to match
        _check_columns(columns, {"synthetic": synthetic})
        _check_rows(synthetic, "synthetic")
        return 0.0
    return float(matched.mean())


@dataclass(frozen=True)
class DCRReport:
    """Distances to the closest real record (internal).

    All distances are Gower distances in [0, 1], averaged over the compared columns.
    """

    synthetic_median: float
    """Median distance from a sampled synthetic row to its nearest real row."""
    synthetic_p05: float
    """5th percentile of those distances."""
    real_median: float
    """Median distance from a sampled real row to its nearest *other* real row (the baseline)."""
    real_p05: float
    """5th percentile of the baseline distances."""
    share_closer_than_real_p05: float
    """Share of sampled synthetic rows strictly closer to a real row than ``real_p05`` (0 when the real
    table holds so many duplicates that ``real_p05`` is 0: read it with the exact-match share)."""
    synthetic_sample: int
    """Number of synthetic rows sampled."""
    real_sample: int
    """Number of real rows sampled for the baseline."""

    def to_dict(self) -> dict[str, float | int]:
        """JSON-friendly form."""
        return {
            "synthetic_median": self.synthetic_median, "synthetic_p05": self.synthetic_p05,
            "real_median": self.real_median, "real_p05": self.real_p05,
            "share_closer_than_real_p05": self.share_closer_than_real_p05,
            "synthetic_sample": self.synthetic_sample, "real_sample": self.real_sample,
        }


@dataclass(frozen=True)
class _GowerColumns:
    """Both tables encoded for the Gower distance: L1 features of the numeric columns, codes of the rest.

    A numeric value scaled to v in [0, 1] becomes the feature v, or (v/2, (1-v)/2, 0) when the column
    has nulls, a null being (0, 0, 1/2): the L1 distance is then |v - w| between values and exactly 1
    between a value and a null. Other columns are compared code by code.
    """

    real_features: FloatArray
    synthetic_features: FloatArray
    real_codes: IntArray
    """Shape (columns, real rows): one row per column, for fast broadcasting against a block."""
    synthetic_codes: IntArray
    """Shape (synthetic rows, columns)."""
    columns: int


def _gower_columns(real: pa.Table, synthetic: pa.Table, names: Sequence[str]) -> _GowerColumns:
    n_real, n_syn = real.num_rows, synthetic.num_rows
    real_features: list[FloatArray] = []
    syn_features: list[FloatArray] = []
    real_codes: list[IntArray] = []
    syn_codes: list[IntArray] = []
    for name in names:
        rcol, scol = real.column(name), synthetic.column(name)
        if _is_numeric(rcol.type) and _is_numeric(scol.type):
            r, s = _floats(rcol), _floats(scol)
            finite = r[np.isfinite(r)]
            low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
            if high > low:
                with np.errstate(over="ignore", invalid="ignore"):  # a subnormal range overflows: clamped
                    rv = np.clip((r - low) / (high - low), 0.0, 1.0)  # NaN stays NaN; +-inf is clamped
                    sv = np.clip((s - low) / (high - low), 0.0, 1.0)
                rnull, snull = np.isnan(rv), np.isnan(sv)
                if rnull.any() or snull.any():
                    for v, null, out in ((rv, rnull, real_features), (sv, snull, syn_features)):
                        half = np.where(null, 0.0, v / 2)
                        out += [half, np.where(null, 0.0, 0.5 - half), np.where(null, 0.5, 0.0)]
                else:
                    real_features.append(rv)
                    syn_features.append(sv)
                continue
        codes, _ = _exact_codes(rcol, scol, name)
        real_codes.append(codes[:n_real])
        syn_codes.append(codes[n_real:])
    return _GowerColumns(
        real_features=np.column_stack(real_features) if real_features else np.zeros((n_real, 0)),
        synthetic_features=np.column_stack(syn_features) if syn_features else np.zeros((n_syn, 0)),
        real_codes=np.vstack(real_codes) if real_codes else np.zeros((0, n_real), dtype=np.int64),
        synthetic_codes=np.column_stack(syn_codes) if syn_codes else np.zeros((n_syn, 0), dtype=np.int64),
        columns=len(names),
    )


def _nearest(
    features: FloatArray, codes: IntArray, encoded: _GowerColumns, exclude: IntArray | None = None
) -> FloatArray:
    """Gower distance from each query row to its nearest real row, optionally excluding one real row each.

    Args:
        features: Numeric features of the query rows, shape (queries, features).
        codes: Codes of the query rows, shape (queries, coded columns).
        encoded: The real table's encoding.
        exclude: For each query row, the index of the real row it must not be matched to (itself).
    """
    n_real = encoded.real_features.shape[0]
    queries = features.shape[0]
    block = max(1, min(queries, _BLOCK // max(n_real, 1)))
    counter = np.uint8 if codes.shape[1] < 255 else np.uint32
    out = np.empty(queries, dtype=np.float64)
    for start in range(0, queries, block):
        stop = min(start + block, queries)
        if features.shape[1]:
            distance = cdist(features[start:stop], encoded.real_features, "cityblock")
        else:
            distance = np.zeros((stop - start, n_real))
        if codes.shape[1]:
            mismatches = np.zeros((stop - start, n_real), dtype=counter)
            differs = np.empty((stop - start, n_real), dtype=np.bool_)
            for j in range(codes.shape[1]):
                np.not_equal(codes[start:stop, j, None], encoded.real_codes[j][None, :], out=differs)
                mismatches += differs
            distance += mismatches
        if exclude is not None:
            distance[np.arange(stop - start), exclude[start:stop]] = np.inf
        out[start:stop] = distance.min(axis=1)
    return np.asarray(np.clip(out / encoded.columns, 0.0, 1.0), dtype=np.float64)


def _check_sample(sample: int) -> None:
    if isinstance(sample, bool) or not isinstance(sample, int | np.integer) or sample < 1:
        raise ParameterError(f"sample ({sample!r}) must be a positive integer")


def closest_record_distances(
    real: pa.Table,
    synthetic: pa.Table,
    columns: Sequence[str],
    *,
    sample: int = 2000,
    seed: int = 0,
    random_bytes: Callable[[int], bytes] = secrets.token_bytes,
) -> DCRReport:
    """Distance to closest record of sampled synthetic rows, against a real-to-real baseline.

    ``sample`` synthetic rows (all of them if fewer) are compared with every real row; ``sample``
    real rows are compared with every *other* real row (a duplicate elsewhere in the real table
    still counts, at distance 0). A synthetic table that copies records shows synthetic distances
    well below the baseline.

    Args:
        real: The raw table; at least two rows.
        synthetic: The synthetic table.
        columns: The columns compared.
        sample: How many rows of each table to sample (without replacement).
        seed: Seed of the generator that samples *synthetic* rows.
        random_bytes: The secure source that samples *real* rows: a seeded generator never
            chooses among sensitive rows (tests may pass a deterministic source).

    Returns:
        Medians and 5th percentiles of both distance sets, and the share of synthetic rows closer
        than the baseline's 5th percentile.

    Raises:
        ParameterError: A column is missing or of incompatible types, ``sample`` is not positive,
            ``real`` has fewer than two rows or ``synthetic`` none.
    """
    names = _check_columns(columns, {"real": real, "synthetic": synthetic})
    _check_sample(sample)
    _check_rows(real, "real", 2)
    _check_rows(synthetic, "synthetic")
    chooser = np.random.default_rng(seed)  # evaluation only: sampling synthetic rows for the internal risk report
    syn_rows = np.sort(chooser.choice(synthetic.num_rows, size=min(sample, synthetic.num_rows), replace=False))
    keys = np.frombuffer(random_bytes(8 * real.num_rows), dtype=np.uint64)
    real_rows = np.sort(np.argsort(keys, kind="stable")[: min(sample, real.num_rows)])
    encoded = _gower_columns(real, synthetic, names)
    to_real = _nearest(encoded.synthetic_features[syn_rows], encoded.synthetic_codes[syn_rows], encoded)
    baseline = _nearest(
        encoded.real_features[real_rows], encoded.real_codes[:, real_rows].T, encoded, exclude=real_rows
    )
    real_p05 = float(np.quantile(baseline, 0.05))
    return DCRReport(
        synthetic_median=float(np.median(to_real)),
        synthetic_p05=float(np.quantile(to_real, 0.05)),
        real_median=float(np.median(baseline)),
        real_p05=real_p05,
        share_closer_than_real_p05=float(np.mean(to_real < real_p05)),
        synthetic_sample=len(syn_rows),
        real_sample=len(real_rows),
    )


@dataclass(frozen=True)
class KAnonymityReport:
    """Equivalence classes of one table over its quasi-identifiers (internal)."""

    k: int
    """Size of the smallest class."""
    classes: int
    """Number of distinct quasi-identifier combinations present."""
    rows: int
    """Number of rows of the table."""
    small_class_shares: dict[int, float] = field(default_factory=dict)
    """For each threshold t, the share of rows in classes of fewer than t rows."""

    def to_dict(self) -> dict[str, object]:
        """JSON-friendly form (thresholds become string keys)."""
        return {
            "k": self.k, "classes": self.classes, "rows": self.rows,
            "small_class_shares": {str(t): share for t, share in self.small_class_shares.items()},
        }


def _check_bins(
    table: pa.Table, names: Sequence[str], numeric_bins: Mapping[str, Sequence[float]]
) -> dict[str, FloatArray]:
    edges: dict[str, FloatArray] = {}
    for name, cuts in numeric_bins.items():
        if name not in names:
            raise ParameterError(f"numeric_bins ({name!r}) must name a quasi-identifier")
        if not _is_numeric(table.column(name).type):
            raise ParameterError(f"numeric_bins ({name!r}) must name a numeric column")
        array = np.asarray(list(cuts), dtype=np.float64)
        if array.size == 0 or not np.all(np.isfinite(array)) or np.any(np.diff(array) <= 0):
            raise ParameterError(f"numeric_bins.{name} must be finite and strictly increasing, with at least one edge")
        edges[name] = array
    return edges


def k_anonymity(
    table: pa.Table,
    quasi_identifiers: Sequence[str],
    *,
    numeric_bins: Mapping[str, Sequence[float]] | None = None,
    thresholds: Sequence[int] = SMALL_CLASS_THRESHOLDS,
) -> KAnonymityReport:
    """k-anonymity of ``table`` over ``quasi_identifiers``.

    A numeric quasi-identifier listed in ``numeric_bins`` is generalised first: with edges
    e_0 < ... < e_m, the bins are (-inf, e_0), [e_0, e_1), ..., [e_m, inf) (e.g. ``range(20, 95, 5)``
    for five-year age bands). Other columns keep their exact values. A null is a value of its own.

    Args:
        table: The table (real or synthetic).
        quasi_identifiers: The columns an attacker may know.
        numeric_bins: Optional bin edges per numeric quasi-identifier.
        thresholds: Class sizes t for which the share of rows in classes smaller than t is reported.

    Returns:
        k, the number of classes and the small-class shares.

    Raises:
        ParameterError: A column is missing, bins are malformed or name a non-numeric column, a
            threshold is not a positive integer, or the table is empty.
    """
    names = _check_columns(quasi_identifiers, {"given": table}, "quasi_identifiers")
    edges = _check_bins(table, names, numeric_bins or {})
    for t in thresholds:
        if isinstance(t, bool) or not isinstance(t, int | np.integer) or t < 1:
            raise ParameterError(f"thresholds ({t!r}) must be positive integers")
    _check_rows(table, "given")
    coded: list[tuple[IntArray, int]] = []
    for name in names:
        column = table.column(name)
        if name in edges:
            values, nulls = _floats(column), _null_mask(column)
            bins = np.searchsorted(edges[name], np.where(nulls, 0.0, values), side="right").astype(np.int64)
            size = len(edges[name]) + 1
            coded.append((np.where(nulls, size, bins), size + 1))
        else:
            coded.append(_exact_codes(column, column.slice(0, 0), name))
    _, sizes = np.unique(_row_keys(coded, table.num_rows), return_counts=True)
    row_sizes = np.repeat(sizes, sizes)  # one entry per row: the size of its class
    return KAnonymityReport(
        k=int(sizes.min()),
        classes=len(sizes),
        rows=table.num_rows,
        small_class_shares={int(t): float(np.mean(row_sizes < t)) for t in thresholds},
    )


@dataclass(frozen=True)
class KAnonymityComparison:
    """k-anonymity of the real and the synthetic table over the same quasi-identifiers (internal)."""

    real: KAnonymityReport
    """The real table's classes."""
    synthetic: KAnonymityReport
    """The synthetic table's classes."""

    def to_dict(self) -> dict[str, object]:
        """JSON-friendly form."""
        return {"real": self.real.to_dict(), "synthetic": self.synthetic.to_dict()}


def k_anonymity_comparison(
    real: pa.Table,
    synthetic: pa.Table,
    quasi_identifiers: Sequence[str],
    numeric_bins: Mapping[str, Sequence[float]] | None = None,
) -> KAnonymityComparison:
    """k-anonymity of both tables with the same quasi-identifiers and bins.

    Args:
        real: The raw table.
        synthetic: The synthetic table.
        quasi_identifiers: The columns an attacker may know.
        numeric_bins: Optional bin edges per numeric quasi-identifier (see `k_anonymity`).

    Returns:
        Both reports.

    Raises:
        ParameterError: As `k_anonymity`, for either table.
    """
    return KAnonymityComparison(
        real=k_anonymity(real, quasi_identifiers, numeric_bins=numeric_bins),
        synthetic=k_anonymity(synthetic, quasi_identifiers, numeric_bins=numeric_bins),
    )


@dataclass(frozen=True)
class RiskReport:
    """The disclosure-risk checks of one synthetic table (internal)."""

    exact_match_share: float
    """Share of synthetic rows identical to a real row on the compared columns."""
    dcr: DCRReport
    """Distances to closest record, with the real-to-real baseline."""
    k_anonymity: KAnonymityComparison
    """k-anonymity of both tables over the quasi-identifiers."""

    def to_dict(self) -> dict[str, object]:
        """JSON-friendly form: numbers only, never a row or a value."""
        return {
            "exact_match_share": self.exact_match_share,
            "dcr": self.dcr.to_dict(),
            "k_anonymity": self.k_anonymity.to_dict(),
        }


def disclosure_risk(
    real: pa.Table,
    synthetic: pa.Table,
    columns: Sequence[str],
    quasi_identifiers: Sequence[str],
    *,
    numeric_bins: Mapping[str, Sequence[float]] | None = None,
    sample: int = 2000,
    seed: int = 0,
    random_bytes: Callable[[int], bytes] = secrets.token_bytes,
) -> RiskReport:
    """All disclosure-risk checks of ``synthetic`` against ``real``.

    Args:
        real: The raw table.
        synthetic: The synthetic table.
        columns: The columns compared by exact matching and DCR.
        quasi_identifiers: The columns of the k-anonymity check.
        numeric_bins: Optional bin edges per numeric quasi-identifier.
        sample: Rows of each table sampled for DCR.
        seed: Seed of the DCR sampling of synthetic rows.
        random_bytes: The secure source of the DCR sampling of real rows.

    Returns:
        The bundled report.

    Raises:
        ParameterError: As the individual checks.
    """
    return RiskReport(
        exact_match_share=exact_match_share(real, synthetic, columns),
        dcr=closest_record_distances(real, synthetic, columns, sample=sample, seed=seed, random_bytes=random_bytes),
        k_anonymity=k_anonymity_comparison(real, synthetic, quasi_identifiers, numeric_bins),
    )
