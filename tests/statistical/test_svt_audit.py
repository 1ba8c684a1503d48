"""Statistical privacy audit and structural checks of the sparse vector technique (``dp/mechanisms/svt.py``).

Two kinds of test, and three deliberately broken variants that each must be caught by one of them:

* **Statistical audit.** Neighbouring query-answer vectors (each query moves by at most its
  sensitivity 1, in either direction: ``[1]*5 + [0]*5`` vs ``[0]*5 + [1]*5`` and ``[1]*9 + [0]``
  vs ``[0]*9 + [1]``), N = 100_000 runs per side, events "first above threshold at i" (i = 0..9)
  and "none", each in both orders (D over D' and D' over D). The statistic is a Clopper–Pearson
  lower bound of ln(P[E|D] / P[E|D']) (:func:`tests.statistical.audit.audit`); it must not exceed
  the booked epsilon.
* **Structural checks** through a spy noise source: the first threshold draw, then one query
  draw per query (one vectorised call), then one fresh threshold draw after each positive answer
  that leaves queries to examine (Dwork & Roth, Alg. 2); scales exactly 2cΔ/ε and 4cΔ/ε; at most
  c positives; only Python-int indices returned.

The audited code is the production code: :meth:`AboveThreshold.run_batch` and
:meth:`Sparse.run_batch` are the release path's :meth:`run` with a batch dimension (``run`` is
``run_batch`` on one row; both go through ``dp.mechanisms.svt._scan_batch``). What changes for speed is only
the noise source: :class:`tests.noise.SeededNoise` samples the same discrete Laplace distribution
(the difference of two i.i.d. geometric variables has pmf ∝ exp(-|z| / scale)) from a seeded numpy
generator. A chi-square goodness-of-fit test against the exact output distribution (computed
below by summing over the threshold noise) checks both that and the scan itself, and a smaller
audit (N = 20_000 per side) runs through the production :class:`~dp.mechanisms.random.OpenDPNoise`.

Parameters: epsilon = 2, sensitivity 1, public threshold T = 1 (scales 1 and 2). These maximise the
power against the halved-noise variant among epsilon in {1, 2} and T in -2..8 (computed with the
exact output distributions); the correct mechanism's largest event loss for these vectors is
1.84 and 1.99 (below 2, as the theorem says).

False-alarm rates (each under a correct mechanism):

* each privacy audit (one pair of vectors, one mechanism): <= 1e-6, exact: Clopper–Pearson bounds,
  Bonferroni over the 22 events (or 112 for Sparse) and over the two one-sided bounds per event;
  the file's six audits of correct mechanisms together: <= 6e-6;
* each chi-square goodness of fit: about 1e-6 (asymptotic level; every pooled cell expects >= 50);
  twelve of them: about 1.2e-5 together;
* the assertions that the broken variants are caught: the structural ones are deterministic; for
  the statistical ones the probability of a missed detection is bounded rigorously by Chernoff
  tails on the exact event probabilities (:func:`tests.statistical.audit.power_failure_log10`),
  and that bound is asserted <= 1e-9.

Seeded runs are reproducible; the rates above are over the choice of seed. ``pytest -s`` prints
the measured values; ``DPRELEASE_AUDIT_RECORD=1`` also writes them to
``benchmarks/results/svt_audit.json``.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from dprelease.dp.accounting.budget import PureBudget
from dprelease.dp.mechanisms.random import IntArray, NoiseSource, OpenDPNoise
from dprelease.dp.mechanisms.svt import AboveThreshold, MonotoneAboveThreshold, Sparse
from tests.noise import SeededNoise, SpyNoise
from tests.statistical.audit import (
    AuditResult,
    Event,
    audit,
    discrete_laplace_pmf,
    log_ratio,
    power_failure_log10,
    record_results,
)

pytestmark = pytest.mark.statistical

EPSILON = Fraction(2)
SENSITIVITY = 1
THRESHOLD = 1
N = 100_000  # runs per side, seeded vectorised noise
N_PRODUCTION = 20_000  # runs per side through OpenDP (about 13 µs per draw)
ALPHA = 1e-6  # family-wise false-alarm rate of each audit
CHI2_ALPHA = 1e-6
CHI2_MIN_EXPECTED = 50.0
POWER_FAILURE_MAX_LOG10 = -9.0
PAIRS: dict[str, tuple[list[int], list[int]]] = {
    "5 up, 5 down": ([1] * 5 + [0] * 5, [0] * 5 + [1] * 5),
    "9 up, 1 down": ([1] * 9 + [0], [0] * 9 + [1]),
}
# Monotone pairs (every query moves the same way): the precondition of MonotoneAboveThreshold.
MONOTONE_PAIRS: dict[str, tuple[list[int], list[int]]] = {
    "all 10 up": ([0] * 10, [1] * 10),
    "5 of 10 up": ([0] * 10, [0] * 5 + [1] * 5),
}
RESULTS_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "svt_audit.json"
RESULTS: dict[str, Any] = {}


def _float_at_least(x: Fraction) -> float:
    f = float(x)
    return f if Fraction(f) >= x else math.nextafter(f, math.inf)


def declared_scales(cutoff: int, sensitivity: int = SENSITIVITY, epsilon: Fraction = EPSILON) -> tuple[float, float]:
    """Threshold and query scales as the docstrings declare them, 2cΔ/ε and 4cΔ/ε, rounded up."""
    return (_float_at_least(Fraction(2 * cutoff * sensitivity) / epsilon),
            _float_at_least(Fraction(4 * cutoff * sensitivity) / epsilon))


# ---------------------------------------------------------------------------------------------
# Deliberately broken variants (each books the correct epsilon)


def _first_true(mask: np.ndarray) -> IntArray:
    return np.where(mask.any(axis=1), mask.argmax(axis=1), -1).astype(np.int64)


class NoQueryNoise(AboveThreshold):
    """BROKEN: compares the exact answers with the noisy threshold."""

    def run_batch(self, answers: IntArray, threshold: int, noise: NoiseSource) -> IntArray:
        answers = np.asarray(answers, dtype=np.int64)
        noisy_threshold = noise.discrete_laplace(np.full(len(answers), threshold, dtype=np.int64),
                                                 self.threshold_scale())
        return _first_true(answers >= noisy_threshold[:, np.newaxis])


class HalvedQueryNoise(AboveThreshold):
    """BROKEN: draws query noise at 2Δ/ε instead of 4Δ/ε (the booked loss is still computed from 4Δ/ε)."""

    def query_scale(self) -> float:
        return super().query_scale() / 2


class RedrawnThreshold(AboveThreshold):
    """BROKEN: a fresh threshold noise for every query, instead of one shared until a positive."""

    def run_batch(self, answers: IntArray, threshold: int, noise: NoiseSource) -> IntArray:
        answers = np.asarray(answers, dtype=np.int64)
        rows, queries = answers.shape
        thresholds = noise.discrete_laplace(np.full(rows * queries, threshold, dtype=np.int64),
                                            self.threshold_scale()).reshape(rows, queries)
        noisy = noise.discrete_laplace(answers.reshape(-1), self.query_scale()).reshape(rows, queries)
        return _first_true(noisy >= thresholds)


BROKEN: dict[str, type[AboveThreshold]] = {
    "no query noise": NoQueryNoise,
    "query noise halved": HalvedQueryNoise,
    "threshold redrawn for every query": RedrawnThreshold,
}


# ---------------------------------------------------------------------------------------------
# Exact output distributions (by summing over the threshold noise)


def above_threshold_pmf(answers: list[int], threshold_scale: float, query_scale: float | None,
                        *, redraw: bool = False) -> np.ndarray:
    """[P(first above threshold at i) for each i, P(none)] of AboveThreshold on ``answers``.

    ``query_scale=None`` is the no-query-noise variant; ``redraw=True`` the redrawn-threshold one.
    """
    tp = discrete_laplace_pmf(threshold_scale)
    if redraw:
        assert query_scale is not None
        qp = discrete_laplace_pmf(query_scale)
        diff = np.convolve(qp.prob, tp.prob[::-1])  # pmf of nu - tau
        first = int(qp.support[0] - tp.support[-1])
        cdf = np.cumsum(diff)
        below = [float(cdf[THRESHOLD - a - 1 - first]) for a in answers]  # P(a + nu < T + tau)
        out, survive = [], 1.0
        for b in below:
            out.append(survive * (1 - b))
            survive *= b
        return np.array([*out, survive])
    t = THRESHOLD + tp.support  # the noisy threshold's values

    def below(a: int) -> np.ndarray:  # P(a + nu < t) for each t
        if query_scale is None:
            return (a < t).astype(np.float64)
        qp = discrete_laplace_pmf(query_scale)
        cdf = np.cumsum(qp.prob)
        idx = t - a - 1 - int(qp.support[0])
        return np.where(idx < 0, 0.0, cdf[np.clip(idx, 0, len(cdf) - 1)])

    out, survive = [], tp.prob.copy()
    for a in answers:
        b = below(a)
        out.append(float(np.sum(survive * (1 - b))))
        survive = survive * b
    return np.array([*out, float(survive.sum())])


def sparse_pmf(answers: list[int], cutoff: int) -> dict[tuple[int, ...], float]:
    """Exact distribution of Sparse's output: rounds are AboveThreshold runs on suffixes with independent noise."""
    threshold_scale, query_scale = declared_scales(cutoff)
    m = len(answers)

    def rounds(start: int, left: int) -> dict[tuple[int, ...], float]:
        at = above_threshold_pmf(answers[start:], threshold_scale, query_scale)
        out: dict[tuple[int, ...], float] = {(): float(at[-1])}
        for k, p in enumerate(at[:-1]):
            i = start + k
            if left == 1 or i == m - 1:
                out[(i,)] = float(p)
            else:
                for tail, q in rounds(i + 1, left - 1).items():
                    out[(i, *tail)] = float(p) * q
        return out

    return rounds(0, cutoff)


