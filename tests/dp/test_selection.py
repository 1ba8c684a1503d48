from __future__ import annotations

import itertools
import math
import re
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dprelease.dp.accounting.budget import ApproxBudget, PureBudget, ZCDPBudget
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import BudgetExceededError, ParameterError
from dprelease.dp.mechanisms.random import OpenDPNoise
from dprelease.dp.mechanisms.selection import (
    ExponentialMechanism,
    OpenDPSelection,
    PermuteAndFlip,
    ReportNoisyMax,
    opendp_noisy_max,
    run_selection,
    selection_source,
)
from teaching.continuous import Gaussian, Laplace
from tests.noise import SeededNoise, SpyNoise

BUDGETS = (PureBudget(Fraction(1, 3)), PureBudget(Fraction(7, 10)), PureBudget(Fraction(1, 1000)), PureBudget(3))


class SpySelection:
    """Records (kind, scores, scale) and how many charges the ledger held at each draw; returns 0."""

    def __init__(self, ledger: Ledger | None = None) -> None:
        self.calls: list[tuple[str, list[float], float]] = []
        self.charges_at_draw: list[int] = []
        self.ledger = ledger

    def _record(self, kind: str, scores, scale: float) -> int:
        self.calls.append((kind, scores.tolist(), scale))
        if self.ledger is not None:
            self.charges_at_draw.append(len(self.ledger.charges()))
        return 0

    def gumbel_argmax(self, scores, scale: float) -> int:
        return self._record("gumbel", scores, scale)

    def exponential_argmax(self, scores, scale: float) -> int:
        return self._record("exponential", scores, scale)


class LedgerSpyNoise(SpyNoise):
    """A SpyNoise that also notes how many charges the ledger held when noise was drawn."""

    def __init__(self, ledger: Ledger) -> None:
        super().__init__()
        self.ledger = ledger
        self.charges_at_draw: list[int] = []

    def discrete_laplace(self, values, scale):
        self.charges_at_draw.append(len(self.ledger.charges()))
        return super().discrete_laplace(values, scale)


@pytest.fixture
def ledger(tmp_path):
    with Ledger.open(tmp_path / "ledger.sqlite") as open_ledger:
        open_ledger.register("pop", "pure", PureBudget(Fraction(10)), Fraction(0))
        open_ledger.reserve("pop", "r", PureBudget(Fraction(2)))
        yield open_ledger


# ---------------------------------------------------------------------------------------------
# Parameters


@pytest.mark.parametrize("cls", [ExponentialMechanism, PermuteAndFlip])
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (0, "score_sensitivity (0) must be positive"),
        (-2, "score_sensitivity (-2) must be positive"),
        (Fraction(-1, 2), "score_sensitivity (-1/2) must be positive"),
        (True, "score_sensitivity (True) must be a positive number"),
        ("1", "score_sensitivity ('1') must be a positive number"),
        (None, "score_sensitivity (None) must be a positive number"),
        (float("nan"), "score_sensitivity (nan) must be finite"),
        (float("inf"), "score_sensitivity (inf) must be finite"),
        (-0.5, "score_sensitivity (-0.5) must be positive"),
    ],
)
def test_score_mechanisms_reject_bad_sensitivity(cls, bad, message):
    with pytest.raises(ParameterError, match=re.escape(f"{cls.__name__}: {message}")):
        cls(bad, PureBudget(1))


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (0, "ReportNoisyMax: l1_sensitivity (0) must be positive"),
        (-3, "ReportNoisyMax: l1_sensitivity (-3) must be positive"),
        (1.5, "ReportNoisyMax: l1_sensitivity (1.5) must be a positive integer"),
        (Fraction(1, 2), "ReportNoisyMax: l1_sensitivity (Fraction(1, 2)) must be a positive integer"),
        (True, "ReportNoisyMax: l1_sensitivity (True) must be a positive integer"),
        (float("nan"), "ReportNoisyMax: l1_sensitivity (nan) must be a positive integer"),
    ],
)
def test_report_noisy_max_rejects_bad_sensitivity(bad, message):
    with pytest.raises(ParameterError, match=re.escape(message)):
        ReportNoisyMax(bad, PureBudget(1))


