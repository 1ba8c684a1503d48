"""The declared categories of a category column: labels and integer codes, a public range, a public code file.

Categories are strings, compared in Unicode NFC. Census-style integer codes may be written as integers,
``categories: [1, 2, 3]``: an integer stands for its decimal string (``"1"``, ``"2"``, ``"3"``), the form
integer data values are matched in and the synthetic table holds. A long code list is declared by a
public range, ``{range: [170, 9920]}`` (every integer from 170 to 9920), or a public code file,
``{file: codes.txt}`` (one code per line, relative to the schema file; blank lines and ``#`` comments
are ignored; codes are kept as written, leading zeros included). Nothing here is read off the data.

>>> declared_categories("columns.SEX.categories", [1, 2], Path("."))
('1', '2')
>>> declared_categories("columns.RAC1P.categories", {"range": [1, 3]}, Path("."))
('1', '2', '3')
"""

from __future__ import annotations

import datetime
import unicodedata
from pathlib import Path
from typing import Any

from dprelease.schemas.identifiers import short
from dprelease.schemas.model import _fail
from dprelease.schemas.reading import SpelledFloat, SpelledInt

MAX_CATEGORIES = 100_000
"""The most categories one column may declare (a list, a range or a code file)."""
MAX_CODE_FILE_BYTES = 4 << 20
"""The largest code file read (4 MiB: 100,000 codes of up to 40 characters)."""

_RULE = ("must be a string or a whole number (quote codes that are not plain integers, such as '01' with its "
         "leading zero)")
_FORMS = "a non-empty list, {range: [LOW, HIGH]} or {file: PATH} for a category column"


def declared_categories(where: str, raw: Any, folder: Path) -> tuple[str, ...]:
    """The categories of a ``categories:`` value, canonical and distinct, in declaration order.

    Args:
        where: The key path for messages (``schema.yaml: columns.RAC1P.categories``).
        raw: The YAML value: a list of strings and integers, ``{range: [LOW, HIGH]}`` or ``{file: PATH}``.
        folder: The schema file's folder (code files are relative to it).

    Returns:
        The categories as NFC strings (an integer as its decimal string).

    Raises:
        SchemaError: One line naming the key path and the rule.
    """
    if isinstance(raw, dict) and len(raw) == 1 and set(raw) <= {"range", "file"}:
        if "range" in raw:
            return _range(f"{where}.range", raw["range"])
        return _file(f"{where}.file", raw["file"], folder)
    if not isinstance(raw, list) or not raw:
        raise _fail(where, f"must be {_FORMS}")
    if len(raw) > MAX_CATEGORIES:
        raise _fail(where, f"lists {len(raw)} categories; at most {MAX_CATEGORIES} are allowed")
    position: dict[str, int] = {}
    for i, value in enumerate(raw):
        code = _code(f"{where}[{i}]", value)
        if code in position:
            raise _fail(f"{where}[{i}]", f"duplicates an earlier category (after Unicode normalisation), "
                        f"[{position[code]}]; an integer stands for its decimal string, so 1 and '1' are one category")
        position[code] = i
    return tuple(position)


def declared_label(value: Any) -> Any:
    """A label named elsewhere in a column (``on_unknown``) in the categories' canonical form.

    An integer becomes its decimal string; anything else is returned as it is (and checked by the caller).
    """
    if isinstance(value, int) and not isinstance(value, bool | SpelledInt):
        return str(value)
    return value


def _code(where: str, value: Any) -> str:
    """One listed category as its canonical string."""
    if isinstance(value, bool):
        raise _fail(where, f"({str(value).lower()}) {_RULE}; unquoted true/false/yes/no/on/off are booleans in YAML")
    if isinstance(value, SpelledInt):
        raise _fail(where, f"({value.text}) is read by YAML as the number {int(value)}: quote the code "
                    f"('{value.text}') to keep it as written, or write {int(value)}")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, SpelledFloat):
        raise _fail(where, f"({value.text}) is read by YAML as the number {value:g}: quote the code "
                    f"('{value.text}') to keep it as written")
    if isinstance(value, float):
        raise _fail(where, f"({value!r}) {_RULE}; a number with a point is not a code")
    if value is None:
        raise _fail(where, f"(null) {_RULE}; a null is declared with nullable: true")
    if isinstance(value, datetime.date):  # a datetime is a date too
        raise _fail(where, f"({value.isoformat()}) is read by YAML as a date: quote the code ('{value.isoformat()}') "
                    "to keep it as text")
    if not isinstance(value, str):
        raise _fail(where, _RULE)
    if not value:
        raise _fail(where, "must be a non-empty string or a whole number")
    return unicodedata.normalize("NFC", value)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool | SpelledInt)


def _range(where: str, raw: Any) -> tuple[str, ...]:
    """``{range: [LOW, HIGH]}``: every integer from LOW to HIGH, inclusive, as decimal strings."""
    if not isinstance(raw, list) or len(raw) != 2 or not all(_whole(v) for v in raw):
        raise _fail(where, "must be [LOW, HIGH], two plain whole numbers (every integer from LOW to HIGH, inclusive)")
    low, high = raw
    if low > high:
        raise _fail(where, f"low ({low}) must be at most high ({high})")
    if high - low + 1 > MAX_CATEGORIES:
        raise _fail(where, f"([{low}, {high}]) holds {high - low + 1} codes; at most {MAX_CATEGORIES} categories are "
                    "allowed (declare a coarser public grouping, or a numeric column)")
    return tuple(str(v) for v in range(low, high + 1))


def _file(where: str, raw: Any, folder: Path) -> tuple[str, ...]:
    """``{file: PATH}``: the codes of a public code file, one a line, as written (leading zeros kept)."""
    if not isinstance(raw, str) or not raw:
        raise _fail(where, "must be the path of a code file, relative to the schema file")
    name = short(raw, 80)
    path = folder / raw
    try:
        if not path.is_file():
            state = "is not a regular file" if path.exists() else "names no file"
            raise _fail(where, f"({name}) {state} (paths are relative to the schema file)")
        if path.stat().st_size > MAX_CODE_FILE_BYTES:
            raise _fail(where, f"({name}) is larger than {MAX_CODE_FILE_BYTES >> 20} MiB")
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise _fail(where, f"({name}) is not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise _fail(where, f"({name}) cannot be read ({err.strerror or type(err).__name__})") from None
    line_of: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        code = unicodedata.normalize("NFC", line.split("#", 1)[0].strip())
        if not code:
            continue
        if code in line_of:
            raise _fail(where, f"({name}) line {number} repeats the code {short(code)} of line {line_of[code]}")
        if len(line_of) == MAX_CATEGORIES:
            raise _fail(where, f"({name}) holds more than {MAX_CATEGORIES} codes; at most {MAX_CATEGORIES} "
                        "categories are allowed")
        line_of[code] = number
    if not line_of:
        raise _fail(where, f"({name}) holds no code (one code a line; blank lines and # comments are ignored)")
    return tuple(line_of)
