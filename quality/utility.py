"""The utility yardstick: how close a synthetic table is to the real one.

INTERNAL ONLY: these figures are computed from the raw table without noise. They go to the
steward's internal report and to benchmarks, never into a public release.

The definition is the evaluator's, ``shared/bench/utility.py``, line for line (a test checks that
both give the same figures): total variation distance (½ · L1 between normalised histograms)
averaged over every 1-way and 2-way marginal and over a fixed random sample of 300 3-way
marginals. A column whose real values are mostly numbers (at least half parse as a number) with
more than 16 distinct values is cut into up to 16 bins at the *real* data's quantiles; any value
that is not a number (a null, a code such as ``"N"``) keeps a label of its own. Other columns are
categories, numbers among them compared by their ``%g`` spelling (``1``, ``1.0`` and ``"1"`` are one
category).

The arithmetic cannot fail on extreme values: numbers are converted without overflow checks
(2⁵³ + 1 becomes the nearest double), and a joint marginal is counted over the cells that occur
(sorting the rows' keys), never over the product of the columns' sizes, so a column full of
unexpected labels costs memory in rows, not in cells.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

NULL_LABEL = "\u2205"
"""The label of a null (the evaluator's)."""


def _series(column: pa.ChunkedArray) -> pd.Series:
    """A column as pandas, as ``pandas.read_parquet`` gives it (nulls of an int column become NaN)."""
    return column.to_pandas()


@dataclass(frozen=True)
class _Text:
    """A text column (each value a ``str`` or null) by distinct value: a row's key depends on its value only."""

    rows: IntArray
    """Each row's distinct value (a null: the last one)."""
    values: npt.NDArray[np.object_]
    """The distinct strings, then the null if a row holds one."""
    numbers: FloatArray
    """Their numbers (NaN where not a number)."""


def _numbers(series: pd.Series) -> tuple[FloatArray, _Text | None]:
    """Every value as a double, NaN where it is not a number (no overflow check: this never raises).

    Text is parsed once per distinct value (``pandas.to_numeric`` is slow on strings, and a column
    repeats its values): the same function on the same values, so the same numbers. A column of
    ``str`` values and nulls comes with its distinct values (:class:`_Text`).
    """
    if pd.api.types.is_numeric_dtype(series.dtype):
        return _parsed(series), None
    codes, distinct = pd.factorize(series)  # nulls get -1 and parse as NaN
    parsed = _parsed(pd.Series(distinct, dtype=object))
    out = np.full(len(series), np.nan, dtype=np.float64)
    present = codes >= 0
    out[present] = parsed[codes[present]]
    values: list[Any] = list(distinct)
    if not all(type(v) is str for v in values):
        return out, None
    rows = np.asarray(codes, dtype=np.int64)
    if not present.all():
        rows = np.where(present, rows, len(values))
        values.append(None)
        parsed = np.append(parsed, np.nan)
    return out, _Text(rows, np.array(values, dtype=object), np.asarray(parsed, dtype=np.float64))


def _parsed(series: pd.Series) -> FloatArray:
    with np.errstate(all="ignore"):
        return np.asarray(pd.to_numeric(series, errors="coerce").astype(float).to_numpy(), dtype=np.float64)


def _labels(series: pd.Series) -> npt.NDArray[np.object_]:
    return np.asarray(series.astype(object).where(series.notna(), NULL_LABEL).astype(str).to_numpy(), dtype=object)


def _edges(real: FloatArray, max_bins: int) -> FloatArray | None:
    """Quantile bin edges when the real column is numeric (most values numbers, many distinct), else None."""
    finite = real[~np.isnan(real)]
    if real.size == 0 or finite.size / real.size < 0.5:
        return None
    distinct = np.unique(finite)
    if distinct.size <= max_bins:
        return None
    return np.asarray(np.unique(np.quantile(finite, np.linspace(0, 1, max_bins + 1))), dtype=np.float64)


def _spell(values: FloatArray) -> npt.NDArray[np.object_]:
    """``%g`` spellings of numbers, formatted once per distinct value."""
    distinct, inverse = np.unique(values, return_inverse=True)
    spelled = np.array([format(v, "g") for v in distinct.tolist()], dtype=object)
    return np.asarray(spelled[inverse.reshape(-1)], dtype=object)


def _spelled(values: FloatArray, edges: FloatArray | None) -> tuple[npt.NDArray[np.object_], BoolArray]:
    """Each value's bin, else its ``%g`` spelling; and where it is not a number (to be labelled instead)."""
    nan = np.isnan(values)
    if edges is not None:
        with np.errstate(all="ignore"):
            found = np.searchsorted(edges, np.where(nan, 0.0, values), side="right") - 1
        bin_index = np.clip(found, 0, len(edges) - 2)
        return np.array([f"#bin{i}" for i in range(len(edges) - 1)], dtype=object)[bin_index], nan
    return _spell(np.where(nan, 0.0, values)), nan


def _distinct_keys(
    series: pd.Series, values: FloatArray, text: _Text | None, edges: FloatArray | None
) -> tuple[IntArray, npt.NDArray[np.object_]]:
    """Each row's index into the distinct evaluation keys of its column, and those keys.

    A row's key is its bin, else its ``%g`` spelling, and where it is not a number its label (a
    null's is :data:`NULL_LABEL`). Text is keyed once per distinct value, except with a -0 among
    the numbers: :func:`_spell` keeps one of -0 and 0 (a NaN is spelled as 0 first), whichever its
    sort puts first among the values it is given, so only the same values give the same spelling.
    """
    if text is not None and not np.any((values == 0) & np.signbit(values)):
        keys, nan = _spelled(text.numbers, edges)
        keys[nan] = [NULL_LABEL if v is None else v for v in text.values[nan].tolist()]  # _labels of a str: itself
        return text.rows, keys
    keys, nan = _spelled(values, edges)
    if nan.any():  # a value that is not a number keeps its own label
        keys[nan] = _labels(series[nan])
    index, distinct = pd.factorize(keys)
    return np.asarray(index, dtype=np.int64), np.asarray(distinct, dtype=object)


def _codes(
    real: pa.ChunkedArray, synthetic: pa.ChunkedArray, bins: int
) -> tuple[IntArray, IntArray, int, list[str]]:
    """Common evaluation codes of one column in both tables; returns the code count and labels too."""
    rs, ss = _series(real), _series(synthetic)
    (rv, r_text), (sv, s_text) = _numbers(rs), _numbers(ss)
    with np.errstate(all="ignore"):  # infinities make NaN quantiles, as in the evaluator's script
        edges = _edges(rv, bins)
    (r_rows, r_keys), (s_rows, s_keys) = _distinct_keys(rs, rv, r_text, edges), _distinct_keys(ss, sv, s_text, edges)
    # Numbered in the keys' sorted order, as np.unique over every row's key would, but sorting distinct keys only.
    names, inverse = np.unique(np.asarray(np.concatenate([r_keys, s_keys]), dtype=str), return_inverse=True)
    ranks = np.asarray(inverse.reshape(-1), dtype=np.int64)
    labels: list[str] = [str(x) for x in names.tolist()]
    if edges is not None:
        cuts = [f"{x:g}" for x in edges]
        readable = {f"#bin{i}": f"[{a}, {b})" for i, (a, b) in enumerate(itertools.pairwise(cuts))}
        labels = [readable.get(x, "<null>" if x == NULL_LABEL else x) for x in labels]
    else:
        labels = ["<null>" if x == NULL_LABEL else x for x in labels]
    return ranks[: len(r_keys)][r_rows], ranks[len(r_keys):][s_rows], len(names), labels


DENSE_CELLS = 1 << 22
"""A joint histogram with at most this many cells (or 4 per row) is counted densely."""


def joint_tvd(real: Sequence[IntArray], synthetic: Sequence[IntArray]) -> float:
    """TVD of the joint histogram of some coded columns.

    When the product of the columns' sizes is small it is counted densely (``bincount`` over the
    product, as the evaluator does). Otherwise it is counted over the cells that occur: keys are
    compacted column by column (``np.unique``), so they never exceed the row count times one
    column's size: no overflow and no allocation of the product of the sizes.
    """
    columns = [np.concatenate([r, s]).astype(np.int64) for r, s in zip(real, synthetic, strict=True)]
    return _joint_tvd(columns, [int(c.max(initial=0)) + 1 for c in columns], len(real[0]))


def _joint_tvd(columns: Sequence[IntArray], sizes: Sequence[int], n_real: int) -> float:
    """:func:`joint_tvd` of columns given as real rows then synthetic rows, with their code counts."""
    if float(np.prod([float(x) for x in sizes])) <= max(4.0 * len(columns[0]), DENSE_CELLS):
        # The product of the sizes is small: count it densely, as the evaluator does (the same figure).
        cell = columns[0]
        for column, size in zip(columns[1:], sizes[1:], strict=True):  # np.ravel_multi_index's cells, faster
            cell = cell * size
            cell += column
        return _tvd_of_cells(cell, n_real, int(np.prod(sizes)))
    key = columns[0]
    for other in columns[1:]:
        _, key = np.unique(key, return_inverse=True)
        key = key.reshape(-1).astype(np.int64) * (int(other.max(initial=0)) + 1) + other
    _, cell = np.unique(key, return_inverse=True)
    cell = cell.reshape(-1)
    return _tvd_of_cells(cell, n_real, int(cell.max(initial=-1)) + 1)


def _tvd_of_cells(cell: npt.NDArray[np.integer[Any]], n_real: int, size: int) -> float:
    """TVD between the histograms of the first ``n_real`` cells and of the rest."""
    p = np.bincount(cell[:n_real], minlength=size).astype(np.float64)
    q = np.bincount(cell[n_real:], minlength=size).astype(np.float64)
    p /= max(float(p.sum()), 1.0)
    q /= max(float(q.sum()), 1.0)
    return float(0.5 * np.abs(p - q).sum())


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


def utility(
    real: pa.Table, synthetic: pa.Table, columns: Sequence[str], *, bins: int = 16, three_way: int = 300, seed: int = 0
) -> UtilityReport:
    """TVD yardstick between ``real`` and ``synthetic`` over ``columns`` (``shared/bench/utility.py``'s)."""
    coded = {c: _codes(real.column(c), synthetic.column(c), bins) for c in columns}
    one = {c: joint_tvd([rc], [sc]) for c, (rc, sc, _, _) in coded.items()}
    histograms: dict[str, dict[str, list[Any]]] = {
        c: {"labels": list(labels), "real": _frequencies(rc, size), "synthetic": _frequencies(sc, size)}
        for c, (rc, sc, size, labels) in coded.items()
    }

    # Each column's real and synthetic codes joined once: hundreds of joint marginals reuse them.
    stacked = {c: np.concatenate([rc, sc]).astype(np.int64) for c, (rc, sc, _, _) in coded.items()}
    sizes = {c: int(v.max(initial=0)) + 1 for c, v in stacked.items()}
    n_real = real.num_rows

    def joint(cols: Sequence[str]) -> float:
        return _joint_tvd([stacked[c] for c in cols], [sizes[c] for c in cols], n_real)

    two = {f"{a}|{b}": joint((a, b)) for a, b in itertools.combinations(columns, 2)}
    triples = list(itertools.combinations(columns, 3))
    tvd3: float | None = None
    if triples and three_way > 0:
        chooser = np.random.default_rng(seed)  # evaluation only, not noise: sampling which 3-way marginals to score
        if len(triples) > three_way:
            triples = [triples[i] for i in chooser.choice(len(triples), three_way, replace=False)]
        tvd3 = float(np.mean([joint(t) for t in triples]))
    return UtilityReport(
        tvd1=float(np.mean(list(one.values()))),
        tvd2=float(np.mean(list(two.values()))) if two else 0.0,
        tvd3=tvd3,
        one_way=one,
        two_way=two,
        histograms=histograms,
    )