@pytest.mark.parametrize("cls", [ExponentialMechanism, PermuteAndFlip, ReportNoisyMax])
def test_budget_must_be_pure(cls):
    message = f"{cls.__name__}: budget (ZCDPBudget(rho=Fraction(1, 1))) must be a PureBudget (epsilon)"
    with pytest.raises(ParameterError, match=re.escape(message)):
        cls(1, ZCDPBudget(1))
    with pytest.raises(ParameterError, match=re.escape(f"{cls.__name__}: budget (0.5) must be a PureBudget")):
        cls(1, 0.5)


@pytest.mark.parametrize("cls", [ExponentialMechanism, PermuteAndFlip, ReportNoisyMax])
@pytest.mark.parametrize(
    ("scores", "message"),
    [
        ([], "scores (shape (0,)) must be a non-empty one-dimensional array"),
        ([[1, 2]], "scores (shape (1, 2)) must be a non-empty one-dimensional array"),
        (5, "scores (shape ()) must be a non-empty one-dimensional array"),
        ([True, False], "scores (dtype bool) must be"),
        (["a", "b"], "scores (dtype <U1) must be"),
        (np.array([1, 2], dtype=np.uint64), "scores (dtype uint64) must fit in 64-bit signed integers"),
    ],
)
def test_bad_scores_rejected(cls, scores, message):
    mechanism = cls(1, PureBudget(1))
    with pytest.raises(ParameterError, match=re.escape(f"{cls.__name__}: {message}")):
        mechanism.select(scores, SeededNoise(0))


@pytest.mark.parametrize("cls", [ExponentialMechanism, PermuteAndFlip])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_scores_rejected_without_echoing_them(cls, bad):
    message = f"{cls.__name__}: scores must be finite; the score function broke its declared range"
    with pytest.raises(ParameterError, match=re.escape(message)):
        cls(1, PureBudget(1)).select([0.0, bad], SpySelection())
    with pytest.raises(ParameterError, match=re.escape(message)):
        cls(1, PureBudget(1)).probabilities([0.0, bad])


def test_report_noisy_max_needs_integer_scores():
    message = "ReportNoisyMax: scores (dtype float64) must be integers; discrete noise is added to them"
    with pytest.raises(ParameterError, match=re.escape(message)):
        ReportNoisyMax(1, PureBudget(1)).select([1.0, 2.0], SpyNoise())


# ---------------------------------------------------------------------------------------------
# Scales and losses


@pytest.mark.parametrize("cls", [ExponentialMechanism, PermuteAndFlip, ReportNoisyMax])
def test_loss_never_exceeds_budget_and_scale_is_rounded_up(cls):
    sensitivities = (1, 2, 7) if cls is ReportNoisyMax else (1, 2, 7, Fraction(1, 2), Fraction(5, 3), 0.1, 0.3)
    for budget in BUDGETS:
        for sensitivity in sensitivities:
            mechanism = cls(sensitivity, budget)
            assert mechanism.privacy_loss().epsilon <= budget.epsilon
            declared = getattr(mechanism, "score_sensitivity", getattr(mechanism, "l1_sensitivity", None))
            assert Fraction(mechanism.scale()) >= 2 * Fraction(declared) / budget.epsilon
            # the double just below would overspend: the scale is the smallest that fits
            below = math.nextafter(mechanism.scale(), 0.0)
            assert 2 * Fraction(declared) / Fraction(below) > budget.epsilon


