"""Disclosure-risk checks of a synthetic table against the real one.

INTERNAL ONLY: these figures are computed from the raw table without noise. They go to the
steward's internal report, never into a public release. Every result is an aggregate (a count, a
share or a distance); no row and no value of either table is ever returned or put in an error.

Three checks, each a different way a synthetic table can leak a real record:

* **Exact matches**: the share of synthetic rows identical to some real row on the given columns.
* **Distance to closest record (DCR)**: for sampled synthetic rows, the Gower distance to the
  nearest real row, compared with the same distance from sampled real rows to the nearest *other*
  real row (the baseline a synthetic table should not beat).
* **k-anonymity** over quasi-identifiers (numeric ones optionally cut into bins), for both tables
  (:mod:`quality.kanonymity`).

Gower distance, averaged over columns: a numeric column contributes ``|x - y| / range``, where the
range is the real column's (a synthetic value outside it is clamped to it, which can only shorten
distances: conservative for a risk check); any other column contributes 0 if equal, 1 if not. Null
against null is 0, null against a value is 1; a float NaN counts as null. A numeric column whose
real values are all equal (or all null) is compared by equality.

>>> real = pa.table({"age": [23, 24, 37], "sex": ["F", "F", "M"]})
>>> exact_match_share(real, pa.table({"age": [23, 50], "sex": ["F", "F"]}), ["age", "sex"])
0.5
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from scipy.spatial.distance import cdist

from dprelease.dp.errors import ParameterError
from dprelease.quality.columns import (
    BoolArray,
    FloatArray,
    IntArray,
    _check_columns,
    _check_rows,
    _exact_codes,
    _floats,
    _is_numeric,
    _row_keys,
)
from dprelease.quality.kanonymity import KAnonymityComparison, k_anonymity_comparison

_BLOCK = 1 << 19
"""Target number of pairwise distances held at once (a few MB, so each block stays in cache)."""



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
    real_codes: npt.NDArray[np.unsignedinteger[Any]]
    """Shape (columns, real rows): one row per column, for fast broadcasting against a block."""
    synthetic_codes: npt.NDArray[np.unsignedinteger[Any]]
    """Shape (synthetic rows, columns)."""
    columns: int


def _gower_columns(real: pa.Table, synthetic: pa.Table, names: Sequence[str]) -> _GowerColumns:
    n_real, n_syn = real.num_rows, synthetic.num_rows
    real_features: list[FloatArray] = []
    syn_features: list[FloatArray] = []
    real_codes: list[IntArray] = []
    syn_codes: list[IntArray] = []
    largest = 0
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
        codes, count = _exact_codes(rcol, scol, name)
        real_codes.append(codes[:n_real])
        syn_codes.append(codes[n_real:])
        largest = max(largest, count - 1)
    # Codes are only compared for equality: in the narrowest type that holds them (a byte for most
    # columns), the comparisons of :func:`_nearest` move an eighth of the memory.
    narrow = np.min_scalar_type(largest)
    return _GowerColumns(
        real_features=np.column_stack(real_features) if real_features else np.zeros((n_real, 0)),
        synthetic_features=np.column_stack(syn_features) if syn_features else np.zeros((n_syn, 0)),
        real_codes=np.vstack(real_codes).astype(narrow) if real_codes else np.zeros((0, n_real), dtype=narrow),
        synthetic_codes=np.column_stack(syn_codes).astype(narrow) if syn_codes else np.zeros((n_syn, 0), dtype=narrow),
        columns=len(names),
    )


def _nearest(
    features: FloatArray, codes: npt.NDArray[np.unsignedinteger[Any]], encoded: _GowerColumns,
    exclude: IntArray | None = None,
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
