"""The suite's file order (tests/conftest.py): longest recorded files first, nothing else changed."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from tests.conftest import FILE_SECONDS, longest_files_first

ROOT = Path(__file__).resolve().parents[1]


def _items(*names: str) -> list[SimpleNamespace]:
    return [SimpleNamespace(path=ROOT / name.split("::")[0], nodeid=name) for name in names]


def test_longest_files_first_keeps_each_files_tests_in_order_and_unrecorded_files_last():
    items = _items("tests/a.py::one", "tests/a.py::two", "tests/b.py::one", "tests/new.py::one", "tests/c.py::one",
                   "tests/c.py::two")
    longest_files_first(items, {"tests/a.py": 1.0, "tests/b.py": 30.0, "tests/c.py": 30.0})  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == ["tests/b.py::one", "tests/c.py::one", "tests/c.py::two", "tests/a.py::one",
                                         "tests/a.py::two", "tests/new.py::one"]


def test_the_recorded_files_exist():
    recorded = json.loads(FILE_SECONDS.read_text(encoding="utf-8"))
    assert recorded and all(isinstance(v, float) and v >= 0 for v in recorded.values())
    missing = [name for name in recorded if not (ROOT / name).is_file()]
    assert not missing, f"tests/file_seconds.json names files that are gone (scripts/record_test_seconds.py): {missing}"
