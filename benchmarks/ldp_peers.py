"""Benchmark: dprelease's local-DP frequency oracles against pure-ldp and multi-freq-ldpy, side by side.

BENCHMARK ONLY: simulated people (``dp.local.simulate``), seeded sources for reproducibility. Nothing here
is a release.

What runs (issue 15, "Benchmark"): k = 26 states drawn with the Zipf(1.1) skew of
:func:`dp.local.simulate.population` (CA ≈ 27 %, KY ≈ 1 %), for every ε in ``--epsilons`` (0.5, ln 3, 2, 4),
every n in ``--sizes`` (10⁴, 10⁵; 10⁶ optional) and every seed in ``--seeds``:

``dprelease``
    :mod:`dp.local.randomizers` GRR, SUE, OUE, OLH (encode from a seeded :class:`dp.local.bits.SeededBits`),
    ``protocol.support`` and :func:`dp.local.estimators.estimate` (unbiased counts), in this process (the
    project venv). ``mse_consistent`` is the same estimate after :func:`dp.local.estimators.consistent`
    (non-negative, summing to n), the fair yardstick for multi-freq-ldpy's clipped output;
    ``seconds_secure`` times the same run with the production source :class:`dp.local.bits.SecureBits`.
``pure-ldp`` (1.2.0)
    DEClient/DEServer (GRR), UEClient/UEServer (SUE; ``use_oue=True`` for OUE), LHClient/LHServer
    (``use_olh=True``): one ``privatise`` + ``aggregate`` per person, then ``estimate_all(range(26))`` with
    no normalisation (unbiased). Run with ``index_mapper=lambda v: v`` (see the bugs below).
``multi-freq-ldpy`` (0.2.5)
    ``GRR_Client``/``GRR_Aggregator_MI``, ``UE_Client``/``UE_Aggregator_MI`` (``optimal=False`` for SUE,
    ``True`` for OUE), ``LH_Client``/``LH_Aggregator_MI`` (``optimal=True``). Its MI estimator clips negative
    estimates to 0 and renormalises to sum 1 (biased; no unbiased estimate is exposed), so its MSE is that
    of the clipped shares: compare it with dprelease's ``mse_consistent`` as well as ``mse``. Its numba
    clients are compiled (one warm-up call each) before any timing.

The peers run in their own venv (``.venv-ldp-peers``, ``benchmarks/setup_ldp_peers.sh``) as a subprocess of
this script (``--worker``), one per (n, seed), reading the very same population from a temporary ``.npy``
and answering in JSON; only numpy and the peers are imported there. Every system gets the same people.

Metric: the mean over the 26 states of (estimated share − true share)², true share = the sampled
population's own count / n; ``theory`` is the exact variance of the unbiased estimator (Wang, Blocki, Li,
Jha 2017 with the c_v term, :func:`dp.local.estimators.exact_variance`) / n², averaged over the states.
Time: encode + aggregate + estimate for all n people, wall clock in-process (no interpreter start or
imports). The peers' APIs take one person at a time (a Python loop over n, as their own simulations do);
dprelease's encoders are vectorised over the population, so the time ratio is the cost of simulating or
aggregating a population, not of one device's report. The table shows medians over the seeds and each
peer's ratio to dprelease (> 1: the peer is worse / slower).

Peer bugs hit (also recorded in the results file, ``meta.peer_bugs``):

* pure-ldp's default ``index_mapper`` is ``lambda x: x - 1`` (it assumes 1-indexed data). On 0-indexed
  codes value 0 becomes index −1: the unary encoding and GRR servers silently count it in the *last* slot
  (numpy's negative index), so their raw ``estimated_data`` array is rotated by one, and the local-hashing
  client hashes the label "-1", which the server never hashes: the most common state's reports support no
  value and its estimate is ~0. ``--bug-demo`` measures this (``bug_demo`` in the results).
* Both peers call ``xxhash.xxh32(str(v), seed=...)`` with a str; xxhash ≥ 4 raises "TypeError: Strings must
  be encoded before hashing", so every OLH client and server of both packages crashes with the xxhash pip
  installs by default: pinned to xxhash 3.8.2. Their OLH seeds run up to ``sys.maxsize`` but xxh32 keeps
  only the low 32 bits (harmless for accuracy).
* pure-ldp does not declare scikit-learn and statsmodels, which ``import pure_ldp.frequency_oracles``
  needs (its RAPPOR server imports them): installed by the setup script.
* multi-freq-ldpy's MI estimator clips and renormalises (biased, see above).

Setup (once)::

    bash benchmarks/setup_ldp_peers.sh                                # .venv-ldp-peers

Run (project venv; ONE benchmark at a time on a shared machine)::

    .venv/bin/python benchmarks/ldp_peers.py                          # n 1e4 1e5 × 4 ε × seeds 0..19 (~11 min)
    .venv/bin/python benchmarks/ldp_peers.py --sizes 1000000 --seeds 0 1 2  # ~3.5 min per seed
    .venv/bin/python benchmarks/ldp_peers.py --table                  # Markdown table from the results file

Runs are merged into ``benchmarks/results/ldp_peers.json`` (a row per system × protocol × n × ε × seed; a
re-run replaces its rows), so the grid can be filled in several sittings.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PEER_PY = Path(os.environ.get("LDP_PEERS_PYTHON", str(ROOT / ".venv-ldp-peers" / "bin" / "python")))
RESULTS = ROOT / "benchmarks" / "results" / "ldp_peers.json"
K = 26
EPSILONS = (0.5, math.log(3), 2.0, 4.0)
SIZES = (10_000, 100_000)
SEEDS = tuple(range(20))
PROTOCOLS = ("GRR", "SUE", "OUE", "OLH")
PEERS = ("pure-ldp", "multi-freq-ldpy")
SYSTEMS = ("dprelease", *PEERS)

PEER_BUGS = [
    "pure-ldp 1.2.0: default index_mapper is `lambda x: x - 1`; 0-indexed data is shifted silently (value 0 -> "
    "index -1: GRR/UE count it in the last slot, so the raw estimated_data array is rotated by one; LH hashes "
    "the label '-1', which its server never hashes, so value 0 is estimated ~0). Benchmarked with "
    "index_mapper=lambda v: v; see bug_demo.",
    "pure-ldp 1.2.0 and multi-freq-ldpy 0.2.5: xxhash.xxh32(str(v), seed=...) raises 'TypeError: Strings must "
    "be encoded before hashing' with xxhash >= 4 (every OLH client and server crashes); pinned xxhash 3.8.2.",
    "pure-ldp 1.2.0: scikit-learn and statsmodels are undeclared dependencies of `import "
    "pure_ldp.frequency_oracles` (its RAPPOR server imports them); installed by setup_ldp_peers.sh.",
    "multi-freq-ldpy 0.2.5: the MI estimators clip negative estimates to 0 and renormalise to sum 1 (biased); "
    "compare with dprelease's mse_consistent.",
]


def _rng_seed(seed: int, protocol: str, epsilon: float) -> int:
    """A per-cell seed for the randomizers (the population's seed is the run's seed)."""
    return 1_000_003 * seed + 1_009 * PROTOCOLS.index(protocol) + round(1000 * epsilon)


# ---------------------------------------------------------------------------------------------------------
# Peer worker (runs in .venv-ldp-peers: imports only numpy and the peers)
# ---------------------------------------------------------------------------------------------------------


def _pure_ldp(protocol: str, epsilon: float, mapper: Callable[[int], int] | None) -> tuple[Any, Any]:
    from pure_ldp.frequency_oracles import DEClient, DEServer, LHClient, LHServer, UEClient, UEServer

    if protocol == "GRR":
        return DEClient(epsilon, K, index_mapper=mapper), DEServer(epsilon, K, index_mapper=mapper)
    if protocol in ("SUE", "OUE"):
        oue = protocol == "OUE"
        return (UEClient(epsilon, K, use_oue=oue, index_mapper=mapper),
                UEServer(epsilon, K, use_oue=oue, index_mapper=mapper))
    return (LHClient(epsilon, K, use_olh=True, index_mapper=mapper),
            LHServer(epsilon, K, use_olh=True, index_mapper=mapper))


def _run_pure_ldp(values: list[int], protocol: str, epsilon: float) -> list[float]:
    client, server = _pure_ldp(protocol, epsilon, lambda v: v)
    for v in values:
        server.aggregate(client.privatise(v))
    counts = server.estimate_all(range(K), suppress_warnings=True, normalization=0)
    return [float(c) / len(values) for c in counts]


def _run_mfl(values: list[int], protocol: str, epsilon: float) -> list[float]:
    from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Aggregator_MI, GRR_Client
    from multi_freq_ldpy.pure_frequency_oracles.LH import LH_Aggregator_MI, LH_Client
    from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Aggregator_MI, UE_Client

    if protocol == "GRR":
        shares = GRR_Aggregator_MI([GRR_Client(v, K, epsilon) for v in values], K, epsilon)
    elif protocol in ("SUE", "OUE"):
        oue = protocol == "OUE"
        shares = UE_Aggregator_MI([UE_Client(v, K, epsilon, oue) for v in values], epsilon, oue)
    else:
        shares = LH_Aggregator_MI([LH_Client(v, K, epsilon, True) for v in values], K, epsilon, True)
    return [float(s) for s in shares]


def _seed_peers(seed: int) -> None:
    """Seed every generator the peers draw from: random, numpy's legacy global one, and numba's own."""
    import random

    import numba

    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002  (the peers draw from numpy's legacy global generator)

    @numba.njit
    def _numba_seed(s: int) -> None:
        np.random.seed(s)  # noqa: NPY002  (numba's jitted code keeps a generator of its own)

    _numba_seed(seed % 2**32)


def _warm_up_mfl() -> float:
    """Compile multi-freq-ldpy's numba clients once, outside any timing; returns the compile time."""
    from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Client
    from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Client

    start = time.perf_counter()
    GRR_Client(0, K, 1.0)
    UE_Client(0, K, 1.0, True)
    UE_Client(0, K, 1.0, False)
    return time.perf_counter() - start


