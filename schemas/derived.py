"""Public dependencies between columns (``derived_from``): exact in the synthetic table, costing no budget.

Four kinds, each declared in the schema and checked here against its source column:

* a number from a category by a table: ``mapping: {category: value, ...}``;
* a number from a category whose values are not public: ``mapping: private`` (released by a DP median per
  category in the bounds stage, :mod:`dp.statistics.groups`);
* a category from a category by a mapping: ``mapping: {source category: category, ...}`` (a grouping such as
  industry sector from industry code);
* a category from a number by ranges: ``ranges: {category: [low, high], ...}``, half-open [low, high),
  together covering the source's public range (an age group from an age).

A derived column is not measured: the synthetic table computes it from its source, so the relation holds
exactly. A null source gives a null (so both columns must agree on ``nullable``).
"""

from __future__ import annotations

import itertools
from typing import Any

from dprelease.schemas.model import Column, SchemaError, _fail
from dprelease.schemas.reading import _number


def parse_labels(where: str, raw: Any) -> tuple[tuple[str, str], ...]:
    """``mapping`` of a derived category column: source category -> this column's category."""
    if not isinstance(raw, dict) or not raw:
        raise _fail(f"{where}.mapping", "must map each category of the source column to one of this column's "
                    "categories")
    out = []
    for key, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise _fail(f"{where}.mapping.{key}", "must be one of this column's categories")
        out.append((str(key), str(value)))
    return tuple(out)


def parse_ranges(where: str, raw: Any) -> tuple[tuple[float, float, str], ...]:
    """``ranges`` of a category derived from a number: category -> [low, high), sorted by low."""
    if not isinstance(raw, dict) or not raw:
        raise _fail(f"{where}.ranges", "must map each category to a range [low, high) of the source column")
    out = []
    for key, bounds in raw.items():
        loc = f"{where}.ranges.{key}"
        if not isinstance(bounds, list) or len(bounds) != 2:
            raise _fail(loc, "must be a list [low, high] (low included, high excluded)")
        low, high = _number(f"{loc}[0]", bounds[0]), _number(f"{loc}[1]", bounds[1])
        if not low < high:
            raise _fail(loc, f"low ({low:g}) must be below high ({high:g})")
        out.append((float(low), float(high), str(key)))
    return tuple(sorted(out))


def check_derived(where: str, column: Column, source: Column) -> None:
    """The declared dependency of ``column`` on ``source`` is well formed (names the key and the rule).

    Raises:
        SchemaError: One line naming the schema file, the key and the rule.
    """
    loc = f"{where}: columns.{column.name}"
    if source.derived:
        raise _fail(f"{loc}.derived_from", "must name a measured column (not another derived one)")
    if column.nullable != source.nullable:
        raise _fail(f"{loc}.nullable", f"must equal that of {source.name}")
    if column.type != "category":
        if source.type != "category":
            raise _fail(f"{loc}.derived_from", "a number is derived from a category column (by mapping)")
        if column.private_mapping:
            return
        if sorted(k for k, _ in column.mapping) != sorted(source.categories):
            raise _fail(f"{loc}.mapping", f"must give exactly one value for every category of {source.name}")
        if column.has_public_bounds:
            assert column.min is not None and column.max is not None
            if any(not column.min <= v <= column.max for _, v in column.mapping):
                raise _fail(f"{loc}.mapping", "has values outside min..max")
        return
    if source.type == "category":
        if not column.labels:
            raise _fail(f"{loc}.mapping", f"must map every category of {source.name} to a category of this column")
        if sorted(k for k, _ in column.labels) != sorted(source.categories):
            raise _fail(f"{loc}.mapping", f"must give exactly one category for every category of {source.name}")
        if any(v not in column.categories for _, v in column.labels):
            raise _fail(f"{loc}.mapping", "maps to a value that is not one of this column's categories")
        return
    if not column.ranges:
        raise _fail(f"{loc}.ranges", f"are required: a category derived from the number {source.name}")
    if any(label not in column.categories for _, _, label in column.ranges):
        raise _fail(f"{loc}.ranges", "name a value that is not one of this column's categories")
    span = (source.min, source.max) if source.has_public_bounds else source.search_range
    assert span is not None and span[0] is not None and span[1] is not None
    low, high = float(span[0]), float(span[1])
    edges = column.ranges
    contiguous = all(a[1] == b[0] for a, b in itertools.pairwise(edges))
    if not contiguous or edges[0][0] > low or edges[-1][1] <= high:
        raise _fail(f"{loc}.ranges", f"must be contiguous and cover {source.name}'s range [{low:g}, {high:g}] "
                    "(each [low, high) with high excluded)")


__all__ = ["SchemaError", "check_derived", "parse_labels", "parse_ranges"]
