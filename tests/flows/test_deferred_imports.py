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
