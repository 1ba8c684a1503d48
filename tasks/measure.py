"""Count the planned marginals (map-reduce over row groups) and measure them with exact noise."""

from __future__ import annotations

import json
from pathlib import Path

from prefect import get_run_logger, task

from dp.accounting import Ledger, ReleaseContext, measure
from dp.budget import PureBudget, ZCDPBudget
from dp.marginals import NoisyMarginal, count_all
from dp.mechanisms import DiscreteGaussian, DiscreteLaplace, Mechanism
from dp.random import secure_noise
from dp.svt import DiscoveredBounds
from schemas.encoding import domains_for, rules_for
from schemas.model import load_spec
from schemas.plan import ReleasePlan
from tasks import SENSITIVE
from tasks.ingest import row_groups
from tasks.staging import write_internal


def _mechanism(budget: PureBudget | ZCDPBudget) -> Mechanism:
    # A histogram changes by one count in one cell when a row is added or removed.
    if isinstance(budget, PureBudget):
        return DiscreteLaplace(l1_sensitivity=1, budget=budget)
    return DiscreteGaussian(l2_sensitivity=1, budget=budget)


@task(name="measure_marginals", **SENSITIVE)
def measure_marginals(
    plan: ReleasePlan, bounds: list[DiscoveredBounds], ledger_path: str, staging: str
) -> list[NoisyMarginal]:
    """Charge the ledger and measure every planned marginal; one noise call per marginal."""
    spec = load_spec(plan.spec_path)
    domains = domains_for(spec.schema, {b.column: (b.lower, b.upper) for b in bounds})
    by_name = {d.name: d for d in domains}
    workload = [m.columns for m in plan.measurements]
    exact, handling = count_all(
        row_groups(spec.data, [d.name for d in domains]), domains, rules_for(spec.schema), workload
    )
    write_internal(Path(staging), "row_handling.json", json.dumps(handling.__dict__, indent=2))
    results = []
    with Ledger.open(Path(ledger_path)) as ledger:
        context = ReleaseContext(ledger, plan.release_id, plan.definition, secure_noise())  # type: ignore[arg-type]
        for planned in plan.measurements:
            noisy, record = measure(_mechanism(planned.budget), exact.pop(planned.columns), context,
                                    stage=planned.stage, query=planned.query)
            shape = tuple(by_name[c].size for c in planned.columns)
            results.append(NoisyMarginal(planned.columns, shape, noisy, record))
    get_run_logger().info("measured %d marginals (%d noisy cells)", len(results),
                          sum(len(r.counts) for r in results))
    return results
