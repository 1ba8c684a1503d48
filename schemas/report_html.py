"""Self-contained HTML renderings of the audit report (public) and the utility report (steward-only).

:func:`render_html` is a pure function of :func:`schemas.audit.build_audit`'s output: the same audit
gives the same bytes, so re-running a release reproduces its public files exactly. The page needs no
network when opened: the CSS is inline, there is no script, and the charts are PNG images embedded
as ``data:`` URIs; a Content-Security-Policy meta tag forbids any other resource. Every string from
the audit is escaped with :func:`html.escape`.

:func:`render_internal_html` renders the TVD yardstick of ``internal/utility.json``, which compares
the synthetic table with the real one: it is for the data steward and must never be published.

Charts are drawn with matplotlib's Agg canvas (no pyplot, no global figure state) under a fixed
style, with the PNG ``Software`` tag removed and no timestamp written, so identical inputs give
identical PNG bytes. matplotlib is imported inside the functions that draw: importing this module
stays cheap.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType

__all__ = ["render_html", "render_internal_html"]

# CSS pixels per inch, and device pixels per CSS pixel of the embedded PNGs (2 = sharp on HiDPI screens).
_CSS_DPI = 96
_SCALE = 2
_WIDTH_IN = 10.4  # full-width charts: 998 CSS pixels, the content width of the page

_INK = "#1f2937"
_MUTED = "#6b7280"
_GRID = "#e5e7eb"
_ACCENT = "#0b5cad"
# Okabe-Ito: distinguishable under the common colour-vision deficiencies.
_STAGE_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#999933", "#882255")
_BEFORE = "#94a3b8"
_REMAINING = "#dbeafe"
_OTHER = "#fde68a"
_WORSE = "#D55E00"
_BETTER = "#009E73"
_REAL = "#9ca3af"
_SYNTH = "#0072B2"

_RC: dict[RcKeyType, Any] = {
    "font.family": "DejaVu Sans",  # shipped with matplotlib: the same glyphs on every machine
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.titleweight": "bold",
    "axes.titlelocation": "left",
    "axes.labelsize": 9.0,
    "axes.edgecolor": "#9ca3af",
    "axes.labelcolor": _INK,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "text.color": _INK,
    "xtick.color": _INK,
    "ytick.color": _INK,
    "xtick.labelsize": 8.5,
    "ytick.labelsize": 8.5,
    "legend.fontsize": 8.5,
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
    "text.parse_math": False,  # a "$" in a column or query name is text, not mathtext
    "text.usetex": False,
    "svg.hashsalt": "dprelease",
    "path.simplify": True,
    "hatch.color": "#92400e",
}

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


def _value(entry: Any) -> float | None:
    """The float of an ``{"exact": ..., "value": ...}`` entry (or of a bare number)."""
    if entry is None:
        return None
    if isinstance(entry, Mapping):
        v = entry.get("value")
        return None if v is None else float(v)
    return float(entry)


def _exact(entry: Any) -> str:
    if isinstance(entry, Mapping) and "exact" in entry:
        return str(entry["exact"])
    return ""


def _amount(entry: Any, unit: str) -> str:
    """A budget amount with its exact rational value in the tooltip."""
    value = _value(entry)
    text = _esc(_num(value, 6)) if value is not None else "–"
    exact = _exact(entry)
    if not exact:
        return text
    return f'<span class="amt" title="exact {_esc(unit)} = {_esc(exact)}">{text}</span>'


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


# ------------------------------------------------------------------------------------------- charts


def _chart(width_in: float, height_in: float, draw: Callable[[Figure], None], alt: str, *,
           constrained: bool = True) -> str:
    """Draw a figure with ``draw`` and return it as an ``<img>`` with a base64 PNG data URI.

    Deterministic: fixed style, fixed DPI, exact figure size (no tight bbox), no ``Software`` tag
    and no timestamp in the PNG. With ``constrained=False`` the figure keeps matplotlib's fixed
    margins (``draw`` may adjust them), so small multiples get plot areas of one size.
    """
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(width_in, height_in), dpi=_CSS_DPI, layout="constrained" if constrained else None)
        FigureCanvasAgg(fig)
        draw(fig)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=_CSS_DPI * _SCALE, metadata={"Software": None})
    data = buffer.getvalue()
    width = int.from_bytes(data[16:20], "big") // _SCALE  # IHDR width and height
    height = int.from_bytes(data[20:24], "big") // _SCALE
    encoded = base64.b64encode(data).decode("ascii")
    return (f'<img class="chart" src="data:image/png;base64,{encoded}" width="{width}" height="{height}" '
            f'alt="{_esc(alt)}">')


def _stage_colours(stages: Iterable[str]) -> dict[str, str]:
    colours: dict[str, str] = {}
    for stage in stages:
        if stage not in colours:
            colours[stage] = _STAGE_COLOURS[len(colours) % len(_STAGE_COLOURS)]
    return colours


def _style_value_axis(ax: Axes, axis: Literal["x", "y"] = "x") -> None:
    ax.grid(axis=axis, color=_GRID, linewidth=0.8)
    ax.set_axisbelow(True)
    ax.tick_params(length=0)


def _draw_stage_budget(fig: Figure, stages: Sequence[Mapping[str, Any]], release_total: float | None, unit: str,
                       colours: Mapping[str, str]) -> None:
    from matplotlib.patches import Patch

    ax = fig.add_subplot()
    names = [str(s["stage"]) for s in stages]
    booked = [_value(s.get("booked")) or 0.0 for s in stages]
    allocated = [_value(s.get("allocated")) for s in stages]
    ys = list(range(len(stages)))[::-1]
    ax.barh(ys, booked, height=0.56, color=[colours[n] for n in names], zorder=2)
    alloc_y = [y for y, a in zip(ys, allocated, strict=True) if a is not None]
    alloc_x = [a for a in allocated if a is not None]
    if alloc_x:
        ax.barh(alloc_y, alloc_x, height=0.78, fill=False, edgecolor=_INK, linewidth=0.9, linestyle=(0, (3, 2)),
                zorder=3)
    top = max([*booked, *alloc_x, 0.0]) or 1.0
    for y, b, a in zip(ys, booked, allocated, strict=True):
        share = f"  ·  {100 * b / release_total:.1f} % of the release budget" if release_total else ""
        ax.text(max(b, a or 0.0) + top * 0.015, y, f"{_num(b, 4)} {_unit(unit)}{share}", va="center", fontsize=8.5,
                color=_INK)
    ax.set_yticks(ys, names)
    ax.set_xlim(0, top * 1.75)
    ax.set_ylim(-0.7, len(stages) - 0.3)
    ax.set_xlabel(f"booked privacy loss ({_unit(unit)}, the ledger's unit)")
    _style_value_axis(ax)
    ax.spines["left"].set_visible(False)
    handles = [Patch(facecolor=_MUTED, label="booked in the ledger")]
    if alloc_x:
        handles.append(Patch(fill=False, edgecolor=_INK, linestyle=(0, (3, 2)), label="allocated by the plan"))
    fig.legend(handles=handles, loc="outside upper right", ncols=2, frameon=False)


def _draw_lifetime(fig: Figure, life: Mapping[str, Any], unit: str, cap_label: str) -> None:
    from matplotlib.patches import Patch

    ax = fig.add_subplot()
    cap = _value(life.get("cap")) or 0.0
    before = _value(life.get("spent_before")) or 0.0
    this = _value(life.get("this_release")) or 0.0
    remaining = max(_value(life.get("remaining_after")) or 0.0, 0.0)
    other = max(cap - before - this - remaining, 0.0)
    if other <= cap * 1e-9:
        other = 0.0
    segments = [("spent by earlier releases", before, _BEFORE, ""),
                ("this release", this, _ACCENT, ""),
                ("reserved by open releases", other, _OTHER, "//"),
                ("remaining after this release", remaining, _REMAINING, "")]
    left = 0.0
    handles = []
    for label, width, colour, hatch in segments:
        if label == "reserved by open releases" and width == 0.0:
            continue
        ax.barh([0], [width], left=left, height=0.5, color=colour, edgecolor="white", linewidth=1.0,
                hatch=hatch or None, zorder=2)
        if cap and width / cap > 0.09:
            ax.text(left + width / 2, 0, f"{100 * width / cap:.1f} %", ha="center", va="center", fontsize=8.5,
                    color="white" if colour in (_ACCENT, _BEFORE) else _INK, zorder=3)
        handles.append(Patch(facecolor=colour, hatch=hatch or None, edgecolor="white",
                             label=f"{label}: {_num(width, 4)} {_unit(unit)} ({_pct(width, cap)})"))
        left += width
    ax.axvline(cap, color=_INK, linewidth=1.6, zorder=4)
    ax.text(cap, 0.42, f"lifetime cap {cap_label}", ha="right", va="bottom", fontsize=8.5, weight="bold")
    release_cap = _value(life.get("per_release_cap"))
    if release_cap is not None and cap:
        x = before + release_cap
        if x <= cap:
            ax.plot([x, x], [-0.36, 0.36], color=_INK, linewidth=1.1, linestyle=(0, (3, 2)), zorder=4)
            ax.text(x, -0.42, f"per-release cap: {_num(release_cap, 4)} {_unit(unit)}",
                    ha="left" if x < cap * 0.6 else "right", va="top", fontsize=8, color=_MUTED)
    ax.set_xlim(0, cap * 1.0 if cap else 1.0)
    ax.set_ylim(-0.75, 0.75)
    ax.set_yticks([])
    ax.spines["left"].set_visible(False)
    ax.set_xlabel(f"lifetime budget of the dataset ({_unit(unit)})")
    _style_value_axis(ax)
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 3), frameon=False)


def _draw_noise(fig: Figure, rows: Sequence[Mapping[str, Any]], colours: Mapping[str, str]) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    ax = fig.add_subplot()
    labels: list[str] = []
    positions: list[float] = []
    headers: list[int] = []
    stage_of: list[str] = []
    y = 0.0
    current: str | None = None
    plotted: list[tuple[float, Mapping[str, Any]]] = []
    for m in rows:
        stage = str(m["stage"])
        if stage != current:
            if current is not None:
                y += 0.6
            headers.append(len(labels))
            labels.append(stage)
            positions.append(y)
            stage_of.append(stage)
            y += 1.0
            current = stage
        labels.append(str(m["query"]))
        positions.append(y)
        stage_of.append(stage)
        plotted.append((y, m))
        y += 1.0
    widest = max(float(m["ci95_halfwidth"] or m["noise_std"]) for _, m in plotted)
    for yy, m in plotted:
        std = float(m["noise_std"])
        ci = float(m["ci95_halfwidth"]) if m.get("ci95_halfwidth") is not None else None
        colour = colours[str(m["stage"])]
        ax.barh([yy], [2 * std], left=-std, height=0.55, color=colour, alpha=0.9, zorder=2)
        if ci is not None:
            ax.errorbar([0.0], [yy], xerr=[ci], fmt="none", ecolor=_INK, elinewidth=1.0, capsize=3, zorder=3)
        note = f"σ {_num(std, 4)}" + (f"   95 % ±{_num(ci, 4)}" if ci is not None else "")
        ax.text(widest * 1.06, yy, note, va="center", fontsize=7.5, color=_MUTED)
    ax.axvline(0, color=_INK, linewidth=0.6, zorder=1)
    ax.set_yticks(positions, labels)
    for index in headers:
        tick = ax.get_yticklabels()[index]
        tick.set_fontweight("bold")
        tick.set_color(colours[stage_of[index]])
    ax.set_ylim(y - 0.4, -0.6)
    ax.set_xlim(-widest * 1.08, widest * 1.55)
    # Ticks, grid and axis line only under the error bars, not under the annotations on the right.
    ticks = [t for t in MaxNLocator(nbins=6, symmetric=True).tick_values(-widest, widest) if abs(t) <= widest * 1.08]
    ax.set_xticks(ticks)
    ax.spines["bottom"].set_bounds(-widest * 1.08, widest * 1.08)
    ax.set_xlabel("noise added to each released cell (counts)")
    _style_value_axis(ax)
    ax.spines["left"].set_visible(False)
    handles = [Patch(facecolor=_MUTED, label="±1 noise standard deviation"),
               Line2D([], [], color=_INK, marker="|", markersize=8, linewidth=1.0, label="95 % interval of the noise")]
    fig.legend(handles=handles, loc="outside upper center", ncols=2, frameon=False)


def _draw_hbars(fig: Figure, names: Sequence[str], values: Sequence[float], colours: Sequence[str], *,
                mean: float | None, mean_label: str, xlabel: str) -> None:
    ax = fig.add_subplot()
    ys = list(range(len(names)))
    ax.barh(ys, values, height=0.62, color=list(colours), zorder=2)
    top = max([*values, mean or 0.0, 1e-9])
    for yy, v in zip(ys, values, strict=True):
        ax.text(v + top * 0.012, yy, _num(v, 3), va="center", fontsize=7.5, color=_MUTED)
    if mean is not None:
        ax.axvline(mean, color=_INK, linewidth=1.0, linestyle=(0, (4, 2)), zorder=3)
        ax.text(mean, -0.9, f" {mean_label} {_num(mean, 3)}", fontsize=8, va="bottom", ha="left", color=_INK)
    ax.set_yticks(ys, list(names))
    ax.set_ylim(len(names) - 0.4, -1.1)
    ax.set_xlim(0, top * 1.15)
    ax.set_xlabel(xlabel)
    _style_value_axis(ax)
    ax.spines["left"].set_visible(False)


def _draw_pairs(fig: Figure, worst: Sequence[tuple[str, float]], best: Sequence[tuple[str, float]],
                mean: float | None, measured: Callable[[str], bool]) -> None:
    ax = fig.add_subplot()
    names: list[str] = []
    values: list[float] = []
    colours: list[str] = []
    ys: list[float] = []
    y = 0.0
    for group, colour in ((worst, _WORSE), (best, _BETTER)):
        for name, v in group:
            names.append(name.replace("|", " × ") + ("  ●" if measured(name) else ""))
            values.append(v)
            colours.append(colour)
            ys.append(y)
            y += 1.0
        y += 0.7
    ax.barh(ys, values, height=0.62, color=colours, zorder=2)
    top = max([*values, mean or 0.0, 1e-9])
    for yy, v in zip(ys, values, strict=True):
        ax.text(v + top * 0.012, yy, _num(v, 3), va="center", fontsize=7.5, color=_MUTED)
    if mean is not None:
        ax.axvline(mean, color=_INK, linewidth=1.0, linestyle=(0, (4, 2)), zorder=3)
        ax.text(mean, -0.9, f" mean 2-way TVD {_num(mean, 3)}", fontsize=8, va="bottom", ha="left")
    ax.set_yticks(ys, names)
    ax.set_ylim(y - 0.9, -1.1)
    ax.set_xlim(0, top * 1.15)
    ax.set_xlabel("total variation distance, real vs synthetic (0 = identical, 1 = disjoint)")
    _style_value_axis(ax)
    ax.spines["left"].set_visible(False)
    from matplotlib.patches import Patch

    handles = [Patch(color=_WORSE, label=f"worst {len(worst)}"), Patch(color=_BETTER, label=f"best {len(best)}")]
    fig.legend(handles=handles, loc="outside upper center", ncols=2, frameon=False)


def _draw_histogram(fig: Figure, column: str, labels: Sequence[str], real: Sequence[float],
                    synthetic: Sequence[float], tvd: float | None) -> None:
    ax = fig.add_subplot()
    n = len(labels)
    xs = list(range(n))
    width = 0.42 if n <= 40 else 0.5
    ax.bar([x - width / 2 for x in xs], real, width=width, color=_REAL, label="real", zorder=2)
    ax.bar([x + width / 2 for x in xs], synthetic, width=width, color=_SYNTH, label="synthetic", zorder=2)
    title = column if tvd is None else f"{column}  ·  TVD {_num(tvd, 3)}"
    ax.set_title(title, fontsize=9.5)
    step = max(1, math.ceil(n / 8))
    ticks = xs[::step]
    short = [label if len(label) <= 14 else label[:13] + "…" for label in labels]
    ax.set_xticks(ticks, [short[i] for i in ticks], rotation=35, ha="right", rotation_mode="anchor", fontsize=7)
    ax.tick_params(axis="y", labelsize=7)
    fig.subplots_adjust(left=0.15, right=0.97, top=0.87, bottom=0.3)
    ax.set_xlim(-0.7, n - 0.3)
    _style_value_axis(ax, "y")


# ------------------------------------------------------------------------------------------------ css

_CSS = """
:root{--ink:#1f2937;--muted:#6b7280;--line:#e5e7eb;--soft:#f8fafc;--accent:#0b5cad;--head:#0f2a4a;--warn:#b45309}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;background:#eef2f6;color:var(--ink);
font:15px/1.5 -apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,"DejaVu Sans",sans-serif}
.page{max-width:1120px;margin:0 auto;padding:0 0 48px}
header.top{background:var(--head);color:#fff;padding:28px 36px 24px}
header.top .kicker{text-transform:uppercase;letter-spacing:.12em;font-size:12px;color:#9cc3ee;font-weight:600}
header.top h1{margin:6px 0 4px;font-size:28px;line-height:1.2;font-weight:650}
header.top .sub{color:#d6e4f5;font-size:14px}
header.top code{background:rgba(255,255,255,.12);color:#fff}
.banner{background:#fef3c7;border-bottom:3px solid var(--warn);color:#78350f;padding:12px 36px;font-weight:600}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(180px,1fr));gap:12px;padding:18px 36px;background:#fff;
border-bottom:1px solid var(--line)}
.card{border:1px solid var(--line);border-radius:8px;padding:10px 14px;background:var(--soft)}
.card .label{font-size:12.5px;letter-spacing:.02em;color:var(--muted);font-weight:600}
.card .value{font-size:19px;font-weight:650;margin-top:2px;font-variant-numeric:tabular-nums}
.card .value.long{font-size:15px;line-height:1.3;padding-top:3px}
.card .note{font-size:12.5px;color:var(--muted);margin-top:2px}
nav.toc{padding:10px 36px;background:#fff;border-bottom:1px solid var(--line);font-size:13px}
nav.toc a{color:var(--accent);text-decoration:none;margin-right:14px;white-space:nowrap}
section{background:#fff;margin:16px 0 0;padding:22px 36px 26px;border-top:1px solid var(--line);
border-bottom:1px solid var(--line)}
h2{font-size:19px;margin:0 0 8px;color:var(--head)}
h3{font-size:15px;margin:18px 0 6px;color:var(--head)}
p{margin:6px 0 10px}
p.lead{color:#374151;margin-top:0}
p.small,.small{font-size:13px;color:var(--muted)}
code{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace;background:#f1f5f9;
padding:1px 5px;border-radius:4px;overflow-wrap:anywhere}
img.chart{display:block;max-width:100%;height:auto;margin:10px 0 6px}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:13.5px;margin:8px 0 4px;font-variant-numeric:tabular-nums}
th{text-align:left;font-weight:600;color:#374151;background:var(--soft);border-bottom:2px solid var(--line);
padding:7px 10px;white-space:nowrap}
td{padding:6px 10px;border-bottom:1px solid var(--line);vertical-align:top}
table.num td:not(:first-child):not(:nth-child(2)):not(:nth-child(3)):not(:nth-child(4)){text-align:right}
table.measurements td{padding:4px 8px;font-size:12.5px;white-space:nowrap}
table.measurements td:nth-child(2),table.measurements td:nth-child(3){white-space:normal}
table.measurements th{padding:6px 8px;font-size:12.5px}
td.r,th.r{text-align:right}
tr.group td{background:#f1f5f9;font-weight:600}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px;vertical-align:baseline}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:6px 18px;margin:6px 0}
dl.kv dt{font-weight:600;color:#374151}
dl.kv dd{margin:0}
.chips{display:flex;flex-wrap:wrap;gap:6px;margin:4px 0 8px}
.chip{background:#eff6ff;border:1px solid #bfdbfe;color:#1e3a8a;border-radius:999px;padding:1px 10px;font-size:12.5px}
.badge{display:inline-block;border-radius:999px;padding:0 8px;font-size:11.5px;font-weight:600}
.badge.ok{background:#dcfce7;color:#166534}
.badge.fallback{background:#fef3c7;color:#92400e}
.callout{border-left:4px solid var(--warn);background:#fffbeb;padding:10px 16px 10px 14px;border-radius:0 6px 6px 0}
.callout ol{margin:4px 0;padding-left:20px}
.callout li{margin:4px 0}
details{margin:10px 0}
details summary{cursor:pointer;color:var(--accent);font-size:13.5px}
details .exact{font:12px/1.5 ui-monospace,Menlo,Consolas,monospace;overflow-wrap:anywhere}
.amt{border-bottom:1px dotted #9ca3af;cursor:help}
.same{color:var(--muted);font-size:12px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));gap:10px}
.grid img.chart{margin:0}
footer{color:var(--muted);font-size:12.5px;padding:14px 36px}
@media print{body{background:#fff}section{break-inside:avoid;border:0;margin:0}nav.toc{display:none}
header.top,.banner{-webkit-print-color-adjust:exact;print-color-adjust:exact}}
""".strip()

_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f"<title>{_esc(title)}</title>\n<style>\n{_CSS}\n</style>\n</head>\n"
        f'<body>\n<div class="page">\n{body}\n</div>\n</body>\n</html>\n'
    )


# ----------------------------------------------------------------------------------------- public page


def _budget_text(audit: Mapping[str, Any]) -> tuple[str, str]:
    """The declared (epsilon, delta) as HTML, and as chart text."""
    declared = audit.get("budget", {}).get("declared", {})
    eps = _value(declared.get("epsilon"))
    delta = float(declared.get("delta", audit.get("privacy", {}).get("delta", 0.0)) or 0.0)
    html_text = f"({_esc(_num(eps))}, {_sci_html(delta)})"
    return html_text, f"ε = {_num(eps)}, δ = {_num(delta)}"


def _header(audit: Mapping[str, Any], kicker: str) -> str:
    privacy = audit.get("privacy", {})
    table = audit.get("table")
    table_text = f" · table {_code(table)}" if table is not None else ""
    return (
        f'<header class="top"><div class="kicker">{_esc(kicker)}</div>'
        f"<h1>Dataset {_esc(audit.get('dataset', '?'))}</h1>"
        f'<div class="sub">Release {_code(audit.get("release_id", "?"))}{table_text}'
        f" · {_esc(privacy.get('definition', ''))}</div></header>"
    )


def _cards(audit: Mapping[str, Any]) -> str:
    budget = audit.get("budget", {})
    privacy = audit.get("privacy", {})
    life = audit.get("lifetime", {})
    unit = str(budget.get("unit", "epsilon"))
    eps_delta, _ = _budget_text(audit)
    definition = str(privacy.get("definition", "–"))
    cards = [
        _card("Definition", _esc(definition), _esc(privacy.get("unit", "")), long=len(definition) > 18),
        _card("Declared (ε, δ)", eps_delta, "budget of this release"),
    ]
    booked = _value(budget.get("booked"))
    note = ""
    conv = budget.get("booked_as_epsilon_delta")
    if conv:
        note = f"as (ε, δ) = ({_esc(_num(_value(conv.get('epsilon'))))}, {_sci_html(conv.get('delta', 0.0))})"
    cards.append(_card(f"Booked {_unit(unit)}", _esc(_num(booked, 4)), note))
    cap = _value(life.get("cap"))
    used = (_value(life.get("spent_before")) or 0.0) + (_value(life.get("this_release")) or 0.0)
    cards.append(_card("Lifetime used", _esc(_pct(used, cap)),
                       f"of a cap of {_esc(_num(cap, 4))} {_esc(_unit(unit))}; never renewed"))
    return '<div class="cards">' + "".join(cards) + "</div>"


def _protection(audit: Mapping[str, Any]) -> str:
    privacy = audit.get("privacy", {})
    labels = (("unit", "Privacy unit"), ("neighbouring", "Neighbouring datasets"), ("definition", "Definition"),
              ("accountant", "Accountant"), ("conversion", "Conversion to (ε, δ)"), ("delta", "δ"),
              ("noise", "Noise"))
    items = []
    for key, label in labels:
        if key in privacy:
            value = privacy[key]
            items.append((label, _sci_html(value) if key == "delta" else _esc(value)))
    return _section("protection", "What is protected", _dl(items),
                    "The guarantee below covers every file of this release; it is stated for one privacy unit.")


def _stage_section(audit: Mapping[str, Any], colours: Mapping[str, str]) -> str:
    budget = audit.get("budget", {})
    unit = str(budget.get("unit", "epsilon"))
    stages = list(budget.get("stages", []))
    release_total = _value(budget.get("reserved"))
    parts = []
    if stages:
        chart = _chart(_WIDTH_IN, 0.75 + 0.5 * len(stages),
                       lambda fig: _draw_stage_budget(fig, stages, release_total, unit, colours),
                       f"Bar chart of the privacy loss booked by each stage, in {unit}, and its share of the release "
                       "budget.")
        parts.append(chart)
    rows = []
    for s in stages:
        name = str(s["stage"])
        rows.append([
            f'<span class="swatch" style="background:{colours[name]}"></span>{_code(name)}',
            _amount(s.get("allocated"), unit),
            _amount(s.get("booked"), unit),
            _esc(_pct(_value(s.get("booked")), release_total)),
        ])
    rows.append(["<strong>total</strong>", _amount(budget.get("reserved"), unit), _amount(budget.get("booked"), unit),
                 _esc(_pct(_value(budget.get("booked")), release_total))])
    u = _unit(unit)
    parts.append(_table(["stage", f"allocated {u}", f"booked {u}", "share of release budget"], rows, cls="num"))
    conv = budget.get("booked_as_epsilon_delta")
    if conv:
        parts.append(f'<p class="small">Booked {_esc(u)} as (ε, δ): ({_esc(_num(_value(conv.get("epsilon")), 6))}, '
                     f"{_sci_html(conv.get('delta', 0.0))}). Hover an amount for its exact rational value.</p>")
    else:
        parts.append('<p class="small">Hover an amount for its exact rational value.</p>')
    parts.append(_exact_details(audit))
    lead = (f"Budget is booked in the ledger's unit, {_esc(u)} ({_esc(unit)}). The release budget (reserved before "
            f"any data was read) is {_esc(_num(release_total, 6))} {_esc(u)}; shares below are of that amount.")
    return _section("budget", "Budget allocation by stage", "".join(parts), lead)


def _lifetime_section(audit: Mapping[str, Any]) -> str:
    life = audit.get("lifetime", {})
    unit = str(life.get("unit", audit.get("budget", {}).get("unit", "epsilon")))
    u = _unit(unit)
    cap = _value(life.get("cap"))
    conv = life.get("cap_as_epsilon_delta")
    cap_label = f"{_num(cap, 4)} {u}"
    if conv:
        cap_label += f" (ε = {_num(_value(conv.get('epsilon')))}, δ = {_short(conv.get('delta'))})"
    parts = []
    if cap:
        has_other = (cap - (_value(life.get("spent_before")) or 0.0) - (_value(life.get("this_release")) or 0.0)
                     - max(_value(life.get("remaining_after")) or 0.0, 0.0)) > cap * 1e-9
        height = 2.35 if has_other else 2.05
        parts.append(_chart(_WIDTH_IN, height, lambda fig: _draw_lifetime(fig, life, unit, cap_label),
                            f"Stacked bar of the dataset's lifetime budget in {unit}: spent by earlier releases, "
                            "spent by this release, and remaining, against the cap."))
    rows = [["lifetime cap", _amount(life.get("cap"), unit), "100 %"],
            ["spent by earlier releases", _amount(life.get("spent_before"), unit),
             _esc(_pct(_value(life.get("spent_before")), cap))],
            ["this release", _amount(life.get("this_release"), unit),
             _esc(_pct(_value(life.get("this_release")), cap))],
            ["remaining after this release", _amount(life.get("remaining_after"), unit),
             _esc(_pct(_value(life.get("remaining_after")), cap))]]
    if life.get("per_release_cap") is not None:
        rows.append(["per-release cap", _amount(life.get("per_release_cap"), unit),
                     _esc(_pct(_value(life.get("per_release_cap")), cap))])
    parts.append(_table(["", f"{u}", "share of cap"], rows, cls="num"))
    notes = []
    if conv:
        cap_eps = _esc(_num(_value(conv.get("epsilon")), 6))
        notes.append(f"Cap as (ε, δ): ({cap_eps}, {_sci_html(conv.get('delta', 0))}).")
    if life.get("renewal"):
        notes.append(f"Renewal: {_esc(life['renewal'])}.")
    if notes:
        parts.append(f'<p class="small">{" ".join(notes)}</p>')
    return _section("lifetime", "Lifetime budget of the dataset", "".join(parts),
                    "Every release of this population draws on one lifetime budget recorded in the ledger.")


def _measurement_section(audit: Mapping[str, Any], colours: Mapping[str, str]) -> str:
    unit = str(audit.get("budget", {}).get("unit", "epsilon"))
    u = _unit(unit)
    measurements = list(audit.get("measurements", []))
    ordered: list[Mapping[str, Any]] = []
    for stage in colours:
        ordered.extend(m for m in measurements if str(m["stage"]) == stage)
    noisy = [m for m in ordered if m.get("noise_std") is not None]
    parts = []
    if noisy:
        groups = len({str(m["stage"]) for m in noisy})
        height = 0.95 + 0.19 * (len(noisy) + 1.6 * groups)
        parts.append(_chart(_WIDTH_IN, height, lambda fig: _draw_noise(fig, noisy, colours),
                            "Error bars of the noise on each released cell, per measurement, grouped by stage: "
                            "one noise standard deviation and the 95 % interval."))
    silent = [m for m in ordered if m.get("noise_std") is None]
    if silent:
        names = sorted({str(m["mechanism"]) for m in silent})
        parts.append(f'<p class="small">Not charted: {len(silent)} measurement(s) by {_esc(" and ".join(names))}, '
                     "which release no noisy value, only which query first crossed a noisy threshold. Their noise "
                     "scale is in the table.</p>")
    rows: list[list[str]] = []
    for m in ordered:
        booked = m.get("booked", {}).get(unit)
        native = m.get("native_loss", {})
        if not native:
            native_text = "–"
        elif set(native) == {unit} and _exact(native[unit]) == _exact(booked):
            native_text = '<span class="same">= booked</span>'
        else:
            native_text = ", ".join(f"{_esc(_unit(k))} {_amount(v, k)}" for k, v in native.items())
        kind = "σ" if m.get("scale_kind") == "sigma" else "b"
        stage = str(m["stage"])
        rows.append([
            f'<span class="swatch" style="background:{colours.get(stage, _MUTED)}"></span>{_esc(stage)}',
            _code(m.get("query", "")),
            _esc(m.get("mechanism", "")),
            _esc(m.get("sensitivity", "")),
            f"{kind} = {_esc(_num(m.get('scale'), 5))}",
            _amount(booked, unit),
            native_text,
            _esc(_num(m.get("cells"))),
            _esc(_num(m.get("noise_std"), 4)),
            _esc(_num(m.get("ci95_halfwidth"), 4)),
        ])
    head = ["stage", "query", "mechanism", "sensitivity", "scale", f"booked {u}", "native loss", "cells",
            "noise std", "95 % ±"]
    parts.append(_table(head, rows, cls="num measurements"))
    lead = (f"{len(measurements)} noisy measurements, in the order they were drawn. Each released cell of a marginal "
            "carries independent noise of the standard deviation shown; 95 % of cells are within the half-width.")
    return _section("measurements", "Measurements and their noise", "".join(parts), lead)


def _selected_pairs(audit: Mapping[str, Any]) -> str:
    chosen = audit.get("private_choices", {}).get("selected_pairs")
    if not chosen:
        return ""
    unit = str(audit.get("budget", {}).get("unit", ""))
    rows = [[_esc(i), _code(" × ".join(str(c) for c in p))] for i, p in enumerate(chosen.get("pairs", []), 1)]
    return (f"<h3>2-way marginals chosen privately</h3><p class=\"small\">{_esc(chosen.get('method', ''))}; "
            f"booked {_amount(chosen.get('booked'), unit)}.</p>" + _table(["round", "pair"], rows))


def _junction_choices(audit: Mapping[str, Any]) -> str:
    junction = audit.get("private_choices", {}).get("junction_tree")
    if not junction:
        return ""
    unit = str(audit.get("budget", {}).get("unit", ""))
    tree = _chips(" – ".join(_esc(c) for c in p) for p in junction.get("spanning_tree", []))
    rows = []
    for i, clique in enumerate(junction.get("cliques", []), 1):
        *parents, child = [str(c) for c in clique]
        rows.append([_esc(i), _code(child), " ".join(_code(p) for p in parents)])
    bins = ", ".join(f"{_esc(c)}: {_esc(n)}" for c, n in junction.get("coarse_bins", {}).items())
    return (f"<h3>Model structure chosen privately</h3><p class=\"small\">{_esc(junction.get('method', ''))}; "
            f"booked {_amount(junction.get('booked'), unit)}. Root: {_esc(junction.get('root', '?'))}.</p>"
            f"<p><strong>Spanning tree</strong> {tree}</p>"
            + _table(["clique", "column", "conditioned on"], rows)
            + (f'<p class="small">Coarse bins inside cliques: {bins}.</p>' if bins else ""))


def _bounds_section(audit: Mapping[str, Any]) -> str:
    bounds = audit.get("private_choices", {}).get("discovered_bounds", {})
    if not bounds:
        return _section("bounds", "Private choices", '<p class="small">No column needed discovered bounds.</p>'
                        + _selected_pairs(audit) + _junction_choices(audit))

    def cell(value: Any, found: Any) -> str:
        badge = ('<span class="badge ok">found</span>' if found
                 else '<span class="badge fallback">search range</span>')
        return f"{_esc(_num(value, 6))} {badge}"

    rows = [[_code(col), cell(b.get("lower"), b.get("lower_found")), cell(b.get("upper"), b.get("upper_found"))]
            for col, b in bounds.items()]
    notes = sorted({str(b["note"]) for b in bounds.values() if b.get("note")})
    body = _table(["column", "lower", "upper"], rows)
    body += "".join(f'<p class="small">{_esc(n[:1].upper() + n[1:])}.</p>' for n in notes)
    body = "<h3>Bounds discovered privately</h3>" + body + _selected_pairs(audit) + _junction_choices(audit)
    return _section("bounds", "Private choices", body,
                    "Data-dependent choices are themselves DP outputs: clipping bounds (the bounds stage) and, "
                    "when they are not declared, what to measure: 2-way marginals or the model's cliques (the "
                    "selection stage).")


def _public_inputs_section(audit: Mapping[str, Any]) -> str:
    inputs = audit.get("public_inputs", {})
    items: list[tuple[str, str]] = []
    if "schema_file" in inputs:
        items.append(("Schema file", _code(inputs["schema_file"])))
    if "schema_sha256" in inputs:
        items.append(("Schema SHA-256", _code(inputs["schema_sha256"])))
    allocation = inputs.get("allocation", {})
    if allocation:
        items.append(("Allocation", _chips(f"{_esc(k)}: {_esc(v)}" for k, v in allocation.items())))
    pairs = inputs.get("two_way_pairs", [])
    if isinstance(pairs, str):
        items.append(("2-way marginals", _esc(pairs)))
    elif pairs:
        items.append(("2-way marginals", _chips(" × ".join(_esc(c) for c in p) for p in pairs)))
    for h in inputs.get("hierarchies", []):
        levels = " > ".join(_esc(x) for x in [*h.get("levels", []), h.get("column", "?")])
        nodes = ", ".join(_esc(n) for n in h.get("nodes_per_level", []))
        items.append((f"Hierarchy {h.get('name', '?')}", f"{levels} <span class=\"small\">({nodes} nodes above "
                      f"the column; level weights {_esc(' : '.join(h.get('level_weights', [])))})</span>"))
    for key, value in inputs.items():
        if key not in {"schema_file", "schema_sha256", "allocation", "two_way_pairs", "hierarchies"}:
            items.append((key.replace("_", " "), _esc(value)))
    return _section("inputs", "Public inputs", _dl(items),
                    "Chosen without looking at the data; anyone may know them.")


def _post_section(audit: Mapping[str, Any]) -> str:
    post = audit.get("post_processing", {})
    items: list[tuple[str, str]] = []
    if "sampling_seed" in post:
        items.append(("Sampling seed (public)", _code(post["sampling_seed"])))
    if "synthetic_rows" in post:
        items.append(("Synthetic rows", _esc(post["synthetic_rows"])))
    for key, label in (("row_count", "Row count"), ("consistency", "Consistency"), ("model", "Model")):
        if key in post:
            items.append((label, _esc(post[key])))
    edges = post.get("model_edges", [])
    if edges:
        items.append(("Model edges", _chips(" → ".join(_esc(c) for c in e) for e in edges)))
    for key, value in post.items():
        if key not in {"sampling_seed", "synthetic_rows", "row_count", "consistency", "model", "model_edges"}:
            items.append((key.replace("_", " "), _esc(value)))
    return _section("post", "Post-processing and sampling", _dl(items),
                    "Everything after the noisy measurements is post-processing of DP outputs and public inputs: it "
                    "spends no budget.")


def _provenance_section(audit: Mapping[str, Any]) -> str:
    rows = [[_esc(k), _code(v)] for k, v in audit.get("provenance", {}).items()]
    return _section("provenance", "Provenance", _table(["component", "version"], rows))


def _limitations_section(audit: Mapping[str, Any]) -> str:
    items = "".join(f"<li>{_esc(t)}</li>" for t in audit.get("limitations", []))
    return _section("limitations", "Limitations", f'<div class="callout"><ol>{items}</ol></div>',
                    "What differential privacy, as applied here, does not promise.")


def _exact_details(audit: Mapping[str, Any]) -> str:
    budget = audit.get("budget", {})
    life = audit.get("lifetime", {})
    lines = [("release: reserved", budget.get("reserved")), ("release: booked", budget.get("booked"))]
    lines += [(f"stage {s.get('stage')}: booked", s.get("booked")) for s in budget.get("stages", [])]
    lines += [(f"lifetime: {k.replace('_', ' ')}", life.get(k))
              for k in ("cap", "spent_before", "this_release", "remaining_after", "per_release_cap")]
    rows = [[_esc(label), f'<span class="exact">{_esc(_exact(entry))}</span>'] for label, entry in lines
            if _exact(entry)]
    unit = str(budget.get("unit", ""))
    return (f"<details><summary>Exact values ({_esc(_unit(unit))}, as rationals)</summary>"
            f"{_table(['amount', 'exact value'], rows)}</details>")


def render_html(audit: Mapping[str, Any]) -> str:
    """Render the public audit report as one self-contained HTML page.

    A pure function of ``audit`` (the output of :func:`schemas.audit.build_audit`): identical
    input gives byte-identical output. The page loads nothing from the network.

    Args:
        audit: The audit report.

    Returns:
        The HTML document.
    """
    budget = audit.get("budget", {})
    stage_names = [str(s["stage"]) for s in budget.get("stages", [])]
    stage_names += [str(m["stage"]) for m in audit.get("measurements", [])]
    colours = _stage_colours(stage_names)
    toc = ('<nav class="toc"><a href="#protection">Protection</a><a href="#budget">Budget by stage</a>'
           '<a href="#lifetime">Lifetime budget</a><a href="#measurements">Measurements</a>'
           '<a href="#bounds">Private choices</a><a href="#inputs">Public inputs</a><a href="#post">Post-processing</a>'
           '<a href="#provenance">Provenance</a><a href="#limitations">Limitations</a></nav>')
    body = "\n".join([
        _header(audit, "Privacy audit report"),
        _cards(audit),
        toc,
        _protection(audit),
        _stage_section(audit, colours),
        _lifetime_section(audit),
        _measurement_section(audit, colours),
        _bounds_section(audit),
        _public_inputs_section(audit),
        _post_section(audit),
        _provenance_section(audit),
        _limitations_section(audit),
        f'<footer>Format {_code(audit.get("format", "?"))}. This page is a rendering of <code>audit.json</code>, '
        "which is authoritative; it contains no row-level data and no count derived from the raw table.</footer>",
    ])
    title = f"Privacy audit: {audit.get('dataset', '?')} release {audit.get('release_id', '?')}"
    return _page(title, body)


# --------------------------------------------------------------------------------------- internal page


def render_internal_html(
    audit: Mapping[str, Any],
    utility: Mapping[str, Any],
    real_vs_synthetic: Mapping[str, Any] | None = None,
    risk: Mapping[str, Any] | None = None,
) -> str:
    """Render the steward-only utility and disclosure-risk report (never to be published).

    Args:
        audit: The audit report (for the release's identity and the measured pairs).
        utility: ``internal/utility.json``: ``tvd1``, ``tvd2``, ``tvd3`` (or None), and the TVD of
            each 1-way (``one_way``: column -> TVD) and 2-way (``two_way``: ``"a|b"`` -> TVD) marginal.
        real_vs_synthetic: Optional column -> ``{"labels": [...], "real": [...], "synthetic": [...]}``
            of normalised frequencies, drawn as small multiples.
        risk: Optional ``internal/risk.json`` (:meth:`dp.risk.RiskReport.to_dict`): exact-match share,
            distances to the closest record, k-anonymity of the quasi-identifiers.

    Returns:
        The HTML document.
    """
    declared = audit.get("public_inputs", {}).get("two_way_pairs", [])
    if isinstance(declared, str):
        choices = audit.get("private_choices", {})
        declared = choices.get("selected_pairs", {}).get("pairs", [])
        for clique in choices.get("junction_tree", {}).get("cliques", []):
            declared = [*declared, *([a, b] for i, a in enumerate(clique) for b in clique[i + 1:])]
    measured_pairs = {frozenset(str(c) for c in p) for p in declared}

    def measured(key: str) -> bool:
        return frozenset(key.split("|")) in measured_pairs

    tvd1, tvd2, tvd3 = utility.get("tvd1"), utility.get("tvd2"), utility.get("tvd3")
    cards = '<div class="cards">' + "".join([
        _card("Mean 1-way TVD", _esc(_num(tvd1, 3)), "over every column"),
        _card("Mean 2-way TVD", _esc(_num(tvd2, 3)), "over every pair of columns"),
        _card("Mean 3-way TVD", _esc(_num(tvd3, 3)) if tvd3 is not None else "–",
              "over a sample of triples" if tvd3 is not None else "not computed"),
        _card("Synthetic rows", _esc(audit.get("post_processing", {}).get("synthetic_rows", "–")), "public"),
    ]) + "</div>"
    banner = ('<div class="banner">Internal — for the data steward only. Computed from the raw table: never publish '
              "this page or the figures on it.</div>")
    evaluated = utility.get("evaluated") or {}
    if evaluated and (evaluated.get("real_rows_evaluated") != evaluated.get("real_rows")
                      or evaluated.get("synthetic_rows_evaluated") != evaluated.get("synthetic_rows")):
        cards += ('<p class="small">Computed on samples: '
                  f"{_esc(evaluated.get('real_rows_evaluated'))} of {_esc(evaluated.get('real_rows'))} real rows and "
                  f"{_esc(evaluated.get('synthetic_rows_evaluated'))} of {_esc(evaluated.get('synthetic_rows'))} "
                  "synthetic rows, chosen uniformly at random (real rows by the secure source).</p>")
    sections = []
    explain = ("Total variation distance between the real and the synthetic distribution of each marginal: "
               "½ Σ |p − q|, 0 when identical, 1 when disjoint. Numeric columns are binned.")
    one = {str(k): float(v) for k, v in utility.get("one_way", {}).items()}
    if one:
        ordered = sorted(one.items(), key=lambda kv: (-kv[1], kv[0]))
        chart = _chart(_WIDTH_IN, 0.85 + 0.24 * len(ordered),
                       lambda fig: _draw_hbars(fig, [k for k, _ in ordered], [v for _, v in ordered],
                                               [_SYNTH] * len(ordered), mean=None if tvd1 is None else float(tvd1),
                                               mean_label="mean", xlabel="total variation distance, real vs synthetic"),
                       "Bar chart of the 1-way TVD of each column, worst first.")
        table = _table(["column", "TVD"], [[_code(k), _esc(_num(v, 4))] for k, v in ordered], cls="num")
        sections.append(_section("one-way", "1-way marginals", chart + f"<details><summary>Table</summary>{table}"
                                 "</details>", _esc(explain)))
    two = {str(k): float(v) for k, v in utility.get("two_way", {}).items()}
    if two:
        ranked = sorted(two.items(), key=lambda kv: (-kv[1], kv[0]))
        k = min(5, len(ranked) // 2) if len(ranked) > 1 else len(ranked)
        worst = ranked[:k]
        best = ranked[::-1][: min(5, len(ranked) - k)]
        chart = _chart(_WIDTH_IN, 1.2 + 0.26 * (len(worst) + len(best) + 1),
                       lambda fig: _draw_pairs(fig, worst, best, None if tvd2 is None else float(tvd2), measured),
                       "Bar chart of the worst and best 2-way marginals by TVD.")
        rows = [[_esc(label), _code(name.replace("|", " × ")), "yes" if measured(name) else "no", _esc(_num(v, 4))]
                for label, group in (("worst", worst), ("best", best)) for name, v in group]
        lead = (f"{len(two)} pairs scored. ● marks a pair that was measured (a 2-way marginal of the release); the "
                "other pairs are reproduced only through the model.")
        sections.append(_section("two-way", "2-way marginals: worst and best", chart +
                                 _table(["", "pair", "measured", "TVD"], rows, cls="num"), _esc(lead)))
    if real_vs_synthetic:
        figures = []
        for column, hist in real_vs_synthetic.items():
            labels = [str(x) for x in hist.get("labels", [])]
            real = [float(x) for x in hist.get("real", [])]
            synthetic = [float(x) for x in hist.get("synthetic", [])]
            if not labels or len(real) != len(labels) or len(synthetic) != len(labels):
                continue
            tvd = one.get(str(column))
            draw = partial(_draw_histogram, column=str(column), labels=labels, real=real, synthetic=synthetic,
                           tvd=tvd)
            figures.append(_chart(3.35, 2.3, draw, f"Histogram of {column}: real and synthetic relative frequencies.",
                                  constrained=False))
        key = (f'<p class="small"><span class="swatch" style="background:{_REAL}"></span>real '
               f'<span class="swatch" style="background:{_SYNTH};margin-left:12px"></span>synthetic '
               "(relative frequencies)</p>")
        sections.append(_section("histograms", "Real vs synthetic, per column",
                                 key + '<div class="grid">' + "".join(figures) + "</div>"))
    if risk:
        sections.append(_risk_section(risk))
    body = "\n".join([
        banner,
        _header(audit, "Internal utility report"),
        cards,
        *sections,
        "<footer>Rendered from <code>internal/utility.json</code>, <code>internal/risk.json</code> and "
        "<code>audit.json</code>. "
        "Steward-only.</footer>",
    ])
    title = f"INTERNAL utility: {audit.get('dataset', '?')} release {audit.get('release_id', '?')}"
    return _page(title, body)


def _risk_section(risk: Mapping[str, Any]) -> str:
    """Disclosure-risk checks: exact matches, distance to closest record, k-anonymity."""
    dcr = risk.get("dcr", {})
    kanon = risk.get("k_anonymity", {})
    real_k, syn_k = kanon.get("real", {}), kanon.get("synthetic", {})
    cards = '<div class="cards">' + "".join([
        _card("Exact matches", _esc(_pct(risk.get("exact_match_share"), 1.0)),
              "synthetic rows identical to some real row"),
        _card("Closest-record distance", _esc(_num(dcr.get("synthetic_median"), 3)),
              f"median, synthetic → real; real → real baseline {_esc(_num(dcr.get('real_median'), 3))}"),
        _card("Closer than real 5th pct.", _esc(_pct(dcr.get("share_closer_than_real_p05"), 1.0)),
              "share of synthetic rows (about 5 % is expected by chance)"),
        _card("k-anonymity (QIs)", f"{_esc(syn_k.get('k', '–'))} <small>synthetic</small>",
              f"real table: k = {_esc(real_k.get('k', '–'))}"),
    ]) + "</div>"
    thresholds = sorted(set(real_k.get("small_class_shares", {})) | set(syn_k.get("small_class_shares", {})),
                        key=lambda t: int(t) if str(t).isdigit() else 0)
    rows = [[_esc(label), _esc(k.get("classes", "–")), _esc(k.get("k", "–")),
             *[_esc(_pct(k.get("small_class_shares", {}).get(t), 1.0)) for t in thresholds]]
            for label, k in (("real", real_k), ("synthetic", syn_k))]
    table = _table(["table", "classes", "k", *[f"rows in classes < {t}" for t in thresholds]], rows, cls="num")
    dist_rows = [[_esc(label), _esc(_num(dcr.get(f"{key}_median"), 4)), _esc(_num(dcr.get(f"{key}_p05"), 4)),
                  _esc(dcr.get(f"{key}_sample", "–"))]
                 for label, key in (("synthetic → nearest real", "synthetic"), ("real → nearest other real", "real"))]
    dist = _table(["distance (Gower, 0–1)", "median", "5th percentile", "rows sampled"], dist_rows, cls="num")
    lead = ("The linkage attacks of re-identification: how often a synthetic row repeats a real one, how close "
            "synthetic rows come to real ones compared with how close real rows come to each other, and how "
            "small the groups sharing the same quasi-identifiers are. These are checks, not guarantees; the "
            "guarantee is the differential privacy of the release.")
    evaluated = risk.get("evaluated") or {}
    if evaluated.get("real_rows_evaluated") != evaluated.get("real_rows"):
        cards += ('<p class="small">At this size the checks run on samples: exact matches of '
                  f"{_esc(evaluated.get('exact_match', '–'))}; distances to the nearest of "
                  f"{_esc(evaluated.get('dcr_reference_rows', '–'))} real rows sampled uniformly; k-anonymity of "
                  f"samples of {_esc(evaluated.get('real_rows_evaluated', '–'))} rows of each table (a class of "
                  "the real sample is never larger than in the whole table).</p>")
    return _section("risk", "Disclosure risk", cards + dist + table, _esc(lead))
