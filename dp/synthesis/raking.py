"""Raking a pool of synthetic rows to noisy pair tables: the model's pairs across the junction tree's branches.

A junction tree holds a pair only inside one clique; a pair whose columns lie in different branches is
whatever the tree's path between them makes of it (``docs/research/synthesis.md`` §7). A *pool* of rows drawn
from the fitted model can hold such pairs: its row weights are raked (iterative proportional fitting) so that
the weighted pool's table of each measured cross pair matches a target made from that pair's noisy table, and
the synthetic table is drawn from the weighted pool. Raking finds the weights closest to uniform in
Kullback-Leibler divergence that meet the targets (Deming & Stephan 1940; Csiszár 1975): the pool's law times
one factor per pair, a Monte Carlo stand-in for the model with the pairs as extra cliques. Everything here is
post-processing of DP outputs (the fitted model, the noisy tables) with a seeded generator: it sees no row.

Each target keeps the model's margins and takes only the pair's association from its noisy table
(:func:`pair_target`): the 1-ways were measured with more budget than one cross pair, and targets with
conflicting margins would make the sweeps oscillate.

>>> target = pair_target(np.array([[40, -3], [5, 60]]), np.array([0.5, 0.5]), np.array([0.5, 0.5]))
>>> bool(np.allclose(target.sum(axis=1), 0.5) and np.allclose(target.sum(axis=0), 0.5))
True
>>> weights = rake([np.array([0, 1, 2, 3, 0, 3])], [np.array([0.4, 0.1, 0.1, 0.4])], np.ones(6))
>>> [round(float(w), 3) for w in weights]
[0.2, 0.1, 0.1, 0.2, 0.2, 0.2]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from dprelease.dp.errors import InternalError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

SWEEPS = 30
"""At most so many sweeps of iterative proportional fitting over the measured pairs (the counterfactual's:
enough for the tables to settle; see :data:`SETTLED`)."""

SETTLED = 1e-4
"""Raking stops early once a sweep finds the tables within this summed L1 distance of their targets, or that
distance moving by less than this from one sweep to the next (noisy targets that disagree are never all met)."""

MARGIN_SWEEPS = 500
"""At most so many sweeps fit one pair's target to the model's two margins (they stop once both are met to 1e-9;
a small table, so cheap; near-empty cells make the fit slow)."""

POOL_FACTOR = 10
"""The pool holds this many times the release's rows (the counterfactual's: §7.1) ..."""

POOL_ROWS = 4_000_000
"""... but no more rows than this, at least once the release's rows: a pool's codes are held in memory."""

FLOOR = 1e-3
"""A noisy cell at or below zero keeps this fraction of the model's own mass there, rather than none.

