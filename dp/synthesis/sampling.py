"""Sampling synthetic rows from a fitted model, and decoding codes back to values.

Sampling is post-processing: it sees only the model (estimated from noisy measurements) and a
seeded generator, whose seed the audit report records so a release can be reproduced.
Numeric values are decoded uniformly inside their bin (whole numbers for int columns); derived
columns are computed from their source column through the declared public mapping.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from dprelease.dp.errors import InternalError
from dprelease.dp.measurement.marginals import ColumnDomain
from dprelease.dp.synthesis.arrays import coarse_sizes

IntArray = npt.NDArray[np.int64]
CodeArray = npt.NDArray[np.integer[Any]]
"""Codes of one column, in the narrowest integer type that holds them (a 10M-row table's codes
take 20 MB a column instead of 80)."""


def narrow(codes: npt.NDArray[np.integer[Any]], size: int) -> CodeArray:
    """``codes`` (all below ``size``) in the narrowest signed integer type that holds them."""
    for dtype in (np.int8, np.int16, np.int32):
        if size <= np.iinfo(dtype).max:
            return codes.astype(dtype, copy=False)
    return codes.astype(np.int64, copy=False)


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


@dataclass(frozen=True)
class OutputColumn:
    """How to produce one output column.

    Attributes:
        name: Column name.
        type: ``int``, ``float`` or ``category``.
        domain: The encoding of a measured column, or None for a derived one.
        derived_from: The source column of a derived column.
        mapping: Source category -> value, for a number derived from a category.
        labels: Source category -> category, for a category derived from a category.
        ranges: (low, high, category) with [low, high) ascending, for a category derived from a number.
    """

    name: str
    type: str
    domain: ColumnDomain | None = None
    derived_from: str | None = None
    mapping: Mapping[str, float] | None = None
    labels: Mapping[str, str] | None = None
    ranges: tuple[tuple[float, float, str], ...] | None = None


def decode(
    codes: Mapping[str, CodeArray], columns: Sequence[OutputColumn], rows: int, rng: np.random.Generator
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
        if column.derived_from is None:
            raise InternalError(f"output column {column.name!r} has neither a domain nor a derivation")
        source = decoded[column.derived_from]
        if column.mapping is None:
            arrays[column.name] = _derived_category(column, source)
            continue
        keys = list(column.mapping)
        arrow_type = pa.int64() if column.type == "int" else pa.float64()
        mapped = pa.array([int(column.mapping[k]) if column.type == "int" else float(column.mapping[k]) for k in keys],
                          type=arrow_type)
        position = pc.index_in(source, value_set=pa.array(keys, type=pa.string()))  # null for a null source
        if position.null_count != source.null_count:
            raise InternalError(f"derived column {column.name!r}: a source category has no mapping")
        arrays[column.name] = mapped.take(position)
    table = pa.table({c.name: arrays[c.name] for c in columns})
    if table.num_rows != rows:
        raise InternalError("decoded table has the wrong number of rows")
    return table


def _derived_category(column: OutputColumn, source: pa.Array) -> pa.Array:
    """A category computed from its decoded source: by a mapping of categories, or by ranges of a number."""
    if column.labels is not None:
        keys = list(column.labels)
        position = pc.index_in(source, value_set=pa.array(keys, type=pa.string()))
        if position.null_count != source.null_count:
            raise InternalError(f"derived column {column.name!r}: a source category has no mapping")
        return pa.array([column.labels[k] for k in keys], type=pa.string()).take(position)
    if not column.ranges:
        raise InternalError(f"derived column {column.name!r} has neither a mapping nor ranges")
    values = np.asarray(pc.cast(source, pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False))
    lows = np.asarray([low for low, _, _ in column.ranges], dtype=np.float64)
    index = np.clip(np.searchsorted(lows, values, side="right") - 1, 0, len(lows) - 1)
    labels = pa.array([label for _, _, label in column.ranges], type=pa.string())
    null = np.isnan(values)
    return labels.take(pa.array(index, mask=null if null.any() else None))


def _decode_column(code: CodeArray, column: OutputColumn, rng: np.random.Generator) -> pa.Array:
    domain = column.domain
    assert domain is not None
    null = code == domain.null_code if domain.null_code is not None else np.zeros(len(code), dtype=bool)
    inner = np.where(null, 0, code)
    if domain.kind == "category":
        labels = pa.array(domain.categories, type=pa.string())
        return labels.take(pa.array(inner, mask=null if null.any() else None))  # a null index takes a null
    edges = np.asarray(domain.edges, dtype=np.float64)
    low, high = edges[inner], edges[inner + 1]
    if domain.points:  # a public value set: each bin is its value
        exact = pa.array(low.astype(np.int64) if domain.kind == "int" else low,
                         type=pa.int64() if domain.kind == "int" else pa.float64())
        return pc.if_else(pa.array(null), pa.nulls(len(code), exact.type), exact) if null.any() else exact
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


def _stable_order(keys: IntArray, groups: int) -> IntArray:
    """Row numbers sorted by key, stably.

    A radix sort when the keys fit in 16 bits (numpy's stable sort of narrow integers), so sorting
    10M rows takes a fraction of a second.
    """
    narrow = keys.astype(np.uint16) if groups <= 1 << 16 else keys
    return np.argsort(narrow, kind="stable").astype(np.int64)


def _alias_tables(weights: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], IntArray]:
    """Walker's alias tables of every row of ``weights`` (Vose's construction), for O(1) draws.

    A draw from row g: pick a column j uniformly; keep it with probability ``keep[g, j]``, else
    take ``alias[g, j]``. Each column's probability is exactly its weight's share of the row (up
    to float rounding).
    """
    groups, width = weights.shape
    keep = np.ones((groups, width), dtype=np.float64)
    alias = np.tile(np.arange(width, dtype=np.int64), (groups, 1))
    scaled = weights * (width / weights.sum(axis=1, keepdims=True))
    for g in range(groups):
        row = scaled[g].tolist()
        small = [j for j, x in enumerate(row) if x < 1.0]
        large = [j for j, x in enumerate(row) if x >= 1.0]
        while small and large:
            j, k = small.pop(), large[-1]
            keep[g, j], alias[g, j] = row[j], k
            row[k] -= 1.0 - row[j]
            if row[k] < 1.0:
                small.append(large.pop())
    return keep, alias


SYSTEMATIC_ROWS = 2_000_000
"""Tables of up to this many rows are sampled systematically within each group of parent values;
larger ones by independent draws. Systematic sampling keeps every group's counts within one of
their expectation, which matters at Adult's size (on 32,561 rows it lowers tvd1 from 0.0045 to
0.0012 without noise) but needs a fresh random order of all rows per column; above a few million
rows independent draws are within a fraction of a percent of the expectation in every group that
matters to a marginal, and take one pass instead of a shuffle."""


def _group_draw(keys: IntArray, table: npt.NDArray[np.float64], rng: np.random.Generator) -> IntArray:
    """For each row, a code drawn from ``table[key]``: systematically within each group of equal keys.

    The same draw as :func:`systematic_draw` in every group (one uniform per group; the points
    (u + 0..n-1) / n on the group's CDF), done for all groups at once: the rows are visited in a
    random order, sorted by key (so each group's rows are in random order), and each group's
    points are looked up in one CDF made of the groups' CDFs laid end to end (group g's shifted by
    g), so the cost is a few passes over the rows whatever the number of groups. Above
    :data:`SYSTEMATIC_ROWS` rows each row's point is an independent uniform instead.
    """
    rows = len(keys)
    if rows == 0:
        return np.zeros(0, dtype=np.int64)
    groups, width = table.shape
    weights = np.maximum(np.asarray(table, dtype=np.float64), 0.0)
    totals = weights.sum(axis=1)
    weights[totals <= 0] = 1.0  # a group with no mass: uniform, as systematic_draw does
    if rows > SYSTEMATIC_ROWS:
        keep, alias = _alias_tables(weights)
        column = np.minimum((rng.random(rows) * width).astype(np.int64), width - 1)
        cell = keys * width + column
        drawn: IntArray = np.where(rng.random(rows) < keep.ravel()[cell], column, alias.ravel()[cell])
        return drawn
    cdf = np.cumsum(weights, axis=1)
    cdf /= cdf[:, -1:]
    cdf[:, -1] = 1.0
    flat_cdf = (cdf + np.arange(groups, dtype=np.float64)[:, None]).ravel()
    shuffled = rng.permutation(rows)
    order = shuffled[_stable_order(keys[shuffled], groups)]
    ordered = keys[order]
    sizes = np.bincount(ordered, minlength=groups)
    starts = np.cumsum(sizes) - sizes
    within = np.arange(rows, dtype=np.float64) - starts[ordered]
    offsets: npt.NDArray[np.float64] = np.asarray(rng.random(groups), dtype=np.float64)
    points = ordered + (offsets[ordered] + within) / sizes[ordered]
    flat = np.searchsorted(flat_cdf, points, side="right")
    codes = np.clip(flat - ordered * width, 0, width - 1)
    out = np.empty(rows, dtype=np.int64)
    out[order] = codes
    return out


def _top(values: npt.NDArray[np.float64], count: int, rng: np.random.Generator) -> npt.NDArray[np.bool_]:
    """A mask of ``count`` entries with the largest values, ties at the threshold broken at random.

    A partition, not a sort: linear in the number of entries.
    """
    chosen = np.zeros(len(values), dtype=np.bool_)
    if count <= 0:
        return chosen
    if count >= len(values):
        chosen[:] = True
        return chosen
    threshold = np.partition(values, len(values) - count)[len(values) - count]
    chosen = np.asarray(values > threshold, dtype=np.bool_)
    tied = np.flatnonzero(values == threshold)
    chosen[rng.choice(tied, size=count - int(np.count_nonzero(chosen)), replace=False)] = True
    return chosen


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
    # A code that receives rows never has too many afterwards, so the rows of a code that gives
    # rows are its original rows less those it gave: group the rows by code once (radix sort).
    order = _stable_order(out, len(targets))
    ends = np.cumsum(np.bincount(out, minlength=len(targets)))
    members = {c: order[ends[c] - n:ends[c]] for c, n in enumerate(np.bincount(out, minlength=len(targets)))
               if difference[c] > 0}
    while difference.any():
        source = int(np.argmax(difference))
        target = int(np.argmin(difference))
        moves = int(min(difference[source], -difference[target]))
        rows = members[source]
        ratio = likelihood(rows, target) / np.maximum(likelihood(rows, source), 1e-300)
        moving = _top(ratio, moves, rng)
        out[rows[moving]] = target
        members[source] = rows[~moving]
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
) -> dict[str, CodeArray]:
    """Fine codes of ``rows`` rows drawn from a fitted junction-tree model, parents before children.

    Args:
        cliques: (parents..., child) in sampling order; the first clique's first column is a root, and
            a 1-clique ``(root,)`` is one (a forest has one per component). A root is drawn from its
            1-way distribution.
        marginal: The fitted model's distribution over a tuple of columns (inside one clique), in
            coarse codes.
        sizes: The fine size of every column.
        maps: Fine-to-coarse maps of coarsened columns (others are not coarsened).
        fine: Post-processed noisy fine 1-way distribution of every column: a coarse code is refined
            to a fine code in proportion to it.
        rows: How many rows.
        rng: The seeded generator of sampling.
        exact: Columns whose fine codes must appear exactly so many times (published hierarchy leaf
            counts; each sums to ``rows``): a root is drawn with exactly these counts in random order,
            any other column adjusted as soon as it is drawn, before its children.

    Returns:
        Fine codes per column.

    Raises:
        InternalError: If there is no clique, a clique comes before a parent's, or exact counts are not a
            model column's or do not sum to ``rows``.
    """
    exact = exact or {}
    if not cliques:
        raise InternalError("sample_junction needs at least one clique")
    modelled = {c for clique in cliques for c in clique}
    for column, counts in exact.items():
        if column not in modelled or int(np.sum(counts)) != rows:
            raise InternalError(f"exact counts of {column!r} must be a model column's and sum to the row count")

    coarse_size = coarse_sizes(sizes, maps)

    def coarse_of(column: str, codes: CodeArray) -> CodeArray:
        return maps[column][codes] if column in maps else codes

    def within(column: str) -> npt.NDArray[np.float64]:
        """Each fine code's share of its coarse bin, from the post-processed fine 1-way distribution."""
        mass = fine[column] + 1e-12
        bins = maps[column] if column in maps else np.arange(sizes[column])
        out: npt.NDArray[np.float64] = mass / np.bincount(bins, weights=mass, minlength=coarse_size[column])[bins]
        return out

    def fine_table(column: str, coarse_table: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """P(fine code | parents) = P(its coarse bin | parents) x its share of the bin: one draw, no refining."""
        if column not in maps:
            return coarse_table
        out: npt.NDArray[np.float64] = coarse_table[:, maps[column]] * within(column)[None, :]
        return out

    def fine_likelihood(
        table: npt.NDArray[np.float64], keys: IntArray
    ) -> Callable[[IntArray, int], npt.NDArray[np.float64]]:
        def likelihood(which: IntArray, code: int) -> npt.NDArray[np.float64]:
            result: npt.NDArray[np.float64] = table[keys[which], code]
            return result

        return likelihood

    codes: dict[str, CodeArray] = {}
    first = tuple(cliques[0])
    for clique in [first[:1], *cliques] if len(first) > 1 else cliques:
        *parents, child = clique
        if child in codes:
            continue
        if not parents:
            root_table = np.asarray(marginal((child,)), dtype=np.float64)[None, :]
            codes[child] = narrow(exact_codes(exact[child], rng) if child in exact
                                  else _group_draw(np.zeros(rows, dtype=np.int64), fine_table(child, root_table), rng),
                                  sizes[child])
            continue
        if any(parent not in codes for parent in parents):
            raise InternalError(f"sample_junction: a parent of {child!r} comes after it; this is a bug")
        joint = np.asarray(marginal(tuple(clique)), dtype=np.float64)
        width = coarse_size[child]
        table = joint.reshape(-1, width)
        fallback = np.asarray(marginal((child,)), dtype=np.float64)
        row_sums = table.sum(axis=1, keepdims=True)
        table = np.where(row_sums > 1e-12, table / np.where(row_sums > 1e-12, row_sums, 1.0), fallback[None, :])
        keys = np.zeros(rows, dtype=np.int64)
        for parent in parents:
            keys = keys * coarse_size[parent] + coarse_of(parent, codes[parent])
        table = fine_table(child, table)
        drawn = _group_draw(keys, table, rng)
        if child in exact:
            drawn = adjust_to_counts(drawn, fine_likelihood(table, keys), exact[child], rng)
        codes[child] = narrow(drawn, sizes[child])
    return codes
