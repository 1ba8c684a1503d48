"""Release ids and dataset names are identifiers, never paths.

Both become folder names (``<out>/<dataset>/<release id>/``, the steward folder, the staging folder),
so they are held to a strict pattern before anything else happens: ASCII letters, digits, ``_``,
``-`` and ``.``, not starting with ``.`` or ``-`` (no hidden folders, no ``..``, no option look-alikes),
at most :data:`MAX_LENGTH` characters, nothing else (no ``/``, no newline, no space). Error messages
quote at most a short prefix of the refused value.
"""

from __future__ import annotations

import re
from pathlib import Path

from dprelease.dp.errors import DPReleaseError

MAX_LENGTH = 128
"""The longest id or dataset name accepted."""

PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
RULE = (f"must be 1 to {MAX_LENGTH} ASCII letters, digits, '_', '-' or '.', starting with a letter, digit or '_' "
        "(it names a folder)")


class IdentifierError(DPReleaseError, ValueError):
    """A release id or dataset name that is not an identifier (a usage error: exit 2)."""


class FolderError(DPReleaseError, ValueError):
    """A path that would leave its root, or a folder the release did not create (a usage error: exit 2)."""


def short(value: object, limit: int = 40) -> str:
    """``repr`` of at most ``limit`` characters of a value, for error messages."""
    text = str(value)
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def check_identifier(kind: str, value: object) -> str:
    """Return ``value`` when it is an identifier.

    Args:
        kind: What it is, for the message (``release id``, ``dataset``).
        value: The candidate.

    Raises:
        IdentifierError: Naming the kind, a short prefix of the value and the rule.
    """
    if not isinstance(value, str) or not 0 < len(value) <= MAX_LENGTH or PATTERN.fullmatch(value) is None:
        raise IdentifierError(f"{kind} {short(value)}: {RULE}")
    return value


def inside(root: Path, *parts: str) -> Path:
    """``root / parts``, resolved, checked to stay inside the resolved ``root``.

    Raises:
        FolderError: If the joined path resolves outside ``root`` (a symlink or ``..`` on the way).
    """
    base = root.resolve()
    target = base.joinpath(*parts).resolve()
    if target != base and base not in target.parents:
        raise FolderError(f"{'/'.join(parts)[:80]}: resolves outside {base}; refused")
    return target


def within(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or lies inside it, both resolved (symlinks followed)."""
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents
