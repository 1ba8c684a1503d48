"""The fit's inner loop on flat arrays: calibration in probability space and the loss and gradient in one pass.

:func:`dp.synthesis.junction.estimate` evaluates thousands of times per release the clique marginals of a
junction tree under its log-potentials and the weighted squared error of the noisy measurements with its
gradient. On Adult and ACS MA the cliques hold 10-20 thousand cells in 13-22 arrays, so the cost was Python and
numpy's per-call overhead, not arithmetic. Here every clique's cells live in one flat vector (clique ``i`` at
``offsets[i]:offsets[i + 1]``, in its columns' order), and:

- calibration is sum-product in probability space: one ``exp`` of the flat log-potentials (each clique shifted
  by its maximum), messages as plain sums rescaled to a maximum of 1, instead of a log-sum-exp per message. Where
  a message underflows to 0 (log-potentials more than about 700 apart in one clique) the result is not finite,
  and the log-space calibration (:meth:`JunctionTree.calibrate`) is used instead: the same marginals up to
  rounding either way;
- every measurement's marginal is one ``bincount`` over precomputed cell indices (each host cell's index in
  each of its measurements), and the gradient another.

Post-processing of noisy measurements only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from dprelease.dp.synthesis.arrays import FloatArray
from dprelease.dp.synthesis.arrays import align as _align
from dprelease.dp.synthesis.arrays import sum_to as _sum_to

if TYPE_CHECKING:
    from dprelease.dp.synthesis.junction import JunctionTree, Marginal


class FlatLoss:
    """The loss L = Σ_i ||N · M_i(mu) - y_i||² / (2 v_i) of a junction tree's log-potentials, on flat arrays.

    Attributes:
        offsets: Where each clique's cells start in the flat vector (and, last, the number of cells).
    """

    def __init__(self, tree: JunctionTree, marginals: Sequence[Marginal], hosts: Sequence[int], scale: float):
        self.tree = tree
        self.scale = scale
        self.shapes = [tree.shape(i) for i in range(len(tree.cliques))]
        sizes = [int(np.prod(s, dtype=np.int64)) for s in self.shapes]
        self.offsets: npt.NDArray[np.int64] = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        sources, targets, values, weights = [], [], [], []
        start = 0
        for m, host in zip(marginals, hosts, strict=True):
            clique = tree.cliques[host]
            grid = np.indices(self.shapes[host]).reshape(len(clique), -1)
            sources.append(np.arange(self.offsets[host], self.offsets[host + 1], dtype=np.int64))
            coords = tuple(grid[clique.index(c)] for c in m.columns)
            targets.append(start + np.ravel_multi_index(coords, m.values.shape) if coords else
                           np.full(sizes[host], start, dtype=np.int64))
            values.append(np.asarray(m.values, dtype=np.float64).ravel())
            weights.append(np.broadcast_to(scale / np.asarray(m.variance, dtype=np.float64), m.values.shape).ravel())
            start += m.values.size
        empty = np.zeros(0, dtype=np.int64)
        self.sources = np.concatenate(sources) if sources else empty
        self.targets = np.concatenate(targets) if targets else empty
        self.values: FloatArray = np.concatenate(values) if values else np.zeros(0)
        self.weights: FloatArray = np.concatenate(weights) if weights else np.zeros(0)
        self.cells = int(self.offsets[-1])
        self.owner = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
        """The clique of every cell."""

    def flatten(self, potentials: Sequence[FloatArray]) -> FloatArray:
        """One flat vector of the cliques' log-potentials."""
        return np.concatenate([np.asarray(p, dtype=np.float64).ravel() for p in potentials])

    def views(self, flat: FloatArray) -> list[FloatArray]:
        """The cliques' arrays as views into a flat vector."""
        return [flat[self.offsets[i]:self.offsets[i + 1]].reshape(s) for i, s in enumerate(self.shapes)]

    def calibrate(self, flat: FloatArray) -> FloatArray:
        """The normalised marginal of every clique (flat) under flat log-potentials (two-pass sum-product)."""
        tree = self.tree
        starts = self.offsets[:-1]
        peaks = np.maximum.reduceat(flat, starts)
        buffer: FloatArray = np.exp(flat - peaks[self.owner])
        cliques = self.views(buffer)
        upward: list[FloatArray] = [buffer] * len(cliques)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            for i in reversed(range(len(cliques))):  # leaves to roots: every child comes after its parent
                parent = tree.parents[i]
                if parent is not None:
                    message = _sum_to(cliques[i], tree.cliques[i], tree.separators[i])
                    message = message / message.max()
                    upward[i] = message
                    cliques[parent] *= _align(message, tree.separators[i], tree.cliques[parent])
            for i in range(len(cliques)):  # roots to leaves
                parent = tree.parents[i]
                if parent is not None:
                    down = _sum_to(cliques[parent], tree.cliques[parent], tree.separators[i]) / upward[i]
                    cliques[i] *= _align(down, tree.separators[i], tree.cliques[i])
                cliques[i] /= cliques[i].sum()
        if np.isfinite(buffer).all():
            return buffer
        return self.flatten([np.exp(b) for b in tree.calibrate(self.views(flat))])

    def __call__(self, flat: FloatArray) -> tuple[float, FloatArray, FloatArray]:
        """The loss, its gradient with respect to the clique marginals (flat) and the marginals (flat)."""
        probabilities = self.calibrate(flat)
        model = np.bincount(self.targets, weights=probabilities[self.sources], minlength=self.values.size)
        residual = model * self.scale - self.values
        weighted = residual * self.weights
        loss = 0.5 * float((residual * weighted).sum()) / self.scale  # not BLAS: its threads cost more than the sum
        gradient = np.bincount(self.sources, weights=weighted[self.targets], minlength=self.cells)
        return loss, gradient.astype(np.float64, copy=False), probabilities
