"""The one path of every noisy result: replay what this release already drew, else charge the ledger, draw, seal.

A mechanism implements :class:`Chargeable` (its loss, its scale, its noise's error bars); :func:`noisy_result`
books its actual loss in the ledger before it draws any noise, and seals the result so that a re-run of the same
release replays it instead of drawing fresh noise. Marginals (:func:`measure`), the sparse vector technique and
the selection mechanisms all go through it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dprelease.dp.accounting.budget import Budget, Definition, PureBudget, ZCDPBudget, zcdp_from_pure
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.accounting.ledger_rows import _fraction, _text
from dprelease.dp.accounting.processes import fault_point
from dprelease.dp.errors import LedgerError
from dprelease.dp.mechanisms.noise import Mechanism
from dprelease.dp.mechanisms.random import IntArray, NoiseSource

# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeasurementRecord:
    """Public provenance of one noisy measurement (for estimation weights and the audit report).

    Attributes:
        stage: The release stage (``one_way``, ``two_way``, ``bounds`` ...).
        query: What was measured, e.g. ``marginal(age,income)``.
        mechanism: The mechanism's name.
        sensitivity: ``"L1=1"`` or ``"L2=1"``.
        scale: The noise scale (Laplace) or sigma (Gaussian) used, as a float.
        loss: The booked loss, in the ledger's unit.
        native_loss: The loss in the mechanism's own terms (epsilon for pure mechanisms).
        std: Standard deviation of the noise on each value, or None (SVT releases no values).
        ci95: Half-width of a 95 % interval of the noise on each value, or None.
        cells: Number of noisy values drawn (queries examined at most, for SVT).
    """

    stage: str
    query: str
    mechanism: str
    sensitivity: str
    scale: float
    loss: Budget
    native_loss: Budget
    std: float | None
    ci95: float | None
    cells: int


class Chargeable(Protocol):
    """What :func:`charge` needs to know of a mechanism."""

    name: str

    def privacy_loss(self) -> Budget:
        """The loss the mechanism actually has at its (rounded) scale."""
        ...

    def scale(self) -> float:
        """The noise scale recorded in the ledger."""
        ...

    def sensitivity_text(self) -> str:
        """``"L1=k"`` or ``"L2=k"``."""
        ...


def ledger_loss(native: Budget, definition: Definition, zcdp: ZCDPBudget | None = None) -> Budget:
    """Express a mechanism's own loss in the ledger's unit.

    Pure epsilon enters a zCDP ledger as epsilon²/2, or as ``zcdp`` when the mechanism proves a
    tighter zCDP bound of its own (the exponential mechanism: epsilon²/8, being epsilon-bounded-range);
    that bound is never allowed above epsilon²/2.
    """
    if definition == "pure":
        if not isinstance(native, PureBudget):
            raise LedgerError("a pure-DP ledger cannot book a zCDP mechanism")
        return native
    if isinstance(native, ZCDPBudget):
        return native
    general = zcdp_from_pure(native)
    if zcdp is None:
        return general
    if not 0 < zcdp.rho <= general.rho:
        raise LedgerError("a mechanism's own zCDP bound must be positive and at most epsilon²/2; this is a bug")
    return zcdp


@dataclass(frozen=True)
class ReleaseContext:
    """Where a release books its charges and draws its noise.

    Attributes:
        ledger: The open ledger.
        release_id: The release's reservation in the ledger.
        definition: The ledger's privacy definition.
        noise: The noise source (the secure OpenDP source in every release).
    """

    ledger: Ledger
    release_id: str
    definition: Definition
    noise: NoiseSource


def charge(mechanism: Chargeable, context: ReleaseContext, *, stage: str, query: str, cells: int) -> MeasurementRecord:
    """Book a mechanism's actual privacy loss in the ledger; call it before drawing any noise.

    Returns:
        The measurement's public provenance.
    """
    native = mechanism.privacy_loss()
    own_zcdp = getattr(mechanism, "zcdp_loss", None)  # a tighter zCDP bound the mechanism proves (bounded range)
    loss = ledger_loss(native, context.definition, own_zcdp() if own_zcdp is not None else None)
    context.ledger.charge(
        context.release_id,
        stage=stage,
        query=query,
        mechanism=mechanism.name,
        sensitivity=mechanism.sensitivity_text(),
        scale=repr(mechanism.scale()),
        loss=loss,
        native_loss=native,
    )
    std = getattr(mechanism, "std", None)
    ci95 = getattr(mechanism, "ci95_halfwidth", None)
    return MeasurementRecord(
        stage=stage,
        query=query,
        mechanism=mechanism.name,
        sensitivity=mechanism.sensitivity_text(),
        scale=mechanism.scale(),
        loss=loss,
        native_loss=native,
        std=std() if std is not None else None,
        ci95=float(ci95()) if ci95 is not None else None,
        cells=cells,
    )


def measurement_to_json(record: MeasurementRecord) -> dict[str, object]:
    """A JSON form of a measurement record (exact budgets as fractions)."""
    def budget(b: Budget) -> dict[str, str]:
        return {"kind": "pure" if isinstance(b, PureBudget) else "zcdp", "amount": _text(b.amount)}

    return {
        "stage": record.stage, "query": record.query, "mechanism": record.mechanism,
        "sensitivity": record.sensitivity, "scale": record.scale, "loss": budget(record.loss),
        "native_loss": budget(record.native_loss), "std": record.std, "ci95": record.ci95, "cells": record.cells,
    }


def measurement_from_json(data: Mapping[str, Any]) -> MeasurementRecord:
    """Inverse of :func:`measurement_to_json`."""
    def budget(b: Mapping[str, str]) -> Budget:
        return PureBudget(_fraction(b["amount"])) if b["kind"] == "pure" else ZCDPBudget(_fraction(b["amount"]))

    return MeasurementRecord(
        stage=data["stage"], query=data["query"], mechanism=data["mechanism"], sensitivity=data["sensitivity"],
        scale=float(data["scale"]), loss=budget(data["loss"]), native_loss=budget(data["native_loss"]),
        std=data["std"], ci95=data["ci95"], cells=int(data["cells"]),
    )


def replay(mechanism: Chargeable, context: ReleaseContext, *, stage: str, query: str) -> dict[str, Any] | None:
    """The sealed result of this release's measurement ``stage/query``, or None if not yet drawn.

    Raises:
        LedgerError: If the sealed measurement was made with another mechanism, scale or loss
            (the spec changed since the release id was first run).
    """
    payload = context.ledger.sealed(context.release_id, f"{stage}/{query}")
    if payload is None:
        return None
    data: dict[str, Any] = json.loads(payload)
    record = measurement_from_json(data["measurement"])
    if (record.mechanism, record.scale, record.native_loss) != (
        mechanism.name, mechanism.scale(), mechanism.privacy_loss()
    ):
        raise LedgerError(
            f"release {context.release_id!r}: sealed measurement {stage}/{query} was made with other parameters; "
            "the spec changed since this release id was first run"
        )
    data["measurement"] = record
    return data


def seal(context: ReleaseContext, record: MeasurementRecord, result: Mapping[str, Any]) -> None:
    """Seal a measurement's noisy result in the ledger, keyed by (release id, stage/query)."""
    payload = {"measurement": measurement_to_json(record), **result}
    context.ledger.seal(context.release_id, f"{record.stage}/{record.query}", json.dumps(payload))


def measure(
    mechanism: Mechanism, values: IntArray, context: ReleaseContext, *, stage: str, query: str
) -> tuple[IntArray, MeasurementRecord]:
    """Charge the ledger for ``mechanism``, draw its noise on ``values``, and seal the result.

    This is the only caller of a noise mechanism's ``sample``. When this release already drew
    the measurement (a re-run of the same release id), the sealed result is returned instead:
    no charge, no draw.

    Returns:
        The noisy values and the measurement's public provenance.
    """
    sealed = replay(mechanism, context, stage=stage, query=query)
    if sealed is not None:
        return np.asarray(sealed["values"], dtype=np.int64), sealed["measurement"]
    record = charge(mechanism, context, stage=stage, query=query, cells=len(values))
    noisy = mechanism.sample(np.asarray(values, dtype=np.int64), context.noise)
    fault_point("charge_before_seal")
    seal(context, record, {"values": noisy.tolist()})
    return noisy, record
