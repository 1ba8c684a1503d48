"""The one path of every noisy result: replay what this release already drew, else charge the ledger, draw, seal.

A mechanism implements :class:`Chargeable` (its loss, its scale, its noise's error bars); :func:`noisy_result`
books its actual loss in the ledger before it draws any noise, and seals the result so that a re-run of the same
release replays it instead of drawing fresh noise. Additive noise (:func:`dp.mechanisms.noise.measure`), the sparse
vector technique and the selection mechanisms all go through it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol, TypeVar, runtime_checkable

from dprelease.dp.accounting.budget import Budget, Definition, PureBudget, ZCDPBudget, zcdp_from_pure
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.accounting.ledger_rows import _fraction, _text
from dprelease.dp.accounting.processes import fault_point
from dprelease.dp.errors import InternalError, LedgerError
from dprelease.dp.mechanisms.random import NoiseSource

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
        delta: The delta booked with the loss (an (epsilon, delta) mechanism under zCDP, as approximate zCDP:
            ``docs/proofs/approximate_zcdp.md``), 0 for every pure or zCDP mechanism.
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
    delta: Fraction = Fraction(0)


@runtime_checkable
class Chargeable(Protocol):
    """What the ledger and the reports need of every mechanism: its loss, its scale, its error bars."""

    name: str

    def privacy_loss(self) -> Budget:
        """The loss the mechanism actually has at its (rounded) scale."""
        ...

    def zcdp_loss(self) -> ZCDPBudget | None:
        """A tighter zCDP bound the mechanism proves of its own (bounded range), or None for the general one."""
        ...

    def scale(self) -> float:
        """The noise scale recorded in the ledger (positive)."""
        ...

    def sensitivity_text(self) -> str:
        """``"L1=k"`` or ``"L2=k"``."""
        ...

    def noise_sd(self) -> float | None:
        """The noise's standard deviation on each released value (or an upper bound), None if none is released."""
        ...

    def ci95_halfwidth(self) -> float | None:
        """Half-width of a 95 % interval of the noise on each released value, None if none is released."""
        ...


class ReleasesNoValues:
    """Error bars of a mechanism that releases an index or a set of indices (SVT, selection): none."""

    def zcdp_loss(self) -> ZCDPBudget | None:
        """No bound tighter than the general epsilon²/2."""
        return None

    def noise_sd(self) -> float | None:
        """No noisy value is released."""
        return None

    def ci95_halfwidth(self) -> float | None:
        """No noisy value is released."""
        return None


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


def charge(mechanism: Chargeable, context: ReleaseContext, *, stage: str, query: str, cells: int,
           delta: Fraction = Fraction(0)) -> MeasurementRecord:
    """Book a mechanism's actual privacy loss in the ledger; call it before drawing any noise.

    ``delta`` is the delta of an (epsilon, delta) mechanism, booked beside its rho (zCDP ledgers only).

    Returns:
        The measurement's public provenance.

    Raises:
        LedgerError: If delta is booked on a pure-DP ledger (nothing is booked).
    """
    scale = mechanism.scale()
    if not (math.isfinite(scale) and scale > 0):  # a zero scale would release exact values
        raise InternalError(f"{mechanism.name}: the noise scale must be positive and finite; nothing was booked")
    if delta and context.definition != "zcdp":
        raise LedgerError(f"{mechanism.name} is (epsilon, delta)-DP: only a zCDP ledger books its delta")
    native = mechanism.privacy_loss()
    loss = ledger_loss(native, context.definition, mechanism.zcdp_loss())
    context.ledger.charge(
        context.release_id,
        stage=stage,
        query=query,
        mechanism=mechanism.name,
        sensitivity=mechanism.sensitivity_text(),
        scale=repr(scale),
        loss=loss,
        native_loss=native,
        delta=delta,
    )
    ci95 = mechanism.ci95_halfwidth()
    return MeasurementRecord(
        stage=stage,
        query=query,
        mechanism=mechanism.name,
        sensitivity=mechanism.sensitivity_text(),
        scale=scale,
        loss=loss,
        native_loss=native,
        std=mechanism.noise_sd(),
        ci95=float(ci95) if ci95 is not None else None,
        cells=cells,
        delta=delta,
    )


