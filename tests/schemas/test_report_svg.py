"""The reports' SVG writer and charts: round ticks, escaped text, sane markup on degenerate and hostile inputs."""

from __future__ import annotations

import itertools
import math
import re
import xml.etree.ElementTree as ET

import pytest

from dprelease.reports import charts
from dprelease.reports.svg import Axis, Svg, fit, nice_ticks, text_width, tick_label


@pytest.mark.parametrize(("low", "high"), [(0.0, 1.0), (0.0, 0.0123), (-87.4, 87.4), (0.0, 3e7), (12.0, 13.0),
                                           (-1e-6, 5e-6), (0.0, 0.1206)])
def test_ticks_are_round_evenly_spaced_and_inside_the_range(low, high):
    ticks = nice_ticks(low, high, 6)
    assert 2 <= len(ticks) <= 11
    assert all(low - 1e-12 <= t <= high + 1e-12 for t in ticks)
    steps = {round(b - a, 12) for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1
    step = steps.pop()
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert any(math.isclose(mantissa, m) for m in (1.0, 2.0, 2.5, 5.0))
    labels = [tick_label(t, ticks) for t in ticks]
    assert len(set(labels)) == len(labels)  # enough decimals to tell every tick apart


def test_ticks_of_an_empty_or_broken_range():
    assert nice_ticks(1.0, 1.0) == [1.0]
    assert nice_ticks(float("nan"), 1.0) == []
    assert nice_ticks(0.0, float("inf")) == [0.0]


def test_tick_labels_use_a_minus_sign_and_thin_space_grouping():
    assert tick_label(-50.0, [-50.0, 0.0, 50.0]) == "−50"
    assert tick_label(25_000.0, [0.0, 25_000.0]) == "25\u2009000"
    assert tick_label(0.025, [0.0, 0.025, 0.05]) == "0.025"


def test_text_is_cut_to_fit_and_wider_text_measures_wider():
    assert text_width("WWW", 11) > text_width("iii", 11) > 0
    assert fit("short", 11, 200) == "short"
    cut = fit("a very long column name " * 10, 11, 120)
    assert cut.endswith("…") and text_width(cut, 11) <= 120


def test_svg_escapes_text_and_alt_and_loads_nothing():
    svg = Svg(100, 50, 'alt "quoted" <b>')
    svg.text(10, 10, "<script>alert(1)</script> & $x$")
    svg.rect(10, 10, -5, -5, "#000")  # negative extents are drawn from the other corner
    out = svg.render()
    assert "<script" not in out and "&lt;script&gt;" in out and "&amp; $x$" in out
    assert 'aria-label="alt &quot;quoted&quot; &lt;b&gt;"' in out
    assert 'x="5" y="5" width="5" height="5"' in out
    root = ET.fromstring(out)  # well-formed markup
    assert root.tag == "svg" and root.find("title") is not None


def test_axis_maps_the_range_onto_the_pixels():
    axis = Axis(-1.0, 1.0, 100, 300)
    assert axis(-1.0) == 100 and axis(0.0) == 200 and axis(1.0) == 300
    assert Axis(0.0, 0.0, 0, 10)(0.0) == 0  # an empty range does not divide by zero


def _well_formed(chart: str) -> ET.Element:
    root = ET.fromstring(chart)
    numbers = [v for element in root.iter() for k, v in element.attrib.items() if k in ("x", "y", "width", "height")]
    for value in numbers:
        assert math.isfinite(float(value)), value
    assert not re.search(r'="[^"]*\b(nan|inf)\b', chart)
    return root


def test_charts_of_degenerate_inputs_are_well_formed():
    """All-zero values, one row, one label, empty groups: no division by zero, no NaN coordinates."""
    _well_formed(charts.hbars_chart(["a"], [0.0], ["#000"], mean=None, mean_label="mean", xlabel="x", alt="a"))
    _well_formed(charts.hbars_chart(["a", "b"], [0.0, 0.0], ["#000"] * 2, mean=0.0, mean_label="mean", xlabel="",
                                    alt="a"))
    _well_formed(charts.pairs_chart([("a|b", 0.0)], [], None, lambda _: True, "pairs"))
    _well_formed(charts.histogram_chart("c", ["x"], [0.0], [0.0], None, "h"))
    _well_formed(charts.histogram_chart("c", [str(i) for i in range(300)], [1 / 300] * 300, [1 / 300] * 300, 0.0,
                                        "many labels"))
    _well_formed(charts.intervals_chart([("s", [("all rows", 5.0, None, None, False)])], "one point"))
    _well_formed(charts.estimates_chart("t", ["a", "b"], [-0.01, 0.0], [(-0.05, 0.03), (-0.01, 0.01)], "negative"))
    _well_formed(charts.estimates_chart("t", ["a"], [0.0], None, "no intervals"))
    _well_formed(charts.intervals_chart([("s", [("g", 0.0, 0.0, 0.0, True)]),
                                         ("t", [("g", -1e9, -2e9, 3e9, False)])], "flat and wide"))


def test_hostile_labels_stay_text_in_every_chart():
    hostile = '<img src=x onerror=alert(1)>"&'
    pieces = [
        charts.hbars_chart([hostile], [0.5], ["#000"], mean=0.5, mean_label=hostile, xlabel=hostile, alt=hostile),
        charts.pairs_chart([(f"{hostile}|b", 0.3)], [("c|d", 0.1)], 0.2, lambda _: False, hostile),
        charts.histogram_chart(hostile, [hostile, "b"], [0.5, 0.5], [0.4, 0.6], 0.1, hostile),
        charts.intervals_chart([(hostile, [(hostile, 1.0, 0.5, 1.5, False)])], hostile),
    ]
    for chart in pieces:
        assert "<img" not in chart and "onerror=alert" not in chart.replace("onerror=alert(1)&gt;", "")
        root = _well_formed(chart)
        assert all(element.tag in ("svg", "title", "rect", "line", "text", "circle") for element in root.iter())


def test_long_row_labels_are_cut_and_the_plot_keeps_its_room():
    name = "x" * 500
    chart = charts.hbars_chart([name], [1.0], ["#000"], mean=None, mean_label="", xlabel="", alt="long")
    assert name not in chart and "…" in chart
    bars = [r for r in _well_formed(chart).iter("rect") if r.get("fill") == "#000"]
    assert float(bars[0].get("x")) < charts.WIDTH / 2  # the label took at most a third of the width
