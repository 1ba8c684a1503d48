"""Post-processing of noisy measurements: free of privacy cost, never sees raw data.

* :func:`estimate_total` combines the totals of all noisy marginals by inverse-variance weighting
  (a marginal of k cells with per-cell variance v has a total of variance k·v).
* :func:`project_simplex` is the Euclidean projection of a noisy table onto the non-negative
  tables with a given total (the closest consistent table in L2).
* :func:`round_preserving_sum` turns a non-negative real table into integers with exactly the
  given total (largest remainder), each cell moved by less than one.

>>> project_simplex(np.array([5.0, -2.0, 1.0]), 4.0).tolist()
[4.0, 0.0, 0.0]
>>> round_preserving_sum(np.array([1.5, 1.5, 1.0]), 4).tolist()
[2, 1, 1]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from dprelease.dp.errors import InternalError
from dprelease.dp.synthesis.noisy import NoisyMarginal

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class NoisyCounts(Protocol):
    """Noisy counts that partition the rows (a marginal, a hierarchy level), with their cell variance."""

    @property
    def counts(self) -> IntArray: ...  # noqa: D102

    @property
    def variance(self) -> float: ...  # noqa: D102


def estimate_total(marginals: Sequence[NoisyCounts]) -> float:
    """Inverse-variance-weighted estimate of the row count from the totals of noisy partitions of the rows."""
    if not marginals:
        raise InternalError("estimate_total needs at least one noisy marginal")
    weights = np.array([1.0 / (len(m.counts) * m.variance) for m in marginals])
    totals = np.array([float(m.counts.sum()) for m in marginals])
    return float((weights * totals).sum() / weights.sum())


def project_simplex(values: FloatArray, total: float) -> FloatArray:
    """The nearest (Euclidean) vector x >= 0 with sum(x) == total.

    Finds the shift tau with sum(max(values - tau, 0)) == total (Duchi et al. 2008).
    """
    v = np.asarray(values, dtype=np.float64)
    if total <= 0 or v.size == 0:
        return np.zeros_like(v)
    ordered = np.sort(v)[::-1]
    cumulative = np.cumsum(ordered) - total
    index = np.arange(1, v.size + 1)
    valid = ordered - cumulative / index > 0
    kept = np.nonzero(valid)[0]
    # The largest element is always kept; with a subnormal total the test above can round it away.
    rho = int(kept[-1]) if kept.size else 0
    tau = cumulative[rho] / (rho + 1)
    out: FloatArray = np.maximum(v - tau, 0.0)
    return out


def round_preserving_sum(values: FloatArray, total: int) -> IntArray:
    """Integers that sum to ``total`` exactly, each within one of the (non-negative) input.

    Ties are broken by position, so the result is deterministic.
    """
    v = np.maximum(np.asarray(values, dtype=np.float64), 0.0)
    if total < 0:
        raise InternalError("round_preserving_sum needs a non-negative total")
    if v.size == 0:
        return np.zeros(0, dtype=np.int64)
    if v.sum() <= 0:
        v = np.ones_like(v)
    scaled = (v / v.sum()) * total
    base: IntArray = np.floor(scaled).astype(np.int64)
    short = int(total - base.sum())
    if short > 0:
        order = np.argsort(-(scaled - base), kind="stable")
        base[order[:short]] += 1
    elif short < 0:  # pragma: no cover - floor never overshoots
        raise InternalError("round_preserving_sum overshot its total")
    return base


def consistent_counts(marginal: NoisyMarginal, total: int) -> IntArray:
    """Non-negative integer counts of ``marginal`` that sum to ``total`` (projection, then rounding)."""
    return round_preserving_sum(project_simplex(marginal.counts.astype(np.float64), float(total)), total)


def combined_one_way(column: str, marginals: Sequence[NoisyMarginal]) -> tuple[FloatArray, FloatArray]:
    """Inverse-variance-weighted estimate of a column's 1-way counts from every marginal that contains it.

    A 1-way marginal gives each cell with variance v; a 2-way marginal (column, b) gives each cell
    as a row sum of ``size(b)`` noisy cells, with variance ``size(b)·v``. The estimates are
    independent, so weighting each by the inverse of its variance is the minimum-variance
    unbiased combination.

    Returns:
        The combined (possibly negative) counts and each cell's variance.

    Raises:
        InternalError: If no marginal contains the column.
    """
    numerator: FloatArray | None = None
    precision = 0.0
    for m in marginals:
        if column not in m.columns:
            continue
        table = m.counts.reshape(m.shape).astype(np.float64)
        axes = tuple(i for i, c in enumerate(m.columns) if c != column)
        values = table.sum(axis=axes) if axes else table
        cells_summed = int(np.prod([m.shape[i] for i in axes])) if axes else 1
        weight = 1.0 / (m.variance * cells_summed)
        numerator = values * weight if numerator is None else numerator + values * weight
        precision += weight
    if numerator is None:
        raise InternalError(f"no marginal measures column {column!r}")
    return numerator / precision, np.full(numerator.shape, 1.0 / precision)


def fit_margins(table: FloatArray, rows: FloatArray, columns: FloatArray, *, tolerance: float = 1e-9,
                max_iterations: int = 1000) -> FloatArray:
    """Iterative proportional fitting of a non-negative 2-D table to given row and column sums.

    A cell that is zero stays zero, so the table is first blended with a tiny share of the
    independence table ``rows ⊗ columns / total`` (every cell positive where both margins are):
    the fit then always exists. Row and column targets must have the same total.

    >>> fit_margins(np.array([[1.0, 1.0], [1.0, 1.0]]), np.array([3.0, 1.0]), np.array([2.0, 2.0])).round(6).tolist()
    [[1.5, 1.5], [0.5, 0.5]]
    """
    total = float(rows.sum())
    if total <= 0:
        return np.zeros_like(table, dtype=np.float64)
    prior = np.outer(rows, columns) / total
    fitted: FloatArray = np.maximum(table, 0.0) + 1e-6 * prior + 1e-300
    for _ in range(max_iterations):
        row_sums = fitted.sum(axis=1)
        fitted *= np.divide(rows, row_sums, out=np.zeros_like(rows), where=row_sums > 0)[:, None]
        column_sums = fitted.sum(axis=0)
        fitted *= np.divide(columns, column_sums, out=np.zeros_like(columns), where=column_sums > 0)[None, :]
        if np.abs(fitted.sum(axis=1) - rows).max() <= tolerance * max(total, 1.0):
            break
    return fitted


def round_matrix(table: FloatArray, rows: IntArray, columns: IntArray) -> IntArray:
    """An integer table with exactly the given row and column sums, each cell within one of ``table``.

    Controlled rounding (Bacharach 1966; Cox 1987): cells are floored, then each row's and
    column's shortfall is made up by adding one to cells with a fractional part, chosen by a
    maximum flow from rows to columns. Such a rounding exists whenever ``table`` (non-negative)
    has exactly these margins; for a table that only nearly has them, cells without a fractional
    part are used next, so a cell may then move by exactly one.

    >>> round_matrix(np.array([[0.5, 0.5], [0.5, 0.5]]), np.array([1, 1]), np.array([1, 1])).tolist()
    [[1, 0], [0, 1]]
    """
    if rows.sum() != columns.sum():
        raise InternalError("round_matrix needs row and column sums with the same total")
    values = np.maximum(np.asarray(table, dtype=np.float64), 0.0)
    base: IntArray = np.floor(values).astype(np.int64)
    # A near-fit may floor above a target: take the excess back from the largest cells first.
    for axis, target in ((1, rows), (0, columns)):
        excess = base.sum(axis=axis) - target
        for index in np.flatnonzero(excess > 0):
            line = base[index] if axis == 1 else base[:, index]
            for cell in np.argsort(-line, kind="stable")[: int(excess[index])]:
                line[cell] -= 1
    fractional = (values - np.floor(values)) > 1e-12
    for allowed in (fractional, np.ones_like(fractional)):
        need_rows = rows - base.sum(axis=1)
        need_columns = columns - base.sum(axis=0)
        if not (need_rows.any() or need_columns.any()):
            break
        base += _flow_rounding(need_rows, need_columns, allowed)
    if (base.sum(axis=1) != rows).any() or (base.sum(axis=0) != columns).any() or (base < 0).any():
        raise InternalError("round_matrix failed to meet its margins; this is a bug")
    return base


def _flow_rounding(need_rows: IntArray, need_columns: IntArray, allowed: npt.NDArray[np.bool_]) -> IntArray:
    """Units (0 or 1 a cell, in ``allowed`` cells) to add so rows and columns meet their needs: a maximum flow."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_flow

    n_rows, n_columns = allowed.shape
    source, sink = n_rows + n_columns, n_rows + n_columns + 1
    cell_rows, cell_columns = np.nonzero(allowed)
    senders = np.concatenate([np.full(n_rows, source), cell_rows, n_rows + np.arange(n_columns)])
    receivers = np.concatenate([np.arange(n_rows), n_rows + cell_columns, np.full(n_columns, sink)])
    capacity = np.concatenate([np.maximum(need_rows, 0), np.ones(len(cell_rows), dtype=np.int64),
                               np.maximum(need_columns, 0)]).astype(np.int32)
    graph = csr_matrix((capacity, (senders, receivers)), shape=(sink + 1, sink + 1))
    flow = maximum_flow(graph, source, sink).flow.tocsr()
    added: IntArray = np.asarray(flow[:n_rows, n_rows:n_rows + n_columns].toarray(), dtype=np.int64)
    return np.maximum(added, 0)


