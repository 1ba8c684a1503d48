"""Loading a release spec (``release.yaml``): the data, the schema, the budget and its allocation, the model."""

from __future__ import annotations

import math
import re
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

from dprelease.dp.accounting.approximate import release_budget
from dprelease.dp.accounting.budget import (
    Budget,
    Definition,
    budget_total,
    to_fraction,
    validate_delta,
)
from dprelease.dp.errors import ParameterError
from dprelease.dp.measurement.cross import DEFAULT_CROSS_PAIRS, MAX_PAIRS
from dprelease.dp.statistics.aggregate import REGISTERED
from dprelease.schemas.identifiers import short
from dprelease.schemas.model import (
    _NAME,
    STAGES,
    STATISTICS,
    AggregateRequest,
    ReleaseSpec,
    StatisticsRequest,
    TableSchema,
    _fail,
)
from dprelease.schemas.reading import MAX_NUMBER, _keys, _load_yaml, _local, _resolve
from dprelease.schemas.table import load_schema

MAX_EPSILON = 100.0
"""The largest epsilon a spec may declare (a release, lifetime or cap budget); above 10 a warning is logged."""
MAX_DELTA = 0.01
"""Every delta must lie below this; from 1e-5 on (about 1/rows of a small table) a warning is logged."""


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
                       "two_way", "cliques", "root", "clique_bins", "cross_pairs", "hierarchy_split", "weighting",
                       "seed", "description", "dask", "internal", "stats"},
          {"dataset", "schema", "data", "budget", "lifetime_budget", "allocation"})
    dataset = doc["dataset"]
    if not isinstance(dataset, str) or not _NAME.match(dataset):
        raise _fail(f"{where}: dataset", "must be a name of letters, digits, '_', '.' or '-'")
    for key in ("schema", "data"):
        if not isinstance(doc[key], str) or not doc[key]:
            raise _fail(f"{where}: {key}", "must be a path")
        _local(f"{where}: {key}", doc[key])
    schema_path = _resolve(file.parent / doc["schema"])
    schema = load_schema(schema_path)
    data = _resolve(file.parent / doc["data"])

    definition, epsilon, delta, budget, life_epsilon, lifetime, release_cap = _budgets(where, doc)
    allocation = _allocation(where, doc["allocation"], schema)

    auto_cliques, root, clique_bins = _cliques(where, doc, schema, allocation)
    cross_pairs = _cross_pairs(where, doc, schema, allocation, auto_cliques)
    auto, pairs = _pairs(where, doc.get("two_way"), schema, allocation, auto_cliques)

    split = _hierarchy_split(f"{where}: hierarchy_split", doc.get("hierarchy_split"), schema)
    if schema.hierarchies and allocation["hierarchy"] <= 0:
        raise _fail(f"{where}: allocation.hierarchy",
                    f"must be positive: the schema declares hierarchy {schema.hierarchies[0].name}")
    if not schema.hierarchies and allocation["hierarchy"] > 0:
        raise _fail(f"{where}: allocation.hierarchy", "must be 0 or absent: the schema declares no hierarchy; drop "
                    f"the key or move its share to {_spent_on(doc)}")

    stats, aggregates = _stats(f"{where}: stats", doc.get("stats"), schema, definition)
    mechanism_delta = sum((request.delta for request in stats), Fraction(0))
    if mechanism_delta:
        if mechanism_delta >= delta:
            raise _fail(f"{where}: stats", f"the deltas of ptr and smooth medians ({float(mechanism_delta):g} in all) "
                        f"must add up to less than budget.delta ({float(delta):g}); the rest converts rho")
        budget = release_budget(epsilon, delta, mechanism_delta)
        if release_cap is not None:  # the cap is (epsilon_cap, delta): with delta spent, its rho shrinks too
            cap_epsilon = to_fraction(doc["release_cap"]["epsilon"], "release_cap.epsilon")
            if budget.amount > release_budget(cap_epsilon, delta, mechanism_delta).amount:
                raise _fail(f"{where}: budget", "with the deltas of ptr and smooth medians taken out, must not "
                            "exceed release_cap")
    if (stats or aggregates) and allocation["stats"] <= 0:
        raise _fail(f"{where}: allocation.stats", "must be positive when stats are asked for")
    if not (stats or aggregates) and allocation["stats"] > 0:
        raise _fail(f"{where}: allocation.stats", "must be 0 or absent without stats; drop the key or move its "
                    f"share to {_spent_on(doc)} (or ask for stats:)")

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
        cross_pairs=cross_pairs, dask_address=dask_address,
        internal=None if internal is None else (file.parent / internal).resolve(),
        stats=stats, aggregates=aggregates,
    )


