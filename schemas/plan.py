"""The budget plan of a release: exact shares of the total for every stage and measurement.

Pure arithmetic on public inputs (the spec and schema); nothing here reads data or the ledger.
Under zCDP the stage budgets are shares of rho; an epsilon-DP mechanism (the sparse vector
technique) in a zCDP release gets the epsilon whose epsilon²/2 fits its share, rounded down.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from dp.budget import Budget, PureBudget, ZCDPBudget, approx_from_zcdp_cks, pure_from_zcdp_share
from dp.errors import ParameterError
from dp.marginals import marginal_key
from schemas.model import MAX_CELLS, ReleaseSpec, SchemaError


@dataclass(frozen=True)
class PlannedMeasurement:
    """One planned noisy measurement.

    Attributes:
        stage: ``one_way`` or ``two_way``.
        columns: The marginal's columns.
        budget: Its share, in the mechanism's unit (epsilon for pure, rho for zCDP).
    """

    stage: str
    columns: tuple[str, ...]
    budget: Budget
    hierarchy: str | None = None
    """For the ``hierarchy`` stage: the hierarchy's name (``columns`` then holds its leaf column)."""
    level: int = 0
    """For the ``hierarchy`` stage: the level measured, 1 for the top level (0 is the root, the total)."""
    level_name: str = ""
    """For the ``hierarchy`` stage: the level's name (the leaf column's name for the last level)."""

    @property
    def query(self) -> str:
        """The query's public name."""
        if self.hierarchy is not None:
            return f"hierarchy({self.hierarchy}: {self.level_name})"
        return marginal_key(self.columns)


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
class ReleasePlan:
    """Everything a release will spend, decided before any data is read (public).

    Attributes:
        release_id: The release's id.
        dataset: The ledger key.
        spec_path: The spec file.
        definition: ``pure`` or ``zcdp``.
        epsilon: Declared epsilon of the release.
        delta: Declared delta (0 for pure DP).
        total: What is reserved in the ledger: the sum of the stage budgets.
        stages: Budget of each stage with a positive share.
        bounds: Planned bound discoveries.
        measurements: Planned marginals.
        seed: Public seed of synthetic sampling.
    """

    release_id: str
    dataset: str
    spec_path: str
    definition: str
    epsilon: Fraction
    delta: Fraction
    total: Budget
    stages: dict[str, Budget]
    bounds: tuple[PlannedBounds, ...]
    measurements: tuple[PlannedMeasurement, ...]
    seed: int

    def lines(self) -> list[str]:
        """A human-readable plan (for ``dprelease plan`` and logs); public values only."""
        unit = "epsilon" if self.definition == "pure" else "rho"
        out = [f"release {self.release_id} of dataset {self.dataset!r} ({_describe_definition(self)})",
               f"  reserved: {unit}={float(self.total.amount):.6g}  (exact {self.total.amount})"]
        for stage, budget in self.stages.items():
            out.append(f"  stage {stage:<8} {unit}={float(budget.amount):.6g}")
        for b in self.bounds:
            out.append(f"    bounds  {b.column:<16} 2 x AboveThreshold epsilon={float(b.run_budget.epsilon):.6g}")
        for m in self.measurements:
            out.append(f"    {m.stage:<7} {m.query:<40} {unit}={float(m.budget.amount):.6g}")
        return out


def _describe_definition(plan: ReleasePlan) -> str:
    if plan.definition == "pure":
        return f"pure DP, epsilon={float(plan.epsilon):g}"
    assert isinstance(plan.total, ZCDPBudget)
    reported = approx_from_zcdp_cks(plan.total, plan.delta).epsilon
    return f"zCDP, reported as epsilon={float(reported):.6g}, delta={float(plan.delta):g}"


def _share(total: Budget, parts: int) -> Budget:
    if isinstance(total, PureBudget):
        return PureBudget(total.epsilon / parts)
    return ZCDPBudget(total.rho / parts)