def peer_worker(data: Path, epsilons: list[float], seed: int, systems: list[str], out: Path) -> None:
    """Run the peers on the population in ``data`` and write their shares and times to ``out`` (JSON)."""
    import warnings

    warnings.simplefilter("ignore")  # pure-ldp warns on every estimate at n < 10⁴ or ε < 1
    values = [int(v) for v in np.load(data)]
    start = time.perf_counter()
    import multi_freq_ldpy.pure_frequency_oracles.LH  # noqa: F401
    import pure_ldp.frequency_oracles  # noqa: F401  (imports outside any timing: pure-ldp's pulls sklearn)

    meta: dict[str, Any] = {"peer_import_seconds": time.perf_counter() - start,
                            "numba_compile_seconds": _warm_up_mfl() if "multi-freq-ldpy" in systems else None}
    rows = []
    for system in systems:
        run = _run_pure_ldp if system == "pure-ldp" else _run_mfl
        for protocol in PROTOCOLS:
            for epsilon in epsilons:
                _seed_peers(_rng_seed(seed, protocol, epsilon))
                start = time.perf_counter()
                shares = run(values, protocol, epsilon)
                rows.append({"system": system, "protocol": protocol, "epsilon": epsilon,
                             "seconds": time.perf_counter() - start, "shares": shares})
    out.write_text(json.dumps({"meta": meta, "rows": rows}), encoding="utf-8")