def test_hand_computed_scales_and_losses():
    em = ExponentialMechanism(score_sensitivity=1, budget=PureBudget(2))
    assert em.scale() == 1.0 and em.privacy_loss() == PureBudget(2)
    half = ExponentialMechanism(score_sensitivity=Fraction(1, 2), budget=PureBudget(Fraction(1, 4)))
    assert half.scale() == 4.0 and half.privacy_loss() == PureBudget(Fraction(1, 4))
    pf = PermuteAndFlip(score_sensitivity=3, budget=PureBudget(Fraction(3, 2)))
    assert pf.scale() == 4.0 and pf.privacy_loss() == PureBudget(Fraction(3, 2))
    rnm = ReportNoisyMax(l1_sensitivity=1, budget=PureBudget(1))
    assert rnm.scale() == 2.0 and rnm.privacy_loss() == PureBudget(1)
    assert em.score_sensitivity == Fraction(1) and isinstance(em.score_sensitivity, Fraction)
    # 0.1 is read upwards: the double 0.1 is slightly above 1/10
    assert ExponentialMechanism(0.1, PureBudget(1)).score_sensitivity == Fraction(0.1)
    assert ExponentialMechanism(0.3, PureBudget(1)).score_sensitivity == Fraction(3, 10)


def test_sensitivity_text_and_names():
    assert ExponentialMechanism(Fraction(1, 2), PureBudget(1)).sensitivity_text() == "score sensitivity=1/2"
    assert PermuteAndFlip(2, PureBudget(1)).sensitivity_text() == "score sensitivity=2"
    assert ReportNoisyMax(3, PureBudget(1)).sensitivity_text() == "L1=3 per score"
    assert "Gumbel" in ExponentialMechanism.name and "exponential" in PermuteAndFlip.name
    assert "discrete Laplace" in ReportNoisyMax.name


@pytest.mark.parametrize("epsilon", [Fraction(1, 3), Fraction(7, 10), Fraction(2)])
def test_booked_loss_agrees_with_opendp_maps(epsilon):
    """OpenDP's (float, rounded-up) maps at the same scale confirm the exact losses booked here."""
    pf = PermuteAndFlip(1, PureBudget(epsilon))
    opendp_pure = Fraction(opendp_noisy_max(True, "exponential", pf.scale()).map(1))
    assert pf.privacy_loss().epsilon <= opendp_pure <= pf.privacy_loss().epsilon * (1 + Fraction(1, 10**12))
    em = ExponentialMechanism(1, PureBudget(epsilon))
    opendp_rho = Fraction(opendp_noisy_max(True, "gumbel", em.scale()).map(1))
    # the exponential mechanism at epsilon is epsilon²/8-zCDP (bounded range; Cesar & Rogers 2021)
    rho = em.privacy_loss().epsilon ** 2 / 8
    assert rho <= opendp_rho <= rho * (1 + Fraction(1, 10**12))


# ---------------------------------------------------------------------------------------------
# Probabilities


def test_exponential_probabilities_hand_computed():
    em = ExponentialMechanism(1, PureBudget(2))  # scale 1: P(i) ∝ exp(u_i)
    e = math.e
    expected = [1 / (1 + e + e * e), e / (1 + e + e * e), e * e / (1 + e + e * e)]
    assert em.probabilities([0, 1, 2]) == pytest.approx(expected, rel=1e-14, abs=0)
    # epsilon u / (2Δu) with Δu = 1/2 and epsilon = 1/2: P(i) ∝ exp(u_i / 2)
    half = ExponentialMechanism(Fraction(1, 2), PureBudget(Fraction(1, 2)))
    assert half.probabilities([3, 1]) == pytest.approx([1 / (1 + math.exp(-1)), 1 / (1 + math.exp(1))], rel=1e-14)


def test_permute_and_flip_probabilities_hand_computed():
    pf = PermuteAndFlip(1, PureBudget(2))  # scale 1: accept probability exp(u_r - max u)
    q = math.exp(-1)
    # order (0, 1): candidate 0 accepted with probability q; order (1, 0): 1 is always accepted
    assert pf.probabilities([0, 1]) == pytest.approx([q / 2, 1 - q / 2], rel=1e-14)
    assert pf.probabilities([5, 5, 5]) == pytest.approx([1 / 3] * 3, rel=1e-14)


def _permute_and_flip_by_enumeration(scores, scale):
    """The exact law of McKenna & Sheldon's algorithm, by enumerating every visiting order."""
    accept = [math.exp((u - max(scores)) / scale) for u in scores]
    k = len(scores)
    result = [0.0] * k
    orders = list(itertools.permutations(range(k)))
    for order in orders:
        survive = 1.0
        for r in order:
            result[r] += survive * accept[r] / len(orders)
            survive *= 1 - accept[r]
    return result


