"""Column helpers shared by the steward-only checks: types, null masks, exact codes, row keys."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from dprelease.dp.errors import ParameterError

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


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
