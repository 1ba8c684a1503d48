from __future__ import annotations

import copy
import html
import json
import re
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget
from dprelease.dp.accounting.charges import MeasurementRecord
from dprelease.dp.accounting.ledger_rows import Charge, LedgerStatus
from dprelease.reports.audit import build_audit
from dprelease.reports.audit_json import audit_as_dict, audit_from_dict, audit_from_json
from dprelease.reports.html import render_html
from dprelease.reports.internal_html import render_internal_html
from dprelease.schemas.plan import ReleasePlan, plan_release
from dprelease.schemas.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT / "examples" / "adult"
FIXTURE = Path(__file__).parent / "data" / "audit_adult.json"  # audit.json of a real release of the Adult example

PUBLIC_SECTIONS = ("protection", "budget", "lifetime", "measurements", "bounds", "inputs", "post", "provenance",
                   "limitations")
CHART = re.compile(r'<svg class="chart" role="img" aria-label="[^"]+" .*?</svg>', re.S)


def _audit_for(plan: ReleasePlan, spec_path: Path) -> dict:
    """A real build_audit output from hand-made ledger rows and measurement provenance, as JSON values.

    Tests change these values (as a hand-edited audit.json would be) and render them through
    :func:`_render`, which parses them into the typed audit first.
    """
    spec = load_spec(spec_path)
    zcdp = plan.definition == "zcdp"
    charges: list[Charge] = []
    measurements: list[MeasurementRecord] = []

    def add(stage: str, query: str, mechanism: str, sensitivity: str, scale: float, loss: Fraction,
            native, std: float | None, ci: float | None, cells: int) -> None:
        charges.append(Charge(seq=len(charges) + 1, dataset=plan.dataset, release_id=plan.release_id, stage=stage,
                              query=query, mechanism=mechanism, sensitivity=sensitivity, scale=repr(scale), loss=loss,
                              native_loss=str(native), created_at=0.0))
        booked = ZCDPBudget(loss) if zcdp else PureBudget(loss)
        measurements.append(MeasurementRecord(stage=stage, query=query, mechanism=mechanism, sensitivity=sensitivity,
                                        scale=scale, loss=booked, native_loss=native, std=std, ci95=ci, cells=cells))

    for b in plan.bounds:
        half = b.booked.amount / 2
        for side in ("lower", "upper"):
            add("bounds", f"{side} bound of {b.column}", "AboveThreshold (discrete Laplace)", "L1=1 per query",
                250.0, half, b.run_budget, None, None, 20)
    for i, m in enumerate(plan.measurements):
        sigma = 30.0 + i
        add(m.stage, m.query, "discrete Gaussian" if zcdp else "discrete Laplace", "L2=1" if zcdp else "L1=1",
            sigma, m.budget.amount, m.budget, sigma, 1.96 * sigma, 4 + i)
    cap = Fraction(1, 10) if zcdp else Fraction(4)
    before = LedgerStatus(dataset=plan.dataset, definition="zcdp" if zcdp else "pure", cap=cap,
                          delta=plan.delta, spent=cap / 10, reserved=Fraction(0), release_cap=cap / 3)
    audit = build_audit(
        plan=plan, spec=spec, schema_sha256="ab" * 32, charges=charges, before=before, measurements=measurements,
        discovered_bounds={"capital-gain": (0.0, 65536.0, True, False), "fnlwgt": (16384.0, 524288.0, True, True)},
        synthetic_rows=32000, model_edges=[("income", "age"), ("income", "sex")],
        provenance={"dprelease": "0.1.0", "commit": "0123456789abcdef"},
    )
    return json.loads(json.dumps(audit_as_dict(audit)))  # as read back from audit.json


def _render(audit: dict) -> str:
    return render_html(audit_from_dict(audit))


@pytest.fixture(scope="module")
def zcdp_audit() -> dict:
    plan = plan_release(load_spec(ADULT / "release-pairs.yaml"), "r1", 7)
    return _audit_for(plan, ADULT / "release-pairs.yaml")


@pytest.fixture(scope="module")
def zcdp_html(zcdp_audit) -> str:
    return _render(zcdp_audit)


