"""Approximate zCDP: booking a mechanism that is (epsilon, delta)-DP rather than pure or zCDP.

A mechanism M is *δ-approximately ρ-zCDP* (mixture form) if for every pair of neighbours D, D' its output
distributions split as M(D) = (1 − δ)P' + δP'' and M(D') = (1 − δ)Q' + δQ'' with P', Q' satisfying
D_α(P'‖Q') ≤ ρα and D_α(Q'‖P') ≤ ρα for every α > 1 (the approximate zCDP of Bun & Steinke 2016, Sec. 8, with
equal weights). ``docs/proofs/approximate_zcdp.md`` proves the three facts the ledger relies on:

1. an (ε, δ)-DP mechanism is δ-approximately (ε²/2)-zCDP; PTR is δ-approximately (ε_t²/2 + ε_r²/2)-zCDP;
2. adaptive composition adds both: Σδ_i-approximately Σρ_i-zCDP (pure and zCDP mechanisms have δ_i = 0);
3. Δ-approximate ρ-zCDP implies (ε_CKS(ρ, δ'), δ' + Δ)-DP for every δ' in (0, 1 − Δ).

So a dataset declared (ε_L, δ_L) may spend ρ in total as long as ε_CKS(Σρ, δ_L − Σδ) ≤ ε_L: its usable cap
shrinks from ρ_cap = ρ(ε_L, δ_L) to ρ(ε_L, δ_L − Σδ) once mechanisms spend δ (:func:`effective_cap`). The same
rule sizes one release: a release that spends δ_mech of its declared δ gets ρ(ε, δ − δ_mech)
(:func:`release_budget`). Pure-DP ledgers take no δ at all.

>>> from fractions import Fraction as F
>>> cap = zcdp_from_approx_cks(1, F(1, 10**9)).rho
>>> effective_cap(cap, F(1), F(1, 10**9), F(0)) == cap
True
>>> effective_cap(cap, F(1), F(1, 10**9), F(1, 10**10)) < cap
True
"""

from __future__ import annotations

from fractions import Fraction

from dprelease.dp.accounting.budget import ZCDPBudget
from dprelease.dp.accounting.conversions import zcdp_from_approx_cks
from dprelease.dp.errors import LedgerError, ParameterError


def effective_cap(cap: Fraction, epsilon: Fraction | None, delta: Fraction, used: Fraction) -> Fraction:
    """The most rho a zCDP dataset may hold once (epsilon, delta) mechanisms have used ``used`` of its delta.

    Args:
        cap: The dataset's rho cap, rho(epsilon, delta) by the CKS conversion.
        epsilon: The dataset's declared epsilon (None for a dataset registered before delta was booked).
        delta: The dataset's declared delta.
        used: The delta spent and reserved by (epsilon, delta) mechanisms.

    Returns:
        ``cap`` when no delta is used; else min(cap, rho(epsilon, delta − used)), 0 if nothing is left.

    Raises:
        LedgerError: If delta is used but the ledger does not know the dataset's declared epsilon.
    """
    if used <= 0:
        return cap
    if epsilon is None:
        raise LedgerError("the ledger does not hold this dataset's declared epsilon (registered before delta was "
                          "booked); re-register it from its spec before running an (epsilon, delta) mechanism")
    if used >= delta:
        return Fraction(0)
    return min(cap, zcdp_from_approx_cks(epsilon, delta - used).rho)


def release_budget(epsilon: Fraction, delta: Fraction, mechanism_delta: Fraction) -> ZCDPBudget:
    """A release's rho when its (epsilon, delta) mechanisms take ``mechanism_delta`` of its declared delta.

    Raises:
        ParameterError: If ``mechanism_delta`` is not below ``delta``.
    """
    if not 0 <= mechanism_delta < delta:
        raise ParameterError(f"the mechanisms' delta ({float(mechanism_delta):g}) must be below the declared delta "
                             f"({float(delta):g}); the rest is needed to convert rho to (epsilon, delta)")
    return zcdp_from_approx_cks(epsilon, delta - mechanism_delta)
