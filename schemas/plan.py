"""The budget plan of a release: exact shares of the total for every stage and measurement.

Pure arithmetic on public inputs (the spec and schema); nothing here reads data or the ledger.
Under zCDP the stage budgets are shares of rho; an epsilon-DP mechanism (the sparse vector
technique) in a zCDP release gets the epsilon whose epsilon²/2 fits its share, rounded down, and the
exponential mechanism of the selection stage (epsilon-bounded-range) the epsilon whose epsilon²/8 does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from dprelease.dp.accounting.budget import (
    Budget,
    PureBudget,
    ZCDPBudget,
    bounded_range_from_zcdp_share,
    marginal_weight,
)
from dprelease.dp.accounting.conversions import approx_from_zcdp_cks
from dprelease.dp.errors import ParameterError
from dprelease.dp.measurement.cliques import ROOT_AUTO, PlannedCliques
from dprelease.dp.measurement.cover import NOISE_CAP, PAIRS_PER_ROUND
from dprelease.dp.measurement.cross import PlannedCross, plan_cross
from dprelease.dp.measurement.marginals import marginal_key
from dprelease.dp.statistics.aggregate import SampleAndAggregate
from dprelease.dp.statistics.clipping import ClipBounds
from dprelease.schemas.model import MAX_CELLS, AggregateRequest, ReleaseSpec, SchemaError
from dprelease.schemas.plan_bounds import (
    PlannedBins,
    PlannedBounds,
    PlannedMapping,
    bounds_stage_needed,
    plan_bounds_stage,
)


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
class PlannedSelection:
    """Private choice of the 2-way marginals (``two_way: auto``): a spanning tree, one edge a round.

    Attributes:
        rounds: At most ``columns - 1`` rounds of the exponential mechanism.
        run_budget: Epsilon of each round.
        candidates: The pairs that may be chosen, in public order (those over the cell limit left out).
        two_way: The ``two_way`` stage's budget, split over the chosen pairs once they are known.
    """

    rounds: int
    run_budget: PureBudget
    candidates: tuple[tuple[str, str], ...]
    two_way: Budget


@dataclass(frozen=True)
class PlannedStatistics:
    """One column's summary statistics: its share of the ``stats`` stage, split between moments and quantiles.

    Attributes:
        column: The column.
        statistics: What is published (``count`` always).
        quantiles: The quantile levels (``median`` included as 1/2).
        moments_budget: The budget of count, sum and sum of squares (the additive mechanism).
        quantiles_budget: The budget of all quantiles (the exponential mechanism), or None without any.
        lower: The public lower clipping bound from the schema, or None (the bounds stage finds it).
        upper: The public upper clipping bound, or None.
        by: The category column whose groups are summarised separately (parallel composition), or None.
        groups: The declared categories of ``by`` (rows with a null or undeclared value are in no group).
        method: ``exponential``, ``ptr`` or ``smooth``: how the median (and quantiles) are released.
        proposed_bound: PTR's proposed bound on the median's local sensitivity (value units), else None.
        delta: The delta of a ``ptr`` or ``smooth`` median (booked beside its rho), else 0.
        clipping_bias: Whether :data:`dp.statistics.bias.BIAS_SHARE` of ``moments_budget`` estimates the clipping
            bias of the mean and the sum.
    """

    column: str
    statistics: tuple[str, ...]
    quantiles: tuple[Fraction, ...]
    moments_budget: Budget
    quantiles_budget: Budget | None
    lower: float | None
    upper: float | None
    by: str | None = None
    groups: tuple[str, ...] = ()
    method: str = "exponential"
    proposed_bound: float | None = None
    delta: Fraction = Fraction(0)
    clipping_bias: bool = False


@dataclass(frozen=True)
class PlannedAggregate:
    """A registered function by sample-and-aggregate, with its share of the ``stats`` stage."""

    request: AggregateRequest
    budget: Budget

    def mechanism(self, contributions: int) -> SampleAndAggregate:
        """The library mechanism (its output grid and additive mechanism) for units of ``contributions`` rows."""
        r = self.request
        return SampleAndAggregate(r.function, r.chunks, ClipBounds(r.lower, r.upper, "public"), self.budget,
                                  contributions=contributions)


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
        measurements: Planned marginals (for ``two_way: auto``, the 2-way ones are planned after selection).
        seed: Public seed of synthetic sampling.
        spec: The spec, parsed once (by the preflight) and carried by the plan to every stage.
        selection: The private choice of 2-way marginals, or None when they are declared.
        cliques: The private choice and measurement of junction-tree cliques (``cliques: auto``).
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
    spec: ReleaseSpec
    selection: PlannedSelection | None = None
    cliques: PlannedCliques | None = None
    cross: PlannedCross | None = None
    """``cross_pairs``: the choice and measurement of pairs across the junction tree's branches."""
    statistics: tuple[PlannedStatistics, ...] = ()
    """``stats:``: every summarised column's plan (stage ``stats``)."""
    aggregates: tuple[PlannedAggregate, ...] = ()
    """``stats:`` entries ``sample_and_aggregate:`` (stage ``stats``)."""
    mappings: tuple[PlannedMapping, ...] = ()
    """Derived columns with ``mapping: private`` (stage ``bounds``)."""
    bins: tuple[PlannedBins, ...] = ()
    """Numeric columns with ``bins: quantiles`` (stage ``bounds``)."""
    spent_share: Fraction = Fraction(1)
    """The reserved total as a fraction of the declared budget (below 1 when shares sum below 1 or a stage
    has nothing to spend on: the rest stays in the lifetime budget)."""

    def lines(self) -> list[str]:
        """A human-readable plan (for ``dprelease plan`` and logs); public values only."""
        unit = "epsilon" if self.definition == "pure" else "rho"
        out = [f"release {self.release_id} of dataset {self.dataset!r} ({_describe_definition(self)})",
               f"  reserved: {unit}={float(self.total.amount):.6g}  (exact {self.total.amount})"]
        if self.spent_share < 1:
            out.append(f"  the stages' shares sum to {float(self.spent_share):.6g}: only that fraction of the "
                       "declared budget is reserved and spent; the rest stays in the lifetime budget")
        stage_width = max((len(stage) for stage in self.stages), default=0)
        for stage, budget in self.stages.items():
            out.append(f"  stage {stage:<{stage_width}}  {unit}={float(budget.amount):.6g}")
        kind_width = max([len("bounds") if self.bounds or self.mappings or self.bins else 0,
                          *(len(m.stage) for m in self.measurements)])
        what_width = max([*(len(b.column) for b in self.bounds), *(len(p.column) for p in self.mappings),
                          *(len(q.column) for q in self.bins), *(len(m.query) for m in self.measurements), 0])
        for b in self.bounds:
            out.append(f"    {'bounds':<{kind_width}}  {b.column:<{what_width}}  "
                       f"2 x AboveThreshold epsilon={float(b.run_budget.epsilon):.6g}")
        for q in self.bins:
            out.append(f"    {'bounds':<{kind_width}}  {q.column:<{what_width}}  {q.bins} quantile bins: {q.levels} "
                       f"levels of medians, {unit}={float(q.level_budget.amount):.6g} each")
        for p in self.mappings:
            out.append(f"    {'bounds':<{kind_width}}  {p.column:<{what_width}}  median per {p.source} "
                       f"({len(p.groups)} groups in parallel), {unit}={float(p.budget.amount):.6g}")
        for m in self.measurements:
            out.append(f"    {m.stage:<{kind_width}}  {m.query:<{what_width}}  {unit}={float(m.budget.amount):.6g}")
        if self.selection is not None:
            out.append(f"    selection: up to {self.selection.rounds} rounds of the exponential mechanism, "
                       f"epsilon={float(self.selection.run_budget.epsilon):.6g} each, over "
                       f"{len(self.selection.candidates)} candidate pairs")
            two_way = float(self.selection.two_way.amount)
            out.append(f"    two_way: the chosen pairs, {unit}={two_way:.6g} split by size")
        for st in self.statistics:
            spent = st.moments_budget.amount + (st.quantiles_budget.amount if st.quantiles_budget else 0)
            levels = f"; quantiles {', '.join(f'{float(q):g}' for q in st.quantiles)}" if st.quantiles else ""
            by = f" by {st.by} ({len(st.groups)} groups in parallel)" if st.by else ""
            out.append(f"    stats: {st.column}{by} ({', '.join(st.statistics)}{levels}), {unit}={float(spent):.6g}")
        for ag in self.aggregates:
            out.append(f"    stats: {ag.request.name} by sample and aggregate over {ag.request.chunks} chunks, "
                       f"{unit}={float(ag.budget.amount):.6g}")
        if self.cliques is not None:
            c = self.cliques
            tree_epsilon = float(c.tree_budget.epsilon)
            out.append(f"    selection: a spanning tree ({c.tree_rounds} rounds, epsilon={tree_epsilon:.6g}"
                       f" each), then up to {c.parent_rounds} second parents"
                       + (f" (epsilon={float(c.parent_budget.epsilon):.6g} each)" if c.parent_budget else ""))
            out.append(f"    cliques: {c.tree_rounds} cliques of up to 3 columns (numeric in {c.bins} bins), "
                       f"{unit}={float(c.clique_budget.amount):.6g} each; root "
                       + (f"chosen privately among the tree's leaves (epsilon={float(c.root_budget.epsilon):.6g})"
                          if c.root_budget else f"{c.root or 'the hub of the chosen tree'}"))
            if c.parent_budget:
                out.append(f"    cliques: unless a clique of {c.bins}^3 cells would hold more expected noise than the "
                           "noisy rows (then second parents pay AIM's noise penalty), a second parent whose clique "
                           f"would hold more than {NOISE_CAP:g}x is left out; each round so freed picks up to "
                           f"{PAIRS_PER_ROUND} extra pairs (its loss split {PAIRS_PER_ROUND} ways), measured with half "
                           f"its clique's {unit} (1/{PAIRS_PER_ROUND} of that each; a share no pair takes "
                           "measures the clique again)")
        return out + ([self.cross.describe(unit)] if self.cross is not None else [])


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


