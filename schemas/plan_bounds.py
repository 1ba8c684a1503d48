"""Planning the bounds stage: SVT bounds, private mappings and quantile bins share its budget equally by unit.

A unit is one AboveThreshold run (a column without public bounds has two), one grouped median (a
``mapping: private`` column), or one level of recursive medians (a ``bins: quantiles`` column has
log2(N)). Public arithmetic on the spec only: nothing here reads data.
"""

from __future__ import annotations

from dataclasses import dataclass

from dprelease.dp.accounting.budget import Budget, PureBudget, ZCDPBudget, pure_from_zcdp_share
from dprelease.dp.errors import ParameterError
from dprelease.schemas.model import Column, ReleaseSpec, SchemaError


def share(total: Budget, parts: int) -> Budget:
    """An equal part of a budget (exact)."""
    if isinstance(total, PureBudget):
        return PureBudget(total.epsilon / parts)
    return ZCDPBudget(total.rho / parts)


@dataclass(frozen=True)
class PlannedBounds:
    """SVT bound discovery for one column: two AboveThreshold runs.

    Attributes:
        column: The column.
        run_budget: Epsilon of each run.
        booked: What the two runs cost together in the ledger's unit.
    """

    column: str
    run_budget: PureBudget
    booked: Budget


@dataclass(frozen=True)
class PlannedMapping:
    """A derived column's private mapping: one DP median per category of its source, in one charge.

    Attributes:
        column: The derived numeric column.
        source: The category column it is a function of.
        groups: The source's declared categories, in order (a null source gives a null value).
        group_budget: The budget of each group's median (the groups compose in parallel).
        budget: What the whole mapping costs (the group budget times the groups a unit can touch).
    """

    column: str
    source: str
    groups: tuple[str, ...]
    group_budget: Budget
    budget: Budget


@dataclass(frozen=True)
class PlannedBins:
    """Quantile bins of a numeric column (``bins: quantiles``): recursive DP medians, one charge a level.

    Attributes:
        column: The column.
        bins: The number of ranges (a power of two); spikes may add bins of their own.
        group_budget: The budget of each range's median (the ranges of a level compose in parallel).
        level_budget: What each level costs at most.
    """

    column: str
    bins: int
    group_budget: Budget
    level_budget: Budget

    @property
    def levels(self) -> int:
        """log2(bins) levels of medians."""
        return self.bins.bit_length() - 1


def bounds_stage_needed(spec: ReleaseSpec) -> bool:
    """Whether any column needs the bounds stage (SVT bounds, a private mapping, quantile bins)."""
    measured = spec.schema.measured
    return (any(c.numeric and not c.has_public_bounds for c in measured)
            or any(c.private_mapping for c in spec.schema.columns)
            or any(c.bins is not None and c.bins.kind == "quantiles" for c in measured))


def plan_bounds_stage(
    spec: ReleaseSpec, stage: Budget | None, sensitivity: int
) -> tuple[tuple[PlannedBounds, ...], tuple[PlannedMapping, ...], tuple[PlannedBins, ...]]:
    """Split the bounds stage's budget equally over its units.

    Raises:
        SchemaError: If a column needs the stage and the allocation gives it no share.
    """
    where = spec.source
    measured = spec.schema.measured
    needs_bounds = [c.name for c in measured if c.numeric and not c.has_public_bounds]
    needs_values = [c for c in spec.schema.columns if c.private_mapping]
    needs_bins = [c for c in measured if c.bins is not None and c.bins.kind == "quantiles"]
    if stage is None:
        for names, rule in (([c.name for c in needs_values], "mapping: private"),
                            ([c.name for c in needs_bins], "bins: quantiles"),
                            (needs_bounds, "no public bounds (SVT finds them)")):
            if names:
                raise SchemaError(f"{where}: allocation.bounds: must be positive: column {names[0]!r} has "
                                  f"{rule}, found in the bounds stage")
        return (), (), ()
    levels = sum(int(c.bins.value).bit_length() - 1 for c in needs_bins if c.bins is not None)
    unit = share(stage, 2 * len(needs_bounds) + len(needs_values) + levels)
    mappings = tuple(_plan_mapping(spec, c, unit, sensitivity) for c in needs_values)
    bins = tuple(PlannedBins(c.name, int(c.bins.value), share(unit, sensitivity), unit)
                 for c in needs_bins if c.bins is not None)
    bounds: tuple[PlannedBounds, ...] = ()
    if needs_bounds:
        try:
            run_budget = unit if isinstance(unit, PureBudget) else pure_from_zcdp_share(unit)
        except ParameterError as err:
            raise SchemaError(f"{where}: allocation.bounds: {err}") from None
        booked: Budget = (PureBudget(2 * run_budget.epsilon) if spec.definition == "pure"
                          else ZCDPBudget(run_budget.epsilon**2))
        bounds = tuple(PlannedBounds(c, run_budget, booked) for c in needs_bounds)
    return bounds, mappings, bins


def _plan_mapping(spec: ReleaseSpec, column: Column, budget: Budget, contributions: int) -> PlannedMapping:
    """One grouped median: the budget covers the groups one privacy unit can touch, min(c, groups)."""
    assert column.derived_from is not None
    source = spec.schema.column(column.derived_from)
    groups = source.categories  # a null source gives a null value: no group of its own
    touched = min(contributions, len(groups))
    return PlannedMapping(column.name, source.name, groups, share(budget, touched), budget)
