"""Array helpers of the junction-tree fit: log-sum-exp and marginalising or aligning tables over named axes.

A table over columns ``("a", "b")`` is an array with one axis per column; :func:`sum_to` sums it onto a
subset of its columns in a given order, :func:`align` lays a table out over a superset of its columns
(size-1 axes where missing) so that it broadcasts. The axis bookkeeping of each pair of column tuples is
computed once and cached: the fit calls these thousands of times per release on small arrays, where the
Python overhead, not the arithmetic, dominated. :func:`coarse_sizes` gives the columns' sizes in coarse codes
(the cliques stage, the fit, sampling and the cross stage each needed them).

>>> sum_to(np.arange(6.0).reshape(2, 3), ("a", "b"), ("b",)).tolist()
[3.0, 5.0, 7.0]
>>> align(np.array([1.0, 2.0]), ("a",), ("b", "a")).shape
(1, 2)
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def coarse_sizes(sizes: Mapping[str, int], maps: Mapping[str, npt.NDArray[np.integer[Any]]]) -> dict[str, int]:
    """Every column's size in coarse codes: its fine-to-coarse map's codes if it has one, else its own size.

    >>> coarse_sizes({"a": 5, "b": 3}, {"a": np.array([0, 0, 1, 1, 2])})
    {'a': 3, 'b': 3}
    """
    return {n: int(maps[n].max()) + 1 if n in maps else size for n, size in sizes.items()}


def logsumexp(array: FloatArray, axis: int | tuple[int, ...] | None = None) -> FloatArray:
    """The logarithm of Σ exp(array) over ``axis`` (all axes when None), stably; finite inputs.

    The same value as ``scipy.special.logsumexp`` without its per-call overhead, which dominated the
    fit (thousands of calls on small arrays per release).
    """
    peak = array.max(axis=axis, keepdims=True)
    out: FloatArray = np.log(np.exp(array - peak).sum(axis=axis, keepdims=True)) + peak
    return out.reshape(()) if axis is None else out.squeeze(axis=axis)


@functools.lru_cache(maxsize=4096)
def _align_plan(source: tuple[str, ...], target: tuple[str, ...]) -> tuple[tuple[int, ...], tuple[int | None, ...]]:
    """The axis order of :func:`align`, and for each target axis the source axis it takes its size from."""
    order = tuple(source.index(v) for v in target if v in source)
    return order, tuple(source.index(v) if v in source else None for v in target)


def align(array: FloatArray, source: tuple[str, ...], target: tuple[str, ...]) -> FloatArray:
    """``array`` over ``source`` laid out over ``target`` (a superset), with size-1 axes where missing."""
    order, sizes = _align_plan(source, target)
    moved = np.transpose(array, order)
    out: FloatArray = moved.reshape([1 if a is None else array.shape[a] for a in sizes])
    return out


@functools.lru_cache(maxsize=4096)
def _sum_plan(source: tuple[str, ...], keep: tuple[str, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The axes that :func:`sum_to` sums out, and the order of the remaining ones."""
    axes = tuple(i for i, v in enumerate(source) if v not in keep)
    remaining = tuple(v for v in source if v in keep)
    return axes, tuple(remaining.index(v) for v in keep)


def sum_to(array: FloatArray, source: tuple[str, ...], keep: tuple[str, ...], *, log: bool = False) -> FloatArray:
    """Marginalise ``array`` over ``source`` onto ``keep`` (in ``keep``'s order); log-sum-exp in log space."""
    axes, order = _sum_plan(source, keep)
    summed = (logsumexp(array, axis=axes) if log else array.sum(axis=axes)) if axes else array
    if order == tuple(range(len(order))):
        return summed
    out: FloatArray = np.transpose(summed, order)
    return out
