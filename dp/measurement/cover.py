"""Noise-capped cliques, and extra 2-way measurements of the pairs the junction tree leaves out (issue 14, §6.4).

A 3-clique (pa, q, ch) whose measurement would hold more noise than rows is not worth its cells: its
expected L1 noise, sqrt(2/π)·σ per cell over |pa|·|q|·|ch| cells (σ the clique's noise scale from its share of
the budget), exceeds :data:`NOISE_CAP` times the noisy row count N̂. Such a second parent q is not a candidate
(:func:`dp.measurement.cliques.select_cliques`, ``noise_cap``); when every candidate is capped the child
gets the clique (pa, ch) and its second-parent round is not run. All of this is a function of public
quantities (domain sizes, the plan's budget, N̂, and the cliques chosen so far: DP outputs).

Each such *freed* round, and half of the capped clique's measurement budget, then go to pairs that no
clique holds: the round becomes :data:`PAIRS_PER_ROUND` rounds of the exponential mechanism that together cost
what it would have (:func:`sub_round_budget`; each booked before it draws), each picking among the uncovered
pairs by how far the pair's table lies from the model the noisy cliques define, u(a, b) = ‖x_ab − N̂·P(a, b)‖₁
(:func:`residual_scores`, AIM's score; sensitivity 1 per row), and each chosen pair is measured as a 2-way
marginal with a :data:`PAIRS_PER_ROUND`-th of that half (through the ordinary measurement path: booked, then
drawn); a share no pair takes measures the capped clique once more (:func:`unused_shares`).
A measurement must lie inside one clique of the fitted model, so the model's cliques grow: the column sampled
earlier, ``early``, is added as one more parent to every clique on the junction-tree path from the later
column's clique up to the nearest clique that holds ``early`` (:func:`cover_pair`; the result is again a
junction tree in sampling order). The model's cells may grow only to :data:`MODEL_GROWTH` times the measured
cliques' cells, so a pair whose path would take more is not a candidate; the fit starts a grown clique from
every measurement of its child (:func:`dp.synthesis.junction.measured_start`) and takes fewer steps in
proportion to its growth (:func:`dp.synthesis.junction.fit_steps`).

>>> cover_pair([("a", "b"), ("a", "b", "c"), ("c", "d")], "a", "d")
[('a', 'b'), ('a', 'b', 'c'), ('c', 'a', 'd')]
>>> capped(10.0, 10_000, 30_000.0)
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from dprelease.dp.accounting.budget import (
    PureBudget,
    ZCDPBudget,
    bounded_range_from_zcdp_share,
    zcdp_from_bounded_range,
)
from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext
from dprelease.dp.mechanisms.selection import ExponentialMechanism, run_selection
from dprelease.dp.synthesis.arrays import sum_to
from dprelease.dp.synthesis.junction import JunctionTree, Marginal, junction_parents, measured_start
from dprelease.dp.synthesis.noisy import NoisyMarginal

Clique = tuple[str, ...]

EXTRA_PAIR_QUERY = "extra pair("
"""The ledger query of an extra pair's measurement starts so: ``extra pair(a,b)``."""

NOISE_CAP = 1.0
"""A clique is not measured whole when its expected L1 noise would exceed this multiple of the noisy row count.

The same line as :func:`dp.synthesis.junction.measured_start`'s gate: beyond it a clique's table is more noise
than signal (public quantities only)."""

MODEL_GROWTH = 4.0
"""The model's cells after covering extra pairs stay within this multiple of the measured cliques' cells.

The fit then takes fewer steps in proportion (:data:`dp.synthesis.junction.FIT_CELL_STEPS`), so the estimate
stage's CPU stays near that of the ungrown model. At 2 (Adult ε = 3) age × education could not be covered
(education joins three cliques on the way: +33 k cells against 12 k measured) and tvd2 was .0273 against .0257
at 4 (6 seeds each, in process, with the full number of steps; ``docs/research/synthesis.md`` §6.4)."""

PAIRS_PER_ROUND = 3
"""Extra pairs bought by each freed round: its epsilon and its clique's freed half budget are split this many ways.

A pair of two coarse columns has a few hundred cells against a 3-clique's thousands, so a third of half a
clique's budget still measures it far below its rows' signal (public: domain sizes and the plan's budget)."""

_L1_PER_CELL = float(np.sqrt(2 / np.pi))


