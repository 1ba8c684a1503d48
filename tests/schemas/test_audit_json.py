"""The typed audit and its one JSON form: ``audit.json`` is byte-for-byte what the untyped builder wrote.

``data/audit_built.json`` holds, for each input set of :func:`_inputs`, the ``audit.json`` that
``build_audit`` wrote when it still returned a dict (commit 3263e7e; since then only the pairs variants'
``post_processing.model`` changed, when the tree model became the junction-tree estimator on 2-cliques). The
inputs are stand-ins for the plan and the spec (only the attributes ``build_audit`` reads), so the golden file
pins the audit's assembly and serialisation, not the planner's arithmetic or the example specs.
"""

from __future__ import annotations

import dataclasses
import json
import re
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget
from dprelease.dp.accounting.charges import MeasurementRecord
from dprelease.dp.accounting.ledger_rows import Charge, LedgerStatus
from dprelease.reports.audit import LIMITATIONS, build_audit, render_markdown
from dprelease.reports.audit_json import (
    AuditFormatError,
    audit_as_dict,
    audit_from_dict,
    audit_from_json,
    audit_to_json,
)
from dprelease.reports.audit_records import Amount, Audit, Loss
from dprelease.reports.html import render_html

DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "audit_built.json"  # see the module docstring
FIXTURE = DATA / "audit_adult.json"  # audit.json of a real release of the Adult example (an older version)
VARIANTS = ("zcdp-cliques", "pure-pairs", "zcdp-auto-pairs")


def _inputs(variant: str) -> dict[str, Any]:
    """The keyword arguments of ``build_audit`` for one variant, with stand-ins for the plan and the spec."""
    zcdp = variant.startswith("zcdp")
    auto_cliques, auto_pairs = variant == "zcdp-cliques", variant == "zcdp-auto-pairs"
    stages = {"bounds": Fraction(1, 200), "one_way": Fraction(3, 100)}
    if auto_cliques or auto_pairs:
        stages["selection"] = Fraction(1, 100)
    stages["cliques" if auto_cliques else "two_way"] = Fraction(1, 25)
    hierarchy = SimpleNamespace(name="region", column="country", levels=("continent",), labels=(("Europe", "Asia"),))
    plan = SimpleNamespace(
        definition="zcdp" if zcdp else "pure", epsilon=Fraction(1), delta=Fraction(1, 10**9) if zcdp else Fraction(0),
        total=SimpleNamespace(amount=sum(stages.values(), Fraction(0))), spent_share=Fraction(1) if zcdp else
        Fraction(9, 10), stages={k: SimpleNamespace(amount=v) for k, v in stages.items()}, release_id=f"r-{variant}",
        dataset="toy-population", seed=11, cross=None)
    schema = SimpleNamespace(table="toy", hierarchies=(hierarchy,) if auto_cliques else (),
                             privacy_unit=SimpleNamespace(describe=lambda: "one row (add/remove one row)"))
    spec = SimpleNamespace(
        schema=schema, schema_path=Path("/somewhere/toy.yaml"), auto_pairs=auto_pairs, auto_cliques=auto_cliques,
        root="age" if auto_cliques else None, two_way=(("age", "sex"), ("sex", "country")),
        allocation={k: Fraction(1, 4) for k in stages}, hierarchy_split={"region": (Fraction(1, 3), Fraction(2, 3))})
    charges: list[Charge] = []
    measurements: list[MeasurementRecord] = []

    def add(stage: str, query: str, mechanism: str, loss: Fraction, native: Any, std: float | None,
            cells: int) -> None:
        charges.append(Charge(seq=len(charges) + 1, dataset=plan.dataset, release_id=plan.release_id, stage=stage,
                              query=query, mechanism=mechanism, sensitivity="L1=1", scale="2.5", loss=loss,
                              native_loss=str(native), created_at=0.0))
        booked = ZCDPBudget(loss) if zcdp else PureBudget(loss)
        measurements.append(MeasurementRecord(
            stage=stage, query=query, mechanism=mechanism, sensitivity="L1=1", scale=2.5 + len(charges), loss=booked,
            native_loss=native, std=std, ci95=None if std is None else 1.96 * std, cells=cells))

    svt = PureBudget(Fraction(1, 10))
    add("bounds", "upper bound of income", "AboveThreshold (discrete Laplace)", stages["bounds"], svt, None, 20)
    for column in ("age", "sex", "country"):
        add("one_way", f"marginal({column})", "discrete Gaussian" if zcdp else "discrete Laplace", Fraction(1, 100),
            ZCDPBudget(Fraction(1, 100)) if zcdp else PureBudget(Fraction(1, 100)), 3.25, 4)
    if auto_cliques:
        add("selection", "second parent of country", "exponential mechanism", Fraction(1, 200),
            PureBudget(Fraction(1, 5)), None, 2)
    if auto_pairs:
        add("selection", "pair round 1", "exponential mechanism", Fraction(1, 100), PureBudget(Fraction(2, 7)), None, 3)
    add("cliques" if auto_cliques else "two_way", "marginal(age,sex)", "discrete Gaussian" if zcdp else
        "discrete Laplace", Fraction(1, 25), ZCDPBudget(Fraction(1, 25)) if zcdp else PureBudget(Fraction(1, 25)),
        12.5, 8)
    add("stats", "mean of age", "discrete Laplace", Fraction(1, 1000), PureBudget(Fraction(1, 1000)), 0.5, 1)
    cap = Fraction(1, 10) if zcdp else Fraction(4)
    before = LedgerStatus(dataset=plan.dataset, definition=plan.definition, cap=cap, delta=plan.delta,
                          spent=cap / 10, reserved=Fraction(0), release_cap=cap / 3 if zcdp else None)
    return dict(
        plan=plan, spec=spec, schema_sha256="cd" * 32, charges=charges, before=before, measurements=measurements,
        discovered_bounds={"income": (0.0, 65536.0, False, True)}, synthetic_rows=1234,
        model_edges=[("age", "sex"), ("sex", "country")], provenance={"dprelease": "9.9.9", "commit": "feedface"},
        selected_pairs=[("age", "sex"), ("sex", "country")] if auto_cliques or auto_pairs else (),
        cliques=[("age",), ("age", "sex"), ("age", "sex", "country"), ("sex", "age", "income")] if auto_cliques
        else (),
        coarse_bins={"age": 8} if auto_cliques else None,
    )


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


