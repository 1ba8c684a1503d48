"""The public privacy audit as typed records: what :func:`reports.audit.build_audit` assembles.

The renderers (:func:`reports.audit.render_markdown`, :func:`reports.audit.budget_table`,
:func:`reports.html.render_html`, :func:`reports.internal_html.render_internal_html`) read these
records' attributes. Their one JSON form, ``audit.json``, is written and read by
:mod:`reports.audit_json`. Records are frozen; sequences are tuples.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

AUDIT_FORMAT = "dprelease-audit/1"
"""The ``format`` of ``audit.json``."""

Unit = Literal["epsilon", "rho"]
"""The ledger's unit: epsilon under pure DP, rho under zCDP."""

Pairs = tuple[tuple[str, ...], ...]
"""Column tuples (pairs, cliques, model edges); JSON arrays of arrays."""


@dataclass(frozen=True)
class Amount:
    """A budget amount: an exact rational and its float (JSON: ``{"exact": "n/d", "value": x}``)."""

    exact: Fraction
    """The exact value."""
    value: float
    """``float(exact)``, as written (readers need not parse the rational)."""

    @classmethod
    def of(cls, exact: Fraction) -> Amount:
        """The amount of an exact rational."""
        return cls(exact, float(exact))

    @property
    def exact_text(self) -> str:
        """The exact value as written in ``audit.json``: ``n/d``, in lowest terms (``1/1`` for one)."""
        return f"{self.exact.numerator}/{self.exact.denominator}"


@dataclass(frozen=True)
class Loss:
    """An amount in a named unit, a measurement's booked or native loss (JSON: ``{unit: amount}``)."""

    unit: Unit
    """``epsilon`` or ``rho``."""
    amount: Amount
    """The loss."""


@dataclass(frozen=True)
class EpsilonDelta:
    """An (epsilon, delta) pair: the declared budget, or a zCDP amount converted for the reader."""

    epsilon: Amount
    """Epsilon (rounded up when converted)."""
    delta: float
    """Delta."""


@dataclass(frozen=True)
class Privacy:
    """What is protected and how the loss is accounted (all public prose, plus delta)."""

    unit: str
    """The privacy unit, described."""
    neighbouring: str
    """The neighbouring relation."""
    definition: str
    """Pure epsilon-DP or rho-zCDP."""
    accountant: str
    """How losses compose."""
    conversion: str
    """How a zCDP loss is reported as (epsilon, delta), or ``none``."""
    delta: float
    """The release's delta."""
    noise: str
    """The noise samplers and their random source."""


@dataclass(frozen=True)
class StageBudget:
    """One stage's allocation by the plan and its booked loss, in the ledger's unit."""

    stage: str
    """The stage name."""
    allocated: Amount | None
    """What the plan allocated to it, or None for a stage the plan does not name."""
    booked: Amount
    """What the ledger booked for it."""


@dataclass(frozen=True)
class Budget:
    """The budget of this release, in the ledger's unit."""

    unit: Unit
    """The ledger's unit."""
    declared: EpsilonDelta
    """The spec's declared (epsilon, delta)."""
    reserved: Amount
    """Reserved in the ledger before any data was read."""
    share_of_declared: Amount | None
    """The share of the declared budget the stages reserved (None in audits written before it was added)."""
    share_note: str | None
    """What that share means (None in audits written before it was added)."""
    booked: Amount
    """Booked in the ledger by this release."""
    stages: tuple[StageBudget, ...]
    """Each stage with a charge, in the order first charged."""
    booked_as_epsilon_delta: EpsilonDelta | None
    """Under zCDP, the booked amount as (epsilon, delta); None under pure DP."""
    delta_spent: float | None = None
    """The delta booked by (epsilon, delta) mechanisms (PTR, smooth sensitivity), part of the declared delta; the
    conversion to (epsilon, delta) uses what is left of it (``docs/proofs/approximate_zcdp.md``). None: none."""


