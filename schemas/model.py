"""Table schemas and release specs: the public description of a table and of a release.

A *schema* (``schema.yaml``) declares each column's public domain: its type, its categories or
public bounds, whether it may be null, how numeric values are binned, and columns that are public
functions of others. A *spec* (``release.yaml``) declares one release: which dataset (the
population in the ledger), which schema and data file, the budget and its allocation over stages,
and which 2-way marginals to measure. Nothing here is ever read off the data.

Errors cite the file and the key path: ``schema.yaml: columns.age: min (90) must be below max (17)``.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import yaml

from dprelease.dp.budget import (
    Budget,
    Definition,
    PureBudget,
    ZCDPBudget,
    budget_total,
    to_fraction,
    validate_delta,
)
from dprelease.dp.errors import DPReleaseError, ParameterError
from dprelease.dp.marginals import Binning
from dprelease.schemas.identifiers import short

ColumnType = Literal["int", "float", "category"]
STAGES = ("bounds", "one_way", "selection", "two_way", "cliques", "hierarchy")
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
        categories: The declared categories of a ``category`` column.
        min: Public lower bound of a numeric column, or None when it is discovered with SVT.
        max: Public upper bound, or None.
        search_range: Where SVT may look for bounds when none are public.
        bins: Binning of numeric values.
        derived_from: Another column this one is a public function of (costs no budget).
        mapping: For a derived column: the value for each category of ``derived_from``.
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
    dask_address: str | None = None
    internal: Path | None = None


# ---------------------------------------------------------------------------------------------
# Loading


MAX_YAML_BYTES = 1 << 20
"""The largest spec or schema file read (1 MiB)."""
MAX_YAML_DEPTH = 32
"""The deepest nesting of mappings and sequences accepted."""
MAX_YAML_ALIASES = 64
"""The most aliases (``*name``) one file may use: an alias bomb ("billion laughs") is refused while parsing."""
MAX_EPSILON = 100.0
"""The largest epsilon a spec may declare (a release, lifetime or cap budget); above 10 a warning is logged."""
MAX_DELTA = 0.01
"""Every delta must lie below this; from 1e-5 on (about 1/rows of a small table) a warning is logged."""
MAX_NUMBER = 2.0**53
"""Declared bounds, search ranges and bin edges must lie within ±2⁵³ (where doubles still hold every integer)."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe YAML loader with budgets: unique keys, few aliases, bounded nesting.

    At most :data:`MAX_YAML_ALIASES` aliases and :data:`MAX_YAML_DEPTH` levels of nesting (PyYAML alone
    keeps the last of a repeated key and expands aliases freely).
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.aliases = 0
        self.depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.events.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_YAML_ALIASES:
                raise yaml.composer.ComposerError(
                    None, None, f"more than {MAX_YAML_ALIASES} aliases (an alias bomb?)", None)
        self.depth += 1
        try:
            if self.depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested more than {MAX_YAML_DEPTH} levels deep", None)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _construct_unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            duplicate = key in seen
        except TypeError:  # an unhashable key: the base constructor reports it
            break
        if duplicate:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is repeated in one mapping", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


def _resolve(path: Path) -> Path:
    try:
        return path.resolve()
    except (RuntimeError, OSError):  # a symlink loop (RuntimeError in Python 3.11)
        raise SchemaError(f"{path}: cannot be resolved (a symbolic link loop?)") from None


def _load_yaml(path: Path) -> dict[str, Any]:
    try:
        if path.exists() and not path.is_file():
            raise SchemaError(f"{path}: must be a regular file (not a folder, pipe or device)")
        if path.exists() and path.stat().st_size > MAX_YAML_BYTES:
            raise SchemaError(f"{path}: larger than {MAX_YAML_BYTES // 1024} KiB; a spec or schema is a short file")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SchemaError(f"{path}: file not found") from None
    except UnicodeDecodeError as err:
        raise SchemaError(f"{path}: is not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise SchemaError(f"{path}: cannot be read ({err.strerror or type(err).__name__})") from None
    try:
        doc = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None)
        known = ("repeated", "aliases", "nested")
        rule = f": {str(problem)[:120]}" if problem and any(k in str(problem) for k in known) else ""
        raise SchemaError(f"{path}: not valid YAML{where}{rule}") from None
    if not isinstance(doc, dict):
        raise SchemaError(f"{path}: must be a YAML mapping")
    return doc


