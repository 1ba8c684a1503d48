"""One quantile per public group in one charge (dp.statistics.groups): loss, exactness, replay."""

from __future__ import annotations

import itertools
import re
import unicodedata
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget
from dprelease.dp.accounting.charges import Chargeable, ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import ParameterError
from dprelease.dp.mechanisms.random import secure_noise
from dprelease.dp.statistics.groups import (
    GroupedQuantile,
    decimals_of,
    grid_value,
    group_codes,
    group_index,
    measure_group_quantiles,
    quantile_edges,
    resolution_grid,
    value_grid,
)
from dprelease.dp.statistics.quantiles import QuantileMechanism
from tests.dp.test_statistics_quantiles import SeededSelection


@pytest.fixture
def ledger(tmp_path):
    with Ledger.open(tmp_path / "ledger.sqlite") as ledger:
        ledger.register("pop", "pure", PureBudget(Fraction(100)), Fraction(0))
        ledger.reserve("pop", "r1", PureBudget(Fraction(50)))
        yield ledger


def median(grid, epsilon, contributions=1):
    return QuantileMechanism(grid, Fraction(1, 2), PureBudget(Fraction(epsilon)), contributions)


def test_the_resolution_grid_puts_points_on_the_declared_steps():
    grid = resolution_grid(16.3, 52864.7, 0.1)
    assert grid.bounds.lower == 16.3 and grid.bounds.upper >= 52864.7 and abs(grid.step - 0.1) < 1e-12
    index = round((2195.3 - 16.3) / 0.1)
    assert grid_value(grid, index, decimals_of(0.1)) == 2195.3
    assert grid.encode(np.array([2195.3]))[0] + grid.half_steps == index
    assert [decimals_of(r) for r in (0.1, 0.25, 5.0, 1.0, 0.001)] == [1, 2, 0, 0, 3]
    with pytest.raises(ParameterError, match=re.escape("needs 20000000 grid steps")):
        resolution_grid(0.0, 2.0, 1e-7)


@pytest.mark.parametrize(("contributions", "groups", "touched"), [(1, 31, 1), (3, 31, 3), (5, 2, 2)])
def test_the_loss_is_the_per_group_loss_times_the_groups_a_unit_can_touch(contributions, groups, touched):
    grid = resolution_grid(0.0, 10.0, 1.0)
    per_group = median(grid, Fraction(1, 2), contributions)
    grouped = GroupedQuantile(per_group, groups)
    assert grouped.touched() == touched
    assert grouped.privacy_loss() == PureBudget(per_group.privacy_loss().epsilon * touched)
    assert grouped.zcdp_loss() == ZCDPBudget(per_group.zcdp_loss().rho * touched)
    assert grouped.scale() == per_group.scale() > 0 and isinstance(grouped, Chargeable)
    assert f"{groups} disjoint groups, a unit in at most {touched}" in grouped.sensitivity_text()


def test_group_codes_split_rows_by_group_and_drop_rows_of_no_group():
    grid = resolution_grid(0.0, 10.0, 1.0)
    values = np.array([1.0, 2.0, 3.0, np.nan, 4.0, 99.0])
    groups = np.array([0, 1, 0, 1, -1, 2])
    codes = group_codes(values, groups, 3, grid)
    offset = grid.half_steps
    assert [sorted((c + offset).tolist()) for c in codes] == [[1, 3], [2], [10]]  # NaN dropped, 99 clipped


def test_a_point_mass_group_gets_its_own_value_exactly_from_the_production_sampler(ledger):
    grid = resolution_grid(16.3, 52864.7, 0.1)
    true = [2195.3, 2872.7, 1457.2]
    rng = np.random.default_rng(0)
    sizes = [900, 600, 500]
    values = np.concatenate([np.full(n, v) for n, v in zip(sizes, true, strict=True)] + [np.array([])])
    groups = np.concatenate([np.full(n, g) for g, n in enumerate(sizes)])
    order = rng.permutation(len(values))
    codes = group_codes(values[order], groups[order], 4, grid)  # group 3 is empty
    # epsilon = sqrt(8 rho) = 0.4: another value is released with probability <= 528,486 exp(-0.4 * 500 / 2) < 1e-37
    mechanism = GroupedQuantile(QuantileMechanism(grid, Fraction(1, 2), ZCDPBudget(Fraction(1, 50))), 4)
    context = ReleaseContext(ledger, "r1", "pure", secure_noise())
    drawn, record = measure_group_quantiles(codes, mechanism, context, query="median(density | puma)")
    assert [grid_value(grid, i, 1) for i in drawn[:3]] == true
    assert 0 <= drawn[3] < grid.points  # an empty group: a uniform grid point
    charges = ledger.charges(release_id="r1")
    assert len(charges) == 1 and charges[0].stage == "bounds" and charges[0].loss == mechanism.privacy_loss().epsilon
    assert record.query == "median(density | puma)"