def measurement_to_json(record: MeasurementRecord) -> dict[str, object]:
    """A JSON form of a measurement record (exact budgets as fractions)."""
    def budget(b: Budget) -> dict[str, str]:
        return {"kind": "pure" if isinstance(b, PureBudget) else "zcdp", "amount": _text(b.amount)}

    return {
        "stage": record.stage, "query": record.query, "mechanism": record.mechanism,
        "sensitivity": record.sensitivity, "scale": record.scale, "loss": budget(record.loss),
        "native_loss": budget(record.native_loss), "std": record.std, "ci95": record.ci95, "cells": record.cells,
        **({"delta": _text(record.delta)} if record.delta else {}),
    }


def measurement_from_json(data: Mapping[str, Any]) -> MeasurementRecord:
    """Inverse of :func:`measurement_to_json`."""
    def budget(b: Mapping[str, str]) -> Budget:
        return PureBudget(_fraction(b["amount"])) if b["kind"] == "pure" else ZCDPBudget(_fraction(b["amount"]))

    return MeasurementRecord(
        stage=data["stage"], query=data["query"], mechanism=data["mechanism"], sensitivity=data["sensitivity"],
        scale=float(data["scale"]), loss=budget(data["loss"]), native_loss=budget(data["native_loss"]),
        std=data["std"], ci95=data["ci95"], cells=int(data["cells"]),
        delta=_fraction(data["delta"]) if "delta" in data else Fraction(0),
    )


def replay(mechanism: Chargeable, context: ReleaseContext, *, stage: str, query: str,
           delta: Fraction = Fraction(0)) -> dict[str, Any] | None:
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
    if (record.mechanism, record.scale, record.native_loss, record.delta) != (
        mechanism.name, mechanism.scale(), mechanism.privacy_loss(), delta
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


T = TypeVar("T")


def noisy_result(
    mechanism: Chargeable,
    context: ReleaseContext,
    draw: Callable[[NoiseSource], T],
    *,
    stage: str,
    query: str,
    cells: int,
    sealed_as: str,
    encode: Callable[[T], Any] = lambda result: result,
    decode: Callable[[Any], T] = lambda payload: payload,
    delta: Fraction = Fraction(0),
) -> tuple[T, MeasurementRecord]:
    """The one path of every noisy result: replay it, or charge the ledger, draw, and seal.

    When this release already drew ``stage/query`` (a re-run of the same release id), the sealed
    result is decoded and returned: no charge, no draw. Otherwise the mechanism's actual loss is
    booked first, then ``draw`` runs with the release's noise source, and the result is sealed in
    the ledger (under the key ``sealed_as`` of the payload, JSON via ``encode``) before it is
    returned. A kill between the charge and the seal leaves a charge without a result, which a
    resume books as lost (:meth:`dp.accounting.ledger.Ledger.resume`).

    Args:
        mechanism: The mechanism (its loss, scale and error bars).
        context: The ledger and noise source of the release.
        draw: Runs the mechanism on the exact answers with the given noise source.
        stage: The ledger stage.
        query: What is measured, unique within the release.
        cells: Values drawn (or queries examined), for the record.
        sealed_as: The payload key of the result (``values``, ``index``, ``indices``).
        encode: The result's JSON form.
        decode: The inverse of ``encode``.
        delta: The delta of an (epsilon, delta) mechanism, booked with its loss (zCDP ledgers only).

    Returns:
        The result and the measurement's public record.
    """
    sealed = replay(mechanism, context, stage=stage, query=query, delta=delta)
    if sealed is not None:
        return decode(sealed[sealed_as]), sealed["measurement"]
    record = charge(mechanism, context, stage=stage, query=query, cells=cells, delta=delta)
    result = draw(context.noise)
    fault_point("charge_before_seal")
    seal(context, record, {sealed_as: encode(result)})
    return result, record
