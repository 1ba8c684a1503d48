"""Collection specs: every parameter the collection is fixed to is the steward's explicit, sane choice."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from dprelease.schemas.ldp import CollectionError, load_collection

RAPPOR = {"k": 32, "h": 1, "m": 64, "f": "9/16", "p": "1/8", "q": "11/16"}


def _spec(tmp_path: Path, **fields: object) -> Path:
    doc = {"collection": "c", "protocol": "RAPPOR", "values": ["a", "b", "c"], "batches": "r/", "rappor": RAPPOR}
    doc.update(fields)
    doc = {key: value for key, value in doc.items() if value is not None}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(("rappor", "message"), [
    ({**RAPPOR, "H": 2}, "rappor: unknown key 'H'; give exactly k, h, m, f, p, q"),  # h stayed at a default of 2
    ({"k": 32, "m": 64, "f": "1/2", "p": "1/2", "q": "3/4"}, "rappor: missing h: give k, h, m, f, p, q"),
    ({**RAPPOR, "f": "1/1000"}, "rappor: the longitudinal epsilon (15.2) must be at most 10"),
    ({**RAPPOR, "f": 1e-300}, "rappor: RAPPOR: f must be a fraction with a denominator of at most 2^32"),
    ({**RAPPOR, "f": "1/10", "h": 2}, "rappor: the longitudinal epsilon (11.78) must be at most 10"),
    ({**RAPPOR, "m": 4096, "k": 4096}, "rappor: m x k x values (50331648) must be at most 33554432"),
    ({**RAPPOR, "h": 9, "k": 64}, "rappor: RAPPOR: h (9) must be at most 8"),
])
def test_rappor_parameters_are_all_given_and_in_range(tmp_path, rappor, message):
    with pytest.raises(CollectionError, match="^" + str(tmp_path / "c.yaml").replace(".", r"\.")) as err:
        load_collection(_spec(tmp_path, rappor=rappor))
    assert message in str(err.value)


def test_the_example_rappor_parameters_are_accepted(tmp_path):
    params = load_collection(_spec(tmp_path)).rappor
    assert params is not None and (params.k, params.h, params.m) == (32, 1, 64) and params.f == Fraction(9, 16)


def test_a_rappor_block_under_another_protocol_is_refused(tmp_path):
    path = _spec(tmp_path, protocol="OUE", epsilon=1)  # the steward meant RAPPOR and got OUE
    with pytest.raises(CollectionError, match="rappor: applies to protocol RAPPOR only, not OUE"):
        load_collection(path)


@pytest.mark.parametrize("protocol", ["GRR", "SUE", "OUE", "OLH"])
def test_an_epsilon_with_no_signal_on_the_grid_is_refused_when_the_spec_is_read(tmp_path, protocol):
    path = _spec(tmp_path, protocol=protocol, epsilon=1e-12, rappor=None)
    with pytest.raises(CollectionError, match=r"epsilon: .*epsilon \(1e-12\) is too small"):
        load_collection(path)


def test_values_equal_in_unicode_nfc_are_one_value(tmp_path):
    path = _spec(tmp_path, protocol="OUE", epsilon=1, rappor=None, values=["caf\u00e9", "cafe\u0301", "tea"])
    with pytest.raises(CollectionError, match=r"values: must not repeat a value \(compared in Unicode NFC"):
        load_collection(path)


@pytest.mark.parametrize("value", ["a\x01", "b\ud800", "tab\tstop"])
def test_a_value_the_outputs_cannot_hold_is_refused(tmp_path, value):
    # \x01 made chart.svg ill-formed XML; a lone surrogate failed the run after the checks (no UTF-8 for it)
    path = tmp_path / "c.yaml"
    escaped = value.encode("unicode_escape").decode()  # YAML's double-quoted escapes
    path.write_text(f'collection: c\nprotocol: OUE\nepsilon: 1\nvalues: [ok, "{escaped}"]\nbatches: r/\n')
    with pytest.raises(CollectionError, match=r"values\[1\]: must be printable text"):
        load_collection(path)
