#!/usr/bin/env bash
# Create .venv on first use (and whenever a lock file or pyproject.toml changes), with the
# locked dependency set, installed by uv with bytecode compiled. Needs only python3.11 with venv.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
stamp=.venv/.dprelease-installed
want=$(cat requirements.lock requirements-test.lock requirements-dask.lock pyproject.toml | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
echo "dprelease: setting up .venv (first run only; about a minute)..." >&2
"$PY" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "dprelease needs Python 3.11")'
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check "uv==0.13.9"
# The runtime set, every file checked against its locked hash; then the test tools (same pins, hashed too).
.venv/bin/uv pip install --quiet --python .venv/bin/python --compile-bytecode --require-hashes -r requirements.lock
.venv/bin/uv pip install --quiet --python .venv/bin/python --compile-bytecode --require-hashes -r requirements-test.lock
# The dask extra (pyproject.toml), locked in requirements-dask.lock: it adds packages only, every version of
# requirements.lock stays as it is (that file is compiled with requirements.lock as its constraints).
.venv/bin/uv pip install --quiet --python .venv/bin/python --compile-bytecode -r requirements-dask.lock
.venv/bin/uv pip install --quiet --python .venv/bin/python --compile-bytecode --no-deps --config-settings editable_mode=compat -e .
echo "$want" > "$stamp"
