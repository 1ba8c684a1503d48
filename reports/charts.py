"""The charts of the HTML reports, drawn with matplotlib's Agg backend and inlined as SVG."""

from __future__ import annotations

import base64
import io
import math
import re
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from dprelease.dp.errors import InternalError
from dprelease.reports.audit_records import Lifetime, Measurement, StageBudget
from dprelease.reports.html_parts import _esc, _num, _pct, _unit

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType

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



# ------------------------------------------------------------------------------------------- charts


def _chart(width_in: float, height_in: float, draw: Callable[[Figure], None], alt: str, *,
           constrained: bool = True) -> str:
    """Draw a figure with ``draw`` and return it as an ``<img>`` with a base64 PNG data URI.

    Deterministic: fixed style, fixed DPI, exact figure size (no tight bbox), no ``Software`` tag
    and no timestamp in the PNG. With ``constrained=False`` the figure keeps matplotlib's fixed
    margins (``draw`` may adjust them), so small multiples get plot areas of one size.
    """
    return _charts([(width_in, height_in, draw, alt, constrained)])[0]


ChartJob = tuple[float, float, "Callable[[Figure], None]", str, bool]
"""The arguments of :func:`_chart`: width and height in inches, the drawing, the alt text, constrained layout."""


def _charts(jobs: Sequence[ChartJob]) -> list[str]:
    """:func:`_chart` of each job, in order, drawn two at a time (the same images as one by one).

    Agg rasterises and zlib compresses PNGs partly without holding the GIL, so two threads draw a
    page of small multiples sooner on 2 cores. Each figure has its own canvas and pyplot is never
    used; the style (global rcParams) is set once around all of them, never per thread, and
    matplotlib caches fonts per thread.
    """
    import matplotlib

    with matplotlib.rc_context(_RC):
        if len(jobs) < 2:
            return [_render(*job) for job in jobs]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="dprelease-chart") as pool:
            return list(pool.map(lambda job: _render(*job), jobs))


class PageCharts:
    """The charts of one page, queued where they go and drawn together (two at a time) at the end.

    Each queued chart leaves a mark in the page (with a random nonce: no text of the page can
    forge one); :meth:`fill` draws every chart and puts each ``<img>`` in place of its mark.
    """

    def __init__(self) -> None:
        self.jobs: list[ChartJob] = []
        self.nonce = secrets.token_hex(8)

    def later(self, job: ChartJob) -> str:
        """Queue ``job``; returns the mark its ``<img>`` replaces."""
        self.jobs.append(job)
        return f"<!--chart {self.nonce} {len(self.jobs) - 1}-->"

    def fill(self, sections: list[str]) -> list[str]:
        """``sections`` with every mark replaced by its chart, in the order the charts were queued."""
        drawn = _charts(self.jobs)
        mark = re.compile(f"<!--chart {self.nonce} ([0-9]+)-->")
        return [mark.sub(lambda m: drawn[int(m.group(1))], section) for section in sections]


def _render(width_in: float, height_in: float, draw: Callable[[Figure], None], alt: str, constrained: bool) -> str:
    """One chart as an ``<img>`` (the style already set by the caller)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

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


def _draw_stage_budget(fig: Figure, stages: Sequence[StageBudget], release_total: float | None, unit: str,
                       colours: Mapping[str, str]) -> None:
    from matplotlib.patches import Patch

    ax = fig.add_subplot()
    names = [s.stage for s in stages]
    booked = [s.booked.value for s in stages]
    allocated = [None if s.allocated is None else s.allocated.value for s in stages]
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


def _draw_lifetime(fig: Figure, life: Lifetime, unit: str, cap_label: str) -> None:
    from matplotlib.patches import Patch

    ax = fig.add_subplot()
    cap = life.cap.value
    before = life.spent_before.value
    this = life.this_release.value
    remaining = max(life.remaining_after.value, 0.0)
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
    release_cap = None if life.per_release_cap is None else life.per_release_cap.value
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


def _draw_noise(fig: Figure, rows: Sequence[Measurement], colours: Mapping[str, str]) -> None:
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
    plotted: list[tuple[float, str, float, float | None]] = []
    for m in rows:
        stage = m.stage
        if stage != current:
            if current is not None:
                y += 0.6
            headers.append(len(labels))
            labels.append(stage)
            positions.append(y)
            stage_of.append(stage)
            y += 1.0
            current = stage
        labels.append(m.query)
        positions.append(y)
        stage_of.append(stage)
        if m.noise_std is None:
            raise InternalError("_draw_noise: a measurement without noise_std cannot be charted")
        plotted.append((y, stage, float(m.noise_std), None if m.ci95_halfwidth is None else float(m.ci95_halfwidth)))
        y += 1.0
    widest = max(float(ci or std) for _, _, std, ci in plotted)
    for yy, stage, std, ci in plotted:
        colour = colours[stage]
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
