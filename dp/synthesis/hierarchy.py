"""A hierarchy of public labels: a tree cut into levels, from the total down to the finest cells.

A :class:`HierarchyTree` is a tree cut into levels: level 0 is the root (one node, the total) and every node of a
later level has exactly one parent in the level above. Noisy counts are given per level, as one float array
per level in node order; :mod:`dp.synthesis.consistency` makes them consistent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from dprelease.dp.errors import ParameterError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

NonnegativeMethod = Literal["project", "scale"]
LevelMapping = Mapping[str, str | None] | Sequence[tuple[str, str | None]]


def _frozen(array: npt.NDArray[np.int64]) -> IntArray:
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class HierarchyTree:
    """A tree of levels: level 0 holds the root alone; each node of level l + 1 has one parent in level l.

    Build it from parent indices (the constructor or :meth:`from_parents`), from fan-outs
    (:meth:`from_fanouts`) or from child-label -> parent-label mappings (:meth:`from_mappings`).
    Every node of a level other than the last must have at least one child: counts live on a fixed number
    of levels, so a leaf above the last level would have no cells below it to carry its count. A node's
    children need not be contiguous in its level's order. The parent arrays are stored read-only;
    hierarchies compare by identity.

    Example:
        >>> h = HierarchyTree.from_mappings([{"A": "total", "B": "total"}, {"a1": "A", "a2": "A", "b1": "B"}])
        >>> h.sizes
        (1, 2, 3)
        >>> h.parents[1].tolist()
        [0, 0, 1]
    """

    parents: tuple[IntArray, ...]
    """``parents[l][i]`` is the index in level l of the parent of node i of level l + 1 (read-only arrays)."""

    labels: tuple[tuple[str, ...], ...] | None = None
    """Optional public labels, one tuple per level (the root's included), unique across the whole tree."""

    child_counts: tuple[IntArray, ...] = field(init=False, repr=False)
    """``child_counts[l][i]`` is the number of children of node i of level l (levels 0 .. last - 1)."""

    def __post_init__(self) -> None:
        parents: list[IntArray] = []
        counts: list[IntArray] = []
        size = 1
        for level, raw in enumerate(self.parents, start=1):
            array = np.asarray(raw)
            if array.ndim != 1:
                raise ParameterError(
                    f"HierarchyTree: parents[{level - 1}] (shape {array.shape}) must be one-dimensional")
            if array.size == 0:
                raise ParameterError(f"HierarchyTree: level {level} (0 nodes) must have at least one node")
            if not np.issubdtype(array.dtype, np.integer):
                raise ParameterError(f"HierarchyTree: parents[{level - 1}] (dtype {array.dtype}) must hold integers")
            index = array.astype(np.int64)
            low, high = int(index.min()), int(index.max())
            if low < 0:
                node = int(np.argmax(index < 0))
                raise ParameterError(
                    f"HierarchyTree: parents[{level - 1}][{node}] ({index[node]}) must be a node of level {level - 1} "
                    f"(0..{size - 1}); node {node} of level {level} has no parent"
                )
            if high >= size:
                node = int(np.argmax(index >= size))
                raise ParameterError(
                    f"HierarchyTree: parents[{level - 1}][{node}] ({index[node]}) must be a node of level {level - 1} "
                    f"(0..{size - 1}); the index is out of range"
                )
            count = np.bincount(index, minlength=size).astype(np.int64)
            if not count.all():
                node = int(np.argmin(count))
                raise ParameterError(
                    f"HierarchyTree: level {level - 1} node {node} (0 children) must have at least one child, as level "
                    f"{level - 1} is not the last level; {int((count == 0).sum())} node(s) of level {level - 1} "
                    "have none"
                )
            parents.append(_frozen(index))
            counts.append(_frozen(count))
            size = index.size
        object.__setattr__(self, "parents", tuple(parents))
        object.__setattr__(self, "child_counts", tuple(counts))
        if self.labels is not None:
            self._check_labels(self.labels)

    def _check_labels(self, labels: tuple[tuple[str, ...], ...]) -> None:
        if len(labels) != len(self.sizes):
            raise ParameterError(f"HierarchyTree: labels ({len(labels)} levels) must have {len(self.sizes)} levels")
        seen: dict[str, int] = {}
        for level, (names, size) in enumerate(zip(labels, self.sizes, strict=True)):
            if len(names) != size:
                raise ParameterError(f"HierarchyTree: labels[{level}] ({len(names)} labels) must have {size} labels")
            for name in names:
                if name in seen:
                    raise ParameterError(
                        f"HierarchyTree: level {level}: label {name!r} (already a node of level {seen[name]}) "
                        "must be unique; duplicate label"
                    )
                seen[name] = level
        object.__setattr__(self, "labels", tuple(tuple(names) for names in labels))

    @classmethod
    def from_parents(
        cls, parents: Sequence[npt.ArrayLike], labels: Sequence[Sequence[str]] | None = None
    ) -> HierarchyTree:
        """A hierarchy from per-level parent indices.

        Args:
            parents: ``parents[l][i]`` is the index in level l of the parent of node i of level l + 1.
                A negative index means "no parent" and is rejected.
            labels: Optional public labels, one sequence per level including the root's.

        Returns:
            The validated hierarchy.

        Raises:
            ParameterError: If a level is empty, a node has no parent, an index is out of range, a node above
                the last level has no child, or labels are missing or duplicated.

        Example:
            >>> HierarchyTree.from_parents([[0, 0, 0], [2, 0, 1, 1]]).child_counts[1].tolist()
            [1, 2, 1]
        """
        arrays = tuple(np.asarray(p) for p in parents)
        names = None if labels is None else tuple(tuple(level) for level in labels)
        return cls(arrays, names)

    @classmethod
    def from_fanouts(cls, fanouts: Sequence[int | Sequence[int] | npt.NDArray[np.integer]]) -> HierarchyTree:
        """A hierarchy whose children are numbered parent by parent.

        Args:
            fanouts: One entry per level below the root: an int (every node of the level above has that many
                children) or one child count per node of the level above.

        Returns:
            The validated hierarchy.

        Raises:
            ParameterError: If a fan-out is below one or an array has the wrong length.

        Example:
            >>> HierarchyTree.from_fanouts([2, [1, 3]]).parents[1].tolist()
            [0, 1, 1, 1]
        """
        parents: list[IntArray] = []
        size = 1
        for level, fanout in enumerate(fanouts):
            counts = np.broadcast_to(np.asarray(fanout), (size,)) if np.ndim(fanout) == 0 else np.asarray(fanout)
            if counts.shape != (size,):
                raise ParameterError(
                    f"HierarchyTree: fanouts[{level}] ({counts.size} entries) must have {size} entries, "
                    f"one per node of level {level}"
                )
            if not np.issubdtype(counts.dtype, np.integer) or (counts.size and int(counts.min()) < 1):
                raise ParameterError(f"HierarchyTree: fanouts[{level}] must be integers of at least 1")
            parents.append(np.repeat(np.arange(size, dtype=np.int64), counts.astype(np.int64)))
            size = int(parents[-1].size)
        return cls(tuple(parents))

    @classmethod
    def from_mappings(cls, levels: Sequence[LevelMapping], *, root: str = "total") -> HierarchyTree:
        """A labelled hierarchy from one child-label -> parent-label mapping per level below the root.

        Nodes of each level are numbered in the mapping's order. Labels are unique across the whole tree.

        Args:
            levels: ``levels[l]`` maps each label of level l + 1 to a label of level l (``root`` for l = 0),
                as a mapping or as a sequence of (child, parent) pairs. ``None`` as a parent means "no parent"
                and is rejected.
            root: The root's label.

        Returns:
            The validated hierarchy, with ``labels`` set.

        Raises:
            ParameterError: If a label has no parent or an unknown one, is mapped twice, is its own ancestor
                (a cycle), appears twice in the tree, if a level is empty, or a node above the last level has
                no child.

        Example:
            >>> h = HierarchyTree.from_mappings([[("CA", "US"), ("NV", "US")], {"LA": "CA", "SF": "CA", "Reno": "NV"}],
            ...                             root="US")
            >>> h.labels
            (('US',), ('CA', 'NV'), ('LA', 'SF', 'Reno'))
        """
        where: dict[str, tuple[int, int]] = {root: (0, 0)}
        labels: list[list[str]] = [[root]]
        parents: list[list[int]] = []

        def ancestors(level: int, index: int) -> list[str]:
            chain = [labels[level][index]]
            while level > 0:
                index = parents[level - 1][index]
                level -= 1
                chain.append(labels[level][index])
            return chain

        for depth, mapping in enumerate(levels, start=1):
            pairs = list(mapping.items()) if isinstance(mapping, Mapping) else list(mapping)
            if not pairs:
                raise ParameterError(f"HierarchyTree: level {depth} (0 nodes) must have at least one node")
            names: list[str] = []
            indices: list[int] = []
            mapped: dict[str, str | None] = {}
            for child, parent in pairs:
                if child in mapped:
                    raise ParameterError(
                        f"HierarchyTree: level {depth}: label {child!r} (mapped twice, to {mapped[child]!r} and "
                        f"{parent!r}) must have exactly one parent"
                    )
                mapped[child] = parent
                found = where.get(parent) if parent is not None else None
                if child in where:
                    level, _ = where[child]
                    if found is not None and child in ancestors(*found):
                        raise ParameterError(
                            f"HierarchyTree: level {depth}: label {child!r} (an ancestor of itself) must not appear "
                            f"below itself; the mapping has a cycle"
                        )
                    raise ParameterError(
                        f"HierarchyTree: level {depth}: label {child!r} (already a node of level {level}) must be "
                        "unique; duplicate label"
                    )
                if found is None or found[0] != depth - 1:
                    raise ParameterError(
                        f"HierarchyTree: level {depth}: parent of {child!r} ({parent!r}) must be a label of level "
                        f"{depth - 1}; {child!r} has no parent there"
                    )
                where[child] = (depth, len(names))
                names.append(child)
                indices.append(found[1])
            labels.append(names)
            parents.append(indices)
        arrays = tuple(np.asarray(p, dtype=np.int64) for p in parents)
        return cls(arrays, tuple(tuple(names) for names in labels))

    @property
    def sizes(self) -> tuple[int, ...]:
        """The number of nodes of each level, the root's (1) first."""
        return (1, *(int(p.size) for p in self.parents))

    @property
    def n_levels(self) -> int:
        """The number of levels, the root's included."""
        return len(self.parents) + 1

    def aggregate(self, leaves: npt.ArrayLike) -> list[FloatArray]:
        """Every level's sums of the given leaf values (a consistent tree).

        Args:
            leaves: One value per node of the last level.

        Returns:
            One float array per level, each node the sum of the leaves below it.

        Raises:
            ParameterError: If ``leaves`` has the wrong length.

        Example:
            >>> [x.tolist() for x in HierarchyTree.from_fanouts([2, 2]).aggregate([1, 2, 3, 4])]
            [[10.0], [3.0, 7.0], [1.0, 2.0, 3.0, 4.0]]
        """
        bottom = np.asarray(leaves, dtype=np.float64)
        if bottom.shape != (self.sizes[-1],):
            raise ParameterError(f"leaves (shape {bottom.shape}) must have shape ({self.sizes[-1]},)")
        out = [bottom.copy()]
        for level in range(len(self.parents) - 1, -1, -1):
            out.append(_family_sums(self, level, out[-1]))
        return out[::-1]


def _family_sums(hierarchy: HierarchyTree, level: int, values: FloatArray) -> FloatArray:
    """For each node of ``level``, the sum of ``values`` over its children (nodes of ``level + 1``)."""
    sums = np.bincount(hierarchy.parents[level], weights=values, minlength=hierarchy.sizes[level])
    return np.asarray(sums, dtype=np.float64)
