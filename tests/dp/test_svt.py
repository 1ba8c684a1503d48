from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import ParameterError
from dprelease.dp.measurement.bounds import discover_bounds, geometric_grid, tail_counts
from dprelease.dp.mechanisms.svt import AboveThreshold, run_above_threshold, svt_threshold
from tests.noise import SeededNoise, SpyNoise


def test_scales_are_exactly_as_declared_and_loss_within_budget():
    m = AboveThreshold(l1_sensitivity=1, budget=PureBudget(Fraction(1, 2)))
    assert m.threshold_scale() == 4.0 and m.query_scale() == 8.0
    assert m.privacy_loss() == PureBudget(Fraction(1, 2))
    odd = AboveThreshold(l1_sensitivity=3, budget=PureBudget(Fraction(7, 10)))
    assert odd.privacy_loss().epsilon <= Fraction(7, 10)


def test_rejects_bad_arguments():
    message = "AboveThreshold: l1_sensitivity (0) must be a positive integer"
    with pytest.raises(ParameterError, match=re.escape(message)):
        AboveThreshold(0, PureBudget(Fraction(1)))
    with pytest.raises(ParameterError, match="budget must be a PureBudget"):
        AboveThreshold(1, ZCDPBudget(Fraction(1)))


def test_one_threshold_draw_one_vector_draw_and_only_an_index_returned():
    spy = SpyNoise()
    m = AboveThreshold(1, PureBudget(Fraction(1)))
    hit = m.run(np.array([0, 0, 5, 9]), 3, spy)
    assert hit == 2
    assert spy.calls == [("laplace", 1, 2.0), ("laplace", 4, 4.0)]
    assert m.run(np.array([0, 1]), 3, spy) is None


def test_grid():
    assert geometric_grid(-4, 4) == (-4.0, -2.0, -1.0, 0.0, 1.0, 2.0, 4.0)
    assert geometric_grid(10, 20)[:4] == (10.0, 11.0, 12.0, 14.0)
    assert geometric_grid(-20, -10)[-3:] == (-12.0, -11.0, -10.0)
    with pytest.raises(ParameterError, match="search_range"):
        geometric_grid(5, 5)


def test_tail_counts_with_nan_and_infinities():
    values = np.array([np.nan, -np.inf, 0.0, 3.0, np.inf, 3.0])
    below, above = tail_counts(values, (0.0, 3.0))
    assert below.tolist() == [1, 2] and above.tolist() == [3, 1]


def test_tail_counts_of_empty_column():
    below, above = tail_counts(np.array([], dtype=np.float64), (0.0, 1.0))
    assert below.tolist() == [0, 0] and above.tolist() == [0, 0]


def _context(tmp_path, noise):
    ledger_cm = Ledger.open(tmp_path / "l.sqlite")
    ledger = ledger_cm.__enter__()
    ledger.register("pop", "pure", PureBudget(Fraction(10)), Fraction(0))
    ledger.reserve("pop", "r", PureBudget(Fraction(10)))
    return ledger_cm, ReleaseContext(ledger, "r", "pure", noise)


def test_discovery_charges_two_runs_and_finds_bounds(tmp_path):
    cm, context = _context(tmp_path, SeededNoise(3))
    values = np.concatenate([np.zeros(5000), np.arange(1, 3000, dtype=float)])
    grid = geometric_grid(0, 2**20)
    found = discover_bounds("gain", tail_counts(values, grid), grid, PureBudget(Fraction(1)), context, sensitivity=1)
    assert found.lower == 0.0
    assert 1024 <= found.upper <= 4096
    assert [c.loss for c in context.ledger.charges()] == [Fraction(1), Fraction(1)]
    cm.__exit__(None, None, None)


