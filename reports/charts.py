"""The charts of the HTML reports, written as inline SVG (:mod:`reports.svg`): no plotting library.

Each function returns one ``<svg>`` element sized for the page's content column (:data:`WIDTH`
CSS pixels; the histograms are small multiples). Every function is pure: the same arguments give
the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from dprelease.dp.errors import InternalError
from dprelease.reports.audit_records import Lifetime, Measurement, StageBudget
from dprelease.reports.html_parts import _num, _pct, _unit
from dprelease.reports.svg import AXIS, INK, MUTED, Axis, Svg, fit, nice_ticks, text_width

WIDTH = 998
"""CSS pixels: the content width of the page."""

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
_MUTED = MUTED

_LABEL = 11.0  # font sizes in CSS pixels
_SMALL = 10.0
_MAX_LABEL = 330.0  # the widest row label, in pixels (longer ones are cut with an ellipsis)


def _stage_colours(stages: Iterable[str]) -> dict[str, str]:
    colours: dict[str, str] = {}
    for stage in stages:
        if stage not in colours:
            colours[stage] = _STAGE_COLOURS[len(colours) % len(_STAGE_COLOURS)]
    return colours


def _left(labels: Iterable[str], size: float = _LABEL) -> float:
    """The x where the plot starts: room for the widest row label (at most :data:`_MAX_LABEL`)."""
    return 12 + min(_MAX_LABEL, max((text_width(label, size) for label in labels), default=0.0)) + 10


def _row_label(svg: Svg, left: float, y: float, label: str, *, size: float = _LABEL, fill: str = INK,
               bold: bool = False) -> None:
    svg.text(left - 10, y, fit(label, size, _MAX_LABEL), size=size, anchor="end", fill=fill, bold=bold)


def stage_budget_chart(stages: Sequence[StageBudget], release_total: float | None, unit: str,
                       colours: Mapping[str, str], alt: str) -> str:
    """Booked loss per stage (bars) and the plan's allocation (dashed outlines), with shares of the release."""
    row, top = 34.0, 30.0
    left = _left(s.stage for s in stages)
    bottom = top + row * len(stages)
    svg = Svg(WIDTH, bottom + 46, alt)
    booked = [s.booked.value for s in stages]
    allocated = [None if s.allocated is None else s.allocated.value for s in stages]
    largest = max([*booked, *(a for a in allocated if a is not None), 0.0]) or 1.0
    axis = Axis(0.0, largest * 1.75, left, WIDTH - 16)
    axis.draw(svg, top, bottom, f"booked privacy loss ({_unit(unit)}, the ledger's unit)")
    for i, (stage, b, a) in enumerate(zip(stages, booked, allocated, strict=True)):
        y = top + row * (i + 0.5)
        _row_label(svg, left, y, stage.stage)
        svg.rect(axis(0), y - 0.28 * row, axis(b) - axis(0), 0.56 * row, colours[stage.stage])
        if a is not None:
            svg.rect(axis(0), y - 0.39 * row, axis(a) - axis(0), 0.78 * row, "none", stroke=INK, dash="3 2",
                     stroke_width=0.9)
        share = f"  ·  {100 * b / release_total:.1f} % of the release budget" if release_total else ""
        svg.text(axis(max(b, a or 0.0)) + 6, y, f"{_num(b, 4)} {_unit(unit)}{share}", size=_SMALL)
    entries = [("booked in the ledger", MUTED, "fill")]
    if any(a is not None for a in allocated):
        entries.append(("allocated by the plan", INK, "dashed"))
    svg.legend(WIDTH - 8, 13, entries, anchor="end")
    return svg.render()


