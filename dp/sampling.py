"""Sampling synthetic rows from a fitted model, and decoding codes back to values.

Sampling is post-processing: it sees only the model (estimated from noisy measurements) and a
seeded generator, whose seed the audit report records so a release can be reproduced.
Numeric values are decoded uniformly inside their bin (whole numbers for int columns); derived
columns are computed from their source column through the declared public mapping.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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


def systematic_draw(probabilities: npt.NDArray[np.float64], n: int, rng: np.random.Generator) -> IntArray:
    """``n`` codes from ``probabilities`` by systematic sampling, in random order.

    The points (u + 0..n-1) / n on the CDF, with one uniform u, give each code a count within one
    of n·p (unbiased), which keeps small groups closer to their distribution than independent draws.
    """
    cdf = np.cumsum(np.maximum(probabilities, 0.0))
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if cdf[-1] <= 0:
        cdf = np.arange(1, len(probabilities) + 1, dtype=np.float64)
    cdf /= cdf[-1]
    points = (rng.random() + np.arange(n)) / n
    out: IntArray = np.minimum(np.searchsorted(cdf, points, side="right"), len(probabilities) - 1).astype(np.int64)
    return rng.permutation(out)


def _group_draw(keys: IntArray, table: npt.NDArray[np.float64], rng: np.random.Generator) -> IntArray:
    """For each row, a code drawn from ``table[key]``, systematically within each group of equal keys."""
    out = np.empty(len(keys), dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    starts = np.r_[0, np.flatnonzero(np.diff(ordered)) + 1] if len(keys) else np.zeros(0, dtype=np.int64)
    ends = np.r_[starts[1:], len(keys)] if len(keys) else starts
    for start, end in zip(starts, ends, strict=True):
        out[order[start:end]] = systematic_draw(table[ordered[start]], int(end - start), rng)
    return out


def adjust_to_counts(
    codes: IntArray,
    likelihood: Callable[[IntArray, int], npt.NDArray[np.float64]],
    targets: IntArray,
    rng: np.random.Generator,
) -> IntArray:
    """Reassign codes so that each code c appears exactly ``targets[c]`` times, moving the likeliest rows.

    While some code has too many rows and another too few, the rows of the first with the highest
    likelihood ratio ``likelihood[row, to] / likelihood[row, from]`` move (ties broken at random).

    Args:
        codes: One code per row.
        likelihood: ``likelihood(rows, code)``: how plausible ``code`` is for each of ``rows`` (e.g.
            the model's conditional given the row's parents); evaluated only for rows that may move.
        targets: The exact counts wanted; they sum to the number of rows.
        rng: The seeded generator of sampling.
    """
    out = np.array(codes, dtype=np.int64)
    if int(targets.sum()) != len(out):
        raise InternalError("adjust_to_counts needs targets that sum to the number of rows")
    difference = np.bincount(out, minlength=len(targets)) - targets
    while difference.any():
        source = int(np.argmax(difference))
        target = int(np.argmin(difference))
        moves = int(min(difference[source], -difference[target]))
        rows = np.flatnonzero(out == source)
        ratio = likelihood(rows, target) / np.maximum(likelihood(rows, source), 1e-300)
        jitter = rng.random(len(rows))
        chosen = rows[np.lexsort((jitter, -ratio))[:moves]]
        out[chosen] = target
        difference[source] -= moves
        difference[target] += moves
    return out


def sample_junction(
    cliques: Sequence[tuple[str, ...]],
    marginal: Callable[[tuple[str, ...]], npt.NDArray[np.float64]],
    sizes: Mapping[str, int],
    maps: Mapping[str, IntArray],
    fine: Mapping[str, npt.NDArray[np.float64]],
    rows: int,
    rng: np.random.Generator,
    exact: Mapping[str, IntArray] | None = None,
) -> dict[str, IntArray]:
    """Fine codes of ``rows`` rows drawn from a fitted junction-tree model, parents before children.

    Args:
        cliques: (parents..., child) in sampling order; the first clique's first column is the root.
        marginal: The fitted model's distribution over a tuple of columns (inside one clique), in
            coarse codes.
        sizes: The fine size of every column.
        maps: Fine-to-coarse maps of coarsened columns (others are not coarsened).
        fine: Post-processed noisy fine 1-way distribution of every column: a coarse code is refined
            to a fine code in proportion to it.
        rows: How many rows.
        rng: The seeded generator of sampling.
        exact: Columns whose fine codes must appear exactly so many times (published hierarchy leaf
            counts); each is adjusted as soon as it is drawn, before its children.

    Returns:
        Fine codes per column.
    """
    exact = exact or {}

    def coarse_size(column: str) -> int:
        return int(maps[column].max()) + 1 if column in maps else sizes[column]

    def coarse_of(column: str, codes: IntArray) -> IntArray:
        return maps[column][codes] if column in maps else codes

    def refine(column: str, coarse_codes: IntArray) -> IntArray:
        if column not in maps:
            return coarse_codes
        out = np.empty(len(coarse_codes), dtype=np.int64)
        for code in np.unique(coarse_codes):
            where = np.flatnonzero(coarse_codes == code)
            cells = np.flatnonzero(maps[column] == code)
            out[where] = cells[systematic_draw(fine[column][cells] + 1e-12, len(where), rng)]
        return out

    def fine_likelihood(
        column: str, coarse_table: npt.NDArray[np.float64], keys: IntArray
    ) -> Callable[[IntArray, int], npt.NDArray[np.float64]]:
        within = fine[column] + 1e-12
        bins = maps[column] if column in maps else np.arange(sizes[column])
        within = within / np.bincount(bins, weights=within, minlength=coarse_size(column))[bins]

        def likelihood(which: IntArray, code: int) -> npt.NDArray[np.float64]:
            result: npt.NDArray[np.float64] = coarse_table[keys[which], bins[code]] * within[code]
            return result

        return likelihood

    codes: dict[str, IntArray] = {}
    if not cliques:
        raise InternalError("sample_junction needs at least one clique")
    root = cliques[0][0]
    root_table = np.asarray(marginal((root,)), dtype=np.float64)[None, :]
    keys = np.zeros(rows, dtype=np.int64)
    codes[root] = (exact_codes(exact[root], rng) if root in exact
                   else refine(root, _group_draw(keys, root_table, rng)))
    for clique in cliques:
        *parents, child = clique
        if child in codes:
            continue
        joint = np.asarray(marginal(tuple(clique)), dtype=np.float64)
        width = coarse_size(child)
        table = joint.reshape(-1, width)
        fallback = np.asarray(marginal((child,)), dtype=np.float64)
        row_sums = table.sum(axis=1, keepdims=True)
        table = np.where(row_sums > 1e-12, table / np.where(row_sums > 1e-12, row_sums, 1.0), fallback[None, :])
        keys = np.zeros(rows, dtype=np.int64)
        for parent in parents:
            keys = keys * coarse_size(parent) + coarse_of(parent, codes[parent])
        drawn = refine(child, _group_draw(keys, table, rng))
        if child in exact:
            drawn = adjust_to_counts(drawn, fine_likelihood(child, table, keys), exact[child], rng)
        codes[child] = drawn
    return codes
