"""Small HTML building blocks of the reports: escaping, number formats, tables, sections, cards."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from typing import Any

from dprelease.reports.audit_records import Amount

_UNIT_SYMBOL = {"rho": "ρ", "epsilon": "ε"}


# --------------------------------------------------------------------------------------------- text


def _esc(value: object) -> str:
    """Escape any value for HTML text and attribute contexts."""
    return html.escape(str(value), quote=True)


def _num(value: Any, digits: int = 4) -> str:
    """A float in ``digits`` significant digits, or an en dash for a missing value."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    x = float(value)
    if x == 0:
        return "0"
    if math.isfinite(x) and (abs(x) >= 1e6 or abs(x) < 1e-4):
        return f"{x:.{digits - 1}e}".replace("e-0", "e-").replace("e+0", "e+")
    return f"{x:.{digits}g}"


def _short(value: Any) -> str:
    """A number in at most 3 significant digits, ``1e-9`` style for small or large ones (chart text)."""
    if value is None:
        return "–"
    return f"{float(value):.3g}".replace("e-0", "e-").replace("e+0", "e+")


def _sci_html(value: Any) -> str:
    """A small or large number as ``m×10<sup>e</sup>`` (HTML); plain otherwise."""
    x = float(value)
    if x == 0 or 1e-3 <= abs(x) < 1e6:
        return _esc(_num(x))
    exponent = math.floor(math.log10(abs(x)))
    mantissa = x / 10**exponent
    head = "" if math.isclose(mantissa, 1.0) else f"{mantissa:.3g}×"
    return f"{_esc(head)}10<sup>{_esc(str(exponent).replace('-', '−'))}</sup>"


def _amount(entry: Amount | None, unit: str) -> str:
    """A budget amount with its exact rational value in the tooltip."""
    if entry is None:
        return "–"
    text = _esc(_num(entry.value, 6))
    return f'<span class="amt" title="exact {_esc(unit)} = {_esc(entry.exact_text)}">{text}</span>'


def _unit(unit: str) -> str:
    return _UNIT_SYMBOL.get(unit, unit)


def _pct(part: float | None, whole: float | None) -> str:
    if part is None or not whole:
        return "–"
    return f"{100 * part / whole:.1f} %"


def _code(value: object) -> str:
    return f"<code>{_esc(value)}</code>"


def _dl(items: Iterable[tuple[str, str]]) -> str:
    """A definition list; keys are escaped here, values must already be HTML."""
    rows = "".join(f"<dt>{_esc(k)}</dt><dd>{v}</dd>" for k, v in items)
    return f'<dl class="kv">{rows}</dl>'


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], *, cls: str = "") -> str:
    """A table; headings are escaped here, cells must already be HTML."""
    th = "".join(f"<th>{_esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    klass = f' class="{_esc(cls)}"' if cls else ""
    # Wide tables scroll inside their section instead of spilling over its edge.
    return f'<div class="scroll"><table{klass}><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'


def _section(anchor: str, title: str, body: str, lead: str = "") -> str:
    lead_html = f'<p class="lead">{lead}</p>' if lead else ""
    return f'<section id="{_esc(anchor)}"><h2>{_esc(title)}</h2>{lead_html}{body}</section>'


def _card(label: str, value_html: str, note_html: str = "", *, long: bool = False) -> str:
    note = f'<div class="note">{note_html}</div>' if note_html else ""
    klass = "value long" if long else "value"
    return (f'<div class="card"><div class="label">{_esc(label)}</div><div class="{klass}">{value_html}</div>'
            f"{note}</div>")


def _chips(items: Iterable[str]) -> str:
    """Chips; items must already be HTML."""
    return '<div class="chips">' + "".join(f'<span class="chip">{i}</span>' for i in items) + "</div>"
