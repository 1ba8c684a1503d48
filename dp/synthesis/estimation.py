"""Estimating a tree-structured model from post-processed noisy marginals.

The model is a forest (a Chow–Liu-style tree per connected component) whose edges are the measured
2-way marginals, added in the spec's order when they do not close a cycle (the structure is public:
it depends only on the spec). Each component's root is sampled from its 1-way marginal; each other
column from its parent's row of the 2-way table. Only noisy, post-processed counts come in.

>>> forest = spanning_forest(["a", "b", "c"], [("a", "b"), ("b", "c"), ("a", "c")])
>>> forest
[('a', None), ('b', 'a'), ('c', 'b')]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dprelease.dp.errors import InternalError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def spanning_forest(columns: Sequence[str], pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str | None]]:
    """Order the columns so each comes after its parent: ``[(column, parent or None), ...]``.

    Pairs are taken in order and skipped when they would close a cycle (Kruskal with a public
    order). Each component is rooted at its first column in ``columns`` order.
    """
    parent_of: dict[str, str] = {c: c for c in columns}

    def find(c: str) -> str:
        while parent_of[c] != c:
            parent_of[c] = parent_of[parent_of[c]]
            c = parent_of[c]
        return c

    adjacency: dict[str, list[str]] = {c: [] for c in columns}
    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra == rb:
            continue
        parent_of[ra] = rb
        adjacency[a].append(b)
        adjacency[b].append(a)
    order: list[tuple[str, str | None]] = []
    seen: set[str] = set()
    for root in columns:
        if root in seen:
            continue
        seen.add(root)
        queue: list[tuple[str, str | None]] = [(root, None)]
        while queue:
            node, parent = queue.pop(0)
            order.append((node, parent))
            for child in adjacency[node]:
                if child not in seen:
                    seen.add(child)
                    queue.append((child, node))
    return order


@dataclass(frozen=True)
class TreeModel:
    """A forest-structured distribution over encoded columns.

    Attributes:
        order: ``(column, parent)`` pairs, parents first.
        roots: Probabilities of each root column's codes.
        conditionals: For each non-root column, P(column | parent) as a (parent size × size) array.
    """

    order: tuple[tuple[str, str | None], ...]
    roots: Mapping[str, FloatArray]
    conditionals: Mapping[str, FloatArray]

    def edges(self) -> list[tuple[str, str]]:
        """The (parent, child) edges used."""
        return [(p, c) for c, p in self.order if p is not None]


def _normalise(counts: FloatArray) -> FloatArray:
    total = counts.sum()
    if total <= 0:
        return np.full(counts.shape, 1.0 / counts.size)
    out: FloatArray = counts / total
    return out


def fit_tree(
    columns: Sequence[str],
    sizes: Mapping[str, int],
    one_way: Mapping[str, IntArray],
    two_way: Mapping[tuple[str, str], IntArray],
) -> TreeModel:
    """Fit a forest model from consistent (non-negative) noisy marginals.

    Args:
        columns: Measured columns, in schema order.
        sizes: Domain size of each column.
        one_way: Post-processed 1-way counts of every column.
        two_way: Post-processed 2-way counts, flattened row-major as ``(a, b)``.

    Returns:
        The fitted model. A parent code whose row of the 2-way table is empty falls back to the
        child's 1-way distribution.
    """
    order = spanning_forest(columns, list(two_way))
    roots: dict[str, FloatArray] = {}
    conditionals: dict[str, FloatArray] = {}
    for column, parent in order:
        marginal = _normalise(one_way[column].astype(np.float64))
        if parent is None:
            roots[column] = marginal
            continue
        if (parent, column) in two_way:
            table = two_way[(parent, column)].reshape(sizes[parent], sizes[column]).astype(np.float64)
        elif (column, parent) in two_way:
            table = two_way[(column, parent)].reshape(sizes[column], sizes[parent]).T.astype(np.float64)
        else:  # pragma: no cover - spanning_forest only uses measured pairs
            raise InternalError(f"no 2-way marginal for edge {parent}-{column}")
        rows = table.sum(axis=1, keepdims=True)
        conditional = np.where(rows > 0, table / np.where(rows > 0, rows, 1.0), marginal[None, :])
        conditionals[column] = conditional
    return TreeModel(tuple(order), roots, conditionals)
