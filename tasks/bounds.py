"""The bounds stage: clipping bounds of numeric columns (sparse vector technique) and private mappings."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from prefect import get_run_logger

from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.measurement.bounds import DiscoveredBounds, discover_bounds, geometric_grid, tail_counts
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
from dprelease.schemas.plan import ReleasePlan
from dprelease.tasks import sensitive_task
from dprelease.tasks.ingest import unit_row_groups


@sensitive_task("discover_bounds")
def find_bounds(plan: ReleasePlan, ledger_path: str) -> list[DiscoveredBounds]:
    """Charge and run two AboveThreshold scans per column; returns DP bounds (public)."""
    if not plan.bounds:
        return []
    spec = plan.spec
    logger = get_run_logger()
    grids = {}
    for planned in plan.bounds:
        column = spec.schema.column(planned.column)
        assert column.search_range is not None
        grids[planned.column] = geometric_grid(*column.search_range)
    # Map: tail counts per row group; reduce: their sum.
    sums = {name: (np.zeros(len(g), dtype=np.int64), np.zeros(len(g), dtype=np.int64)) for name, g in grids.items()}
    batches, bounded = unit_row_groups(spec.data, list(grids), spec.schema.privacy_unit)
    sensitivity = 1 if bounded is None else bounded.l1_sensitivity  # one unit moves each tail count by <= k
    for batch in batches:
        for name, grid in grids.items():
            array = batch.column(name)
            values = np.asarray(
                pc.cast(array, pa.float64(), safe=False).fill_null(float("nan")).to_numpy(zero_copy_only=False),
                dtype=np.float64,
            )
            below, above = tail_counts(values, grid)
            sums[name][0][:] += below
            sums[name][1][:] += above
    results = []
    with Ledger.open(Path(ledger_path)) as ledger:
        context = ReleaseContext(ledger, plan.release_id, plan.definition, secure_noise())  # type: ignore[arg-type]
        for planned in plan.bounds:
            bins = spec.schema.column(planned.column).bins
            found = discover_bounds(planned.column, sums[planned.column], grids[planned.column],
                                    planned.run_budget, context, sensitivity=sensitivity,
                                    cheap_widening=bins is not None and bins.kind == "log")
            logger.info("bounds of %s: [%g, %g] (epsilon %.6g per run)", planned.column, found.lower, found.upper,
                        float(planned.run_budget.epsilon))
            results.append(found)
    return results


@dataclass(frozen=True)
class DiscoveredMapping:
    """A derived column's values per source category, released by grouped DP medians (public).

    Attributes:
        column: The derived column.
        source: Its source category column.
        values: Source category -> released value (every declared category).
        record: The grouped median's provenance (one charge).
    """

    column: str
    source: str
    values: dict[str, float]
    record: MeasurementRecord


@sensitive_task("discover_mappings")
def find_mappings(plan: ReleasePlan, ledger_path: str) -> list[DiscoveredMapping]:
    """Charge and run one grouped median per ``mapping: private`` column; returns the DP values (public).

    A row is in the group of its source category (the declared spelling; a null, unknown or differently
    normalised source is in no group), its value clipped to the column's public bounds and rounded to the
    declared resolution. The groups are disjoint, so the column is one charge (parallel composition,
    :mod:`dp.statistics.groups`), booked in the bounds stage before anything is drawn.
    """
    if not plan.mappings:
        return []
    spec = plan.spec
    logger = get_run_logger()
    contributions = spec.schema.privacy_unit.rows
    results = []
    with Ledger.open(Path(ledger_path)) as ledger:
        context = ReleaseContext(ledger, plan.release_id, plan.definition, secure_noise())  # type: ignore[arg-type]
        for planned in plan.mappings:
            column = spec.schema.column(planned.column)
            assert column.min is not None and column.max is not None and column.resolution is not None
            grid = resolution_grid(column.min, column.max, column.resolution)
            values, groups = [], []
            batches, _ = unit_row_groups(spec.data, [planned.column, planned.source], spec.schema.privacy_unit)
            on_unknown = spec.schema.column(planned.source).on_unknown
            for batch in batches:  # rows join their group as the marginals count them (NFC, on_unknown)
                groups.append(group_index(batch.column(planned.source), planned.groups, on_unknown))
                values.append(np.asarray(pc.cast(batch.column(planned.column), pa.float64(), safe=False)
                                         .fill_null(float("nan")).to_numpy(zero_copy_only=False), dtype=np.float64))
            codes = group_codes(np.concatenate(values) if values else np.zeros(0),
                                np.concatenate(groups) if groups else np.zeros(0, dtype=np.int64),
                                len(planned.groups), grid)
            mechanism = GroupedQuantile(QuantileMechanism(grid, Fraction(1, 2), planned.group_budget, contributions),
                                        groups=len(planned.groups))
            drawn, record = measure_group_quantiles(codes, mechanism, context,
                                               query=f"median({planned.column} | {planned.source})")
            places = decimals_of(column.resolution)
            low, high = column.min, column.max  # the grid may reach one step past max: clip (post-processing)
            found = {key: min(max(grid_value(grid, index, places), low), high)
                     for key, index in zip(planned.groups, drawn, strict=True)}
            logger.info("mapping of %s by %s: %d values released (one grouped median, %s)", planned.column,
                        planned.source, len(found), mechanism.sensitivity_text())
            results.append(DiscoveredMapping(planned.column, planned.source, found, record))
    return results


@dataclass(frozen=True)
class DiscoveredBins:
    """A numeric column's bin edges at DP quantiles (public).

    Attributes:
        column: The column.
        edges: Strictly ascending edges (the lower bound first, the upper bound, or max + 1 for int, last).
        records: One record per level of medians.
    """

    column: str
    edges: tuple[float, ...]
    records: tuple[MeasurementRecord, ...]


@sensitive_task("discover_bins")
def find_bins(plan: ReleasePlan, bounds: list[DiscoveredBounds], ledger_path: str) -> list[DiscoveredBins]:
    """Charge and run the recursive medians of every ``bins: quantiles`` column; returns DP edges (public).

    Values are clipped to the column's public bounds, or to those the bounds stage found (already booked).
    """
    if not plan.bins:
        return []
    spec = plan.spec
    logger = get_run_logger()
    contributions = spec.schema.privacy_unit.rows
    found_bounds = {b.column: (b.lower, b.upper) for b in bounds}
    results = []
    with Ledger.open(Path(ledger_path)) as ledger:
        context = ReleaseContext(ledger, plan.release_id, plan.definition, secure_noise())  # type: ignore[arg-type]
        for planned in plan.bins:
            column = spec.schema.column(planned.column)
            if column.has_public_bounds:
                assert column.min is not None and column.max is not None
                low, high = column.min, column.max
            else:
                low, high = found_bounds[planned.column]
            batches, _ = unit_row_groups(spec.data, [planned.column], spec.schema.privacy_unit)
            values = [np.asarray(pc.cast(batch.column(planned.column), pa.float64(), safe=False)
                                 .fill_null(float("nan")).to_numpy(zero_copy_only=False), dtype=np.float64)
                      for batch in batches]
            edges, records = quantile_edges(
                np.concatenate(values) if values else np.zeros(0), value_grid(low, high, column.type), planned.bins,
                planned.group_budget, context, column=planned.column, kind=column.type, upper=high,
                contributions=contributions, spikes=column.spikes)
            logger.info("quantile bins of %s: %d bins from %d levels of medians", planned.column, len(edges) - 1,
                        planned.levels)
            results.append(DiscoveredBins(planned.column, edges, records))
    return results