@dataclass(frozen=True)
class Lifetime:
    """The dataset's lifetime budget around this release, in the ledger's unit."""

    unit: Unit
    """The ledger's unit."""
    cap: Amount
    """The lifetime cap."""
    spent_before: Amount
    """Spent by earlier releases."""
    this_release: Amount
    """Booked by this release."""
    remaining_after: Amount
    """Cap minus everything spent, after this release."""
    per_release_cap: Amount | None
    """The most one release may reserve, or None."""
    renewal: str
    """The renewal policy (never)."""
    cap_as_epsilon_delta: EpsilonDelta | None
    """Under zCDP, the cap as (epsilon, delta); None under pure DP."""


@dataclass(frozen=True)
class Measurement:
    """One noisy measurement (or SVT run, or selection): its mechanism, noise and loss."""

    stage: str
    """The release stage."""
    query: str
    """What was measured."""
    mechanism: str
    """The mechanism's name."""
    sensitivity: str
    """The sensitivity, with its norm."""
    scale: float
    """The noise scale or sigma used."""
    scale_kind: str
    """``sigma`` (Gaussian family) or ``scale`` (Laplace family)."""
    booked: Loss
    """The booked loss, in the ledger's unit."""
    native_loss: Loss
    """The loss in the mechanism's own terms."""
    cells: int
    """Noisy values drawn (queries examined at most, for SVT)."""
    noise_std: float | None
    """Standard deviation of the noise on each value, or None (SVT releases no values)."""
    ci95_halfwidth: float | None
    """Half-width of a 95 % interval of the noise, or None."""
    delta: float | None = None
    """The delta booked with the loss (an (epsilon, delta) mechanism), or None."""


@dataclass(frozen=True)
class DiscoveredBound:
    """A column's clipping bounds found by the sparse vector technique (DP outputs)."""

    lower: float
    """The lower bound."""
    upper: float
    """The upper bound."""
    lower_found: bool
    """False when the lower bound fell back to the declared search range."""
    upper_found: bool
    """False when the upper bound fell back to the declared search range."""
    note: str
    """How the bounds were found."""
    lower_quality: str = ""
    """A public quality flag of the lower bound (doublings inside the search range, rows it may clamp)."""
    upper_quality: str = ""
    """A public quality flag of the upper bound."""


@dataclass(frozen=True)
class SelectedPairs:
    """The 2-way marginals chosen privately (``two_way: auto``)."""

    pairs: Pairs
    """The pairs, in the order chosen."""
    method: str
    """How they were chosen."""
    booked: Amount
    """Booked by the selection stage."""


@dataclass(frozen=True)
class SecondParentSelections:
    """How many second-parent selections ran, and how many were skipped (a single candidate)."""

    run: int
    """Selections run."""
    skipped_single_candidate: int
    """Selections not run: their only candidate was certain."""
    note: str
    """Why a skipped selection draws no budget."""


@dataclass(frozen=True)
class JunctionTree:
    """The model structure chosen privately (``cliques: auto``)."""

    spanning_tree: Pairs
    """The spanning tree's pairs."""
    cliques: Pairs
    """The cliques, (parents..., child) in sampling order."""
    coarse_bins: Mapping[str, int]
    """Coarse bins of each coarsened column."""
    root: str
    """The root column, or how it was chosen."""
    method: str
    """How the structure was chosen."""
    second_parent_selections: SecondParentSelections | None
    """Counts of second-parent selections (None in audits written before they were counted)."""
    booked: Amount
    """Booked by the selection stage."""


@dataclass(frozen=True)
class PrivateChoices:
    """The data-dependent choices, each itself a DP output."""

    discovered_bounds: Mapping[str, DiscoveredBound]
    """Column -> its discovered bounds."""
    selected_pairs: SelectedPairs | None
    """The 2-way marginals chosen (``two_way: auto``), else None."""
    junction_tree: JunctionTree | None
    """The cliques chosen (``cliques: auto``), else None."""