@pytest.mark.parametrize("variant", VARIANTS)
def test_built_audit_is_the_known_audit_json(variant, golden):
    """Same inputs, same bytes: key order, values and formatting of the dict-era audit.json."""
    audit = build_audit(**_inputs(variant))
    assert isinstance(audit, Audit)
    expected = json.dumps(golden[variant], indent=2) + "\n"
    assert audit_to_json(audit) == expected
    assert audit_as_dict(audit) == golden[variant]


def test_known_structure_holds_the_typed_values(golden):
    audit = build_audit(**_inputs("zcdp-cliques"))
    assert audit.budget.unit == audit.lifetime.unit == "rho"
    assert [s.stage for s in audit.budget.stages] == ["bounds", "one_way", "selection", "cliques", "stats"]
    assert audit.budget.stages[-1].allocated is None  # a charged stage the plan does not name
    assert audit.budget.booked == Amount.of(sum((c.loss for c in _inputs("zcdp-cliques")["charges"]), Fraction(0)))
    assert audit.budget.booked_as_epsilon_delta is not None and audit.lifetime.cap_as_epsilon_delta is not None
    assert audit.measurements[0].native_loss == Loss("epsilon", Amount.of(Fraction(1, 10)))
    assert audit.measurements[1].booked == Loss("rho", Amount.of(Fraction(1, 100)))
    assert audit.measurements[1].scale_kind == "sigma" and audit.measurements[0].scale_kind == "scale"
    tree = audit.private_choices.junction_tree
    assert tree is not None and audit.private_choices.selected_pairs is None
    assert tree.second_parent_selections is not None
    assert (tree.second_parent_selections.run, tree.second_parent_selections.skipped_single_candidate) == (1, 1)
    assert audit.public_inputs.two_way_pairs.startswith("none: cliques")
    assert audit.post_processing.hierarchies is not None and audit.limitations == LIMITATIONS
    pure = build_audit(**_inputs("pure-pairs"))
    assert pure.budget.booked_as_epsilon_delta is None and pure.lifetime.per_release_cap is None
    assert pure.public_inputs.two_way_pairs == (("age", "sex"), ("sex", "country"))
    assert pure.post_processing.hierarchies is None and "hierarchies" not in golden["pure-pairs"]["post_processing"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_reading_back_gives_the_same_audit(variant):
    audit = build_audit(**_inputs(variant))
    text = audit_to_json(audit)
    again = audit_from_json(text)
    assert again == audit
    assert audit_to_json(again) == text
    assert render_html(again) == render_html(audit) and render_markdown(again) == render_markdown(audit)


def test_an_older_published_audit_reads_back_byte_for_byte():
    """The Adult fixture predates budget.share_* and public_inputs.hierarchies: they stay absent."""
    text = FIXTURE.read_text(encoding="utf-8")
    audit = audit_from_json(text)
    assert audit.budget.share_of_declared is None and audit.public_inputs.hierarchies is None
    assert audit_to_json(audit) == text


def test_records_are_frozen():
    audit = audit_from_json(FIXTURE.read_text(encoding="utf-8"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        audit.dataset = "other"  # type: ignore[misc]


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.update(format="dprelease-ldp-audit/1"),
     "audit.json: format ('dprelease-ldp-audit/1') must be 'dprelease-audit/1'"),
    (lambda d: d["budget"].pop("booked"), "audit.json: budget.booked is missing"),
    (lambda d: d["budget"]["stages"][1].update(stage=3), "audit.json: budget.stages[1].stage must be a string"),
    (lambda d: d["budget"].update(unit="delta"), "audit.json: budget.unit ('delta') must be 'epsilon' or 'rho'"),
    (lambda d: d["lifetime"]["cap"].update(exact="one"),
     "audit.json: lifetime.cap.exact ('one') must be a rational n/d"),
    (lambda d: d["measurements"][0].update(cells=True), "audit.json: measurements[0].cells must be an integer"),
    (lambda d: d["measurements"][0].update(booked={"rho": {"exact": "1/2", "value": 0.5}, "epsilon": 1}),
     "audit.json: measurements[0].booked must be an object with one key, epsilon or rho"),
    (lambda d: d["private_choices"]["discovered_bounds"]["fnlwgt"].update(lower_found="yes"),
     "audit.json: private_choices.discovered_bounds.fnlwgt.lower_found must be true or false"),
])
def test_a_malformed_audit_is_refused_with_its_key_path(change, message):
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    change(data)
    with pytest.raises(AuditFormatError, match=re.escape(message)):
        audit_from_dict(data)


def test_text_that_is_not_json_is_refused():
    with pytest.raises(AuditFormatError, match=re.escape("audit.json: not valid JSON")):
        audit_from_json("{")
    with pytest.raises(AuditFormatError, match=re.escape("audit.json: the document must be an object")):
        audit_from_json("[]")
