"""The layering of DESIGN.md: dp/ never imports Prefect; no insecure randomness near raw data."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_dp_never_imports_prefect_or_upper_layers():
    for path in (ROOT / "dp").rglob("*.py"):
        bad = _imports(path) & {"prefect", "tasks", "flows", "schemas", "great_expectations"}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_schemas_never_imports_prefect_tasks_or_flows():
    for path in (ROOT / "schemas").rglob("*.py"):
        bad = _imports(path) & {"prefect", "tasks", "flows"}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_importing_dp_does_not_load_prefect():
    code = "import sys, dp.accounting, dp.svt, dp.marginals, dp.sampling; print('prefect' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


def _random_uses(path: Path) -> list[int]:
    """Line numbers that call numpy.random.* or import the random module (code only, not docstrings)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr == "random" and isinstance(node.value, ast.Name) \
                and node.value.id in ("np", "numpy"):
            lines.append(node.lineno)
        elif isinstance(node, ast.Import) and any(a.name == "random" for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module in ("random", "numpy.random"):
            lines.append(node.lineno)
    return lines


def test_no_numpy_random_or_random_module_on_the_release_path():
    """Only post-processing and evaluation may use seeded generators, each marked by a comment."""
    allowed = re.compile(r"#.*(post-processing|evaluation only)")
    for folder in ("dp", "tasks", "flows", "schemas"):
        for path in (ROOT / folder).rglob("*.py"):
            source = path.read_text(encoding="utf-8").splitlines()
            for number in _random_uses(path):
                line = source[number - 1]
                if "np.random.Generator" in line or allowed.search(line):
                    continue
                raise AssertionError(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