MAX_NOISE_SCALE = 1e6
"""The largest noise scale a plan may give any measurement (Laplace b, Gaussian sigma, or SVT's 4/epsilon): beyond
it the outputs are noise only, and the exact samplers' cost grows with the scale (an epsilon of 1e-12 is refused
here, in seconds, before anything is reserved)."""


def noise_scale(budget: Budget, sensitivity: int = 1) -> float:
    """The noise scale a budget buys: Laplace ``Δ/ε`` (pure; ``4Δ/ε`` bounds SVT's), Gaussian ``Δ/sqrt(2ρ)``."""
    if isinstance(budget, PureBudget):
        return 4.0 * sensitivity / float(budget.epsilon)
    return sensitivity / math.sqrt(2.0 * float(budget.rho))


UNALLOCATED = "(unallocated)"
"""The part of the budget that shares summing below 1 leave unspent (it stays in the lifetime budget)."""


def plan_release(spec: ReleaseSpec, release_id: str, seed: int) -> ReleasePlan:
    """Split the spec's budget over stages and measurements, exactly.

    Raises:
        SchemaError: If a planned marginal has more cells than :data:`MAX_CELLS`.
    """
    where = spec.source
    weights = {k: v for k, v in spec.allocation.items()}
    declared = sum(weights.values(), Fraction(0))
    if declared < 1:  # shares mean what they say: a sum below 1 spends only that fraction of the budget
        weights[UNALLOCATED] = 1 - declared
    stages_all = spec.budget.split(weights)
    stages_all.pop(UNALLOCATED, None)
    measured = spec.schema.measured
    stages: dict[str, Budget] = {}
    for name, budget in stages_all.items():
        if name == "bounds" and not bounds_stage_needed(spec):
            continue
        if name == "two_way" and not spec.two_way and not spec.auto_pairs:
            continue
        if name == "selection" and not (spec.auto_pairs or spec.auto_cliques):
            continue
        if (name == "cliques" and not spec.auto_cliques) or (name == "cross" and not spec.cross_pairs):
            continue
        if name == "hierarchy" and not spec.schema.hierarchies:
            continue
        if name == "stats" and not (spec.stats or spec.aggregates):
            continue
        stages[name] = budget
    # The declared shares are fractions of the release budget; an unused share is not spent.
    total_amount = sum((b.amount for b in stages.values()), Fraction(0))
    total: Budget = PureBudget(total_amount) if spec.definition == "pure" else ZCDPBudget(total_amount)

    sensitivity = spec.schema.privacy_unit.rows
    bounds, mappings, quantile_bins = plan_bounds_stage(spec, stages.get("bounds"), sensitivity)

    measurements: list[PlannedMeasurement] = []
    one_way: list[tuple[str, ...]] = [(c.name,) for c in measured]
    shares = _weighted(stages["one_way"], one_way, spec)
    measurements += [PlannedMeasurement("one_way", cols, shares[cols]) for cols in one_way]
    if spec.two_way:
        shares = _weighted(stages["two_way"], list(spec.two_way), spec)
        measurements += [PlannedMeasurement("two_way", pair, shares[pair]) for pair in spec.two_way]
    selection = _plan_selection(spec, stages) if spec.auto_pairs else None
    cliques = _plan_cliques(spec, stages) if spec.auto_cliques else None
    try:
        cross = plan_cross(stages["cross"], spec.cross_pairs) if spec.cross_pairs else None
    except ParameterError as err:
        raise SchemaError(f"{where}: allocation.cross: {err}") from None
    if spec.schema.hierarchies:
        measurements += _plan_hierarchies(spec, stages["hierarchy"])
    for m in measurements:
        if m.hierarchy is not None:
            continue  # a level is no larger than its leaf column's 1-way marginal
        cells = 1
        for c in m.columns:
            cells *= _max_size(spec, c)
        if cells > MAX_CELLS:
            shown = str(cells) if cells < 10**15 else f"more than 10^{len(str(cells)) - 1}"  # width 1e-300: 301 digits
            raise SchemaError(f"{where}: {m.query} would have up to {shown} cells; the limit is {MAX_CELLS}")
    budgets = [(m.query, m.budget) for m in measurements] + [(f"bounds({b.column})", b.run_budget) for b in bounds]
    budgets += [(f"mapping({p.column})", p.group_budget) for p in mappings]
    budgets += [(f"quantile bins({q.column})", q.group_budget) for q in quantile_bins]
    if cliques is not None:
        budgets.append(("each clique", cliques.clique_budget))
    budgets += [("each cross pair", cross.pair_budget)] if cross is not None else []
    statistics, aggregates = _plan_statistics(spec, stages)
    budgets += [(f"stats({p.column})", b) for p in statistics  # each quantile level gets its own share
                for b in (p.moments_budget, p.quantiles_budget and _share(p.quantiles_budget, len(p.quantiles))) if b]
    budgets += [(f"stats({a.request.name})", a.budget) for a in aggregates]
    for query, budget in budgets:
        scale = noise_scale(budget, sensitivity)
        if scale > MAX_NOISE_SCALE:
            raise SchemaError(f"{where}: budget: {query} would get noise of scale {scale:.3g} (limit "
                              f"{MAX_NOISE_SCALE:g}): the budget is too small for this plan; raise epsilon or "
                              "measure less")
    return ReleasePlan(
        release_id=release_id, dataset=spec.dataset, spec_path=str(spec.source), definition=spec.definition,
        epsilon=spec.epsilon, delta=spec.delta, total=total, stages=stages, bounds=bounds,
        measurements=tuple(measurements), seed=seed, spec=spec, selection=selection, cliques=cliques, cross=cross,
        statistics=statistics, aggregates=aggregates, mappings=mappings, bins=quantile_bins,
        spent_share=total_amount / spec.budget.amount,
    )



