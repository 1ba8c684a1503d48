"""Deferred imports of the command's own process: a stand-in module loads the real one at first use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True, text=True,
                          timeout=600).stdout.strip()


def test_a_deferred_module_loads_at_its_first_attribute_and_is_then_the_real_one():
    code = (
        "import sys\n"
        "from dprelease.flows.settings import _Deferred, defer_imports\n"
        "assert 'wave' not in sys.modules\n"
        "defer_imports(['wave'])\n"
        "import wave\n"
        "before = type(sys.modules['wave']).__name__\n"
        "opener = wave.open\n"  # the first use imports it
        "real = sys.modules['wave']\n"
        "print(before, type(real).__name__, opener is real.open, isinstance(wave, _Deferred),\n"
        "      wave.Error is real.Error)\n"
    )
    assert _run(code) == "_Deferred module True True True"


def test_imported_absent_and_package_modules_behave_as_without_the_stand_in():
    code = (
        "import sys, json\n"
        "from dprelease.flows.settings import defer_imports\n"
        "defer_imports(['json', 'no_such_package_dprelease', 'xmlrpc'])\n"
        "print(type(sys.modules['json']).__name__, 'no_such_package_dprelease' in sys.modules)\n"
        "try:\n"
        "    import no_such_package_dprelease\n"
        "except ImportError:\n"
        "    print('absent')\n"
        "import xmlrpc.client\n"  # a submodule through the stand-in: the package loads first
        "print(type(sys.modules['xmlrpc']).__name__, xmlrpc.client.ServerProxy.__name__)\n"
    )
    assert _run(code).splitlines() == ["module False", "absent", "module ServerProxy"]


def test_great_expectations_imports_without_altair_and_scipy_stats_which_still_work_when_used():
    code = (
        "import sys\n"
        "from dprelease.flows.settings import defer_imports\n"
        "defer_imports()\n"
        "import great_expectations\n"
        "from great_expectations.expectations.core import expect_column_kl_divergence_to_be_less_than as kl\n"
        "print(type(sys.modules['altair']).__name__, type(sys.modules['scipy.stats']).__name__)\n"
        "from scipy import stats\n"
        "print(stats.norm.cdf(0.0), kl.alt.Chart is sys.modules['altair'].Chart, kl.stats.entropy is stats.entropy)\n"
    )
    assert _run(code).splitlines() == ["_Deferred _Deferred", "0.5 True True"]


def test_a_check_command_defers_more_and_holds_the_collector_and_still_finds_every_failure(tmp_path):
    """``check`` in a process of its own: jsonschema, mistune and asyncio are stand-ins until used, the
    collector is paused while Great Expectations is imported and back on (imports frozen) to validate."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(ROOT / "examples" / "adult" / "adult.parquet")
    ages = table.column("age").to_pylist()
    ages[5] = 300
    pq.write_table(table.set_column(0, "age", pa.array(ages, table.schema.field("age").type)), tmp_path / "bad.parquet")
    probe = tmp_path / "probe.txt"
    code = (
        "import atexit, gc, os, sys\n"
        "def probe():\n"  # an exit handler: runs inside the command's own exit (exit_now)
        "    names = ('jsonschema', 'mistune', 'asyncio', 'altair', 'scipy.stats')\n"
        "    kinds = [type(sys.modules[n]).__name__ for n in names]\n"
        "    import asyncio, jsonschema, mistune\n"
        "    used = (asyncio.run(asyncio.sleep(0, 'ran')),\n"
        "            jsonschema.Draft7Validator({'type': 'integer'}).is_valid(3), mistune.html('*x*').strip())\n"
        f"    with open({str(probe)!r}, 'w') as out:\n"
        "        print(*kinds, gc.isenabled(), gc.get_freeze_count() > 0, os.environ['OPENBLAS_NUM_THREADS'], *used,\n"
        "              'sqlalchemy' in sys.modules and sys.modules['sqlalchemy'] is None, file=out)\n"
        "atexit.register(probe)\n"
        f"sys.argv = ['dprelease', 'check', {str(ROOT / 'examples' / 'adult' / 'schema.yaml')!r}, "
        f"{str(tmp_path / 'bad.parquet')!r}]\n"
        "from dprelease.flows.cli import main\n"
        "main()\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env={**env, "DPRELEASE_HOME": str(tmp_path)})
    assert out.returncode == 1, out.stdout + out.stderr
    assert "column 'age': values must be between 17 and 90" in out.stdout
    assert probe.read_text().split() == ["_Deferred"] * 5 + ["True", "True", "1", "ran", "True", "<p><em>x</em></p>",
                                                              "True"]
