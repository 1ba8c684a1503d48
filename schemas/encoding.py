"""From a schema (and DP-discovered bounds) to the public encodings used by ``dp``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from dprelease.dp.errors import InternalError
from dprelease.dp.measurement.marginals import (
    ColumnDomain,
    ColumnRule,
    category_domain,
    edges_domain,
    numeric_domain,
)
from dprelease.dp.measurement.spikes import with_spikes
from dprelease.dp.synthesis.hierarchy import HierarchyTree as Tree
from dprelease.dp.synthesis.sampling import OutputColumn
from dprelease.schemas.model import Column, Hierarchy, TableSchema


def column_domain(column: Column, bounds: Mapping[str, tuple[float, float]],
                  edges: Mapping[str, tuple[float, ...]] | None = None) -> ColumnDomain:
    """The encoding of a measured column: declared categories, or bins inside its bounds.

    Args:
        column: The declared column.
        bounds: DP-discovered bounds of numeric columns without public ones.
        edges: DP bin edges of ``bins: quantiles`` columns (the bounds stage's).
    """
    if column.type == "category":
        return category_domain(column.name, column.categories, nullable=column.nullable)
    kind: Literal["int", "float"] = "int" if column.type == "int" else "float"
    if column.bins is not None and column.bins.kind == "quantiles":
        if edges is None or column.name not in edges:
            raise InternalError(f"column {column.name!r}: its quantile bins were not released")
        return edges_domain(column.name, kind, with_spikes(edges[column.name], column.spikes, kind),
                            nullable=column.nullable)
    if column.has_public_bounds:
        assert column.min is not None and column.max is not None
        low, high = column.min, column.max
    elif column.name in bounds:
        low, high = bounds[column.name]
    else:
        raise InternalError(f"column {column.name!r} has neither public nor discovered bounds")
    assert column.bins is not None
    return numeric_domain(column.name, kind, low, high, column.bins, nullable=column.nullable, spikes=column.spikes)


def domains_for(schema: TableSchema, bounds: Mapping[str, tuple[float, float]],
                edges: Mapping[str, tuple[float, ...]] | None = None) -> list[ColumnDomain]:
    """Encodings of every measured column, in schema order."""
    return [column_domain(c, bounds, edges) for c in schema.measured]


def rules_for(schema: TableSchema) -> dict[str, ColumnRule]:
    """Row-level rules (where unknown categories go) of every category column."""
    return {c.name: ColumnRule(c.on_unknown) for c in schema.measured if c.type == "category"}


def output_columns(schema: TableSchema, domains: list[ColumnDomain],
                   private: Mapping[str, Mapping[str, float]] | None = None) -> list[OutputColumn]:
    """How to produce every declared column of the synthetic table, in schema order.

    Args:
        schema: The schema.
        domains: The encodings of the measured columns.
        private: The released values of every ``mapping: private`` column (DP outputs, by source category).
    """
    by_name = {d.name: d for d in domains}
    out = []
    for c in schema.columns:
        if c.derived:
            if c.private_mapping and (private is None or c.name not in private):
                raise InternalError(f"column {c.name!r}: its private mapping was not released")
            if c.type == "category":
                out.append(OutputColumn(c.name, c.type, derived_from=c.derived_from,
                                        labels=dict(c.labels) if c.labels else None, ranges=c.ranges or None))
                continue
            mapping = dict(private[c.name]) if c.private_mapping and private is not None else dict(c.mapping)
            out.append(OutputColumn(c.name, c.type, derived_from=c.derived_from, mapping=mapping))
        else:
            out.append(OutputColumn(c.name, c.type, domain=by_name[c.name]))
    return out


def hierarchy_tree(hierarchy: Hierarchy) -> Tree:
    """The tree of a schema hierarchy for post-processing: the root, each declared level, the leaf codes."""
    top = len(hierarchy.labels[0])
    return Tree.from_parents([[0] * top, *[list(p) for p in hierarchy.parents]])