@pytest.mark.parametrize("scores", [[0, 1, 2, 3], [4, 4, 0, 1, 2], [0.5, -1.25, 3.0, 2.5, 2.9, 0.0], [7]])
def test_permute_and_flip_probabilities_match_the_algorithm(scores):
    pf = PermuteAndFlip(1, PureBudget(Fraction(3, 2)))
    assert pf.probabilities(scores) == pytest.approx(_permute_and_flip_by_enumeration(scores, pf.scale()), rel=1e-12)


def test_permute_and_flip_beats_exponential_mechanism_in_expected_score():
    scores = np.array([0.0, 1.0, 2.0, 3.0, 3.5, 1.0])
    for epsilon in (Fraction(1, 10), Fraction(1), Fraction(5)):
        em = ExponentialMechanism(1, PureBudget(epsilon))
        pf = PermuteAndFlip(1, PureBudget(epsilon))
        assert pf.probabilities(scores) @ scores >= em.probabilities(scores) @ scores - 1e-12


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(min_value=-1e12, max_value=1e12, allow_nan=False), min_size=1, max_size=30),
    st.sampled_from([Fraction(1, 100), Fraction(1), Fraction(10)]),
)
def test_probabilities_are_a_distribution_ordered_like_the_scores(scores, epsilon):
    for cls in (ExponentialMechanism, PermuteAndFlip):
        p = cls(1, PureBudget(epsilon)).probabilities(scores)
        assert np.all(p >= 0) and math.isclose(math.fsum(p), 1.0, rel_tol=1e-12)
        order = np.argsort(scores, kind="stable")
        assert np.all(np.diff(p[order]) >= -1e-12)  # a higher score is never less likely


def test_huge_scores_neither_overflow_nor_warn():
    em = ExponentialMechanism(1, PureBudget(1))
    pf = PermuteAndFlip(1, PureBudget(1))
    for mechanism in (em, pf):
        assert mechanism.probabilities([1e6, -1e6]).tolist() == [1.0, 0.0]
        assert mechanism.probabilities([-1e308, 1e308, 0.0]).tolist() == [0.0, 1.0, 0.0]
        p = mechanism.probabilities([1e6, 1e6 + 1])
        assert np.all(np.isfinite(p)) and math.isclose(p.sum(), 1.0)
        big = 2**62
        assert mechanism.probabilities(np.array([big, -big], dtype=np.int64)).tolist() == [1.0, 0.0]
    # scale 2: P = 1 / (1 + e^{1/2}) for the lower of two adjacent huge scores
    assert em.probabilities([1e6, 1e6 + 1])[0] == pytest.approx(1 / (1 + math.exp(0.5)), rel=1e-12)
    # the production sampler handles them too (probability of index 0 is below e^-1e5)
    for mechanism in (em, pf):
        assert mechanism.select([-1e6, 1e6], OpenDPNoise()) == 1
        assert mechanism.select(np.array([-(10**6), 10**6], dtype=np.int64), OpenDPSelection()) == 1
        assert mechanism.select(np.array([-(2**62), 2**62], dtype=np.int64), OpenDPSelection()) == 1


# ---------------------------------------------------------------------------------------------
# Sampling paths


def test_exponential_mechanism_draws_gumbel_at_its_scale():
    spy = SpySelection()
    em = ExponentialMechanism(1, PureBudget(Fraction(1, 2)))
    scores = np.array([3, 1, 2], dtype=np.int32)
    copy = scores.copy()
    assert em.select(scores, spy) == 0
    assert spy.calls == [("gumbel", [3, 1, 2], 4.0)]
    assert np.array_equal(scores, copy)


def test_permute_and_flip_draws_exponential_noise_at_its_scale():
    spy = SpySelection()
    pf = PermuteAndFlip(2, PureBudget(Fraction(1)))
    assert pf.select([0.5, 1.5], spy) == 0
    assert spy.calls == [("exponential", [0.5, 1.5], 4.0)]


