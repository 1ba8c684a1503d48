"""Loading a table schema (``schema.yaml``): columns, their public domains, binning and hierarchies."""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Any

from dprelease.dp.measurement.marginals import NULL_MARGINAL_LABEL, Binning
from dprelease.schemas.categories import declared_categories, declared_label
from dprelease.schemas.derived import check_derived, parse_labels, parse_ranges
from dprelease.schemas.model import _NAME, Column, Hierarchy, PrivacyUnit, TableSchema, _fail
from dprelease.schemas.reading import _keys, _load_yaml, _number


def _normal(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def _column(where: str, name: str, spec: Any, folder: Path) -> Column:
    if not isinstance(name, str) or not _NAME.match(name):
        raise _fail(where, "column names must be 1-128 characters of letters, digits, '_', '.' or '-'")
    if not isinstance(spec, dict):
        raise _fail(where, "must be a mapping with at least a 'type'")
    _keys(where, spec, {"type", "nullable", "categories", "min", "max", "search_range", "bins",
                        "derived_from", "mapping", "ranges", "resolution", "spikes", "values", "on_unknown",
                        "description"},
          {"type"})
    ctype = spec["type"]
    if ctype not in ("int", "float", "category"):
        raise _fail(f"{where}.type", f"({ctype!r}) must be one of int, float, category")
    nullable = spec.get("nullable", False)
    if not isinstance(nullable, bool):
        raise _fail(f"{where}.nullable", "must be true or false")

    categories: tuple[str, ...] = ()
    on_unknown = spec.get("on_unknown", "drop")
    if ctype == "category":
        categories = declared_categories(f"{where}.categories", spec.get("categories"), folder)
        if nullable and NULL_MARGINAL_LABEL in categories:
            raise _fail(f"{where}.categories", f"declares {NULL_MARGINAL_LABEL!r}, the label of null in a published "
                        "marginal: in a nullable column the two would read alike; rename the category")
        on_unknown = declared_label(on_unknown)
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
        bins = _values(where, spec, ctype, low, high) if "values" in spec else \
            _binning(f"{where}.bins", spec.get("bins"), ctype)
        if low is None and search is None and "derived_from" not in spec:
            raise _fail(where, "a numeric column without public min/max needs a search_range for SVT")

    derived_from = spec.get("derived_from")
    mapping: tuple[tuple[str, float], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    ranges: tuple[tuple[float, float, str], ...] = ()
    if derived_from is not None:
        if not isinstance(derived_from, str):
            raise _fail(f"{where}.derived_from", "must be a column name")
        raw_map = spec.get("mapping")
        if ctype == "category":
            if "ranges" in spec:
                ranges = parse_ranges(where, spec["ranges"])
            else:
                labels = parse_labels(where, raw_map)
        elif raw_map != "private":
            if not isinstance(raw_map, dict) or not raw_map:
                raise _fail(f"{where}.mapping", "must map each category of the source column to a value, or be "
                            "'private' (each category's value found by a DP median)")
            mapping = tuple((_normal(str(k)), _number(f"{where}.mapping.{k}", v)) for k, v in raw_map.items())
    elif "mapping" in spec or "ranges" in spec:
        raise _fail(f"{where}.{'mapping' if 'mapping' in spec else 'ranges'}", "needs derived_from")
    resolution = _resolution(where, spec, ctype, low, high)

    return Column(
        name=name, type=ctype, nullable=nullable, categories=categories, min=low, max=high,
        search_range=search, bins=bins, derived_from=derived_from, mapping=mapping, on_unknown=on_unknown,
        private_mapping=spec.get("mapping") == "private", resolution=resolution, labels=labels, ranges=ranges,
        spikes=_spikes(where, spec, ctype, (low, high) if low is not None and high is not None else search),
    )


def _values(where: str, spec: dict[str, Any], ctype: str, low: float | None, high: float | None) -> Binning:
    """A finite public value set: one bin per value, decoded exactly (``bins`` and ``spikes`` do not apply)."""
    for key in ("bins", "spikes"):
        if key in spec:
            raise _fail(f"{where}.{key}", "does not apply with values: (one bin per declared value)")
    if low is None or high is None:
        raise _fail(where, "values: needs public min and max")
    points = _number_list(f"{where}.values", spec["values"], ctype, (low, high), 10_000, "the public min..max")
    return Binning("values", len(points), points)


def _spikes(where: str, spec: dict[str, Any], ctype: str, span: tuple[float, float] | None) -> tuple[float, ...]:
    """Public values that get a bin of their own (zero income, a sentinel, a top code)."""
    if "spikes" not in spec:
        return ()
    if ctype == "category":
        raise _fail(f"{where}.spikes", "applies to numeric columns only")
    return _number_list(f"{where}.spikes", spec["spikes"], ctype, span, 64, "min..max (or the search_range)")


def _number_list(where: str, raw: Any, ctype: str, span: tuple[float, float] | None, most: int,
                 inside: str) -> tuple[float, ...]:
    """A list of distinct public numbers of a column (whole for an int column, inside ``span``), sorted."""
    if not isinstance(raw, list) or not 1 <= len(raw) <= most:
        raise _fail(where, f"must be a list of 1 to {most} numbers")
    out: list[float] = []
    for i, item in enumerate(raw):
        value = _number(f"{where}[{i}]", item)
        if ctype == "int" and value != int(value):
            raise _fail(f"{where}[{i}]", f"({value}) must be a whole number for an int column")
        if span is not None and not span[0] <= value <= span[1]:
            raise _fail(f"{where}[{i}]", f"({value}) must lie within {inside}")
        if float(value) in out:
            raise _fail(f"{where}[{i}]", f"({value}) repeats an earlier value")
        out.append(float(value))
    return tuple(sorted(out))


def _resolution(where: str, spec: dict[str, Any], ctype: str, low: float | None, high: float | None) -> float | None:
    """The grid step of a ``mapping: private`` column's released values (required there, refused elsewhere)."""
    if spec.get("mapping") != "private":
        if "resolution" in spec:
            raise _fail(f"{where}.resolution", "applies to a derived column with mapping: private only")
        return None
    if low is None or high is None:
        raise _fail(where, "mapping: private needs public min and max (the values are searched between them)")
    if "resolution" not in spec:
        raise _fail(f"{where}.resolution", "is required with mapping: private (the step of the released values, "
                    "e.g. 0.1 for values published to one decimal)")
    step = _number(f"{where}.resolution", spec["resolution"])
    if not step > 0 or (ctype == "int" and step != int(step)):
        rule = "a positive whole number" if ctype == "int" else "a positive number"
        raise _fail(f"{where}.resolution", f"({step}) must be {rule}")
    if (high - low) / step > 2**21:
        raise _fail(f"{where}.resolution", f"({step}) would put more than 2**21 values between min and max")
    return step


def _binning(where: str, raw: Any, ctype: str) -> Binning:
    if raw is None:
        return Binning("width", 1) if ctype == "int" else Binning("count", 32)
    if raw == "log":
        return Binning("log")
    if raw == "quantiles":
        return Binning("quantiles", 16)
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
        if kind == "quantiles":
            if isinstance(value, bool) or value not in (2, 4, 8, 16, 32, 64, 128, 256):
                raise _fail(f"{where}.quantiles", f"({value!r}) must be a power of two from 2 to 256")
            return Binning("quantiles", value)
    raise _fail(where, "must be 'log', 'quantiles', {width: W}, {count: N} or {quantiles: N}")


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
    columns = tuple(_column(f"{where}: columns.{name}", name, spec, file.parent) for name, spec in raw_columns.items())
    names = [c.name for c in columns]
    for col in columns:
        if col.derived_from is None:
            continue
        loc = f"{where}: columns.{col.name}.derived_from"
        if col.derived_from not in names:
            raise _fail(loc, f"({col.derived_from!r}) is not a declared column")
        check_derived(where, col, columns[names.index(col.derived_from)])

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