@pytest.fixture(scope="module")
def utility(zcdp_audit) -> dict:
    columns = ["age", "workclass", "education", "sex", "income", "race"]
    pairs = [(a, b) for i, a in enumerate(columns) for b in columns[i + 1:]]
    return {
        "tvd1": 0.0117, "tvd2": 0.0524, "tvd3": None,
        "one_way": {c: 0.001 * (i + 1) for i, c in enumerate(columns)},
        "two_way": {f"{a}|{b}": 0.01 * (i + 1) for i, (a, b) in enumerate(pairs)},
    }


def _images(page: str) -> list[str]:
    """The page's charts: inline ``<svg>`` elements with their alt text."""
    return CHART.findall(page)


def _assert_self_contained(page: str) -> None:
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"<script\b", page, re.I)
    assert not re.search(r"<(link|iframe|object|embed|frame|base)\b", page, re.I)
    assert "@import" not in page and "url(" not in page
    for attribute, value in re.findall(r'\b(src|href|srcset|action|data|poster)\s*=\s*"([^"]*)"', page):
        if attribute == "href":
            assert value.startswith("#"), value
        else:
            pytest.fail(f"unexpected resource attribute {attribute}={value!r}")
    assert "Content-Security-Policy" in page and "default-src 'none'" in page and "img-src" not in page
    for chart in re.findall(r"<svg\b.*?</svg>", page, re.S):  # markup that loads or runs nothing
        assert not re.search(r"<(image|use|foreignObject|a|script|style)\b|\bon\w+=|xmlns|href", chart), chart[:80]
        assert not re.search(r'="[^"]*\b(nan|inf)\b', chart), chart[:80]


def test_public_page_has_every_section(zcdp_audit, zcdp_html):
    page = zcdp_html
    assert page.startswith("<!DOCTYPE html>")
    for anchor in PUBLIC_SECTIONS:
        assert f'<section id="{anchor}">' in page
    for title in ("Budget allocation by stage", "Lifetime budget of the dataset", "Measurements and their noise",
                  "Bounds discovered privately", "Post-processing and sampling", "Provenance", "Limitations"):
        assert title in page
    assert "r1" in page and "us-cps-1994-adult" in page
    assert html.escape(zcdp_audit["privacy"]["definition"]) in page
    assert "Declared (ε, δ)" in page and "(1, 10<sup>−9</sup>)" in page
    assert "Booked ρ" in page
    for stage in zcdp_audit["budget"]["stages"]:
        assert f"<code>{stage['stage']}</code>" in page
    for m in zcdp_audit["measurements"]:
        assert f"<code>{html.escape(m['query'])}</code>" in page
    assert str(zcdp_audit["post_processing"]["sampling_seed"]) in page
    assert zcdp_audit["public_inputs"]["schema_sha256"] in page
    assert "0123456789abcdef" in page
    for text in zcdp_audit["limitations"]:
        assert html.escape(text) in page
    assert "search range" in page and "found" in page  # capital-gain's upper bound fell back
    assert "per-release cap" in page


def test_public_page_shares_of_the_release_budget(zcdp_audit, zcdp_html):
    reserved = zcdp_audit["budget"]["reserved"]["value"]
    for stage in zcdp_audit["budget"]["stages"]:
        share = 100 * stage["booked"]["value"] / reserved
        assert f"{share:.1f} %" in zcdp_html
    assert zcdp_audit["budget"]["booked"]["exact"] in zcdp_html  # exact values, in the details block


def test_public_page_is_self_contained_with_svg_charts(zcdp_html):
    _assert_self_contained(zcdp_html)
    images = _images(zcdp_html)
    assert len(images) == 3  # budget by stage, lifetime, noise per measurement
    for chart in images:
        assert "<title>" in chart and 'viewBox="0 0 ' in chart
    assert len(re.findall(r"<svg [^>]*aria-label=\"[^\"]+\"", zcdp_html)) == 3


def test_rendering_is_pure_and_byte_identical(zcdp_audit, zcdp_html):
    before = json.dumps(zcdp_audit, sort_keys=True)
    again = _render(copy.deepcopy(zcdp_audit))
    assert again.encode("utf-8") == zcdp_html.encode("utf-8")
    assert _images(again) == _images(zcdp_html)
    assert json.dumps(zcdp_audit, sort_keys=True) == before  # the input is not modified
    assert _render(json.loads(json.dumps(zcdp_audit))) == zcdp_html


