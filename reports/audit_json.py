"""The one JSON form of the audit, ``audit.json``: written from, and read back into, :class:`Audit`.

:func:`audit_as_dict` is the only place that turns an audit into JSON values. Its key order is the
order of ``audit.json``, which the manifest hashes and ``dprelease verify`` checks: a change here
changes every published file. :func:`audit_from_dict` is its inverse, used where a published
``audit.json`` is read back (``dprelease report``, the evaluation task, the Prefect artifacts):
``audit_from_json(audit_to_json(audit)) == audit``, and ``audit_to_json(audit_from_json(text)) == text``
for the text of any audit written by this version.

Audits written before a key was added still parse: the keys added after format
``dprelease-audit/1`` was introduced (``budget.share_of_declared`` and ``budget.share_note``,
``lifetime.per_release_cap``, ``public_inputs.hierarchies``,
``private_choices.junction_tree.second_parent_selections``) may be missing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from fractions import Fraction
from typing import Any, TypeVar

from dprelease.dp.errors import DPReleaseError
from dprelease.reports.audit_records import (
    AUDIT_FORMAT,
    Amount,
    Audit,
    Budget,
    DiscoveredBound,
    EpsilonDelta,
    HierarchyInput,
    JunctionTree,
    Lifetime,
    Loss,
    Measurement,
    Pairs,
    PostProcessing,
    Privacy,
    PrivateChoices,
    PublicInputs,
    PublishedStatistic,
    SecondParentSelections,
    SelectedPairs,
    StageBudget,
    Unit,
)

__all__ = ["AuditFormatError", "audit_as_dict", "audit_from_dict", "audit_from_json", "audit_to_json"]

_T = TypeVar("_T")


class AuditFormatError(DPReleaseError, ValueError):
    """An ``audit.json`` that is not a dprelease audit: a key missing or of the wrong type (named by its path)."""


# ------------------------------------------------------------------------------------------- writing


def audit_as_dict(audit: Audit) -> dict[str, Any]:
    """The audit as JSON values, in the key order of ``audit.json``: the one serialisation of an audit."""
    b, life, choices, inputs, post = (audit.budget, audit.lifetime, audit.private_choices, audit.public_inputs,
                                      audit.post_processing)
    budget: dict[str, Any] = {"unit": b.unit, "declared": _pair(b.declared), "reserved": _amount(b.reserved)}
    if b.share_of_declared is not None:
        budget["share_of_declared"] = _amount(b.share_of_declared)
    if b.share_note is not None:
        budget["share_note"] = b.share_note
    budget["booked"] = _amount(b.booked)
    budget["stages"] = [{"stage": s.stage, "allocated": None if s.allocated is None else _amount(s.allocated),
                         "booked": _amount(s.booked)} for s in b.stages]
    if b.booked_as_epsilon_delta is not None:
        budget["booked_as_epsilon_delta"] = _pair(b.booked_as_epsilon_delta)
    if b.delta_spent is not None:
        budget["delta_spent"] = b.delta_spent
    lifetime: dict[str, Any] = {
        "unit": life.unit, "cap": _amount(life.cap), "spent_before": _amount(life.spent_before),
        "this_release": _amount(life.this_release), "remaining_after": _amount(life.remaining_after),
        "per_release_cap": None if life.per_release_cap is None else _amount(life.per_release_cap),
        "renewal": life.renewal,
    }
    if life.cap_as_epsilon_delta is not None:
        lifetime["cap_as_epsilon_delta"] = _pair(life.cap_as_epsilon_delta)
    private: dict[str, Any] = {"discovered_bounds": {
        col: {"lower": d.lower, "upper": d.upper, "lower_found": d.lower_found, "upper_found": d.upper_found,
              "note": d.note, **({"lower_quality": d.lower_quality, "upper_quality": d.upper_quality}
                                 if d.lower_quality or d.upper_quality else {})}
        for col, d in choices.discovered_bounds.items()}}
    if (chosen := choices.selected_pairs) is not None:
        private["selected_pairs"] = {"pairs": _lists(chosen.pairs), "method": chosen.method,
                                     "booked": _amount(chosen.booked)}
    if (tree := choices.junction_tree) is not None:
        junction: dict[str, Any] = {"spanning_tree": _lists(tree.spanning_tree), "cliques": _lists(tree.cliques),
                                    "coarse_bins": dict(tree.coarse_bins), "root": tree.root,
                                    "method": tree.method}
        if (second := tree.second_parent_selections) is not None:
            junction["second_parent_selections"] = {"run": second.run,
                                                    "skipped_single_candidate": second.skipped_single_candidate,
                                                    "note": second.note}
        junction["booked"] = _amount(tree.booked)
        private["junction_tree"] = junction
    public: dict[str, Any] = {
        "schema_file": inputs.schema_file,
        "schema_sha256": inputs.schema_sha256,
        "two_way_pairs": (inputs.two_way_pairs if isinstance(inputs.two_way_pairs, str)
                          else _lists(inputs.two_way_pairs)),
        "allocation": dict(inputs.allocation),
    }
    if inputs.hierarchies is not None:
        public["hierarchies"] = [{"name": h.name, "column": h.column, "levels": list(h.levels),
                                  "nodes_per_level": list(h.nodes_per_level), "level_weights": list(h.level_weights)}
                                 for h in inputs.hierarchies]
    post_dict: dict[str, Any] = {
        "row_count": post.row_count, "consistency": post.consistency, "model": post.model,
        "model_edges": _lists(post.model_edges), "sampling_seed": post.sampling_seed,
        "synthetic_rows": post.synthetic_rows,
    }
    if post.hierarchies is not None:
        post_dict["hierarchies"] = post.hierarchies
    return {
        "format": AUDIT_FORMAT,
        "release_id": audit.release_id,
        "dataset": audit.dataset,
        "table": audit.table,
        "privacy": {"unit": audit.privacy.unit, "neighbouring": audit.privacy.neighbouring,
                    "definition": audit.privacy.definition, "accountant": audit.privacy.accountant,
                    "conversion": audit.privacy.conversion, "delta": audit.privacy.delta,
                    "noise": audit.privacy.noise},
        "budget": budget,
        "lifetime": lifetime,
        "measurements": [
            {"stage": m.stage, "query": m.query, "mechanism": m.mechanism, "sensitivity": m.sensitivity,
             "scale": m.scale, "scale_kind": m.scale_kind, "booked": _loss(m.booked),
             "native_loss": _loss(m.native_loss), "cells": m.cells, "noise_std": m.noise_std,
             "ci95_halfwidth": m.ci95_halfwidth, **({"delta": m.delta} if m.delta is not None else {})}
            for m in audit.measurements
        ],
        "private_choices": private,
        "public_inputs": public,
        "post_processing": post_dict,
        "provenance": dict(audit.provenance),
        "limitations": list(audit.limitations),
        **({"statistics": [_statistic(row) for row in audit.statistics]} if audit.statistics else {}),
    }


def audit_to_json(audit: Audit) -> str:
    """The text of ``audit.json``: :func:`audit_as_dict`, indented by 2, with a final newline."""
    return json.dumps(audit_as_dict(audit), indent=2) + "\n"


def _amount(amount: Amount) -> dict[str, Any]:
    return {"exact": amount.exact_text, "value": amount.value}


def _pair(pair: EpsilonDelta) -> dict[str, Any]:
    return {"epsilon": _amount(pair.epsilon), "delta": pair.delta}


def _loss(loss: Loss) -> dict[str, Any]:
    return {loss.unit: _amount(loss.amount)}


def _lists(rows: Pairs) -> list[list[str]]:
    return [list(row) for row in rows]


# ------------------------------------------------------------------------------------------- reading


def audit_from_json(text: str) -> Audit:
    """Parse the text of an ``audit.json`` (the inverse of :func:`audit_to_json`).

    Raises:
        AuditFormatError: The text is not JSON, or not an audit of format ``dprelease-audit/1``.
    """
    try:
        data = json.loads(text)
    except ValueError as err:
        raise AuditFormatError(f"audit.json: not valid JSON ({err})") from err
    return audit_from_dict(data)


def audit_from_dict(data: object) -> Audit:
    """Parse the JSON values of an audit (the inverse of :func:`audit_as_dict`).

    Raises:
        AuditFormatError: A key is missing or has the wrong type, or the format is not ``dprelease-audit/1``.
    """
    top = _Object(data, "")
    if (found := top.text("format")) != AUDIT_FORMAT:
        raise AuditFormatError(f"audit.json: format ({found!r}) must be {AUDIT_FORMAT!r}")
    p, b, life = top.child("privacy"), top.child("budget"), top.child("lifetime")
    choices, inputs, post = top.child("private_choices"), top.child("public_inputs"), top.child("post_processing")
    return Audit(
        release_id=top.text("release_id"),
        dataset=top.text("dataset"),
        table=top.text("table"),
        privacy=Privacy(unit=p.text("unit"), neighbouring=p.text("neighbouring"), definition=p.text("definition"),
                        accountant=p.text("accountant"), conversion=p.text("conversion"),
                        delta=p.number("delta"), noise=p.text("noise")),
        budget=Budget(
            unit=b.unit("unit"), declared=b.pair("declared"), reserved=b.amount("reserved"),
            share_of_declared=b.optional("share_of_declared", _Object.amount),
            share_note=b.optional("share_note", _Object.text), booked=b.amount("booked"),
            stages=tuple(StageBudget(stage=s.text("stage"), allocated=s.optional("allocated", _Object.amount),
                                     booked=s.amount("booked")) for s in b.items("stages")),
            booked_as_epsilon_delta=b.optional("booked_as_epsilon_delta", _Object.pair),
            delta_spent=b.optional("delta_spent", _Object.number)),
        lifetime=Lifetime(
            unit=life.unit("unit"), cap=life.amount("cap"), spent_before=life.amount("spent_before"),
            this_release=life.amount("this_release"), remaining_after=life.amount("remaining_after"),
            per_release_cap=life.optional("per_release_cap", _Object.amount), renewal=life.text("renewal"),
            cap_as_epsilon_delta=life.optional("cap_as_epsilon_delta", _Object.pair)),
        measurements=tuple(
            Measurement(stage=m.text("stage"), query=m.text("query"), mechanism=m.text("mechanism"),
                        sensitivity=m.text("sensitivity"), scale=m.number("scale"),
                        scale_kind=m.text("scale_kind"), booked=m.loss("booked"), native_loss=m.loss("native_loss"),
                        cells=m.integer("cells"), noise_std=m.optional("noise_std", _Object.number),
                        ci95_halfwidth=m.optional("ci95_halfwidth", _Object.number),
                        delta=m.optional("delta", _Object.number))
            for m in top.items("measurements")),
        private_choices=PrivateChoices(
            discovered_bounds={
                col: DiscoveredBound(lower=d.number("lower"), upper=d.number("upper"),
                                     lower_found=d.flag("lower_found"), upper_found=d.flag("upper_found"),
                                     note=d.text("note"),
                                     lower_quality=d.optional("lower_quality", _Object.text) or "",
                                     upper_quality=d.optional("upper_quality", _Object.text) or "")
                for col, d in choices.child("discovered_bounds").entries()},
            selected_pairs=choices.optional("selected_pairs", _selected_pairs),
            junction_tree=choices.optional("junction_tree", _junction_tree)),
        public_inputs=PublicInputs(
            schema_file=inputs.text("schema_file"), schema_sha256=inputs.text("schema_sha256"),
            two_way_pairs=(inputs.text("two_way_pairs") if isinstance(inputs.child("two_way_pairs").value, str)
                           else inputs.pairs("two_way_pairs")),
            allocation={k: v.as_text() for k, v in inputs.child("allocation").entries()},
            hierarchies=inputs.optional("hierarchies", _hierarchies)),
        post_processing=PostProcessing(
            row_count=post.text("row_count"), consistency=post.text("consistency"), model=post.text("model"),
            model_edges=post.pairs("model_edges"), sampling_seed=post.integer("sampling_seed"),
            synthetic_rows=post.integer("synthetic_rows"), hierarchies=post.optional("hierarchies", _Object.text)),
        provenance={k: v.as_text() for k, v in top.child("provenance").entries()},
        limitations=top.texts("limitations"),
        statistics=top.optional("statistics", _statistics) or (),
    )


_UNITS: dict[str, Unit] = {"epsilon": "epsilon", "rho": "rho"}


class _Object:
    """One JSON value of an audit being read, with typed accessors that name its key path on failure."""

    def __init__(self, value: object, where: str) -> None:
        self.value = value
        self.where = where

    def _fail(self, rule: str) -> AuditFormatError:
        return AuditFormatError(f"audit.json: {self.where or 'the document'} must be {rule}")

    def _fields(self) -> dict[str, object]:
        if not isinstance(self.value, dict):
            raise self._fail("an object")
        return self.value

    def child(self, key: str) -> _Object:
        fields = self._fields()
        where = f"{self.where}.{key}" if self.where else key
        if key not in fields:
            raise AuditFormatError(f"audit.json: {where} is missing")
        return _Object(fields[key], where)

    def optional(self, key: str, parse: Callable[[_Object, str], _T]) -> _T | None:
        """None when ``key`` is absent or null, else ``parse(self, key)``."""
        return parse(self, key) if self._fields().get(key) is not None else None

    def entries(self) -> list[tuple[str, _Object]]:
        return [(k, _Object(v, f"{self.where}.{k}")) for k, v in self._fields().items()]

    def elements(self) -> list[_Object]:
        if not isinstance(self.value, list):
            raise self._fail("an array")
        return [_Object(v, f"{self.where}[{i}]") for i, v in enumerate(self.value)]

    def as_text(self) -> str:
        if not isinstance(self.value, str):
            raise self._fail("a string")
        return self.value

    def as_integer(self) -> int:
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise self._fail("an integer")
        return self.value

    def as_number(self) -> float:
        # An int stays an int: it is written back as it was read.
        if isinstance(self.value, bool) or not isinstance(self.value, int | float):
            raise self._fail("a number")
        return self.value

    def as_unit(self, found: str) -> Unit:
        unit = _UNITS.get(found)
        if unit is None:
            raise AuditFormatError(f"audit.json: {self.where} ({found!r}) must be 'epsilon' or 'rho'")
        return unit

    def items(self, key: str) -> list[_Object]:
        return self.child(key).elements()

    def text(self, key: str) -> str:
        return self.child(key).as_text()

    def texts(self, key: str) -> tuple[str, ...]:
        return tuple(x.as_text() for x in self.items(key))

    def pairs(self, key: str) -> Pairs:
        return tuple(tuple(x.as_text() for x in row.elements()) for row in self.items(key))

    def integer(self, key: str) -> int:
        return self.child(key).as_integer()

    def number(self, key: str) -> float:
        return self.child(key).as_number()

    def flag(self, key: str) -> bool:
        entry = self.child(key)
        if not isinstance(entry.value, bool):
            raise entry._fail("true or false")
        return entry.value

    def unit(self, key: str) -> Unit:
        entry = self.child(key)
        return entry.as_unit(entry.as_text())

    def amount(self, key: str) -> Amount:
        entry = self.child(key)
        text = entry.text("exact")
        try:
            exact = Fraction(text)
        except (ValueError, ZeroDivisionError) as err:
            raise AuditFormatError(f"audit.json: {entry.where}.exact ({text!r}) must be a rational n/d") from err
        return Amount(exact, float(entry.number("value")))

    def pair(self, key: str) -> EpsilonDelta:
        entry = self.child(key)
        return EpsilonDelta(entry.amount("epsilon"), entry.number("delta"))

    def loss(self, key: str) -> Loss:
        """``{unit: amount}``: one key, epsilon or rho."""
        entry = self.child(key)
        fields = entry._fields()
        if len(fields) != 1:
            raise entry._fail("an object with one key, epsilon or rho")
        (unit,) = fields
        return Loss(entry.as_unit(unit), entry.amount(unit))


def _hierarchies(inputs: _Object, key: str) -> tuple[HierarchyInput, ...]:
    return tuple(HierarchyInput(name=h.text("name"), column=h.text("column"), levels=h.texts("levels"),
                                nodes_per_level=tuple(x.as_integer() for x in h.items("nodes_per_level")),
                                level_weights=h.texts("level_weights"))
                 for h in inputs.items(key))


def _selected_pairs(choices: _Object, key: str) -> SelectedPairs:
    s = choices.child(key)
    return SelectedPairs(pairs=s.pairs("pairs"), method=s.text("method"), booked=s.amount("booked"))


def _junction_tree(choices: _Object, key: str) -> JunctionTree:
    j = choices.child(key)
    return JunctionTree(
        spanning_tree=j.pairs("spanning_tree"), cliques=j.pairs("cliques"),
        coarse_bins={c: n.as_integer() for c, n in j.child("coarse_bins").entries()},
        root=j.text("root"), method=j.text("method"),
        second_parent_selections=j.optional("second_parent_selections", _second_parents),
        booked=j.amount("booked"))


def _second_parents(tree: _Object, key: str) -> SecondParentSelections:
    s = tree.child(key)
    return SecondParentSelections(run=s.integer("run"), skipped_single_candidate=s.integer("skipped_single_candidate"),
                                  note=s.text("note"))


_CLIPPING_FIELDS = ("clipping_flag", "clipping_bias", "clipping_bias_low95", "clipping_bias_high95")


def _statistic(row: PublishedStatistic) -> dict[str, object]:
    """A statistic's row; the clipping fields only where a bias was estimated (older audits read back unchanged)."""
    out = asdict(row)
    if row.clipping_flag is None and row.clipping_bias is None:
        for name in _CLIPPING_FIELDS:
            out.pop(name)
    return out


def _statistics(top: _Object, key: str) -> tuple[PublishedStatistic, ...]:
    return tuple(PublishedStatistic(
        subject=r.text("subject"), by=r.optional("by", _Object.text), group=r.optional("group", _Object.text),
        statistic=r.text("statistic"), level=r.optional("level", _Object.number),
        estimate=r.optional("estimate", _Object.number), low95=r.optional("low95", _Object.number),
        high95=r.optional("high95", _Object.number), mechanism=r.text("mechanism"), bounds=r.text("bounds"),
        budget=r.optional("budget", _Object.number), clipping_flag=r.optional("clipping_flag", _Object.flag),
        clipping_bias=r.optional("clipping_bias", _Object.number),
        clipping_bias_low95=r.optional("clipping_bias_low95", _Object.number),
        clipping_bias_high95=r.optional("clipping_bias_high95", _Object.number)) for r in top.items(key))
