"""The public privacy audit report: a pure function of the plan, the ledger and the DP outputs.

It states what was protected (privacy unit, definition, accountant, conversion), what was spent
(per stage and per measurement, exactly, and against the lifetime budget), what each measurement's
noise was, and which data-dependent choices were made privately. It never contains the real row
count, counts of rows dropped or clamped, the input file's hash, timings, or any raw value: those
are internal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

from dprelease.dp.accounting.approximate import effective_cap
from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget
from dprelease.dp.accounting.charges import MeasurementRecord
from dprelease.dp.accounting.conversions import approx_from_zcdp_cks
from dprelease.dp.accounting.ledger_rows import Charge, LedgerStatus
from dprelease.reports.audit_records import (
    Amount,
    Audit,
    Budget,
    DiscoveredBound,
    EpsilonDelta,
    HierarchyInput,
    JunctionTree,
    Lifetime,
    Loss,
    Measurement,
    PostProcessing,
    Privacy,
    PrivateChoices,
    PublicInputs,
    PublishedStatistic,
    SecondParentSelections,
    SelectedPairs,
    StageBudget,
    Unit,
)
from dprelease.reports.statistics import markdown_section
from dprelease.schemas.model import ReleaseSpec
from dprelease.schemas.plan import ReleasePlan

LIMITATIONS = (
    "Trusted curator: dprelease reads the raw table; the guarantee covers what is published, not the machine that "
    "ran the release.",
    "Group privacy: a group of k privacy units is protected with k times the privacy loss (pure DP) or k² times rho "
    "(zCDP).",
    "Population-level inference is not prevented: differential privacy protects individuals, not statistics about "
    "the population, which the release is meant to reveal.",
    "The lifetime budget is the total over all releases of this dataset recorded in this ledger; releases recorded "
    "elsewhere are not counted.",
)


HIERARCHY_POSTPROCESSING = (
    "each hierarchy's noisy level counts (the leaf level combined with its column's 1-way marginal by inverse "
    "variance) made consistent by weighted least squares over the tree (Hay et al. 2010), the root pinned to the "
    "row count; then non-negative (each family projected onto its parent's count) and rounded top-down by largest "
    "remainder, so every parent is exactly the sum of its children; the synthetic table reproduces the leaf counts "
    "exactly (published in marginals/hierarchy-*.parquet)"
)

FOREST_MODEL = (
    "forest over the measured 2-way marginals (parent -> child; a pair that would close a cycle is left out), "
    "fitted as a junction tree of its 1- and 2-cliques to the noisy 2-ways and 1-ways by mirror descent "
    "(Private-PGM's estimator, McKenna et al. 2019) started from the consistent tables; sampled parents first, "
    "systematically within each parent group"
)


CROSS_MODEL = ("; with cross_pairs, a pool of rows sampled so (ten times the release's, at most 4 million) is "
               "raked by iterative proportional fitting to the pairs across the tree's branches measured in stage "
               "cross (each target: the noisy pair's association with the model's margins) and the synthetic rows "
               "are drawn from it by systematic resampling, hierarchy leaf counts exact")


def _approx(rho: Fraction, delta: Fraction, delta_spent: Fraction = Fraction(0)) -> EpsilonDelta:
    """A zCDP amount as (epsilon, delta) by the CKS conversion, epsilon rounded up.

    The conversion runs at delta less the delta (epsilon, delta) mechanisms spent (approximate zCDP,
    ``docs/proofs/approximate_zcdp.md``, Lemma 4); the delta reported is the whole.
    """
    converted = approx_from_zcdp_cks(ZCDPBudget(rho), delta - delta_spent).epsilon
    return EpsilonDelta(Amount.of(converted), float(delta))


def _usable_cap(before: LedgerStatus, delta_spent: Fraction) -> Fraction:
    """The lifetime cap less what the delta spent so far takes from it (``docs/proofs/approximate_zcdp.md``)."""
    used = before.delta_spent + delta_spent
    if not used or before.epsilon is None:
        return before.cap
    return effective_cap(before.cap, before.epsilon, before.delta, used)


def budget_table(audit: Audit) -> list[dict[str, str | float | None]]:
    """The audit's budget as rows of a table (Prefect's table artifact): each stage, the release, the lifetime.

    Every row gives the booked amount in the ledger's unit and, under zCDP, the epsilon that amount alone
    converts to at the release's delta (CKS conversion), so a reader sees both. When (epsilon, delta)
    mechanisms spent part of the delta, the conversion uses what they left (as the audit's total does),
    and the delta column stays the declared one.
    """
    budget, life = audit.budget, audit.lifetime
    unit = budget.unit
    delta = Fraction(budget.declared.delta)
    converting = delta - Fraction(budget.delta_spent or 0)

    def row(name: str, amount: Amount | None) -> dict[str, str | float | None]:
        if amount is None:
            return {"budget": name, unit: None, "epsilon": None, "delta": None}
        exact = amount.exact
        if unit == "rho":
            epsilon = float(approx_from_zcdp_cks(ZCDPBudget(exact), converting).epsilon) if exact > 0 else 0.0
            return {"budget": name, unit: float(exact), "epsilon": epsilon, "delta": float(delta)}
        return {"budget": name, unit: float(exact), "epsilon": float(exact), "delta": 0.0}

    rows = [row(f"stage {s.stage}", s.booked) for s in budget.stages]
    rows.append(row("this release (booked)", budget.booked))
    rows.append(row("lifetime cap", life.cap))
    rows.append(row("lifetime spent before", life.spent_before))
    rows.append(row("lifetime remaining after", life.remaining_after))
    return rows


def _loss(unit: Unit, amount: Fraction) -> Loss:
    return Loss(unit, Amount.of(amount))


def build_audit(
    *,
    plan: ReleasePlan,
    spec: ReleaseSpec,
    schema_sha256: str,
    charges: Sequence[Charge],
    before: LedgerStatus,
    measurements: Sequence[MeasurementRecord],
    discovered_bounds: Mapping[str, tuple[float, float, bool, bool]],
    synthetic_rows: int,
    model_edges: Sequence[tuple[str, str]],
    provenance: Mapping[str, str],
    selected_pairs: Sequence[Sequence[str]] = (),
    cliques: Sequence[Sequence[str]] = (),
    coarse_bins: Mapping[str, int] | None = None,
    bound_quality: Mapping[str, tuple[str, str]] | None = None,
    statistics: Sequence[PublishedStatistic] = (),
) -> Audit:
    """Assemble the public audit report (written as ``audit.json`` by :func:`reports.audit_json.audit_to_json`).

    Args:
        plan: The release plan.
        spec: The release spec.
        schema_sha256: Hash of the declared schema file (a public input).
        charges: The ledger's rows for this release.
        before: The dataset's ledger status before this release.
        measurements: Provenance of every noisy measurement, in order.
        discovered_bounds: column -> (lower, upper, lower found, upper found), DP outputs.
        synthetic_rows: Rows of the synthetic table (the post-processed noisy count).
        model_edges: The edges of the fitted model.
        provenance: Package versions and the code commit.
        selected_pairs: The 2-way marginals chosen privately (``two_way: auto``), in the order chosen,
            or the spanning tree of ``cliques: auto``.
        cliques: The junction tree's cliques (``cliques: auto``), (parents..., child) in sampling order.
        coarse_bins: For ``cliques: auto``, the number of coarse bins of each coarsened column.
        bound_quality: column -> public quality flags of its (lower, upper) discovered bounds.
        statistics: The published summary statistics (``stats:``), DP outputs.

    Returns:
        The audit.
    """
    zcdp = plan.definition == "zcdp"
    unit: Unit = "rho" if zcdp else "epsilon"
    spent = sum((c.loss for c in charges), Fraction(0))
    delta_spent = sum((c.delta for c in charges), Fraction(0))
    by_stage: dict[str, Fraction] = {}
    for c in charges:
        by_stage[c.stage] = by_stage.get(c.stage, Fraction(0)) + c.loss
    after_spent = before.spent + spent
    budget = Budget(
        unit=unit,
        declared=EpsilonDelta(Amount.of(plan.epsilon), float(plan.delta)),
        reserved=Amount.of(plan.total.amount),
        share_of_declared=Amount.of(plan.spent_share),
        share_note=("the stages' shares cover the whole declared budget" if plan.spent_share == 1 else
                    "only this share of the declared budget was reserved and spent (shares summing below 1, "
                    "or stages with nothing to spend on); the rest stays in the lifetime budget"),
        booked=Amount.of(spent),
        stages=tuple(
            StageBudget(stage=stage, allocated=Amount.of(plan.stages[stage].amount) if stage in plan.stages else None,
                        booked=Amount.of(amount))
            for stage, amount in by_stage.items()
        ),
        booked_as_epsilon_delta=_approx(spent, plan.delta, delta_spent) if zcdp else None,
        delta_spent=float(delta_spent) if delta_spent else None,
    )
    lifetime = Lifetime(
        unit=unit,
        cap=Amount.of(before.cap),
        spent_before=Amount.of(before.spent),
        this_release=Amount.of(spent),
        remaining_after=Amount.of(_usable_cap(before, delta_spent) - after_spent),
        per_release_cap=Amount.of(before.release_cap) if before.release_cap is not None else None,
        renewal="none: a lifetime budget is never renewed",
        cap_as_epsilon_delta=_approx(before.cap, plan.delta) if zcdp else None,
    )
    rows = tuple(
        Measurement(
            stage=m.stage,
            query=m.query,
            mechanism=m.mechanism,
            sensitivity=m.sensitivity,
            scale=m.scale,
            scale_kind="sigma" if "Gaussian" in m.mechanism else "scale",
            booked=_loss(unit, m.loss.amount),
            native_loss=(_loss("epsilon", m.native_loss.epsilon) if isinstance(m.native_loss, PureBudget)
                         else _loss("rho", m.native_loss.rho)),
            cells=m.cells,
            noise_std=m.std,
            ci95_halfwidth=m.ci95,
            delta=float(m.delta) if m.delta else None,
        )
        for m in measurements
    )
    selection = Amount.of(by_stage.get("selection", Fraction(0)))
    return Audit(
        release_id=plan.release_id,
        dataset=plan.dataset,
        table=spec.schema.table,
        privacy=Privacy(
            unit=spec.schema.privacy_unit.describe(),
            neighbouring="add/remove one privacy unit",
            definition="rho-zero-concentrated DP (zCDP)" if zcdp else "pure epsilon-DP",
            accountant=("zCDP: rho adds up over measurements; epsilon-DP pieces enter as epsilon²/2, the "
                        "exponential mechanism (epsilon-bounded-range) as epsilon²/8"
                        if zcdp else "sequential composition of epsilon"),
            conversion=("rho-zCDP to (epsilon, delta): epsilon = inf over alpha > 1 of alpha·rho + "
                        "(ln(1/(alpha·delta)) + (alpha-1)·ln(1-1/alpha)) / (alpha-1), Canonne, Kamath & Steinke "
                        "2020, Cor. 13 (never looser than Bun & Steinke's rho + 2·sqrt(rho·ln(1/delta))); "
                        "rounded up" if zcdp else "none"),
            delta=float(plan.delta),
            noise="exact discrete samplers (OpenDP) over a secure random source",
        ),
        budget=budget,
        lifetime=lifetime,
        measurements=rows,
        private_choices=PrivateChoices(
            discovered_bounds={
                col: DiscoveredBound(lower=lo, upper=hi, lower_found=lf, upper_found=uf,
                                     note="sparse vector technique; a bound not found falls back to the declared "
                                          "search range",
                                     lower_quality=(bound_quality or {}).get(col, ("", ""))[0],
                                     upper_quality=(bound_quality or {}).get(col, ("", ""))[1])
                for col, (lo, hi, lf, uf) in discovered_bounds.items()
            },
            selected_pairs=SelectedPairs(
                pairs=tuple(tuple(p) for p in selected_pairs),
                method="maximum spanning tree grown by the exponential mechanism (MST, McKenna et al. 2021): "
                       "each round picks one pair joining two components, scored by the L1 distance of its "
                       "2-way table from the independence prediction of the noisy 1-way marginals "
                       "(sensitivity 1)",
                booked=selection,
            ) if spec.auto_pairs else None,
            junction_tree=JunctionTree(
                spanning_tree=tuple(tuple(p) for p in selected_pairs),
                cliques=tuple(tuple(c) for c in cliques),
                coarse_bins=dict(coarse_bins or {}),
                root=spec.root or "the highest-degree column of the chosen tree",
                method="a spanning tree grown by the exponential mechanism (each pair scored on coarse codes by its "
                       "distance from independence under the noisy 1-ways; sensitivity 1 per row), then, from the "
                       "root, a second parent for each column among the columns already sharing a clique with its "
                       "tree parent, by the exponential mechanism on the conditional-L1 score (sensitivity below 4 "
                       "per row; when a full clique would hold more noise than rows, each candidate's score loses "
                       "the expected L1 noise of its extra cells and no second parent is a candidate too, as in "
                       "AIM); numeric columns in bins of equal noisy mass inside cliques",
                second_parent_selections=SecondParentSelections(
                    run=sum(1 for m in measurements if m.query.startswith("second parent of ")),
                    skipped_single_candidate=sum(
                        1 for c in cliques if len(c) == 3
                        and not any(m.query == f"second parent of {c[2]}" for m in measurements)),
                    note="a selection with a single candidate is not run: it could only return that candidate, "
                         "so its budget is not drawn and returns to the lifetime budget when the release closes",
                ),
                booked=selection,
            ) if spec.auto_cliques else None,
        ),
        public_inputs=PublicInputs(
            schema_file=spec.schema_path.name,
            schema_sha256=schema_sha256,
            two_way_pairs="auto (chosen privately: see private_choices)" if spec.auto_pairs
            else "none: cliques chosen privately (see private_choices)" if spec.auto_cliques
            else tuple(tuple(p) for p in spec.two_way),
            allocation={k: str(v) for k, v in spec.allocation.items()},
            hierarchies=tuple(
                HierarchyInput(name=h.name, column=h.column, levels=tuple(h.levels),
                               nodes_per_level=tuple(len(labels) for labels in h.labels),
                               level_weights=tuple(str(w) for w in spec.hierarchy_split[h.name]))
                for h in spec.schema.hierarchies
            ),
        ),
        post_processing=PostProcessing(
            row_count="inverse-variance-weighted total of all noisy marginals, rounded",
            consistency="each column's 1-way counts combine every marginal containing it by inverse variance, "
                        "projected onto non-negative counts with the row count and rounded (largest remainder); "
                        "each 2-way table is fitted to its two 1-ways (iterative proportional fitting) and rounded "
                        "so its row and column sums equal them exactly (controlled rounding)",
            model=("degree-2 junction tree over the measured cliques, fitted to the noisy cliques and 1-ways by "
                   "mirror descent (Private-PGM's estimator, McKenna et al. 2019); sampled parents first, "
                   "systematically within each parent group, numeric codes refined within their coarse bin from "
                   "the 1-way" + (CROSS_MODEL if plan.cross is not None else "")
                   if spec.auto_cliques else FOREST_MODEL),
            model_edges=tuple(tuple(e) for e in model_edges),
            sampling_seed=plan.seed,
            synthetic_rows=synthetic_rows,
            hierarchies=HIERARCHY_POSTPROCESSING if spec.schema.hierarchies else None,
        ),
        provenance=dict(provenance),
        limitations=LIMITATIONS,
        statistics=tuple(statistics),
    )


def render_markdown(audit: Audit) -> str:
    """A human-readable rendering of :func:`build_audit`'s output."""
    budget, privacy, life = audit.budget, audit.privacy, audit.lifetime
    unit = budget.unit
    lines = [
        f"# Privacy audit: release `{audit.release_id}` of `{audit.dataset}`",
        "",
        f"- Privacy unit: {privacy.unit}",
        f"- Definition: {privacy.definition}; accountant: {privacy.accountant}",
        f"- Conversion: {privacy.conversion}",
        f"- Noise: {privacy.noise}",
        "",
        "## Budget of this release",
        "",
        f"Declared: epsilon = {budget.declared.epsilon.value:g}, "
        f"delta = {budget.declared.delta:g}. "
        f"Reserved {unit} = {budget.reserved.value:.6g}; booked {unit} = "
        f"{budget.booked.value:.6g} (exact {budget.booked.exact_text}).",
    ]
    if (conv := budget.booked_as_epsilon_delta) is not None:
        lines.append(f"Booked as (epsilon, delta): ({conv.epsilon.value:.6g}, {conv.delta:g}).")
    if budget.delta_spent is not None:
        lines.append(f"Of the declared delta, {budget.delta_spent:.3g} was spent by (epsilon, delta) mechanisms "
                     "(booked as approximate zCDP); the conversion above uses the delta left.")
    lines += ["", f"| stage | allocated {unit} | booked {unit} |", "|---|---|---|"]
    for s in budget.stages:
        allocated = f"{s.allocated.value:.6g}" if s.allocated is not None else "-"
        lines.append(f"| {s.stage} | {allocated} | {s.booked.value:.6g} |")
    lines += [
        "", "## Lifetime budget of the dataset", "",
        "| cap | spent before | this release | remaining |", "|---|---|---|---|",
        f"| {life.cap.value:.6g} | {life.spent_before.value:.6g} | {life.this_release.value:.6g} | "
        f"{life.remaining_after.value:.6g} |",
        "", f"({unit}; {life.renewal})",
        "", "## Measurements", "",
        f"| stage | query | mechanism | sensitivity | scale | booked {unit} | noise std | 95% ± |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in audit.measurements:
        std = f"{m.noise_std:.4g}" if m.noise_std is not None else "-"
        ci = f"{m.ci95_halfwidth:.4g}" if m.ci95_halfwidth is not None else "-"
        lines.append(f"| {m.stage} | `{m.query}` | {m.mechanism} | {m.sensitivity} | "
                     f"{m.scale:.6g} | {m.booked.amount.value:.6g}"
                     + (f" + delta {m.delta:.3g}" if m.delta is not None else "") + f" | {std} | {ci} |")
    bounds = audit.private_choices.discovered_bounds
    if bounds:
        lines += ["", "## Bounds discovered privately (sparse vector technique)", "",
                  "| column | lower | upper |", "|---|---|---|"]
        for col, b in bounds.items():
            lines.append(f"| {col} | {b.lower:g}{'' if b.lower_found else ' (search range)'} | "
                         f"{b.upper:g}{'' if b.upper_found else ' (search range)'} |")
        flagged = [(col, b) for col, b in bounds.items() if b.lower_quality or b.upper_quality]
        if flagged:
            lines.append("")
            lines += [f"- {col}: lower {b.lower_quality}; upper {b.upper_quality}" for col, b in flagged]
    lines += markdown_section(audit.statistics, unit)
    post = audit.post_processing
    lines += ["", "## Post-processing and sampling", "",
              f"- Row count: {post.row_count}; synthetic rows: {post.synthetic_rows}",
              f"- Consistency: {post.consistency}",
              f"- Model: {post.model}: " + ", ".join(f"{a} -> {b}" for a, b in post.model_edges),
              f"- Sampling seed (public): {post.sampling_seed}",
              "", "## Provenance", ""]
    lines += [f"- {k}: {v}" for k, v in audit.provenance.items()]
    lines += ["", "## Limitations", ""] + [f"- {text}" for text in audit.limitations]
    return "\n".join(lines) + "\n"