def _budgets(where: str, doc: dict[str, Any]) -> tuple[Definition, Fraction, Fraction, Budget, Fraction, Budget,
                                                      Budget | None]:
    """``budget``, ``lifetime_budget`` and ``release_cap``: one definition and delta, caps in order."""
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

    return definition, epsilon, delta, budget, life_epsilon, lifetime, release_cap


def _allocation(where: str, raw_alloc: Any, schema: TableSchema) -> dict[str, Fraction]:
    """``allocation``: a non-negative exact share per stage, summing to at most 1."""
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

    return allocation


def _spent_on(doc: dict[str, Any]) -> str:
    """The stages a share with nothing to spend on can move to: those this spec's model measures."""
    if doc.get("cliques") == "auto":
        return "one_way or cliques"
    return "one_way or two_way" if doc.get("two_way") else "one_way"


def _cliques(where: str, doc: dict[str, Any], schema: TableSchema,
             allocation: dict[str, Fraction]) -> tuple[bool, str | None, int]:
    """``cliques: auto`` with its ``root`` and ``clique_bins``, checked against the allocation."""
    cliques = doc.get("cliques")
    if cliques not in (None, "auto"):
        raise _fail(f"{where}: cliques", "must be 'auto' (a degree-2 junction tree chosen privately) or absent")
    auto_cliques = cliques == "auto"
    root = doc.get("root")
    clique_bins = doc.get("clique_bins", 8)
    if auto_cliques:
        if doc.get("two_way") is not None:
            raise _fail(f"{where}: two_way", "must be absent with cliques: auto (cliques replace 2-way marginals)")
        if allocation["selection"] <= 0 or allocation["cliques"] <= 0:
            raise _fail(f"{where}: allocation", "cliques: auto needs positive selection and cliques shares")
        if root is not None and root != "auto" and (root not in schema.names or schema.column(root).derived):
            raise _fail(f"{where}: root", f"({root!r}) must be a measured column, or 'auto' (a leaf of the chosen "
                        "tree, chosen privately)")
        if root == "auto" and "auto" in schema.names:
            raise _fail(f"{where}: root", "'auto' is ambiguous: a column is named auto")
        if isinstance(clique_bins, bool) or not isinstance(clique_bins, int) or not 2 <= clique_bins <= 64:
            raise _fail(f"{where}: clique_bins", f"({clique_bins!r}) must be a whole number from 2 to 64")
    else:
        for key in ("root", "clique_bins"):
            if key in doc:
                raise _fail(f"{where}: {key}", "applies to cliques: auto only")
        if allocation["cliques"] > 0:
            raise _fail(f"{where}: allocation.cliques", "must be 0 or absent unless cliques is auto; drop the key or "
                        f"move its share to {_spent_on(doc)} (or set cliques: auto)")
    return auto_cliques, root, clique_bins


def _cross_pairs(where: str, doc: dict[str, Any], schema: TableSchema, allocation: dict[str, Fraction],
                 auto_cliques: bool) -> int:
    """``cross_pairs`` with ``allocation.cross``: pairs across the junction tree's branches (0: none)."""
    share, pairs = allocation["cross"], doc.get("cross_pairs")
    if share <= 0:
        if pairs is not None:
            raise _fail(f"{where}: cross_pairs", "needs a positive allocation.cross (the stage that chooses and "
                        "measures them)")
        return 0
    if not auto_cliques:
        raise _fail(f"{where}: allocation.cross", "applies to cliques: auto only (pairs across the junction "
                    f"tree's branches); drop the key or move its share to {_spent_on(doc)}")
    if len(schema.hierarchies) > 1:
        raise _fail(f"{where}: allocation.cross", "supports at most one hierarchy (the synthetic rows are drawn "
                    "with its leaf counts exact)")
    pairs = DEFAULT_CROSS_PAIRS if pairs is None else pairs
    if isinstance(pairs, bool) or not isinstance(pairs, int) or not 1 <= pairs <= MAX_PAIRS:
        raise _fail(f"{where}: cross_pairs", f"must be a whole number from 1 to {MAX_PAIRS}")
    return pairs


def _pairs(where: str, raw_pairs: Any, schema: TableSchema, allocation: dict[str, Fraction],
           auto_cliques: bool) -> tuple[bool, list[tuple[str, str]]]:
    """``two_way``: ``auto`` (chosen privately) or a list of distinct pairs of measured columns."""
    pairs: list[tuple[str, str]] = []
    auto = raw_pairs == "auto"
    if auto:
        raw_pairs = []
        if allocation["selection"] <= 0 or allocation["two_way"] <= 0:
            raise _fail(f"{where}: allocation", "two_way: auto needs positive selection and two_way shares")
    elif allocation["selection"] > 0 and not auto_cliques:
        raise _fail(f"{where}: allocation.selection", "must be 0 or absent unless two_way or cliques is auto; drop "
                    f"the key or move its share to {'one_way or two_way' if raw_pairs else 'one_way'}")
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
    return auto, pairs



