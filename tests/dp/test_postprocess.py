from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dprelease.dp.accounting.budget import ZCDPBudget
from dprelease.dp.accounting.charges import MeasurementRecord
from dprelease.dp.synthesis.noisy import NoisyMarginal
from dprelease.dp.synthesis.postprocess import consistent_counts, estimate_total, project_simplex, round_preserving_sum

noisy = arrays(np.int64, st.integers(1, 60), elements=st.integers(-500, 5000))


def _marginal(counts, std=3.0):
    m = MeasurementRecord("one_way", "q", "discrete Gaussian", "L2=1", std, ZCDPBudget(Fraction(1)),
                    ZCDPBudget(Fraction(1)), std, 2 * std, len(counts))
    return NoisyMarginal(("a",), (len(counts),), np.asarray(counts, dtype=np.int64), m)


@settings(max_examples=200, deadline=None)
@given(noisy, st.integers(0, 10**6))
def test_consistent_counts_are_nonnegative_integers_with_the_total(counts, total):
    out = consistent_counts(_marginal(counts), total)
    assert out.dtype == np.int64
    assert (out >= 0).all()
    assert int(out.sum()) == total


@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, st.integers(1, 40), elements=st.floats(-1e4, 1e4)), st.floats(0.5, 1e5))
def test_projection_is_on_the_simplex_and_closest(values, total):
    x = project_simplex(values, total)
    assert (x >= 0).all()
    assert abs(x.sum() - total) <= 1e-6 * max(1.0, total)
    # No other feasible point we try is closer.
    uniform = np.full_like(values, total / len(values))
    assert np.linalg.norm(x - values) <= np.linalg.norm(uniform - values) + 1e-6


@given(arrays(np.float64, st.integers(1, 40), elements=st.floats(0, 1e4)), st.integers(0, 10**5))
def test_rounding_keeps_the_sum_and_moves_each_cell_less_than_one_after_scaling(values, total):
    out = round_preserving_sum(values, total)
    assert int(out.sum()) == total
    if values.sum() > 0:
        scaled = values * total / values.sum()
        assert np.all(np.abs(out - scaled) < 1 + 1e-9)


def test_estimate_total_weights_by_inverse_variance():
    small = _marginal([100, 100], std=1.0)  # total variance 2
    large = _marginal([50] * 8, std=1.0)  # total 400, variance 8
    est = estimate_total([small, large])
    assert abs(est - (200 / 2 + 400 / 8) / (1 / 2 + 1 / 8)) < 1e-9


def test_projection_onto_a_subnormal_total_keeps_the_largest_cell():
    from dprelease.dp.synthesis.postprocess import project_simplex

    out = project_simplex(np.array([1.0, 0.5]), 5e-324)  # used to raise IndexError
    assert (out >= 0).all() and abs(out.sum() - 5e-324) < 1e-300
