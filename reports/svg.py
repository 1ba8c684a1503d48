"""A small SVG writer for the reports' charts: shapes and text in CSS pixels, inlined in the page.

A chart is markup, not a picture: no plotting library, no raster, no ``data:`` URI. The same
inputs give the same bytes (coordinates are rounded to 0.1 px, nothing depends on the process),
every string is escaped, and the element carries no attribute that loads anything (no ``href``;
inline, not even the ``xmlns`` URL: HTML5 puts inline ``<svg>`` in the SVG namespace itself), so
the page's Content-Security-Policy can forbid every resource. Text is laid out with a conservative estimate
of each glyph's advance (:func:`text_width`) instead of font metrics, so labels get room for the
widest common sans-serif faces.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dprelease.reports.html_parts import _esc

INK = "#1f2937"
MUTED = "#6b7280"
GRID = "#e5e7eb"
AXIS = "#9ca3af"

_FONT = "system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,'DejaVu Sans',sans-serif"

_NARROW = frozenset("iljtfrI.,:;|!'()[]{} ")
_WIDE = frozenset("mwMW@%—")


def text_width(text: str, size: float) -> float:
    """An upper estimate of ``text``'s width in pixels at font size ``size`` (no font metrics needed)."""
    em = 0.0
    for char in text:
        if char in _NARROW:
            em += 0.34
        elif char in _WIDE:
            em += 0.92
        elif char.isupper() or char.isdigit():
            em += 0.66
        else:
            em += 0.58
    return em * size


def fit(text: str, size: float, width: float) -> str:
    """``text``, cut with an ellipsis to fit ``width`` pixels."""
    if text_width(text, size) <= width:
        return text
    while text and text_width(text + "…", size) > width:
        text = text[:-1]
    return text + "…"


def _f(value: float) -> str:
    """A coordinate in 0.1 px, without a trailing ``.0``."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else ("0" if text == "-0" else text)


def nice_ticks(low: float, high: float, count: int = 6) -> list[float]:
    """At most about ``count`` round tick values (1, 2, 2.5 or 5 times a power of ten) covering [low, high]."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low] if math.isfinite(low) else []
    raw = (high - low) / max(count, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * power >= raw)
    first = math.ceil(low / step - 1e-9)
    ticks = []
    k = first
    while k * step <= high + step * 1e-9:
        ticks.append(0.0 if k == 0 else k * step)
        k += 1
    return ticks


def tick_label(value: float, ticks: Sequence[float]) -> str:
    """``value`` with as many decimals as the tick step needs (``0.025``, ``1.5k`` never: plain numbers)."""
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else abs(value) or 1.0
    if abs(value) >= 1e6 or (0 < step < 1e-4):
        return f"{value:.2g}".replace("e-0", "e-").replace("e+0", "e+")
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) if step < 1 else 0
    if step < 1 and round(step * 10**decimals, 6) % 1:  # 0.25, 0.025: one more digit
        decimals += 1
    return f"{value:,.{decimals}f}".replace(",", "\u2009").replace("-", "−")


