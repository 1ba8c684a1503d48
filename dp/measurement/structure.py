"""Choosing which 2-way marginals to measure, privately: a maximum spanning tree grown by the exponential mechanism.

This is the selection step of MST (McKenna, Miklau & Sheldon, "Winning the NIST Contest: A scalable
and general approach to differentially private synthetic data", JPC 2021, Alg. 1). After the 1-way
marginals are measured, each candidate pair (a, b) is scored by how far its true 2-way table is from
what the noisy 1-ways predict under independence:

    u(a, b) = || x_ab - N · p_a ⊗ p_b ||_1

where x_ab is the exact 2-way count vector, p_a and p_b are the post-processed noisy 1-way
distributions and N the post-processed noisy total (all DP outputs, fixed when the scores are
computed). Adding or removing one row changes one cell of x_ab by one and nothing else, so every
score moves by at most 1: the per-score sensitivity is 1. Kruskal's algorithm then runs for
``columns - 1`` rounds; in each, the exponential mechanism picks one pair among those joining two
different components (a public set, given the earlier picks), which are then merged. Each round is
one epsilon-DP selection, booked in the ledger before it draws (:func:`dp.mechanisms.selection.run_selection`).

>>> independence_scores({("a", "b"): np.array([5, 0, 0, 5])}, {"a": np.array([.5, .5]), "b": np.array([.5, .5])}, 10)
{('a', 'b'): 10.0}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from dprelease.dp.accounting.budget import PureBudget
from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext
from dprelease.dp.errors import InternalError, ParameterError
from dprelease.dp.mechanisms.selection import ExponentialMechanism, run_selection

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Pair = tuple[str, str]


def independence_scores(
    exact: Mapping[Pair, IntArray], distributions: Mapping[str, FloatArray], total: float
) -> dict[Pair, float]:
    """The L1 distance of each exact 2-way table from the independence prediction of the noisy 1-ways.

    Args:
        exact: Exact 2-way counts, flattened row-major as (a, b). Raw: the scores are only ever
            used through the exponential mechanism.
        distributions: Post-processed noisy 1-way distributions (each sums to 1).
        total: The post-processed noisy row count.

    Returns:
        The score of each pair (sensitivity 1 under add/remove-one-row).
    """
    scores = {}
    for (a, b), counts in exact.items():
        predicted = total * np.outer(distributions[a], distributions[b]).ravel()
        if predicted.shape != counts.shape:
            raise InternalError(f"pair ({a}, {b}): the 2-way counts do not match the 1-way domains")
        scores[(a, b)] = float(np.abs(counts - predicted).sum())
    return scores


def select_spanning_tree(
    columns: Sequence[str],
    candidates: Sequence[Pair],
    scores: Mapping[Pair, float],
    run_budget: PureBudget,
    context: ReleaseContext,
    *,
    score_sensitivity: int,
    stage: str = "selection",
) -> tuple[list[Pair], list[MeasurementRecord]]:
    """Grow a spanning forest over ``columns`` by the exponential mechanism, one edge per round.

    Args:
        columns: The measured columns (public).
        candidates: The pairs that may be chosen, in a public order (pairs too large to measure left out).
        scores: Each candidate's score.
        run_budget: Epsilon of each round's selection.
        context: The ledger and noise source.
        score_sensitivity: How far one privacy unit moves any score: 1 for row-level privacy, k when
            contributions are bounded to k rows per id (each of its rows moves a score by at most 1).
        stage: The ledger stage.

    Returns:
        The chosen pairs, in the order chosen, and each round's measurement record. Fewer than
        ``len(columns) - 1`` pairs only when the candidates cannot connect every column.
    """
    missing = [p for p in candidates if p not in scores]
    if missing:
        raise InternalError(f"candidate pair {missing[0]} has no score")
    if len(set(candidates)) != len(candidates):
        raise ParameterError("candidates must not repeat a pair")
    mechanism = ExponentialMechanism(score_sensitivity=score_sensitivity, budget=run_budget)
    # Each column's component, as arrays: a wide table has tens of thousands of candidates per round.
    position = {c: i for i, c in enumerate(columns)}
    first = np.array([position[p[0]] for p in candidates], dtype=np.int64)
    second = np.array([position[p[1]] for p in candidates], dtype=np.int64)
    values = np.array([scores[p] for p in candidates], dtype=np.float64)
    component = np.arange(len(columns), dtype=np.int64)
    chosen: list[Pair] = []
    records: list[MeasurementRecord] = []
    for round_number in range(1, len(columns)):
        open_pairs = np.flatnonzero(component[first] != component[second])  # in the candidates' public order
        if not open_pairs.size:
            break
        index, record = run_selection(mechanism, values[open_pairs].tolist(), context, stage=stage,
                                      query=f"spanning tree edge {round_number}")
        pair = candidates[int(open_pairs[index])]
        component[component == component[position[pair[0]]]] = component[position[pair[1]]]
        chosen.append(pair)
        records.append(record)
    return chosen, records
