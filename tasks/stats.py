"""Summary statistics of a release (``stats:`` in the spec): one library call per column, written public.

Each planned column is read alone from the table, clipped to its public bounds (declared in the schema;
without them, the moments use bounds and an offset chosen for a mean out of their own share,
:mod:`dp.statistics.means`, and the quantiles the release's bounds stage's: DP outputs, booked) and measured by
:mod:`dp.statistics`: count, sum and sum of squares with the additive mechanism, quantiles with the
exponential mechanism (or the median by propose-test-release or smooth sensitivity, ``method:``), every draw
through the one noisy-result path (booked in stage ``stats``,
replayed on a re-run); registered functions by sample-and-aggregate. What leaves the task is the DP estimates
with their 95 % intervals, written to ``statistics/statistics.json`` and, one row a statistic,
``statistics/statistics.parquet`` in the staging folder (public, listed in the manifest).
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from prefect import get_run_logger

from dprelease.dp.accounting.budget import Budget, PureBudget, ZCDPBudget
from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.measurement.bounds import DiscoveredBounds
from dprelease.dp.measurement.contributions import bound_contributions
from dprelease.dp.mechanisms.random import IntArray, secure_noise
from dprelease.dp.statistics.aggregate import measure_aggregate
from dprelease.dp.statistics.bias import BIAS_SHARE, BiasMechanism, NoisyBias, measure_bias
from dprelease.dp.statistics.clipping import ClipBounds, Grid
from dprelease.dp.statistics.groups import GroupedQuantile, group_codes, group_index, measure_group_quantiles
from dprelease.dp.statistics.means import mean_weights, select_mean_bounds, split_mean_budget
from dprelease.dp.statistics.medians import measure_median
from dprelease.dp.statistics.moments import (
    Estimate,
    MomentsMechanism,
    NoisyMoments,
    measure_moments,
    measure_moments_by_group,
)
from dprelease.dp.statistics.quantiles import (
    NoisyQuantiles,
    QuantileMechanism,
    measure_quantiles,
    quantile_intervals,
    quantile_mechanisms,
)
from dprelease.reports.statistics import (
    STATISTICS_FILE,
    STATISTICS_PARQUET,
    statistic_rows,
    write_statistics_parquet,
)
from dprelease.schemas.plan import PlannedAggregate, PlannedStatistics, ReleasePlan
from dprelease.tasks import sensitive_task
from dprelease.tasks.ingest import read_table


def _values(column: pa.ChunkedArray) -> np.ndarray[Any, np.dtype[np.float64]]:
    """The column as floats, null as NaN (dropped by the grid's encoding).

    The cast is unchecked: an integer beyond ±2^53 becomes the nearest double instead of an error that
    would fail the release on one row's value (it is clipped to bounds within ±2^53 in any case).
    """
    return np.asarray(pc.cast(column, pa.float64(), safe=False).to_numpy(zero_copy_only=False), dtype=np.float64)


def _estimate(estimate: Estimate, mechanism: str, budget: Budget) -> dict[str, object]:
    return {"statistic": estimate.statistic, "estimate": estimate.estimate, "low95": estimate.low,
            "high95": estimate.high, "interval": estimate.method, "mechanism": mechanism,
            "budget": float(budget.amount)}


def _quantile(level: Fraction, value: float | None, low: float | None, high: float | None, mechanism: str,
              budget: Budget | None) -> dict[str, object]:
    return {"level": float(level), "value": value, "low95": low, "high95": high, "mechanism": mechanism,
            "budget": None if budget is None else float(budget.amount)}


METHOD_NAMES = {"exponential": "exponential mechanism", "ptr": "propose-test-release", "smooth": "smooth sensitivity"}
"""How each ``method:`` of a median or quantile is named in statistics.json and its Parquet table."""


def _clip_bounds(planned: PlannedStatistics, bounds: list[DiscoveredBounds]) -> ClipBounds:
    if planned.lower is not None and planned.upper is not None:
        return ClipBounds(planned.lower, planned.upper, "public")
    found = next(b for b in bounds if b.column == planned.column)  # the plan asks for them (bounds stage)
    return ClipBounds.from_discovered(found)


def _differ(moment_bounds: dict[str, object], clip: ClipBounds) -> bool:
    """Whether the moments' bounds (chosen for a mean without public bounds) are not the quantiles' (both ``svt``)."""
    return (moment_bounds["lower"], moment_bounds["upper"]) != (clip.lower, clip.upper)


def _moments_plan(planned: PlannedStatistics, values: np.ndarray[Any, np.dtype[np.float64]], clip: ClipBounds,
                  context: ReleaseContext, records: list[MeasurementRecord], contributions: int,
                  search_range: tuple[float, float] | None
                  ) -> tuple[MomentsMechanism, dict[str, object], BiasMechanism | None]:
    """The moments' mechanism: on the public bounds; or, without them, on bounds and an offset chosen for a mean.

    Without public bounds, :data:`dp.statistics.means.MEAN_SHARES` of the moments' budget select the
    bounds and the offset over the column's search range (:func:`select_mean_bounds`, booked here); the
    quantiles keep the bounds stage's bounds (``clip``). With ``clipping_bias``,
    :data:`dp.statistics.bias.BIAS_SHARE` of the moments' budget goes to the bias estimate's plan (third).
    """
    wanted = set(planned.statistics)
    if clip.source == "public" or search_range is None:
        weights = {"count": 1, "sum": 1 if wanted & {"sum", "mean", "variance", "std"} else 0,
                   "sum_of_squares": 1 if wanted & {"variance", "std"} else 0}
        budget, bias_budget = planned.moments_budget, None
        if planned.clipping_bias:
            parts = planned.moments_budget.split({"moments": 1 - BIAS_SHARE, "bias": BIAS_SHARE})
            budget, bias_budget = parts["moments"], parts["bias"]
        grid = Grid(clip)
        bias_plan = (None if bias_budget is None
                     else BiasMechanism.around(grid, search_range, bias_budget, contributions))
        return (MomentsMechanism(grid, budget, weights, contributions),
                {"lower": clip.lower, "upper": clip.upper, "source": clip.source}, bias_plan)
    shares = split_mean_budget(planned.moments_budget, clipping_bias=planned.clipping_bias)
    query = planned.column if planned.by is None else f"{planned.column} by {planned.by}"
    found = select_mean_bounds(values, planned.column, search_range, shares["bounds"], shares["centre"], context,
                               contributions=contributions, query=query)
    records.extend(found.records)
    rest = shares["count"].amount + shares["sum"].amount
    budget = ZCDPBudget(rest) if isinstance(planned.moments_budget, ZCDPBudget) else PureBudget(rest)
    bias_plan = (BiasMechanism.around(found.grid(), search_range, shares["bias"], contributions)
                 if planned.clipping_bias else None)
    return (MomentsMechanism(found.grid(), budget, mean_weights(wanted), contributions),
            {"lower": found.lower, "upper": found.upper, "source": "svt", "offset": found.centre}, bias_plan)


def _with_bias(rows: list[dict[str, object]], moments: NoisyMoments, bias: NoisyBias, mechanism: str,
               budget: Budget) -> list[dict[str, object]]:
    """The mean and sum rows with their clipping flag and bias; each followed by its corrected row."""
    out: list[dict[str, object]] = []
    cap = list(bias.mechanism.cap)
    for row in rows:
        out.append(row)
        if row["statistic"] not in ("mean", "sum"):
            continue
        found = bias.report(moments, str(row["statistic"]))
        clipping = {"flag": found.clips, "beyond_cap": found.beyond_cap, "bias": found.bias,
                    "bias_low95": found.bias_low, "bias_high95": found.bias_high, "cap": cap}
        row["clipping"] = clipping
        out.append({"statistic": f"corrected {found.statistic}", "estimate": found.corrected,
                    "low95": found.corrected_low, "high95": found.corrected_high,
                    "interval": "simulation (clipping bias estimated)", "mechanism": mechanism,
                    "budget": float(budget.amount), "clipping": dict(clipping)})
    return out


def _one_column(planned: PlannedStatistics, values: np.ndarray[Any, np.dtype[np.float64]], clip: ClipBounds,
                context: ReleaseContext, seed: int, records: list[MeasurementRecord],
                contributions: int, search_range: tuple[float, float] | None = None) -> dict[str, object]:
    grid = Grid(clip)
    wanted = set(planned.statistics)
    plan, moment_bounds, bias_plan = _moments_plan(planned, values, clip, context, records, contributions,
                                                   search_range)
    moments = measure_moments(values, plan, context, column=planned.column, seed=seed)
    records.extend(moments.records)
    count = moments.count()
    estimates = [count]
    for name in ("sum", "mean", "variance", "std"):
        if name in wanted:
            estimates.append(getattr(moments, name)())
    additive = f"{moments.records[0].mechanism} (count, sum, sum of squares)"
    rows = [_estimate(e, additive, planned.moments_budget) for e in estimates]
    if bias_plan is not None:
        bias = measure_bias(values, bias_plan, context, column=planned.column, seed=seed)
        records.extend(bias.records)
        rows = _with_bias(rows, moments, bias, f"{additive}; {bias.records[0].mechanism} (clipping tails, excess)",
                          planned.moments_budget)
    out: dict[str, object] = {
        "column": planned.column,
        "bounds": moment_bounds,
        "estimates": rows,
    }
    if planned.quantiles and _differ(moment_bounds, clip):
        out["quantile_bounds"] = {"lower": clip.lower, "upper": clip.upper, "source": clip.source}
    if planned.quantiles and planned.method != "exponential":
        assert isinstance(planned.quantiles_budget, ZCDPBudget)  # the spec allows ptr and smooth under zCDP only
        median = measure_median(values, grid, planned.method, planned.quantiles_budget, planned.delta, context,
                                column=planned.column, proposed_bound=planned.proposed_bound)
        records.extend(median.records)
        out["quantiles"] = [{**_quantile(Fraction(1, 2), median.value, median.low, median.high,
                                         METHOD_NAMES[planned.method], planned.quantiles_budget),
                             "method": planned.method, "delta": float(planned.delta), "outcome": median.outcome}]
    elif planned.quantiles:
        assert planned.quantiles_budget is not None  # the plan gives a share when quantiles are asked for
        mechanisms = quantile_mechanisms(grid, list(planned.quantiles), planned.quantiles_budget,
                                         contributions=contributions)
        released = measure_quantiles(values, mechanisms, context, column=planned.column)
        records.extend(released.records)
        intervals = quantile_intervals(released, max(1.0, count.estimate))
        out["quantiles"] = [_quantile(level, value, low, high, METHOD_NAMES["exponential"], planned.quantiles_budget)
                            for level, value, (low, high) in zip(released.levels, released.values, intervals,
                                                                 strict=True)]
    return out


def _by_groups(planned: PlannedStatistics, values: np.ndarray[Any, np.dtype[np.float64]], groups: IntArray,
               clip: ClipBounds, context: ReleaseContext, seed: int,
               records: list[MeasurementRecord], contributions: int,
               search_range: tuple[float, float] | None = None) -> dict[str, object]:
    """The statistics of each group of ``planned.by`` (parallel composition: one charge per query).

    ``groups``: each row's group (:func:`dp.statistics.groups.group_index`), -1 for rows in none.
    """
    grid = Grid(clip)
    wanted = set(planned.statistics)
    assert planned.by is not None
    # Without public bounds, one selection of bounds and offset over the whole column (all groups), then per group.
    plan, moment_bounds, _ = _moments_plan(planned, values, clip, context, records, contributions, search_range)
    moments = measure_moments_by_group(values, groups, planned.groups, plan, context, column=planned.column,
                                       by=planned.by, seed=seed)
    records.extend(moments[0].records if moments else ())
    released: list[list[float]] = [[] for _ in planned.groups]
    quantile_mechs: tuple[QuantileMechanism, ...] = ()
    if planned.quantiles:
        assert planned.quantiles_budget is not None  # the plan gives a share when quantiles are asked for
        quantile_mechs = quantile_mechanisms(grid, list(planned.quantiles), planned.quantiles_budget,
                                             contributions=contributions)
        codes = group_codes(values, groups, len(planned.groups), grid)
        for mechanism in quantile_mechs:
            drawn, record = measure_group_quantiles(
                codes, GroupedQuantile(mechanism, len(planned.groups)), context, stage="stats",
                query=f"quantile {mechanism.quantile}({planned.column} by {planned.by})")
            records.append(record)
            for g, point in enumerate(drawn):
                released[g].append(float(grid.decode(np.array([point - grid.half_steps]))[0]))
    out_groups = []
    for g, label in enumerate(planned.groups):
        count = moments[g].count()
        estimates = [count, *(getattr(moments[g], name)() for name in ("sum", "mean", "variance", "std")
                              if name in wanted)]
        additive = f"{moments[g].records[0].mechanism} (count, sum, sum of squares)" if moments[g].records else ""
        entry: dict[str, object] = {"group": label, "estimates": [_estimate(e, additive, planned.moments_budget)
                                                                  for e in estimates]}
        if quantile_mechs:
            ordered = NoisyQuantiles(planned.column, grid, tuple(quantile_mechs), tuple(planned.quantiles),
                                     tuple(sorted(released[g])), ())
            intervals = quantile_intervals(ordered, max(1.0, count.estimate))
            entry["quantiles"] = [_quantile(level, value, low, high, METHOD_NAMES["exponential"],
                                            planned.quantiles_budget)
                                  for level, value, (low, high) in zip(ordered.levels, ordered.values, intervals,
                                                                       strict=True)]
        out_groups.append(entry)
    out: dict[str, object] = {"column": planned.column, "by": planned.by, "bounds": moment_bounds, "groups": out_groups}
    if planned.quantiles and _differ(moment_bounds, clip):
        out["quantile_bounds"] = {"lower": clip.lower, "upper": clip.upper, "source": clip.source}
    return out


def _aggregate(planned: PlannedAggregate, table: pa.Table, context: ReleaseContext,
               records: list[MeasurementRecord], contributions: int) -> dict[str, object]:
    """A registered function by sample-and-aggregate over the rows where both its columns are set."""
    request = planned.request
    x, y = _values(table.column(request.x)), _values(table.column(request.y))
    both = ~(np.isnan(x) | np.isnan(y))  # a per-row public rule: a row's presence moves one chunk at most
    result = measure_aggregate(np.column_stack([x[both], y[both]]), planned.mechanism(contributions), context,
                               name=request.arguments)
    records.append(result.record)
    return {"function": request.function, "x": request.x, "y": request.y, "name": request.name,
            "chunks": request.chunks, "range": [request.lower, request.upper], "estimate": result.estimate,
            "low95": result.low, "high95": result.high, "budget": float(planned.budget.amount),
            "mechanism": f"{result.record.mechanism} (sample and aggregate)",
            "interval": "the noise only (95 %); the mean over chunks of n/k rows also has sampling error and the "
                        "bias of clamping to the range"}


@sensitive_task("measure_statistics")
def measure_statistics(plan: ReleasePlan, bounds: list[DiscoveredBounds], ledger_path: str,
                       staging: str) -> list[MeasurementRecord]:
    """Measure every planned column's statistics and write ``statistics/statistics.json`` to ``staging``.

    Returns:
        The measurements' public records (for the audit), in the order drawn.
    """
    spec = plan.spec
    unit = spec.schema.privacy_unit
    columns = list(dict.fromkeys([*(p.column for p in plan.statistics), *(p.by for p in plan.statistics if p.by),
                                  *(c for a in plan.aggregates for c in (a.request.x, a.request.y)),
                                  *((unit.id_column,) if unit.id_column else ())]))
    table = read_table(spec.data, columns)
    contributions = 1
    if unit.id_column:  # at most max_rows rows of each unit, chosen at random (secure source); sensitivities × k
        bounded = bound_contributions(table.column(unit.id_column), unit.max_rows)
        table = table.filter(pa.array(bounded.keep))
        contributions = bounded.l1_sensitivity
    results = []
    records: list[MeasurementRecord] = []
    with Ledger.open(Path(ledger_path)) as ledger:
        context = ReleaseContext(ledger, plan.release_id, plan.definition, secure_noise())  # type: ignore[arg-type]
        for planned in plan.statistics:
            values, clip = _values(table.column(planned.column)), _clip_bounds(planned, bounds)
            search_range = spec.schema.column(planned.column).search_range
            if planned.by is not None:
                by = spec.schema.column(planned.by)
                groups = group_index(table.column(by.name), planned.groups, by.on_unknown)
                results.append(_by_groups(planned, values, groups, clip, context, plan.seed, records,
                                          contributions, search_range))
            else:
                results.append(_one_column(planned, values, clip, context, plan.seed, records, contributions,
                                           search_range))
        aggregates = [_aggregate(planned, table, context, records, contributions) for planned in plan.aggregates]
    del table
    target = Path(staging) / STATISTICS_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    document = {"release_id": plan.release_id, "dataset": plan.dataset,
                "budget_unit": "rho" if plan.definition == "zcdp" else "epsilon",
                "note": "differentially private estimates; each interval covers the noise of its mechanism "
                        "(95 %), not clipping bias or sampling error, except a corrected mean or sum's, which "
                        "also covers the estimated clipping bias out to its caps",
                "columns": results, **({"aggregates": aggregates} if aggregates else {})}
    target.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    write_statistics_parquet(statistic_rows(document), Path(staging) / STATISTICS_PARQUET)
    get_run_logger().info("summary statistics of %d column(s) and %d sample-and-aggregate function(s) measured",
                          len(results), len(aggregates))
    return records
