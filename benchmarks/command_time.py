"""Benchmark: wall and CPU time of the two everyday commands on the Adult example, as a user runs them.

Run:  .venv/bin/python benchmarks/command_time.py [--runs 5] [--only release|check]
          [--out benchmarks/results/command_time.json] [--baseline OTHER_CHECKOUT]

Each run is a fresh process: ``python -m dprelease release examples/adult/release.yaml --out DIR
--ledger L.sqlite`` (the embedded Prefect API on SQLite; a new output folder and a new ledger every
run, so every run is a complete first release) and ``python -m dprelease check schema.yaml
adult.parquet``. ``DPRELEASE_HOME`` is one temporary folder for all runs; one release before the
timed runs migrates Prefect's database there, as the first ``make example`` of a checkout does.

Printed per command: the median and each run's wall time, and user + system CPU seconds of the
process and the children it waited for (the embedded server included; the same figures as
``/usr/bin/time -f "%e %U %S"``); per release stage, the median of the times the stages log
(``stage NAME finished in T s``) and of the time from the start to the flow's first log line
(``boot``: interpreter, imports, preflight, the embedded server's start), and from the flow's end
to the process's (``exit``: stopping the server, the interpreter's exit). The machine's load
average is printed before and after: on a shared machine, compare figures measured back to back.

Before timing, each checkout's own modules are compiled to bytecode (``compileall``), as ``pip
install`` does and as a checkout's first run does: in an environment with ``PYTHONDONTWRITEBYTECODE``
set, every run would otherwise compile the project's modules again (about 0.3 s of CPU), which no
installed command pays.

``--baseline OTHER_CHECKOUT`` (e.g. ``git worktree add ../base main --detach``) times the same
commands of that checkout interleaved with this one's (the order alternating, A B B A ...), so that
a shared machine's load falls on both alike, and prints the ratios of the medians (this / baseline)
of wall time and of CPU time (user + system).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGE = re.compile(r"stage (\w+) finished in ([0-9.]+) s")
FIRST_LOG = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) \| ", re.MULTILINE)
PUBLISHED = re.compile(r"Release published in ([0-9.]+) s")


def timed(argv: list[str], env: dict[str, str], root: Path) -> dict[str, object]:
    """One run with wall time, CPU seconds of the child tree (via RUSAGE_CHILDREN deltas) and log stages."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start_clock = datetime.now()
    started = time.perf_counter()
    completed = subprocess.run(argv, env=env, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if completed.returncode not in (0,):
        sys.exit(f"{' '.join(argv)} exited with {completed.returncode}:\n{completed.stdout[-3000:]}")
    stages = {name: float(seconds) for name, seconds in STAGE.findall(completed.stdout)}
    first = FIRST_LOG.search(completed.stdout)
    if first is not None:
        h, m, s, ms = (int(g) for g in first.groups())
        logged = start_clock.replace(hour=h, minute=m, second=s, microsecond=ms * 1000)
        stages["boot"] = round((logged - start_clock).total_seconds(), 3)
    published = PUBLISHED.search(completed.stdout)
    if published is not None:  # the command's own clock, from its start to the flow's end
        stages["command_to_flow_end"] = float(published.group(1))
        stages["exit"] = round(wall - float(published.group(1)), 3)
    return {"wall": round(wall, 3), "user": round(after.ru_utime - before.ru_utime, 3),
            "sys": round(after.ru_stime - before.ru_stime, 3), "stages": stages}


PACKAGES = ("dp", "schemas", "tasks", "flows", "quality", "reports", "dprelease")


def compile_checkout(root: Path, python: str) -> None:
    """Compile ``root``'s own modules to bytecode (``__pycache__``), as an install or a first run would."""
    folders = [str(root / name) for name in PACKAGES if (root / name).is_dir()]
    subprocess.run([python, "-m", "compileall", "-q", *folders], check=True, stdout=subprocess.DEVNULL)


def summarise(name: str, rows: list[dict[str, object]]) -> dict[str, object]:
    """Medians of one command's runs; printed as one block."""
    def median(key: str) -> float:
        return round(statistics.median(float(r[key]) for r in rows), 3)  # type: ignore[arg-type]

    stage_names: list[str] = []
    for row in rows:
        stage_names += [s for s in row["stages"] if s not in stage_names]  # type: ignore[attr-defined]
    stages = {s: round(statistics.median(float(r["stages"].get(s, 0.0)) for r in rows), 3)  # type: ignore[attr-defined]
              for s in stage_names}
    summary = {"wall": median("wall"), "user": median("user"), "sys": median("sys"), "stages": stages}
    walls = ", ".join(f"{float(r['wall']):.2f}" for r in rows)  # type: ignore[arg-type]
    print(f"{name}: median wall {summary['wall']:.2f} s, user {summary['user']:.2f} s, sys {summary['sys']:.2f} s "
          f"(runs: {walls})")
    if stages:
        print("  median per stage: " + ", ".join(f"{s} {v:.2f}" for s, v in stages.items()))
    return summary


def compare(name: str, rows: dict[str, list[dict[str, object]]]) -> dict[str, object]:
    """Medians of both checkouts' runs of one command and their ratios (this / baseline)."""
    out: dict[str, object] = {}
    for side, side_rows in rows.items():
        out[side] = summarise(f"{name} [{side}]", side_rows)

    def cpu(row: dict[str, object]) -> float:
        return float(row["user"]) + float(row["sys"])  # type: ignore[arg-type]

    walls = {side: statistics.median(float(r["wall"]) for r in side_rows)  # type: ignore[arg-type]
             for side, side_rows in rows.items()}
    cpus = {side: statistics.median(cpu(r) for r in side_rows) for side, side_rows in rows.items()}
    ratios = {"wall": round(walls["this"] / walls["baseline"], 3), "cpu": round(cpus["this"] / cpus["baseline"], 3)}
    print(f"{name}: this / baseline, ratio of medians: wall {ratios['wall']:.3f} "
          f"({walls['this']:.2f} / {walls['baseline']:.2f} s), CPU user+sys {ratios['cpu']:.3f} "
          f"({cpus['this']:.2f} / {cpus['baseline']:.2f} s)")
    out["ratios"] = ratios
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", choices=["release", "check"], default=None)
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs dprelease")
    parser.add_argument("--root", default=str(ROOT),
                        help="the checkout whose code and example run (to compare two versions back to back)")
    parser.add_argument("--out", default=None, help="write the runs and medians here as JSON")
    parser.add_argument("--baseline", default=None,
                        help="another checkout to time interleaved with this one (ratios of medians printed)")
    args = parser.parse_args()
    if args.baseline:
        interleaved(args)
        return
    root = Path(args.root).resolve()
    compile_checkout(root, args.python)
    example = root / "examples" / "adult"
    load_before = os.getloadavg()
    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}; "
          f"{os.cpu_count()} cpus", flush=True)
    results: dict[str, object] = {"load_before": load_before, "runs": args.runs}
    with tempfile.TemporaryDirectory(prefix="dprelease-bench-") as tmp:
        env = {**os.environ, "DPRELEASE_HOME": str(Path(tmp) / "home"),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
        env.pop("PREFECT_API_URL", None)
        env.pop("PREFECT_HOME", None)

        def release(run: str) -> list[str]:
            return [args.python, "-m", "dprelease", "release", str(example / "release.yaml"),
                    "--out", str(Path(tmp) / f"out-{run}"), "--ledger", str(Path(tmp) / f"ledger-{run}.sqlite")]

        check = [args.python, "-m", "dprelease", "check", str(example / "schema.yaml"), str(example / "adult.parquet")]
        if args.only != "check":
            timed(release("warm-up"), env, root)  # migrates Prefect's database in the fresh home
            rows = []
            for i in range(args.runs):
                rows.append(timed(release(str(i)), env, root))
                print(f"  release run {i}: {rows[-1]['wall']:.2f} s", flush=True)
            results["release"] = {"runs": rows, "median": summarise("release", rows)}
        if args.only != "release":
            timed(check, env, root)
            rows = []
            for i in range(args.runs):
                rows.append(timed(check, env, root))
                print(f"  check run {i}: {rows[-1]['wall']:.2f} s", flush=True)
            results["check"] = {"runs": rows, "median": summarise("check", rows)}
    load_after = os.getloadavg()
    results["load_after"] = load_after
    print(f"load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


def interleaved(args: argparse.Namespace) -> None:
    """``--baseline``: both checkouts' commands, alternating A B B A ..., each with a home of its own."""
    roots = {"this": Path(args.root).resolve(), "baseline": Path(args.baseline).resolve()}
    for root in roots.values():
        compile_checkout(root, args.python)
    load_before = os.getloadavg()
    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}; "
          f"{os.cpu_count()} cpus", flush=True)
    results: dict[str, object] = {"load_before": load_before, "runs": args.runs,
                                  "roots": {k: str(v) for k, v in roots.items()}}
    with tempfile.TemporaryDirectory(prefix="dprelease-bench-") as tmp:
        envs = {}
        for side, root in roots.items():
            env = {**os.environ, "DPRELEASE_HOME": str(Path(tmp) / side / "home"),
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
            env.pop("PREFECT_API_URL", None)
            env.pop("PREFECT_HOME", None)
            envs[side] = env

        def release(side: str, run: str) -> list[str]:
            return [args.python, "-m", "dprelease", "release", str(roots[side] / "examples/adult/release.yaml"),
                    "--out", str(Path(tmp) / side / f"out-{run}"),
                    "--ledger", str(Path(tmp) / side / f"ledger-{run}.sqlite")]

        def check(side: str, run: str) -> list[str]:
            example = roots[side] / "examples" / "adult"
            return [args.python, "-m", "dprelease", "check", str(example / "schema.yaml"),
                    str(example / "adult.parquet")]

        for name, command in (("release", release), ("check", check)):
            if args.only not in (None, name):
                continue
            for side in roots:  # warm-up: migrates each home's Prefect database
                timed(command(side, "warm-up"), envs[side], roots[side])
            rows: dict[str, list[dict[str, object]]] = {side: [] for side in roots}
            for i in range(args.runs):
                order = ["this", "baseline"] if i % 2 == 0 else ["baseline", "this"]
                for side in order:
                    rows[side].append(timed(command(side, str(i)), envs[side], roots[side]))
                    print(f"  {name} run {i} [{side}]: {rows[side][-1]['wall']:.2f} s", flush=True)
            results[name] = {"runs": rows, "median": compare(name, rows)}
    load_after = os.getloadavg()
    results["load_after"] = load_after
    print(f"load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
