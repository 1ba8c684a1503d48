"""Bins of their own for public spike values (zero income, a sentinel, a top code): pure arithmetic on edges."""

from __future__ import annotations

import math
from collections.abc import Sequence


def with_spikes(edges: Sequence[float], spikes: Sequence[float], kind: str) -> tuple[float, ...]:
    """``edges`` with a bin of its own for every spike inside them (public values; edges stay ascending).

    >>> with_spikes([0.0, 10.0, 20.0], [0.0, 15.0], "int")
    (0.0, 1.0, 10.0, 15.0, 16.0, 20.0)
    """
    low, top = float(edges[0]), float(edges[-1])
    points = {float(e) for e in edges}
    for s in spikes:
        after = float(s) + 1.0 if kind == "int" else math.nextafter(float(s), math.inf)
        if low <= s < top:
            points.update(p for p in (float(s), after) if p <= top)
    return tuple(sorted(points))