def bug_demo_worker(data: Path, epsilon: float, seed: int, out: Path) -> None:
    """pure-ldp with its default index_mapper on 0-indexed codes: what a user who trusts the defaults gets."""
    import warnings

    warnings.simplefilter("ignore")
    values = [int(v) for v in np.load(data)]
    rows = []
    for protocol in PROTOCOLS:
        _seed_peers(_rng_seed(seed, protocol, epsilon))
        client, server = _pure_ldp(protocol, epsilon, None)  # None: pure-ldp's default, lambda x: x - 1
        for v in values:
            server.aggregate(client.privatise(v))
        by_value = server.estimate_all(range(K), suppress_warnings=True)  # estimate(v) maps v through x - 1
        raw = server.get_estimates  # the estimated_data array, indexed by mapped index
        rows.append({"protocol": protocol, "estimate_all": [float(c) / len(values) for c in by_value],
                     "estimated_data": [float(c) / len(values) for c in raw]})
    out.write_text(json.dumps(rows), encoding="utf-8")


# ---------------------------------------------------------------------------------------------------------
# Driver (project venv)
# ---------------------------------------------------------------------------------------------------------


def _mse(shares: Any, truth: np.ndarray) -> float:
    return float(np.mean((np.asarray(shares, dtype=np.float64) - truth) ** 2))


