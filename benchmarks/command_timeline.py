"""Benchmark: where the wall time of ``dprelease release`` of Adult goes, as a timeline of one process.

Run:  .venv/bin/python benchmarks/command_timeline.py [--runs 3] [--baseline OTHER_CHECKOUT] [--out FILE]

Each run is a fresh ``python -c`` that wraps a few functions of the checkout's command (the same
names exist since the embedded server is spawned by the command itself) to print, in wall seconds
since the process started and in the command process's own CPU seconds: the preflight's start and
end, the moment the flow's module is imported and the command waits for the embedded server, the
server's answer, the end of the thread preloading the later stages' libraries, each stage's start
(from the flow's log lines) and the command's return. The figures are medians over the runs; with
``--baseline``, both checkouts alternate (A B B A ...). Bytecode is compiled first in each checkout
(see ``benchmarks/command_time.py``). Nothing of the command is changed but the wrapping.
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
sys.path.insert(0, str(ROOT))

from benchmarks.command_time import compile_checkout  # noqa: E402

MARK = re.compile(r"^TL ([0-9.]+) ([0-9.]+) (.+)$", re.MULTILINE)
STAGE_START = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) \| INFO .* - stage (\w+) started$", re.MULTILINE)

WRAPPER = r'''
import os, sys, threading, time
T0 = float(os.environ["DPRELEASE_T0"])
def mark(label):
    sys.stderr.write(f"TL {time.time() - T0:.3f} {time.process_time():.3f} {label}\n")
mark("interpreter up")
from dprelease.flows import cli, settings
import dprelease.tasks.preflight as preflight_module
wait = settings.EmbeddedServer.wait
def timed_wait(self, timeout=180.0):
    mark("flow module imported, waits for the server")
    wait(self, timeout)
    mark("server answers")
settings.EmbeddedServer.wait = timed_wait
preflight = preflight_module.preflight
def timed_preflight(*args, **kwargs):
    mark("preflight starts")
    try:
        return preflight(*args, **kwargs)
    finally:
        mark("preflight ends")
preflight_module.preflight = timed_preflight
preload = cli._preload
def timed_preload():
    thread = preload()
    def watch():
        thread.join()
        mark("preload thread ends")
    threading.Thread(target=watch, daemon=True).start()
    return thread
cli._preload = timed_preload
exit_now = cli.exit_now
def timed_exit(code):
    mark("command returns")
    exit_now(code)
cli.exit_now = timed_exit
sys.argv = ["dprelease", *sys.argv[1:]]
cli.main()
'''


def one_run(root: Path, python: str, tmp: Path, run: str) -> dict[str, object]:
    """One release with its timeline: {label: (wall, cpu)} and {stage: wall at its start}, plus totals."""
    env = {**os.environ, "DPRELEASE_HOME": str(tmp / "home"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    env.pop("PREFECT_API_URL", None)
    env.pop("PREFECT_HOME", None)
    argv = [python, "-c", WRAPPER, "release", str(root / "examples/adult/release.yaml"),
            "--out", str(tmp / f"out-{run}"), "--ledger", str(tmp / f"ledger-{run}.sqlite")]
    start_clock = datetime.now()
    env["DPRELEASE_T0"] = repr(time.time())
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=root, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"release exited with {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}")
    marks: dict[str, list[float]] = {}
    for wall_s, cpu_s, label in MARK.findall(done.stderr):
        marks.setdefault(label, [float(wall_s), float(cpu_s)])  # the first (the flow's own preflight repeats)
    stages = {}
    for h, m, s, ms, name in STAGE_START.findall(done.stdout + done.stderr):
        at = start_clock.replace(hour=int(h), minute=int(m), second=int(s), microsecond=int(ms) * 1000)
        stages[name] = round((at - start_clock).total_seconds(), 3)
    return {"wall": round(wall, 3), "marks": marks, "stage_starts": stages}


def median_timeline(rows: list[dict[str, object]]) -> dict[str, object]:
    """Medians over runs of each mark's wall and CPU seconds and of each stage's start."""
    labels: list[str] = []
    stages: list[str] = []
    for row in rows:
        labels += [k for k in row["marks"] if k not in labels]  # type: ignore[attr-defined]
        stages += [k for k in row["stage_starts"] if k not in stages]  # type: ignore[attr-defined]
    marks = {label: [round(statistics.median(r["marks"][label][i] for r in rows  # type: ignore[index]
                                             if label in r["marks"]), 2) for i in (0, 1)]  # type: ignore[operator]
             for label in labels}
    starts = {s: round(statistics.median(r["stage_starts"][s] for r in rows  # type: ignore[index]
                                         if s in r["stage_starts"]), 2) for s in stages}  # type: ignore[operator]
    return {"wall": round(statistics.median(float(r["wall"]) for r in rows), 2),  # type: ignore[arg-type]
            "marks": marks, "stage_starts": starts}


def show(name: str, timeline: dict[str, object]) -> None:
    print(f"{name}: median wall {timeline['wall']:.2f} s")
    events = [(wall, f"{label} (command CPU {cpu:.2f} s)")
              for label, (wall, cpu) in timeline["marks"].items()]  # type: ignore[attr-defined]
    events += [(at, f"stage {stage} starts") for stage, at in timeline["stage_starts"].items()]  # type: ignore[attr-defined]
    for at, text in sorted(events):
        print(f"  {at:6.2f} s  {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--root", default=str(ROOT))
    parser.add_argument("--baseline", default=None, help="another checkout, timed interleaved with this one")
    parser.add_argument("--out", default=None, help="write the runs and medians here as JSON")
    args = parser.parse_args()
    roots = {"this": Path(args.root).resolve()}
    if args.baseline:
        roots["baseline"] = Path(args.baseline).resolve()
    for root in roots.values():
        compile_checkout(root, args.python)
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    rows: dict[str, list[dict[str, object]]] = {side: [] for side in roots}
    with tempfile.TemporaryDirectory(prefix="dprelease-timeline-") as tmp:
        for side, root in roots.items():  # warm-up: migrates each home's Prefect database
            one_run(root, args.python, Path(tmp) / side, "warm-up")
        for i in range(args.runs):
            order = list(roots) if i % 2 == 0 else list(reversed(roots))
            for side in order:
                rows[side].append(one_run(roots[side], args.python, Path(tmp) / side, str(i)))
                print(f"  run {i} [{side}]: {rows[side][-1]['wall']:.2f} s", flush=True)
    medians = {side: median_timeline(side_rows) for side, side_rows in rows.items()}
    for side, timeline in medians.items():
        show(side, timeline)
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps({"runs": rows, "medians": medians}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
