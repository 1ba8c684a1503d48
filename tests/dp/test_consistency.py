"""Consistency across marginals: combined 1-ways, IPF, controlled rounding of 2-way tables."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dprelease.dp.accounting.budget import ZCDPBudget
from dprelease.dp.accounting.charges import MeasurementRecord
from dprelease.dp.synthesis.noisy import NoisyMarginal
from dprelease.dp.synthesis.postprocess import combined_one_way, consistent_marginals, fit_margins, round_matrix


def _noisy(columns, shape, counts, std):
    record = MeasurementRecord(stage="s", query=str(columns), mechanism="discrete Gaussian", sensitivity="L2=1",
                         scale=std, loss=ZCDPBudget(Fraction(1)), native_loss=ZCDPBudget(Fraction(1)), std=std,
                         ci95=1.96 * std, cells=len(counts))
    return NoisyMarginal(tuple(columns), tuple(shape), np.asarray(counts, dtype=np.int64), record)


def test_combined_one_way_weights_by_inverse_variance():
    one = _noisy(["a"], [2], [10, 20], std=1.0)  # variance 1 per cell
    two = _noisy(["a", "b"], [2, 2], [7, 7, 9, 9], std=1.0)  # row sums 14, 18, each of variance 2
    values, variance = combined_one_way("a", [one, two])
    assert values.tolist() == pytest.approx([(10 + 14 / 2) / 1.5, (20 + 18 / 2) / 1.5])
    assert variance.tolist() == pytest.approx([2 / 3, 2 / 3])
    b_values, b_variance = combined_one_way("b", [one, two])
    assert b_values.tolist() == [16.0, 16.0] and b_variance.tolist() == [2.0, 2.0]


def test_fit_margins_matches_both_margins_and_keeps_the_odds_ratio():
    table = np.array([[30.0, 10.0], [10.0, 50.0]])
    fitted = fit_margins(table, np.array([60.0, 40.0]), np.array([50.0, 50.0]))
    assert fitted.sum(axis=1) == pytest.approx([60, 40]) and fitted.sum(axis=0) == pytest.approx([50, 50])
    odds = fitted[0, 0] * fitted[1, 1] / (fitted[0, 1] * fitted[1, 0])
    assert odds == pytest.approx(15.0, rel=1e-3)  # IPF preserves interactions


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 12), st.integers(1, 12), st.integers(0, 10**6), st.integers(0, 2**32 - 1))
def test_round_matrix_meets_both_margins_exactly(n_rows, n_columns, total, seed):
    generator = np.random.default_rng(seed)  # test data
    rows = generator.multinomial(total, generator.dirichlet(np.ones(n_rows)))
    columns = generator.multinomial(total, generator.dirichlet(np.ones(n_columns)))
    table = fit_margins(generator.random((n_rows, n_columns)) * 10, rows.astype(float), columns.astype(float))
    rounded = round_matrix(table, rows, columns)
    assert rounded.dtype == np.int64 and (rounded >= 0).all()
    assert rounded.sum(axis=1).tolist() == rows.tolist() and rounded.sum(axis=0).tolist() == columns.tolist()
    assert np.abs(rounded - table).max() < 1 + 1e-6 * max(total, 1)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 5000), st.floats(0.5, 200), st.integers(0, 2**32 - 1))
def test_consistent_marginals_agree_everywhere(total, std, seed):
    generator = np.random.default_rng(seed)  # test data and stand-in noise
    sizes = {"a": 3, "b": 5, "c": 2}
    truth = generator.integers(0, 4, size=(total, 3))
    truth[:, 0] %= 3
    truth[:, 2] %= 2
    index = {"a": 0, "b": 1, "c": 2}

    def measured(columns):
        shape = [sizes[c] for c in columns]
        flat = np.zeros(len(truth), dtype=np.int64)
        for c in columns:
            flat = flat * sizes[c] + truth[:, index[c]]
        counts = np.bincount(flat, minlength=int(np.prod(shape)))
        return _noisy(columns, shape, counts + np.rint(generator.normal(0, std, counts.size)), std)

    marginals = [measured(["a"]), measured(["b"]), measured(["c"]), measured(["a", "b"]), measured(["b", "c"])]
    out = consistent_marginals(marginals, total)
    for counts in out.values():
        assert counts.dtype == np.int64 and (counts >= 0).all() and counts.sum() == total
    ab = out[("a", "b")].reshape(3, 5)
    bc = out[("b", "c")].reshape(5, 2)
    assert ab.sum(axis=1).tolist() == out[("a",)].tolist()
    assert ab.sum(axis=0).tolist() == out[("b",)].tolist() == bc.sum(axis=1).tolist()
    assert bc.sum(axis=0).tolist() == out[("c",)].tolist()


def test_fixed_counts_are_kept_and_the_tables_follow_them():
    a = _noisy(["a"], [2], [40, 60], std=5.0)
    ab = _noisy(["a", "b"], [2, 2], [30, 10, 20, 40], std=5.0)
    b = _noisy(["b"], [2], [50, 50], std=5.0)
    out = consistent_marginals([a, b, ab], 100, {"a": np.array([45, 55])})
    assert out[("a",)].tolist() == [45, 55]
    assert out[("a", "b")].reshape(2, 2).sum(axis=1).tolist() == [45, 55]
