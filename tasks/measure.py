"""Count the planned marginals (map-reduce over row groups) and measure them with exact noise."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from prefect import get_run_logger

from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import ParameterError, ReleaseError
from dprelease.dp.measurement import draws
from dprelease.dp.measurement.bounds import DiscoveredBounds
from dprelease.dp.measurement.contributions import BoundedRows, unit_sensitivity
from dprelease.dp.measurement.draws import PairSelection
from dprelease.dp.measurement.marginals import ColumnDomain, ColumnRule, IntArray, RowHandling, count_all
from dprelease.dp.mechanisms.random import secure_noise
from dprelease.dp.synthesis.consistency import NoisyLevel
from dprelease.dp.synthesis.noisy import NoisyMarginal
from dprelease.schemas.encoding import domains_for, rules_for
from dprelease.schemas.model import Hierarchy, PrivacyUnit, ReleaseSpec
from dprelease.schemas.plan import ReleasePlan, plan_pairs
from dprelease.tasks import sensitive_task
from dprelease.tasks.ingest import (
    RowGroupRef,
    batch_count,
    remote_count_partition,
    row_group_refs,
    table_rows,
    unit_row_groups,
)
from dprelease.tasks.progress import StageProgress
from dprelease.tasks.staging import write_internal

Columns = tuple[str, ...]


@dataclass(frozen=True)
class Measured:
    """The noisy measurements of a release (DP outputs: public, safe to post-process).

    Attributes:
        marginals: The noisy 1-way and 2-way marginals, in plan order.
        levels: The noisy counts of every hierarchy level, in plan order.
    """

    marginals: list[NoisyMarginal]
    levels: list[NoisyLevel] = field(default_factory=list)
    selection: list[MeasurementRecord] = field(default_factory=list)
    cliques: list[NoisyMarginal] = field(default_factory=list)
    """``cliques: auto``: the noisy cliques, each (parents..., child) in coarse codes, in sampling order."""
    maps: dict[str, IntArray] = field(default_factory=dict)
    """``cliques: auto``: the public fine-to-coarse maps of the numeric columns (from the noisy 1-ways)."""
    tree: list[tuple[str, str]] = field(default_factory=list)
    """``cliques: auto``: the spanning tree chosen privately."""
    domains: tuple[ColumnDomain, ...] = ()
    """Every measured column's public domain (schema and discovered bounds), built once, here."""
    model: list[tuple[str, ...]] = field(default_factory=list)
    """``cliques: auto``: the fitted model's cliques (the measured ones grown to hold the extra pairs)."""
    cross: list[MeasurementRecord] = field(default_factory=list)
    """``cross_pairs``: the cross stage's selections and measurements, in the order booked (after the fit)."""

    def records(self) -> list[MeasurementRecord]:
        """Every measurement's provenance: selections, marginals, cliques, hierarchy levels, cross pairs."""
        return (list(self.selection) + [m.measurement for m in self.marginals]
                + [m.measurement for m in self.cliques] + [level.measurement for level in self.levels]
                + list(self.cross))

    def pairs(self) -> list[tuple[str, ...]]:
        """The measured 2-way marginals' columns."""
        return [m.columns for m in self.marginals if len(m.columns) == 2]


DASK_CONNECT_SECONDS = 10
"""How long the measure stage waits to connect to the scheduler (preflight has already reached it)."""

DASK_MIN_ROWS = 1_000_000
"""Tables with fewer rows are counted in process even when a Dask scheduler is named (``--dask``)."""

MAX_MAP_TASKS = 256
"""At most this many map tasks per pass: more row groups than this are grouped into consecutive runs."""


def map_partitions(refs: Sequence[RowGroupRef], tasks: int = MAX_MAP_TASKS) -> list[list[RowGroupRef]]:
    """``refs`` cut into at most ``tasks`` runs of consecutive row groups, as even as they go."""
    if not refs:
        return []
    count = min(tasks, len(refs))
    size, extra = divmod(len(refs), count)
    runs: list[list[RowGroupRef]] = []
    start = 0
    for index in range(count):
        stop = start + size + (1 if index < extra else 0)
        runs.append(list(refs[start:stop]))
        start = stop
    return runs