def _stats(where: str, raw: Any, schema: TableSchema, definition: Definition
           ) -> tuple[tuple[StatisticsRequest, ...], tuple[AggregateRequest, ...]]:
    """``stats:``: entries ``{column, statistics, quantiles}`` (numeric columns) and ``{sample_and_aggregate, ...}``."""
    if raw is None:
        return (), ()
    if not isinstance(raw, list) or not raw:
        raise _fail(where, "must be a non-empty list of {column, statistics, quantiles}")
    out: list[StatisticsRequest] = []
    aggregates: list[AggregateRequest] = []
    for i, item in enumerate(raw):
        loc = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise _fail(loc, "must be a mapping with column and statistics")
        if "sample_and_aggregate" in item:
            aggregates.append(_aggregate(loc, item, schema))
            continue
        _keys(loc, item, {"column", "statistics", "quantiles", "by", "method", "proposed_bound", "delta",
                          "clipping_bias"}, {"column", "statistics"})
        column = item["column"]
        if not isinstance(column, str) or column not in schema.names:
            raise _fail(f"{loc}.column", f"({column!r}) is not a declared column")
        declared = schema.column(column)
        if not declared.numeric or declared.derived:
            raise _fail(f"{loc}.column", f"({column!r}) must be a measured numeric column")
        by = item.get("by")
        if by is not None and (not isinstance(by, str) or by not in schema.names
                               or schema.column(by).type != "category"):
            raise _fail(f"{loc}.by", f"({by!r}) must be a declared category column")
        if any(request.column == column and request.by == by for request in out):
            raise _fail(f"{loc}.column", f"({column!r}) is listed twice" + (f" by {by}" if by else ""))
        wanted = item["statistics"]
        if not isinstance(wanted, list) or not wanted or not all(isinstance(w, str) for w in wanted):
            raise _fail(f"{loc}.statistics", f"must be a non-empty list of {', '.join(STATISTICS)}")
        unknown = [w for w in wanted if w not in STATISTICS]
        if unknown:
            raise _fail(f"{loc}.statistics", f"({unknown[0]!r}) must be one of {', '.join(STATISTICS)}")
        if len(set(wanted)) != len(wanted):
            raise _fail(f"{loc}.statistics", f"({next(w for w in wanted if wanted.count(w) > 1)!r}) is listed twice")
        levels: list[Fraction] = []
        raw_levels = item.get("quantiles")
        if ("quantiles" in wanted) != (raw_levels is not None):
            raise _fail(f"{loc}.quantiles", "must be given exactly when statistics lists quantiles")
        if raw_levels is not None:
            if not isinstance(raw_levels, list) or not raw_levels:
                raise _fail(f"{loc}.quantiles", "must be a non-empty list of levels in (0, 1)")
            for level in raw_levels:
                if isinstance(level, bool) or not isinstance(level, int | float) or not 0 < level < 1:
                    raise _fail(f"{loc}.quantiles", f"({level!r}) must be a number strictly between 0 and 1")
                levels.append(Fraction(repr(float(level))))
            if len(set(levels)) != len(levels):  # a set: a list of many levels is checked in linear time
                raise _fail(f"{loc}.quantiles", f"({float(next(q for q, n in Counter(levels).items() if n > 1)):g}) "
                            "is listed twice")
        if "median" in wanted:
            levels.append(Fraction(1, 2))
        levels = sorted(set(levels))
        method, bound, delta = _method(loc, item, wanted, definition)
        if method != "exponential" and schema.privacy_unit.id_column:
            raise _fail(f"{loc}.method", f"{method} is not available with privacy_unit.id_column (its stability "
                        "argument is for one row); use method exponential, which bounds each unit's rows")
        bias = _clipping_bias(loc, item, wanted, by)
        out.append(StatisticsRequest(column, tuple(dict.fromkeys(wanted)), tuple(levels), by, method, bound, delta,
                                     bias))
    return tuple(out), tuple(aggregates)


def _clipping_bias(loc: str, item: dict[str, Any], wanted: list[str], by: str | None) -> bool:
    """``clipping_bias``: a boolean (default false), for a ``mean`` or ``sum`` of the whole column."""
    value = item.get("clipping_bias", False)
    if not isinstance(value, bool):
        raise _fail(f"{loc}.clipping_bias", f"({value!r}) must be true or false")
    if value and not {"mean", "sum"} & set(wanted):
        raise _fail(f"{loc}.clipping_bias", "needs mean or sum in statistics (it estimates their clipping bias)")
    if value and by is not None:
        raise _fail(f"{loc}.clipping_bias", "is not available per group (by:) yet; ask for it without by")
    return value


