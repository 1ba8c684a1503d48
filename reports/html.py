"""Self-contained HTML renderings of the audit report (public) and the utility report (steward-only).

:func:`render_html` is a pure function of the :class:`reports.audit_records.Audit` that
:func:`reports.audit.build_audit` assembles: the same audit
gives the same bytes, so re-running a release reproduces its public files exactly. The page needs no
network when opened: the CSS is inline, there is no script, and the charts are inline SVG markup
(:mod:`reports.charts`); a Content-Security-Policy meta tag forbids every resource. Every string from
the audit is escaped with :func:`html.escape`.

:func:`render_internal_html` renders the TVD yardstick of ``internal/utility.json``, which compares
the synthetic table with the real one: it is for the data steward and must never be published.
"""

from __future__ import annotations

from collections.abc import Mapping

from dprelease.reports.audit_records import AUDIT_FORMAT, Amount, Audit, Measurement
from dprelease.reports.charts import (
    _MUTED,
    _stage_colours,
    lifetime_chart,
    noise_chart,
    stage_budget_chart,
)
from dprelease.reports.html_parts import (
    _amount,
    _card,
    _chips,
    _code,
    _dl,
    _esc,
    _num,
    _pct,
    _sci_html,
    _section,
    _short,
    _table,
    _unit,
)
from dprelease.reports.statistics import html_section

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
svg.chart{display:block;max-width:100%;height:auto;margin:10px 0 6px}
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
.grid svg.chart{margin:0}
footer{color:var(--muted);font-size:12.5px;padding:14px 36px}
@media print{body{background:#fff}section{break-inside:avoid;border:0;margin:0}nav.toc{display:none}
header.top,.banner{-webkit-print-color-adjust:exact;print-color-adjust:exact}}
""".strip()

_CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


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


def _budget_text(audit: Audit) -> tuple[str, str]:
    """The declared (epsilon, delta) as HTML, and as chart text."""
    declared = audit.budget.declared
    eps = declared.epsilon.value
    delta = float(declared.delta)
    html_text = f"({_esc(_num(eps))}, {_sci_html(delta)})"
    return html_text, f"ε = {_num(eps)}, δ = {_num(delta)}"


def _header(audit: Audit, kicker: str) -> str:
    return (
        f'<header class="top"><div class="kicker">{_esc(kicker)}</div>'
        f"<h1>Dataset {_esc(audit.dataset)}</h1>"
        f'<div class="sub">Release {_code(audit.release_id)} · table {_code(audit.table)}'
        f" · {_esc(audit.privacy.definition)}</div></header>"
    )


def _cards(audit: Audit) -> str:
    budget, privacy, life = audit.budget, audit.privacy, audit.lifetime
    eps_delta, _ = _budget_text(audit)
    definition = privacy.definition
    cards = [
        _card("Definition", _esc(definition), _esc(privacy.unit), long=len(definition) > 18),
        _card("Declared (ε, δ)", eps_delta, "budget of this release"),
    ]
    note = ""
    if (conv := budget.booked_as_epsilon_delta) is not None:
        note = f"as (ε, δ) = ({_esc(_num(conv.epsilon.value))}, {_sci_html(conv.delta)})"
    cards.append(_card(f"Booked {_unit(budget.unit)}", _esc(_num(budget.booked.value, 4)), note))
    cap = life.cap.value
    used = life.spent_before.value + life.this_release.value
    cards.append(_card("Lifetime used", _esc(_pct(used, cap)),
                       f"of a cap of {_esc(_num(cap, 4))} {_esc(_unit(budget.unit))}; never renewed"))
    return '<div class="cards">' + "".join(cards) + "</div>"


def _protection(audit: Audit) -> str:
    privacy = audit.privacy
    items = [("Privacy unit", _esc(privacy.unit)), ("Neighbouring datasets", _esc(privacy.neighbouring)),
             ("Definition", _esc(privacy.definition)), ("Accountant", _esc(privacy.accountant)),
             ("Conversion to (ε, δ)", _esc(privacy.conversion)), ("δ", _sci_html(privacy.delta)),
             ("Noise", _esc(privacy.noise))]
    return _section("protection", "What is protected", _dl(items),
                    "The guarantee below covers every file of this release; it is stated for one privacy unit.")


def _stage_section(audit: Audit, colours: Mapping[str, str]) -> str:
    budget = audit.budget
    unit = budget.unit
    stages = budget.stages
    release_total = budget.reserved.value
    parts = []
    if stages:
        parts.append(stage_budget_chart(stages, release_total, unit, colours,
                                        f"Bar chart of the privacy loss booked by each stage, in {unit}, and its "
                                        "share of the release budget."))
    rows = []
    for s in stages:
        rows.append([
            f'<span class="swatch" style="background:{colours[s.stage]}"></span>{_code(s.stage)}',
            _amount(s.allocated, unit),
            _amount(s.booked, unit),
            _esc(_pct(s.booked.value, release_total)),
        ])
    rows.append(["<strong>total</strong>", _amount(budget.reserved, unit), _amount(budget.booked, unit),
                 _esc(_pct(budget.booked.value, release_total))])
    u = _unit(unit)
    parts.append(_table(["stage", f"allocated {u}", f"booked {u}", "share of release budget"], rows, cls="num"))
    if (conv := budget.booked_as_epsilon_delta) is not None:
        parts.append(f'<p class="small">Booked {_esc(u)} as (ε, δ): ({_esc(_num(conv.epsilon.value, 6))}, '
                     f"{_sci_html(conv.delta)}). Hover an amount for its exact rational value.</p>")
        if budget.delta_spent is not None:
            parts.append(f'<p class="small">(ε, δ) mechanisms (PTR, smooth sensitivity) spent δ = '
                         f"{_sci_html(budget.delta_spent)} of the declared δ; the conversion uses the δ left.</p>")
    else:
        parts.append('<p class="small">Hover an amount for its exact rational value.</p>')
    parts.append(_exact_details(audit))
    lead = (f"Budget is booked in the ledger's unit, {_esc(u)} ({_esc(unit)}). The release budget (reserved before "
            f"any data was read) is {_esc(_num(release_total, 6))} {_esc(u)}; shares below are of that amount.")
    return _section("budget", "Budget allocation by stage", "".join(parts), lead)


def _lifetime_section(audit: Audit) -> str:
    life = audit.lifetime
    unit = life.unit
    u = _unit(unit)
    cap = life.cap.value
    conv = life.cap_as_epsilon_delta
    cap_label = f"{_num(cap, 4)} {u}"
    if conv is not None:
        cap_label += f" (ε = {_num(conv.epsilon.value)}, δ = {_short(conv.delta)})"
    parts = []
    if cap:
        parts.append(lifetime_chart(life, unit, cap_label,
                                    f"Stacked bar of the dataset's lifetime budget in {unit}: spent by earlier "
                                    "releases, spent by this release, and remaining, against the cap."))
    rows = [["lifetime cap", _amount(life.cap, unit), "100 %"],
            ["spent by earlier releases", _amount(life.spent_before, unit),
             _esc(_pct(life.spent_before.value, cap))],
            ["this release", _amount(life.this_release, unit),
             _esc(_pct(life.this_release.value, cap))],
            ["remaining after this release", _amount(life.remaining_after, unit),
             _esc(_pct(life.remaining_after.value, cap))]]
    if life.per_release_cap is not None:
        rows.append(["per-release cap", _amount(life.per_release_cap, unit),
                     _esc(_pct(life.per_release_cap.value, cap))])
    parts.append(_table(["", f"{u}", "share of cap"], rows, cls="num"))
    notes = []
    if conv is not None:
        notes.append(f"Cap as (ε, δ): ({_esc(_num(conv.epsilon.value, 6))}, {_sci_html(conv.delta)}).")
    if life.renewal:
        notes.append(f"Renewal: {_esc(life.renewal)}.")
    if notes:
        parts.append(f'<p class="small">{" ".join(notes)}</p>')
    return _section("lifetime", "Lifetime budget of the dataset", "".join(parts),
                    "Every release of this population draws on one lifetime budget recorded in the ledger.")


def _native_text(m: Measurement) -> str:
    """A measurement's native loss, or "= booked" when it is the booked amount in the same unit."""
    native = m.native_loss
    if native.unit == m.booked.unit and native.amount.exact == m.booked.amount.exact:
        return '<span class="same">= booked</span>'
    return f"{_esc(_unit(native.unit))} {_amount(native.amount, native.unit)}"


def _measurement_section(audit: Audit, colours: Mapping[str, str]) -> str:
    unit = audit.budget.unit
    u = _unit(unit)
    measurements = audit.measurements
    ordered: list[Measurement] = []
    for stage in colours:
        ordered.extend(m for m in measurements if m.stage == stage)
    noisy = [m for m in ordered if m.noise_std is not None]
    parts = []
    if noisy:
        parts.append(noise_chart(noisy, colours, "Error bars of the noise on each released cell, per measurement, "
                                                 "grouped by stage: one noise standard deviation and the 95 % "
                                                 "interval."))
    silent = [m for m in ordered if m.noise_std is None]
    if silent:
        names = sorted({m.mechanism for m in silent})
        parts.append(f'<p class="small">Not charted: {len(silent)} measurement(s) by {_esc(" and ".join(names))}, '
                     "which release no noisy value, only which query first crossed a noisy threshold. Their noise "
                     "scale is in the table.</p>")
    rows: list[list[str]] = []
    for m in ordered:
        kind = "σ" if m.scale_kind == "sigma" else "b"
        rows.append([
            f'<span class="swatch" style="background:{colours.get(m.stage, _MUTED)}"></span>{_esc(m.stage)}',
            _code(m.query),
            _esc(m.mechanism),
            _esc(m.sensitivity),
            f"{kind} = {_esc(_num(m.scale, 5))}",
            _amount(m.booked.amount, unit),
            _native_text(m),
            _esc(_num(m.cells)),
            _esc(_num(m.noise_std, 4)),
            _esc(_num(m.ci95_halfwidth, 4)),
        ])
    head = ["stage", "query", "mechanism", "sensitivity", "scale", f"booked {u}", "native loss", "cells",
            "noise std", "95 % ±"]
    parts.append(_table(head, rows, cls="num measurements"))
    lead = (f"{len(measurements)} noisy measurements, in the order they were drawn. Each released cell of a marginal "
            "carries independent noise of the standard deviation shown; 95 % of cells are within the half-width.")
    return _section("measurements", "Measurements and their noise", "".join(parts), lead)


def _selected_pairs(audit: Audit) -> str:
    chosen = audit.private_choices.selected_pairs
    if chosen is None:
        return ""
    rows = [[_esc(i), _code(" × ".join(p))] for i, p in enumerate(chosen.pairs, 1)]
    return (f"<h3>2-way marginals chosen privately</h3><p class=\"small\">{_esc(chosen.method)}; "
            f"booked {_amount(chosen.booked, audit.budget.unit)}.</p>" + _table(["round", "pair"], rows))


def _junction_choices(audit: Audit) -> str:
    junction = audit.private_choices.junction_tree
    if junction is None:
        return ""
    tree = _chips(" – ".join(_esc(c) for c in p) for p in junction.spanning_tree)
    rows = []
    for i, clique in enumerate(junction.cliques, 1):
        *parents, child = clique
        rows.append([_esc(i), _code(child), " ".join(_code(p) for p in parents)])
    bins = ", ".join(f"{_esc(c)}: {_esc(n)}" for c, n in junction.coarse_bins.items())
    return (f"<h3>Model structure chosen privately</h3><p class=\"small\">{_esc(junction.method)}; "
            f"booked {_amount(junction.booked, audit.budget.unit)}. Root: {_esc(junction.root)}.</p>"
            f"<p><strong>Spanning tree</strong> {tree}</p>"
            + _table(["clique", "column", "conditioned on"], rows)
            + (f'<p class="small">Coarse bins inside cliques: {bins}.</p>' if bins else ""))


def _bounds_section(audit: Audit) -> str:
    bounds = audit.private_choices.discovered_bounds
    if not bounds:
        return _section("bounds", "Private choices", '<p class="small">No column needed discovered bounds.</p>'
                        + _selected_pairs(audit) + _junction_choices(audit))

    def cell(value: float, found: bool) -> str:
        badge = ('<span class="badge ok">found</span>' if found
                 else '<span class="badge fallback">search range</span>')
        return f"{_esc(_num(value, 6))} {badge}"

    rows = [[_code(col), cell(b.lower, b.lower_found), cell(b.upper, b.upper_found),
             _esc(f"lower {b.lower_quality}; upper {b.upper_quality}" if b.lower_quality or b.upper_quality else "-")]
            for col, b in bounds.items()]
    notes = sorted({b.note for b in bounds.values() if b.note})
    body = _table(["column", "lower", "upper", "quality"], rows)
    body += "".join(f'<p class="small">{_esc(n[:1].upper() + n[1:])}.</p>' for n in notes)
    body = "<h3>Bounds discovered privately</h3>" + body + _selected_pairs(audit) + _junction_choices(audit)
    return _section("bounds", "Private choices", body,
                    "Data-dependent choices are themselves DP outputs: clipping bounds (the bounds stage) and, "
                    "when they are not declared, what to measure: 2-way marginals or the model's cliques (the "
                    "selection stage).")


def _public_inputs_section(audit: Audit) -> str:
    inputs = audit.public_inputs
    items = [("Schema file", _code(inputs.schema_file)), ("Schema SHA-256", _code(inputs.schema_sha256))]
    if inputs.allocation:
        items.append(("Allocation", _chips(f"{_esc(k)}: {_esc(v)}" for k, v in inputs.allocation.items())))
    pairs = inputs.two_way_pairs
    if isinstance(pairs, str):
        items.append(("2-way marginals", _esc(pairs)))
    elif pairs:
        items.append(("2-way marginals", _chips(" × ".join(_esc(c) for c in p) for p in pairs)))
    for h in inputs.hierarchies or ():
        levels = " > ".join(_esc(x) for x in [*h.levels, h.column])
        nodes = ", ".join(_esc(n) for n in h.nodes_per_level)
        items.append((f"Hierarchy {h.name}", f"{levels} <span class=\"small\">({nodes} nodes above "
                      f"the column; level weights {_esc(' : '.join(h.level_weights))})</span>"))
    return _section("inputs", "Public inputs", _dl(items),
                    "Chosen without looking at the data; anyone may know them.")


def _post_section(audit: Audit) -> str:
    post = audit.post_processing
    items = [("Sampling seed (public)", _code(post.sampling_seed)), ("Synthetic rows", _esc(post.synthetic_rows)),
             ("Row count", _esc(post.row_count)), ("Consistency", _esc(post.consistency)), ("Model", _esc(post.model))]
    if post.model_edges:
        items.append(("Model edges", _chips(" → ".join(_esc(c) for c in e) for e in post.model_edges)))
    if post.hierarchies is not None:
        items.append(("hierarchies", _esc(post.hierarchies)))
    return _section("post", "Post-processing and sampling", _dl(items),
                    "Everything after the noisy measurements is post-processing of DP outputs and public inputs: it "
                    "spends no budget.")


def _provenance_section(audit: Audit) -> str:
    rows = [[_esc(k), _code(v)] for k, v in audit.provenance.items()]
    return _section("provenance", "Provenance", _table(["component", "version"], rows))


def _limitations_section(audit: Audit) -> str:
    items = "".join(f"<li>{_esc(t)}</li>" for t in audit.limitations)
    return _section("limitations", "Limitations", f'<div class="callout"><ol>{items}</ol></div>',
                    "What differential privacy, as applied here, does not promise.")


def _exact_details(audit: Audit) -> str:
    budget, life = audit.budget, audit.lifetime
    lines: list[tuple[str, Amount | None]] = [("release: reserved", budget.reserved),
                                              ("release: booked", budget.booked)]
    lines += [(f"stage {s.stage}: booked", s.booked) for s in budget.stages]
    lines += [("lifetime: cap", life.cap), ("lifetime: spent before", life.spent_before),
              ("lifetime: this release", life.this_release), ("lifetime: remaining after", life.remaining_after),
              ("lifetime: per release cap", life.per_release_cap)]
    rows = [[_esc(label), f'<span class="exact">{_esc(entry.exact_text)}</span>'] for label, entry in lines
            if entry is not None]
    return (f"<details><summary>Exact values ({_esc(_unit(budget.unit))}, as rationals)</summary>"
            f"{_table(['amount', 'exact value'], rows)}</details>")


def render_html(audit: Audit) -> str:
    """Render the public audit report as one self-contained HTML page.

    A pure function of ``audit`` (the output of :func:`reports.audit.build_audit`, or
    :func:`reports.audit_json.audit_from_json` of a published ``audit.json``): identical input gives
    byte-identical output. The page loads nothing from the network.

    Args:
        audit: The audit report.

    Returns:
        The HTML document.
    """
    stage_names = [s.stage for s in audit.budget.stages] + [m.stage for m in audit.measurements]
    colours = _stage_colours(stage_names)
    toc = ('<nav class="toc"><a href="#protection">Protection</a><a href="#budget">Budget by stage</a>'
           '<a href="#lifetime">Lifetime budget</a><a href="#measurements">Measurements</a>'
           + ('<a href="#statistics">Summary statistics</a>' if audit.statistics else "")
           + '<a href="#bounds">Private choices</a><a href="#inputs">Public inputs</a>'
           '<a href="#post">Post-processing</a><a href="#provenance">Provenance</a>'
           '<a href="#limitations">Limitations</a></nav>')
    body = "\n".join([
        _header(audit, "Privacy audit report"),
        _cards(audit),
        toc,
        _protection(audit),
        _stage_section(audit, colours),
        _lifetime_section(audit),
        _measurement_section(audit, colours),
        html_section(audit.statistics, audit.budget.unit),
        _bounds_section(audit),
        _public_inputs_section(audit),
        _post_section(audit),
        _provenance_section(audit),
        _limitations_section(audit),
        f'<footer>Format {_code(AUDIT_FORMAT)}. This page is a rendering of <code>audit.json</code>, '
        "which is authoritative; it contains no row-level data and no count derived from the raw table.</footer>",
    ])
    title = f"Privacy audit: {audit.dataset} release {audit.release_id}"
    return _page(title, body)