def _plan_statistics(spec: ReleaseSpec, stages: dict[str, Budget]
                     ) -> tuple[tuple[PlannedStatistics, ...], tuple[PlannedAggregate, ...]]:
    """The ``stats`` stage split equally over its entries; a column's share halved between moments and quantiles.

    Per group, the quantiles' share is divided by min(c, G), the groups one privacy unit of c rows can touch
    (:class:`dp.statistics.groups.GroupedQuantile` books that many times the per-group loss). A
    sample-and-aggregate entry gets one whole share.
    """
    if not (spec.stats or spec.aggregates):
        return (), ()
    per_column = _share(stages["stats"], len(spec.stats) + len(spec.aggregates))
    out = []
    for request in spec.stats:
        column = spec.schema.column(request.column)
        moments, quantiles = (_share(per_column, 2), _share(per_column, 2)) if request.quantiles else (per_column, None)
        public = column.has_public_bounds
        groups = spec.schema.column(request.by).categories if request.by else ()
        if quantiles is not None and groups:  # a unit's rows move min(c, G) groups' quantiles (grouped_quantiles.md)
            quantiles = _share(quantiles, min(spec.schema.privacy_unit.max_rows, len(groups)))
        out.append(PlannedStatistics(request.column, ("count", *(s for s in request.statistics if s != "count")),
                                     request.quantiles, moments, quantiles, column.min if public else None,
                                     column.max if public else None, request.by, groups, request.method,
                                     request.proposed_bound, request.delta, request.clipping_bias))
    unit = spec.schema.privacy_unit
    aggregates = tuple(PlannedAggregate(request, per_column) for request in spec.aggregates)
    for i, planned in enumerate(aggregates):  # the mechanism's own checks, before anything is reserved
        try:
            planned.mechanism(unit.rows)
        except ParameterError as err:
            raise SchemaError(f"{spec.source}: stats: sample_and_aggregate {planned.request.name} (aggregate {i}): "
                              f"{err}") from None
    return tuple(out), aggregates