MAX_CHUNKS = 1_000_000
"""The most chunks a sample-and-aggregate entry may ask for."""


def _aggregate(loc: str, item: dict[str, Any], schema: TableSchema) -> AggregateRequest:
    """One ``{sample_and_aggregate: function, x, y, chunks, range: [a, b]}`` entry of ``stats:``."""
    keys = {"sample_and_aggregate", "x", "y", "chunks", "range"}
    extra = sorted(set(item) - keys)
    if extra:
        raise _fail(f"{loc}.{extra[0]}", "is not a key of a sample_and_aggregate entry (which takes "
                    "sample_and_aggregate, x, y, chunks and range); list column statistics in an entry of their own")
    _keys(loc, item, keys, keys)
    function = item["sample_and_aggregate"]
    if not isinstance(function, str) or function not in REGISTERED:
        raise _fail(f"{loc}.sample_and_aggregate", f"({short(function)}) must be a registered function: "
                    f"{', '.join(sorted(REGISTERED))}")
    for key in ("x", "y"):
        column = item[key]
        if not isinstance(column, str) or column not in schema.names:
            raise _fail(f"{loc}.{key}", f"({column!r}) is not a declared column")
        if not schema.column(column).numeric or schema.column(column).derived:
            raise _fail(f"{loc}.{key}", f"({column!r}) must be a measured numeric column")
    if item["x"] == item["y"]:
        raise _fail(f"{loc}.y", "must differ from x")
    chunks = item["chunks"]
    if isinstance(chunks, bool) or not isinstance(chunks, int) or not 2 <= chunks <= MAX_CHUNKS:
        raise _fail(f"{loc}.chunks", f"must be a whole number from 2 to {MAX_CHUNKS}")
    bounds = item["range"]
    if (not isinstance(bounds, list) or len(bounds) != 2
            or not all(not isinstance(b, bool) and isinstance(b, int | float) and abs(b) <= MAX_NUMBER
                       for b in bounds)):
        raise _fail(f"{loc}.range", "must be [low, high]: two finite numbers within ±2^53, the public range of the "
                    "function's value")
    if not bounds[0] < bounds[1]:
        raise _fail(f"{loc}.range", "must have low < high")
    return AggregateRequest(function, item["x"], item["y"], chunks, float(bounds[0]), float(bounds[1]))


METHODS = ("exponential", "ptr", "smooth")
"""How a ``stats:`` entry's median and quantiles are released."""


def _method(loc: str, item: dict[str, Any], wanted: list[str], definition: Definition
            ) -> tuple[str, float | None, Fraction]:
    """``method``, ``proposed_bound`` and ``delta`` of one ``stats:`` entry, checked against its statistics."""
    method = item.get("method", "exponential")
    if method not in METHODS:
        raise _fail(f"{loc}.method", f"({method!r}) must be one of {', '.join(METHODS)}")
    if "method" in item and not {"median", "quantiles"} & set(wanted):
        raise _fail(f"{loc}.method", "applies to median and quantiles only; this entry asks for neither")
    if method == "exponential":
        for key in ("proposed_bound", "delta"):
            if key in item:
                raise _fail(f"{loc}.{key}", "is a setting of method ptr or smooth; drop it")
        return method, None, Fraction(0)
    if "median" not in wanted or "quantiles" in wanted:
        raise _fail(f"{loc}.method", f"{method} releases the median only: list median and no quantiles "
                    "(use method exponential for other levels)")
    if item.get("by") is not None:
        raise _fail(f"{loc}.method", f"{method} is not available per group (by:); use method exponential")
    if definition != "zcdp":
        raise _fail(f"{loc}.method", f"{method} is (epsilon, delta)-DP: it needs a budget with delta (zCDP), "
                    "not pure epsilon")
    raw_delta = item.get("delta")
    if isinstance(raw_delta, bool) or not isinstance(raw_delta, int | float) or not 0 < raw_delta < 1:
        raise _fail(f"{loc}.delta", f"must be given for method {method}: a number strictly between 0 and 1, taken "
                    "from budget.delta")
    bound = item.get("proposed_bound")
    if method == "smooth" and bound is not None:
        raise _fail(f"{loc}.proposed_bound", "is a setting of method ptr only; drop it")
    if method == "ptr" and (isinstance(bound, bool) or not isinstance(bound, int | float) or not math.isfinite(bound)
                            or bound <= 0):
        raise _fail(f"{loc}.proposed_bound", "must be given for method ptr: a positive number (value units), the "
                    "proposed bound on the median's local sensitivity")
    return method, None if bound is None else float(bound), Fraction(repr(float(raw_delta)))


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
