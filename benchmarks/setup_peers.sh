#!/usr/bin/env bash
# Create the peers' virtualenv for benchmarks/peers_adult.py at .venv-bench (gitignored).
#
# smartnoise-synth pins old versions of opendp, pandas, numpy, ... (through smartnoise-sql, opacus,
# mbi) that conflict with dprelease's own pins (pandas>=3, numpy>=2, opendp 0.16), so the peers live
# in a virtualenv of their own; the project venv (.venv) is never touched. This is what the `bench`
# extra of pyproject.toml declares; install it here, not into the project venv.
#
# Usage:  bash benchmarks/setup_peers.sh            (idempotent; PYTHON=python3.11 to pick the interpreter)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv-bench}"
PYTHON="${PYTHON:-python3.11}"
SMARTNOISE_SYNTH="${SMARTNOISE_SYNTH:-1.0.8}"   # the last release; installs on Python 3.11

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# opacus (a dependency of smartnoise-synth's GAN synthesizers, not benchmarked here) needs torch. The
# default PyPI torch pulls ~5 GB of CUDA libraries; prefer a CPU-only build: a local +cpu wheel in a
# pip find-links folder (PIP_FIND_LINKS), else the PyTorch CPU index, else plain PyPI torch.
CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
CPU_WHEEL=""
for dir in ${PIP_FIND_LINKS:-} /opt/wheels; do
    [ -d "$dir" ] || continue
    found="$(ls "$dir"/torch-*+cpu-cp311-*.whl 2>/dev/null | sort -V | tail -n 1 || true)"
    if [ -n "$found" ]; then CPU_WHEEL="$found"; break; fi
done
if [ -n "$CPU_WHEEL" ]; then
    "$VENV/bin/python" -m pip install --quiet "$CPU_WHEEL"
elif ! "$VENV/bin/python" -m pip install --quiet --index-url https://download.pytorch.org/whl/cpu torch 2>/dev/null; then
    echo "no CPU-only torch reachable; installing the default (CUDA) torch from PyPI" >&2
fi
if "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    echo "torch==$("$VENV/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null)" > "$CONSTRAINTS"
fi
"$VENV/bin/python" -m pip install --quiet -c "$CONSTRAINTS" "smartnoise-synth==$SMARTNOISE_SYNTH" pyarrow pandas numpy scipy
"$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
for name in ("smartnoise-synth", "smartnoise-sql", "mbi", "opendp", "pandas", "numpy", "scipy", "pyarrow", "torch"):
    try:
        print(f"{name}=={md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name}: not installed")
from snsynth import Synthesizer  # noqa: F401  (fails loudly if the install is broken)
print("snsynth import OK")
EOF
