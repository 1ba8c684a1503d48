"""A local-DP collection: its public parameters, fixed when it is created, and the report table they imply.

A collection spec (YAML)::

    collection: covid-states           # an identifier
    protocol: OUE                      # GRR, SUE, OUE, OLH or RAPPOR
    epsilon: 1.0986                    # per report (GRR, SUE, OUE, OLH); RAPPOR states its own from k, h, f, p, q
    values: [CA, TX, ...]              # the public domain (RAPPOR: the candidate list)
    rappor: {k: 32, h: 1, m: 64, f: 9/16, p: 1/8, q: 11/16}  # RAPPOR only (examples/ldp-covid/rappor.yaml)
    batches: reports/                  # a folder of Parquet batches (relative to the spec)

A report batch is a Parquet table with ``report_id`` (string, unique over the collection), ``params``
(the collection's parameter fingerprint, :meth:`Collection.fingerprint`: a report made with other
parameters is refused) and the protocol's payload: ``value`` (int; GRR's reported code, OLH's bucket),
``seed`` (int64, OLH), ``bits`` (a string of '0'/'1' of the protocol's width; SUE, OUE, RAPPOR) and
``cohort`` (int, RAPPOR).
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from dprelease.dp.errors import DPReleaseError
from dprelease.dp.local.randomizers import GRR, OLH, OUE, SUE, UnaryEncoding
from dprelease.dp.local.rappor import RapporParams
from dprelease.schemas.identifiers import check_identifier, short
from dprelease.schemas.reading import _load_yaml, _local, _resolve

PROTOCOLS = ("GRR", "SUE", "OUE", "OLH", "RAPPOR")
MAX_EPSILON = 10
"""The largest epsilon a collection may state (per report; RAPPOR: longitudinal, which bounds one report's)."""
MAX_DESIGN = 1 << 25
"""RAPPOR: the most cells m·k·values of the decoder's dense design matrix (about 35 s to decode at this size)."""
MAX_OLH_CELLS = 5 * 10**10
"""OLH: the most reports × values one run decodes (each report is hashed with each value: about 5 minutes at this
size, 6.3 ns a hash on one core); checked before anything is registered, from the batches' footers."""


class CollectionError(DPReleaseError, ValueError):
    """A collection spec breaks a rule (names the file, key and rule)."""


@dataclass(frozen=True)
class Collection:
    """The public parameters of a local-DP collection."""

    name: str
    protocol: str
    values: tuple[str, ...]
    epsilon: float | None
    rappor: RapporParams | None
    batches: Path
    source: Path

    @property
    def k(self) -> int:
        """The domain size (candidates, for RAPPOR)."""
        return len(self.values)

    def randomizer(self) -> GRR | UnaryEncoding | OLH:
        """The client encoder of a pure protocol (not RAPPOR)."""
        assert self.epsilon is not None
        if self.protocol == "GRR":
            return GRR(self.k, self.epsilon)
        if self.protocol == "OLH":
            return OLH(self.k, self.epsilon)
        return SUE(self.k, self.epsilon) if self.protocol == "SUE" else OUE(self.k, self.epsilon)

    def width(self) -> int | None:
        """The length of ``bits`` (unary encodings and RAPPOR), or None."""
        if self.protocol in ("SUE", "OUE"):
            return self.k
        if self.protocol == "RAPPOR":
            assert self.rappor is not None
            return self.rappor.k
        return None

    def guarantee(self) -> dict[str, Any]:
        """The local guarantee per person, as the audit states it."""
        if self.protocol == "RAPPOR":
            assert self.rappor is not None
            return {"model": "local DP: each person randomises their own report before it leaves the device",
                    "epsilon_one_report": self.rappor.epsilon_one,
                    "epsilon_longitudinal": self.rappor.epsilon_infinity,
                    "note": "the permanent randomized response is memoised per (client secret, value): however "
                            "many reports a person sends about one value, the loss stays below the longitudinal "
                            "epsilon"}
        stated = self.randomizer().epsilon
        return {"model": "local DP: each person randomises their own report before it leaves the device",
                "epsilon_per_report": stated, "requested_epsilon": self.epsilon,
                "note": "probabilities are multiples of 2^-32 rounded towards more privacy; the stated epsilon "
                        "is what they give. A person sending r reports loses at most r times this"}

    def parameters(self) -> dict[str, Any]:
        """The parameters that define the collection (what its fingerprint covers)."""
        out: dict[str, Any] = {"collection": self.name, "protocol": self.protocol, "values": list(self.values)}
        if self.rappor is not None:
            r = self.rappor
            out["rappor"] = {"k": r.k, "h": r.h, "m": r.m, "f": str(r.f), "p": str(r.p), "q": str(r.q)}
        else:
            out["epsilon"] = self.epsilon
        return out

    def fingerprint(self) -> str:
        """SHA-256 (16 hex digits) of :meth:`parameters`: every report carries it."""
        text = json.dumps(self.parameters(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _fail(where: str, rule: str) -> CollectionError:
    return CollectionError(f"{where}: {rule}")


def _probability(where: str, value: Any) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _fail(where, f"({short(value)}) must be a probability")
    try:
        out = Fraction(str(value))
    except (ValueError, ZeroDivisionError):
        raise _fail(where, f"({short(value)}) must be a probability such as 0.5 or 1/2") from None
    if not 0 <= out <= 1:
        raise _fail(where, f"({short(value)}) must be in [0, 1]")
    return out


def load_collection(path: Path | str) -> Collection:
    """Load and check a collection spec.

    Raises:
        CollectionError: Naming the file, the key and the rule.
    """
    file = Path(path)
    try:
        doc = _load_yaml(file)
    except DPReleaseError as err:
        raise CollectionError(str(err)) from None
    where = str(file)
    allowed = {"collection", "protocol", "epsilon", "values", "rappor", "batches", "description"}
    unknown = sorted(set(doc) - allowed)
    if unknown:
        raise _fail(where, f"unknown key {short(unknown[0])}; allowed: {', '.join(sorted(allowed))}")
    for key in ("collection", "protocol", "values", "batches"):
        if key not in doc:
            raise _fail(where, f"missing required key {key!r}")
    try:
        name = check_identifier("collection", doc["collection"])
    except DPReleaseError as err:
        raise _fail(where, str(err)) from None
    protocol = doc["protocol"]
    if protocol not in PROTOCOLS:
        raise _fail(f"{where}: protocol", f"({short(protocol)}) must be one of {', '.join(PROTOCOLS)}")
    values = doc["values"]
    if not isinstance(values, list) or len(values) < 2 or not all(isinstance(v, str) and v for v in values):
        raise _fail(f"{where}: values", "must be a list of at least 2 non-empty strings (the public domain)")
    for index, value in enumerate(values):
        if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in value):  # the chart is XML, the outputs UTF-8
            raise _fail(f"{where}: values[{index}]", "must be printable text (no control character or lone surrogate)")
    if len({unicodedata.normalize("NFC", v) for v in values}) != len(values):
        raise _fail(f"{where}: values", "must not repeat a value (compared in Unicode NFC: 'café' written two ways "
                                        "is one value)")
    if len(values) > 100_000:
        raise _fail(f"{where}: values", "at most 100000 values")
    epsilon: float | None = None
    rappor: RapporParams | None = None
    if protocol == "RAPPOR":
        raw = doc.get("rappor")
        if not isinstance(raw, dict):
            raise _fail(f"{where}: rappor", "must give k, h, m, f, p, q")
        if "epsilon" in doc:
            raise _fail(f"{where}: epsilon", "RAPPOR's epsilon follows from k, h, f, p, q; do not declare it")
        keys = ("k", "h", "m", "f", "p", "q")
        wrong = sorted(set(raw) - set(keys), key=str)
        if wrong:  # a misspelt key must not leave a parameter at a value the steward did not choose
            raise _fail(f"{where}: rappor", f"unknown key {short(wrong[0])}; give exactly k, h, m, f, p, q")
        missing = [key for key in keys if key not in raw]
        if missing:
            raise _fail(f"{where}: rappor", f"missing {', '.join(missing)}: give k, h, m, f, p, q (they are fixed "
                                            "for the collection's life)")
        try:
            rappor = RapporParams(k=raw["k"], h=raw["h"], m=raw["m"], f=_probability(f"{where}: rappor.f", raw["f"]),
                                  p=_probability(f"{where}: rappor.p", raw["p"]),
                                  q=_probability(f"{where}: rappor.q", raw["q"]))
        except ValueError as err:
            raise _fail(f"{where}: rappor", str(err)) from None
        if rappor.epsilon_infinity > MAX_EPSILON:  # it bounds the one-report epsilon too
            raise _fail(f"{where}: rappor", f"the longitudinal epsilon ({rappor.epsilon_infinity:.4g}) must be at "
                                            f"most {MAX_EPSILON}, as any protocol's epsilon; raise f or lower h")
        if rappor.m * rappor.k * len(values) > MAX_DESIGN:
            raise _fail(f"{where}: rappor", f"m x k x values ({rappor.m * rappor.k * len(values)}) must be at most "
                                            f"{MAX_DESIGN} (the decoder's design matrix)")
    else:
        if "rappor" in doc:
            raise _fail(f"{where}: rappor", f"applies to protocol RAPPOR only, not {protocol}")
        raw_epsilon = doc.get("epsilon")
        if isinstance(raw_epsilon, bool) or not isinstance(raw_epsilon, int | float) or not (
                math.isfinite(raw_epsilon) and 0 < raw_epsilon <= MAX_EPSILON):
            raise _fail(f"{where}: epsilon", f"({short(raw_epsilon)}) must be a number in (0, {MAX_EPSILON}]")
        epsilon = float(raw_epsilon)
        try:
            Collection(name, protocol, tuple(values), epsilon, None, Path(), file).randomizer()
        except ValueError as err:
            raise _fail(f"{where}: epsilon", str(err)) from None
    batches = doc["batches"]
    if not isinstance(batches, str) or not batches:
        raise _fail(f"{where}: batches", "must be a folder path")
    return Collection(name, protocol, tuple(values), epsilon, rappor,
                      _resolve(file.parent / _local(f"{where}: batches", batches)), file)


def encode_batch(collection: Collection, codes: Any, bits: Any, first_id: int = 0, prefix: str = "r") -> Any:
    """A batch of reports of people holding ``codes`` (indices into ``values``), encoded by the real clients.

    For simulations and examples: each simulated person reports once (RAPPOR: a fresh permanent response,
    which a device would memoise). Returns a pyarrow table in the collection's report format.
    """
    import numpy as np
    import pyarrow as pa

    from dprelease.dp.local.rappor import encode_once

    x = np.asarray(codes, dtype=np.int64)
    columns: dict[str, Any] = {"report_id": [f"{prefix}{first_id + i}" for i in range(x.size)],
                               "params": [collection.fingerprint()] * x.size}
    if collection.protocol == "RAPPOR":
        assert collection.rappor is not None
        cohorts = bits.below(collection.rappor.m, x.size)
        reports = encode_once([collection.values[i] for i in x], cohorts, collection.rappor, bits)
        columns["cohort"] = cohorts
        columns["bits"] = ["".join(map(str, row)) for row in reports.tolist()]
    elif collection.protocol == "OLH":
        olh = collection.randomizer()
        assert isinstance(olh, OLH)
        columns["seed"], columns["value"] = olh.encode(x, bits)
    elif collection.protocol == "GRR":
        columns["value"] = collection.randomizer().encode(x, bits)
    else:
        unary = collection.randomizer()
        assert isinstance(unary, UnaryEncoding)
        columns["bits"] = ["".join(map(str, row)) for row in unary.encode(x, bits).tolist()]
    return pa.table(columns)
