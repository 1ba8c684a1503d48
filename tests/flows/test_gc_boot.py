"""The garbage-collector pause of the command and its embedded server while they import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True, text=True,
                          timeout=600).stdout.strip()


def test_hold_and_settle_pause_then_resume_with_the_imports_frozen():
    code = (
        "import gc\n"
        "from dprelease.flows.settings import hold_gc, settle_gc\n"
        "settle_gc(); untouched = (gc.isenabled(), gc.get_freeze_count())\n"  # not held: nothing happens
        "hold_gc(); held = gc.isenabled()\n"
        "import json, fractions\n"
        "settle_gc(); print(untouched, held, gc.isenabled(), gc.get_freeze_count() > 0)\n"
        "settle_gc()\n"  # a second call changes nothing
    )
    assert _run(code) == "(True, 0) False True True"


def test_a_cyclic_garbage_made_after_settling_is_collected():
    code = (
        "import gc, weakref\n"
        "from dprelease.flows.settings import hold_gc, settle_gc\n"
        "hold_gc(); settle_gc()\n"
        "class Node: pass\n"
        "a, b = Node(), Node(); a.b, b.a = b, a; probe = weakref.ref(a); del a, b\n"
        "gc.collect(); print(probe() is None)\n"
    )
    assert _run(code) == "True"


def test_the_embedded_server_app_is_prefects_built_with_the_collector_back_on(tmp_path):
    code = (
        "import gc, os\n"
        f"os.environ['PREFECT_HOME'] = {str(tmp_path)!r}\n"
        "os.environ['PREFECT__SERVER_EPHEMERAL'] = '1'\n"
        "from dprelease.flows.server_app import create_app\n"
        "app = create_app()\n"
        "from fastapi import FastAPI\n"
        "print(isinstance(app, FastAPI), gc.isenabled(), gc.get_freeze_count() > 0,\n"
        "      any(getattr(r, 'path', '').startswith('/api') for r in app.routes))\n"
    )
    assert _run(code) == "True True True True"
