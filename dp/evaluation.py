"""The utility yardstick: how close a synthetic table is to the real one.

INTERNAL ONLY: these figures are computed from the raw table without noise. They go to the
steward's internal report and to benchmarks, never into a public release.

Total variation distance (½ · L1 between normalised histograms) averaged over all 1-way and all
2-way marginals (and a fixed random sample of 3-way marginals). Numeric columns are cut into 16
bins at the *real* data's quantiles (evaluation only); a null is a bin of its own.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

IntArray = npt.NDArray[np.int64]


def _codes(
    real: pa.ChunkedArray, synthetic: pa.ChunkedArray, bins: int
) -> tuple[IntArray, IntArray, int, list[str]]:
    """Common evaluation codes of one column in both tables; returns the code count and labels too."""
    if pa.types.is_integer(real.type) or pa.types.is_floating(real.type):
        r = np.asarray(pc.cast(real, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
        s = np.asarray(pc.cast(synthetic, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
        finite = r[~np.isnan(r)]
        edges = np.unique(np.quantile(finite, np.linspace(0, 1, bins + 1)[1:-1])) if finite.size else np.array([])
        size = len(edges) + 2  # bins, plus null
        rc = np.where(np.isnan(r), size - 1, np.searchsorted(edges, r, side="right"))
        sc = np.where(np.isnan(s), size - 1, np.searchsorted(edges, s, side="right"))
        cuts = [f"{x:g}" for x in edges]
        labels = [f"< {cuts[0]}"] + [f"[{a}, {b})" for a, b in itertools.pairwise(cuts)] + [f">= {cuts[-1]}"] \
            if cuts else ["all"]
        return rc.astype(np.int64), sc.astype(np.int64), size, [*labels, "<null>"]
    both = pa.chunked_array(real.chunks + synthetic.chunks, type=real.type) if synthetic.type == real.type else \
        pa.chunked_array(real.chunks + pc.cast(synthetic, real.type).chunks)
    encoded = pc.dictionary_encode(both).combine_chunks()
    indices = np.asarray(encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
    size = len(encoded.dictionary) + 1
    indices = np.where(indices < 0, size - 1, indices)
    labels = [str(x) for x in encoded.dictionary.to_pylist()] + ["<null>"]
    return indices[: len(real)], indices[len(real):], size, labels


@dataclass(frozen=True)
class UtilityReport:
    """Mean TVDs and the per-marginal TVDs behind them (internal)."""

    tvd1: float
    tvd2: float
    tvd3: float | None
    one_way: dict[str, float]
    two_way: dict[str, float]
    histograms: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    """Per column: evaluation-bin ``labels`` and the ``real`` and ``synthetic`` relative frequencies."""

    def to_dict(self) -> dict[str, object]:
        """JSON-friendly form."""
        return {
            "tvd1": self.tvd1, "tvd2": self.tvd2, "tvd3": self.tvd3,
            "one_way": self.one_way, "two_way": self.two_way, "histograms": self.histograms,
        }


def _frequencies(codes: IntArray, size: int) -> list[float]:
    counts = np.bincount(codes, minlength=size).astype(np.float64)
    return [float(x) for x in counts / max(counts.sum(), 1.0)]


def _tvd(a: IntArray, b: IntArray, size: int) -> float:
    p = np.bincount(a, minlength=size).astype(np.float64)
    q = np.bincount(b, minlength=size).astype(np.float64)
    p /= max(p.sum(), 1.0)
    q /= max(q.sum(), 1.0)
    return float(0.5 * np.abs(p - q).sum())


def utility(
    real: pa.Table, synthetic: pa.Table, columns: Sequence[str], *, bins: int = 16, three_way: int = 300, seed: int = 0
) -> UtilityReport:
    """TVD yardstick between ``real`` and ``synthetic`` over ``columns``."""
    coded = {c: _codes(real.column(c), synthetic.column(c), bins) for c in columns}
    one = {c: _tvd(rc, sc, size) for c, (rc, sc, size, _) in coded.items()}
    histograms: dict[str, dict[str, list[Any]]] = {
        c: {"labels": list(labels), "real": _frequencies(rc, size), "synthetic": _frequencies(sc, size)}
        for c, (rc, sc, size, labels) in coded.items()
    }

    def joint(cols: Sequence[str]) -> float:
        rflat = np.zeros(real.num_rows, dtype=np.int64)
        sflat = np.zeros(synthetic.num_rows, dtype=np.int64)
        size = 1
        for c in cols:
            rc, sc, k, _ = coded[c]
            rflat, sflat, size = rflat * k + rc, sflat * k + sc, size * k
        return _tvd(rflat, sflat, size)

    two = {f"{a}|{b}": joint((a, b)) for a, b in itertools.combinations(columns, 2)}
    triples = list(itertools.combinations(columns, 3))
    tvd3: float | None = None
    if triples and three_way > 0:
        chooser = np.random.default_rng(seed)  # evaluation only, not noise: sampling which 3-way marginals to score
        picks = chooser.choice(len(triples), size=min(three_way, len(triples)), replace=False)
        tvd3 = float(np.mean([joint(triples[i]) for i in picks]))
    return UtilityReport(
        tvd1=float(np.mean(list(one.values()))),
        tvd2=float(np.mean(list(two.values()))) if two else 0.0,
        tvd3=tvd3,
        one_way=one,
        two_way=two,
        histograms=histograms,
    )