def _dprelease(x: np.ndarray, truth: np.ndarray, epsilon: float, protocol: str, seed: int) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from dprelease.dp.local.bits import SecureBits, SeededBits
    from dprelease.dp.local.estimators import consistent, estimate, exact_variance
    from dprelease.dp.local.randomizers import GRR, OLH, OUE, SUE

    factory = {"GRR": GRR, "SUE": SUE, "OUE": OUE, "OLH": OLH}[protocol]
    n = x.size

    def run(bits: Any) -> Any:
        oracle = factory(K, epsilon)
        p, q = oracle.support_probabilities
        return estimate(oracle.support(oracle.encode(x, bits)), n, p, q)

    start = time.perf_counter()
    result = run(SeededBits(_rng_seed(seed, protocol, epsilon)))
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    run(SecureBits())
    seconds_secure = time.perf_counter() - start
    oracle = factory(K, epsilon)
    p, q = oracle.support_probabilities
    theory = float(np.mean(exact_variance(n, truth * n, p, q))) / n**2
    return {"mse": _mse(result.counts / n, truth), "mse_consistent": _mse(consistent(result.counts, n) / n, truth),
            "seconds": seconds, "seconds_secure": seconds_secure, "theory": theory,
            "epsilon_stated": oracle.epsilon}


