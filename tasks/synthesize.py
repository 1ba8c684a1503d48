"""Post-processing, model estimation and synthetic sampling: public work on noisy measurements."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq
from prefect import get_run_logger

from dprelease.dp.measurement.bounds import DiscoveredBounds
from dprelease.dp.measurement.cover import EXTRA_PAIR_QUERY
from dprelease.dp.measurement.cross import CrossPairs, pair_cells
from dprelease.dp.measurement.marginals import ColumnDomain
from dprelease.dp.mechanisms.random import synthetic_generator
from dprelease.dp.synthesis import arrays
from dprelease.dp.synthesis.consistency import hierarchy_counts
from dprelease.dp.synthesis.junction import JunctionEstimate, fit_junction, forest_cliques
from dprelease.dp.synthesis.postprocess import (
    consistent_marginals,
    estimate_total,
)
from dprelease.dp.synthesis.raking import anchored, coarse_codes, pool_factor, rake, resample, sort_order
from dprelease.dp.synthesis.sampling import CodeArray, OutputColumn, decode, sample_junction
from dprelease.schemas.encoding import hierarchy_tree, output_columns
from dprelease.schemas.model import Hierarchy
from dprelease.schemas.plan import ReleasePlan
from dprelease.tasks import public_task
from dprelease.tasks.bounds import DiscoveredMapping
from dprelease.tasks.measure import Measured


@dataclass(frozen=True)
class Estimate:
    """The post-processed measurements and the model fitted to them (all DP outputs).

    Attributes:
        rows: The post-processed noisy row count.
        consistent: Non-negative integer counts of every marginal, each summing to ``rows``.
        model: The fitted junction-tree model: the measured cliques (``cliques: auto``), or the forest
            over the measured 2-ways as 1- and 2-cliques (each hierarchy column the root of its part).
    """

    rows: int
    consistent: dict[tuple[str, ...], npt.NDArray[np.int64]]
    model: JunctionEstimate
    hierarchies: dict[str, list[npt.NDArray[np.int64]]] = field(default_factory=dict)
    """Post-processed integer counts of every hierarchy level, the root (the row count) first."""
    exact: dict[str, npt.NDArray[np.int64]] = field(default_factory=dict)
    """Leaf counts that the synthetic table reproduces exactly (each hierarchy's column)."""
    domains: tuple[ColumnDomain, ...] = ()
    """Every column's public domain, as the measurement stage built it."""
    chosen: tuple[tuple[str, ...], ...] = ()
    """``cliques: auto``: the cliques chosen privately and measured (the model's may have grown to hold extra pairs)."""


@dataclass(frozen=True)
class SynthesisResult:
    """What sampling produced (public).

    Attributes:
        rows: Synthetic row count (the post-processed noisy total).
        table_file: Path of the synthetic table, relative to the release folder.
        marginal_files: Paths of the published post-processed marginals.
        model_edges: The (parent, child) edges of the fitted model.
        cliques: The model's cliques, (parents..., child) in sampling order: for ``cliques: auto`` the cliques
            chosen privately and measured (the fitted model's may have grown to hold extra pairs).
    """

    rows: int
    table_file: str
    marginal_files: tuple[str, ...]
    model_edges: tuple[tuple[str, str], ...]
    cliques: tuple[tuple[str, ...], ...] = ()


WRITE_ROWS = 1_000_000
"""Synthetic rows decoded and written at once (one Parquet row group each): the decoded table is
never held whole, whatever its size."""


def _write_decoded(
    codes: Mapping[str, CodeArray], columns: list[OutputColumn], rows: int, rng: np.random.Generator,
    path: Path, metadata: dict[bytes, bytes],
) -> None:
    """Decode the codes slice by slice into ``path`` (Parquet), with the release's metadata."""
    writer: pq.ParquetWriter | None = None
    try:
        for start in range(0, max(rows, 1), WRITE_ROWS):
            stop = min(rows, start + WRITE_ROWS)
            part = decode({c: v[start:stop] for c, v in codes.items()}, columns, stop - start, rng)
            part = part.replace_schema_metadata(metadata)
            if writer is None:
                writer = pq.ParquetWriter(path, part.schema)
            writer.write_table(part, row_group_size=WRITE_ROWS)
    finally:
        if writer is not None:
            writer.close()


def _metadata(plan: ReleasePlan, version: str) -> dict[bytes, bytes]:
    return {
        b"dprelease.release_id": plan.release_id.encode(),
        b"dprelease.dataset": plan.dataset.encode(),
        b"dprelease.budget": f"{plan.definition}: {plan.total.amount}".encode(),
        b"dprelease.version": version.encode(),
    }


@public_task("estimate_model")
def estimate_model(plan: ReleasePlan, bounds: list[DiscoveredBounds], measured: Measured) -> Estimate:
    """Post-process the noisy measurements (total, hierarchies, non-negativity, consistency); fit the model.

    The row count is the inverse-variance-weighted total of every noisy partition of the rows;
    each hierarchy is made consistent with its root pinned to it; every 1-way marginal is the
    inverse-variance combination of all marginals containing its column, and every 2-way table is
    fitted to its two 1-ways and rounded so its margins equal them exactly. The model is a junction
    tree fitted to the noisy measurements by Private-PGM's estimator: over the measured cliques
    (``cliques: auto``), or over the forest of the measured 2-ways (a tree is a junction tree of 2-cliques).
    """
    spec = plan.spec
    domains = list(measured.domains)
    marginals = measured.marginals
    total = max(0, round(estimate_total([*marginals, *measured.levels])))
    hierarchies = {h.name: hierarchy_counts(hierarchy_tree(h), h.name, h.column, measured.levels, marginals, total)
                   for h in spec.schema.hierarchies}
    exact = {h.column: hierarchies[h.name][-1] for h in spec.schema.hierarchies}
    # Every marginal agrees with the best 1-way estimates (and with the hierarchies' leaf counts).
    consistent = consistent_marginals(marginals, total, exact)
    if measured.cliques:
        cliques = list(measured.model or [m.columns for m in measured.cliques])
        fitted = [*measured.cliques, *measured.marginals]
    else:
        # Hierarchy columns first: each becomes the root of its part of the forest, sampled exactly.
        names = [*exact, *[d.name for d in domains if d.name not in exact]]
        cliques, fitted = forest_cliques(names, marginals)
    model = fit_junction(cliques, fitted, measured.maps, consistent, {d.name: d.size for d in domains}, total)
    # once each: a capped clique measured again (``clique(a,b) again``) is still one clique of the model
    chosen = tuple(dict.fromkeys(m.columns for m in measured.cliques
                                 if not m.measurement.query.startswith(EXTRA_PAIR_QUERY)))
    return Estimate(total, consistent, model, hierarchies, exact, measured.domains, chosen)


def _coarse_labels(labels: tuple[str, ...], fine_to_coarse: npt.NDArray[np.int64] | None) -> list[str]:
    """Labels of coarse codes: the first and last fine labels of each bin."""
    if fine_to_coarse is None:
        return list(labels)
    out = []
    for code in range(int(fine_to_coarse.max()) + 1):
        cells = np.flatnonzero(fine_to_coarse == code)
        first, last = labels[cells[0]], labels[cells[-1]]
        out.append(first if first == last else f"{first} .. {last}")
    return out


def _marginal_file(stem: str, used: set[str]) -> str:
    """``marginals/<stem>.parquet``, or ``<stem>-2``, ``<stem>-3``... when that name is taken (case ignored).

    Column names may hold ``__`` (which joins a marginal's columns) or begin with ``clique-``: the 1-way of
    a column ``a__b`` and the 2-way of ``a`` and ``b`` would otherwise write one file, the second over the
    first (and ``Age``, ``age`` one file on a case-insensitive disk). Each file names its columns inside.
    """
    name, suffix = f"marginals/{stem}.parquet", 1
    while name.casefold() in used:
        suffix += 1
        name = f"marginals/{stem}-{suffix}.parquet"
    used.add(name.casefold())
    return name


def _write_hierarchy(
    hierarchy: Hierarchy, counts: list[npt.NDArray[np.int64]], leaf_labels: tuple[str, ...], root: Path,
    metadata: dict[bytes, bytes], used: set[str],
) -> list[str]:
    """One Parquet file per level: node, parent node, post-processed count (the root file holds the total)."""
    labels = [("total",), *hierarchy.labels, leaf_labels]
    names = ["total", *hierarchy.level_names]
    files = []
    for depth, level_counts in enumerate(counts):
        data = {names[depth]: pa.array(list(labels[depth]), type=pa.string())}
        if depth > 0:
            parents = [0] * len(labels[1]) if depth == 1 else list(hierarchy.parents[depth - 2])
            data["parent"] = pa.array([labels[depth - 1][p] for p in parents], type=pa.string())
        data["count"] = pa.array(level_counts, type=pa.int64())
        name = _marginal_file(f"hierarchy-{hierarchy.name}-{depth}-{names[depth]}", used)
        pq.write_table(pa.table(data).replace_schema_metadata(metadata), root / name)
        files.append(name)
    return files


def coarse_sizes(estimate: Estimate) -> dict[str, int]:
    """Every column's size in the model's coarse codes."""
    return arrays.coarse_sizes({d.name: d.size for d in estimate.domains}, estimate.model.maps)


def draw_pool(estimate: Estimate, rng: np.random.Generator) -> dict[str, CodeArray]:
    """Fine codes of the pool the cross pairs rake: :func:`dp.synthesis.raking.pool_factor` times the rows.

    Drawn first from ``rng`` (the release's synthetic generator), by the cross stage and by sampling alike, so
    both see the same pool; hierarchy leaf counts are drawn exactly, times the factor.
    """
    factor = pool_factor(estimate.rows)
    model = estimate.model
    return sample_junction(model.cliques, model.fitted.marginal, {d.name: d.size for d in estimate.domains},
                           model.maps, model.fine, estimate.rows * factor, rng,
                           {c: counts * factor for c, counts in estimate.exact.items()})


def _raked_codes(estimate: Estimate, cross: CrossPairs, rng: np.random.Generator) -> dict[str, CodeArray]:
    """The synthetic rows' fine codes drawn from the pool raked to the cross pairs (hierarchy leaves exact)."""
    pool = draw_pool(estimate, rng)
    sizes = coarse_sizes(estimate)
    coarse = coarse_codes(pool, estimate.model.maps, [d.name for d in estimate.domains])
    rows = len(next(iter(pool.values())))
    pairs = cross.pairs()
    # from the cross stage's weights when they fit this pool (the same seed draws the same pool): raking the
    # same factors from there reaches the same fit in a sweep or two
    start = cross.weights if cross.weights is not None and len(cross.weights) == rows else np.ones(rows)
    weights = rake(*anchored([pair_cells(coarse, p, sizes) for p in pairs], cross.targets, coarse, sizes,
                             [c for p in pairs for c in p]), start)
    columns = list(dict.fromkeys(c for clique in estimate.model.cliques for c in clique))  # parents first
    strata, counts = next(iter(estimate.exact.items()), (None, None))  # at most one hierarchy (spec)
    index = resample(weights, estimate.rows, rng, sort_order(pool, columns),
                     None if strata is None else np.asarray(pool[strata], np.int64), counts)
    return {c: v[index] for c, v in pool.items()}


@public_task("sample_synthetic")
def sample_synthetic(
    plan: ReleasePlan, bounds: list[DiscoveredBounds], estimate: Estimate, staging: str, version: str,
    mappings: Sequence[DiscoveredMapping] = (), cross: CrossPairs | None = None,
) -> SynthesisResult:
    """Sample the synthetic table with the plan's public seed; write ``synthetic/`` and ``marginals/``.

    With measured cross pairs the rows are drawn from the model's pool raked to them (:mod:`dp.synthesis.raking`).
    """
    spec = plan.spec
    domains = list(estimate.domains)
    by_name = {d.name: d for d in domains}
    rng = synthetic_generator(plan.seed)
    model = estimate.model
    if cross is not None and cross.measured:
        codes = _raked_codes(estimate, cross, rng)
    else:
        codes = sample_junction(model.cliques, model.fitted.marginal, {d.name: d.size for d in domains}, model.maps,
                                model.fine, estimate.rows, rng, estimate.exact)
    root = Path(staging)
    (root / "synthetic").mkdir()
    table_file = f"synthetic/{spec.schema.table}.parquet"
    columns = output_columns(spec.schema, domains, {m.column: m.values for m in mappings})
    _write_decoded(codes, columns, estimate.rows, rng, root / table_file,
                   _metadata(plan, version))
    (root / "marginals").mkdir()
    files: list[str] = []
    used: set[str] = set()
    for cols, counts in estimate.consistent.items():
        grids = np.meshgrid(*[np.arange(by_name[c].size) for c in cols], indexing="ij")
        data = {c: pa.array(np.asarray(by_name[c].labels())[g.ravel()]) for c, g in zip(cols, grids, strict=True)}
        data["count"] = pa.array(counts, type=pa.int64())
        name = _marginal_file("__".join(cols), used)
        pq.write_table(pa.table(data).replace_schema_metadata(_metadata(plan, version)), root / name)
        files.append(name)
    for clique, counts in model.counts.items():
        labels = [_coarse_labels(by_name[c].labels(), model.maps.get(c)) for c in clique]
        grids = np.meshgrid(*[np.arange(len(x)) for x in labels], indexing="ij")
        data = {c: pa.array(np.asarray(x)[g.ravel()]) for c, x, g in zip(clique, labels, grids, strict=True)}
        data["count"] = pa.array(counts, type=pa.int64())
        name = _marginal_file("clique-" + "__".join(clique), used)
        pq.write_table(pa.table(data).replace_schema_metadata(_metadata(plan, version)), root / name)
        files.append(name)
    for h in spec.schema.hierarchies:
        files += _write_hierarchy(h, estimate.hierarchies[h.name], by_name[h.column].labels(), root,
                                  _metadata(plan, version), used)
    get_run_logger().info("sampled %d synthetic rows (seed %d) from a junction tree of %d cliques over %d columns",
                          estimate.rows, plan.seed, len(model.cliques), len(domains))
    return SynthesisResult(estimate.rows, table_file, tuple(files), tuple(model.edges()),
                           estimate.chosen or tuple(model.cliques))
