#!/usr/bin/env bash
# Create the local-DP peers' virtualenv for benchmarks/ldp_peers.py at .venv-ldp-peers.
#
# pure-ldp and multi-freq-ldpy are unmaintained (last releases 2023) and pull numba, bitstring and xxhash;
# they live in a virtualenv of their own so the project venv (.venv) is never touched.
#
# Pins (the versions the results in benchmarks/results/ldp_peers.json were taken with):
#   pure-ldp 1.2.0, multi-freq-ldpy 0.2.5 (the last releases of both), numpy 2.4.6 (numba 0.68 accepts it).
#   scikit-learn 1.9.1, statsmodels 0.15.0: undeclared dependencies of pure-ldp (its frequency_oracles package
#   imports its RAPPOR server, which imports both); without them `import pure_ldp.frequency_oracles` fails.
#   xxhash 3.8.2: both peers call xxhash.xxh32(str(value), seed=...) with a str, which xxhash >= 4 refuses
#   ("TypeError: Strings must be encoded before hashing"): every local-hashing (OLH) client and server of
#   both packages crashes with the xxhash pip picks by default. 3.8.2 is the last 3.x release.
#
# The venv gets a .gitignore of "*" (as `python -m venv` does from Python 3.13 on), so it never shows up in
# `git status` without touching the repository's own .gitignore.
#
# Usage:  bash benchmarks/setup_ldp_peers.sh     (idempotent; PYTHON=python3.11 VENV=... to override)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv-ldp-peers}"
PYTHON="${PYTHON:-python3.11}"
PURE_LDP="${PURE_LDP:-1.2.0}"
MULTI_FREQ_LDPY="${MULTI_FREQ_LDPY:-0.2.5}"
XXHASH="${XXHASH:-3.8.2}"
NUMPY="${NUMPY:-2.4.6}"
SKLEARN="${SKLEARN:-1.9.1}"
STATSMODELS="${STATSMODELS:-0.15.0}"

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
[ -f "$VENV/.gitignore" ] || echo '*' > "$VENV/.gitignore"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "pure-ldp==$PURE_LDP" "multi-freq-ldpy==$MULTI_FREQ_LDPY" \
    "xxhash==$XXHASH" "numpy==$NUMPY" "scikit-learn==$SKLEARN" "statsmodels==$STATSMODELS"
"$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
for name in ("pure-ldp", "multi-freq-ldpy", "xxhash", "numpy", "numba", "scikit-learn", "statsmodels"):
    try:
        print(f"{name}=={md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name}: not installed")
import xxhash
xxhash.xxh32("0", seed=1)  # fails loudly if an xxhash >= 4 slipped in
from multi_freq_ldpy.pure_frequency_oracles.LH import LH_Client  # noqa: F401
from pure_ldp.frequency_oracles import DEClient, LHClient, UEClient  # noqa: F401
print("pure_ldp and multi_freq_ldpy import OK")
EOF
