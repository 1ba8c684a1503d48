#!/usr/bin/env bash
# Render a release's HTML report and screenshot it in headless Chromium.
#
#   scripts/screenshot_report.sh RELEASE_DIR OUT.png [public|internal]
#
# RELEASE_DIR is <out>/<dataset>/<release_id>/. "public" (the default) re-renders audit.json with
# schemas.report_html.render_html (what `dprelease report` writes as audit.html); "internal" takes
# the steward-only report.html of the release from its steward folder (STEWARD_DIR, default
# .dprelease/internal/<dataset>/<release_id>; keep that screenshot internal too). The HTML
# is copied to a temporary directory, never written into the release folder (whose files are covered
# by its manifest).
#
# Environment: PYTHON (default: the project's .venv), CHROMIUM (default: chromium, else
# chromium-browser / google-chrome), WIDTH (default 1280), HEIGHT (default: estimated from the page,
# then the empty background below the footer is trimmed), KEEP_HTML=1 to print and keep the rendered
# HTML's path.
set -euo pipefail

usage() { echo "usage: $0 RELEASE_DIR OUT.png [public|internal]" >&2; exit 2; }
[[ $# -ge 2 && $# -le 3 ]] || usage
release_dir=$1
out_png=$2
kind=${3:-public}
[[ $kind == public || $kind == internal ]] || usage
[[ -f $release_dir/audit.json ]] || { echo "no audit.json in $release_dir" >&2; exit 1; }
steward_dir=${STEWARD_DIR:-.dprelease/internal/$(basename "$(dirname "$release_dir")")/$(basename "$release_dir")}
if [[ $kind == internal && ! -f $steward_dir/report.html ]]; then
    echo "no report.html in the steward folder $steward_dir (set STEWARD_DIR)" >&2; exit 1
fi
export STEWARD_DIR_RESOLVED
STEWARD_DIR_RESOLVED=$(if [[ -d $steward_dir ]]; then cd "$steward_dir" && pwd; fi)

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
if [[ -z ${CHROMIUM:-} ]]; then
    for candidate in chromium chromium-browser google-chrome; do
        if command -v "$candidate" >/dev/null 2>&1; then CHROMIUM=$candidate; break; fi
    done
fi
[[ -n ${CHROMIUM:-} ]] || { echo "chromium not found (apt-get install -y chromium, or set CHROMIUM)" >&2; exit 1; }

work=$(mktemp -d)
profile=$(mktemp -d)
cleanup() {
    rm -rf "$profile"
    if [[ -z ${KEEP_HTML:-} ]]; then rm -rf "$work"; fi
}
trap cleanup EXIT

html=$work/$kind.html
# Prints an estimate of the page height in CSS pixels (for the window size).
estimated=$(cd "$root" && "$python" - "$release_dir" "$kind" "$html" <<'PY'
import json
import os
import re
import sys
from pathlib import Path

from dprelease.reports.audit_json import audit_from_json
from dprelease.reports.html import render_html

release, kind, target = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
if kind == "public":
    page = render_html(audit_from_json((release / "audit.json").read_text(encoding="utf-8")))
else:
    page = (Path(os.environ["STEWARD_DIR_RESOLVED"]) / "report.html").read_text(encoding="utf-8")
target.write_text(page, encoding="utf-8")
# Rough height: chart heights plus a per-row / per-paragraph allowance.
charts = sum(int(h) for h in re.findall(r'<img class="chart"[^>]* height="(\d+)"', page))
rows = page.count("<tr>") + page.count("<dt>") + page.count("<li>")
print(charts + 34 * rows + 160 * page.count("<section") + 600)
PY
)

width=${WIDTH:-1280}
height=${HEIGHT:-$estimated}
mkdir -p "$(dirname "$out_png")"
out_abs=$(cd "$(dirname "$out_png")" && pwd)/$(basename "$out_png")

"$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --disable-extensions --hide-scrollbars --force-device-scale-factor=1 \
    --user-data-dir="$profile" --screenshot="$out_abs" --window-size="$width,$height" \
    "file://$html" >/dev/null 2>&1 || true
[[ -s $out_abs ]] || { echo "chromium wrote no screenshot to $out_abs" >&2; exit 1; }
# The window is taller than the page (Chromium's --screenshot captures the window, not the page):
# trim the empty background below the footer, keeping a margin.
if [[ -z ${HEIGHT:-} ]]; then
    size=$("$python" - "$out_abs" <<'PY'
import sys

from PIL import Image

path = sys.argv[1]
image = Image.open(path).convert("RGB")
width, height = image.size
background = image.getpixel((2, height - 2))
bottom = height
pixels = image.load()
while bottom > 1 and all(pixels[x, bottom - 1] == background for x in range(0, width, 4)):
    bottom -= 1
if bottom < height:
    image.crop((0, 0, width, min(height, bottom + 24))).save(path)
print(f"{width}x{min(height, bottom + 24)}")
PY
)
    height=${size#*x}
fi
if [[ -n ${KEEP_HTML:-} ]]; then echo "html: $html"; fi
echo "screenshot: $out_abs (${width}x${height})"