def unused_shares(freed: Sequence[int], pairs: int, per_round: int = PAIRS_PER_ROUND) -> dict[int, int]:
    """The extra-pair shares that ``pairs`` chosen pairs leave unused, handed back to the freed cliques in turn.

    Each freed clique's half budget was cut into ``per_round`` pair shares; a share no pair took (the
    candidates ran out under the cell limit) measures its clique once more instead of staying unspent.
    Public: the freed cliques and the number of chosen pairs are DP outputs.

    >>> unused_shares([2, 5], 4)
    {2: 1, 5: 1}
    >>> unused_shares([2, 5], 1)
    {2: 3, 5: 2}
    >>> unused_shares([2], 3)
    {}
    """
    unused = per_round * len(freed) - pairs
    shares = {index: unused // len(freed) + (1 if k < unused % len(freed) else 0) for k, index in enumerate(freed)}
    return {index: n for index, n in shares.items() if n > 0}


def sub_round_budget(round_budget: PureBudget, rounds: int, *, zcdp: bool) -> PureBudget:
    """The epsilon of each of ``rounds`` exponential-mechanism rounds that together cost one round of ``round_budget``.

    Under pure DP the epsilons add: epsilon / rounds. Under zCDP (how a release books its selections) each
    round is epsilon-bounded-range, (epsilon² / 8)-zCDP, so the rhos add: epsilon / sqrt(rounds), rounded
    down to a short decimal (towards more noise). Splitting epsilon by ``rounds`` there would leave
    1 - 1 / rounds of the freed round's rho unspent.

    >>> from fractions import Fraction
    >>> sub_round_budget(PureBudget(Fraction(3, 10)), 3, zcdp=False).epsilon
    Fraction(1, 10)
    >>> part = sub_round_budget(PureBudget(Fraction(3, 10)), 3, zcdp=True)
    >>> 3 * zcdp_from_bounded_range(part).rho <= zcdp_from_bounded_range(PureBudget(Fraction(3, 10))).rho
    True
    >>> float(part.epsilon) > 0.1732
    True
    """
    if not zcdp:
        return PureBudget(round_budget.epsilon / rounds)
    return bounded_range_from_zcdp_share(ZCDPBudget(zcdp_from_bounded_range(round_budget).rho / rounds))


def capped(sigma: float, cells: int, total: float, cap: float = NOISE_CAP) -> bool:
    """Whether ``cells`` cells measured at noise scale ``sigma`` hold more expected noise than ``cap`` · ``total``."""
    return _L1_PER_CELL * sigma * cells > cap * total


def cells(clique: Clique, sizes: Mapping[str, int]) -> int:
    """The number of cells of a clique (coarse sizes)."""
    out = 1
    for c in clique:
        out *= sizes[c]
    return out


def cover_pair(cliques: Sequence[Clique], a: str, b: str) -> list[Clique] | None:
    """The cliques with one column added along a path so that one clique holds both ``a`` and ``b``, or None.

    ``cliques`` are (parents..., child) in sampling order. For the column drawn later (its clique: the one
    where it is the child), the junction tree is walked up to the nearest clique holding the other column;
    every clique on the way gets that column as one more parent (it is drawn before all of them). None when
    no ancestor holds it (the two lie in different branches) or either column is in no clique.
    """
    if any({a, b} <= set(c) for c in cliques):
        return list(cliques)
    grown = _Cover(cliques).grown(a, b)
    return None if grown is None else [grown.get(j, c) for j, c in enumerate(cliques)]


class _Cover:
    """The junction tree's parents and each column's home clique, computed once for many pairs."""

    def __init__(self, cliques: Sequence[Clique]) -> None:
        self.cliques = cliques
        self.parents = junction_parents(cliques)
        self.home = {c[-1]: i for i, c in enumerate(cliques)}
        if cliques:
            self.home.setdefault(cliques[0][0], 0)

    def grown(self, a: str, b: str) -> dict[int, Clique] | None:
        """The cliques :func:`cover_pair` changes, by index, as they become; None when it cannot cover the pair."""
        for early, late in ((a, b), (b, a)):
            if late not in self.home or early not in self.home:
                continue
            path: list[int] = []
            i: int | None = self.home[late]
            while i is not None and early not in self.cliques[i]:
                path.append(i)
                i = self.parents[i]
            if i is None or (path and self.cliques[path[0]][-1] != late):
                continue
            return {j: (*self.cliques[j][:-1], early, self.cliques[j][-1]) for j in path}
        return None


def extra_candidates(
    model: Sequence[Clique], scores: Mapping[tuple[str, str], float], sizes: Mapping[str, int], cell_limit: int
) -> list[tuple[tuple[str, str], list[Clique]]]:
    """The scored pairs that no clique holds and that :func:`cover_pair` can cover within ``cell_limit`` cells.

    Each with the model it would make, in the public order of ``scores``. The tree's parents are computed once
    and each candidate's cells from the cliques its path changes (a wide table has tens of thousands of pairs).
    """
    held = {frozenset((x, y)) for c in model for x in c for y in c if x != y}
    cover = _Cover(model)
    base = [cells(c, sizes) for c in model]
    total = sum(base)
    out = []
    for pair in scores:
        if frozenset(pair) in held:
            continue
        grown = cover.grown(*pair)
        if grown is not None and total + sum(cells(c, sizes) - base[j] for j, c in grown.items()) <= cell_limit:
            out.append((pair, [grown.get(j, c) for j, c in enumerate(model)]))
    return out


def residual_scores(
    candidates: Sequence[tuple[tuple[str, str], list[Clique]]],
    measured: Sequence[NoisyMarginal],
    exact: Mapping[tuple[str, str], npt.NDArray[np.int64]],
    sizes: Mapping[str, int],
    total: float,
) -> list[float]:
    """How far each candidate pair's exact table lies from the model the noisy cliques define (AIM's score).

    u(a, b) = ‖x_ab − N̂ · P(a, b)‖₁, with P the degree-2 network read off the noisy cliques
    (:func:`dp.synthesis.junction.measured_start`, calibrated on the candidate's grown tree: post-processing of
    DP outputs, so public). One row moves one cell of x_ab: sensitivity 1 per row, as the independence score.
    ``exact`` holds the raw coarse counts of every pair (flattened in its own order): used only here.
    """
    observations = [Marginal(m.columns, m.counts.astype(np.float64).reshape(m.shape), m.variance) for m in measured]
    out = []
    for (a, b), grown in candidates:
        tree = JunctionTree(tuple(grown), junction_parents(grown), dict(sizes))
        start = measured_start(tree, observations, total)
        beliefs = tree.calibrate(start if start is not None else [np.zeros(tree.shape(i)) for i in range(len(grown))])
        host = tree.host((a, b))
        joint = np.exp(sum_to(beliefs[host], tree.cliques[host], (a, b), log=True))
        x = exact[(a, b)] if (a, b) in exact else exact[(b, a)].reshape(sizes[b], sizes[a]).T.ravel()
        out.append(float(np.abs(x - total * joint.ravel()).sum()))
    return out


def select_extra_pairs(
    model: Sequence[Clique],
    rounds: int,
    scores: Mapping[tuple[str, str], float],
    sizes: Mapping[str, int],
    run_budget: PureBudget,
    context: ReleaseContext,
    *,
    score_sensitivity: int,
    cell_limit: int,
    stage: str = "selection",
    measured: Sequence[NoisyMarginal] = (),
    exact: Mapping[tuple[str, str], npt.NDArray[np.int64]] | None = None,
    total: float = 0.0,
) -> tuple[list[tuple[str, str]], list[Clique], list[MeasurementRecord]]:
    """Up to ``rounds`` uncovered pairs, each chosen by the exponential mechanism on its independence score.

    Args:
        model: The chosen cliques, (parents..., child) in sampling order.
        rounds: How many rounds were freed (public: follows from the DP-chosen cliques and the plan).
        scores: The independence score of every candidate pair (raw: used only through the mechanism;
            sensitivity ``score_sensitivity``); its keys are the candidates, in public order.
        sizes: Coarse sizes of the columns.
        run_budget: Epsilon of each round (a freed second-parent round's).
        context: The ledger and noise source.
        score_sensitivity: 1 per row (k with k rows per privacy unit).
        cell_limit: The model's cells may not exceed this (public).
        stage: The ledger stage.
        measured: With ``exact``: the noisy cliques measured so far; each candidate is then scored by
            :func:`residual_scores` (its distance from the model they define) instead of ``scores``.
        exact: The exact coarse counts of every pair (raw).
        total: The noisy row count.

    Returns:
        The chosen pairs, the model's cliques grown to hold them, and each round's record. A round with
        one candidate is not run (a public choice), with none it ends the rounds.
    """
    mechanism = ExponentialMechanism(score_sensitivity=score_sensitivity, budget=run_budget)
    current = list(model)
    chosen: list[tuple[str, str]] = []
    records: list[MeasurementRecord] = []
    for k in range(1, rounds + 1):
        candidates = extra_candidates(current, scores, sizes, cell_limit)
        if not candidates:
            break
        index = 0
        if len(candidates) > 1:
            values = (residual_scores(candidates, measured, exact, sizes, total) if exact is not None
                      else [scores[p] for p, _ in candidates])
            index, record = run_selection(mechanism, values, context, stage=stage, query=f"extra pair {k}")
            records.append(record)
        pair, current = candidates[index]
        chosen.append(pair)
    return chosen, current, records
