"""The steward-only HTML report: utility against the real table and disclosure risk (non-private)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dprelease.reports.audit_records import Audit
from dprelease.reports.charts import _REAL, _SYNTH, hbars_chart, histogram_chart, pairs_chart
from dprelease.reports.html import _header, _page
from dprelease.reports.html_parts import _card, _code, _esc, _num, _pct, _section, _table

# --------------------------------------------------------------------------------------- internal page


def render_internal_html(
    audit: Audit,
    utility: Mapping[str, Any],
    real_vs_synthetic: Mapping[str, Any] | None = None,
    risk: Mapping[str, Any] | Callable[[], Mapping[str, Any] | None] | None = None,
    statistics: Sequence[Mapping[str, Any]] | None = None,
) -> str:
    """Render the steward-only utility and disclosure-risk report (never to be published).

    Args:
        audit: The audit report (for the release's identity and the measured pairs).
        utility: ``internal/utility.json``: ``tvd1``, ``tvd2``, ``tvd3`` (or None), and the TVD of
            each 1-way (``one_way``: column -> TVD) and 2-way (``two_way``: ``"a|b"`` -> TVD) marginal.
        real_vs_synthetic: Optional column -> ``{"labels": [...], "real": [...], "synthetic": [...]}``
            of normalised frequencies, drawn as small multiples.
        risk: Optional ``internal/risk.json`` (:meth:`quality.risk.RiskReport.to_dict`): exact-match share,
            distances to the closest record, k-anonymity of the quasi-identifiers; or a function
            returning it (or None), called once the charts are drawn (a caller computing the risk
            checks in another thread meanwhile).
        statistics: Optional published summary statistics with their true values
            (:func:`quality.statistics_truth.true_statistics`).

    Returns:
        The HTML document.
    """
    declared = audit.public_inputs.two_way_pairs
    if isinstance(declared, str):
        choices = audit.private_choices
        declared = choices.selected_pairs.pairs if choices.selected_pairs is not None else ()
        for clique in choices.junction_tree.cliques if choices.junction_tree is not None else ():
            declared = (*declared, *((a, b) for i, a in enumerate(clique) for b in clique[i + 1:]))
    measured_pairs = {frozenset(p) for p in declared}

    def measured(key: str) -> bool:
        return frozenset(key.split("|")) in measured_pairs

    tvd1, tvd2, tvd3 = utility.get("tvd1"), utility.get("tvd2"), utility.get("tvd3")
    cards = '<div class="cards">' + "".join([
        _card("Mean 1-way TVD", _esc(_num(tvd1, 3)), "over every column"),
        _card("Mean 2-way TVD", _esc(_num(tvd2, 3)), "over every pair of columns"),
        _card("Mean 3-way TVD", _esc(_num(tvd3, 3)) if tvd3 is not None else "–",
              "over a sample of triples" if tvd3 is not None else "not computed"),
        _card("Synthetic rows", _esc(audit.post_processing.synthetic_rows), "public"),
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
        chart = hbars_chart([k for k, _ in ordered], [v for _, v in ordered], [_SYNTH] * len(ordered),
                            mean=None if tvd1 is None else float(tvd1), mean_label="mean",
                            xlabel="total variation distance, real vs synthetic",
                            alt="Bar chart of the 1-way TVD of each column, worst first.")
        table = _table(["column", "TVD"], [[_code(k), _esc(_num(v, 4))] for k, v in ordered], cls="num")
        sections.append(_section("one-way", "1-way marginals", chart + f"<details><summary>Table</summary>{table}"
                                 "</details>", _esc(explain)))
    two = {str(k): float(v) for k, v in utility.get("two_way", {}).items()}
    if two:
        ranked = sorted(two.items(), key=lambda kv: (-kv[1], kv[0]))
        k = min(5, len(ranked) // 2) if len(ranked) > 1 else len(ranked)
        worst = ranked[:k]
        best = ranked[::-1][: min(5, len(ranked) - k)]
        chart = pairs_chart(worst, best, None if tvd2 is None else float(tvd2), measured,
                            "Bar chart of the worst and best 2-way marginals by TVD.")
        rows = [[_esc(label), _code(name.replace("|", " × ")), "yes" if measured(name) else "no", _esc(_num(v, 4))]
                for label, group in (("worst", worst), ("best", best)) for name, v in group]
        lead = (f"{len(two)} pairs scored. ● marks a pair that was measured (a 2-way marginal of the release); the "
                "other pairs are reproduced only through the model.")
        sections.append(_section("two-way", "2-way marginals: worst and best", chart +
                                 _table(["", "pair", "measured", "TVD"], rows, cls="num"), _esc(lead)))
    if real_vs_synthetic:
        figures: list[str] = []
        for column, hist in real_vs_synthetic.items():
            labels = [str(x) for x in hist.get("labels", [])]
            real = [float(x) for x in hist.get("real", [])]
            synthetic = [float(x) for x in hist.get("synthetic", [])]
            if not labels or len(real) != len(labels) or len(synthetic) != len(labels):
                continue
            tvd = one.get(str(column))
            figures.append(histogram_chart(str(column), labels, real, synthetic, tvd,
                                           f"Histogram of {column}: real and synthetic relative frequencies."))
        key = (f'<p class="small"><span class="swatch" style="background:{_REAL}"></span>real '
               f'<span class="swatch" style="background:{_SYNTH};margin-left:12px"></span>synthetic '
               "(relative frequencies)</p>")
        sections.append(_section("histograms", "Real vs synthetic, per column",
                                 key + '<div class="grid">' + "".join(figures) + "</div>"))
    if statistics:
        sections.append(_statistics_section(statistics, utility.get("evaluated") or {}))
    if callable(risk):
        risk = risk()
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
    title = f"INTERNAL utility: {audit.dataset} release {audit.release_id}"
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


def _statistics_section(statistics: Sequence[Mapping[str, Any]], evaluated: Mapping[str, Any]) -> str:
    """The published statistics beside their true values (raw data: steward only)."""

    def number(value: Any) -> str:
        return "–" if value is None else _esc(_num(value, 6))

    rows = []
    for s in statistics:
        label = f"quantile {s['level']:g}" if s.get("level") is not None else str(s["statistic"])
        if s.get("group") is not None:
            label += f" ({s['by']} = {s['group']})"
        interval = "–" if s.get("low95") is None else f"[{number(s['low95'])}, {number(s['high95'])}]"
        inside = {True: "yes", False: "<strong>no</strong>", None: "–"}[s.get("inside")]
        rows.append([_code(s["subject"]), _esc(label), number(s.get("estimate")), interval, number(s.get("true")),
                     inside])
    sampled = evaluated.get("real_rows_evaluated") != evaluated.get("real_rows")
    lead = ("The DP estimates as published, their 95 % noise intervals, and the true values computed from the raw "
            "rows without clipping" + (" (on the evaluated sample of real rows)" if sampled else "")
            + ". A true value outside its interval shows noise (1 in 20 by design), clipping bias or, for "
            "sample-and-aggregate, the chunks' sampling error.")
    return _section("statistics", "Summary statistics: published against true",
                    _table(["of", "statistic", "DP estimate", "95 % interval", "true", "inside"], rows), _esc(lead))
