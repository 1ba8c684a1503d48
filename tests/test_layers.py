"""The layering of DESIGN.md: dp/ never imports Prefect; no insecure randomness near raw data."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


GENERIC = {"dp", "schemas", "quality", "reports", "tasks", "flows"}
"""The repository's folders: installed as ``dprelease.<folder>``, never as top-level names."""


def _modules(path: Path) -> set[str]:
    """Every absolute module name a file imports."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _imports(path: Path) -> set[str]:
    """The top-level packages a file imports, with ``dprelease.<folder>`` counted as ``<folder>``."""
    names = set()
    for module in _modules(path):
        parts = module.split(".")
        names.add(parts[1] if parts[0] == "dprelease" and len(parts) > 1 else parts[0])
    return names


def test_nothing_imports_a_folder_by_its_bare_name():
    """``dp``, ``schemas``, ``tasks`` and ``flows`` exist only inside the ``dprelease`` namespace."""
    for folder in (*GENERIC, "tests", "benchmarks", "examples", "dprelease"):
        for path in (ROOT / folder).rglob("*.py"):
            bare = {m for m in _modules(path) if m.split(".")[0] in GENERIC}
            assert not bare, f"{path.relative_to(ROOT)} imports {sorted(bare)} (use dprelease.<folder>)"


def test_dp_never_imports_prefect_or_upper_layers():
    for path in (ROOT / "dp").rglob("*.py"):
        bad = _imports(path) & {"prefect", "tasks", "flows", "schemas", "quality", "reports", "great_expectations"}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_schemas_never_imports_prefect_tasks_or_flows():
    for path in (ROOT / "schemas").rglob("*.py"):
        bad = _imports(path) & {"prefect", "tasks", "flows", "quality", "reports", "great_expectations"}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_quality_and_reports_sit_below_tasks_and_beside_each_other():
    """The steward's analytics and the reports are libraries: no Prefect, no tasks or flows, no cross-imports."""
    for folder, other in (("quality", "reports"), ("reports", "quality")):
        for path in (ROOT / folder).rglob("*.py"):
            bad = _imports(path) & {"prefect", "tasks", "flows", other}
            assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_no_module_is_much_over_500_lines():
    """A module a newcomer can read: the installed folders hold no module over 520 lines."""
    for folder in ("dp", "schemas", "quality", "reports", "tasks", "flows"):
        for path in (ROOT / folder).rglob("*.py"):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            assert lines <= 520, f"{path.relative_to(ROOT)} has {lines} lines"


def test_importing_dp_does_not_load_prefect():
    code = ("import sys, dprelease.dp.accounting.ledger, dprelease.dp.mechanisms.svt, "
            "dprelease.dp.measurement.marginals, dprelease.dp.synthesis.sampling; print('prefect' in sys.modules)")
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
    for folder in ("dp", "tasks", "flows", "schemas", "quality", "reports"):
        for path in (ROOT / folder).rglob("*.py"):
            source = path.read_text(encoding="utf-8").splitlines()
            for number in _random_uses(path):
                line = source[number - 1]
                if "np.random.Generator" in line or allowed.search(line):
                    continue
                raise AssertionError(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")


def _raised_names(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            func = node.exc.func
            names.add(func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else "")
    return names - {""}


def test_every_expected_error_has_one_root():
    """What the package raises on purpose is a DPReleaseError (one root), or the message-free StageFailed."""
    import importlib
    import inspect
    import pkgutil

    import dprelease
    from dprelease.dp.errors import DPReleaseError

    classes: dict[str, type] = {}
    for info in pkgutil.walk_packages(dprelease.__path__, "dprelease."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException):
                classes.setdefault(name, value)
    # The message-free wrapper of unexpected errors; raised inside YAML's loader and caught there; the
    # schema's error factory (returns a SchemaError); argparse's own (a usage line, exit 2); and in
    # ``tasks/__init__.py`` the one its module ``__getattr__`` must raise for a name it lacks (PEP 562).
    allowed = {"StageFailed", "ComposerError", "ConstructorError", "_fail", "ArgumentTypeError"}
    allowed_in = {Path("tasks/__init__.py"): {"AttributeError"}}
    for folder in ("dp", "schemas", "quality", "reports", "tasks", "flows"):
        for path in (ROOT / folder).rglob("*.py"):
            for name in _raised_names(path) - allowed - allowed_in.get(path.relative_to(ROOT), set()):
                cls = classes.get(name)
                assert cls is not None and issubclass(cls, DPReleaseError), \
                    f"{path.relative_to(ROOT)} raises {name}, not a DPReleaseError"
