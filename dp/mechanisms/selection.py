"""Private selection: release the index of a (nearly) best-scoring candidate.

Three mechanisms, each over a vector of scores u_1..u_K computed from the sensitive data, where
the score function has *per-score sensitivity* Δ: on neighbouring inputs every score moves by at
most Δ (the L∞ distance of the score vectors is <= Δ). Only the selected index is released.

* :class:`ExponentialMechanism` returns i with probability exp(u_i / scale) / sum_j exp(u_j / scale),
  scale = 2Δ / epsilon, i.e. P(i) ∝ exp(epsilon u_i / (2Δ)) (McSherry & Talwar 2007; Dwork & Roth
  2014, Def. 3.4 and Thm. 3.10). It is drawn as report-noisy-max with Gumbel noise of that scale:
  argmax_i (u_i + G_i) with G_i i.i.d. Gumbel(0, scale) has exactly that law (the "Gumbel-max
  trick"; used for private selection by Durfee & Rogers 2019). :class:`MonotoneExponentialMechanism`
  is the same draw at scale Δ / epsilon, for scores that all move one way between neighbours.
* :class:`PermuteAndFlip` (McKenna & Sheldon 2020) visits the candidates in a uniformly random order
  and stops at candidate r with probability exp((u_r - max_j u_j) / scale), scale = 2Δ / epsilon. It
  is epsilon-DP and never worse than the exponential mechanism in expected score. It is drawn as
  report-noisy-max with exponential noise of that scale, which has exactly the permute-and-flip law
  (Ding, Kifer, Saghaian, Steinke, Wang, Xiao & Zhang 2021, "The permute-and-flip mechanism is
  identical to report-noisy-max with exponential noise").
* :class:`ReportNoisyMax` adds discrete Laplace noise of scale 2Δ / epsilon to integer scores and
  reports the first index of the largest noisy score (Dwork & Roth 2014, Sec. 3.3; see its
  docstring for the variant and the proof).

The production sampler of the first two is OpenDP's ``make_noisy_max`` (``opendp.measurements``,
0.16): with output measure ``zero_concentrated_divergence()`` it adds Gumbel noise, with
``max_divergence()`` exponential noise, in both cases sampled exactly (scores are converted
exactly to arbitrary-precision numbers and the noise is sampled lazily with exact comparisons, from
the operating system's secure generator). No exp() of a score is ever evaluated, so scores such as
1e6 cannot overflow and there is no floating-point attack surface of the Mironov (2012) kind. The
booked loss is computed by this module from the scale actually used, exactly, in rationals:
epsilon = 2Δ / scale, which is the pure-DP guarantee of both mechanisms and what OpenDP's own
``max_divergence`` map reports for the exponential-noise one. (The OpenDP measure chosen only
selects the noise distribution; the Gumbel one's OpenDP map is the zCDP bound (2Δ / scale)² / 8 =
epsilon² / 8 of Cesar & Rogers 2021.) A zCDP ledger books the exponential mechanism at that bound,
epsilon² / 8 (:meth:`ExponentialMechanism.zcdp_loss`: it is epsilon-bounded-range,
``docs/proofs/exponential_bounded_range.md``); permute-and-flip and report-noisy-max are booked at
the general epsilon² / 2.

Every mechanism here is a frozen dataclass with a :class:`~dp.accounting.budget.PureBudget`; its scale is
rounded up to a double and :meth:`privacy_loss` is recomputed from it, so it never exceeds the
budget. :func:`run_selection` books the loss in the ledger before anything is drawn.

>>> em = ExponentialMechanism(score_sensitivity=1, budget=PureBudget(Fraction(2)))
>>> em.scale(), em.privacy_loss()
(1.0, PureBudget(epsilon=Fraction(2, 1)))
>>> [round(float(p), 4) for p in em.probabilities([0, 1, 2])]
[0.09, 0.2447, 0.6652]
>>> em.select([0, 10**6], OpenDPSelection())
1
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol, cast

import numpy as np
import numpy.typing as npt
import opendp.prelude as odp

from dprelease.dp.accounting.budget import (
    PureBudget,
    ZCDPBudget,
    float_at_least,
    positive_integer,
    positive_number,
    zcdp_from_bounded_range,
)
from dprelease.dp.accounting.charges import MeasurementRecord, ReleaseContext, ReleasesNoValues, noisy_result
from dprelease.dp.errors import InternalError, ParameterError
from dprelease.dp.mechanisms.random import IntArray, NoiseSource

odp.enable_features("contrib")

FloatArray = npt.NDArray[np.float64]
ScoreArray = npt.NDArray[np.int64] | npt.NDArray[np.float64]

_PF_CHUNK = 1 << 22  # doubles per block of the permute-and-flip quadrature


# ---------------------------------------------------------------------------------------------
# Validation helpers







def _check_budget(budget: object, owner: str) -> None:
    if not isinstance(budget, PureBudget):
        raise ParameterError(f"{owner}: budget ({budget!r}) must be a PureBudget (epsilon)")


def check_scores(scores: object, owner: str, *, integers: bool = False) -> ScoreArray:
    """Validate a score vector and return it as int64 or float64.

    Messages name the rule and public facts only (shape, dtype), never a score: scores are
    computed from the sensitive data.

    Args:
        scores: A one-dimensional array-like of integers or floats.
        owner: The mechanism's class name, for the message.
        integers: Whether only integer scores are accepted.

    Returns:
        A new int64 or float64 array (the input is never mutated).

    Raises:
        ParameterError: If the scores are empty, not one-dimensional, not numeric, not finite, or
            (with ``integers``) not integers.
    """
    array = np.asarray(scores)
    if array.ndim != 1 or array.size == 0:
        raise ParameterError(f"{owner}: scores (shape {array.shape}) must be a non-empty one-dimensional array")
    kind = array.dtype
    if np.issubdtype(kind, np.integer) and kind != np.bool_:
        if not np.can_cast(kind, np.int64, casting="safe"):
            raise ParameterError(f"{owner}: scores (dtype {kind}) must fit in 64-bit signed integers")
        return np.array(array, dtype=np.int64)
    if integers:
        raise ParameterError(f"{owner}: scores (dtype {kind}) must be integers; discrete noise is added to them")
    if not np.issubdtype(kind, np.floating) or not np.can_cast(kind, np.float64, casting="safe"):
        raise ParameterError(f"{owner}: scores (dtype {kind}) must be integers or floats")
    values = np.array(array, dtype=np.float64)
    if not np.all(np.isfinite(values)):
        # No value in the message: which score is infinite is a fact about the data.
        raise ParameterError(f"{owner}: scores must be finite; the score function broke its declared range")
    return values


# ---------------------------------------------------------------------------------------------
# Samplers


class SelectionNoise(Protocol):
    """Draws the index of the largest noisy score; one call per selection."""

    def gumbel_argmax(self, scores: ScoreArray, scale: float) -> int:
        """argmax_i (scores_i + G_i), G_i i.i.d. Gumbel(0, scale): P(i) ∝ exp(scores_i / scale)."""
        ...

    def exponential_argmax(self, scores: ScoreArray, scale: float) -> int:
        """argmax_i (scores_i + E_i), E_i i.i.d. exponential with mean ``scale`` (permute-and-flip)."""
        ...


@functools.lru_cache(maxsize=64)
def opendp_noisy_max(integer_scores: bool, noise: str, scale: float) -> odp.Measurement:
    """OpenDP's report-noisy-max over i64 or f64 scores (L∞ metric) at ``scale``.

    Args:
        integer_scores: i64 scores when true, non-NaN f64 scores otherwise.
        noise: ``"gumbel"`` (the exponential mechanism; OpenDP's zCDP output measure) or
            ``"exponential"`` (permute-and-flip; OpenDP's pure-DP output measure).
        scale: The noise scale.

    Returns:
        The measurement; calling it on a list of scores returns the selected index.
    """
    if integer_scores:
        space = odp.vector_domain(odp.atom_domain(T=odp.i64)), odp.linf_distance(T=odp.i64)
    else:
        space = odp.vector_domain(odp.atom_domain(T=odp.f64, nan=False)), odp.linf_distance(T=odp.f64)
    measure = odp.zero_concentrated_divergence() if noise == "gumbel" else odp.max_divergence()
    return odp.m.make_noisy_max(*space, measure, scale=scale)


class OpenDPSelection:
    """The production selection sampler: OpenDP's exact report-noisy-max, secure randomness."""

    def gumbel_argmax(self, scores: ScoreArray, scale: float) -> int:
        """Exponential mechanism at ``scale`` (Gumbel noise), one OpenDP call."""
        return self._draw(scores, "gumbel", scale)

    def exponential_argmax(self, scores: ScoreArray, scale: float) -> int:
        """Permute-and-flip at ``scale`` (exponential noise), one OpenDP call."""
        return self._draw(scores, "exponential", scale)

    @staticmethod
    def _draw(scores: ScoreArray, noise: str, scale: float) -> int:
        integer_scores = bool(np.issubdtype(scores.dtype, np.integer))
        index = int(opendp_noisy_max(integer_scores, noise, scale)(scores.tolist()))
        if not 0 <= index < len(scores):  # pragma: no cover - OpenDP returns a candidate index
            raise InternalError(f"OpenDP selected index {index} of {len(scores)} candidates")
        return index


_OPENDP_SELECTION = OpenDPSelection()


def selection_source(noise: object) -> SelectionNoise:
    """The sampler for a selection: ``noise`` itself if it draws selections, else OpenDP's.

    A release context's noise source (:class:`~dp.mechanisms.random.OpenDPNoise`) only adds integer noise,
    so releases select with :class:`OpenDPSelection`; test doubles may implement
    :class:`SelectionNoise` to be used instead.
    """
    # Duck typing, not isinstance on a runtime-checkable Protocol: that costs ~70 µs per call.
    if all(callable(getattr(noise, method, None)) for method in ("gumbel_argmax", "exponential_argmax")):
        return cast(SelectionNoise, noise)
    return _OPENDP_SELECTION


# ---------------------------------------------------------------------------------------------
# Mechanisms


def _log_space_softmax(scores: ScoreArray, scale: float) -> FloatArray:
    """exp(u_i / scale) / sum_j exp(u_j / scale), shifted by the maximum so nothing overflows."""
    values = np.asarray(scores, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        logits = (values - values.max()) / scale
    logits = np.nan_to_num(logits, nan=-np.inf)  # inf - inf only arises from scores at ±1e308
    weights = np.exp(logits)
    return np.asarray(weights / math.fsum(weights.tolist()), dtype=np.float64)


@dataclass(frozen=True)
class _ScoreSelection(ReleasesNoValues):
    """What the score-based selections share: Δu, epsilon, and a noise scale of 2Δu / epsilon rounded up.

    Attributes:
        score_sensitivity: Δu, the most any one score can change between neighbours (> 0).
        budget: The epsilon of one selection.
    """

    score_sensitivity: Fraction | int
    budget: PureBudget
    _scale: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        owner = type(self).__name__
        sensitivity = positive_number(self.score_sensitivity, "score_sensitivity", owner)
        object.__setattr__(self, "score_sensitivity", sensitivity)
        _check_budget(self.budget, owner)
        object.__setattr__(self, "_scale", float_at_least(2 * sensitivity / self.budget.epsilon))

    def scale(self) -> float:
        """The noise scale actually used (Gumbel scale, or the exponential noise's mean), >= 2Δu / epsilon."""
        return self._scale

    def privacy_loss(self) -> PureBudget:
        """The loss epsilon = 2Δu / scale, exactly; never above the budget."""
        return PureBudget(2 * Fraction(self.score_sensitivity) / Fraction(self._scale))

    def sensitivity_text(self) -> str:
        """The declared per-score sensitivity, for the ledger."""
        return f"score sensitivity={self.score_sensitivity}"


@dataclass(frozen=True)
class ExponentialMechanism(_ScoreSelection):
    """Selects index i with probability ∝ exp(epsilon u_i / (2 score_sensitivity)).

    Privacy: epsilon-DP with epsilon = 2 score_sensitivity / scale, for neighbouring inputs whose
    score vectors differ by at most ``score_sensitivity`` in every coordinate (McSherry & Talwar
    2007; Dwork & Roth 2014, Thm. 3.10). Drawn as argmax_i (u_i + Gumbel(0, scale)), whose law is
    exactly the exponential mechanism's (the Gumbel-max trick; Durfee & Rogers 2019), by OpenDP's
    ``make_noisy_max`` with Gumbel noise.

    Attributes:
        score_sensitivity: Δu, the most any one score can change between neighbours (> 0).
        budget: The epsilon of one selection.
    """

    name = "exponential mechanism (Gumbel report-noisy-max)"

    def zcdp_loss(self) -> ZCDPBudget:
        """The loss a zCDP ledger books: epsilon²/8 for epsilon = :meth:`privacy_loss`, exactly.

        The mechanism is epsilon-bounded-range (every pair of outcomes' log-probability ratios between
        neighbours differ by at most epsilon), and epsilon-bounded-range implies (epsilon²/8)-zCDP
        (Durfee & Rogers 2019; Cesar & Rogers 2021, Lemma 3.2): ``docs/proofs/exponential_bounded_range.md``.
        """
        return zcdp_from_bounded_range(self.privacy_loss())

    def probabilities(self, scores: object) -> FloatArray:
        """The exact selection probabilities at :meth:`scale`, computed in log space (for tests and reports).

        >>> em = ExponentialMechanism(1, PureBudget(Fraction(1)))
        >>> em.probabilities([1e6, -1e6]).tolist()
        [1.0, 0.0]
        """
        return _log_space_softmax(check_scores(scores, "ExponentialMechanism"), self._scale)

    def select(self, scores: object, noise: NoiseSource | SelectionNoise) -> int:
        """The selected index; releases go through :func:`run_selection`, which charges first.

        Args:
            scores: The candidates' scores (integers or finite floats).
            noise: A :class:`SelectionNoise`, or a release's noise source (then OpenDP draws).
        """
        values = check_scores(scores, "ExponentialMechanism")
        return selection_source(noise).gumbel_argmax(values, self._scale)


@dataclass(frozen=True)
class MonotoneExponentialMechanism(ExponentialMechanism):
    """The exponential mechanism for *monotone* scores: scale Δ/epsilon instead of 2Δ/epsilon.

    Scores are monotone when, between any two neighbours, every score moves in the same direction
    (all by +[0, Δ] or all by −[0, Δ]), e.g. minus the rows beyond each candidate (an added row lowers
    each by 0 or 1) plus a public base measure. Then P(i) ∝ exp(u_i / scale) with scale = Δ/epsilon is
    epsilon-DP (McSherry & Talwar 2007, the remark after Thm. 6; Dwork & Roth 2014, the remark after
    Thm. 3.10): with u' >= u, P'(i)/P(i) = e^{(u'_i − u_i)/scale}·Z/Z' <= e^{Δ/scale} since Z' >= Z, and
    P(i)/P'(i) <= Z'/Z <= e^{Δ/scale}. It is also epsilon-bounded-range (ln P'(i)/P(i) = (u'_i − u_i)/scale
    − ln(Z'/Z), and the first term spans at most Δ/scale over i), so a zCDP ledger books epsilon²/8 as
    for :class:`ExponentialMechanism`. Monotonicity is the caller's claim; the ledger records it in the
    sensitivity text, and the caller's statistical audit checks its scores against the booked loss.

    >>> em = MonotoneExponentialMechanism(score_sensitivity=1, budget=PureBudget(Fraction(1, 4)))
    >>> em.scale(), em.privacy_loss(), em.sensitivity_text()
    (4.0, PureBudget(epsilon=Fraction(1, 4)), 'score sensitivity=1, monotone')
    """

    name = "exponential mechanism, monotone scores (Gumbel report-noisy-max)"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "_scale", float_at_least(Fraction(self.score_sensitivity) / self.budget.epsilon))

    def privacy_loss(self) -> PureBudget:
        """The loss epsilon = Δu / scale, exactly; never above the budget."""
        return PureBudget(Fraction(self.score_sensitivity) / Fraction(self._scale))

    def sensitivity_text(self) -> str:
        """The declared per-score sensitivity and the monotonicity the scale relies on, for the ledger."""
        return f"score sensitivity={self.score_sensitivity}, monotone"


@dataclass(frozen=True)
class PermuteAndFlip(_ScoreSelection):
    """Permute-and-flip: selects a candidate with P(i) = p_i ∫₀¹ ∏_{j≠i} (1 - t p_j) dt.

    Here p_j = exp((u_j - max_k u_k) / scale) is the probability that candidate j, when visited,
    is accepted (the integral form follows from the uniform random order: the candidates visited
    before i form a set S with probability |S|! (K - 1 - |S|)! / K! = ∫₀¹ t^|S| (1 - t)^(K-1-|S|) dt).

    Privacy: epsilon-DP with epsilon = 2 score_sensitivity / scale, for neighbouring inputs whose
    score vectors differ by at most ``score_sensitivity`` in every coordinate (McKenna & Sheldon
    2020, "Permute-and-Flip: A new mechanism for differentially private selection", NeurIPS). Its
    expected score is never below the exponential mechanism's at the same epsilon (ibid.). Drawn as
    argmax_i (u_i + Exponential(scale)), which has the same law (Ding et al. 2021), by OpenDP's
    ``make_noisy_max`` with exponential noise.

    Attributes:
        score_sensitivity: Δu, the most any one score can change between neighbours (> 0).
        budget: The epsilon of one selection.
    """

    name = "permute-and-flip (exponential report-noisy-max)"

    def probabilities(self, scores: object) -> FloatArray:
        """The exact selection probabilities at :meth:`scale` (for tests and reports).

        The integrand is a polynomial of degree K - 1 in t, so Gauss–Legendre quadrature with
        K // 2 + 1 nodes integrates it exactly (up to floating-point rounding); the product is
        evaluated as a sum of logarithms. The cost is O(K²): meant for up to a few thousand
        candidates.

        >>> pf = PermuteAndFlip(1, PureBudget(Fraction(2)))
        >>> [round(float(p), 4) for p in pf.probabilities([0, 0])]
        [0.5, 0.5]
        """
        values = np.asarray(check_scores(scores, "PermuteAndFlip"), dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            logits = np.nan_to_num((values - values.max()) / self._scale, nan=-np.inf)
        accept = np.exp(logits)
        nodes, weights = np.polynomial.legendre.leggauss(len(values) // 2 + 1)
        t, w = (nodes + 1) / 2, weights / 2  # the rule moved from [-1, 1] to [0, 1]
        integral = np.zeros(len(values), dtype=np.float64)
        step = max(1, _PF_CHUNK // len(values))  # bounds memory at _PF_CHUNK doubles
        for start in range(0, len(t), step):
            logs = np.log1p(-np.outer(t[start : start + step], accept))  # ln(1 - t_n p_j); t_n < 1: finite
            others = logs.sum(axis=1, keepdims=True) - logs  # ln prod_{j != i} (1 - t_n p_j)
            integral += w[start : start + step] @ np.exp(others)
        result = accept * integral
        return np.asarray(result / math.fsum(result.tolist()), dtype=np.float64)

    def select(self, scores: object, noise: NoiseSource | SelectionNoise) -> int:
        """The selected index; releases go through :func:`run_selection`, which charges first.

        Args:
            scores: The candidates' scores (integers or finite floats).
            noise: A :class:`SelectionNoise`, or a release's noise source (then OpenDP draws).
        """
        values = check_scores(scores, "PermuteAndFlip")
        return selection_source(noise).exponential_argmax(values, self._scale)


@dataclass(frozen=True)
class ReportNoisyMax(ReleasesNoValues):
    """Reports the first index of the largest of the integer scores plus discrete Laplace noise.

    Each score gets independent discrete Laplace noise, P(z) ∝ exp(-|z| / scale), with scale =
    2 l1_sensitivity / epsilon; ties between noisy scores go to the lowest index.

    Privacy: epsilon-DP with epsilon = 2 l1_sensitivity / scale, for neighbouring inputs whose
    integer score vectors differ by at most ``l1_sensitivity`` in every coordinate (each score is a
    scalar query of that sensitivity). This is the general variant of Dwork & Roth 2014, Claim 3.9,
    whose Lap(1 / epsilon) covers only counting queries that all move in the same direction (a
    monotone change); for arbitrary changes the threshold argument needs twice the scale. Proof, for
    a fixed candidate i and fixed noise r_j on the other candidates: i is reported iff
    r_i >= T := max(max_{j<i} (u_j + r_j) + 1, max_{j>i} (u_j + r_j)) - u_i. T is an integer and moves
    by at most 2Δ between neighbours (Δ from the other scores, Δ from u_i), and the discrete Laplace
    pmf satisfies P(z - s) <= exp(s / scale) P(z) for every integer shift s >= 0, so
    P(r_i >= T - s) <= exp(s / scale) P(r_i >= T). With s = 2Δ this is exp(epsilon); integrating over
    the other candidates' noise gives the claim (the discrete form of Dwork & Roth's proof; the
    fixed tie-break is what makes "i is reported" such a threshold event).

    Attributes:
        l1_sensitivity: Sensitivity of each (integer) score, a positive integer.
        budget: The epsilon of one selection.
    """

    l1_sensitivity: int
    budget: PureBudget
    _scale: float = field(init=False, repr=False, compare=False)

    name = "report noisy max (discrete Laplace)"

    def __post_init__(self) -> None:
        sensitivity = positive_integer(self.l1_sensitivity, "l1_sensitivity", "ReportNoisyMax")
        object.__setattr__(self, "l1_sensitivity", sensitivity)
        _check_budget(self.budget, "ReportNoisyMax")
        object.__setattr__(self, "_scale", float_at_least(2 * Fraction(sensitivity) / self.budget.epsilon))

    def scale(self) -> float:
        """The discrete Laplace scale actually used, >= 2Δ / epsilon."""
        return self._scale

    def privacy_loss(self) -> PureBudget:
        """The loss epsilon = 2Δ / scale, exactly; never above the budget."""
        return PureBudget(2 * Fraction(self.l1_sensitivity) / Fraction(self._scale))

    def sensitivity_text(self) -> str:
        """The declared per-score sensitivity, for the ledger."""
        return f"L1={self.l1_sensitivity} per score"

    def select(self, scores: object, noise: NoiseSource) -> int:
        """The selected index; releases go through :func:`run_selection`, which charges first.

        Args:
            scores: The candidates' integer scores.
            noise: The noise source (one discrete Laplace draw for the whole vector).
        """
        values: IntArray = np.asarray(check_scores(scores, "ReportNoisyMax", integers=True), dtype=np.int64)
        noisy = noise.discrete_laplace(values, self._scale)
        return int(np.argmax(noisy))  # argmax returns the first maximum: the tie-break of the proof


SelectionMechanism = ExponentialMechanism | PermuteAndFlip | ReportNoisyMax


def run_selection(
    mechanism: SelectionMechanism,
    scores: object,
    context: ReleaseContext,
    *,
    stage: str,
    query: str,
) -> tuple[int, MeasurementRecord]:
    """Charge the ledger for one selection, then select, and seal the outcome (or replay it).

    The scores are validated first (a malformed call books nothing), then the mechanism's loss is
    booked, and only then is any noise drawn. A re-run of the same release replays the sealed
    index: no second charge, no second draw.

    Args:
        mechanism: The selection mechanism.
        scores: The candidates' scores.
        context: The ledger and noise source of the release.
        stage: The ledger stage.
        query: What is selected, e.g. ``"best split of age"``.

    Returns:
        The selected index and the measurement's public provenance.
    """
    owner = type(mechanism).__name__
    values = check_scores(scores, owner, integers=isinstance(mechanism, ReportNoisyMax))
    return noisy_result(mechanism, context, lambda noise: mechanism.select(values, noise), stage=stage, query=query,
                        cells=len(values), sealed_as="index", decode=int)
