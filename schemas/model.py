"""Table schemas and release specs: the public description of a table and of a release.

A *schema* (``schema.yaml``) declares each column's public domain: its type, its categories or
public bounds, whether it may be null, how numeric values are binned, and columns that are public
functions of others. A *spec* (``release.yaml``) declares one release: which dataset (the
population in the ledger), which schema and data file, the budget and its allocation over stages,
and which 2-way marginals to measure. Nothing here is ever read off the data.

Errors cite the file and the key path: ``schema.yaml: columns.age: min (90) must be below max (17)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Literal

from dprelease.dp.accounting.budget import (
    Budget,
    Definition,
    PureBudget,
    ZCDPBudget,
)
from dprelease.dp.errors import DPReleaseError
from dprelease.dp.measurement.marginals import Binning

ColumnType = Literal["int", "float", "category"]
STAGES = ("bounds", "one_way", "selection", "two_way", "cliques", "cross", "hierarchy", "stats")
_NAME = re.compile(r"\A[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")  # \Z: "a\n" is not a name
MAX_CELLS = 1_000_000


class SchemaError(DPReleaseError, ValueError):
    """A schema or spec file breaks a rule; the message names the file, key path and rule."""


def _fail(where: str, message: str) -> SchemaError:
    return SchemaError(f"{where}: {message}")


@dataclass(frozen=True)
class Column:
    """One column's public domain.

    Attributes:
        name: The column name in the Parquet file.
        type: ``int``, ``float`` or ``category`` (strings from a declared list).
        nullable: Whether nulls are part of the domain (they get a code of their own).
        categories: The declared categories of a ``category`` column, as NFC strings (an integer code
            declared as an integer is its decimal string; ``schemas.categories``).
        min: Public lower bound of a numeric column, or None when it is discovered with SVT.
        max: Public upper bound, or None.
        search_range: Where SVT may look for bounds when none are public.
        bins: Binning of numeric values.
        derived_from: Another column this one is a public function of (costs no budget).
        mapping: For a derived column: the value for each category of ``derived_from``.
        private_mapping: A derived column whose values are not public (``mapping: private``): each
            category's value is released by a DP median in the bounds stage.
        resolution: The grid step of a private mapping's values.
        spikes: Public values of a numeric column that get a bin of their own (zero, a sentinel, a top code).
        labels: For a category derived from a category: source category -> this column's category.
        ranges: For a category derived from a number: (low, high, category), [low, high), sorted.
        on_unknown: What to do with a row whose category is outside the domain: ``drop`` or
            the name of a declared category to map it to.
    """

    name: str
    type: ColumnType
    nullable: bool = False
    categories: tuple[str, ...] = ()
    min: float | None = None
    max: float | None = None
    search_range: tuple[float, float] | None = None
    bins: Binning | None = None
    derived_from: str | None = None
    mapping: tuple[tuple[str, float], ...] = ()
    on_unknown: str = "drop"
    private_mapping: bool = False
    resolution: float | None = None
    spikes: tuple[float, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    ranges: tuple[tuple[float, float, str], ...] = ()

    @property
    def numeric(self) -> bool:
        """True for ``int`` and ``float`` columns."""
        return self.type in ("int", "float")

    @property
    def has_public_bounds(self) -> bool:
        """True when both bounds are declared."""
        return self.min is not None and self.max is not None

    @property
    def derived(self) -> bool:
        """True for a public function of another column."""
        return self.derived_from is not None


@dataclass(frozen=True)
class PrivacyUnit:
    """Who is protected: one row, or all rows sharing an id (at most ``max_rows`` kept each).

    Attributes:
        id_column: None when each row is its own privacy unit.
        max_rows: Contribution bound per id (1 for row-level privacy).
    """

    id_column: str | None = None
    max_rows: int = 1

    @property
    def rows(self) -> int:
        """How many rows one unit can contribute once bounded: the sensitivity of a count (1 per row)."""
        return self.max_rows if self.id_column else 1

    def describe(self) -> str:
        """Human-readable neighbouring relation."""
        if self.id_column is None:
            return "one row (add/remove one row)"
        return f"all rows with one {self.id_column} (add/remove one id; at most {self.max_rows} rows kept per id)"


@dataclass(frozen=True)
class Hierarchy:
    """A public hierarchy over one category column, e.g. region > native-country or state > county > tract.

    The implicit root is the whole table; ``levels`` are the named levels above the column, top
    first; the column's codes (its categories, then null when nullable) are the leaves.

    Attributes:
        name: The hierarchy's name (used in query names and output files).
        column: The leaf column: a declared, measured category column.
        levels: Names of the levels above the column, top first.
        labels: The node labels of each level in ``levels``, in declaration order.
        parents: For each level below the root level, the index of every node's parent in the level
            above: ``parents[0]`` maps ``labels[1]`` (or the leaves when there is one level) into
            ``labels[0]``, and the last entry maps the leaf codes into ``labels[-1]``.
    """

    name: str
    column: str
    levels: tuple[str, ...]
    labels: tuple[tuple[str, ...], ...]
    parents: tuple[tuple[int, ...], ...]

    @property
    def level_names(self) -> tuple[str, ...]:
        """Every measured level, top first, the leaf column last."""
        return (*self.levels, self.column)


@dataclass(frozen=True)
class TableSchema:
    """The public description of one table.

    Attributes:
        table: The table's name (used for output files).
        columns: Declared columns, in output order.
        privacy_unit: The neighbouring relation.
        quasi_identifiers: Columns an attacker may know (for internal disclosure-risk checks).
        source: The file it was loaded from (for error messages).
        hierarchies: Public hierarchies over category columns.
    """

    table: str
    columns: tuple[Column, ...]
    privacy_unit: PrivacyUnit = PrivacyUnit()
    quasi_identifiers: tuple[str, ...] = ()
    source: str = "<schema>"
    hierarchies: tuple[Hierarchy, ...] = ()

    def column(self, name: str) -> Column:
        """The column called ``name``.

        Raises:
            SchemaError: If no such column is declared.
        """
        for col in self.columns:
            if col.name == name:
                return col
        raise _fail(self.source, f"column {name!r} is not declared")

    @property
    def names(self) -> tuple[str, ...]:
        """Declared column names, in order."""
        return tuple(c.name for c in self.columns)

    @property
    def measured(self) -> tuple[Column, ...]:
        """Columns that are measured (every column that is not derived)."""
        return tuple(c for c in self.columns if not c.derived)


STATISTICS = ("count", "sum", "mean", "variance", "std", "median", "quantiles")
"""The summary statistics a spec may ask for (``stats:``)."""


@dataclass(frozen=True)
class StatisticsRequest:
    """One column's summary statistics (``stats:`` in a spec).

    Attributes:
        column: A measured numeric column.
        statistics: Which of :data:`STATISTICS` (``count`` is always measured: every statistic divides by it).
        quantiles: The quantile levels, in (0, 1), increasing (``median`` adds 1/2).
        by: A category column: the statistics of each of its declared categories (disjoint groups of
            rows: parallel composition, the same budget as one group), or None for the whole column.
        method: How the median and quantiles are released: ``exponential`` (the exponential mechanism, every
            level), ``ptr`` (propose-test-release, the median only) or ``smooth`` (smooth sensitivity, the median
            only); the last two are (epsilon, delta)-DP.
        proposed_bound: PTR's proposed bound on the median's local sensitivity (value units), else None.
        delta: The delta of a ``ptr`` or ``smooth`` median, taken from the release's declared delta; else 0.
        clipping_bias: Whether a share of the moments' budget estimates the clipping bias of the mean and the sum
            (:mod:`dp.statistics.bias`: a flag, the bias and a corrected value with an interval of both noises).
    """

    column: str
    statistics: tuple[str, ...]
    quantiles: tuple[Fraction, ...] = ()
    by: str | None = None
    method: str = "exponential"
    proposed_bound: float | None = None
    delta: Fraction = Fraction(0)
    clipping_bias: bool = False


@dataclass(frozen=True)
class AggregateRequest:
    """A registered function by sample-and-aggregate (``stats:`` entry ``sample_and_aggregate:``).

    Attributes:
        function: A function of :data:`dp.statistics.aggregate.REGISTERED` (``slope``, ``ratio``).
        x: Its first argument, a measured numeric column (the slope's regressor, the ratio's denominator).
        y: Its second argument (the slope's response, the ratio's numerator).
        chunks: k, the number of disjoint chunks the rows are split into (>= 2).
        lower: The public lower end of the output range every chunk's result is clamped to.
        upper: The public upper end.
    """

    function: str
    x: str
    y: str
    chunks: int
    lower: float
    upper: float

    @property
    def arguments(self) -> str:
        """The arguments, public: ``hours-per-week ~ age`` (a slope), ``capital-gain / age`` (a ratio)."""
        return f"{self.y} {'~' if self.function == 'slope' else '/'} {self.x}"

    @property
    def name(self) -> str:
        """A public name, e.g. ``slope(hours-per-week ~ age)``."""
        return f"{self.function}({self.arguments})"


@dataclass(frozen=True)
class ReleaseSpec:
    """One release: dataset, inputs, budget, allocation and measurement plan.

    Attributes:
        dataset: The ledger key: the population (not the file) whose lifetime budget is spent.
        schema: The table's schema.
        data: Path of the Parquet file, or of a folder of Parquet files (``*.parquet``, read in name
            order) that all have the same Arrow schema.
        definition: ``pure`` (epsilon-DP, discrete Laplace) or ``zcdp`` (discrete Gaussian).
        epsilon: Declared epsilon of this release.
        delta: Declared delta (zCDP) or 0 (pure).
        budget: This release's budget in the ledger's unit.
        lifetime: The dataset's lifetime cap in the ledger's unit.
        release_cap: The most one release of the dataset may spend (ledger unit), or None.
        lifetime_epsilon: The declared lifetime epsilon.
        allocation: Exact weights of the stages (``bounds``, ``one_way``, ``selection``, ``two_way``,
            ``hierarchy``).
        two_way: Column pairs whose 2-way marginals are measured (empty when they are selected privately).
        auto_pairs: True for ``two_way: auto``: a spanning tree of pairs is chosen privately (MST-style)
            with the ``selection`` stage's budget, then measured with the ``two_way`` stage's.
        auto_cliques: True for ``cliques: auto``: a degree-2 junction tree (a spanning tree, then a
            second parent for each column) is chosen privately with the ``selection`` stage's budget;
            its cliques (numeric columns in coarse bins) are measured with the ``cliques`` stage's.
        root: The column the junction tree is visited from (public), or None for the tree's hub.
        clique_bins: How many bins a numeric column has inside cliques (chosen from its noisy 1-way).
        cross_pairs: ``cliques: auto`` with ``allocation.cross``: at most so many pairs across the junction
            tree's branches are chosen and measured with the ``cross`` stage's budget, and the synthetic table
            is drawn from a pool of the model's rows raked to them (:mod:`dp.measurement.cross`); 0 for none.
        hierarchy_split: For each hierarchy of the schema, the exact weight of each level (top first,
            the leaf column last) within the ``hierarchy`` stage.
        weighting: How a stage's budget is split over its marginals: ``cells`` (by domain size, to
            minimise the summed expected error), ``balanced`` (by domain size to half that power: big
            marginals get more, small ones keep enough) or ``equal``.
        seed: Public seed for synthetic sampling; None draws one (and records it).
        source: The spec file.
        dask_address: ``dask: {address: ...}``: the scheduler of an existing Dask cluster on which
            the counting map runs (the reduce and the noise stay in the flow), or None (in process).
        internal: ``internal:``: the steward-only root (relative to the spec file), or None for the default.
        stats: ``stats:``: the numeric columns whose summary statistics the release publishes (stage ``stats``).
        aggregates: ``stats:`` entries of registered functions by sample-and-aggregate (stage ``stats``).
    """

    dataset: str
    schema: TableSchema
    data: Path
    definition: Definition
    epsilon: Fraction
    delta: Fraction
    budget: Budget
    lifetime: Budget
    release_cap: Budget | None
    lifetime_epsilon: Fraction
    allocation: dict[str, Fraction]
    two_way: tuple[tuple[str, str], ...]
    seed: int | None
    source: str
    schema_path: Path
    hierarchy_split: dict[str, tuple[Fraction, ...]] = field(default_factory=dict)
    weighting: Literal["cells", "balanced", "equal"] = "cells"
    auto_pairs: bool = False
    auto_cliques: bool = False
    root: str | None = None
    clique_bins: int = 8
    cross_pairs: int = 0
    dask_address: str | None = None
    internal: Path | None = None
    stats: tuple[StatisticsRequest, ...] = ()
    aggregates: tuple[AggregateRequest, ...] = ()

    @property
    def mechanism_delta(self) -> Fraction:
        """The delta the release's (epsilon, delta) mechanisms spend (``docs/proofs/approximate_zcdp.md``)."""
        return sum((request.delta for request in self.stats), Fraction(0))


__all__ = [
    "MAX_CELLS",
    "AggregateRequest",
    "Binning",
    "Column",
    "Hierarchy",
    "PrivacyUnit",
    "PureBudget",
    "ReleaseSpec",
    "SchemaError",
    "TableSchema",
    "ZCDPBudget",
]