@dataclass
class Counter:
    """Runs the counting passes of one measurement: the map per row group, the reduce by summing.

    In process (no client) the map is :func:`dp.measurement.marginals.count_all` over the row groups as they
    are read. With a Dask ``distributed`` client each run of row groups is counted on the cluster by
    the plain function :func:`tasks.ingest.remote_count_partition` (no Prefect on the workers: they
    need only this package and read access to the data), which reads its row groups by (file,
    index); only the exact partial counts come back, and they are summed here, in the measure task,
    before any noise. Contribution bounding chooses rows across the whole table (a row-level keep
    mask that must not leave this process), so with a privacy unit the map stays in process.

    Attributes:
        data: The dataset (a Parquet file or a folder of them).
        unit: The privacy unit.
        client: A connected ``distributed.Client`` for the map, or None for in process.
        bounded: The contribution bounding of the first pass, reused by the later ones.
    """

    data: Path
    unit: PrivacyUnit
    client: Any = None
    bounded: BoundedRows | None = None
    progress: StageProgress = field(default_factory=lambda: StageProgress("measure"))

    def count(
        self,
        domains: Sequence[ColumnDomain],
        rules: Mapping[str, ColumnRule],
        workload: Sequence[tuple[str, ...]],
        maps: Mapping[str, npt.NDArray[np.integer[Any]]] | None = None,
    ) -> tuple[dict[tuple[str, ...], IntArray], RowHandling]:
        """Exact counts of ``workload`` over every (bounded) row: one map-reduce pass."""
        if self.client is None or self.unit.id_column is not None:
            batches, self.bounded = unit_row_groups(self.data, [d.name for d in domains], self.unit, self.bounded)
            total = batch_count(self.data)
            return count_all(self.progress.track(batches, total), domains, rules, workload, maps)
        shared = (list(domains), dict(rules), list(workload), None if maps is None else dict(maps))
        futures = [self.client.submit(remote_count_partition, run, *shared, pure=False)
                   for run in map_partitions(row_group_refs(self.data), self.tasks())]
        totals, handling = count_all([], domains, rules, workload, maps)  # zeros of the right shapes
        for part, part_handling in self.progress.track((f.result() for f in futures), len(futures), "map task"):
            for columns, counts in part.items():
                totals[columns] += counts
            handling.add(part_handling)
        return totals, handling

    def tasks(self) -> int:
        """Map tasks per pass: two per worker thread, at most :data:`MAX_MAP_TASKS`.

        Two per thread so that one slow run of row groups does not hold up the whole pass.
        """
        threads = sum(self.client.nthreads().values()) or 1
        return min(MAX_MAP_TASKS, 2 * threads)


@contextmanager
def map_client(address: str | None) -> Iterator[Any]:
    """A ``distributed.Client`` connected to the scheduler at ``address``, or None (in process).

    Raises:
        ParameterError: If an address is given but the ``dask`` extra (distributed) is not installed.
        ReleaseError: If the cluster is lost while the block runs (a future cancelled, its connection closed):
            one public line naming the address; a failure of the map itself propagates as it is.
    """
    if address is None:
        yield None
        return
    try:
        from distributed import Client
    except ImportError as err:
        raise ParameterError("dask: a scheduler address needs the dask extra (pip install 'dprelease[dask]')") from err
    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError

    client = Client(address, timeout=DASK_CONNECT_SECONDS, set_as_default=False)  # type: ignore[no-untyped-call]
    with client:
        try:
            yield client
        except (FutureCancelledError, CommClosedError) as err:  # the cluster's own failures: no row in them
            raise ReleaseError(f"dask: the cluster at {address} was lost during the count ({type(err).__name__}); "
                               "run the same release id again, with a live scheduler or without --dask: what was "
                               "drawn is replayed") from None


def level_counts(hierarchy: Hierarchy, leaves: IntArray, level: int) -> IntArray:
    """Exact counts of a hierarchy level (1 = top) summed up from the exact counts of its leaf codes."""
    return draws.level_counts(hierarchy.parents, leaves, level)


