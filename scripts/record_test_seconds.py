"""Write tests/file_seconds.json (each test file's duration) from a pytest JUnit XML report.

Run:  .venv/bin/python -m pytest -n 2 --dist loadfile --junitxml=/tmp/junit.xml
      .venv/bin/python scripts/record_test_seconds.py /tmp/junit.xml

tests/conftest.py orders the files by these durations, longest first, so that pytest-xdist starts the
long ones first (see ``longest_files_first`` there). A testcase's time in the report includes its setup
and teardown, so a module fixture's cost counts for its file. Only the order of the suite depends on
these figures: a stale or missing entry makes the suite slower, never different.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "file_seconds.json"


def file_of(classname: str) -> str:
    """``tests.flows.test_x`` or ``tests.flows.test_x.TestClass`` -> ``tests/flows/test_x.py``."""
    parts = classname.split(".")
    while parts and not parts[-1].startswith("test_"):
        parts.pop()
    return "/".join(parts) + ".py"


def main(report: str) -> None:
    """Sum each file's testcase times in ``report`` and write them, longest first."""
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(report).iter("testcase"):
        seconds[file_of(case.get("classname", ""))] += float(case.get("time", "0"))
    known = {name: round(value, 1) for name, value in seconds.items() if (ROOT / name).is_file()}
    ordered = dict(sorted(known.items(), key=lambda item: -item[1]))
    OUT.write_text(json.dumps(ordered, indent=1) + "\n", encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: {len(ordered)} files, {sum(ordered.values()):.0f} s in all")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
