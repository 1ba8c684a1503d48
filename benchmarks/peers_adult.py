"""Benchmark: dprelease against its peers on Adult and ACS MA, side by side on one machine in one run.

README
======

What runs (every system in its own subprocess, one at a time, so wall time and peak memory are per run):

``dprelease-flow``
    The full release: ``.venv/bin/dprelease release SPEC --out TMP/out --internal TMP/internal --ledger
    TMP/ledger.sqlite --release-id ...`` with a copy of ``--spec`` (default ``examples/adult/release.yaml``)
    whose ``budget.epsilon`` is ε (``release_cap`` and ``lifetime_budget`` scaled up with it, ``seed`` set to
    the run's seed) — validation, the bounds stage (SVT bounds, private mappings, quantile bins), measurement,
    estimation, sampling, reports, publication, on the embedded Prefect API. Its utility figures are read from
    the release's steward-only ``utility.json`` (under ``--internal``). Wall time is the whole
    command (interpreter start, Prefect's embedded API, everything). Its "fit+sample" column is the flow run
    itself (``flow_s``, from Prefect's log lines: from "Beginning flow run" to the flow's "Finished in
    state"): every stage of the release with Prefect's orchestration, but not the interpreter's start, the
    imports before the flow or the embedded API's start (the peers' fit + sample excludes their process
    start and imports too); ``stages_s`` holds each stage's share.
``dprelease-core``
    The synthesis core alone: estimation + sampling. A first, untimed process runs the flow's path up to the
    noisy measurements, in the flow's order (``plan_budget``; ``find_bounds``; ``find_mappings`` when the
    plan has ``mapping: private`` columns; ``find_bins`` when it has ``bins: quantiles`` columns;
    ``measure_marginals`` with those released bin edges), called through their undecorated ``.fn``,
    outside Prefect, with ``get_run_logger`` pointed at a plain logger, and pickles them; a second process
    (:func:`dprelease_core`) loads them and runs ``estimate_model.fn`` + ``sample_synthetic.fn`` (with the
    released mappings) — exactly the code the flow runs, whatever the tasks call inside. The time
    reported is estimation + sampling only (in-process); peak RSS is that second process's.
    (Chosen over re-implementing the tasks' pure-function calls, which other engineers are changing, and
    over parsing task timings from Prefect's logs, which depends on log formats.)
``mst`` / ``aim``
    smartnoise-synth's MST and AIM (in ``.venv-bench``). The columns are coded on a *public* domain from the
    spec's schema only (:func:`public_domain`; never data quantiles, never a value read off the rows):

    - categories as declared (a null is a category of its own when the column is nullable);
    - integer columns: one bin per value when their declared range has at most 128 values (AGEP, NOC,
      NPF; age, hours-per-week), otherwise 128 bins over the declared ``min``/``max`` or, without public
      bounds, the ``search_range`` (fnlwgt, capital-gain, capital-loss) — equal-width, or where the schema
      declares ``bins: log`` (capital-gain, capital-loss) the lowest value on its own and geometric bins
      above it. (Equal-width bins for the capital columns would put the 0s, 92% of the rows, in one
      8192-wide bin, and decoding that bin alone costs tvd1 0.038; with log bins the coding itself costs
      tvd1 0.002.) A declared ``{width: W}`` / ``{count: N}`` does not change this (the peers get the
      finer public coding, as before);
    - ``bins: quantiles`` / ``{quantiles: N}`` (ACS: INDP, PINCP, PWGTP, WGTP): the release draws these
      edges from DP medians in its bounds stage; the peers have no such stage, so these columns are coded
      as any other wide integer column: 128 equal-width bins over the declared range. Geometric bins
      (anchored at zero for a signed range) were tried for the only column whose range is huge (PINCP,
      -9000 to 1341000) and measured worse on the rows (coding alone: tvd1 0.033 against 0.023 for
      equal-width), so they are not used. The coding is costly for the survey weights (PWGTP, WGTP:
      declared 0/1..9999, 95% of the values below 230): equal-width 78-wide bins cost tvd1 0.28 and 0.31
      by themselves (log bins would cost 0.02, but nothing public in the schema says so, and choosing per
      column from the rows would tune the peers on the data): see the ``coded`` row;
    - ``spikes: [...]`` (public values: PINCP 0, POVPIP 501, WGTP 0) get a bin of their own, ``[s, s + 1)``
      for an int column (``[s, next double)`` for a float), under any of the codings above, as in the
      release (:func:`with_public_spikes`); a column coded one bin per value already has it;
    - float columns: 128 equal-width bins over ``min``/``max`` (or the ``search_range``). This includes a
      derived column with ``mapping: private`` (ACS: DENSITY, a private function of PUMA with public
      ``min``/``max``): the release draws each PUMA's value by a DP median; the peers have no
      private-mapping mechanism, so it is a float column like the others (its ``resolution`` is not used).
      In the ACS MA excerpt DENSITY takes 5 distinct values, so the yardstick compares it as categories
      (exact values): decoded uniformly inside 413-wide bins, the peers' and the independent baseline's
      DENSITY has 1-way TVD 1.0 by construction, and every pair with it about 1 too; ``--table --without
      DENSITY`` shows the figures without it.

    smartnoise's transformer is fitted on that public domain (not on the rows), so no budget is spent on
    preprocessing; ε and δ = 1e-9 go to the synthesizer. Synthetic bins are decoded back to numbers
    uniformly within the bin, so the yardstick sees the real table's column types. The row count is the
    real one (smartnoise's default). AIM runs one seed per ε with a timeout (``--aim-timeout``, 30 min);
    a timed-out run is recorded as "did not finish".
``independent``
    The independent 1-way baseline (project venv): every column's 1-way histogram over the same public
    domain, measured with :class:`dprelease.dp.mechanisms.noise.DiscreteGaussian` (the release's ρ split
    equally over the columns, secure noise from :mod:`dp.mechanisms.random`); the noisy total is the
    inverse-variance mean of the columns' sums; each histogram projected to non-negative counts summing to
    it; columns sampled independently and decoded as above.
``coded``
    The real rows through that public coding and back, without noise (not private): what the coding alone
    costs MST, AIM and the independent baseline (a floor for them, as ``bootstrap`` is for everyone).
``bootstrap``
    The floor: the real table resampled with replacement (not private).

Utility is always the project's yardstick, :func:`dprelease.quality.utility.utility` (tvd1 over all 1-way,
tvd2 over all 2-way, tvd3 over a fixed sample of 300 3-way marginals; 16 quantile bins of the real data for
numeric columns with more than 16 distinct values, exact values otherwise), computed in the project venv
against the real table for every system (for the flow it is the same function, run by the flow itself).
Peak RSS is GNU time's maximum resident set size of the run's process (the largest of that process and the
descendants it waited for, not their sum). Every process of the project venv imports dprelease from this
checkout (``PYTHONPATH``), whatever the venv's editable install points at; each row records the checkout's
commit (``commit``, ``+dirty`` when tracked files outside the results differ from it).

Setup (once; the peers' pins conflict with the project's, so they get their own venv)::

    bash benchmarks/setup_peers.sh           # creates .venv-bench with smartnoise-synth 1.0.8

Run (with the project venv; ONE benchmark at a time on a shared machine)::

    .venv/bin/python benchmarks/peers_adult.py                      # Adult, full grid: ε 0.3 1 3 × seeds 0 1 2
    .venv/bin/python benchmarks/peers_adult.py --spec examples/acs-ma2019/release.yaml   # ACS MA, full grid
    .venv/bin/python benchmarks/peers_adult.py --epsilons 1 --systems mst aim
    .venv/bin/python benchmarks/peers_adult.py --spec examples/adult/release-auto.yaml --systems dprelease-flow
    .venv/bin/python benchmarks/peers_adult.py --table                # print the tables from the results file
    .venv/bin/python benchmarks/peers_adult.py --table --without DENSITY   # tvd1/tvd2 without a column

Tables are per dataset (the spec's folder: every spec of a folder shares its schema and data, and a system
run with a spec other than the folder's ``release.yaml`` is shown with the spec's name). Every row also
records the TVD of each 1-way and 2-way marginal (``one_way``, ``two_way``), and the first table is followed
by a second one: per system and ε, how many pairs have a mean TVD (over the seeds) above the independent
baseline's mean on the same dataset and ε, how many by more than ``PAIR_TOLERANCE`` (0.005, issue 5's
"noticeably worse"), and the worst excess; then, per dataset and ε, the pairs on which dprelease-flow is worse
than that baseline by more than the tolerance (worst first, ``--pairs`` of them), with every system's excess.

Runs are merged into ``benchmarks/results/peers_adult.json`` (``--results``; a row per system × spec × ε ×
seed; a re-run replaces its row), so the grid can be filled in several sittings. On 2 cores shared with other
work (load 3-4) a run took 16-25 s (flow; 11 s on an idle machine), 1-1.5 s (core), 100-125 s on Adult and
115-185 s on ACS (MST; about 55-65 s on Adult when idle), 4-14 min on Adult and 4-23 min on ACS (AIM, capped
at 30 min per ε); the grid without AIM took about 25 min per dataset, AIM on both about 70 min.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PROJECT_PY = ROOT / ".venv" / "bin" / "python"
PROJECT_CLI = ROOT / ".venv" / "bin" / "dprelease"
BENCH_PY = ROOT / ".venv-bench" / "bin" / "python"
RESULTS = ROOT / "benchmarks" / "results" / "peers_adult.json"
DEFAULT_SPEC = ROOT / "examples" / "adult" / "release.yaml"
SYSTEMS = ("dprelease-flow", "dprelease-core", "mst", "aim", "independent", "coded", "bootstrap")
PEERS = ("mst", "aim")
MAX_BINS = 128
DELTA = 1e-9


# --------------------------------------------------------------------------------------------------------------
# Public domain coding shared by the peers and the independent baseline (pure numpy/yaml: runs in either venv)
# --------------------------------------------------------------------------------------------------------------

def load_spec_doc(spec: Path) -> dict[str, Any]:
    import yaml

    return yaml.safe_load(spec.read_text(encoding="utf-8"))


def with_public_spikes(edges: list[float], spikes: list[float], integer: bool) -> list[float]:
    """``edges`` with a bin of its own for every declared spike inside them: ``[s, s + 1)`` for an int column,
    ``[s, next double)`` for a float one (as the release does, ``dp.measurement.marginals.with_spikes``).

    A spike at the top edge of an int column widens the last edge to ``s + 1``. For an int column, an edge in
    ``(s - 1, s)`` is dropped: it would leave a bin ``[edge, s)`` that holds no whole number.
    """
    points = {float(e) for e in edges}
    for s in spikes:
        if not edges[0] <= s <= edges[-1]:
            continue
        after = s + 1.0 if integer else math.nextafter(s, math.inf)
        if integer:
            points = {p for p in points if not s - 1 < p < s}
        points.update((s, after))
    return sorted(points)


def public_domain(spec: Path) -> list[dict[str, Any]]:
    """Per column of the spec's schema: how to code it on a public domain (never from the rows)."""
    import yaml

    doc = load_spec_doc(spec)
    schema = yaml.safe_load((spec.parent / doc["schema"]).read_text(encoding="utf-8"))
    out = []
    for name, col in schema["columns"].items():
        nullable = bool(col.get("nullable", False))
        if col["type"] == "category":
            cats = [str(c) for c in col["categories"]]
            out.append({"name": name, "kind": "category", "categories": cats, "nullable": nullable,
                        "size": len(cats) + (1 if nullable else 0)})
            continue
        if "min" in col and "max" in col:  # declared bounds (also those of a `mapping: private` column)
            lo, hi = float(col["min"]), float(col["max"])
        else:
            lo, hi = (float(x) for x in col["search_range"])
        integer = col["type"] == "int"
        spikes = [float(s) for s in col.get("spikes", [])]
        if integer and hi - lo + 1 <= MAX_BINS:
            edges = [lo + i - 0.5 for i in range(int(hi - lo) + 2)]  # one bin per integer value (spikes included)
            spikes = []
        elif integer and col.get("bins") == "log":  # declared log bins: lo on its own, then geometric up to hi
            ratio = (hi - lo) ** (1 / (MAX_BINS - 1))
            edges = [lo - 0.5, lo + 0.5, *[lo + ratio**i for i in range(1, MAX_BINS - 1)], hi + 0.5]
        else:
            edges = [lo + (hi - lo) * i / MAX_BINS for i in range(MAX_BINS + 1)]
        edges = with_public_spikes(edges, spikes, integer)
        out.append({"name": name, "kind": "int" if integer else "float", "edges": edges, "nullable": nullable,
                    "size": len(edges) - 1 + (1 if nullable else 0)})
    return out


