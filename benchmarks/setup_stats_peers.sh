#!/usr/bin/env bash
# Create the peers' virtualenv for benchmarks/stats_peers.py at .venv-stats (git-ignored; outside benchmarks/,
# whose .py files tests/test_layers.py reads).
#
# OpenDP and IBM's diffprivlib, pinned, from PyPI, in a venv of their own: diffprivlib pins its own
# numpy/scipy/scikit-learn ranges, and the project venv (.venv) is never touched. The peers only read
# .npy files that stats_peers.py writes, so numpy is all they need besides themselves.
#
# Usage:  bash benchmarks/setup_stats_peers.sh        (idempotent; PYTHON=python3.11 to pick the interpreter)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv-stats}"
PYTHON="${PYTHON:-python3.11}"
OPENDP="${OPENDP:-0.16.0}"          # the project venv's version too
DIFFPRIVLIB="${DIFFPRIVLIB:-0.6.6}"  # the last IBM release
SKLEARN="${SKLEARN:-1.5.2}"          # diffprivlib 0.6.6 imports sklearn.tree._tree.DOUBLE, gone in 1.6

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "opendp==$OPENDP" "diffprivlib==$DIFFPRIVLIB" "scikit-learn==$SKLEARN" numpy
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md
for name in ("opendp", "diffprivlib", "numpy", "scipy", "scikit-learn"):
    print(f"{name}=={md.version(name)}")
import diffprivlib.tools, opendp.prelude  # noqa: F401,E401  (fails loudly if the install is broken)
print("imports OK")
PY