def _peers(path: Path, epsilons: list[float], seed: int, systems: list[str], timeout: float) -> dict[str, Any]:
    out = path.with_suffix(".peers.json")
    cmd = [str(PEER_PY), str(Path(__file__).resolve()), "--worker", "--data", str(path), "--seed", str(seed),
           "--out", str(out), "--systems", *systems, "--epsilons", *map(repr, epsilons)]
    proc = subprocess.run(cmd, cwd=path.parent, capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, "PYTHONPATH": ""})
    if proc.returncode != 0:
        raise RuntimeError(f"peer worker failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return dict(json.loads(out.read_text(encoding="utf-8")))


def _population(n: int, seed: int) -> np.ndarray:
    sys.path.insert(0, str(ROOT))
    from dprelease.dp.local.simulate import population

    return np.asarray(population(n, seed, K), dtype=np.int64)


def measure(sizes: list[int], epsilons: list[float], seeds: list[int], systems: list[str],
            timeout: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    worker_meta: dict[str, Any] = {}
    peers = [s for s in systems if s in PEERS]
    with tempfile.TemporaryDirectory(prefix="ldp-peers-") as tmp:
        for n in sizes:
            for seed in seeds:
                x = _population(n, seed)
                truth = np.bincount(x, minlength=K) / n
                key = {"n": n, "seed": seed}
                if "dprelease" in systems:
                    for protocol in PROTOCOLS:
                        for epsilon in epsilons:
                            row = _dprelease(x, truth, epsilon, protocol, seed)
                            rows.append({"system": "dprelease", "protocol": protocol, "epsilon": epsilon, **key,
                                         **row})
                if peers:
                    path = Path(tmp) / f"population-{n}-{seed}.npy"
                    np.save(path, x)
                    answer = _peers(path, epsilons, seed, peers, timeout)
                    worker_meta.update({k: v for k, v in answer["meta"].items() if v is not None})
                    for r in answer["rows"]:
                        rows.append({"system": r["system"], "protocol": r["protocol"], "epsilon": r["epsilon"],
                                     **key, "mse": _mse(r["shares"], truth), "seconds": r["seconds"],
                                     "share_sum": float(np.sum(r["shares"]))})
                done = [r for r in rows if r["n"] == n and r["seed"] == seed]
                print(f"n={n:>9,} seed {seed}: {len(done)} runs, "
                      f"{sum(r['seconds'] for r in done):.1f} s encode+decode", flush=True)
    return rows, worker_meta


def bug_demo(timeout: float, n: int = 10_000, epsilon: float = math.log(3), seed: int = 0) -> list[dict[str, Any]]:
    x = _population(n, seed)
    truth = np.bincount(x, minlength=K) / n
    with tempfile.TemporaryDirectory(prefix="ldp-peers-") as tmp:
        path = Path(tmp) / "population.npy"
        np.save(path, x)
        out = Path(tmp) / "bug.json"
        cmd = [str(PEER_PY), str(Path(__file__).resolve()), "--bug-demo", "--data", str(path), "--seed", str(seed),
               "--out", str(out), "--epsilons", repr(epsilon)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                              env={**os.environ, "PYTHONPATH": ""})
        if proc.returncode != 0:
            raise RuntimeError(f"bug demo failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        answer = json.loads(out.read_text(encoding="utf-8"))
    return [{"protocol": r["protocol"], "n": n, "epsilon": epsilon, "seed": seed,
             "true_share_value_0": float(truth[0]), "true_share_value_1": float(truth[1]),
             "estimate_all_value_0": r["estimate_all"][0], "estimated_data_index_0": r["estimated_data"][0],
             "mse_estimate_all": _mse(r["estimate_all"], truth), "mse_estimated_data": _mse(r["estimated_data"], truth)}
            for r in answer]


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    cells: dict[tuple[str, int, float], dict[str, list[dict[str, Any]]]] = {}
    for r in rows:
        cells.setdefault((r["protocol"], r["n"], r["epsilon"]), {}).setdefault(r["system"], []).append(r)
    out = []
    for (protocol, n, epsilon), by_system in sorted(cells.items(),
                                                    key=lambda c: (PROTOCOLS.index(c[0][0]), c[0][2], c[0][1])):
        entry: dict[str, Any] = {"protocol": protocol, "n": n, "epsilon": epsilon}
        for system, runs in by_system.items():
            entry[system] = {"seeds": len(runs), "mse": statistics.median(r["mse"] for r in runs),
                             "seconds": statistics.median(r["seconds"] for r in runs)}
            if system == "dprelease":
                entry[system].update(mse_consistent=statistics.median(r["mse_consistent"] for r in runs),
                                     seconds_secure=statistics.median(r["seconds_secure"] for r in runs),
                                     theory=statistics.median(r["theory"] for r in runs))
        base = entry.get("dprelease")
        for peer in PEERS:
            if base and peer in entry:
                entry[peer]["mse_ratio"] = entry[peer]["mse"] / base["mse"]
                entry[peer]["seconds_ratio"] = entry[peer]["seconds"] / base["seconds"]
        out.append(entry)
    return out


def _load() -> dict[str, Any]:
    if RESULTS.exists():
        return dict(json.loads(RESULTS.read_text(encoding="utf-8")))
    return {"meta": {}, "runs": []}


def _save(doc: dict[str, Any]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    tmp = RESULTS.with_suffix(".json.tmp")
    def compact(run: dict[str, Any]) -> str:  # 6 significant digits; epsilon is a merge key: kept exact
        return json.dumps({k: float(f"{v:.6g}") if isinstance(v, float) and k != "epsilon" else v
                           for k, v in run.items()}, separators=(",", ":"))

    runs = ",\n".join("    " + compact(r) for r in doc.get("runs", []))
    text = json.dumps({**doc, "runs": "RUNS"}, indent=2).replace('"RUNS"', "[\n" + runs + "\n  ]")
    tmp.write_text(text + "\n", encoding="utf-8")  # one run per line: the file stays small and diffable
    tmp.replace(RESULTS)


def _versions() -> dict[str, str]:
    code = ("import importlib.metadata as m, json, sys; print(json.dumps({p: m.version(p) for p in "
            "('pure-ldp', 'multi-freq-ldpy', 'xxhash', 'numpy', 'numba')} | {'python': sys.version.split()[0]}))")
    proc = subprocess.run([str(PEER_PY), "-c", code], capture_output=True, text=True, check=False)
    peers = json.loads(proc.stdout) if proc.returncode == 0 else {"error": proc.stderr[-500:]}
    return {"project_python": platform.python_version(), "project_numpy": np.__version__,
            **{f"peer_{k}": v for k, v in peers.items()}}


def _num(x: float) -> str:
    return f"{x:.2e}"


def table(doc: dict[str, Any]) -> str:
    lines = ["| protocol | ε | n | theory MSE | dprelease MSE | dprelease consistent | pure-ldp MSE (×) "
             "| multi-freq-ldpy MSE (×) | dprelease s | pure-ldp s (×) | multi-freq-ldpy s (×) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in doc["summary"]:
        dp = e.get("dprelease")
        cols = [e["protocol"], "ln 3" if abs(e["epsilon"] - math.log(3)) < 1e-12 else f"{e['epsilon']:g}",
                f"{e['n']:.0e}".replace("e+0", "e"),
                _num(dp["theory"]) if dp else "–", _num(dp["mse"]) if dp else "–",
                _num(dp["mse_consistent"]) if dp else "–"]
        for peer in PEERS:
            p = e.get(peer)
            cols.append(f"{_num(p['mse'])} ({p['mse_ratio']:.2f}×)" if p and dp else (_num(p["mse"]) if p else "–"))
        cols.append(f"{dp['seconds']:.3g}" if dp else "–")
        for peer in PEERS:
            p = e.get(peer)
            cols.append(f"{p['seconds']:.3g} ({p['seconds_ratio']:.0f}×)" if p and dp
                        else (f"{p['seconds']:.3g}" if p else "–"))
        lines.append("| " + " | ".join(cols) + " |")
    seeds = {n: len({r["seed"] for r in doc["runs"] if r["n"] == n}) for n in sorted({r["n"] for r in doc["runs"]})}
    lines.append("")
    lines.append("MSE of the 26 shares, medians over the seeds (" + ", ".join(f"n {n:,}: {c}" for n, c in
                                                                          seeds.items()) + "); "
                 "(×) = peer / dprelease. Times: encode + "
                 "aggregate + estimate for all n, seconds. 'dprelease consistent' = the same estimates projected "
                 "to non-negative shares summing to 1 (compare with multi-freq-ldpy's clipped, renormalised MI).")
    if doc.get("bug_demo"):
        lines += ["", "pure-ldp with its default index_mapper (x − 1) on 0-indexed codes "
                  f"(n {doc['bug_demo'][0]['n']}, ε ln 3): true share of value 0 (CA) "
                  f"{doc['bug_demo'][0]['true_share_value_0']:.3f}, of value 1 (TX) "
                  f"{doc['bug_demo'][0]['true_share_value_1']:.3f}. estimate_all(range(k)) maps each value through "
                  "x − 1 (right for GRR/UE, wrong for OLH: value 0 is lost); the raw estimated_data array is "
                  "rotated by one (its slot 0 holds value 1).", "",
                  "| protocol | estimate_all(range(k))[0] | estimated_data[0] | MSE estimate_all | "
                  "MSE estimated_data |", "|---|---|---|---|---|"]
        for b in doc["bug_demo"]:
            lines.append(f"| {b['protocol']} | {b['estimate_all_value_0']:.3f} | {b['estimated_data_index_0']:.3f} | "
                         f"{_num(b['mse_estimate_all'])} | {_num(b['mse_estimated_data'])} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--epsilons", type=float, nargs="+", default=list(EPSILONS))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--peer-timeout", type=float, default=3600.0, help="seconds per peer subprocess")
    parser.add_argument("--table", action="store_true", help="print the Markdown table from the results file")
    parser.add_argument("--no-bug-demo", action="store_true", help="skip the index_mapper demonstration")
    # worker modes (run by the driver in the peers' venv)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bug-demo", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        peer_worker(args.data, args.epsilons, args.seed, args.systems, args.out)
        return
    if args.bug_demo:
        bug_demo_worker(args.data, args.epsilons[0], args.seed, args.out)
        return
    if args.table:
        print(table(_load()))
        return

    if any(s in PEERS for s in args.systems) and not PEER_PY.exists():
        sys.exit(f"{PEER_PY} not found: run `bash benchmarks/setup_ldp_peers.sh` first")
    start = time.perf_counter()
    rows, worker_meta = measure(args.sizes, args.epsilons, args.seeds, args.systems, args.peer_timeout)
    doc = _load()
    fresh = {(r["system"], r["protocol"], r["n"], r["epsilon"], r["seed"]) for r in rows}
    doc["runs"] = [r for r in doc.get("runs", [])
                   if (r["system"], r["protocol"], r["n"], r["epsilon"], r["seed"]) not in fresh] + rows
    doc["summary"] = summarise(doc["runs"])
    doc["meta"] = {**doc.get("meta", {}), "k": K, "population": "dp.local.simulate.population (Zipf 1.1, 26 states)",
                   "metric": "mean over the 26 states of (estimated share - true share)^2; medians over seeds",
                   "cpus": os.cpu_count(), "machine": platform.machine(), **_versions(), **worker_meta,
                   "peer_bugs": PEER_BUGS}
    if not args.no_bug_demo and "pure-ldp" in args.systems:
        doc["bug_demo"] = bug_demo(args.peer_timeout)
    _save(doc)
    print(f"done in {time.perf_counter() - start:.0f} s; wrote {RESULTS.relative_to(ROOT)}\n")
    print(table(doc))


if __name__ == "__main__":
    main()