def test_release_noise_sources_select_with_opendp():
    assert isinstance(selection_source(OpenDPNoise()), OpenDPSelection)
    assert isinstance(selection_source(SeededNoise(1)), OpenDPSelection)
    spy = SpySelection()
    assert selection_source(spy) is spy


def test_production_selection_returns_valid_python_ints():
    for mechanism in (ExponentialMechanism(1, PureBudget(1)), PermuteAndFlip(1, PureBudget(1))):
        for scores in ([0, 1, 2], [0.25, 0.5], np.array([4], dtype=np.int16)):
            index = mechanism.select(scores, OpenDPNoise())
            assert type(index) is int and 0 <= index < len(scores)


def test_report_noisy_max_one_vector_draw_and_first_index_on_ties():
    spy = SpyNoise()  # no noise: the argmax of the scores themselves
    rnm = ReportNoisyMax(1, PureBudget(1))
    assert rnm.select(np.array([3, 5, 5, 1]), spy) == 1
    assert spy.calls == [("laplace", 4, 2.0)]
    index = rnm.select([0, 10**6, 3], OpenDPNoise())
    assert type(index) is int and index == 1


# ---------------------------------------------------------------------------------------------
# Accounting


@pytest.mark.parametrize("mechanism", [ExponentialMechanism(1, PureBudget(1)), PermuteAndFlip(1, PureBudget(1))])
def test_run_selection_charges_before_drawing(ledger, mechanism):
    spy = SpySelection(ledger)
    context = ReleaseContext(ledger, "r", "pure", spy)
    index, record = run_selection(mechanism, [1.0, 2.0, 3.0], context, stage="select", query="best split")
    assert index == 0
    assert spy.charges_at_draw == [1]  # the charge was in the ledger when the noise was drawn
    (booked,) = ledger.charges()
    assert (booked.stage, booked.query, booked.mechanism, booked.loss) == ("select", "best split", mechanism.name, 1)
    assert booked.scale == repr(mechanism.scale()) and booked.sensitivity == "score sensitivity=1"
    assert (record.cells, record.loss, record.std, record.ci95) == (3, PureBudget(1), None, None)


def test_run_report_noisy_max_charges_before_drawing(ledger):
    spy = LedgerSpyNoise(ledger)
    context = ReleaseContext(ledger, "r", "pure", spy)
    index, _ = run_selection(ReportNoisyMax(1, PureBudget(Fraction(1, 2))), [4, 9, 2], context,
                             stage="select", query="q")
    assert index == 1 and spy.charges_at_draw == [1] and spy.calls == [("laplace", 3, 4.0)]
    assert [c.loss for c in ledger.charges()] == [Fraction(1, 2)]


def test_overspending_selection_draws_nothing(ledger):
    spy = SpySelection(ledger)
    context = ReleaseContext(ledger, "r", "pure", spy)
    with pytest.raises(BudgetExceededError, match="exceeds the reservation"):
        run_selection(ExponentialMechanism(1, PureBudget(3)), [1, 2], context, stage="s", query="q")
    assert spy.calls == [] and ledger.charges() == []


def test_malformed_scores_book_nothing(ledger):
    spy = SpySelection(ledger)
    context = ReleaseContext(ledger, "r", "pure", spy)
    with pytest.raises(ParameterError, match="scores must be finite"):
        run_selection(ExponentialMechanism(1, PureBudget(1)), [1.0, math.nan], context, stage="s", query="q")
    with pytest.raises(ParameterError, match=re.escape("must be integers")):
        run_selection(ReportNoisyMax(1, PureBudget(1)), [1.0], context, stage="s", query="q")
    assert spy.calls == [] and ledger.charges() == []


def test_zcdp_ledger_books_epsilon_squared_over_two(tmp_path):
    with Ledger.open(tmp_path / "z.sqlite") as zledger:
        zledger.register("pop", "zcdp", ZCDPBudget(1), Fraction(1, 10**9))
        zledger.reserve("pop", "r", ZCDPBudget(1))
        context = ReleaseContext(zledger, "r", "zcdp", SpySelection())
        _, record = run_selection(PermuteAndFlip(1, PureBudget(Fraction(1, 2))), [0, 1], context, stage="s", query="q")
        assert record.loss == ZCDPBudget(Fraction(1, 8)) and record.native_loss == PureBudget(Fraction(1, 2))