class Svg:
    """One chart: shapes added in drawing order, rendered as an inline ``<svg>`` element."""

    def __init__(self, width: float, height: float, alt: str) -> None:
        self.width, self.height, self.alt = width, height, alt
        self.parts: list[str] = []

    def rect(self, x: float, y: float, width: float, height: float, fill: str, *, stroke: str | None = None,
             dash: str | None = None, opacity: float | None = None, stroke_width: float = 1.0) -> None:
        """A rectangle; a negative width or height is drawn from the other corner."""
        if width < 0:
            x, width = x + width, -width
        if height < 0:
            y, height = y + height, -height
        extra = "" if stroke is None else f' stroke="{stroke}" stroke-width="{_f(stroke_width)}"'
        extra += "" if dash is None else f' stroke-dasharray="{dash}"'
        extra += "" if opacity is None else f' fill-opacity="{opacity:g}"'
        self.parts.append(f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(width)}" height="{_f(height)}" '
                          f'fill="{fill}"{extra}/>')

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str, *, width: float = 1.0,
             dash: str | None = None) -> None:
        """A straight line."""
        extra = "" if dash is None else f' stroke-dasharray="{dash}"'
        self.parts.append(f'<line x1="{_f(x1)}" y1="{_f(y1)}" x2="{_f(x2)}" y2="{_f(y2)}" stroke="{stroke}" '
                          f'stroke-width="{_f(width)}"{extra}/>')

    def circle(self, x: float, y: float, radius: float, fill: str) -> None:
        """A filled dot."""
        self.parts.append(f'<circle cx="{_f(x)}" cy="{_f(y)}" r="{_f(radius)}" fill="{fill}"/>')

    def text(self, x: float, y: float, text: str, *, size: float = 11.0, anchor: str = "start", fill: str = INK,
             bold: bool = False, rotate: float | None = None) -> None:
        """``text`` (escaped) with its vertical middle at ``y``; ``anchor`` is start, middle or end."""
        extra = ' font-weight="bold"' if bold else ""
        extra += "" if anchor == "start" else f' text-anchor="{anchor}"'
        extra += "" if rotate is None else f' transform="rotate({_f(rotate)} {_f(x)} {_f(y)})"'
        self.parts.append(f'<text x="{_f(x)}" y="{_f(y + 0.35 * size)}" font-size="{_f(size)}" fill="{fill}"'
                          f"{extra}>{_esc(text)}</text>")

    def legend(self, x: float, y: float, entries: Sequence[tuple[str, str, str]], *, anchor: str = "start",
               size: float = 11.0) -> None:
        """Keys and labels in one row from ``x`` (centred on it, or ending at it, by ``anchor``).

        Each entry is (label, colour, key): key ``fill`` a filled square, ``dashed`` a dashed outline,
        ``hatched`` a square with a diagonal line, ``interval`` an error bar.
        """
        widths = [18 + text_width(label, size) + 16 for label, _, _ in entries]
        left = x - sum(widths) if anchor == "end" else x - sum(widths) / 2 if anchor == "middle" else x
        for (label, colour, key), width in zip(entries, widths, strict=True):
            if key == "dashed":
                self.rect(left + 0.5, y - 5, 11, 10, "none", stroke=colour, dash="3 2")
            elif key == "interval":
                self.line(left, y, left + 12, y, colour)
                self.line(left, y - 4, left, y + 4, colour)
                self.line(left + 12, y - 4, left + 12, y + 4, colour)
            else:
                self.rect(left, y - 5, 12, 10, colour)
                if key == "hatched":
                    self.line(left + 1, y + 4, left + 11, y - 4, "#92400e")
            self.text(left + 18, y, label, size=size)
            left += width

    def legend_rows(self, centre: float, y: float, entries: Sequence[tuple[str, str, str]], width: float, *,
                    size: float = 11.0) -> float:
        """:meth:`legend` rows centred on ``centre``, wrapped to ``width``; returns the y below the last row."""
        row: list[tuple[str, str, str]] = []
        used = 0.0
        for entry in entries:
            need = 34 + text_width(entry[0], size)
            if row and used + need > width:
                self.legend(centre, y, row, anchor="middle", size=size)
                y, row, used = y + 18, [], 0.0
            row.append(entry)
            used += need
        if row:
            self.legend(centre, y, row, anchor="middle", size=size)
            y += 18
        return y

    def render(self, *, standalone: bool = False) -> str:
        """The ``<svg>`` element (its alt text as ``aria-label`` and ``<title>``).

        ``standalone`` adds the SVG namespace that a ``.svg`` file needs (a page's inline chart does not).
        """
        width, height = math.ceil(self.width), math.ceil(self.height)
        namespace = ' xmlns="http://www.w3.org/2000/svg"' if standalone else ""
        return (f'<svg{namespace} class="chart" role="img" aria-label="{_esc(self.alt)}" '
                f'viewBox="0 0 {width} {height}" '
                f'width="{width}" height="{height}" font-family="{_FONT}"><title>{_esc(self.alt)}</title>'
                f'<rect width="{width}" height="{height}" fill="#fff"/>' + "".join(self.parts) + "</svg>")


class Axis:
    """A linear value axis: data [low, high] onto pixels [left, right] (along y: [bottom, top])."""

    def __init__(self, low: float, high: float, left: float, right: float) -> None:
        self.low, self.high, self.left, self.right = low, high if high > low else low + 1.0, left, right

    def __call__(self, value: float) -> float:
        """The pixel x of ``value``."""
        return self.left + (value - self.low) / (self.high - self.low) * (self.right - self.left)

    def draw(self, svg: Svg, top: float, bottom: float, label: str, ticks: Sequence[float] | None = None,
             *, size: float = 10.5) -> None:
        """Grid lines from ``top`` to ``bottom``, tick labels under ``bottom`` and ``label`` under them."""
        values = list(ticks) if ticks is not None else nice_ticks(self.low, self.high)
        for value in values:
            x = self(value)
            svg.line(x, top, x, bottom, GRID, width=0.8)
            svg.text(x, bottom + 11, tick_label(value, values), size=size, anchor="middle")
        svg.line(self.left, bottom, self.right, bottom, AXIS, width=0.8)
        if label:
            svg.text((self.left + self.right) / 2, bottom + 28, label, size=size + 0.5, anchor="middle")

    def draw_y(self, svg: Svg, left: float, right: float, ticks: Sequence[float], *, size: float = 8.5) -> None:
        """As a vertical axis: grid lines from ``left`` to ``right`` at ``ticks``, their labels left of ``left``."""
        for value in ticks:
            y = self(value)
            svg.line(left, y, right, y, GRID, width=0.8)
            svg.text(left - 4, y, tick_label(value, ticks), size=size, anchor="end")