def encode(table: Any, domain: list[dict[str, Any]]) -> dict[str, Any]:
    """Integer codes 0..size-1 of every column of a pyarrow table (null code last; out-of-domain clipped)."""
    import numpy as np

    codes = {}
    for d in domain:
        col = table.column(d["name"])
        if d["kind"] == "category":
            values = col.to_pylist()
            index = {c: i for i, c in enumerate(d["categories"])}
            null = len(d["categories"]) if d["nullable"] else 0
            codes[d["name"]] = np.array([index.get(v, null) if v is not None else null for v in values],
                                        dtype=np.int64)
        else:
            x = np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)
            edges = np.asarray(d["edges"])
            nbins = len(edges) - 1
            c = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, nbins - 1)
            codes[d["name"]] = np.where(np.isnan(x), nbins if d["nullable"] else c, c).astype(np.int64)
    return codes


def decode(codes: dict[str, Any], domain: list[dict[str, Any]], seed: int) -> Any:
    """A pyarrow table with the real table's column types from codes; numeric values uniform within the bin."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed + 1_000_003)  # post-processing only
    arrays = {}
    for d in domain:
        c = np.asarray(codes[d["name"]], dtype=np.int64)
        if d["kind"] == "category":
            labels = np.array([*d["categories"], None], dtype=object)
            c = np.where(c >= len(d["categories"]), len(d["categories"]), c)
            arrays[d["name"]] = pa.array(labels[c].tolist(), type=pa.string())
            continue
        edges = np.asarray(d["edges"])
        nbins = len(edges) - 1
        null = c >= nbins
        b = np.clip(c, 0, nbins - 1)
        lo, hi = edges[b], edges[b + 1]
        if d["kind"] == "int":
            low, high = np.ceil(lo), np.ceil(hi) - 1  # integers in [lo, hi)
            high = np.maximum(high, low)
            values = (low + np.floor(rng.random(len(c)) * (high - low + 1))).astype(np.int64)
            arrays[d["name"]] = pa.array(values, type=pa.int64(), mask=null if null.any() else None)
        else:
            values = lo + rng.random(len(c)) * (hi - lo)
            arrays[d["name"]] = pa.array(values, type=pa.float64(), mask=null if null.any() else None)
    return pa.table(arrays)


def real_table(spec: Path, columns: list[str] | None = None) -> Any:
    import pyarrow.parquet as pq

    doc = load_spec_doc(spec)
    return pq.read_table(spec.parent / doc["data"], columns=columns)


# --------------------------------------------------------------------------------------------------------------
# Workers (each runs in its own subprocess; they write the synthetic table and a small meta JSON)
# --------------------------------------------------------------------------------------------------------------

def patch_mbi_sampling() -> None:
    """Work around two bugs of mbi 1.1.0's ``MarkovRandomField.synthetic_data`` (the sampler of MST and AIM).

    smartnoise-synth 1.0.8 pins ``mbi<2``, and mbi 1.1.0's sampler (1) conditions each column on the
    *measured* cliques instead of the junction tree's maximal cliques, and (2) in its default ``round``
    method ranks the rows of each parent group by row position, so two children of the same parents get
    spuriously comonotone values (on Adult at ε=1 MST's tvd2 came out 0.12, worse than independent
    1-ways; relationship|hours-per-week alone 0.41). Both are fixed upstream (ryan112358/mbi#145, "Fix two
    regressions in MarkovRandomField.synthetic_data()"). Here: the model is re-expressed over the maximal
    cliques before sampling (fix 1) and the ``sample`` method (i.i.d. from the model's conditionals, no
    ranks) replaces ``round`` (fix 2). Post-processing only: the privacy guarantee is unchanged.
    """
    from mbi import junction_tree
    from mbi.markov_random_field import MarkovRandomField

    original = MarkovRandomField.synthetic_data
    if getattr(original, "bench_patched", False):
        return

    def synthetic_data(self: Any, rows: int | None = None, method: str = "sample") -> Any:
        jtree, _ = junction_tree.make_junction_tree(self.domain, [set(c) for c in self.cliques])
        maximal = [tuple(node) for node in jtree.nodes]
        model = self.replace(potentials=self.potentials.expand(maximal))
        return original(model, rows, method)

    synthetic_data.bench_patched = True  # type: ignore[attr-defined]
    MarkovRandomField.synthetic_data = synthetic_data


def worker_snsynth(name: str, spec: Path, epsilon: float, delta: float, seed: int, out: Path) -> dict[str, Any]:
    """smartnoise-synth MST or AIM on the public-domain codes (runs in .venv-bench)."""
    import importlib.metadata as md

    import numpy as np
    import pandas as pd
    import pyarrow.parquet as pq
    from snsynth import Synthesizer
    from snsynth.transform import LabelTransformer, TableTransformer

    patch_mbi_sampling()
    np.random.seed(seed)  # noqa: NPY002 -- mbi/snsynth selection and sampling use numpy's global generator; noise is OpenDP's
    domain = public_domain(spec)
    names = [d["name"] for d in domain]
    real = real_table(spec, names)
    codes = encode(real, domain)
    frame = pd.DataFrame({n: codes[n] for n in names})
    # The transformer is fitted on the public domain (every code of every column), never on the rows.
    width = max(d["size"] for d in domain)
    public = pd.DataFrame({d["name"]: np.arange(width) % d["size"] for d in domain})
    transformer = TableTransformer([LabelTransformer(nullable=False) for _ in names])
    transformer.fit(public)
    assert transformer.cardinality == [d["size"] for d in domain], transformer.cardinality
    synth = Synthesizer.create(name, epsilon=float(epsilon), delta=float(delta))
    started = time.perf_counter()
    synth.fit(frame, transformer=transformer)
    fitted = time.perf_counter()
    rows = synth.sample(real.num_rows)
    sampled = time.perf_counter()
    out_frame = pd.DataFrame(rows, columns=names) if not isinstance(rows, pd.DataFrame) else rows
    out_frame.columns = names
    table = decode({n: out_frame[n].to_numpy(dtype=np.int64) for n in names}, domain, seed)
    pq.write_table(table, out)
    return {"fit_s": fitted - started, "sample_s": sampled - fitted, "fit_sample_s": sampled - started,
            "versions": {p: md.version(p) for p in ("smartnoise-synth", "mbi", "opendp", "jax")}}


def worker_independent(spec: Path, epsilon: float, delta: float, seed: int, out: Path) -> dict[str, Any]:
    """Independent noisy 1-ways (project venv, project mechanisms and secure noise)."""
    from fractions import Fraction

    import numpy as np
    import pyarrow.parquet as pq

    sys.path.insert(0, str(ROOT))
    from dprelease.dp.accounting.budget import ZCDPBudget, budget_total
    from dprelease.dp.mechanisms.noise import DiscreteGaussian
    from dprelease.dp.mechanisms.random import secure_noise, synthetic_generator
    from dprelease.dp.synthesis.postprocess import project_simplex, round_preserving_sum

    domain = public_domain(spec)
    names = [d["name"] for d in domain]
    real = real_table(spec, names)
    started = time.perf_counter()
    codes = encode(real, domain)
    rho = budget_total("zcdp", Fraction(str(epsilon)), Fraction(str(delta))).rho  # type: ignore[union-attr]
    mechanism = DiscreteGaussian(l2_sensitivity=1, budget=ZCDPBudget(rho / len(domain)))
    noise = secure_noise()
    noisy = {d["name"]: mechanism.sample(np.bincount(codes[d["name"]], minlength=d["size"]), noise)
             for d in domain}
    weights = {n: 1.0 / len(v) for n, v in noisy.items()}  # equal noise per cell: a sum's variance ∝ its cells
    total = max(0, round(sum(weights[n] * float(v.sum()) for n, v in noisy.items()) / sum(weights.values())))
    rng = synthetic_generator(seed)
    synthetic = {}
    for n, v in noisy.items():
        counts = round_preserving_sum(project_simplex(v.astype(np.float64), float(total)), total)
        synthetic[n] = rng.permutation(np.repeat(np.arange(len(counts)), counts))
    table = decode(synthetic, domain, seed)
    elapsed = time.perf_counter() - started
    pq.write_table(table, out)
    return {"fit_sample_s": elapsed, "rows": int(total), "sigma": mechanism.sigma()}


def worker_coded(spec: Path, seed: int, out: Path) -> dict[str, Any]:
    """The real rows through the peers' public coding and back, without noise (not private): what the coding
    alone costs MST, AIM and the independent baseline."""
    import pyarrow.parquet as pq

    domain = public_domain(spec)
    real = real_table(spec, [d["name"] for d in domain])
    started = time.perf_counter()
    table = decode(encode(real, domain), domain, seed)
    elapsed = time.perf_counter() - started
    pq.write_table(table, out)
    return {"fit_sample_s": elapsed}


def worker_bootstrap(spec: Path, seed: int, out: Path) -> dict[str, Any]:
    import numpy as np
    import pyarrow.parquet as pq

    real = real_table(spec)
    started = time.perf_counter()
    rng = np.random.default_rng(seed)  # not private: the floor
    table = real.take(rng.integers(0, real.num_rows, real.num_rows))
    elapsed = time.perf_counter() - started
    pq.write_table(table, out)
    return {"fit_sample_s": elapsed}


def _quiet_prefect_context() -> None:
    """Let the tasks' undecorated functions run outside a Prefect run (their only need is a logger)."""
    import logging

    import dprelease.tasks.bounds
    import dprelease.tasks.cross
    import dprelease.tasks.ingest
    import dprelease.tasks.measure
    import dprelease.tasks.plan
    import dprelease.tasks.synthesize

    logger = logging.getLogger("peers_adult")
    for module in (dprelease.tasks.plan, dprelease.tasks.bounds, dprelease.tasks.ingest, dprelease.tasks.measure,
                   dprelease.tasks.synthesize, dprelease.tasks.cross):
        if hasattr(module, "get_run_logger"):
            module.get_run_logger = lambda: logger  # type: ignore[attr-defined]


def worker_core_prepare(spec: Path, seed: int, work: Path) -> dict[str, Any]:
    """Untimed: the release path up to the noisy measurements (:func:`measure_core`), pickled."""
    sys.path.insert(0, str(ROOT))
    from dprelease.flows.settings import configure

    configure()
    _quiet_prefect_context()
    with (work / "measured.pickle").open("wb") as fh:
        pickle.dump(measure_core(spec, seed, work), fh)
    return {}


def measure_core(spec: Path, seed: int, work: Path) -> dict[str, Any]:
    """The release path up to the noisy measurements, in ``work``: plan, bounds, mappings, measured, staging.

    Plan, bounds (SVT), private mappings and quantile bins (the bounds stage's two other parts, when the plan
    has them), measurement on those bins: the flow's own calls in the flow's order, through ``.fn`` (after
    :func:`_quiet_prefect_context`).
    """
    from dprelease.schemas.spec import load_spec
    from dprelease.tasks.bounds import find_bins, find_bounds, find_mappings
    from dprelease.tasks.measure import measure_marginals
    from dprelease.tasks.plan import plan_budget
    from dprelease.tasks.staging import create_staging, create_steward, staging_dir, steward_dir

    ledger = str(work / "ledger.sqlite")
    plan, _ = plan_budget.fn(load_spec(spec), f"core-{seed}", ledger, seed)
    steward = create_steward(steward_dir(work / "internal", plan.dataset, plan.release_id))
    staging = create_staging(staging_dir(work / "out", plan.dataset, plan.release_id), steward)
    bounds = find_bounds.fn(plan, ledger)
    mappings = find_mappings.fn(plan, ledger) if plan.mappings else []
    bins = find_bins.fn(plan, bounds, ledger) if plan.bins else []
    measured = measure_marginals.fn(plan, bounds, ledger, str(steward), None, {b.column: b.edges for b in bins})
    return {"plan": plan, "bounds": bounds, "mappings": mappings, "measured": measured, "staging": str(staging)}


def dprelease_core(work: Path) -> dict[str, Any]:
    """THE SYNTHESIS CORE ALONE: estimation + sampling on noisy measurements produced by the release path.

    Runs the flow's own ``estimate_model`` and ``sample_synthetic`` task bodies (``.fn``, outside Prefect),
    so it always benchmarks what the flow runs (with the private mappings the bounds stage released). Only
    these two calls are timed, and between them the cross stage when the plan has one (``cross_pairs``: it
    reads the rows and draws noise, but it is part of what the synthesis costs).
    """
    sys.path.insert(0, str(ROOT))
    from dprelease.flows.settings import configure

    configure()
    _quiet_prefect_context()
    from dprelease.tasks.cross import measure_cross_pairs
    from dprelease.tasks.synthesize import estimate_model, sample_synthetic

    with (work / "measured.pickle").open("rb") as fh:
        state = pickle.load(fh)
    plan, bounds, measured, staging = state["plan"], state["bounds"], state["measured"], state["staging"]
    started = time.perf_counter()
    estimate = estimate_model.fn(plan, bounds, measured)
    cross = measure_cross_pairs.fn(plan, str(work / "ledger.sqlite"), estimate) if plan.cross is not None else None
    estimated = time.perf_counter()
    synthesis = sample_synthetic.fn(plan, bounds, estimate, staging, "benchmark", state["mappings"], cross)
    sampled = time.perf_counter()
    shutil.copy(Path(staging) / synthesis.table_file, work / "synthetic.parquet")
    return {"estimate_s": estimated - started, "sample_s": sampled - estimated, "fit_sample_s": sampled - started,
            "rows": int(synthesis.rows)}


def worker_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="peers_adult.py worker")
    parser.add_argument("system")
    parser.add_argument("--spec", required=True)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=DELTA)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", required=True)
    args = parser.parse_args(argv)
    spec, work = Path(args.spec), Path(args.work)
    out = work / "synthetic.parquet"
    if args.system in PEERS:
        meta = worker_snsynth(args.system, spec, args.epsilon, args.delta, args.seed, out)
    elif args.system == "independent":
        meta = worker_independent(spec, args.epsilon, args.delta, args.seed, out)
    elif args.system == "bootstrap":
        meta = worker_bootstrap(spec, args.seed, out)
    elif args.system == "coded":
        meta = worker_coded(spec, args.seed, out)
    elif args.system == "core-prepare":
        meta = worker_core_prepare(spec, args.seed, work)
    elif args.system == "dprelease-core":
        meta = dprelease_core(work)
    else:
        raise SystemExit(f"unknown worker {args.system}")
    (work / "meta.json").write_text(json.dumps(meta), encoding="utf-8")


