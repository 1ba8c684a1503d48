"""The cross-pair stage: pairs across the junction tree's branches, chosen and measured after the model is fitted.

See :mod:`dp.measurement.cross` for the mechanism and :mod:`dp.synthesis.raking` for the pool. The task reads
the rows once more (the candidates' exact coarse counts, on the same row handling as the other stages) and
draws the pool exactly as :func:`tasks.synthesize.sample_synthetic` will, from the release's public seed.
"""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger

from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import InternalError
from dprelease.dp.measurement.contributions import unit_sensitivity
from dprelease.dp.measurement.cross import CrossPairs, cross_candidates, measure_cross, pair_sigma
from dprelease.dp.mechanisms.random import secure_noise, synthetic_generator
from dprelease.dp.synthesis.raking import coarse_codes
from dprelease.schemas.encoding import rules_for
from dprelease.schemas.model import MAX_CELLS
from dprelease.schemas.plan import ReleasePlan
from dprelease.tasks import sensitive_task
from dprelease.tasks.measure import Counter
from dprelease.tasks.synthesize import Estimate, coarse_sizes, draw_pool


@sensitive_task("measure_cross_pairs")
def measure_cross_pairs(plan: ReleasePlan, ledger_path: str, estimate: Estimate) -> CrossPairs:
    """Charge the ledger, choose and measure the plan's cross pairs; one more counting pass over the rows.

    The pass runs in process (with ``--dask`` too: it counts only the candidate pairs, in coarse codes).
    """
    if plan.cross is None:
        raise InternalError("measure_cross_pairs needs a plan with a cross stage")
    spec = plan.spec
    model = estimate.model
    domains = list(estimate.domains)
    sizes = coarse_sizes(estimate)
    names = [d.name for d in domains]
    unit = spec.schema.privacy_unit
    sensitivity = unit.rows
    candidates = cross_candidates(names, model.cliques, sizes, pair_sigma(plan.cross, sensitivity),
                                  float(estimate.rows), MAX_CELLS)
    logger = get_run_logger()
    if not candidates or estimate.rows <= 0:
        logger.info("cross pairs: no candidate (every pair is held by a clique, too large or noise-capped); "
                    "the stage's share stays unspent")
        return CrossPairs()
    pool = coarse_codes(draw_pool(estimate, synthetic_generator(plan.seed)), model.maps, names)
    counter = Counter(spec.data, unit)
    exact, _ = counter.count(domains, rules_for(spec.schema), candidates, model.maps)
    if unit_sensitivity(counter.bounded) != sensitivity:
        raise InternalError("the cross stage's sensitivity differs from its plan's")
    with Ledger.open(Path(ledger_path)) as ledger:
        context = ReleaseContext(ledger, plan.release_id, plan.definition, secure_noise())  # type: ignore[arg-type]
        out = measure_cross(plan.cross, candidates, exact, pool, sizes, float(estimate.rows), context, sensitivity)
    exact.clear()
    logger.info("cross pairs: measured %d of %d candidate pairs across the junction tree's branches",
                len(out.measured), len(candidates))
    return out