def plan_release(spec: ReleaseSpec, release_id: str, seed: int) -> ReleasePlan:
    """Split the spec's budget over stages and measurements, exactly.

    Raises:
        SchemaError: If a planned marginal has more cells than :data:`MAX_CELLS`.
    """
    where = spec.source
    stages_all = spec.budget.split({k: v for k, v in spec.allocation.items()})
    measured = spec.schema.measured
    needs_bounds = [c.name for c in measured if c.numeric and not c.has_public_bounds]
    stages: dict[str, Budget] = {}
    for name, budget in stages_all.items():
        if name == "bounds" and not needs_bounds:
            continue
        if name == "two_way" and not spec.two_way:
            continue
        if name == "hierarchy" and not spec.schema.hierarchies:
            continue
        stages[name] = budget
    # The declared shares are fractions of the release budget; an unused share is not spent.
    total_amount = sum((b.amount for b in stages.values()), Fraction(0))
    total: Budget = PureBudget(total_amount) if spec.definition == "pure" else ZCDPBudget(total_amount)

    bounds: list[PlannedBounds] = []
    if needs_bounds:
        per_run = _share(stages["bounds"], 2 * len(needs_bounds))
        try:
            run_budget = per_run if isinstance(per_run, PureBudget) else pure_from_zcdp_share(per_run)
        except ParameterError as err:
            raise SchemaError(f"{where}: allocation.bounds: {err}") from None
        booked: Budget = (PureBudget(2 * run_budget.epsilon) if spec.definition == "pure"
                          else ZCDPBudget(run_budget.epsilon**2))
        bounds = [PlannedBounds(c, run_budget, booked) for c in needs_bounds]

    measurements: list[PlannedMeasurement] = []
    one_way = _share(stages["one_way"], len(measured))
    measurements += [PlannedMeasurement("one_way", (c.name,), one_way) for c in measured]
    if spec.two_way:
        two_way = _share(stages["two_way"], len(spec.two_way))
        measurements += [PlannedMeasurement("two_way", pair, two_way) for pair in spec.two_way]
    if spec.schema.hierarchies:
        measurements += _plan_hierarchies(spec, stages["hierarchy"])
    for m in measurements:
        if m.hierarchy is not None:
            continue  # a level is no larger than its leaf column's 1-way marginal
        cells = 1
        for c in m.columns:
            cells *= _max_size(spec, c)
        if cells > MAX_CELLS:
            raise SchemaError(f"{where}: {m.query} would have up to {cells} cells; the limit is {MAX_CELLS}")
    return ReleasePlan(
        release_id=release_id, dataset=spec.dataset, spec_path=str(spec.source), definition=spec.definition,
        epsilon=spec.epsilon, delta=spec.delta, total=total, stages=stages, bounds=tuple(bounds),
        measurements=tuple(measurements), seed=seed,
    )


def _plan_hierarchies(spec: ReleaseSpec, stage: Budget) -> list[PlannedMeasurement]:
    """Split the hierarchy stage over every level of every hierarchy by the spec's exact weights.

    Raises:
        SchemaError: If two hierarchy columns are joined by measured 2-way marginals: the synthetic
            table reproduces a hierarchy's counts exactly by sampling its column first, which only
            one column of each connected part of the model can be.
    """
    _check_hierarchy_components(spec)
    weights = {f"{h.name}/{level}": w for h in spec.schema.hierarchies
               for level, w in zip(h.level_names, spec.hierarchy_split[h.name], strict=True)}
    shares = stage.split(weights)
    return [
        PlannedMeasurement("hierarchy", (h.column,), shares[f"{h.name}/{level}"], hierarchy=h.name, level=i + 1,
                           level_name=level)
        for h in spec.schema.hierarchies for i, level in enumerate(h.level_names)
    ]


def _check_hierarchy_components(spec: ReleaseSpec) -> None:
    component = {c.name: c.name for c in spec.schema.measured}

    def find(name: str) -> str:
        while component[name] != name:
            name = component[name]
        return name

    for a, b in spec.two_way:
        component[find(a)] = find(b)
    seen: dict[str, str] = {}
    for h in spec.schema.hierarchies:
        root = find(h.column)
        if root in seen:
            raise SchemaError(f"{spec.source}: two_way: joins the hierarchy columns {seen[root]} and {h.column}; "
                              "at most one hierarchy column per connected group of 2-way marginals")
        seen[root] = h.column


def _max_size(spec: ReleaseSpec, name: str) -> int:
    """Upper bound of a column's encoded domain size, known before bounds are discovered."""
    col = spec.schema.column(name)
    extra = 1 if col.nullable else 0
    if col.type == "category":
        return len(col.categories) + extra
    assert col.bins is not None
    if col.bins.kind == "count":
        return int(col.bins.value) + extra
    if col.bins.kind == "log":
        return 66 + extra
    low, high = (col.min, col.max) if col.has_public_bounds else col.search_range or (0.0, 0.0)
    assert low is not None and high is not None
    return int((high - low) // col.bins.value) + 2 + extra