@dataclass(frozen=True)
class HierarchyInput:
    """A declared hierarchy (public)."""

    name: str
    """The hierarchy's name."""
    column: str
    """Its leaf column."""
    levels: tuple[str, ...]
    """Its levels above the column, root first."""
    nodes_per_level: tuple[int, ...]
    """Number of nodes on each level."""
    level_weights: tuple[str, ...]
    """The budget split over its levels, as rationals."""


@dataclass(frozen=True)
class PublicInputs:
    """Inputs chosen without looking at the data."""

    schema_file: str
    """The schema file's name."""
    schema_sha256: str
    """The schema file's SHA-256."""
    two_way_pairs: str | Pairs
    """The declared 2-way marginals, or a note that they were chosen privately."""
    allocation: Mapping[str, str]
    """Stage -> its weight, as written in the spec."""
    hierarchies: tuple[HierarchyInput, ...] | None
    """The declared hierarchies (None in audits written before hierarchies were added)."""


@dataclass(frozen=True)
class PostProcessing:
    """What was derived from the DP outputs without spending budget."""

    row_count: str
    """How the row count was estimated."""
    consistency: str
    """How the marginals were made consistent."""
    model: str
    """The model fitted and sampled."""
    model_edges: Pairs
    """The fitted model's edges, (parent, child)."""
    sampling_seed: int
    """The public seed of synthetic sampling."""
    synthetic_rows: int
    """Rows of the synthetic table."""
    hierarchies: str | None
    """How hierarchy counts were post-processed, or None without hierarchies."""


@dataclass(frozen=True)
class PublishedStatistic:
    """One published summary statistic (``stats:``), a row of ``statistics/statistics.parquet``: DP outputs only."""

    subject: str
    """The column (``age``) or the function (``slope(hours-per-week ~ age)``)."""
    by: str | None
    """The category column of the groups, or None."""
    group: str | None
    """The group (a declared category of ``by``), or None."""
    statistic: str
    """``count``, ``sum``, ``mean``, ``variance``, ``std``, ``quantile`` or the function's name."""
    level: float | None
    """The quantile's level, else None."""
    estimate: float | None
    """The DP estimate (None where propose-test-release refused)."""
    low95: float | None
    """Lower end of the 95 % interval of the noise, or None (none published)."""
    high95: float | None
    """Upper end, or None."""
    mechanism: str
    """The mechanism that released it."""
    bounds: str
    """The clipping bounds (or the function's output range) and where they came from."""
    budget: float | None
    """The budget of the entry's part that released it (moments, quantiles, the function), in the audit's unit."""
    clipping_flag: bool | None = None
    """A mean's or sum's clipping flag (``clipping_bias:``): True when its DP bias estimate is beyond twice its
    95 % half-width; None where no bias was estimated."""
    clipping_bias: float | None = None
    """The DP estimate of the clipping bias (true minus clipped statistic, out to the caps), or None."""
    clipping_bias_low95: float | None = None
    """Lower end of the bias estimate's 95 % noise interval, or None."""
    clipping_bias_high95: float | None = None
    """Upper end, or None."""


@dataclass(frozen=True)
class Audit:
    """The public privacy audit of one release (``audit.json``)."""

    release_id: str
    """The release id."""
    dataset: str
    """The dataset (the ledger key)."""
    table: str
    """The schema's table name."""
    privacy: Privacy
    """What is protected."""
    budget: Budget
    """The budget of this release."""
    lifetime: Lifetime
    """The dataset's lifetime budget."""
    measurements: tuple[Measurement, ...]
    """Every measurement, in the order drawn."""
    private_choices: PrivateChoices
    """Data-dependent choices made privately."""
    public_inputs: PublicInputs
    """Public inputs."""
    post_processing: PostProcessing
    """Post-processing and sampling."""
    provenance: Mapping[str, str]
    """Package versions and the code commit."""
    limitations: tuple[str, ...]
    """What the guarantee does not promise."""
    statistics: tuple[PublishedStatistic, ...] = ()
    """The published summary statistics (``stats:``), empty without them."""
