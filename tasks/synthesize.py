"""Post-processing, model estimation and synthetic sampling: public work on noisy measurements."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq
from prefect import get_run_logger, task

from dp.estimation import TreeModel, fit_tree
from dp.marginals import NoisyMarginal
from dp.postprocess import consistent_counts, estimate_total
from dp.random import synthetic_generator
from dp.sampling import decode, sample_codes
from dp.svt import DiscoveredBounds
from schemas.encoding import domains_for, output_columns
from schemas.model import load_spec
from schemas.plan import ReleasePlan
from tasks import PUBLIC


@dataclass(frozen=True)
class Estimate:
    """The post-processed measurements and the model fitted to them (all DP outputs).

    Attributes:
        rows: The post-processed noisy row count.
        consistent: Non-negative integer counts of every marginal, each summing to ``rows``.
        model: The fitted tree model.
    """

    rows: int
    consistent: dict[tuple[str, ...], npt.NDArray[np.int64]]
    model: TreeModel


@dataclass(frozen=True)
class SynthesisResult:
    """What sampling produced (public).

    Attributes:
        rows: Synthetic row count (the post-processed noisy total).
        table_file: Path of the synthetic table, relative to the release folder.
        marginal_files: Paths of the published post-processed marginals.
        model_edges: The (parent, child) edges of the fitted tree.
    """

    rows: int
    table_file: str
    marginal_files: tuple[str, ...]
    model_edges: tuple[tuple[str, str], ...]


def _metadata(plan: ReleasePlan, version: str) -> dict[bytes, bytes]:
    return {
        b"dprelease.release_id": plan.release_id.encode(),
        b"dprelease.dataset": plan.dataset.encode(),
        b"dprelease.budget": f"{plan.definition}: {plan.total.amount}".encode(),
        b"dprelease.version": version.encode(),
    }


@task(name="estimate_model", **PUBLIC)
def estimate_model(plan: ReleasePlan, bounds: list[DiscoveredBounds], marginals: list[NoisyMarginal]) -> Estimate:
    """Post-process the noisy marginals (total, non-negativity, consistency) and fit the model."""
    spec = load_spec(plan.spec_path)
    domains = domains_for(spec.schema, {b.column: (b.lower, b.upper) for b in bounds})
    total = max(0, round(estimate_total(marginals)))
    consistent = {m.columns: consistent_counts(m, total) for m in marginals}
    one_way = {cols[0]: counts for cols, counts in consistent.items() if len(cols) == 1}
    two_way = {(cols[0], cols[1]): counts for cols, counts in consistent.items() if len(cols) == 2}
    model = fit_tree([d.name for d in domains], {d.name: d.size for d in domains}, one_way, two_way)
    return Estimate(total, consistent, model)


@task(name="sample_synthetic", **PUBLIC)
def sample_synthetic(
    plan: ReleasePlan, bounds: list[DiscoveredBounds], estimate: Estimate, staging: str, version: str
) -> SynthesisResult:
    """Sample the synthetic table with the plan's public seed; write ``synthetic/`` and ``marginals/``."""
    spec = load_spec(plan.spec_path)
    domains = domains_for(spec.schema, {b.column: (b.lower, b.upper) for b in bounds})
    by_name = {d.name: d for d in domains}
    rng = synthetic_generator(plan.seed)
    codes = sample_codes(estimate.model, estimate.rows, rng)
    table = decode(codes, output_columns(spec.schema, domains), estimate.rows, rng)
    table = table.replace_schema_metadata(_metadata(plan, version))

    root = Path(staging)
    (root / "synthetic").mkdir()
    table_file = f"synthetic/{spec.schema.table}.parquet"
    pq.write_table(table, root / table_file)
    (root / "marginals").mkdir()
    files = []
    for cols, counts in estimate.consistent.items():
        grids = np.meshgrid(*[np.arange(by_name[c].size) for c in cols], indexing="ij")
        data = {c: pa.array(np.asarray(by_name[c].labels())[g.ravel()]) for c, g in zip(cols, grids, strict=True)}
        data["count"] = pa.array(counts, type=pa.int64())
        name = f"marginals/{'__'.join(cols)}.parquet"
        pq.write_table(pa.table(data).replace_schema_metadata(_metadata(plan, version)), root / name)
        files.append(name)
    get_run_logger().info("sampled %d synthetic rows (seed %d) from a tree over %d columns",
                          estimate.rows, plan.seed, len(domains))
    return SynthesisResult(estimate.rows, table_file, tuple(files), tuple(estimate.model.edges()))