# --------------------------------------------------------------------------------------------------------------
# Driver (project venv)
# --------------------------------------------------------------------------------------------------------------

GNU_TIME = Path("/usr/bin/time")


def run_measured(cmd: list[str], *, cwd: Path, env: dict[str, str], log: Path,
                 timeout: float | None = None) -> dict[str, Any]:
    """Run one command in its own process group; wall time, peak RSS and exit status.

    Peak RSS comes from GNU time (``/usr/bin/time -f %M``), i.e. from ``wait4`` in a small C parent: on
    Linux a child's ``ru_maxrss`` starts from the RSS of the process that forked it (the high-water mark
    survives exec), so ``wait4`` straight from this driver (~270 MB, it holds the real table) would floor
    every small run at the driver's size. Without GNU time, ``os.wait4`` here is the fallback.
    """
    rss_file = log.with_suffix(".rss")
    if GNU_TIME.exists():
        cmd = [str(GNU_TIME), "-f", "%M", "-o", str(rss_file), *cmd]
    started = time.perf_counter()
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        timed_out = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if timeout is not None and time.perf_counter() - started > timeout:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)  # our own child's process group
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.2)
    proc.returncode = os.waitstatus_to_exitcode(status)  # so Popen does not try to reap it again
    peak_kb = float(usage.ru_maxrss)
    try:
        peak_kb = float(rss_file.read_text(encoding="utf-8").strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        pass
    return {"wall_s": time.perf_counter() - started, "peak_rss_mb": peak_kb / 1024.0,
            "exit": proc.returncode, "timed_out": timed_out}


def spec_at(source: Path, epsilon: float, seed: int, target: Path) -> Path:
    """A copy of the spec (with its schema and data) whose budget is ε (cap and lifetime raised with it)."""
    import yaml

    doc = load_spec_doc(source)
    original = float(doc["budget"]["epsilon"])
    scale = epsilon / original
    doc["budget"]["epsilon"] = epsilon
    doc["budget"]["delta"] = DELTA
    for key in ("release_cap", "lifetime_budget"):
        if key in doc:
            doc[key]["epsilon"] = max(float(doc[key]["epsilon"]), float(doc[key]["epsilon"]) * scale, epsilon)
    doc["seed"] = seed
    target.mkdir(parents=True, exist_ok=True)
    for key in ("schema", "data"):
        if not (target / doc[key]).exists():
            (target / doc[key]).symlink_to((source.parent / doc[key]).resolve())
    path = target / source.name
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class Evaluator:
    """The project's yardstick against the real table, loaded once."""

    def __init__(self, spec: Path) -> None:
        sys.path.insert(0, str(ROOT))
        from dprelease.schemas.spec import load_spec
        from dprelease.tasks.ingest import read_table

        loaded = load_spec(str(spec))
        self.columns = list(loaded.schema.names)
        self.real = read_table(loaded.data, self.columns)

    def __call__(self, synthetic_file: Path) -> dict[str, Any]:
        import pyarrow.parquet as pq

        from dprelease.quality.utility import utility

        synthetic = pq.read_table(synthetic_file, columns=self.columns)
        report = utility(self.real, synthetic, self.columns)
        return {"tvd1": report.tvd1, "tvd2": report.tvd2, "tvd3": report.tvd3, "synthetic_rows": synthetic.num_rows,
                "one_way": report.one_way, "two_way": report.two_way}


_STAMP = r"^(\d\d):(\d\d):(\d\d\.\d+) \| \w+\s+\| "


def flow_timing(log: str) -> tuple[float | None, dict[str, float]]:
    """The release flow's duration and each stage's, from Prefect's log lines.

    The flow runs from "Beginning flow run" to its own "Finished in state"; a stage (task) lasts from
    the end of the previous one (or the flow's start) to its own end, the tasks running one after the
    other. This is every stage of the release with Prefect's orchestration, without the interpreter's
    start, the imports before the flow and the embedded API's start.
    """
    def seconds(match: re.Match[str]) -> float:
        return int(match[1]) * 3600 + int(match[2]) * 60 + float(match[3])

    start = end = None
    stages: dict[str, float] = {}
    previous = None
    for line in log.splitlines():
        stamp = re.match(_STAMP, line)
        if not stamp:
            continue
        if start is None and "Beginning flow run" in line:
            start = previous = seconds(stamp)
        task = re.search(r"Task run '([A-Za-z_]+)-[^']*' - Finished in state", line)
        if task and previous is not None:
            stages[task[1]] = round(seconds(stamp) - previous, 3)
            previous = seconds(stamp)
        if start is not None and re.search(r"Flow run '[^']*' - Finished in state", line):
            end = seconds(stamp)
    if start is None or end is None:
        return None, stages
    return round((end - start) % 86400, 3), stages


def run_one(system: str, spec: Path, epsilon: float, seed: int, tmp: Path, prefect_home: Path,
            evaluate: Evaluator, aim_timeout: float) -> dict[str, Any]:
    work = tmp / f"{system}-{epsilon:g}-{seed}"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    eps_spec = spec_at(spec, epsilon, seed, work / "spec")
    # PYTHONPATH: every process imports dprelease from this checkout, ahead of the venv's editable install
    # (which may point at another worktree), so the flow and the core run the same code as the workers.
    env = dict(os.environ, PREFECT_HOME=str(prefect_home), DPRELEASE_HOME=str(work / "state"),
               PYTHONHASHSEED="0", PYTHONPATH=str(ROOT))
    env.pop("VIRTUAL_ENV", None)
    row: dict[str, Any] = {"system": system, "spec": str(spec.relative_to(ROOT)) if spec.is_relative_to(ROOT)
                           else str(spec), "epsilon": epsilon, "delta": DELTA, "seed": seed, "commit": code_commit()}
    me = str(Path(__file__).resolve())
    if system == "dprelease-flow":
        cmd = [str(PROJECT_CLI), "release", str(eps_spec), "--out", str(work / "out"),
               "--ledger", str(work / "ledger.sqlite"), "--internal", str(work / "internal"),
               "--release-id", f"bench-{epsilon:g}-{seed}"]
        m = run_measured(cmd, cwd=work, env=env, log=work / "log.txt")
    elif system == "dprelease-core":
        prep = run_measured([str(PROJECT_PY), me, "worker", "core-prepare", "--spec", str(eps_spec),
                             "--epsilon", str(epsilon), "--seed", str(seed), "--work", str(work)],
                            cwd=work, env=env, log=work / "prepare-log.txt")
        if prep["exit"] != 0:
            row.update(status="failed", error=_tail(work / "prepare-log.txt"))
            return row
        row["prepare_wall_s"] = prep["wall_s"]
        m = run_measured([str(PROJECT_PY), me, "worker", system, "--spec", str(eps_spec), "--epsilon", str(epsilon),
                          "--seed", str(seed), "--work", str(work)], cwd=work, env=env, log=work / "log.txt")
    else:
        python = BENCH_PY if system in PEERS else PROJECT_PY
        if system in PEERS:  # the peers' venv imports nothing of this checkout
            env.pop("PYTHONPATH")
        m = run_measured([str(python), me, "worker", system, "--spec", str(eps_spec), "--epsilon", str(epsilon),
                          "--delta", str(DELTA), "--seed", str(seed), "--work", str(work)],
                         cwd=work, env=env, log=work / "log.txt", timeout=aim_timeout if system == "aim" else None)
    row.update(process_wall_s=m["wall_s"], peak_rss_mb=m["peak_rss_mb"])
    if m["timed_out"]:
        row.update(status="did not finish", timeout_s=aim_timeout)
        return row
    if m["exit"] != 0:
        row.update(status="failed", exit=m["exit"], error=_tail(work / "log.txt"))
        return row
    if system == "dprelease-flow":
        found = sorted((work / "internal").glob("*/*/utility.json"))  # the steward-only internal report
        published = sorted((work / "out").glob("*/*/manifest.json"))
        if not found or not published:
            row.update(status="failed", error="no published release or no internal utility.json\n"
                       + _tail(work / "log.txt"))
            return row
        report = json.loads(found[0].read_text(encoding="utf-8"))
        row.update(tvd1=report["tvd1"], tvd2=report["tvd2"], tvd3=report["tvd3"], one_way=report.get("one_way"),
                   two_way=report["two_way"], time_s=m["wall_s"])
        flow_s, stages = flow_timing((work / "log.txt").read_text(encoding="utf-8", errors="replace"))
        if flow_s is not None:
            row.update(flow_s=flow_s, fit_sample_s=flow_s, stages_s=stages)
        rows_file = sorted((published[0].parent / "synthetic").glob("*.parquet"))
        if rows_file:
            import pyarrow.parquet as pq

            row["synthetic_rows"] = pq.read_metadata(rows_file[0]).num_rows
    else:
        meta = json.loads((work / "meta.json").read_text(encoding="utf-8"))
        row.update(meta)
        row.update(evaluate(work / "synthetic.parquet"))
        # The time the table reports: the whole process, except for the core (estimation + sampling only).
        row["time_s"] = meta["fit_sample_s"] if system == "dprelease-core" else m["wall_s"]
    row["status"] = "ok"
    return row


def code_commit() -> str:
    """The checkout's commit (short), with ``+dirty`` when a tracked file outside the results differs from it."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!benchmarks/results")
    return head + ("+dirty" if dirty else "")


def load_rows(path: Path = RESULTS) -> list[dict[str, Any]]:
    if path.exists():
        return list(json.loads(path.read_text(encoding="utf-8")).get("runs", []))
    return []


def save_rows(rows: list[dict[str, Any]], path: Path = RESULTS) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "benchmark": "benchmarks/peers_adult.py",
        "machine": {"cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "yardstick": "dprelease.quality.utility.utility (16 quantile bins, all 1-/2-way, 300 sampled 3-way marginals)",
        "runs": rows,
    }
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    tmp.replace(path)


def merge(rows: list[dict[str, Any]], new: dict[str, Any]) -> list[dict[str, Any]]:
    key = (new["system"], new["spec"], new["epsilon"], new["seed"])
    return [r for r in rows if (r["system"], r["spec"], r["epsilon"], r["seed"]) != key] + [new]


def _fmt(values: list[float], digits: int = 3) -> str:
    if not values:
        return "–"
    mean = statistics.fmean(values)
    if len(values) == 1:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def dataset_of(spec: str) -> str:
    """The table a row is about: the folder of its spec (``examples/adult``), shared by every spec there."""
    return str(Path(spec).parent)


def row_name(row: dict[str, Any]) -> str:
    """A system's name in the tables, with the spec's file name when it is not the folder's ``release.yaml``."""
    name = Path(row["spec"]).name
    return row["system"] if name == "release.yaml" else f"{row['system']} [{name}]"


def reduced(row: dict[str, Any], without: set[str]) -> dict[str, Any]:
    """``row`` with tvd1 and tvd2 recomputed over the marginals that involve none of ``without`` (tvd3 dropped)."""
    if not without or row.get("status") != "ok":
        return row
    one = {c: v for c, v in (row.get("one_way") or {}).items() if c not in without}
    two = {k: v for k, v in (row.get("two_way") or {}).items() if not set(k.split("|")) & without}
    return dict(row, tvd1=statistics.fmean(one.values()) if one else None,
                tvd2=statistics.fmean(two.values()) if two else None, tvd3=None, two_way=two)


def _by_dataset(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(dataset_of(r["spec"]), []).append(r)
    return dict(sorted(out.items()))


def table(rows: list[dict[str, Any]], without: set[str] = frozenset()) -> str:
    """Per dataset (spec folder), system and ε: mean (min–max) over the seeds of tvd1/2/3, time and peak RSS."""
    order = {s: i for i, s in enumerate(SYSTEMS)}
    out = []
    for dataset, subset in _by_dataset(rows).items():
        groups: dict[tuple[str, str, float], list[dict[str, Any]]] = {}
        for r in subset:
            groups.setdefault((row_name(r), r["system"], r["epsilon"]), []).append(reduced(r, without))
        ok_mst = {eps: [r for r in rs if r["status"] == "ok"] for (name, system, eps), rs in groups.items()
                  if system == "mst" and name == "mst"}
        mst_time = {eps: statistics.fmean(r["time_s"] for r in rs) for eps, rs in ok_mst.items() if rs}
        mst_fit = {eps: statistics.fmean(r["fit_sample_s"] for r in rs) for eps, rs in ok_mst.items() if rs}
        title = f"### {dataset}" + (f" (tvd1/tvd2 without {', '.join(sorted(without))}; no tvd3)" if without else "")
        lines = [
            title, "",
            "| system | ε | runs | tvd1 | tvd2 | tvd3 | time s | × MST | fit+sample s | × MST fit+sample "
            "| peak RSS MB |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for (name, _system, eps), rs in sorted(groups.items(), key=lambda kv: (kv[0][2], order.get(kv[0][1], 99),
                                                                              kv[0][0])):
            ok = [r for r in rs if r["status"] == "ok"]
            bad = [r["status"] for r in rs if r["status"] != "ok"]
            runs = f"{len(ok)}/{len(rs)}" + (f" ({', '.join(sorted(set(bad)))})" if bad else "")
            if not ok:
                lines.append(f"| {name} | {eps:g} | {runs} | – | – | – | – | – | – | – | "
                             f"{_fmt([r['peak_rss_mb'] for r in rs if 'peak_rss_mb' in r], 0)} |")
                continue
            t = statistics.fmean([r["time_s"] for r in ok])
            fits = [r["fit_sample_s"] for r in ok if r.get("fit_sample_s") is not None]
            f = statistics.fmean(fits) if fits else None
            ratio = f"{t / mst_time[eps]:.2f}" if eps in mst_time else "–"
            fit_ratio = f"{f / mst_fit[eps]:.3f}" if f is not None and eps in mst_fit else "–"
            lines.append(
                f"| {name} | {eps:g} | {runs} | {_fmt([r['tvd1'] for r in ok if r['tvd1'] is not None])} | "
                f"{_fmt([r['tvd2'] for r in ok if r['tvd2'] is not None])} | "
                f"{_fmt([r['tvd3'] for r in ok if r['tvd3'] is not None])} | {t:.1f} | {ratio} | "
                f"{f'{f:.2f}' if f is not None else '–'} | {fit_ratio} | {_fmt([r['peak_rss_mb'] for r in ok], 0)} |")
        out.append("\n".join(lines))
    return "\n\n".join(out)


PAIR_TOLERANCE = 0.005
"""Issue 5: no 2-way marginal noticeably worse than the independent baseline, i.e. for every pair the mean TVD
over the seeds is at most the baseline's mean + this."""


def _pair(key: str) -> str:
    """A pair's key (``a|b``) as a Markdown table can show it."""
    return key.replace("|", " × ")


def pair_means(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Mean TVD of every 2-way marginal over the rows that recorded them."""
    recorded = [r["two_way"] for r in rows if r.get("status") == "ok" and r.get("two_way")]
    if not recorded:
        return {}
    return {k: statistics.fmean(r[k] for r in recorded) for k in recorded[0]}


def pair_excess(rows: list[dict[str, Any]], baseline: list[dict[str, Any]]) -> dict[str, float]:
    """Per pair: mean TVD of ``rows`` minus mean TVD of ``baseline`` (both over their own seeds)."""
    ours, theirs = pair_means(rows), pair_means(baseline)
    return {k: ours[k] - theirs[k] for k in ours if k in theirs}


def pairs_table(rows: list[dict[str, Any]], without: set[str] = frozenset()) -> str:
    """Per dataset, system and ε: how its per-pair mean TVDs compare with the independent baseline's there.

    The baseline is the ``independent`` rows of the same dataset (spec folder) and ε.
    """
    order = {s: i for i, s in enumerate(SYSTEMS)}
    out = []
    for dataset, subset in _by_dataset(rows).items():
        subset = [reduced(r, without) for r in subset]
        groups: dict[tuple[str, str, float], list[dict[str, Any]]] = {}
        for r in subset:
            groups.setdefault((row_name(r), r["system"], r["epsilon"]), []).append(r)
        lines = [
            f"### {dataset}: pairs against independent noisy 1-ways"
            + (f" (without {', '.join(sorted(without))})" if without else ""), "",
            "| system | ε | seeds (ours/indep.) | pairs | pairs worse | pairs worse by > "
            f"{PAIR_TOLERANCE:g} | worst excess (pair) | mean excess |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for (name, system, eps), rs in sorted(groups.items(), key=lambda kv: (kv[0][2], order.get(kv[0][1], 99),
                                                                             kv[0][0])):
            if system in ("independent", "bootstrap", "coded"):
                continue
            baseline = [r for r in subset if r["system"] == "independent" and r["epsilon"] == eps]
            excess = pair_excess(rs, baseline)
            if not excess:
                continue
            worst = max(excess, key=lambda k: excess[k])
            seeds = (f"{sum(1 for r in rs if r.get('two_way'))}/"
                     f"{sum(1 for r in baseline if r.get('two_way'))}")
            lines.append(
                f"| {name} | {eps:g} | {seeds} | {len(excess)} | {sum(v > 0 for v in excess.values())} | "
                f"{sum(v > PAIR_TOLERANCE for v in excess.values())} | {excess[worst]:+.4f} ({_pair(worst)}) | "
                f"{statistics.fmean(excess.values()):+.4f} |")
        out.append("\n".join(lines))
    return "\n\n".join(out)


def worst_pairs(rows: list[dict[str, Any]], without: set[str] = frozenset(), limit: int = 10,
                focus: str = "dprelease-flow") -> str:
    """Per dataset and ε: the pairs on which ``focus`` is worse than the independent baseline by more than
    ``PAIR_TOLERANCE`` (worst first, at most ``limit``; how many in all), with the baseline's mean TVD and every
    system's excess over it on the same pair."""
    order = {s: i for i, s in enumerate(SYSTEMS)}
    out = []
    for dataset, subset in _by_dataset(rows).items():
        subset = [reduced(r, without) for r in subset if Path(r["spec"]).name == "release.yaml"]
        for eps in sorted({r["epsilon"] for r in subset}):
            at = [r for r in subset if r["epsilon"] == eps]
            baseline = pair_means([r for r in at if r["system"] == "independent"])
            systems = sorted({r["system"] for r in at} - {"independent", "bootstrap", "coded"},
                             key=lambda s: order.get(s, 99))
            excess = {s: pair_excess([r for r in at if r["system"] == s],
                                     [r for r in at if r["system"] == "independent"]) for s in systems}
            mine = excess.get(focus, {})
            bad = sorted((k for k, v in mine.items() if v > PAIR_TOLERANCE), key=lambda k: -mine[k])
            if not baseline or not mine:
                continue
            lines = [f"### {dataset}, ε = {eps:g}: {len(bad)} of {len(mine)} pairs where {focus} is worse than "
                     f"independent by > {PAIR_TOLERANCE:g}" + (f" (showing {limit})" if len(bad) > limit else ""), ""]
            if bad:
                lines += ["| pair | independent TVD | " + " | ".join(f"{s} excess" for s in systems) + " |",
                          "|---|---|" + "---|" * len(systems)]
                for k in bad[:limit]:
                    cells = " | ".join(f"{excess[s][k]:+.3f}" if k in excess[s] else "–" for s in systems)
                    lines.append(f"| {_pair(k)} | {baseline[k]:.3f} | {cells} |")
            out.append("\n".join(lines))
    return "\n\n".join(out)


def warm_prefect(prefect_home: Path) -> None:
    """Migrate the shared Prefect home's database once, so no flow run pays for it."""
    env = dict(os.environ, PREFECT_HOME=str(prefect_home))
    sys.path.insert(0, str(ROOT))
    from dprelease.flows.settings import DEFAULTS

    for key, value in DEFAULTS.items():
        env.setdefault(key, value)
    subprocess.run([str(ROOT / ".venv" / "bin" / "prefect"), "server", "database", "upgrade", "-y"], env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", default=str(DEFAULT_SPEC), help="release spec of the dprelease runs (and the "
                        "schema/data every system uses)")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.3, 1.0, 3.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--aim-seeds", type=int, default=1, help="AIM runs the first N seeds only")
    parser.add_argument("--aim-timeout", type=float, default=1800.0, help="seconds per AIM run")
    parser.add_argument("--table", action="store_true", help="only print the tables of the results file")
    parser.add_argument("--without", nargs="+", default=[], metavar="COLUMN",
                        help="tables only: tvd1/tvd2 and pairs over the marginals without these columns")
    parser.add_argument("--pairs", type=int, default=10, help="tables: list at most N of the pairs on which "
                        "dprelease-flow is worse than independent by > PAIR_TOLERANCE, per dataset and ε (0: none)")
    parser.add_argument("--results", default=str(RESULTS), help="the results file (read, and merged into)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, synthetic tables)")
    args = parser.parse_args()
    results = Path(args.results)
    if args.table:
        print_tables(load_rows(results), set(args.without), args.pairs)
        return
    if any(s in PEERS for s in args.systems) and not BENCH_PY.exists():
        raise SystemExit(f"{BENCH_PY} missing: run  bash benchmarks/setup_peers.sh")
    spec = Path(args.spec).resolve()
    tmp = Path(tempfile.mkdtemp(prefix="peers_adult-"))
    print(f"work folder: {tmp}", flush=True)
    try:
        prefect_home = tmp / "prefect"
        if "dprelease-flow" in args.systems:
            warm_prefect(prefect_home)
        evaluate = Evaluator(spec)
        for epsilon in args.epsilons:
            for seed in args.seeds:
                for system in args.systems:
                    if system == "aim" and seed not in args.seeds[: args.aim_seeds]:
                        continue
                    print(f"[{time.strftime('%H:%M:%S')}] {system} ε={epsilon:g} seed={seed} ...", flush=True)
                    row = run_one(system, spec, epsilon, seed, tmp, prefect_home, evaluate, args.aim_timeout)
                    save_rows(merge(load_rows(results), row), results)
                    summary = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()
                               if k in ("status", "tvd1", "tvd2", "tvd3", "time_s", "process_wall_s", "peak_rss_mb")}
                    print(f"    {summary}" + (f"\n    {row.get('error', '')}" if row["status"] == "failed" else ""),
                          flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print()
    print_tables(load_rows(results), set(args.without), args.pairs)


def print_tables(rows: list[dict[str, Any]], without: set[str], pairs: int) -> None:
    print(table(rows, without))
    print()
    print(pairs_table(rows, without))
    if pairs > 0:
        print()
        print(worst_pairs(rows, without, pairs))


if __name__ == "__main__":
    main()
