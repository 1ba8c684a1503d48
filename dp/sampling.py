"""Sampling synthetic rows from a fitted model, and decoding codes back to values.

Sampling is post-processing: it sees only the model (estimated from noisy measurements) and a
seeded generator, whose seed the audit report records so a release can be reproduced.
Numeric values are decoded uniformly inside their bin (whole numbers for int columns); derived
columns are computed from their source column through the declared public mapping.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from dp.errors import InternalError
from dp.estimation import TreeModel
from dp.marginals import ColumnDomain

IntArray = npt.NDArray[np.int64]


def _draw(probabilities: npt.NDArray[np.float64], n: int, rng: np.random.Generator) -> IntArray:
    """``n`` codes drawn from ``probabilities`` by inverse CDF."""
    cdf = np.cumsum(probabilities)
    cdf /= cdf[-1]
    out: IntArray = np.searchsorted(cdf, rng.random(n), side="right").astype(np.int64)
    return np.minimum(out, len(probabilities) - 1)


def exact_codes(counts: IntArray, rng: np.random.Generator) -> IntArray:
    """Codes in random order with exactly ``counts[c]`` copies of each code c.

    >>> sorted(exact_codes(np.array([2, 0, 1]), np.random.default_rng(0)).tolist())
    [0, 0, 2]
    """
    counts = np.asarray(counts, dtype=np.int64)
    if (counts < 0).any():
        raise InternalError("exact_codes needs non-negative counts")
    out: IntArray = rng.permutation(np.repeat(np.arange(len(counts), dtype=np.int64), counts))
    return out


def sample_codes(
    model: TreeModel, rows: int, rng: np.random.Generator, exact: Mapping[str, IntArray] | None = None
) -> dict[str, IntArray]:
    """Sample ``rows`` rows of codes, parents before children.

    Args:
        model: The fitted model.
        rows: How many rows.
        rng: The seeded generator of synthetic sampling.
        exact: Root columns whose codes must appear exactly so many times (published hierarchy
            counts); their counts must sum to ``rows``.

    Raises:
        InternalError: If an exact column is not a root of the model or its counts do not sum to ``rows``.
    """
    exact = exact or {}
    roots = {column for column, parent in model.order if parent is None}
    for column, counts in exact.items():
        if column not in roots or int(np.sum(counts)) != rows:
            raise InternalError(f"exact counts of {column!r} must be a model root's and sum to the row count")
    codes: dict[str, IntArray] = {}
    for column, parent in model.order:
        if parent is None:
            codes[column] = exact_codes(exact[column], rng) if column in exact else _draw(
                model.roots[column], rows, rng)
            continue
        conditional = model.conditionals[column]
        out = np.empty(rows, dtype=np.int64)
        parent_codes = codes[parent]
        for value in np.unique(parent_codes):
            where = np.flatnonzero(parent_codes == value)
            out[where] = _draw(conditional[value], len(where), rng)
        codes[column] = out
    return codes


@dataclass(frozen=True)
class OutputColumn:
    """How to produce one output column.

    Attributes:
        name: Column name.
        type: ``int``, ``float`` or ``category``.
        domain: The encoding of a measured column, or None for a derived one.
        derived_from: The source column of a derived column.
        mapping: Source category -> value, for a derived column.
    """

    name: str
    type: str
    domain: ColumnDomain | None = None
    derived_from: str | None = None
    mapping: Mapping[str, float] | None = None


def decode(
    codes: Mapping[str, IntArray], columns: Sequence[OutputColumn], rows: int, rng: np.random.Generator
) -> pa.Table:
    """Turn codes into a typed Arrow table with exactly ``columns``, in order."""
    arrays: dict[str, pa.Array] = {}
    decoded: dict[str, pa.Array] = {}
    for column in columns:
        if column.domain is None:
            continue
        decoded[column.name] = _decode_column(codes[column.name], column, rng)
    for column in columns:
        if column.domain is not None:
            arrays[column.name] = decoded[column.name]
            continue
        if column.derived_from is None or column.mapping is None:
            raise InternalError(f"output column {column.name!r} has neither a domain nor a derivation")
        source = decoded[column.derived_from]
        values = [None if v is None else column.mapping[v] for v in source.to_pylist()]
        arrow_type = pa.int64() if column.type == "int" else pa.float64()
        arrays[column.name] = pa.array(
            [None if v is None else (int(v) if column.type == "int" else float(v)) for v in values], type=arrow_type
        )
    table = pa.table({c.name: arrays[c.name] for c in columns})
    if table.num_rows != rows:
        raise InternalError("decoded table has the wrong number of rows")
    return table


def _decode_column(code: IntArray, column: OutputColumn, rng: np.random.Generator) -> pa.Array:
    domain = column.domain
    assert domain is not None
    null = code == domain.null_code if domain.null_code is not None else np.zeros(len(code), dtype=bool)
    inner = np.where(null, 0, code)
    if domain.kind == "category":
        labels = pa.array(domain.categories, type=pa.string())
        taken = labels.take(pa.array(inner))
        return pa.array(taken.to_pylist(), type=pa.string(), mask=null) if null.any() else taken
    edges = np.asarray(domain.edges, dtype=np.float64)
    low, high = edges[inner], edges[inner + 1]
    if domain.kind == "int":
        low_i, high_i = low.astype(np.int64), high.astype(np.int64)  # bin = [low, high) whole numbers
        values = low_i + np.floor(rng.random(len(code)) * (high_i - low_i)).astype(np.int64)
        return pa.array(values, type=pa.int64(), mask=null if null.any() else None)
    floats = low + rng.random(len(code)) * (high - low)
    return pa.array(floats, type=pa.float64(), mask=null if null.any() else None)
