"""Contribution bounding: at most k rows per id, chosen at random per id, with the sensitivity it guarantees."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dprelease.dp.errors import ParameterError
from dprelease.dp.measurement.contributions import bound_contributions


def _kept_per_id(ids, keep):
    out: dict[object, int] = {}
    for value, kept in zip(ids, keep, strict=True):
        if kept:
            out[value] = out.get(value, 0) + 1
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(0, 8)), max_size=80), st.integers(1, 5))
def test_at_most_k_rows_per_id_and_small_ids_are_kept_whole(ids, k):
    bounded = bound_contributions(pa.array(ids, pa.int64()), k)
    assert bounded.keep.dtype == bool and len(bounded.keep) == len(ids)
    assert (bounded.l1_sensitivity, bounded.l2_sensitivity) == (k, k)
    kept = _kept_per_id(ids, bounded.keep)
    for value in set(ids) - {None}:
        assert kept.get(value, 0) == min(k, ids.count(value))
    assert None not in kept and bounded.dropped_null_ids == ids.count(None)
    assert bounded.dropped_over_cap == sum(max(0, ids.count(v) - k) for v in set(ids) - {None})


def test_string_ids_chunked_and_empty():
    ids = pa.chunked_array([pa.array(["x", "y"]), pa.array(["x", "x"])])
    assert _kept_per_id(ids.to_pylist(), bound_contributions(ids, 1).keep) == {"x": 1, "y": 1}
    empty = bound_contributions(pa.chunked_array([], type=pa.string()), 2)
    assert len(empty.keep) == 0 and empty.dropped_over_cap == 0


def test_max_rows_must_be_a_positive_whole_number():
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ParameterError, match="max_rows"):
            bound_contributions(pa.array([1]), bad)  # type: ignore[arg-type]


@pytest.mark.statistical
def test_each_row_of_an_id_is_kept_with_probability_k_over_n():
    # 6 rows of one id, k = 2: each row kept with probability 1/3. 3000 runs; chi-square test of the
    # 6 counts against 1000 each. False-alarm rate 1e-6 (threshold: the 1 - 1e-6 quantile, 5 dof).
    counts = np.zeros(6)
    ids = pa.array([7] * 6)
    for _ in range(3000):
        counts += bound_contributions(ids, 2).keep
    statistic = float(((counts - 1000) ** 2 / 1000).sum())
    assert statistic < stats.chi2.ppf(1 - 1e-6, df=5)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)), max_size=60), st.integers(1, 12),
       st.integers(0, 3), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_one_more_id_moves_a_histogram_by_at_most_k(rows, extra_rows, extra_cell, k, seed):
    # Neighbours: the same table plus every row of a new id (any number of rows). Each row keeps its
    # random key (the coupling of the two runs), so only the new id's kept rows differ.
    generator = np.random.default_rng(seed)  # stand-in for the secure source, coupled across neighbours
    keys = generator.integers(0, 2**63, size=len(rows) + extra_rows, dtype=np.uint64).tobytes()
    ids = [r[0] for r in rows]
    cells = [r[1] for r in rows]
    bigger_ids = ids + [99] * extra_rows
    bigger_cells = cells + [extra_cell] * extra_rows

    def histogram(id_list, cell_list):
        bounded = bound_contributions(pa.array(id_list, pa.int64()), k, lambda size: keys[:size])
        return np.bincount(np.array(cell_list, dtype=np.int64)[bounded.keep], minlength=4), bounded

    small, bounded = histogram(ids, cells)
    large, _ = histogram(bigger_ids, bigger_cells)
    difference = large - small
    assert np.abs(difference).sum() <= bounded.l1_sensitivity
    assert np.sqrt((difference.astype(float) ** 2).sum()) <= bounded.l2_sensitivity
