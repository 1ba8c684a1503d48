"""Choosing the cliques of a degree-2 junction-tree model, privately.

After a spanning tree over the columns has been chosen (:mod:`dp.measurement.structure`, MST-style), the tree
is visited breadth-first from a root; each column ``ch`` with tree parent ``pa`` gets a clique
``(pa, q, ch)``, where the second parent ``q`` is chosen by the exponential mechanism among the
columns that already share a clique with ``pa`` (a public set given the earlier choices), or the
clique ``(pa, ch)`` when there is none. Each clique's separator {pa, q} lies inside an earlier
clique, so the cliques form a junction tree by construction (each column conditioned on up to two
parents: a degree-2 Bayesian network, as in PrivBayes, Zhang et al. 2017).

The score of ``q`` is how much it adds to predicting ``ch`` beyond ``pa``, on the exact 3-way
counts x over (pa, q, ch) in coarse codes:

    u(q) = Σ_{a,b} || x[a, b, :] - x[a, b] · c_a ||_1,    c_a = x[a, :, :].sum(0) / x[a, :, :].sum()

(c_a: the empirical distribution of ch given pa = a; the term is 0 for an empty slice). Sensitivity
(add or remove one row (a, b0, k)): only slice a changes. The row's own cell moves its term by at most
||e_k - c'_a||_1 ≤ 2, and c_a moves by (e_k - c_a) / (n_a + 1), of L1 norm ≤ 2 / (n_a + 1), which
moves every term b of the slice by at most x[a, b] · 2 / (n_a + 1); these add up to 2 n_a / (n_a + 1)
< 2. So |u(q) - u'(q)| < 4 (0 before and after when n_a = 0). With at most k rows per privacy unit
the sensitivity is below 4k. The full argument: ``docs/proofs/conditional_l1_score.md``.

Numeric columns are counted in coarse codes inside cliques (:func:`coarse_map`), from bins of about
equal mass under their *noisy* 1-way marginal: a public post-processing choice that costs nothing.

>>> coarse_map(np.array([0.5, 0.1, 0.1, 0.1, 0.2]), 2).tolist()
[0, 1, 1, 1, 1]
>>> float(conditional_l1_score(np.array([[[5, 0], [0, 5]]])))
10.0
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dprelease.dp.accounting.budget import Budget, PureBudget, ZCDPBudget
from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext
from dprelease.dp.errors import InternalError, ParameterError
from dprelease.dp.measurement.cover import (
    EXTRA_PAIR_QUERY,
    MODEL_GROWTH,
    NOISE_CAP,
    PAIRS_PER_ROUND,
    cells,
    extra_candidates,
    select_extra_pairs,
    sub_round_budget,
    unused_shares,
)
from dprelease.dp.measurement.marginals import ColumnDomain
from dprelease.dp.measurement.structure import independence_scores, select_spanning_tree
from dprelease.dp.mechanisms.noise import additive_mechanism, measure
from dprelease.dp.mechanisms.selection import ExponentialMechanism, run_selection
from dprelease.dp.synthesis import arrays
from dprelease.dp.synthesis.noisy import NoisyMarginal
from dprelease.dp.synthesis.postprocess import consistent_counts, estimate_total

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Clique = tuple[str, ...]

NOISE_L1_PER_CELL = float(np.sqrt(2 / np.pi))
"""E|Z| / σ for Gaussian noise: the L1 error a measured cell adds (AIM's penalty, McKenna et al. 2022)."""

CONDITIONAL_L1_SENSITIVITY = 4
"""An upper bound on the conditional-L1 score's sensitivity for one row (the bound itself is < 4)."""


def coarse_map(distribution: FloatArray, bins: int) -> IntArray:
    """Contiguous fine-to-coarse map into at most ``bins`` bins of about equal mass under ``distribution``.

    A *spike*, a code holding at least 1/bins of the mass (hours-per-week = 40, capital-gain = 0), gets
    a bin of its own, and no bin straddles it: the spike's neighbours are not lumped in with it, so
    their dependence on other columns is modelled rather than refined away. The codes between spikes
    share the remaining bins by mass: a bin closes once it holds the remaining mass divided by the
    remaining bins, and a last bin of a run holding less than half of that joins its predecessor.
    ``distribution`` must be public (a post-processed noisy 1-way), so the map is too.

    >>> coarse_map(np.array([0.05, 0.05, 0.6, 0.1, 0.1, 0.1]), 4).tolist()
    [0, 0, 1, 2, 2, 3]
    """
    if bins < 1:
        raise ParameterError(f"bins ({bins}) must be positive")
    p = np.maximum(np.asarray(distribution, dtype=np.float64), 0.0)
    total = p.sum()
    p = p / total if total > 0 else np.full(len(p), 1.0 / max(len(p), 1))
    spikes = p >= 1.0 / bins - 1e-12
    if spikes.sum() >= bins:  # more spikes than bins cannot happen for a distribution; guard rounding
        spikes[:] = False
    others = max(1, bins - int(spikes.sum()))
    target = max(float(p[~spikes].sum()) / others, 1e-12)
    out = np.zeros(len(p), dtype=np.int64)
    current, held, run_start = 0, 0.0, True
    for i in range(len(p)):
        if spikes[i]:
            if not run_start:
                if held < target / 2 and current > 0 and out[i - 1] == current and _bin_of_run(out, spikes, i):
                    out[out == current] = current - 1
                    current -= 1
                current += 1
            out[i] = current
            current += 1
            held, run_start = 0.0, True
            continue
        out[i] = current
        held += p[i]
        run_start = False
        if held >= target - 1e-12 and i < len(p) - 1 and not spikes[i + 1]:
            current += 1
            held, run_start = 0.0, True
    if not run_start and held < target / 2 and current > 0 and _bin_of_run(out, spikes, len(p)):
        out[out == current] = current - 1
    _, dense = np.unique(out, return_inverse=True)
    return dense.astype(np.int64)


def _bin_of_run(out: IntArray, spikes: npt.NDArray[np.bool_], end: int) -> bool:
    """Whether the bin ending just before ``end`` follows another bin of the same run (not a spike)."""
    last = out[end - 1]
    before = np.flatnonzero(out[:end] == last)[0] - 1
    return before >= 0 and not spikes[before]


def conditional_l1_score(counts: npt.NDArray[np.integer] | FloatArray) -> float:
    """The score of a second parent: Σ_{a,b} || x[a,b,:] - x[a,b] · P(ch | pa = a) ||_1 over x of shape (pa, q, ch)."""
    x = np.asarray(counts, dtype=np.float64)
    if x.ndim != 3:
        raise InternalError("conditional_l1_score needs a 3-way table (pa, q, ch)")
    by_parent = x.sum(axis=1)  # (pa, ch)
    slice_sizes = by_parent.sum(axis=1, keepdims=True)
    conditional = np.divide(by_parent, slice_sizes, out=np.zeros_like(by_parent), where=slice_sizes > 0)
    predicted = x.sum(axis=2, keepdims=True) * conditional[:, None, :]
    return float(np.abs(x - predicted).sum())


def tree_order(columns: Sequence[str], edges: Sequence[tuple[str, str]], root: str) -> list[tuple[str, str | None]]:
    """Breadth-first ``(column, tree parent)`` from ``root``; columns outside its component start new roots.

    >>> tree_order(["a", "b", "c", "d"], [("a", "b"), ("b", "c")], "b")
    [('b', None), ('a', 'b'), ('c', 'b'), ('d', None)]
    """
    neighbours: dict[str, list[str]] = {c: [] for c in columns}
    for a, b in edges:
        neighbours[a].append(b)
        neighbours[b].append(a)
    order: list[tuple[str, str | None]] = []
    seen: set[str] = set()
    for start in [root, *columns]:
        if start in seen:
            continue
        seen.add(start)
        queue: list[tuple[str, str | None]] = [(start, None)]
        while queue:
            node, parent = queue.pop(0)
            order.append((node, parent))
            for child in neighbours[node]:
                if child not in seen:
                    seen.add(child)
                    queue.append((child, node))
    return order


def hub(columns: Sequence[str], edges: Sequence[tuple[str, str]]) -> str:
    """The column of highest degree in the tree (first in ``columns`` order on a tie): a public root rule."""
    degree = {c: sum(c in e for e in edges) for c in columns}
    return max(columns, key=lambda c: degree[c])


ROOT_AUTO = "auto"
"""``root: auto``: the root is the tree leaf chosen by :func:`select_root` (a booked exponential-mechanism round)."""


def leaf_scores(columns: Sequence[str], edges: Sequence[tuple[str, str]],
                scores: Mapping[tuple[str, str], float]) -> dict[str, float]:
    """For every leaf of the tree, the mean independence score of its pairs that no tree edge holds.

    Private: used only through :func:`select_root` (proof: ``docs/proofs/root_choice.md``).
    A leaf is in one clique only (its own, as the child): unless it is the root, its dependence on every
    column but its tree parent is left to second-parent choices that can pick it only where it already
    shares a clique. The root is the one column that enters its neighbour's cliques for free, so the leaf
    with the most uncovered dependence is the root that adds the most. ``scores`` are the independence
    scores of :func:`dp.measurement.structure.independence_scores` (raw: sensitivity 1 per row each); a
    mean of them also moves by at most 1 per row. Leaves with no scored pair outside the tree are left out.

    >>> leaf_scores(["a", "b", "c"], [("a", "b"), ("b", "c")], {("a", "b"): 5.0, ("a", "c"): 3.0, ("b", "c"): 1.0})
    {'a': 3.0, 'c': 3.0}
    """
    neighbours: dict[str, set[str]] = {c: set() for c in columns}
    for a, b in edges:
        neighbours[a].add(b)
        neighbours[b].add(a)
    out: dict[str, float] = {}
    for c in columns:
        if len(neighbours[c]) != 1:
            continue
        outside = [value for (a, b), value in scores.items()
                   if c in (a, b) and ({a, b} - {c}).isdisjoint(neighbours[c])]
        if outside:
            out[c] = float(np.mean(outside))
    return out


def select_root(
    columns: Sequence[str],
    edges: Sequence[tuple[str, str]],
    scores: Mapping[tuple[str, str], float],
    run_budget: PureBudget,
    context: ReleaseContext,
    *,
    score_sensitivity: int,
    stage: str = "selection",
) -> tuple[str, list[MeasurementRecord]]:
    """``root: auto``: the leaf of the chosen tree with the most dependence outside the tree, privately.

    One exponential-mechanism round over the tree's leaves (a public set: the tree is a DP output), each
    scored by :func:`leaf_scores` (sensitivity ``score_sensitivity``: 1 per row, k with k rows per unit),
    booked before it draws. With fewer than two candidates nothing is drawn and the tree's hub (or the
    only candidate) is the root: a public decision; the round's budget is then not spent.
    """
    leaves = leaf_scores(columns, edges, scores)
    if len(leaves) < 2:
        return (next(iter(leaves)) if leaves else hub(columns, edges)), []
    names = list(leaves)
    mechanism = ExponentialMechanism(score_sensitivity=score_sensitivity, budget=run_budget)
    index, record = run_selection(mechanism, [leaves[n] for n in names], context, stage=stage,
                                  query="root of the junction tree")
    return names[index], [record]


def candidate_triples(order: Sequence[tuple[str, str | None]]) -> list[Clique]:
    """Every (pa, q, ch) that :func:`select_cliques` may score, for counting them in one pass."""
    out: list[Clique] = []
    for child, parent in order:
        if parent is None:
            continue
        out += [(parent, q, child) for q, _ in order if q not in (parent, child)]
    return out


def noise_dominated(sigma: float, bins: int, total: float) -> bool:
    """Whether a full clique of three coarse columns would hold more noise than rows (public quantities).

    Then the second parents are chosen noise-aware (:func:`select_cliques`). Measured (3 releases each, ε = 1):
    on ACS MA (7,634 rows: 18,800 expected noise against 7,634) tvd2 0.085 -> 0.079; on Adult (32,561 rows:
    12,300 against 32,561) the penalty would cost about 0.002 of tvd2, so it is off there.

    >>> noise_dominated(46.0, 8, 7634), noise_dominated(30.0, 8, 32561)
    (True, False)
    """
    return NOISE_L1_PER_CELL * sigma * bins**3 > total


def select_cliques(
    order: Sequence[tuple[str, str | None]],
    triples: Mapping[Clique, IntArray],
    shapes: Mapping[str, int],
    run_budget: PureBudget,
    context: ReleaseContext,
    *,
    score_sensitivity: int,
    stage: str = "selection",
    noise_sd: float = 0.0,
    clique_sd: float = 0.0,
    noise_cap: float = float("inf"),
) -> tuple[list[Clique], list[MeasurementRecord]]:
    """The cliques of a degree-2 junction tree along ``order``, second parents chosen by the exponential mechanism.

    Args:
        order: ``(column, tree parent)`` in breadth-first order (a root has parent None).
        triples: Exact counts (raw: used only inside scores) of every candidate (pa, q, ch), flattened.
        shapes: The (coarse) size of every column.
        run_budget: Epsilon of each selection.
        context: The ledger and noise source.
        score_sensitivity: Bound on how far one privacy unit moves a score (4 per row; 4k with k rows).
        stage: The ledger stage.
        noise_sd: With a positive σ (the cliques' noise, public), selection is noise-aware, as AIM's
            (McKenna et al. 2022): each candidate's score loses the L1 error its extra cells would add,
            sqrt(2/π)·σ·(|pa||q||ch| − |pa||ch|), and "no second parent" (the clique (pa, ch), score 0)
            is a candidate too. The penalties are public, so the sensitivity is unchanged.
        clique_sd: The cliques' noise scale σ (public), for ``noise_cap``.
        noise_cap: A candidate q whose clique would hold more expected noise than this,
            sqrt(2/π)·σ·|pa||q||ch| > ``noise_cap`` (:func:`dp.measurement.cover.capped`: public quantities), is
            left out; when every candidate is, the child gets (pa, ch) and no round is run (its round is *freed*:
            :func:`freed_rounds`).

    Returns:
        The cliques, each (pa, q, ch) or (pa, ch), in order; and each selection's record (a selection
        with a single candidate is not run and has no record: it would cost budget for no choice).
    """
    mechanism = ExponentialMechanism(score_sensitivity=score_sensitivity, budget=run_budget)
    cliques: list[Clique] = []
    records: list[MeasurementRecord] = []
    for child, parent in order:
        if parent is None:
            continue
        partners = list(dict.fromkeys(q for clique in cliques if parent in clique for q in clique if q != parent))
        partners = [q for q in partners
                    if NOISE_L1_PER_CELL * clique_sd * shapes[parent] * shapes[q] * shapes[child] <= noise_cap]
        if not partners:
            cliques.append((parent, child))
            continue
        if len(partners) == 1 and noise_sd <= 0:
            # One candidate: the exponential mechanism could only return it. The candidates follow from
            # the tree and the cliques chosen so far (DP outputs), so skipping is a public decision; the
            # selection's budget is not drawn and returns to the dataset when the release closes.
            cliques.append((parent, partners[0], child))
            continue
        scores = []
        pair_cells = shapes[parent] * shapes[child]
        for q in partners:
            counts = triples.get((parent, q, child))
            if counts is None:
                raise InternalError(f"no counts for the candidate clique ({parent}, {q}, {child})")
            extra = NOISE_L1_PER_CELL * noise_sd * (pair_cells * shapes[q] - pair_cells)
            scores.append(conditional_l1_score(counts.reshape(shapes[parent], shapes[q], shapes[child])) - extra)
        if noise_sd > 0:
            scores.append(0.0)  # no second parent: nothing gained, no cells added (a public constant)
        index, record = run_selection(mechanism, scores, context, stage=stage,
                                      query=f"second parent of {child}")
        cliques.append((parent, partners[index], child) if index < len(partners) else (parent, child))
        records.append(record)
    return cliques, records


@dataclass(frozen=True)
class PlannedCliques:
    """A degree-2 junction tree chosen privately (``cliques: auto``), then measured clique by clique.

    Attributes:
        tree_rounds: Rounds of the exponential mechanism growing the spanning tree (columns - 1).
        tree_budget: Epsilon of each tree round (half the selection stage).
        parent_rounds: At most so many second-parent selections (columns - 2).
        parent_budget: Epsilon of each second-parent selection (the other half).
        candidates: The pairs the tree may use, in public order.
        clique_budget: The budget of each clique measurement (the cliques stage split equally).
        bins: Coarse bins of a numeric column inside cliques.
        root: The public root column, :data:`ROOT_AUTO` for :func:`select_root`, or None for the tree's hub.
        root_budget: Epsilon of the root's selection (``root: auto`` only; a share of the tree's half).
    """

    tree_rounds: int
    tree_budget: PureBudget
    parent_rounds: int
    parent_budget: PureBudget | None
    candidates: tuple[tuple[str, str], ...]
    clique_budget: Budget
    bins: int
    root: str | None
    root_budget: PureBudget | None = None


@dataclass(frozen=True)
class MeasuredJunction:
    """What :func:`measure_junction` releases (DP outputs).

    Attributes:
        cliques: The noisy cliques, each (parents..., child) in coarse codes, in sampling order, then the
            extra pairs.
        records: The selections' records (spanning tree, then second parents).
        maps: The public fine-to-coarse maps of the numeric columns (from the noisy 1-ways).
        tree: The spanning tree chosen privately.
        model: The fitted model's cliques, (parents..., child) in sampling order: the chosen cliques, grown
            to hold the extra pairs (:mod:`dp.measurement.cover`).
    """

    cliques: list[NoisyMarginal]
    records: list[MeasurementRecord]
    maps: dict[str, IntArray]
    tree: list[tuple[str, str]]
    model: list[Clique]


CoarseCounter = Callable[[list[tuple[str, ...]], dict[str, IntArray]], dict[tuple[str, ...], IntArray]]
"""Exact counts of marginals in coarse codes: ``count(workload, maps)``."""


def measure_junction(
    planned: PlannedCliques,
    domains: Sequence[ColumnDomain],
    one_way: Sequence[NoisyMarginal],
    count: CoarseCounter,
    context: ReleaseContext,
    sensitivity: int,
) -> MeasuredJunction:
    """Choose a degree-2 junction tree privately and measure its cliques (``cliques: auto``).

    1. Coarse maps of the numeric columns from the noisy 1-ways (post-processing: free).
    2. A spanning tree by the exponential mechanism, each pair scored on coarse codes by its distance
       from independence under the noisy 1-ways (sensitivity 1 per row).
    3. From the root (public, the tree's hub, or with ``root: auto`` the leaf chosen by :func:`select_root`),
       a second parent for each column by the exponential mechanism on the conditional-L1 score
       (sensitivity below 4 per row): :mod:`dp.measurement.cliques`.
    4. Each clique measured in coarse codes (a histogram: sensitivity 1 per row).
    ``count(workload, maps)`` returns the exact coarse counts of the given marginals: two more passes over
    the rows (pairs, then candidate triples), on the same bounded rows as the 1-ways; the caller decides
    where they run.
    """
    names = [d.name for d in domains]
    sizes = {d.name: d.size for d in domains}
    total = max(1, round(estimate_total(one_way)))
    distributions = {m.columns[0]: consistent_counts(m, total) / total for m in one_way}
    maps = {d.name: coarse_map(distributions[d.name], planned.bins) for d in domains
            if d.kind != "category" and d.size > planned.bins}
    coarse_sizes = arrays.coarse_sizes(sizes, maps)
    coarse_distributions = {n: np.bincount(maps[n], weights=distributions[n], minlength=coarse_sizes[n])
                            if n in maps else distributions[n] for n in names}
    pairs = count(list(planned.candidates), maps)
    scores = independence_scores({(key[0], key[1]): table for key, table in pairs.items()},
                                 {n: np.asarray(d, dtype=np.float64) for n, d in coarse_distributions.items()}, total)
    tree, tree_records = select_spanning_tree(names, list(planned.candidates), scores, planned.tree_budget, context,
                                              score_sensitivity=sensitivity)
    records = list(tree_records)
    if planned.root == ROOT_AUTO:
        if planned.root_budget is None:
            raise InternalError("root: auto needs the root's selection budget")
        root, root_records = select_root(names, tree, scores, planned.root_budget, context,
                                         score_sensitivity=sensitivity)
        records += root_records
    else:
        root = planned.root or hub(names, tree)
    order = tree_order(names, tree, root)
    triples: dict[tuple[str, ...], IntArray] = {}
    mechanism = additive_mechanism(planned.clique_budget, sensitivity)
    if planned.parent_budget is not None:
        triples = count(candidate_triples(order), maps)
        sigma = float(mechanism.noise_sd() or 0.0)
        # When a typical clique (bins³ cells) is itself noise-dominated, every candidate pays AIM's penalty;
        # else only the outliers (high-cardinality columns) are capped and their rounds freed for extra pairs.
        dominated = noise_dominated(sigma, planned.bins, total)
        cliques, parent_records = select_cliques(order, triples, coarse_sizes, planned.parent_budget, context,
                                                 score_sensitivity=CONDITIONAL_L1_SENSITIVITY * sensitivity,
                                                 noise_sd=sigma if dominated else 0.0, clique_sd=sigma,
                                                 noise_cap=float("inf") if dominated else NOISE_CAP * total)
        records += parent_records
        freed = freed_rounds(cliques, parent_records)
    else:
        cliques = [(parent, child) for child, parent in order if parent is not None]
        freed = []
    # A capped clique whose round is freed gives half its budget to an extra pair (public: the plan's share),
    # when some pair can be covered at all (a public fact of the chosen cliques).
    limit = int(MODEL_GROWTH * sum(cells(c, coarse_sizes) for c in cliques))
    if not extra_candidates(cliques, scores, coarse_sizes, limit):
        freed = []
    halves = planned.clique_budget.split({"clique": 1, "pair": 1})
    per_pair = halves["pair"].split({str(k): 1 for k in range(PAIRS_PER_ROUND)})["0"]
    measured = []
    for i, clique in enumerate(cliques):
        counts = triples.get(clique) if len(clique) == 3 else _pair_counts(pairs, clique, coarse_sizes)
        if counts is None:
            raise InternalError(f"no counts for the clique {clique}")
        noisy, record = measure(additive_mechanism(halves["clique"], sensitivity) if i in freed else mechanism, counts,
                                context, stage="cliques", query=f"clique({','.join(clique)})")
        measured.append(NoisyMarginal(clique, tuple(coarse_sizes[c] for c in clique), noisy, record))
    model = list(cliques)
    if freed and planned.parent_budget is not None:
        # each freed round is split into PAIRS_PER_ROUND rounds that together cost what it would have
        run_budget = sub_round_budget(planned.parent_budget, PAIRS_PER_ROUND,
                                      zcdp=isinstance(planned.clique_budget, ZCDPBudget))
        extra, model, extra_records = select_extra_pairs(
            cliques, PAIRS_PER_ROUND * len(freed), scores, coarse_sizes, run_budget, context,
            score_sensitivity=sensitivity, cell_limit=limit, measured=measured,
            exact={(k[0], k[1]): v for k, v in pairs.items()}, total=total)
        records += extra_records
        for pair in extra:
            noisy, record = measure(additive_mechanism(per_pair, sensitivity), _pair_counts(pairs, pair, coarse_sizes),
                                    context, stage="cliques", query=f"{EXTRA_PAIR_QUERY}{','.join(pair)})")
            measured.append(NoisyMarginal(pair, tuple(coarse_sizes[c] for c in pair), noisy, record))
        for i, shares in unused_shares(freed, len(extra)).items():  # no share left unspent: the clique again
            again = type(per_pair)(per_pair.amount * shares)
            counts = _pair_counts(pairs, cliques[i], coarse_sizes)
            noisy, record = measure(additive_mechanism(again, sensitivity), counts, context, stage="cliques",
                                    query=f"clique({','.join(cliques[i])}) again")
            measured.append(NoisyMarginal(cliques[i], tuple(coarse_sizes[c] for c in cliques[i]), noisy, record))
    triples.clear()
    pairs.clear()
    return MeasuredJunction(measured, records, maps, list(tree), model)


def _pair_counts(pairs: Mapping[tuple[str, ...], IntArray], pair: Clique, sizes: Mapping[str, int]) -> IntArray:
    """The exact coarse counts of a pair, flattened in its own column order (counted in either order)."""
    if pair in pairs:
        return pairs[pair]
    a, b = pair
    return pairs[(b, a)].reshape(sizes[b], sizes[a]).T.ravel()


def freed_rounds(cliques: Sequence[Clique], records: Sequence[MeasurementRecord]) -> list[int]:
    """Indices of the 2-cliques (pa, ch) whose child had candidates but no second-parent round (all capped).

    Public: follows from the chosen cliques and which selections ran (DP outputs).

    >>> freed_rounds([("a", "b"), ("b", "c")], [])
    [1]
    """
    ran = {r.query for r in records}
    return [i for i, clique in enumerate(cliques) if len(clique) == 2 and f"second parent of {clique[1]}" not in ran
            and any(clique[0] in earlier for earlier in cliques[:i])]