def _keys(where: str, mapping: dict[str, Any], allowed: set[str], required: set[str] = frozenset()) -> None:  # type: ignore[assignment]
    unknown = sorted(set(mapping) - allowed)
    if unknown:
        raise _fail(where, f"unknown key {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}")
    missing = sorted(required - set(mapping))
    if missing:
        raise _fail(where, f"missing required key {missing[0]!r}")


def _number(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(where, f"({short(value)}) must be a number")
    if math.isfinite(value) and abs(value) > MAX_NUMBER:
        raise _fail(where, f"({short(value)}) must lie within ±2^53 (9007199254740992)")
    if not math.isfinite(value):
        raise _fail(where, f"({value}) must be a finite number")
    return value


def _normal(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def _column(where: str, name: str, spec: Any) -> Column:
    if not isinstance(name, str) or not _NAME.match(name):
        raise _fail(where, "column names must be 1-128 characters of letters, digits, '_', '.' or '-'")
    if not isinstance(spec, dict):
        raise _fail(where, "must be a mapping with at least a 'type'")
    _keys(where, spec, {"type", "nullable", "categories", "min", "max", "search_range", "bins",
                        "derived_from", "mapping", "on_unknown", "description"}, {"type"})
    ctype = spec["type"]
    if ctype not in ("int", "float", "category"):
        raise _fail(f"{where}.type", f"({ctype!r}) must be one of int, float, category")
    nullable = spec.get("nullable", False)
    if not isinstance(nullable, bool):
        raise _fail(f"{where}.nullable", "must be true or false")

    categories: tuple[str, ...] = ()
    on_unknown = spec.get("on_unknown", "drop")
    if ctype == "category":
        raw = spec.get("categories")
        if not isinstance(raw, list) or not raw:
            raise _fail(f"{where}.categories", "must be a non-empty list for a category column")
        seen: set[str] = set()
        for i, value in enumerate(raw):
            if not isinstance(value, str) or not value:
                raise _fail(f"{where}.categories[{i}]", "must be a non-empty string")
            key = _normal(value)
            if key in seen:
                raise _fail(f"{where}.categories[{i}]", "duplicates an earlier category (after Unicode normalisation)")
            seen.add(key)
        categories = tuple(_normal(v) for v in raw)
        if on_unknown != "drop" and on_unknown not in categories:
            raise _fail(f"{where}.on_unknown", "must be 'drop' or one of the declared categories")
        for key in ("min", "max", "search_range", "bins"):
            if key in spec:
                raise _fail(f"{where}.{key}", "applies to numeric columns only")
    elif "categories" in spec:
        raise _fail(f"{where}.categories", "applies to category columns only")
    elif on_unknown != "drop":
        raise _fail(f"{where}.on_unknown", "applies to category columns only")

    low = _number(f"{where}.min", spec["min"]) if spec.get("min") is not None else None
    high = _number(f"{where}.max", spec["max"]) if spec.get("max") is not None else None
    if (low is None) != (high is None):
        raise _fail(where, "declare both min and max, or neither (then SVT discovers them)")
    if low is not None and high is not None and not low < high:
        raise _fail(where, f"min ({low}) must be below max ({high})")
    if ctype == "int":
        for key, bound in (("min", low), ("max", high)):
            if bound is not None and float(bound) != int(bound):
                raise _fail(f"{where}.{key}", f"({bound}) must be a whole number for an int column")

    search: tuple[float, float] | None = None
    if "search_range" in spec:
        raw_range = spec["search_range"]
        if not isinstance(raw_range, list) or len(raw_range) != 2:
            raise _fail(f"{where}.search_range", "must be a list [low, high]")
        search = (_number(f"{where}.search_range[0]", raw_range[0]), _number(f"{where}.search_range[1]", raw_range[1]))
        if not search[0] < search[1]:
            raise _fail(f"{where}.search_range", f"low ({search[0]}) must be below high ({search[1]})")
        if low is not None:
            raise _fail(f"{where}.search_range", "is only used when min and max are not declared")

    bins: Binning | None = None
    if ctype != "category":
        bins = _binning(f"{where}.bins", spec.get("bins"), ctype)
        if low is None and search is None and "derived_from" not in spec:
            raise _fail(where, "a numeric column without public min/max needs a search_range for SVT")

    derived_from = spec.get("derived_from")
    mapping: tuple[tuple[str, float], ...] = ()
    if derived_from is not None:
        if not isinstance(derived_from, str):
            raise _fail(f"{where}.derived_from", "must be a column name")
        raw_map = spec.get("mapping")
        if not isinstance(raw_map, dict) or not raw_map:
            raise _fail(f"{where}.mapping", "must map each category of the source column to a value")
        if ctype == "category":
            raise _fail(f"{where}.derived_from", "is supported for numeric columns only")
        mapping = tuple((_normal(str(k)), _number(f"{where}.mapping.{k}", v)) for k, v in raw_map.items())
    elif "mapping" in spec:
        raise _fail(f"{where}.mapping", "needs derived_from")

    return Column(
        name=name, type=ctype, nullable=nullable, categories=categories, min=low, max=high,
        search_range=search, bins=bins, derived_from=derived_from, mapping=mapping, on_unknown=on_unknown,
    )


def _binning(where: str, raw: Any, ctype: str) -> Binning:
    if raw is None:
        return Binning("width", 1) if ctype == "int" else Binning("count", 32)
    if raw == "log":
        return Binning("log")
    if isinstance(raw, dict) and len(raw) == 1:
        ((kind, value),) = raw.items()
        if kind == "width":
            width = _number(f"{where}.width", value)
            if width <= 0 or (ctype == "int" and width != int(width)):
                rule = "a positive whole number" if ctype == "int" else "a positive number"
                raise _fail(f"{where}.width", f"({width}) must be {rule}")
            return Binning("width", width)
        if kind == "count":
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10_000:
                raise _fail(f"{where}.count", f"({value!r}) must be a whole number from 1 to 10000")
            return Binning("count", value)
    raise _fail(where, "must be 'log', {width: W} or {count: N}")


def load_schema(path: Path | str) -> TableSchema:
    """Load and validate a table schema.

    Raises:
        SchemaError: Naming the file, the key path and the rule.
    """
    file = Path(path)
    doc = _load_yaml(file)
    where = str(file)
    _keys(where, doc, {"table", "columns", "privacy_unit", "quasi_identifiers", "hierarchies", "description",
                       "source"}, {"table", "columns"})
    table = doc["table"]
    if not isinstance(table, str) or not _NAME.match(table):
        raise _fail(f"{where}: table", "must be a name of letters, digits, '_', '.' or '-'")
    raw_columns = doc["columns"]
    if not isinstance(raw_columns, dict) or not raw_columns:
        raise _fail(f"{where}: columns", "must be a non-empty mapping of column name to its domain")
    columns = tuple(_column(f"{where}: columns.{name}", name, spec) for name, spec in raw_columns.items())
    names = [c.name for c in columns]
    for col in columns:
        if col.derived_from is None:
            continue
        loc = f"{where}: columns.{col.name}.derived_from"
        if col.derived_from not in names:
            raise _fail(loc, f"({col.derived_from!r}) is not a declared column")
        source = columns[names.index(col.derived_from)]
        if source.type != "category" or source.derived:
            raise _fail(loc, "must name a measured category column")
        keys = [k for k, _ in col.mapping]
        if sorted(keys) != sorted(source.categories):
            raise _fail(f"{where}: columns.{col.name}.mapping", "must give exactly one value for every category of "
                        f"{source.name}")
        if col.nullable != source.nullable:
            raise _fail(f"{where}: columns.{col.name}.nullable", f"must equal that of {source.name}")
        if col.has_public_bounds:
            assert col.min is not None and col.max is not None
            if any(not col.min <= v <= col.max for _, v in col.mapping):
                raise _fail(f"{where}: columns.{col.name}.mapping", "has values outside min..max")

    unit = PrivacyUnit()
    raw_unit = doc.get("privacy_unit", "row")
    if raw_unit != "row":
        if not isinstance(raw_unit, dict):
            raise _fail(f"{where}: privacy_unit", "must be 'row' or {id_column: NAME, max_rows: K}")
        _keys(f"{where}: privacy_unit", raw_unit, {"id_column", "max_rows"}, {"id_column", "max_rows"})
        k = raw_unit["max_rows"]
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise _fail(f"{where}: privacy_unit.max_rows", f"({k!r}) must be a positive whole number")
        id_column = raw_unit["id_column"]
        if not isinstance(id_column, str) or not _NAME.match(id_column):
            raise _fail(f"{where}: privacy_unit.id_column", "must be a column name")
        if id_column in names:
            raise _fail(f"{where}: privacy_unit.id_column", f"({id_column!r}) must not be a declared column: ids "
                        "are used to bound contributions and are never released")
        unit = PrivacyUnit(id_column, k)

    qis = doc.get("quasi_identifiers", [])
    if not isinstance(qis, list) or any(q not in names for q in qis):
        raise _fail(f"{where}: quasi_identifiers", "must be a list of declared columns")
    hierarchies = _hierarchies(f"{where}: hierarchies", doc.get("hierarchies"), columns)
    return TableSchema(table, columns, unit, tuple(qis), where, hierarchies)


def _hierarchies(where: str, raw: Any, columns: tuple[Column, ...]) -> tuple[Hierarchy, ...]:
    """Parse ``hierarchies:``: ``NAME: {column: C, levels: [TOP, ...], parents: {LEVEL: MAP}}``.

    ``parents[LEVEL]`` maps each node of LEVEL to the list of its children in the level below (the
    next level, or the column's categories for the last level; ``~`` stands for null), or is
    ``{prefix: N}``: the parent of a child is the child's first N characters (PUMA-style codes).
    """
    if raw is None:
        return ()
    if not isinstance(raw, dict) or not raw:
        raise _fail(where, "must map hierarchy names to {column, levels, parents}")
    by_name = {c.name: c for c in columns}
    out: list[Hierarchy] = []
    used: set[str] = set()
    for name, spec in raw.items():
        loc = f"{where}.{name}"
        if not isinstance(name, str) or not _NAME.match(name):
            raise _fail(loc, "hierarchy names must be letters, digits, '_', '.' or '-'")
        if not isinstance(spec, dict):
            raise _fail(loc, "must be a mapping {column, levels, parents}")
        _keys(loc, spec, {"column", "levels", "parents", "description"}, {"column", "levels", "parents"})
        column = by_name.get(spec["column"]) if isinstance(spec["column"], str) else None
        if column is None:
            raise _fail(f"{loc}.column", f"({spec['column']!r}) is not a declared column")
        if column.type != "category" or column.derived:
            raise _fail(f"{loc}.column", "must be a measured category column")
        if column.name in used:
            raise _fail(f"{loc}.column", "is already the leaf of another hierarchy")
        used.add(column.name)
        levels = spec["levels"]
        if not isinstance(levels, list) or not levels or not all(isinstance(x, str) and _NAME.match(x)
                                                                  for x in levels):
            raise _fail(f"{loc}.levels", "must be a non-empty list of level names, top first")
        if len(set(levels)) != len(levels) or column.name in levels:
            raise _fail(f"{loc}.levels", "must name each level once, and not the column itself (a cycle)")
        clash = [x for x in levels if x in by_name]
        if clash:
            raise _fail(f"{loc}.levels", f"({clash[0]!r}) is a declared column; name levels apart from columns")
        parents_raw = spec["parents"]
        if not isinstance(parents_raw, dict):
            raise _fail(f"{loc}.parents", "must map every level to its children")
        _keys(f"{loc}.parents", parents_raw, set(levels), set(levels))
        leaves: list[str | None] = [*column.categories, *([None] if column.nullable else [])]
        # Walk bottom-up: each level's children are the labels of the level below.
        below: list[str | None] = leaves
        labels_rev: list[tuple[str, ...]] = []
        parents_rev: list[tuple[int, ...]] = []
        for level in reversed(levels):
            level_labels, parent_of = _level(f"{loc}.parents.{level}", parents_raw[level], below,
                                             is_leaf=level == levels[-1])
            labels_rev.append(level_labels)
            parents_rev.append(parent_of)
            below = list(level_labels)
        labels = tuple(reversed(labels_rev))
        parents = tuple(reversed(parents_rev))
        out.append(Hierarchy(name, column.name, tuple(levels), labels, parents))
    return tuple(out)


def _level(
    where: str, raw: Any, children: list[str | None], *, is_leaf: bool
) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """One level's labels and, for each child (in ``children`` order), its parent's index."""
    def show(child: str | None) -> str:
        return "null" if child is None else repr(child)

    if isinstance(raw, dict) and set(raw) == {"prefix"}:
        width = raw["prefix"]
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise _fail(f"{where}.prefix", f"({width!r}) must be a positive whole number")
        if any(c is None or len(c) <= width for c in children):
            raise _fail(f"{where}.prefix", f"({width}) must be shorter than every child label (and no child null)")
        level_labels = tuple(dict.fromkeys(str(c)[:width] for c in children))
        index = {label: i for i, label in enumerate(level_labels)}
        return level_labels, tuple(index[str(c)[:width]] for c in children)
    if not isinstance(raw, dict) or not raw:
        raise _fail(where, "must map each node to the list of its children, or be {prefix: N}")
    known = set(children)
    parent_of: dict[str | None, int] = {}
    level_labels_list: list[str] = []
    for i, (label, kids) in enumerate(raw.items()):
        if not isinstance(label, str) or not label:
            raise _fail(where, "node labels must be non-empty strings")
        node = _normal(label)
        if node in level_labels_list:
            raise _fail(f"{where}.{label}", "repeats a node (after Unicode normalisation)")
        level_labels_list.append(node)
        if not isinstance(kids, list) or not kids:
            raise _fail(f"{where}.{label}", "must list at least one child")
        for kid in kids:
            child = None if kid is None else _normal(str(kid))
            if child not in known:
                domain = "categories of the column" if is_leaf else "nodes of the level below"
                raise _fail(f"{where}.{label}", f"child {show(child)} is not among the declared {domain}")
            if child in parent_of:
                raise _fail(f"{where}.{label}", f"child {show(child)} has two parents")
            parent_of[child] = i
    orphans = [c for c in children if c not in parent_of]
    if orphans:
        raise _fail(where, f"child {show(orphans[0])} has no parent")
    return tuple(level_labels_list), tuple(parent_of[c] for c in children)


def load_spec(path: Path | str) -> ReleaseSpec:
    """Load and validate a release spec (and the schema it names).

    Paths inside the spec are relative to the spec file.

    Raises:
        SchemaError: Naming the file, the key path and the rule.
    """
    file = Path(path)
    doc = _load_yaml(file)
    where = str(file)
    _keys(where, doc, {"dataset", "schema", "data", "budget", "lifetime_budget", "release_cap", "allocation",
                       "two_way", "cliques", "root", "clique_bins", "hierarchy_split", "weighting", "seed",
                       "description", "dask", "internal"},
          {"dataset", "schema", "data", "budget", "lifetime_budget", "allocation"})
    dataset = doc["dataset"]
    if not isinstance(dataset, str) or not _NAME.match(dataset):
        raise _fail(f"{where}: dataset", "must be a name of letters, digits, '_', '.' or '-'")
    for key in ("schema", "data"):
        if not isinstance(doc[key], str) or not doc[key]:
            raise _fail(f"{where}: {key}", "must be a path")
    schema_path = _resolve(file.parent / doc["schema"])
    schema = load_schema(schema_path)
    data = _resolve(file.parent / doc["data"])

    definition, epsilon, delta, budget = _budget(f"{where}: budget", doc["budget"])
    life_def, life_epsilon, life_delta, lifetime = _budget(f"{where}: lifetime_budget", doc["lifetime_budget"])
    if life_def != definition or life_delta != delta:
        raise _fail(f"{where}: lifetime_budget", "must use the same definition and delta as budget")
    if budget.amount > lifetime.amount:
        raise _fail(f"{where}: budget", "must not exceed lifetime_budget")
    release_cap: Budget | None = None
    if doc.get("release_cap") is not None:
        cap_def, _, cap_delta, release_cap = _budget(f"{where}: release_cap", doc["release_cap"])
        if cap_def != definition or cap_delta != delta:
            raise _fail(f"{where}: release_cap", "must use the same definition and delta as budget")
        if release_cap.amount > lifetime.amount:
            raise _fail(f"{where}: release_cap", "must not exceed lifetime_budget")

    raw_alloc = doc["allocation"]
    if not isinstance(raw_alloc, dict):
        raise _fail(f"{where}: allocation", f"must map stages ({', '.join(STAGES)}) to shares")
    _keys(f"{where}: allocation", raw_alloc, set(STAGES))
    allocation: dict[str, Fraction] = {}
    for stage in STAGES:
        try:
            share = to_fraction(raw_alloc.get(stage, 0), f"allocation.{stage}")
        except ParameterError as err:
            raise _fail(where, str(err)) from None
        if share < 0:
            raise _fail(f"{where}: allocation.{stage}", f"({float(share):g}) must be non-negative")
        allocation[stage] = share
    total_share = sum(allocation.values(), Fraction(0))
    if total_share > 1:
        raise _fail(f"{where}: allocation", f"shares sum to {float(total_share):.6g}; they must sum to at most 1")
    if allocation["one_way"] <= 0:
        raise _fail(f"{where}: allocation.one_way", "must be positive (the row count comes from the 1-way marginals)")
    needs_bounds = [c.name for c in schema.measured if c.numeric and not c.has_public_bounds]
    if needs_bounds and allocation["bounds"] <= 0:
        raise _fail(f"{where}: allocation.bounds", f"must be positive: {needs_bounds[0]} has no public bounds")

    pairs: list[tuple[str, str]] = []
    raw_pairs = doc.get("two_way")
    auto = raw_pairs == "auto"
    cliques = doc.get("cliques")
    if cliques not in (None, "auto"):
        raise _fail(f"{where}: cliques", "must be 'auto' (a degree-2 junction tree chosen privately) or absent")
    auto_cliques = cliques == "auto"
    root = doc.get("root")
    clique_bins = doc.get("clique_bins", 8)
    if auto_cliques:
        if raw_pairs is not None:
            raise _fail(f"{where}: two_way", "must be absent with cliques: auto (cliques replace 2-way marginals)")
        if allocation["selection"] <= 0 or allocation["cliques"] <= 0:
            raise _fail(f"{where}: allocation", "cliques: auto needs positive selection and cliques shares")
        if root is not None and (root not in schema.names or schema.column(root).derived):
            raise _fail(f"{where}: root", f"({root!r}) must be a measured column")
        if isinstance(clique_bins, bool) or not isinstance(clique_bins, int) or not 2 <= clique_bins <= 64:
            raise _fail(f"{where}: clique_bins", f"({clique_bins!r}) must be a whole number from 2 to 64")
    else:
        for key in ("root", "clique_bins"):
            if key in doc:
                raise _fail(f"{where}: {key}", "applies to cliques: auto only")
        if allocation["cliques"] > 0:
            raise _fail(f"{where}: allocation.cliques", "must be 0 or absent unless cliques is auto")
    if auto:
        raw_pairs = []
        if allocation["selection"] <= 0 or allocation["two_way"] <= 0:
            raise _fail(f"{where}: allocation", "two_way: auto needs positive selection and two_way shares")
    elif allocation["selection"] > 0 and not auto_cliques:
        raise _fail(f"{where}: allocation.selection", "must be 0 or absent unless two_way or cliques is auto")
    elif raw_pairs is not None and not isinstance(raw_pairs, list):
        raise _fail(f"{where}: two_way", "must be 'auto' or a list of column pairs")
    for i, pair in enumerate(raw_pairs or []):
        loc = f"{where}: two_way[{i}]"
        if not isinstance(pair, list) or len(pair) != 2 or pair[0] == pair[1]:
            raise _fail(loc, "must be a list of two different column names")
        for name in map(str, pair):
            if name not in schema.names:
                raise _fail(loc, f"({name!r}) is not a declared column")
            if schema.column(name).derived:
                raise _fail(loc, f"({name!r}) is derived from another column; pair its source instead")
        columns = (str(pair[0]), str(pair[1]))
        if columns in pairs or (columns[1], columns[0]) in pairs:
            raise _fail(loc, "repeats an earlier pair")
        pairs.append(columns)
    if pairs and allocation["two_way"] <= 0:
        raise _fail(f"{where}: allocation.two_way", "must be positive when two_way pairs are listed")

    split = _hierarchy_split(f"{where}: hierarchy_split", doc.get("hierarchy_split"), schema)
    if schema.hierarchies and allocation["hierarchy"] <= 0:
        raise _fail(f"{where}: allocation.hierarchy",
                    f"must be positive: the schema declares hierarchy {schema.hierarchies[0].name}")
    if not schema.hierarchies and allocation["hierarchy"] > 0:
        raise _fail(f"{where}: allocation.hierarchy", "must be 0 or absent: the schema declares no hierarchy")

    weighting = doc.get("weighting", "cells")
    if weighting not in ("cells", "balanced", "equal"):
        raise _fail(f"{where}: weighting", f"({weighting!r}) must be 'cells', 'balanced' or 'equal'")

    seed = doc.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise _fail(f"{where}: seed", "must be a non-negative whole number")
    dask_address = _dask_address(f"{where}: dask", doc.get("dask"))
    internal = doc.get("internal")
    if internal is not None and (not isinstance(internal, str) or not internal):
        raise _fail(f"{where}: internal", "must be a folder path (the steward-only root, outside the output folder)")
    return ReleaseSpec(
        dataset=dataset, schema=schema, data=data, definition=definition, epsilon=epsilon, delta=delta,
        budget=budget, lifetime=lifetime, release_cap=release_cap, lifetime_epsilon=life_epsilon, allocation=allocation,
        two_way=tuple(pairs), seed=seed, source=where, schema_path=schema_path, hierarchy_split=split,
        weighting=weighting, auto_pairs=auto, auto_cliques=auto_cliques, root=root, clique_bins=clique_bins,
        dask_address=dask_address, internal=None if internal is None else (file.parent / internal).resolve(),
    )


_DASK_ADDRESS = re.compile(r"^[a-z][a-z0-9+.-]*://[^\s/]+$")


def _dask_address(where: str, raw: Any) -> str | None:
    """The scheduler address of ``dask: {address: tcp://host:port}``, or None when absent."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _fail(where, "must be a mapping with an address (dask: {address: tcp://host:port})")
    _keys(where, raw, {"address"}, {"address"})
    address = raw["address"]
    if not isinstance(address, str) or not _DASK_ADDRESS.match(address):
        raise _fail(f"{where}.address", f"({address!r}) must be a scheduler address such as tcp://host:8786")
    return address


def _hierarchy_split(where: str, raw: Any, schema: TableSchema) -> dict[str, tuple[Fraction, ...]]:
    """Level weights of each hierarchy (default: equal); each weight positive, exact."""
    out = {h.name: tuple(Fraction(1) for _ in h.level_names) for h in schema.hierarchies}
    if raw is None:
        return out
    if not isinstance(raw, dict):
        raise _fail(where, "must map hierarchy names to {level: weight}")
    _keys(where, raw, set(out))
    for h in schema.hierarchies:
        if h.name not in raw:
            continue
        weights = raw[h.name]
        if not isinstance(weights, dict):
            raise _fail(f"{where}.{h.name}", "must map every level (and the column) to a weight")
        _keys(f"{where}.{h.name}", weights, set(h.level_names), set(h.level_names))
        exact = []
        for level in h.level_names:
            try:
                weight = to_fraction(weights[level], f"{level}")
            except ParameterError as err:
                raise _fail(f"{where}.{h.name}", str(err)) from None
            if weight <= 0:
                raise _fail(f"{where}.{h.name}.{level}", f"({float(weight):g}) must be positive")
            exact.append(weight)
        out[h.name] = tuple(exact)
    return out


def _budget(where: str, raw: Any) -> tuple[Definition, Fraction, Fraction, Budget]:
    if not isinstance(raw, dict):
        raise _fail(where, "must be {epsilon: E} (pure DP) or {epsilon: E, delta: D} (zCDP)")
    _keys(where, raw, {"epsilon", "delta"}, {"epsilon"})
    try:
        for key in ("epsilon", "delta"):
            if key in raw and isinstance(raw[key], str):  # a quoted number is a typo, not a budget
                raise ParameterError(f"{key} ({short(raw[key])}) must be a number (not quoted)")
        epsilon = to_fraction(raw["epsilon"], "epsilon")
        if epsilon <= 0:
            raise ParameterError(f"epsilon ({float(epsilon):g}) must be positive")
        if epsilon > MAX_EPSILON:
            raise ParameterError(f"epsilon ({float(epsilon):g}) must be at most {MAX_EPSILON:g}: "
                                 "beyond that a release protects nothing")
        if "delta" in raw:
            delta = validate_delta(raw["delta"])
            if delta >= MAX_DELTA:
                raise ParameterError(f"delta ({float(delta):g}) must be below {MAX_DELTA:g} (and far below 1/rows)")
            definition: Definition = "zcdp"
        else:
            delta, definition = Fraction(0), "pure"
        budget = budget_total(definition, epsilon, delta if definition == "zcdp" else None)
    except ParameterError as err:
        raise _fail(where, str(err)) from None
    return definition, epsilon, delta, budget


__all__ = [
    "MAX_CELLS",
    "Binning",
    "Column",
    "Hierarchy",
    "PrivacyUnit",
    "PureBudget",
    "ReleaseSpec",
    "SchemaError",
    "TableSchema",
    "ZCDPBudget",
    "load_schema",
    "load_spec",
]