def _plan_cliques(spec: ReleaseSpec, stages: dict[str, Budget]) -> PlannedCliques:
    """Rounds and budgets of the private junction-tree choice, and each clique's budget."""
    names = [c.name for c in spec.schema.measured]
    candidates = tuple((a, b) for i, a in enumerate(names) for b in names[i + 1:])
    tree_rounds = max(1, len(names) - 1)
    parent_rounds = max(0, len(names) - 2)
    halves = stages["selection"].split({"tree": 1, "parents": 1 if parent_rounds else 0})
    # root: auto takes one more round, as large as a tree round, from the tree's half.
    root_rounds = 1 if spec.root == ROOT_AUTO else 0
    try:
        tree_share = _share(halves["tree"], tree_rounds + root_rounds)
        tree_budget = tree_share if isinstance(tree_share, PureBudget) else bounded_range_from_zcdp_share(tree_share)
        parent_budget: PureBudget | None = None
        if parent_rounds:
            parent_share = _share(halves["parents"], parent_rounds)
            parent_budget = (parent_share if isinstance(parent_share, PureBudget)
                             else bounded_range_from_zcdp_share(parent_share))
    except ParameterError as err:
        raise SchemaError(f"{spec.source}: allocation.selection: {err}") from None
    return PlannedCliques(tree_rounds, tree_budget, parent_rounds, parent_budget, candidates,
                          _share(stages["cliques"], tree_rounds), spec.clique_bins, spec.root,
                          tree_budget if root_rounds else None)