def test_zcdp_ledger_books_the_exponential_mechanism_at_epsilon_squared_over_eight(tmp_path):
    em = ExponentialMechanism(1, PureBudget(Fraction(1, 2)))  # scale 4: exact
    assert em.zcdp_loss() == ZCDPBudget(Fraction(1, 32)) and em.privacy_loss() == PureBudget(Fraction(1, 2))
    with Ledger.open(tmp_path / "z.sqlite") as zledger:
        zledger.register("pop", "zcdp", ZCDPBudget(1), Fraction(1, 10**9))
        zledger.reserve("pop", "r", ZCDPBudget(1))
        context = ReleaseContext(zledger, "r", "zcdp", SpySelection())
        _, record = run_selection(em, [0, 1], context, stage="s", query="q")
        assert record.loss == ZCDPBudget(Fraction(1, 32)) and record.native_loss == PureBudget(Fraction(1, 2))
        assert [c.loss for c in zledger.charges()] == [Fraction(1, 32)]
        # A re-run replays the sealed choice: nothing new is booked.
        run_selection(em, [0, 1], context, stage="s", query="q")
        assert len(zledger.charges()) == 1
    # A pure ledger still books epsilon.
    with Ledger.open(tmp_path / "p.sqlite") as pledger:
        pledger.register("pop", "pure", PureBudget(1), Fraction(0))
        pledger.reserve("pop", "r", PureBudget(1))
        _, record = run_selection(em, [0, 1], ReleaseContext(pledger, "r", "pure", SpySelection()), stage="s",
                                  query="q")
        assert record.loss == PureBudget(Fraction(1, 2))


def test_a_mechanisms_own_zcdp_bound_may_not_exceed_epsilon_squared_over_two():
    from dprelease.dp.accounting.charges import ledger_loss
    from dprelease.dp.errors import LedgerError

    assert ledger_loss(PureBudget(1), "zcdp", ZCDPBudget(Fraction(1, 8))) == ZCDPBudget(Fraction(1, 8))
    assert ledger_loss(PureBudget(1), "zcdp") == ZCDPBudget(Fraction(1, 2))
    with pytest.raises(LedgerError, match="at most epsilon"):
        ledger_loss(PureBudget(1), "zcdp", ZCDPBudget(Fraction(2, 3)))


@settings(max_examples=300, deadline=None)
@given(
    scores=st.lists(st.integers(-50, 50), min_size=2, max_size=8),
    shifts=st.lists(st.floats(-1, 1), min_size=8, max_size=8),
    epsilon=st.sampled_from([Fraction(1, 10), Fraction(1, 2), Fraction(2)]),
)
def test_the_exponential_mechanism_is_epsilon_bounded_range(scores, shifts, epsilon):
    # Bounded range (the premise of the epsilon²/8 booking): for neighbouring score vectors (each score
    # moved by at most the sensitivity), the log-probability ratios of all outcomes lie in an interval of
    # width epsilon, while pure DP alone would allow width 2 epsilon.
    em = ExponentialMechanism(1, PureBudget(epsilon))
    neighbour = [u + d for u, d in zip(scores, shifts, strict=False)]
    ratios = np.log(em.probabilities(scores)) - np.log(em.probabilities(neighbour))
    assert ratios.max() - ratios.min() <= float(em.privacy_loss().epsilon) + 1e-9


# ---------------------------------------------------------------------------------------------
# Teaching mechanisms


def test_teaching_laplace_scale_and_loss():
    m = Laplace(l1_sensitivity=3, budget=PureBudget(Fraction(1, 2)))
    assert m.scale() == 6.0 and m.privacy_loss() == PureBudget(Fraction(1, 2))
    odd = Laplace(1, PureBudget(Fraction(7, 10)))
    assert odd.privacy_loss().epsilon <= Fraction(7, 10) and Fraction(odd.scale()) >= Fraction(10, 7)


