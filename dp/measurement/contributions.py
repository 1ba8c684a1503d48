"""Contribution bounding: at most k rows per privacy unit, so that sensitivities stay what mechanisms assume.

When a schema names an id column (the rows of one person, household or account), neighbouring
tables differ by *all* rows of one id. :func:`bound_contributions` keeps at most ``max_rows`` rows
of every id, chosen uniformly at random and independently per id, and returns the sensitivities it
thereby guarantees: a histogram (any marginal, any hierarchy level, any count) changes by at most
k in L1 and at most k in L2 norm (all k rows of an id may fall into one cell), and every
sensitivity-1 counting query becomes sensitivity k.

The random choice touches sensitive rows, so it uses the operating system's secure random source
(:func:`secrets.token_bytes`), never ``numpy.random``. Rows with a null id cannot be attributed to a
unit and are dropped (a decision about each row alone, counted for the internal report only).

>>> ids = pa.array(["a", "a", "a", "b", None])
>>> bounded = bound_contributions(ids, 2)
>>> int(bounded.keep.sum()), bounded.l1_sensitivity, bounded.l2_sensitivity, bounded.dropped_null_ids
(3, 2, 2, 1)
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from dprelease.dp.errors import ParameterError

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class BoundedRows:
    """Which rows survive contribution bounding, and the sensitivities that guarantees.

    Attributes:
        keep: One flag per input row.
        l1_sensitivity: The most any histogram moves in L1 norm when one id is added or removed.
        l2_sensitivity: The same in L2 norm.
        dropped_null_ids: Rows dropped for a null id (internal).
        dropped_over_cap: Rows dropped because their id had more than ``max_rows`` (internal).
    """

    keep: BoolArray
    l1_sensitivity: int
    l2_sensitivity: int
    dropped_null_ids: int
    dropped_over_cap: int


def bound_contributions(
    ids: pa.Array | pa.ChunkedArray, max_rows: int, random_bytes: Callable[[int], bytes] = secrets.token_bytes
) -> BoundedRows:
    """Keep at most ``max_rows`` rows of every id, chosen at random independently per id.

    Args:
        ids: The privacy-unit id of every row (any hashable Arrow type; null for unknown).
        max_rows: k, the contribution bound (a positive whole number, public: from the schema).
        random_bytes: The secure random source (tests may pass a deterministic one).

    Returns:
        The rows to keep and the guaranteed sensitivities (k in L1 and in L2).

    Raises:
        ParameterError: If ``max_rows`` is not a positive whole number.
    """
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1:
        raise ParameterError(f"max_rows ({max_rows!r}) must be a positive whole number")
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks() if ids.num_chunks else pa.array([], type=ids.type)
    n = len(ids)
    null = np.asarray(ids.is_null().to_numpy(zero_copy_only=False), dtype=bool) if n else np.zeros(0, dtype=bool)
    codes = np.asarray(pc.dictionary_encode(ids).indices.fill_null(-1).to_numpy(zero_copy_only=False),
                       dtype=np.int64) if n else np.zeros(0, dtype=np.int64)
    # Order the rows by (id, secure random key): an id's first k rows in that order are a uniformly
    # random k-subset of its rows, drawn independently of every other id's.
    keys = np.frombuffer(random_bytes(8 * n), dtype=np.uint64) if n else np.zeros(0, dtype=np.uint64)
    order = np.lexsort((keys, codes))
    sorted_codes = codes[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_codes)) + 1] if n else np.zeros(0, dtype=np.int64)
    group_start = np.repeat(starts, np.diff(np.r_[starts, n])) if n else np.zeros(0, dtype=np.int64)
    rank = np.arange(n) - group_start
    keep = np.zeros(n, dtype=bool)
    keep[order] = rank < max_rows
    over_cap = int((~keep & ~null).sum())
    keep &= ~null
    return BoundedRows(keep, max_rows, max_rows, int(null.sum()), over_cap)


def unit_sensitivity(bounded: BoundedRows | None) -> int:
    """The L1 and L2 sensitivity of every histogram: 1 per row, or k after contribution bounding.

    A histogram changes by one count in one cell when a row is added or removed; by at most k in L1
    and in L2 when a privacy unit of at most k rows (after contribution bounding) is.
    """
    return 1 if bounded is None else bounded.l2_sensitivity