def consistent_marginals(
    marginals: Sequence[NoisyMarginal], total: int, fixed: Mapping[str, IntArray] | None = None
) -> dict[tuple[str, ...], IntArray]:
    """Non-negative integer marginals that agree with each other and all sum to ``total``.

    Each column's 1-way counts are the inverse-variance-weighted combination of every marginal
    containing it (:func:`combined_one_way`), projected onto the non-negative tables with the
    total and rounded (or taken from ``fixed``, e.g. a hierarchy's published leaf counts). Each
    2-way table is then fitted to those two 1-ways (:func:`fit_margins`) and rounded so that its
    row and column sums equal them exactly (:func:`round_matrix`).

    Args:
        marginals: Noisy 1-way and 2-way marginals.
        total: The post-processed row count.
        fixed: 1-way counts to use as they are (each must sum to ``total``).

    Returns:
        Integer counts of every marginal, keyed by its columns, flattened row-major.
    """
    fixed = dict(fixed or {})
    columns = list(dict.fromkeys(c for m in marginals for c in m.columns))
    one_way: dict[str, IntArray] = {}
    for column in columns:
        if column in fixed:
            counts = np.asarray(fixed[column], dtype=np.int64)
            if int(counts.sum()) != total:
                raise InternalError(f"fixed counts of {column!r} do not sum to the total")
            one_way[column] = counts
            continue
        estimate, _ = combined_one_way(column, marginals)
        one_way[column] = round_preserving_sum(project_simplex(estimate, float(total)), total)
    out: dict[tuple[str, ...], IntArray] = {}
    for m in marginals:
        if len(m.columns) == 1:
            out[m.columns] = one_way[m.columns[0]]
        elif len(m.columns) == 2:
            a, b = m.columns
            rows, cols = one_way[a], one_way[b]
            fitted = fit_margins(m.counts.reshape(m.shape).astype(np.float64), rows.astype(np.float64),
                                 cols.astype(np.float64))
            out[m.columns] = round_matrix(fitted, rows, cols).ravel()
        else:
            out[m.columns] = consistent_counts(m, total)
    return out
