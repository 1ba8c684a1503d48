"""Packaging: one ``dprelease`` namespace, ``--version``, ``python -m dprelease``, the commit stamped in."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import dprelease

ROOT = Path(__file__).resolve().parents[1]


def test_python_m_dprelease_prints_the_version_and_the_commit():
    out = subprocess.run([sys.executable, "-m", "dprelease", "--version"], capture_output=True, text=True,
                         cwd=ROOT, check=True, timeout=120)
    assert out.stdout.startswith(f"dprelease {dprelease.__version__} (commit ")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        assert head.stdout.strip() in out.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``pip install .`` would install, built from this checkout."""
    folder = tmp_path_factory.mktemp("wheel")
    leftovers = [ROOT / "build", ROOT / "dprelease.egg-info"]
    before = {path for path in leftovers if path.exists()}
    try:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--disable-pip-version-check",
                        "-w", str(folder), str(ROOT)], check=True, capture_output=True, timeout=600)
    finally:  # setuptools builds in the checkout: leave it as it was
        for path in leftovers:
            if path not in before:
                shutil.rmtree(path, ignore_errors=True)
    (built,) = folder.glob("dprelease-*.whl")
    return built


def test_the_wheel_installs_only_the_dprelease_namespace(wheel: Path):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"dprelease"}
    for folder in ("dp", "dp/local", "dp/accounting", "dp/mechanisms", "dp/measurement", "dp/synthesis", "schemas",
                   "quality", "reports", "tasks", "flows"):
        assert f"dprelease/{folder}/__init__.py" in names
    assert names.count("dprelease/py.typed") == 1 and not [n for n in names if n.endswith("/py.typed")
                                                            and n != "dprelease/py.typed"]
    entry = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "dprelease = dprelease.flows.cli:main" in entry


def test_an_installed_package_knows_its_commit_without_git(wheel: Path, tmp_path: Path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    stamped = (site / "dprelease" / "_build.py").read_text(encoding="utf-8")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        assert head.stdout.strip() in stamped
    # The installed copy alone (the checkout taken off the path), run from a folder that is not a checkout.
    generic = ("dp", "schemas", "quality", "reports", "tasks", "flows", "teaching")
    code = ("import os, sys; sys.path[:] = [p for p in sys.path "
            "if not os.path.exists(os.path.join(p or '.', 'dprelease', '__init__.py'))]; "
            f"sys.path.insert(0, {str(site)!r}); "
            f"import dprelease, dprelease.flows.cli as cli; assert dprelease.__file__.startswith({str(site)!r}); "
            "print(dprelease.commit()); "
            f"import importlib.util as u; print([n for n in {generic!r} if u.find_spec(n)])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    commit, generic = out.stdout.split("\n")[:2]
    assert commit != "unknown" or head.returncode != 0
    assert generic == "[]"