# ---------------------------------------------------------------------------------------------
# Running, auditing, goodness of fit


def encode(hits: IntArray, m: int) -> IntArray:
    """One integer per run: for AboveThreshold the index (m for none); for Sparse sum (hit+1)(m+1)^k."""
    hits = np.asarray(hits, dtype=np.int64)
    if hits.ndim == 1:
        return np.where(hits < 0, m, hits)
    weights = (m + 1) ** np.arange(hits.shape[1], dtype=np.int64)
    return ((hits + 1) * weights).sum(axis=1)


def encode_tuple(output: tuple[int, ...], m: int) -> int:
    return sum((h + 1) * (m + 1) ** k for k, h in enumerate(output))


def run_side(mechanism: AboveThreshold | Sparse, answers: list[int], n: int, noise: NoiseSource) -> IntArray:
    """``n`` independent runs on one input, through the production batch scan."""
    matrix = np.tile(np.asarray(answers, dtype=np.int64), (n, 1))
    return encode(mechanism.run_batch(matrix, THRESHOLD, noise), len(answers))


def at_events(m: int) -> list[Event]:
    """'first above threshold at i' for each i and 'none', each in both orders: 2 (m + 1) events."""
    outcomes: list[tuple[str, int]] = [(f"first at {i}", i) for i in range(m)] + [("none", m)]
    return [Event(label, _equals(code), side) for label, code in outcomes for side in ("D", "D'")]