A zero target would remove every pool row of its cell for good, whatever later targets say; the noise of a
cross pair puts many small true cells below zero."""


def pool_factor(rows: int) -> int:
    """How many times the release's rows the pool holds (public: from the noisy row count).

    >>> pool_factor(45_000), pool_factor(1_300_000), pool_factor(9_000_000)
    (10, 3, 1)
    """
    return max(1, min(POOL_FACTOR, POOL_ROWS // max(rows, 1)))


def pair_target(noisy: npt.NDArray[np.integer] | FloatArray, margin_a: FloatArray, margin_b: FloatArray,
                model: FloatArray | None = None) -> FloatArray:
    """The target distribution of a pair: the noisy table's association with the model's margins.

    Args:
        noisy: The pair's noisy counts, shape (|a|, |b|) (negative cells allowed).
        margin_a: The model's distribution of ``a`` (sums to 1).
        margin_b: The model's distribution of ``b``.
        model: The model's own distribution of the pair (the floor of cells at or below zero is a share of it);
            the margins' product when None.

    Returns:
        A non-negative table of the same shape whose margins are ``margin_a`` and ``margin_b`` (as near as
        iterative fitting makes them where a margin's cell is empty in every other way).
    """
    table = np.asarray(noisy, dtype=np.float64)
    if table.shape != (len(margin_a), len(margin_b)):
        raise InternalError("a cross pair's noisy table does not match its columns' sizes")
    base = model if model is not None else np.outer(margin_a, margin_b)
    total = max(float(np.clip(table, 0, None).sum()), 1.0)
    out = np.where(table > 0, table / total, FLOOR * base)
    for _ in range(MARGIN_SWEEPS):
        rows = out.sum(axis=1)
        out *= np.where(rows > 0, margin_a / np.maximum(rows, 1e-300), 0.0)[:, None]
        cols = out.sum(axis=0)
        out *= np.where(cols > 0, margin_b / np.maximum(cols, 1e-300), 0.0)[None, :]
        if np.abs(out.sum(axis=1) - margin_a).max() < 1e-9:
            break
    return out / max(float(out.sum()), 1e-300)


def weighted_table(cells: IntArray, weights: FloatArray, size: int) -> FloatArray:
    """The weighted pool's distribution over ``size`` cells (sums to 1; zeros when the weights are all 0)."""
    table = np.bincount(cells, weights=weights, minlength=size).astype(np.float64)
    total = float(table.sum())
    return table / total if total > 0 else table


def rake(cells: Sequence[IntArray], targets: Sequence[FloatArray], weights: FloatArray,
         sweeps: int = SWEEPS) -> FloatArray:
    """Row weights, from ``weights``, whose weighted tables of ``cells`` match ``targets``; they sum to 1.

    ``cells[k]`` is each row's cell of pair k (flattened), ``targets[k]`` that pair's target distribution.
    A cell with target mass but no pool row keeps its target unmet (nothing to scale).
    """
    out = np.asarray(weights, dtype=np.float64).copy()
    out /= max(float(out.sum()), 1e-300)
    last = np.inf
    for _ in range(sweeps if cells else 0):
        moved = 0.0
        for cell, target in zip(cells, targets, strict=True):
            current = np.bincount(cell, weights=out, minlength=len(target))
            moved += float(np.abs(current - target).sum())
            factor = np.where(current > 0, target / np.maximum(current, 1e-300), 1.0)
            out *= factor[cell]
            out /= max(float(out.sum()), 1e-300)
        if moved < SETTLED or abs(last - moved) < SETTLED:  # met, or settled where noisy targets disagree
            break
        last = moved
    return out


def resample(weights: FloatArray, rows: int, rng: np.random.Generator, order: IntArray | None = None,
             strata: IntArray | None = None, counts: IntArray | None = None) -> IntArray:
    """Indices of ``rows`` pool rows drawn by systematic resampling in proportion to ``weights``.

    The pool is walked in ``order`` (a public sort of its rows, e.g. by the model's columns parents first):
    systematic sampling along a sorted order is stratified sampling on the sort's leading columns, so their
    tables come out near their weighted shares instead of with a multinomial draw's spread. With ``strata``
    (each pool row's code of a column whose counts are published exactly) and ``counts`` (how many rows each
    code must have; they sum to ``rows``), each stratum is resampled on its own, so the drawn rows hold exactly
    those counts. A stratum whose weights are all 0 is drawn uniformly. The indices come in a random order.
    """
    walk = np.arange(len(weights)) if order is None else np.asarray(order, dtype=np.int64)
    if strata is None or counts is None:
        picked = walk[_systematic(weights[walk], rows, rng)]
    else:
        if int(np.sum(counts)) != rows:
            raise InternalError("exact counts must sum to the synthetic row count")
        grouped = walk[np.argsort(strata[walk], kind="stable")]  # by stratum, in ``order`` inside each
        starts = np.searchsorted(strata[grouped], np.arange(len(counts) + 1))
        parts = []
        for code, need in enumerate(counts):
            if need <= 0:
                continue
            members = grouped[starts[code]:starts[code + 1]]
            if len(members) == 0:
                raise InternalError("a stratum with exact counts has no pool row")
            local = weights[members]
            if float(local.sum()) <= 0:
                local = np.ones(len(members))
            parts.append(members[_systematic(local, int(need), rng)])
        picked = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return np.asarray(rng.permutation(picked), dtype=np.int64)


def anchored(cells: Sequence[IntArray], targets: Sequence[FloatArray], pool: Mapping[str, IntArray],
             sizes: Mapping[str, int], paired: Sequence[str] = ()) -> tuple[list[IntArray], list[FloatArray]]:
    """The pairs' cells and targets, followed by each other pool column's own 1-way as a target of its own.

    Raking a pair moves the 1-ways of the columns the pool ties to it; holding each column's 1-way at the
    unweighted pool's (the model's) keeps them where the 1-way measurements put them. The columns of the pairs
    (``paired``) need no anchor: their targets carry the model's margins already (:func:`pair_target`).
    """
    rows = len(next(iter(pool.values()))) if pool else 0
    free = [c for c in pool if c not in set(paired)]
    ones = [weighted_table(pool[c], np.ones(rows), sizes[c]) for c in free]
    return [*cells, *(pool[c] for c in free)], [*targets, *ones]


def sort_order(pool: Mapping[str, npt.NDArray[np.integer]], columns: Sequence[str]) -> IntArray:
    """The pool's rows sorted by ``columns`` (the first the leading key): the walk of :func:`resample`."""
    if not columns:
        return np.arange(len(next(iter(pool.values()))) if pool else 0, dtype=np.int64)
    return np.asarray(np.lexsort([pool[c] for c in reversed(columns)]), dtype=np.int64)


def _systematic(weights: FloatArray, rows: int, rng: np.random.Generator) -> IntArray:
    cumulative = np.cumsum(weights, dtype=np.float64)
    total = float(cumulative[-1]) if len(cumulative) else 0.0
    if rows <= 0:
        return np.zeros(0, dtype=np.int64)
    if total <= 0:
        raise InternalError("resampling needs positive weights")
    draws = (rng.random() + np.arange(rows)) * (total / rows)
    return np.minimum(np.searchsorted(cumulative, draws, side="right"), len(weights) - 1).astype(np.int64)


def coarse_codes(codes: Mapping[str, npt.NDArray[np.integer]], maps: Mapping[str, npt.NDArray[np.integer]],
                 columns: Sequence[str]) -> dict[str, IntArray]:
    """Each column's coarse code per row: fine codes through the column's fine-to-coarse map, if it has one."""
    return {c: np.asarray(maps[c][codes[c]] if c in maps else codes[c], dtype=np.int64) for c in columns}
