"""Self-contained HTML renderings of the audit report (public) and the utility report (steward-only).

:func:`render_html` is a pure function of :func:`reports.audit.build_audit`'s output: the same audit
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

from collections.abc import Mapping
from typing import Any

from dprelease.reports.charts import (
    _MUTED,
    _WIDTH_IN,
    _chart,
    _draw_lifetime,
    _draw_noise,
    _draw_stage_budget,
    _stage_colours,
)
from dprelease.reports.html_parts import (
    _amount,
    _card,
    _chips,
    _code,
    _dl,
    _esc,
    _exact,
    _num,
    _pct,
    _sci_html,
    _section,
    _short,
    _table,
    _unit,
    _value,
)

__all__ = ["render_html"]

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

    A pure function of ``audit`` (the output of :func:`reports.audit.build_audit`): identical
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