def _equals(code: int) -> Callable[[IntArray], np.ndarray]:
    return lambda out: out == code


def audit_outputs(out_d: IntArray, out_d2: IntArray, codes: dict[str, int]) -> AuditResult:
    events = [Event(label, _equals(code), side) for label, code in codes.items() for side in ("D", "D'")]
    return audit(out_d, out_d2, events, statistic="epsilon", alpha=ALPHA)


def exact_event_loss(p: np.ndarray, q: np.ndarray) -> float:
    """The largest |ln(p_E / q_E)| over the outcome events (inf if one side is 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):  # 0/0 (impossible on both sides) is nan, skipped
        ratios = np.abs(np.log(p) - np.log(q))
    return float(np.nanmax(ratios))


def chi_square_fit(codes: IntArray, probabilities: dict[int, float]) -> tuple[float, float, int]:
    """Pearson's statistic of outcome ``codes`` against exact ``probabilities``; rare outcomes pooled.

    Returns (statistic, threshold at CHI2_ALPHA, degrees of freedom).
    """
    n = len(codes)
    keys = sorted(probabilities, key=lambda k: probabilities[k])
    observed = {k: int(v) for k, v in zip(*np.unique(codes, return_counts=True), strict=True)}
    assert set(observed) <= set(probabilities), "an output outside the mechanism's range"
    cells: list[tuple[float, int]] = []
    pooled_e, pooled_o = 0.0, 0
    for k in keys:  # from the rarest outcome up: pool until the cell expects CHI2_MIN_EXPECTED
        pooled_e, pooled_o = pooled_e + n * probabilities[k], pooled_o + observed.get(k, 0)
        if pooled_e >= CHI2_MIN_EXPECTED:
            cells.append((pooled_e, pooled_o))
            pooled_e, pooled_o = 0.0, 0
    assert len(cells) >= 2, "too few runs for a chi-square test"
    if pooled_e:  # a short remainder joins the last cell
        e, o = cells.pop()
        cells.append((e + pooled_e, o + pooled_o))
    statistic = sum((o - e) ** 2 / e for e, o in cells)
    df = len(cells) - 1
    return statistic, float(stats.chi2.isf(CHI2_ALPHA, df)), df


def at_probabilities(answers: list[int], mechanism_scales: tuple[float, float | None], redraw: bool = False
                     ) -> dict[int, float]:
    pmf = above_threshold_pmf(answers, *mechanism_scales, redraw=redraw)
    return dict(enumerate(pmf.tolist()))


def statistical_audit(mechanism: AboveThreshold, pair: str, n: int, noise: NoiseSource) -> AuditResult:
    d, d2 = PAIRS[pair]
    out_d, out_d2 = run_side(mechanism, d, n, noise), run_side(mechanism, d2, n, noise)
    return audit(out_d, out_d2, at_events(len(d)), statistic="epsilon", alpha=ALPHA)


# ---------------------------------------------------------------------------------------------
# Structural checks with a spy


def expected_threshold_draws(hits: list[int], m: int, cutoff: int) -> int:
    """Rounds started: the first, plus one after each positive that is not the c-th nor the last query."""
    return 1 + len(hits) - (1 if hits and (len(hits) == cutoff or hits[-1] == m - 1) else 0)


def structural_violations(mechanism: AboveThreshold | Sparse, answers: list[int], cutoff: int, seed: int
                          ) -> list[str]:
    """Run once through a spy (over seeded noise) and list the structural properties that fail."""
    threshold_scale, query_scale = declared_scales(cutoff)
    spy = SpyNoise(SeededNoise(seed))
    out = mechanism.run(np.asarray(answers, dtype=np.int64), THRESHOLD, spy)
    m = len(answers)
    problems = []
    if isinstance(mechanism, Sparse):
        hits = out
        if not (isinstance(hits, list) and all(type(h) is int for h in hits)):
            problems.append("indices only: output is not a list of Python ints")
    else:
        if not (out is None or type(out) is int):
            problems.append("indices only: output is not an int or None")
        hits = [] if out is None else [out]
    if len(hits) > cutoff:
        problems.append("at most c positives")
    if any(not 0 <= h < m for h in hits) or any(a >= b for a, b in itertools.pairwise(hits)):
        problems.append("indices increasing and in range")
    query_calls = [c for c in spy.calls if c == ("laplace", m, query_scale)]
    if len(query_calls) != 1:
        problems.append(f"one query draw per query at 4cΔ/ε = {query_scale}: found {len(query_calls)} such calls")
    threshold_calls = [c for c in spy.calls if c[2] == threshold_scale]
    want = expected_threshold_draws(hits, m, cutoff)
    if [c[1] for c in threshold_calls] != [1] * want:
        problems.append(f"one threshold draw per round at 2cΔ/ε = {threshold_scale}: want {want} draws of 1, "
                        f"found lengths {[c[1] for c in threshold_calls]}")
    if any(c[0] != "laplace" or c[2] not in (threshold_scale, query_scale) for c in spy.calls):
        problems.append("only the declared scales")
    expected_sequence = [("laplace", 1, threshold_scale), ("laplace", m, query_scale)] + [
        ("laplace", 1, threshold_scale)] * (want - 1)
    if spy.calls != expected_sequence:
        problems.append("call sequence: threshold, all queries, then one threshold per later round")
    return problems


STRUCTURAL_INPUTS = [answers for pair in PAIRS.values() for answers in pair] + [
    [0] * 10, [9] * 10, [0, 9, 0, 9, 9, 0, 9], [5], [9, 9], [],
]


# ---------------------------------------------------------------------------------------------
# Tests: the correct mechanisms


@pytest.mark.parametrize("pair", PAIRS)
def test_above_threshold_audit(pair: str) -> None:
    """epsilon_hat <= epsilon; false alarm <= 1e-6 (exact: CP + Bonferroni over 22 events).

    Also: the outputs fit the exact output distribution (chi-square, level ~1e-6), so the seeded
    vectorised sampler and the batch scan behave as the algorithm says; and the exact largest
    event loss of these vectors is <= epsilon (a deterministic check of the theorem).
    """
    mechanism = AboveThreshold(SENSITIVITY, PureBudget(EPSILON))
    d, d2 = PAIRS[pair]
    noise = SeededNoise(20261122)
    out_d, out_d2 = run_side(mechanism, d, N, noise), run_side(mechanism, d2, N, noise)
    result = audit(out_d, out_d2, at_events(len(d)), statistic="epsilon", alpha=ALPHA)
    scales = (mechanism.threshold_scale(), mechanism.query_scale())
    exact_d, exact_d2 = above_threshold_pmf(d, *scales), above_threshold_pmf(d2, *scales)
    fits = [chi_square_fit(out, at_probabilities(v, scales)) for out, v in ((out_d, d), (out_d2, d2))]
    exact = exact_event_loss(exact_d, exact_d2)
    RESULTS[f"AboveThreshold seeded N={N} {pair}"] = {"epsilon_hat": result.value, "exact_event_loss": exact,
                                                       "chi2": fits, "audit": result.as_dict()}
    print(f"\nAboveThreshold [{pair}] N={N}: epsilon_hat {result.value:.3f} <= {float(EPSILON)} "
          f"(exact largest event loss {exact:.3f}); chi2 {[f'{s:.1f}/{t:.1f}' for s, t, _ in fits]}")
    assert exact <= float(EPSILON)
    assert result.value <= float(EPSILON)
    for statistic, threshold, _ in fits:
        assert statistic <= threshold


def test_production_sampler_audit() -> None:
    """The same audit through OpenDPNoise (N = 20_000 per side, pair '9 up, 1 down').

    epsilon_hat <= epsilon (false alarm <= 1e-6, exact) and the outputs fit the exact output
    distribution (two chi-square tests, each level ~1e-6): the production sampler agrees with the
    seeded one the large audits use.
    """
    pair = "9 up, 1 down"
    mechanism = AboveThreshold(SENSITIVITY, PureBudget(EPSILON))
    d, d2 = PAIRS[pair]
    noise = OpenDPNoise()
    out_d, out_d2 = run_side(mechanism, d, N_PRODUCTION, noise), run_side(mechanism, d2, N_PRODUCTION, noise)
    result = audit(out_d, out_d2, at_events(len(d)), statistic="epsilon", alpha=ALPHA)
    scales = (mechanism.threshold_scale(), mechanism.query_scale())
    fits = [chi_square_fit(out, at_probabilities(v, scales)) for out, v in ((out_d, d), (out_d2, d2))]
    RESULTS[f"AboveThreshold OpenDP N={N_PRODUCTION} {pair}"] = {"epsilon_hat": result.value, "chi2": fits,
                                                                  "audit": result.as_dict()}
    print(f"\nAboveThreshold OpenDP [{pair}] N={N_PRODUCTION}: epsilon_hat {result.value:.3f}; "
          f"chi2 {[f'{s:.1f}/{t:.1f}' for s, t, _ in fits]}")
    assert result.value <= float(EPSILON)
    for statistic, threshold, _ in fits:
        assert statistic <= threshold


def test_sparse_audit() -> None:
    """Sparse with c = 2 at total epsilon 2: epsilon_hat <= 2 over all 56 outputs, both orders.

    False alarm <= 1e-6 (exact: CP + Bonferroni over 112 events); the outputs fit the exact
    distribution (rounds are AboveThreshold runs on suffixes with independent noise; level ~1e-6).
    """
    cutoff = 2
    mechanism = Sparse(SENSITIVITY, PureBudget(EPSILON), cutoff)
    d, d2 = PAIRS["9 up, 1 down"]
    m = len(d)
    noise = SeededNoise(7)
    out_d, out_d2 = run_side(mechanism, d, N, noise), run_side(mechanism, d2, N, noise)
    exact_d, exact_d2 = sparse_pmf(d, cutoff), sparse_pmf(d2, cutoff)
    assert len(exact_d) == 1 + m + m * (m - 1) // 2 and abs(sum(exact_d.values()) - 1) < 1e-12
    codes = {str(output): encode_tuple(output, m) for output in exact_d}
    result = audit_outputs(out_d, out_d2, codes)
    fits = [chi_square_fit(out, {encode_tuple(k, m): p for k, p in exact.items()})
            for out, exact in ((out_d, exact_d), (out_d2, exact_d2))]
    exact = max(abs(math.log(exact_d[k]) - math.log(exact_d2[k])) for k in exact_d)
    RESULTS[f"Sparse c=2 seeded N={N}"] = {"epsilon_hat": result.value, "exact_event_loss": exact, "chi2": fits}
    print(f"\nSparse c=2 N={N}: epsilon_hat {result.value:.3f} (exact largest event loss {exact:.3f}); "
          f"chi2 {[f'{s:.1f}/{t:.1f}' for s, t, _ in fits]}")
    assert exact <= float(EPSILON)
    assert result.value <= float(EPSILON)
    for statistic, threshold, _ in fits:
        assert statistic <= threshold


@pytest.mark.parametrize("pair", MONOTONE_PAIRS)
def test_monotone_above_threshold_audit(pair: str) -> None:
    """MonotoneAboveThreshold on monotone neighbours: epsilon_hat <= epsilon (false alarm <= 1e-6, exact).

    Its outputs fit the exact distribution (two chi-square tests, level ~1e-6 each). Deterministic:
    on the non-monotone pairs its exact event loss exceeds epsilon (it is then the halved-noise
    variant), so the precondition is necessary, not an artefact of the proof.
    """
    mechanism = MonotoneAboveThreshold(SENSITIVITY, PureBudget(EPSILON))
    scales = (mechanism.threshold_scale(), mechanism.query_scale())
    assert scales == (1.0, 1.0)  # 2Δ/ε for both noises, at ε = 2
    d, d2 = MONOTONE_PAIRS[pair]
    noise = SeededNoise(29)
    out_d, out_d2 = run_side(mechanism, d, N, noise), run_side(mechanism, d2, N, noise)
    result = audit(out_d, out_d2, at_events(len(d)), statistic="epsilon", alpha=ALPHA)
    exact = exact_event_loss(above_threshold_pmf(d, *scales), above_threshold_pmf(d2, *scales))
    fits = [chi_square_fit(out, at_probabilities(v, scales)) for out, v in ((out_d, d), (out_d2, d2))]
    off_precondition = {name: exact_event_loss(above_threshold_pmf(a, *scales), above_threshold_pmf(b, *scales))
                        for name, (a, b) in PAIRS.items()}
    RESULTS[f"MonotoneAboveThreshold seeded N={N} {pair}"] = {
        "epsilon_hat": result.value, "exact_event_loss": exact, "chi2": fits,
        "exact_event_loss_on_non_monotone_pairs": off_precondition}
    print(f"\nMonotoneAboveThreshold [{pair}] N={N}: epsilon_hat {result.value:.3f} (exact largest event loss "
          f"{exact:.3f}); on non-monotone pairs the exact loss is {off_precondition}")
    assert exact <= float(EPSILON)
    assert result.value <= float(EPSILON)
    for statistic, threshold, _ in fits:
        assert statistic <= threshold
    assert all(loss > float(EPSILON) for loss in off_precondition.values())


@pytest.mark.parametrize("cutoff", [1, 2, 3])
def test_structure_of_correct_mechanisms(cutoff: int) -> None:
    """Deterministic: every structural property holds for AboveThreshold (c = 1) and Sparse."""
    for seed in range(20):
        for answers in STRUCTURAL_INPUTS:
            mechanism: AboveThreshold | Sparse = (AboveThreshold(SENSITIVITY, PureBudget(EPSILON)) if cutoff == 1
                                                  else Sparse(SENSITIVITY, PureBudget(EPSILON), cutoff))
            assert structural_violations(mechanism, answers, cutoff, seed) == []
            if cutoff > 1:  # Sparse with c = 1 is AboveThreshold
                same = Sparse(SENSITIVITY, PureBudget(EPSILON), 1).run(np.asarray(answers, dtype=np.int64),
                                                                      THRESHOLD, SeededNoise(seed))
                single = AboveThreshold(SENSITIVITY, PureBudget(EPSILON)).run(answers, THRESHOLD, SeededNoise(seed))
                assert same == ([] if single is None else [single])


def test_batch_draws_once_per_query_and_once_per_round() -> None:
    """A batch of runs: one threshold call per round over the rows still running, one query call."""
    cutoff, rows = 3, 500
    threshold_scale, query_scale = declared_scales(cutoff)
    answers = np.tile(np.asarray([0, 2, 0, 2, 2, 0, 2, 0], dtype=np.int64), (rows, 1))
    spy = SpyNoise(SeededNoise(3))
    hits = Sparse(SENSITIVITY, PureBudget(EPSILON), cutoff).run_batch(answers, THRESHOLD, spy)
    assert spy.calls[:2] == [("laplace", rows, threshold_scale), ("laplace", rows * 8, query_scale)]
    per_row = [expected_threshold_draws([int(h) for h in row if h >= 0], 8, cutoff) for row in hits]
    later = spy.calls[2:]
    assert all(c[2] == threshold_scale for c in later)
    assert sum(c[1] for c in later) == sum(per_row) - rows
    assert hits.shape == (rows, cutoff) and hits.dtype == np.int64
    assert ((hits[:, 1:] == -1) | (hits[:, 1:] > hits[:, :-1])).all()


# ---------------------------------------------------------------------------------------------
# Tests: the broken variants are caught


# Which kind of test must catch each variant (asserted); other catches are recorded, not asserted.
MUST_CATCH = {
    "no query noise": {"statistical", "structural"},
    "query noise halved": {"statistical", "structural"},
    "threshold redrawn for every query": {"structural"},
}


def _query_scales(name: str, mechanism: AboveThreshold) -> tuple[float, float | None, bool]:
    threshold_scale, query_scale = mechanism.threshold_scale(), mechanism.query_scale()
    if name == "no query noise":
        return threshold_scale, None, False
    return threshold_scale, query_scale, name == "threshold redrawn for every query"


@pytest.mark.parametrize("name", BROKEN)
def test_broken_variant_is_caught(name: str) -> None:
    """Each broken variant fails a structural check and/or the statistical audit, as MUST_CATCH says.

    The statistical catch is asserted only with a rigorous power bound: P(missed) <= 1e-9 (Chernoff
    on the exact event probabilities of the variant, at the audit's per-event level).
    """
    mechanism = BROKEN[name](SENSITIVITY, PureBudget(EPSILON))
    assert mechanism.privacy_loss() == PureBudget(EPSILON)  # each books the correct loss
    structural = sorted({problem for seed in range(5) for answers in STRUCTURAL_INPUTS[:4]
                         for problem in structural_violations(mechanism, answers, 1, seed)})
    threshold_scale, query_scale, redraw = _query_scales(name, mechanism)
    per_pair: dict[str, Any] = {}
    for pair, (d, d2) in PAIRS.items():
        result = statistical_audit(mechanism, pair, N, SeededNoise(11))
        p = above_threshold_pmf(d, threshold_scale, query_scale, redraw=redraw)
        q = above_threshold_pmf(d2, threshold_scale, query_scale, redraw=redraw)
        per_event_alpha = ALPHA / (2 * (len(d) + 1))
        # An impossible denominator event is bounded as if it had probability 1e-300: the statistic
        # falls as the denominator count grows, so a larger assumed probability only overstates P(miss).
        miss = min(power_failure_log10("epsilon", float(a), max(float(b), 1e-300), N, per_event_alpha,
                                       float(EPSILON))
                   for x, y in ((p, q), (q, p)) for a, b in zip(x, y, strict=True))
        per_pair[pair] = {"epsilon_hat": result.value, "exact_event_loss": exact_event_loss(p, q),
                          "power_failure_log10": miss}
    best = max(per_pair.values(), key=lambda r: r["epsilon_hat"])
    caught = {"structural"} if structural else set()
    if best["epsilon_hat"] > float(EPSILON):
        caught.add("statistical")
    RESULTS[f"broken: {name}"] = {"caught_by": sorted(caught), "structural_violations": structural,
                                  "pairs": per_pair}
    print(f"\n{name}: caught by {sorted(caught)}; " + "; ".join(
        f"[{pair}] epsilon_hat {r['epsilon_hat']:.3f} (exact event loss {r['exact_event_loss']:.3f}, "
        f"log10 P(miss) <= {r['power_failure_log10']:.1f})" for pair, r in per_pair.items())
        + f"; structural: {structural}")
    assert caught >= MUST_CATCH[name]
    if "statistical" in MUST_CATCH[name]:
        assert min(r["power_failure_log10"] for r in per_pair.values()) <= POWER_FAILURE_MAX_LOG10


def test_record_results(tmp_path, monkeypatch) -> None:
    """Writes the measured values when DPRELEASE_AUDIT_RECORD=1 (after the tests above), and only then.

    Every audit above left its figures here; none of the sound mechanisms' lower bounds exceeds the
    booked epsilon (each test asserts it too; this checks the record says the same).
    """
    document = {"epsilon": float(EPSILON), "threshold": THRESHOLD, "alpha": ALPHA,
                "n": N, "n_production": N_PRODUCTION, "results": RESULTS}
    sound = {k: v for k, v in RESULTS.items() if not k.startswith("broken") and "epsilon_hat" in v
             and "third of the noise" not in k}
    assert sound and all(float(v["epsilon_hat"]) <= float(EPSILON) for v in sound.values())
    target = tmp_path / "svt.json"
    monkeypatch.delenv("DPRELEASE_AUDIT_RECORD", raising=False)
    assert record_results(target, document) is False and not target.exists()
    monkeypatch.setenv("DPRELEASE_AUDIT_RECORD", "1")
    assert record_results(target, document) is True
    assert json.loads(target.read_text(encoding="utf-8"))["n"] == N
    monkeypatch.undo()
    record_results(RESULTS_PATH, document)  # the real record, when asked for


def test_production_scan_is_the_batch_scan() -> None:
    """AboveThreshold.run is run_batch on one row: same draws, same output, for a seeded source."""
    mechanism = AboveThreshold(SENSITIVITY, PureBudget(EPSILON))
    for seed in range(50):
        answers = np.random.default_rng(seed).integers(-3, 4, size=12)
        single = mechanism.run(answers, THRESHOLD, SeededNoise(seed))
        batch = int(mechanism.run_batch(answers.reshape(1, -1), THRESHOLD, SeededNoise(seed))[0])
        assert single == (None if batch < 0 else batch)
    assert log_ratio(0.5, 0.25) == pytest.approx(math.log(2))  # the statistic the audit uses


# ---------------------------------------------------------------------------------------------
# Bound discovery's scans: the monotone AboveThreshold on real tail counts, through OpenDP


def _bounds_scan_pair(new_row: float = 1.5) -> tuple[list[int], list[int]]:
    """'Rows below g' on a grid, for a small column D and for D with one more row (its neighbour).

    Built with the production map (``dp.measurement.bounds.tail_counts``) on a geometric grid like
    ``geometric_grid``'s: every count of D' is that of D or one more (monotone), as in a release.
    """
    from dprelease.dp.measurement.bounds import tail_counts

    grid = tuple(float(2**k) for k in range(8))  # 1, 2, 4, ..., 128
    column = np.asarray([3.0, 5.0, 9.0, 17.0, 33.0, 40.0, 70.0], dtype=np.float64)
    below_d, _ = tail_counts(column, grid)
    below_d2, _ = tail_counts(np.append(column, new_row), grid)
    return below_d.tolist(), below_d2.tolist()


class ThirdNoiseMonotone(MonotoneAboveThreshold):
    """BROKEN: the monotone mechanism drawing both noises at a third of their scales, booking the same ε."""

    def threshold_scale(self) -> float:
        return super().threshold_scale() / 3

    def query_scale(self) -> float:
        return super().query_scale() / 3


def test_bound_discovery_scan_audit_through_opendp() -> None:
    """The production bound scan (monotone AboveThreshold, OpenDP noise) on real neighbouring tail counts.

    epsilon_hat <= the booked epsilon (false alarm <= 1e-6, exact) and the exact largest event loss is at
    most epsilon; the outputs fit their exact distribution (chi-square, level ~1e-6 each).
    """
    d, d2 = _bounds_scan_pair()
    assert all(0 <= b - a <= SENSITIVITY for a, b in zip(d, d2, strict=True)) and d != d2  # monotone neighbours
    mechanism = MonotoneAboveThreshold(SENSITIVITY, PureBudget(EPSILON))
    scales = (mechanism.threshold_scale(), mechanism.query_scale())
    noise = OpenDPNoise()
    out_d, out_d2 = run_side(mechanism, d, N_PRODUCTION, noise), run_side(mechanism, d2, N_PRODUCTION, noise)
    result = audit(out_d, out_d2, at_events(len(d)), statistic="epsilon", alpha=ALPHA)
    exact = exact_event_loss(above_threshold_pmf(d, *scales), above_threshold_pmf(d2, *scales))
    fits = [chi_square_fit(out, at_probabilities(v, scales)) for out, v in ((out_d, d), (out_d2, d2))]
    RESULTS[f"bound scan (monotone AboveThreshold) OpenDP N={N_PRODUCTION}"] = {
        "epsilon_hat": result.value, "exact_event_loss": exact, "chi2": fits, "answers": [d, d2]}
    print(f"\nbound scan OpenDP N={N_PRODUCTION}: epsilon_hat {result.value:.3f} (exact {exact:.3f}, booked "
          f"{float(mechanism.privacy_loss().epsilon):g})")
    assert mechanism.privacy_loss().epsilon == EPSILON
    assert exact <= float(EPSILON) and result.value <= float(EPSILON)
    for statistic, threshold, _ in fits:
        assert statistic <= threshold


def test_bound_discovery_scan_audit_catches_a_broken_variant() -> None:
    """Power: the monotone scan with a third of its noise exceeds its booked epsilon, and the audit sees it.

    On the monotone pair '5 of 10 up' its exact loss on likely events (probability >= 0.002) is 3 epsilon/2
    and the audit's lower bound epsilon_hat (seeded noise, N = 100_000 per side) exceeds epsilon. Halving the
    query noise alone is not enough to be seen on such pairs: their exact loss stays within epsilon (the
    monotone bound Δ/b_T + Δ/b_Q is not reached by them), which is why the variant divides both noises.
    """
    d, d2 = MONOTONE_PAIRS["5 of 10 up"]
    broken = ThirdNoiseMonotone(SENSITIVITY, PureBudget(EPSILON))
    assert broken.privacy_loss().epsilon == EPSILON  # it books the correct epsilon
    scales = (broken.threshold_scale(), broken.query_scale())
    exact = exact_event_loss(above_threshold_pmf(d, *scales), above_threshold_pmf(d2, *scales))
    noise = SeededNoise(31)
    out_d, out_d2 = run_side(broken, d, N, noise), run_side(broken, d2, N, noise)
    result = audit(out_d, out_d2, at_events(len(d)), statistic="epsilon", alpha=ALPHA)
    RESULTS["bound scan, a third of the noise (broken) seeded"] = {"epsilon_hat": result.value,
                                                                 "exact_event_loss": exact}
    print(f"\nbroken monotone scan (a third of the noise): epsilon_hat {result.value:.3f}, exact {exact:.3f}")
    assert exact > float(EPSILON)
    assert result.value > float(EPSILON)