@pytest.mark.parametrize(
    ("sensitivity", "epsilon", "delta"),
    [
        (1, Fraction(1, 2), Fraction(1, 10**5)),
        (3, Fraction(9, 10), Fraction(1, 10**9)),
        (Fraction(1, 4), Fraction(1, 100), Fraction(1, 2)),
    ],
)
def test_teaching_gaussian_sigma_formula(sensitivity, epsilon, delta):
    """sigma² = 2 Δ² ln(1.25 / delta) / epsilon² (Dwork & Roth Thm. A.1), rounded up by at most ~1e-14."""
    g = Gaussian(sensitivity, ApproxBudget(epsilon, delta))
    by_hand = float(sensitivity) * math.sqrt(2 * math.log(1.25 / float(delta))) / float(epsilon)
    assert g.sigma() == pytest.approx(by_hand, rel=1e-13)
    variance = 2 * float(sensitivity) ** 2 * math.log(1.25 / float(delta)) / float(epsilon) ** 2
    assert g.sigma() ** 2 == pytest.approx(variance, rel=1e-13)
    loss = g.privacy_loss()
    assert loss.delta == delta and loss.epsilon <= epsilon
    assert float(epsilon - loss.epsilon) < 1e-13 * float(epsilon)


def test_teaching_gaussian_hand_value():
    g = Gaussian(1, ApproxBudget(Fraction(1, 2), Fraction(1, 10**5)))
    # ln(125000) = 11.736069016284437; sqrt(2 * that) = 4.844805262605389; / 0.5
    assert g.sigma() == pytest.approx(9.689610525210778, rel=1e-14)
    assert g.scale() == g.sigma() and g.sensitivity_text() == "L2=1"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Gaussian(1, ApproxBudget(1, Fraction(1, 10**6))),
         "Gaussian: epsilon (1) must be below 1; Dwork & Roth's Thm. A.1 holds for epsilon in (0, 1)"),
        (lambda: Gaussian(1, ApproxBudget(Fraction(1, 2), 0)), "Gaussian: delta (0) must be positive"),
        (lambda: Gaussian(0, ApproxBudget(Fraction(1, 2), Fraction(1, 10))),
         "Gaussian: l2_sensitivity (0) must be positive"),
        (lambda: Gaussian(1, PureBudget(1)),
         "Gaussian: budget (PureBudget(epsilon=Fraction(1, 1))) must be an ApproxBudget (epsilon, delta)"),
        (lambda: Laplace(float("nan"), PureBudget(1)), "Laplace: l1_sensitivity (nan) must be finite"),
        (lambda: Laplace(True, PureBudget(1)), "Laplace: l1_sensitivity (True) must be a positive number"),
        (lambda: Laplace(-1, PureBudget(1)), "Laplace: l1_sensitivity (-1) must be positive"),
        (lambda: Laplace(1, ZCDPBudget(1)),
         "Laplace: budget (ZCDPBudget(rho=Fraction(1, 1))) must be a PureBudget (epsilon)"),
    ],
)
def test_teaching_mechanisms_reject_bad_arguments(make, message):
    with pytest.raises(ParameterError, match=re.escape(message)):
        make()


def test_teaching_samples_use_the_given_generator(rng):
    values = np.array([1.0, 2.0, 3.0])
    copy = values.copy()
    laplace = Laplace(1, PureBudget(1))
    out = laplace.sample(values, rng)
    assert out.dtype == np.float64 and out.shape == (3,) and np.array_equal(values, copy)
    first, again = laplace.sample(values, np.random.default_rng(5)), laplace.sample(values, np.random.default_rng(5))
    assert np.array_equal(first, again)
    many = Laplace(2, PureBudget(1)).sample(np.zeros(200_000), rng)  # scale 2: std 2 sqrt(2)
    assert many.std() == pytest.approx(2 * math.sqrt(2), rel=0.02)
    gauss = Gaussian(1, ApproxBudget(Fraction(1, 2), Fraction(1, 10**5)))
    assert gauss.sample(np.zeros(200_000), rng).std() == pytest.approx(gauss.sigma(), rel=0.02)