def test_every_string_is_escaped(zcdp_audit):
    audit = copy.deepcopy(zcdp_audit)
    audit["dataset"] = "<b>bold</b> & 'quoted' \"name\""
    audit["release_id"] = "<script>alert(1)</script>"
    audit["provenance"]["commit"] = "<img src=x onerror=alert(1)>"
    audit["limitations"].append("<a href=\"https://evil.example\">click</a>")
    audit["measurements"][-1]["query"] = "marginal(<i>a</i>,$b$)"
    audit["measurements"][-1]["stage"] = "two_way"
    audit["private_choices"]["discovered_bounds"]["<col>"] = {
        "lower": 0.0, "upper": 1.0, "lower_found": True, "upper_found": True, "note": "<note>"}
    page = _render(audit)
    assert "<b>bold</b>" not in page
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; &#x27;quoted&#x27; &quot;name&quot;" in page
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page and "<i>a</i>" not in page and "<col>" not in page
    assert '<a href="https://evil.example">' not in page  # present only as escaped text
    assert "https://" in page  # ... which is text, not a link
    assert "&lt;note&gt;" in page


def test_pure_dp_release(tmp_path):
    for name in ("schema.yaml", "adult.parquet"):
        shutil.copy(ADULT / name, tmp_path / name)
    doc = yaml.safe_load((ADULT / "release-pairs.yaml").read_text(encoding="utf-8"))
    doc["budget"], doc["lifetime_budget"], doc["release_cap"] = {"epsilon": 1}, {"epsilon": 4}, {"epsilon": 2}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    plan = plan_release(load_spec(tmp_path / "r.yaml"), "pure-1", 3)
    audit = _audit_for(plan, tmp_path / "r.yaml")
    assert audit["budget"]["unit"] == "epsilon"
    page = _render(audit)
    assert "Booked ε" in page and "allocated ε" in page and "booked_as_epsilon_delta" not in page
    assert "pure epsilon-DP" in page
    _assert_self_contained(page)
    assert _render(audit) == page


def test_real_release_audit_renders():
    audit = audit_from_json(FIXTURE.read_text(encoding="utf-8"))
    page = render_html(audit)
    for anchor in PUBLIC_SECTIONS:
        assert f'<section id="{anchor}">' in page
    assert html.escape(audit.release_id) in page
    assert len(_images(page)) == 3
    _assert_self_contained(page)
    assert render_html(audit) == page
    # SVT runs release no noisy value: listed in the table, explained under the chart.
    assert "Not charted: 6 measurement(s) by AboveThreshold (discrete Laplace)" in page


def test_lifetime_with_other_open_reservations(zcdp_audit):
    audit = copy.deepcopy(zcdp_audit)
    life = audit["lifetime"]
    life["remaining_after"] = {"exact": "1/100", "value": 0.01}  # the rest is reserved by other open releases
    life["per_release_cap"] = None
    page = _render(audit)
    assert "per-release cap" not in page
    assert len(_images(page)) == 3


def test_audit_with_empty_sections_renders(zcdp_audit):
    audit = copy.deepcopy(zcdp_audit)
    audit["budget"]["stages"], audit["measurements"], audit["limitations"], audit["provenance"] = [], [], [], {}
    audit["private_choices"] = {"discovered_bounds": {}}
    audit["public_inputs"].update(allocation={}, two_way_pairs=[], hierarchies=[])
    audit["post_processing"]["model_edges"] = []
    del audit["post_processing"]["hierarchies"]
    page = _render(audit)
    for anchor in PUBLIC_SECTIONS:
        assert f'<section id="{anchor}">' in page
    _assert_self_contained(page)