@sensitive_task("measure_marginals")
def measure_marginals(
    plan: ReleasePlan, bounds: list[DiscoveredBounds], ledger_path: str, steward: str, dask: str | None = None,
    edges: dict[str, tuple[float, ...]] | None = None,
) -> Measured:
    """Charge the ledger and measure every planned marginal and hierarchy level; one noise call each.

    Every count comes from one map-reduce pass over the row groups, with the same row-level
    handling, so the hierarchy levels and the marginals describe the same rows. With
    ``two_way: auto`` the 2-way marginals are chosen after the 1-ways are measured: a spanning
    tree grown by the exponential mechanism (charged per round), scored against the noisy 1-ways.
    With a Dask scheduler address (``dask``, else the spec's ``dask.address``) the map of every
    pass runs on that cluster (:class:`Counter`); the reduce and every noise draw stay here.
    ``edges`` are the bin edges of ``bins: quantiles`` columns, released by the bounds stage.
    """
    spec = plan.spec
    address = dask or spec.dask_address
    if address is not None and table_rows(spec.data) < DASK_MIN_ROWS:
        # A cluster costs a fixed 0.1-0.2 s per pass (benchmarks/dask_map.py): a small table is counted
        # faster here. The counts are the same either way; only where they are computed changes.
        get_run_logger().info("counting in process: the table is below %d rows, too small to gain from the cluster "
                              "at %s", DASK_MIN_ROWS, address)
        address = None
    with map_client(address) as client:
        if address is not None:
            get_run_logger().info("counting row groups on the Dask cluster at %s%s", address,
                                  " (in process: contribution bounding)" if spec.schema.privacy_unit.id_column else "")
        return _measure(plan, spec, bounds, ledger_path, steward, Counter(spec.data, spec.schema.privacy_unit, client),
                        edges)


def _measure(
    plan: ReleasePlan, spec: ReleaseSpec, bounds: list[DiscoveredBounds], ledger_path: str, steward: str,
    counter: Counter, edges: dict[str, tuple[float, ...]] | None = None,
) -> Measured:
    domains = domains_for(spec.schema, {b.column: (b.lower, b.upper) for b in bounds}, edges)
    candidates = list(plan.selection.candidates) if plan.selection is not None else []
    workload = list(dict.fromkeys([*(m.columns for m in plan.measurements), *candidates]))
    rules = rules_for(spec.schema)
    exact, handling = counter.count(domains, rules, workload)
    bounded = counter.bounded
    sensitivity = unit_sensitivity(bounded)
    internal = dict(handling.__dict__)
    if bounded is not None:
        internal["contribution_bounding"] = {"max_rows_per_id": bounded.l1_sensitivity,
                                             "dropped_null_ids": bounded.dropped_null_ids,
                                             "dropped_over_cap": bounded.dropped_over_cap}
    write_internal(Path(steward), "row_handling.json", json.dumps(internal, indent=2))
    selection = plan.selection
    pairs = None if selection is None else PairSelection(
        selection.candidates, selection.run_budget, lambda chosen: plan_pairs(plan, spec, chosen))

    def count_coarse(workload: list[Columns], maps: dict[str, IntArray]) -> dict[Columns, IntArray]:
        return counter.count(domains, rules, workload, maps)[0]

    with Ledger.open(Path(ledger_path)) as ledger:
        context = ReleaseContext(ledger, plan.release_id, plan.definition, secure_noise())  # type: ignore[arg-type]
        measured = draws.measure_plan(plan.measurements, exact, {h.name: h.parents for h in spec.schema.hierarchies},
                                      domains, context, sensitivity, pairs=pairs, cliques=plan.cliques,
                                      count_coarse=count_coarse)
    exact.clear()
    marginals, levels, junction = measured.marginals, measured.levels, measured.junction
    if junction is not None:
        get_run_logger().info("chose a junction tree privately and measured %d cliques", len(junction.cliques))
        return Measured(marginals, levels, junction.records, junction.cliques, junction.maps, junction.tree,
                        tuple(domains), junction.model)
    get_run_logger().info("measured %d marginals and %d hierarchy levels (%d noisy cells)%s", len(marginals),
                          len(levels), sum(len(r.counts) for r in marginals) + sum(len(x.counts) for x in levels),
                          f"; {len(measured.selection)} pairs chosen privately" if measured.selection else "")
    return Measured(marginals, levels, measured.selection, domains=tuple(domains))
