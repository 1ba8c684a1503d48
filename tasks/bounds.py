"""Discover clipping bounds of numeric columns without public bounds (sparse vector technique)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from prefect import get_run_logger

from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.measurement.bounds import DiscoveredBounds, discover_bounds, geometric_grid, tail_counts
from dprelease.dp.mechanisms.random import secure_noise
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
