"""The typed audit and its one JSON form: a published audit.json reads back into records and out again unchanged."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from dprelease.reports.audit_json import AuditFormatError, audit_from_dict, audit_from_json, audit_to_json

DATA = Path(__file__).parent / "data"
FIXTURE = DATA / "audit_adult.json"  # audit.json of a real release of the Adult example (an older version)


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