def test_a_re_run_replays_the_sealed_values_without_a_second_charge(ledger):
    grid = resolution_grid(0.0, 10.0, 1.0)
    codes = group_codes(np.array([2.0, 2.0, 7.0, 7.0]), np.array([0, 0, 1, 1]), 2, grid)
    mechanism = GroupedQuantile(median(grid, 1), 2)
    first, _ = measure_group_quantiles(codes, mechanism, ReleaseContext(ledger, "r1", "pure", SeededSelection(1)),
                                       query="median(x | g)", uniform=SeededSelection(2))
    again, _ = measure_group_quantiles(codes, mechanism, ReleaseContext(ledger, "r1", "pure", SeededSelection(9)),
                                       query="median(x | g)", uniform=SeededSelection(8))
    assert again == first and len(ledger.charges(release_id="r1")) == 1


def test_a_wrong_number_of_groups_is_refused():
    grid = resolution_grid(0.0, 10.0, 1.0)
    mechanism = GroupedQuantile(median(grid, 1), 3)
    with pytest.raises(ParameterError, match=r"2 groups of values for 3 declared"):
        mechanism.draw([np.zeros(1, dtype=np.int64)] * 2, SeededSelection(0), SeededSelection(0))
    with pytest.raises(ParameterError, match=r"groups \(0\) must be"):
        GroupedQuantile(median(grid, 1), 0)


def test_quantile_edges_split_at_recursive_medians_and_give_spikes_their_own_bin(ledger):
    rng = np.random.default_rng(4)
    values = np.r_[np.zeros(3000), rng.integers(1, 1000, 6000).astype(float), np.full(50, np.nan)]
    grid = value_grid(-100, 1000, "int")
    context = ReleaseContext(ledger, "r1", "pure", SeededSelection(5))
    edges, records = quantile_edges(values, grid, 8, PureBudget(Fraction(2)), context, column="x", kind="int",
                                    upper=1000, uniform=SeededSelection(6))
    assert len(records) == 3 and [r.query for r in records][-1] == "quantile bins of x: level 3 of 3"
    assert edges[0] == -100 and edges[-1] == 1001 and all(a < b for a, b in itertools.pairwise(edges))
    assert 0.0 in edges and 1.0 in edges  # zero (a third of the rows) is a spike: [0, 1) is a bin of its own
    assert len(ledger.charges(release_id="r1")) == 3
    # Declared spikes are left out of the medians: the ranges split the other values; the spike is added later.
    edges2, _ = quantile_edges(values, grid, 8, PureBudget(Fraction(2)),
                               ReleaseContext(ledger, "r1", "pure", SeededSelection(7)), column="y", kind="int",
                               upper=1000, spikes=(0.0,), uniform=SeededSelection(8))
    inner = [e for e in edges2 if 1 < e < 1000]
    assert len(inner) >= 6 and all(abs(a - b) < 250 for a, b in zip(inner, np.quantile(values[values > 0][:6000],
                                                                                       np.arange(1, 8) / 8),
                                                                      strict=False))


def test_quantile_bins_must_be_a_power_of_two(ledger):
    grid = value_grid(0, 10, "int")
    with pytest.raises(ParameterError, match=r"quantile bins \(6\) must be a power of two"):
        quantile_edges(np.zeros(3), grid, 6, PureBudget(Fraction(1)), ReleaseContext(ledger, "r1", "pure",
                       SeededSelection(0)), column="x", kind="int", upper=10)
    assert ledger.charges(release_id="r1") == []


def test_rows_join_their_group_as_the_marginals_count_them():
    """NFD labels, integer codes, dictionary columns and on_unknown mappings, as dp.measurement.marginals does."""
    nfd = unicodedata.normalize("NFD", "Réunion")
    labels = pa.chunked_array([["Réunion", nfd, "Male", None, "other"], [nfd]])
    assert group_index(labels, ["Male", "Réunion"]).tolist() == [1, 1, 0, -1, -1, 1]
    assert group_index(labels, ["Male", "Réunion"], on_unknown="Male").tolist() == [1, 1, 0, -1, 0, 1]
    assert group_index(pa.chunked_array([pa.array([7, 8, None, 9], pa.int16())]), ["7", "9"]).tolist() == [0, -1, -1, 1]
    assert group_index(pa.chunked_array([pa.array([nfd, "x"]).dictionary_encode()]), ["Réunion"]).tolist() == [0, -1]