def _plan_selection(spec: ReleaseSpec, stages: dict[str, Budget]) -> PlannedSelection:
    """Rounds, per-round epsilon and candidates of the private spanning-tree selection."""
    names = [c.name for c in spec.schema.measured]
    candidates = tuple(
        (a, b) for i, a in enumerate(names) for b in names[i + 1:]
        if _max_size(spec, a) * _max_size(spec, b) <= MAX_CELLS
    )
    rounds = max(1, len(names) - 1)
    per_round = _share(stages["selection"], rounds)
    try:
        run_budget = per_round if isinstance(per_round, PureBudget) else bounded_range_from_zcdp_share(per_round)
    except ParameterError as err:
        raise SchemaError(f"{spec.source}: allocation.selection: {err}") from None
    if len(spec.schema.hierarchies) > 1:
        raise SchemaError(f"{spec.source}: two_way: auto joins every column, so at most one hierarchy is supported")
    return PlannedSelection(rounds, run_budget, candidates, stages["two_way"])


def plan_pairs(plan: ReleasePlan, spec: ReleaseSpec, pairs: list[tuple[str, str]]) -> list[PlannedMeasurement]:
    """The 2-way measurements of privately chosen pairs: the ``two_way`` stage split over them (public)."""
    if plan.selection is None or not pairs:
        return []
    shares = _weighted(plan.selection.two_way, list(pairs), spec)
    return [PlannedMeasurement("two_way", pair, shares[pair]) for pair in pairs]


def _weighted(stage: Budget, marginals: list[tuple[str, ...]], spec: ReleaseSpec) -> dict[tuple[str, ...], Budget]:
    """Split a stage over its marginals: equally, or by domain size (``weighting: cells`` or ``balanced``).

    Domain sizes are the public upper bounds of :func:`_max_size` (known before any data is read).
    """
    if spec.weighting == "equal":
        return dict.fromkeys(marginals, _share(stage, len(marginals)))
    weights = {}
    for cols in marginals:
        cells = 1
        for c in cols:
            cells *= _max_size(spec, c)
        weights["|".join(cols)] = marginal_weight(cells, spec.definition, balanced=spec.weighting == "balanced")
    split = stage.split(weights)
    return {cols: split["|".join(cols)] for cols in marginals}


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
    extra = (1 if col.nullable else 0) + 2 * len(col.spikes)
    if col.type == "category":
        return len(col.categories) + extra
    assert col.bins is not None
    if col.bins.kind == "values":
        return len(col.bins.points) + extra
    if col.bins.kind == "count":
        return int(col.bins.value) + extra
    if col.bins.kind == "log":  # doubling widths on each side of zero
        return 132 + extra
    if col.bins.kind == "quantiles":  # the ranges, and a bin after each spike
        return 2 * int(col.bins.value) + extra
    low, high = (col.min, col.max) if col.has_public_bounds else col.search_range or (0.0, 0.0)
    assert low is not None and high is not None
    return int((high - low) // col.bins.value) + 2 + extra
