"""k-anonymity of the synthetic table against the real one (steward-only, non-private).

>>> real = pa.table({"age": [23, 24, 37], "sex": ["F", "F", "M"]})
>>> k_anonymity(real, ["age", "sex"], numeric_bins={"age": [20, 25, 30, 35, 40]}).k
1
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from dprelease.dp.errors import ParameterError
from dprelease.quality.columns import (
    FloatArray,
    IntArray,
    _check_columns,
    _check_rows,
    _exact_codes,
    _floats,
    _is_numeric,
    _null_mask,
    _row_keys,
)

SMALL_CLASS_THRESHOLDS: tuple[int, ...] = (2, 5, 10)
"""Class sizes below which rows are counted as poorly protected by k-anonymity."""

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