def lifetime_chart(life: Lifetime, unit: str, cap_label: str, alt: str) -> str:
    """The dataset's lifetime budget as one stacked bar: earlier releases, this one, open ones, remaining."""
    cap = life.cap.value
    before, this = life.spent_before.value, life.this_release.value
    remaining = max(life.remaining_after.value, 0.0)
    other = max(cap - before - this - remaining, 0.0)
    if other <= cap * 1e-9:
        other = 0.0
    segments = [("spent by earlier releases", before, _BEFORE, "fill"), ("this release", this, _ACCENT, "fill"),
                ("reserved by open releases", other, _OTHER, "hatched"),
                ("remaining after this release", remaining, _REMAINING, "fill")]
    top, bar = 28.0, 40.0
    bottom = top + bar + 26
    axis = Axis(0.0, cap or 1.0, 16, WIDTH - 16)
    entries = [(f"{label}: {_num(width, 4)} {_unit(unit)} ({_pct(width, cap)})", colour, key)
               for label, width, colour, key in segments if not (key == "hatched" and width == 0.0)]
    probe = Svg(WIDTH, 0, alt)
    legend_height = probe.legend_rows(WIDTH / 2, 0, entries, WIDTH - 40)
    svg = Svg(WIDTH, bottom + 44 + legend_height, alt)
    axis.draw(svg, top - 4, bottom, f"lifetime budget of the dataset ({_unit(unit)})")
    start = 0.0
    for _, width, colour, key in segments:
        if key == "hatched" and width == 0.0:
            continue
        svg.rect(axis(start), top, axis(start + width) - axis(start), bar, colour, stroke="#fff")
        if key == "hatched":
            for k in range(int((axis(start + width) - axis(start)) // 8)):
                x = axis(start) + 8 * k
                svg.line(x, top + bar, x + 8, top, "#92400e", width=0.6)
        if cap and width / cap > 0.09:
            svg.text((axis(start) + axis(start + width)) / 2, top + bar / 2, f"{100 * width / cap:.1f} %",
                     size=_LABEL, anchor="middle", fill="#fff" if colour in (_ACCENT, _BEFORE) else INK)
        start += width
    svg.line(axis(cap), top - 6, axis(cap), top + bar + 6, INK, width=1.6)
    svg.text(axis(cap), top - 14, f"lifetime cap {cap_label}", size=_LABEL, anchor="end", bold=True)
    release_cap = None if life.per_release_cap is None else life.per_release_cap.value
    if release_cap is not None and cap and before + release_cap <= cap:
        x = axis(before + release_cap)
        svg.line(x, top - 2, x, top + bar + 2, INK, width=1.1, dash="3 2")
        svg.text(x, top + bar + 13, f"per-release cap: {_num(release_cap, 4)} {_unit(unit)}", size=_SMALL,
                 anchor="start" if before + release_cap < cap * 0.6 else "end", fill=MUTED)
    svg.legend_rows(WIDTH / 2, bottom + 50, entries, WIDTH - 40)
    return svg.render()


def noise_chart(rows: Sequence[Measurement], colours: Mapping[str, str], alt: str) -> str:
    """Per measurement, ±1 noise standard deviation (bar) and the noise's 95 % interval, grouped by stage."""
    row, top = 19.0, 30.0
    placed: list[tuple[float, Measurement | None, str]] = []  # (y, measurement or a stage header, stage)
    y = top
    current: str | None = None
    for m in rows:
        if m.noise_std is None:
            raise InternalError("noise_chart: a measurement without noise_std cannot be charted")
        if m.stage != current:
            y += 0.6 * row if current is not None else 0.0
            placed.append((y + row / 2, None, m.stage))
            y += row
            current = m.stage
        placed.append((y + row / 2, m, m.stage))
        y += row
    bottom = y + 4
    left = _left([item.query if item is not None else stage for _, item, stage in placed], _SMALL)
    widest = max(float(m.ci95_halfwidth or m.noise_std or 0.0) for m in rows) or 1.0
    axis = Axis(-widest * 1.08, widest * 1.08, left, WIDTH - 200)
    svg = Svg(WIDTH, bottom + 46, alt)
    ticks = [t for t in nice_ticks(-widest, widest, 6) if abs(t) <= widest * 1.08]
    axis.draw(svg, top, bottom, "noise added to each released cell (counts)", ticks)
    svg.line(axis(0), top, axis(0), bottom, INK, width=0.6)
    for yy, item, stage in placed:
        if item is None:
            _row_label(svg, left, yy, stage, size=_SMALL, fill=colours[stage], bold=True)
            continue
        _row_label(svg, left, yy, item.query, size=_SMALL)
        std = float(item.noise_std or 0.0)
        svg.rect(axis(-std), yy - 0.275 * row, axis(std) - axis(-std), 0.55 * row, colours[stage], opacity=0.9)
        note = f"σ {_num(std, 4)}"
        if item.ci95_halfwidth is not None:
            ci = float(item.ci95_halfwidth)
            svg.line(axis(-ci), yy, axis(ci), yy, INK)
            for x in (axis(-ci), axis(ci)):
                svg.line(x, yy - 4, x, yy + 4, INK)
            note += f"   95 % ±{_num(ci, 4)}"
        svg.text(WIDTH - 190, yy, note, size=9.5, fill=MUTED)
    svg.legend(WIDTH / 2, 13, [("±1 noise standard deviation", MUTED, "fill"),
                               ("95 % interval of the noise", INK, "interval")], anchor="middle")
    return svg.render()


def _bars(svg: Svg, placed: Sequence[tuple[float, str, float, str]], row: float, left: float, top: float,
          bottom: float, mean: float | None, mean_label: str, xlabel: str) -> None:
    """Horizontal bars at (y, label, value, colour) with their values, an axis and a dashed mean line."""
    largest = max([*(v for _, _, v, _ in placed), mean or 0.0, 1e-9])
    axis = Axis(0.0, largest * 1.15, left, WIDTH - 16)
    axis.draw(svg, top, bottom, xlabel)
    for y, label, value, colour in placed:
        _row_label(svg, left, y, label, size=_SMALL)
        svg.rect(axis(0), y - 0.31 * row, axis(value) - axis(0), 0.62 * row, colour)
        svg.text(axis(value) + 4, y, _num(value, 3), size=9.5, fill=MUTED)
    if mean is not None:
        svg.line(axis(mean), top - 6, axis(mean), bottom, INK, dash="4 2")
        svg.text(axis(mean) + 4, top - 10, f"{mean_label} {_num(mean, 3)}", size=_SMALL)


def hbars_chart(names: Sequence[str], values: Sequence[float], colours: Sequence[str], *, mean: float | None,
                mean_label: str, xlabel: str, alt: str) -> str:
    """One bar per name, in the order given, with a dashed line at ``mean``."""
    row, top = 22.0, 26.0
    placed = [(top + row * (i + 0.5), n, float(v), c) for i, (n, v, c) in enumerate(zip(names, values, colours,
                                                                                           strict=True))]
    bottom = top + row * len(names)
    svg = Svg(WIDTH, bottom + 46, alt)
    _bars(svg, placed, row, _left(names, _SMALL), top, bottom, mean, mean_label, xlabel)
    return svg.render()


def pairs_chart(worst: Sequence[tuple[str, float]], best: Sequence[tuple[str, float]], mean: float | None,
                measured: Callable[[str], bool], alt: str) -> str:
    """The worst and the best pairs by TVD (● marks a measured pair), with the mean 2-way TVD."""
    row, top = 22.0, 44.0
    placed: list[tuple[float, str, float, str]] = []
    y = top
    for group, colour in ((worst, _WORSE), (best, _BETTER)):
        for name, value in group:
            placed.append((y + row / 2, name.replace("|", " × ") + ("  ●" if measured(name) else ""), value,
                           colour))
            y += row
        y += 0.7 * row
    bottom = y - 0.7 * row
    svg = Svg(WIDTH, bottom + 46, alt)
    _bars(svg, placed, row, _left([label for _, label, _, _ in placed], _SMALL), top, bottom, mean,
          "mean 2-way TVD", "total variation distance, real vs synthetic (0 = identical, 1 = disjoint)")
    svg.legend(WIDTH / 2, 11, [(f"worst {len(worst)}", _WORSE, "fill"), (f"best {len(best)}", _BETTER, "fill")],
               anchor="middle")
    return svg.render()


def histogram_chart(column: str, labels: Sequence[str], real: Sequence[float], synthetic: Sequence[float],
                    tvd: float | None, alt: str) -> str:
    """A small multiple: real and synthetic relative frequencies of one column, side by side per label."""
    width, height = 322.0, 221.0
    left, right, top, bottom = 44.0, width - 8, 28.0, height - 64
    svg = Svg(width, height, alt)
    title = column if tvd is None else f"{column}  ·  TVD {_num(tvd, 3)}"
    svg.text(6, 11, fit(title, 11.5, width - 12), size=11.5, bold=True)
    largest = max([*real, *synthetic, 1e-9])
    ticks = nice_ticks(0.0, largest, 4)
    y_of = Axis(0.0, max(ticks[-1], largest), bottom, top)
    y_of.draw_y(svg, left, right, ticks)
    n = len(labels)
    slot = (right - left) / max(n, 1)
    bar = slot * (0.42 if n <= 40 else 0.5)
    for i, (r, s) in enumerate(zip(real, synthetic, strict=True)):
        centre = left + slot * (i + 0.5)
        svg.rect(centre - bar, y_of(r), bar, bottom - y_of(r), _REAL)
        svg.rect(centre, y_of(s), bar, bottom - y_of(s), _SYNTH)
    svg.line(left, bottom, right, bottom, AXIS, width=0.8)
    step = max(1, -(-n // 8))
    for i in range(0, n, step):
        label = labels[i] if len(labels[i]) <= 14 else labels[i][:13] + "…"
        svg.text(left + slot * (i + 0.5), bottom + 8, label, size=8.5, anchor="end", rotate=-35)
    return svg.render()


def intervals_chart(panels: Sequence[tuple[str, Sequence[tuple[str, float, float | None, float | None, bool]]]],
                    alt: str) -> str:
    """One panel per subject: per group, an estimate and its 95 % interval (quantiles drawn as ticks).

    Each row of a panel is (group, estimate, low, high, is_quantile).
    """
    row, title, axis_room = 24.0, 26.0, 28.0
    left = _left([group for _, rows in panels for group, *_ in rows])
    height = sum(title + row * len(dict.fromkeys(g for g, *_ in rows)) + axis_room for _, rows in panels)
    svg = Svg(WIDTH, height + 6, alt)
    y = 0.0
    for subject, rows in panels:
        groups = list(dict.fromkeys(group for group, *_ in rows))
        values = [v for _, estimate, low, high, _ in rows for v in (estimate, low, high) if v is not None]
        low_all, high_all = min(values), max(values)
        pad = (high_all - low_all) * 0.05 or abs(high_all) * 0.05 or 1.0
        axis = Axis(low_all - pad, high_all + pad, left, WIDTH - 16)
        svg.text(8, y + 12, fit(subject, 12, WIDTH - 16), size=12, bold=True)
        top, bottom = y + title, y + title + row * len(groups)
        axis.draw(svg, top, bottom, "")
        position = {group: index for index, group in enumerate(groups)}  # groups.index per row was quadratic
        for group in groups:
            _row_label(svg, left, top + row * (position[group] + 0.5), group)
        for group, estimate, low, high, quantile in rows:
            yy = top + row * (position[group] + 0.5)
            colour = MUTED if quantile else _ACCENT
            if low is not None and high is not None:
                svg.line(axis(low), yy, axis(high), yy, colour, width=1.0 if quantile else 2.2)
            if quantile:
                svg.line(axis(estimate), yy - 6, axis(estimate), yy + 6, colour, width=1.6)
            else:
                svg.circle(axis(estimate), yy, 3.5, colour)
        y = bottom + axis_room
    return svg.render()


def estimates_chart(title: str, labels: Sequence[str], shares: Sequence[float],
                    intervals: Sequence[tuple[float, float]] | None, alt: str) -> str:
    """Estimated shares per value as columns, with their 95 % intervals: a local-DP collection's ``chart.svg``.

    A file of its own (with the SVG namespace), not a page's inline chart.
    """
    n = len(labels)
    left, top = 56.0, 30.0
    longest = min(140.0, max((text_width(label, 9.0) for label in labels), default=0.0))
    bottom = top + 260
    svg = Svg(WIDTH, bottom + longest + 30, alt)
    svg.text(8, 12, fit(title, 12, WIDTH - 16), size=12, bold=True)
    values = [*shares, *(v for pair in intervals or () for v in pair), 0.0]
    low, high = min(values), max(values) or 1.0
    ticks = nice_ticks(low, high, 5)
    y_of = Axis(min(ticks[0], low), max(ticks[-1], high), bottom, top)
    y_of.draw_y(svg, left, WIDTH - 8, ticks, size=9.5)
    svg.text(12, (top + bottom) / 2, "estimated share of reports", size=10, anchor="middle", rotate=-90)
    slot = (WIDTH - 8 - left) / max(n, 1)
    for i, share in enumerate(shares):
        centre = left + slot * (i + 0.5)
        svg.rect(centre - slot * 0.35, y_of(max(share, 0.0)), slot * 0.7, y_of(min(share, 0.0)) - y_of(max(share, 0.0)),
                 "#4477aa")
        if intervals is not None:
            a, b = intervals[i]
            svg.line(centre, y_of(a), centre, y_of(b), INK)
            for y in (y_of(a), y_of(b)):
                svg.line(centre - min(4.0, slot * 0.3), y, centre + min(4.0, slot * 0.3), y, INK)
        svg.text(centre, bottom + 6, fit(labels[i], 9.0, 140.0), size=9.0, anchor="end", rotate=-90)
    svg.line(left, y_of(0.0), WIDTH - 8, y_of(0.0), AXIS, width=0.8)
    return svg.render(standalone=True)