def test_cheap_widening_lowers_the_threshold_so_a_thin_tail_is_not_clamped(tmp_path):
    # A log-binned column with a thin tail (600 rows above 4096, 10 far out): the monotone scan's noises both
    # have scale 2 at epsilon 1; its default upper threshold (an empty candidate fires with probability
    # 1/(8m) under both noises: 12 rows) is reached only inside the bulk of the tail; the cheap-widening one
    # (the general scan's cheap spurious rate, 0.22 per candidate: 3 rows) already at the 10 far rows.
    assert svt_threshold(2.0, 22, away_from_origin=True, threshold_scale=2.0) == 12
    assert svt_threshold(2.0, 22, cheap_widening=True, threshold_scale=2.0) == 3
    values = np.concatenate([np.zeros(5000), np.full(600, 5000.0), np.full(10, 100000.0)])
    grid = geometric_grid(0, 2**20)
    found = []
    for cheap in (False, True):
        cm, context = _context(tmp_path / str(cheap), SpyNoise())  # no noise: the thresholds decide
        found.append(discover_bounds("gain", tail_counts(values, grid), grid, PureBudget(Fraction(1)), context,
                                     sensitivity=1, cheap_widening=cheap))
        cm.__exit__(None, None, None)
    assert found[0].upper == 8192.0 and found[1].upper == 131072.0  # the 10 rows at 100000 kept only when cheap
    assert found[0].lower == found[1].lower == 0.0


def test_the_upper_scan_of_a_non_negative_range_needs_more_rows_to_fire(tmp_path):
    # Upper candidates of [0, 2^20] double, so a spurious early stop doubles the range: that scan's
    # threshold targets a 1/(8m) spurious rate (12 rows here: both noises of scale 2, m = 22) rather than
    # 1/(2m) (9 rows); the lower scan, towards the origin, keeps 1/(2m). 10 rows at 100000 no longer hold
    # the upper bound up (they would at 9).
    assert svt_threshold(2.0, 22, threshold_scale=2.0) == 9
    assert svt_threshold(2.0, 22, away_from_origin=True, threshold_scale=2.0) == 12
    assert svt_threshold(4.0, 22) == 13 and svt_threshold(4.0, 22, away_from_origin=True) == 18  # general AT
    values = np.concatenate([np.full(5000, 3000.0), np.full(10, 100000.0)])
    grid = geometric_grid(0, 2**20)
    cm, context = _context(tmp_path, SpyNoise())  # no noise: the thresholds decide
    found = discover_bounds("w", tail_counts(values, grid), grid, PureBudget(Fraction(1)), context, sensitivity=1)
    cm.__exit__(None, None, None)
    assert (found.lower, found.upper) == (2048.0, 4096.0)


def test_discovery_on_an_empty_table_falls_back_to_the_search_range(tmp_path):
    cm, context = _context(tmp_path, SpyNoise())  # no noise: nothing ever reaches the threshold
    grid = geometric_grid(-8, 8)
    found = discover_bounds("x", tail_counts(np.array([]), grid), grid, PureBudget(Fraction(1)), context, sensitivity=1)
    assert (found.lower, found.upper, found.lower_found, found.upper_found) == (-8.0, 8.0, False, False)
    cm.__exit__(None, None, None)


def test_run_above_threshold_charges_before_running(tmp_path):
    spy = SpyNoise()
    cm, context = _context(tmp_path, spy)
    with pytest.raises(Exception, match="exceeds the reservation"):
        run_above_threshold(AboveThreshold(1, PureBudget(Fraction(11))), np.array([1]), 0, context,
                            stage="bounds", query="q")
    assert spy.calls == []
    cm.__exit__(None, None, None)


def test_the_quality_flag_says_how_far_inside_the_search_range_a_bound_lies_and_what_it_may_clamp(tmp_path):
    values = np.concatenate([np.zeros(5000), np.full(600, 5000.0), np.full(10, 100000.0)])
    grid = geometric_grid(0, 2**20)
    cm, context = _context(tmp_path, SpyNoise())  # no noise: the thresholds decide
    found = discover_bounds("gain", tail_counts(values, grid), grid, PureBudget(Fraction(1)), context, sensitivity=1)
    cm.__exit__(None, None, None)
    assert found.upper == 8192.0 and found.upper_steps == grid[::-1].index(8192.0) == 7
    assert found.lower == 0.0 and found.lower_found and found.lower_steps == 0  # fired at once: 0 is the edge
    lower, upper = found.quality()
    assert upper == (f"found 7 doublings inside the search range's high end; about {found.thresholds[1]:.0f} rows "
                     "or fewer (plus noise) lie beyond it")
    assert lower.startswith("found at the search range's edge: the data may reach beyond it")
    assert all(str(v) not in lower + upper for v in (5000, 100000))  # public grid facts only, no data value
