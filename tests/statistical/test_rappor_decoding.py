"""RAPPOR decoding: false positives among decoys, unbiased counts, calibrated standard errors, and power.

Settings: k 32, h 2, m 64, f 1/2, p 1/2, q 3/4 (one-report ε 1.07; the example's collection until now),
decoded with Holm's correction at family-wise α = 0.05; and the proposed k 32, h 1, m 64, f 9/16, p 1/8,
q 11/16 (one-report ε 1.05, longitudinal 1.88; the example's now), decoded with Bonferroni's correction at
per-family α = 0.1. 26 states held with Zipf(1.1) weights and 25 decoys no one holds, all 51 candidates
decoded; per-cohort bit counts drawn from their exact law (:func:`dp.local.simulate.rappor_counts`, the law
of one report per client through the real encoder), RUNS runs cycling through n = 10⁴, 10⁵, 10⁶.

Bounds and false-alarm rates. Family-wise: ``decode`` claims P[any decoy detected] <= 0.05 in each run, so
the number of runs with a decoy detected is stochastically below Binomial(RUNS, 0.05); the test fails when
it exceeds that law's 1 − 10⁻⁶ quantile (false alarm <= 10⁻⁶). Per-family: ``decode`` claims E[decoys
detected] <= 0.1 per run, each decoy at most 0.1/51 (Bonferroni), so the decoys detected over all runs are
compared with the 1 − 10⁻⁶ quantile of Binomial(25 · RUNS, 0.1/51) (the decoys' z-statistics are nearly
independent: the columns are nearly orthogonal). Power: the same fits read without the multiple-testing
correction (each p < α) detect a decoy in about 1 − 0.95²⁵ ≈ 72 % of runs, or 2.5 decoys per run at 0.1,
and must fail the same bounds. Two-stage (the flow's default, :func:`two_stage` at 0.1, read off the
proposed runs' p-values): the decoys detected over all runs are compared with the 1 − 10⁻⁶ quantile of
Binomial(25 · RUNS, 0.1/25) (its bound, E[decoys detected] <= 0.1 per run, spread over 25 nearly
independent decoys), and at n = 10⁶ it finds at least Bonferroni's states in every run (its second stage
then tests at 0.095/(51 − |sure|) > 0.1/51); its own law is checked in test_rappor_two_stage.py.
Unbiasedness: max over 51 candidates of |mean z| · √RUNS < 4.5 (false alarm
51 × 6.8e-6); calibration: each candidate's variance of z within a chi-square band at 10⁻⁶ per candidate.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dprelease.dp.local.bits import SeededBits
from dprelease.dp.local.rappor import (
    RapporParams,
    bit_count_variance,
    bloom_bits,
    cohort_counts,
    decode,
    encode_once,
    two_stage,
)
from dprelease.dp.local.simulate import DECOYS, STATES, rappor_counts, zipf_weights

pytestmark = pytest.mark.statistical
PARAMS = RapporParams(k=32, h=2, m=64)
PROPOSED = RapporParams(k=32, h=1, m=64, f=Fraction(9, 16), p=Fraction(1, 8), q=Fraction(11, 16))
PER_FAMILY = 0.1
CANDIDATES = list(STATES) + list(DECOYS)
SIZES = (10_000, 100_000, 1_000_000)
RUNS = 240
ALPHA = 0.05
FALSE_ALARM = 1e-6


class Runs:
    """Per run: the held counts, the decoded counts, standard errors, p-values and detections."""

    def __init__(self, params: RapporParams, alpha: float, error: str) -> None:
        held, counts, std, p_values, detected = [], [], [], [], []
        for r in range(RUNS):
            n = SIZES[r % len(SIZES)]
            truth = np.random.default_rng(100 + r).multinomial(n, zipf_weights())  # simulated people only
            truth = np.concatenate([truth, np.zeros(len(DECOYS), dtype=np.int64)])
            c, per_cohort = rappor_counts(CANDIDATES, truth, params, 10_000 + r)
            decoded = decode(c, per_cohort, CANDIDATES, params, alpha=alpha, error=error)
            held.append(truth)
            counts.append(decoded.counts)
            std.append(decoded.std)
            p_values.append(decoded.p_values)
            detected.append(decoded.detected)
        self.held = np.asarray(held, dtype=np.float64)
        self.counts, self.std = np.asarray(counts), np.asarray(std)
        self.p_values, self.detected = np.asarray(p_values), np.asarray(detected, dtype=bool)


@pytest.fixture(scope="module")
def runs() -> Runs:
    return Runs(PARAMS, ALPHA, "family-wise")


@pytest.fixture(scope="module")
def proposed() -> Runs:
    return Runs(PROPOSED, PER_FAMILY, "per-family")


def _decoys_detected_bound() -> int:
    """The 1 − FALSE_ALARM quantile of Binomial(25 · RUNS, 0.1/51): more decoys detected than this fails."""
    return int(stats.binom.isf(FALSE_ALARM, len(DECOYS) * RUNS, PER_FAMILY / len(CANDIDATES)))


def _runs_with_a_decoy_bound() -> int:
    """The 1 − FALSE_ALARM quantile of Binomial(RUNS, ALPHA): more runs with a decoy than this fails."""
    return int(stats.binom.isf(FALSE_ALARM, RUNS, ALPHA))


def test_decoys_are_detected_in_at_most_alpha_of_the_runs(runs):
    decoys = runs.detected[:, len(STATES):]
    bound = _runs_with_a_decoy_bound()
    assert int(decoys.any(axis=1).sum()) <= bound, (int(decoys.any(axis=1).sum()), bound)
    assert decoys.sum() / RUNS < 0.1  # the target, false positives per run
    assert bool(runs.detected[:, 0].all())  # the largest state is always found (a decoder detecting nothing fails)


def test_the_same_fits_without_a_multiple_testing_correction_fail_the_bound(runs):
    """Power: reading each p-value at α (no correction) breaks the family-wise bound the test enforces."""
    uncorrected = runs.p_values[:, len(STATES):] < ALPHA
    assert int(uncorrected.any(axis=1).sum()) > _runs_with_a_decoy_bound()


def test_per_family_error_bounds_the_expected_decoys_detected(proposed):
    decoys = proposed.detected[:, len(STATES):]
    assert int(decoys.sum()) <= _decoys_detected_bound(), (int(decoys.sum()), _decoys_detected_bound())
    assert decoys.sum() / RUNS < PER_FAMILY  # the target, false positives per run
    assert bool(proposed.detected[:, 0].all())


def test_the_per_family_fits_without_a_correction_fail_the_bound(proposed):
    """Power: each p-value read at 0.1 (no correction) detects about 2.5 decoys per run."""
    assert int((proposed.p_values[:, len(STATES):] < PER_FAMILY).sum()) > _decoys_detected_bound()


def test_two_stage_bounds_the_decoys_and_finds_at_least_bonferronis_states(proposed):
    detected = np.asarray([two_stage(p, PER_FAMILY) for p in proposed.p_values])
    decoys = int(detected[:, len(STATES):].sum())
    bound = int(stats.binom.isf(FALSE_ALARM, len(DECOYS) * RUNS, PER_FAMILY / len(DECOYS)))
    assert decoys <= bound and decoys / RUNS < PER_FAMILY, (decoys, bound)
    at_million = slice(len(SIZES) - 1, None, len(SIZES))
    ours = detected[at_million, :len(STATES)].sum(axis=1)
    assert (ours >= proposed.detected[at_million, :len(STATES)].sum(axis=1)).all()
    # Power check: the same p-values without a correction (each read at 0.1) break the bound.
    assert int((proposed.p_values[:, len(STATES):] < PER_FAMILY).sum()) > bound


def test_decode_two_stage_is_the_rule_on_its_p_values():
    truth = np.concatenate([np.random.default_rng(3).multinomial(1_000_000, zipf_weights()),
                            np.zeros(len(DECOYS), dtype=np.int64)])
    counts, per_cohort = rappor_counts(CANDIDATES, truth, PROPOSED, 7)
    decoded = decode(counts, per_cohort, CANDIDATES, PROPOSED, alpha=PER_FAMILY, error="per-family two-stage")
    assert decoded.detected == tuple(bool(d) for d in two_stage(decoded.p_values, PER_FAMILY))
    assert "two-stage per-family correction" in decoded.method and sum(decoded.detected[:len(STATES)]) >= 24


def test_the_proposed_collection_finds_nearly_every_state_at_a_million(proposed, runs):
    at_million = slice(len(SIZES) - 1, None, len(SIZES))
    new = proposed.detected[at_million, :len(STATES)].sum(axis=1).mean()
    old = runs.detected[at_million, :len(STATES)].sum(axis=1).mean()
    assert new >= 25 and new > old + 1.5, (new, old)


@pytest.mark.parametrize("which", ["runs", "proposed"])
def test_counts_are_unbiased_with_calibrated_standard_errors(request, which):
    runs = request.getfixturevalue(which)
    z = (runs.counts - runs.held) / runs.std
    assert np.isfinite(z).all()
    assert np.abs(z.mean(axis=0) * np.sqrt(RUNS)).max() < 4.5, z.mean(axis=0)
    chi2 = (RUNS - 1) * z.var(axis=0, ddof=1)
    low, high = stats.chi2.ppf(FALSE_ALARM / 2, RUNS - 1), stats.chi2.isf(FALSE_ALARM / 2, RUNS - 1)
    assert ((chi2 > low) & (chi2 < high)).all(), chi2 / (RUNS - 1)


def test_more_states_are_found_with_more_reports(runs):
    found = runs.detected[:, :len(STATES)].sum(axis=1)
    means = [float(found[i::len(SIZES)].mean()) for i in range(len(SIZES))]
    assert means[0] < means[1] < means[2] and means[2] >= 21, means


def test_the_exact_bit_variance_matches_the_encoder():
    """Var of the debiased count of a bit set in N1 of n_m filters (f inside p*, q*; the N1 term included)."""
    n_m, n1, reps = 400, 300, 400
    values = ["CA"] * n1 + ["TX"] * (n_m - n1)
    cohorts = np.zeros(n_m, dtype=np.int64)
    params = RapporParams(k=32, h=2, m=1, f=PARAMS.f, p=PARAMS.p, q=PARAMS.q)
    ca, tx = bloom_bits("CA", 0, params), bloom_bits("TX", 0, params)
    bit = int(np.nonzero((ca == 1) & (tx == 0))[0][0])
    gap = float(params.q_star - params.p_star)
    draws = []
    for r in range(reps):
        counts, _ = cohort_counts(encode_once(values, cohorts, params, SeededBits(500 + r)), cohorts, params)
        draws.append((counts[0, bit] - float(params.p_star) * n_m) / gap)
    exact = float(bit_count_variance(n1, n_m, params))
    chi2 = (reps - 1) * np.var(draws, ddof=1) / exact
    assert stats.chi2.ppf(FALSE_ALARM / 2, reps - 1) < chi2 < stats.chi2.isf(FALSE_ALARM / 2, reps - 1)
    assert abs(np.mean(draws) - n1) < 4.5 * np.sqrt(exact / reps)
    approximate = n_m * float(params.p_star * (1 - params.p_star)) / gap**2
    assert exact < approximate  # here 1 − p* − q* < 0: the N1 term lowers the variance


def test_too_many_candidates_are_selected_on_half_the_cohorts_and_tested_on_the_other():
    """1726 candidates (more than 80 % of the 2048 rows): Lasso on even cohorts, least squares on odd ones."""
    decoys = [f"D{i}" for i in range(1700)]
    truth = np.concatenate([np.random.default_rng(1).multinomial(1_000_000, zipf_weights()),
                            np.zeros(len(decoys), dtype=np.int64)])
    counts, per_cohort = rappor_counts(list(STATES) + decoys, truth, PARAMS, 5)
    decoded = decode(counts, per_cohort, list(STATES) + decoys, PARAMS)
    assert "Lasso on the even cohorts" in decoded.method
    assert sum(decoded.detected[:len(STATES)]) >= 10 and sum(decoded.detected[len(STATES):]) == 0
    unselected = np.isnan(decoded.std)
    assert unselected.sum() > len(decoys) / 2
    assert (decoded.p_values[unselected] == 1).all() and (decoded.counts[unselected] == 0).all()