def test_internal_page(zcdp_audit, utility):
    page = render_internal_html(audit_from_dict(zcdp_audit), utility)
    assert "for the data steward only" in page and "never publish" in page
    for title in ("Mean 1-way TVD", "Mean 2-way TVD", "Mean 3-way TVD", "1-way marginals",
                  "2-way marginals: worst and best"):
        assert title in page
    assert "not computed" in page  # tvd3 is None
    ranked = sorted(utility["two_way"].items(), key=lambda kv: -kv[1])
    shown = re.findall(r"<td><code>([^<]+)</code></td>", page.split('id="two-way"')[1])
    expected = [k for k, _ in ranked[:5]] + [k for k, _ in ranked[::-1][:5]]
    assert shown == [k.replace("|", " × ") for k in expected]
    # income|sex is among the measured 2-way marginals of the Adult spec.
    assert "<td><code>sex × income</code></td><td>yes</td>" in page
    assert len(_images(page)) == 2
    _assert_self_contained(page)
    assert render_internal_html(audit_from_dict(copy.deepcopy(zcdp_audit)), copy.deepcopy(utility)) == page


def test_internal_page_small_multiples_and_escaping(zcdp_audit, utility):
    audit = copy.deepcopy(zcdp_audit)
    audit["dataset"] = "<b>x</b>"
    frequencies = {
        "age": {"labels": ["17–30", "31–50", "51+"], "real": [0.3, 0.5, 0.2], "synthetic": [0.32, 0.47, 0.21]},
        "<col$>": {"labels": ["a", "$b$"], "real": [0.5, 0.5], "synthetic": [0.6, 0.4]},
        "bad": {"labels": ["a"], "real": [1.0, 0.0], "synthetic": [1.0]},  # mismatched lengths: skipped
    }
    page = render_internal_html(audit_from_dict(audit), utility, frequencies)
    assert "Real vs synthetic, per column" in page
    assert len(_images(page)) == 2 + 2
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    assert "<col$>" not in page
    _assert_self_contained(page)
    assert render_internal_html(audit_from_dict(audit), utility, copy.deepcopy(frequencies)) == page


def test_internal_page_takes_the_risk_checks_late(zcdp_audit, utility):
    """The risk section given as a function (called after the charts) renders as the mapping itself."""
    risk = {"exact_match_share": 0.01, "dcr": {"synthetic_median": 0.2, "real_median": 0.1},
            "k_anonymity": {"real": {"k": 1, "classes": 10}, "synthetic": {"k": 2, "classes": 9}}}
    page = render_internal_html(audit_from_dict(zcdp_audit), utility, None, risk)
    assert 'id="risk"' in page
    assert render_internal_html(audit_from_dict(copy.deepcopy(zcdp_audit)), utility, None, lambda: risk) == page
    assert 'id="risk"' not in render_internal_html(audit_from_dict(zcdp_audit), utility, None, lambda: None)


def test_rendering_both_pages_imports_no_plotting_library():
    code = ("import sys; from dprelease.reports.html import render_html; "
            "from dprelease.reports.internal_html import render_internal_html; "
            "from dprelease.reports.audit_json import audit_from_json; "
            "audit = audit_from_json(open(sys.argv[1], encoding='utf-8').read()); render_html(audit); "
            "render_internal_html(audit, {'tvd1': 0.1, 'tvd2': 0.2, 'tvd3': None, 'one_way': {'a': 0.1}, "
            "'two_way': {'a|b': 0.2}}, {'a': {'labels': ['x'], 'real': [1.0], 'synthetic': [1.0]}}); "
            "assert 'matplotlib' not in sys.modules")
    subprocess.run([sys.executable, "-c", code, str(FIXTURE)], check=True, cwd=ROOT)


def test_bytes_do_not_depend_on_the_process():
    """Re-running a release in a new process (another hash seed) gives the same bytes."""
    import hashlib
    import os

    code = ("import hashlib, sys; from dprelease.reports.html import render_html; "
            "from dprelease.reports.audit_json import audit_from_json; "
            "page = render_html(audit_from_json(open(sys.argv[1], encoding='utf-8').read())); "
            "print(hashlib.sha256(page.encode('utf-8')).hexdigest())")
    page = render_html(audit_from_json(FIXTURE.read_text(encoding="utf-8")))
    expected = hashlib.sha256(page.encode("utf-8")).hexdigest()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code, str(FIXTURE)], check=True, cwd=ROOT, env=env,
                             capture_output=True, text=True)
        assert out.stdout.strip() == expected
