"""Reading YAML strictly: a size limit, unique keys, few aliases, bounded nesting, one-line errors."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import yaml

from dprelease.schemas.identifiers import short
from dprelease.schemas.model import SchemaError, _fail

# ---------------------------------------------------------------------------------------------
# Loading


MAX_YAML_BYTES = 1 << 20
"""The largest spec or schema file read (1 MiB)."""
MAX_YAML_DEPTH = 32
"""The deepest nesting of mappings and sequences accepted."""
MAX_YAML_ALIASES = 64
"""The most aliases (``*name``) one file may use: an alias bomb ("billion laughs") is refused while parsing."""

MAX_NUMBER = 2.0**53
"""Declared bounds, search ranges and bin edges must lie within ±2⁵³ (where doubles still hold every integer)."""

class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe YAML loader with budgets: unique keys, few aliases, bounded nesting.

    At most :data:`MAX_YAML_ALIASES` aliases and :data:`MAX_YAML_DEPTH` levels of nesting (PyYAML alone
    keeps the last of a repeated key and expands aliases freely).
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.aliases = 0
        self.depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.events.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_YAML_ALIASES:
                raise yaml.composer.ComposerError(
                    None, None, f"more than {MAX_YAML_ALIASES} aliases (an alias bomb?)", None)
        self.depth += 1
        try:
            if self.depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested more than {MAX_YAML_DEPTH} levels deep", None)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _construct_unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            duplicate = key in seen
        except TypeError:  # an unhashable key: the base constructor reports it
            break
        if duplicate:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is repeated in one mapping", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


class SpelledInt(int):
    """An integer that the YAML file spells otherwise than as its decimal form.

    YAML 1.1 reads ``010`` as 8 (octal), ``0x1F`` as 31, ``1:30`` as 90 and ``1_000`` as 1000. Such an
    integer behaves as the number it is everywhere, and keeps ``text``, what the file says, so that
    code lists (``categories``) can refuse it: a census code ``01`` must be quoted to stay ``01``.
    """

    text: str


def _construct_int(loader: _UniqueKeyLoader, node: yaml.ScalarNode) -> int:
    value = loader.construct_yaml_int(node)
    if str(node.value) == str(value):
        return value
    spelled = SpelledInt(value)
    spelled.text = str(node.value)
    return spelled


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


class SpelledFloat(float):
    """A number in exponent notation without a decimal point (``1e-9``, ``2E6``), with its spelling ``text``.

    YAML 1.1 (PyYAML) reads such a plain scalar as text; YAML 1.2 and a steward read it as a number, and so
    does this loader (a quoted ``'1e-9'`` stays text, and a budget refuses it as a quoted number). It
    behaves as the float it is everywhere; a code list (``categories``) refuses it, naming what the file says.
    """

    text: str


_EXPONENT_TAG = "tag:dprelease,2026:exponent-float"


def _construct_exponent_float(loader: _UniqueKeyLoader, node: yaml.ScalarNode) -> float:
    spelled = SpelledFloat(loader.construct_yaml_float(node))
    spelled.text = str(node.value)
    return spelled


_UniqueKeyLoader.add_implicit_resolver(
    _EXPONENT_TAG, re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"), list("-+0123456789"))
_UniqueKeyLoader.add_constructor(_EXPONENT_TAG, _construct_exponent_float)

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def _local(where: str, value: str) -> str:
    """A path a spec names (``data``, ``schema``, ``batches``); a URL is refused: only local files are read."""
    if _URL.match(value):
        raise _fail(where, f"({short(value)}) is a URL; dprelease reads local files and folders (copy or mount it)")
    return value


def _resolve(path: Path) -> Path:
    try:
        return path.resolve()
    except (RuntimeError, OSError):  # a symlink loop (RuntimeError in Python 3.11)
        raise SchemaError(f"{path}: cannot be resolved (a symbolic link loop?)") from None


def _load_yaml(path: Path) -> dict[str, Any]:
    try:
        if path.exists() and not path.is_file():
            raise SchemaError(f"{path}: must be a regular file (not a folder, pipe or device)")
        if path.exists() and path.stat().st_size > MAX_YAML_BYTES:
            raise SchemaError(f"{path}: larger than {MAX_YAML_BYTES // 1024} KiB; a spec or schema is a short file")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SchemaError(f"{path}: file not found") from None
    except UnicodeDecodeError as err:
        raise SchemaError(f"{path}: is not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise SchemaError(f"{path}: cannot be read ({err.strerror or type(err).__name__})") from None
    try:
        doc = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None)
        known = ("repeated", "aliases", "nested")
        rule = f": {str(problem)[:120]}" if problem and any(k in str(problem) for k in known) else ""
        raise SchemaError(f"{path}: not valid YAML{where}{rule}") from None
    if not isinstance(doc, dict):
        raise SchemaError(f"{path}: must be a YAML mapping")
    return doc


def _keys(where: str, mapping: dict[str, Any], allowed: set[str], required: set[str] = frozenset()) -> None:  # type: ignore[assignment]
    unknown = sorted(set(mapping) - allowed)
    if unknown:
        raise _fail(where, f"unknown key {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}")
    missing = sorted(required - set(mapping))
    if missing:
        raise _fail(where, f"missing required key {missing[0]!r}")


def _number(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(where, f"({short(value)}) must be a number")
    if math.isfinite(value) and abs(value) > MAX_NUMBER:
        raise _fail(where, f"({short(value)}) must lie within ±2^53 (9007199254740992)")
    if not math.isfinite(value):
        raise _fail(where, f"({value}) must be a finite number")
    return value
