"""Packaging: one ``dprelease`` namespace over the repository's top-level folders, the commit stamped in.

The folders ``dp/``, ``schemas/``, ``tasks/`` and ``flows/`` stay at the repository root (the project's
required layout) but are installed as ``dprelease.dp``, ``dprelease.schemas``, ... (setuptools'
``package_dir`` mapping), so nothing generic becomes a top-level import name. In a checkout the same
names resolve through the symbolic links in ``dprelease/``. A build writes ``dprelease/_build.py`` with
the git commit it was built from, so an installed package records it in every release's provenance.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
FOLDERS = ("dp", "schemas", "quality", "reports", "tasks", "flows")


def _packages() -> list[str]:
    names = ["dprelease"]
    for folder in FOLDERS:
        for init in sorted((ROOT / folder).rglob("__init__.py")):
            names.append(".".join(("dprelease", *init.parent.relative_to(ROOT).parts)))
    return names


def _commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


class BuildWithCommit(build_py):
    """``build_py`` that also writes ``dprelease/_build.py`` (the commit) into the build."""

    def run(self) -> None:
        """Build from a clean slate (no module left from an earlier build), then stamp the commit."""
        shutil.rmtree(Path(self.build_lib) / "dprelease", ignore_errors=True)
        super().run()
        target = Path(self.build_lib) / "dprelease" / "_build.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f'"""Written at build time by setup.py."""\n\nCOMMIT = "{_commit()}"\n', encoding="utf-8")


setup(
    packages=_packages(),
    package_dir={"dprelease": "dprelease", **{f"dprelease.{folder}": folder for folder in FOLDERS}},
    package_data={"dprelease": ["py.typed"]},
    cmdclass={"build_py": BuildWithCommit},
)
