"""The one path of every noisy result (dp.accounting.charges): typed mechanisms, refusals before booking."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget
from dprelease.dp.accounting.charges import Chargeable, ReleaseContext, noisy_result
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import InternalError
from dprelease.dp.mechanisms.noise import DiscreteGaussian, DiscreteLaplace, additive_mechanism, measure
from dprelease.dp.mechanisms.random import secure_noise
from dprelease.dp.mechanisms.selection import ExponentialMechanism, PermuteAndFlip, ReportNoisyMax
from dprelease.dp.mechanisms.svt import AboveThreshold, MonotoneAboveThreshold, Sparse

EPS = PureBudget(Fraction(1, 2))


@pytest.fixture
def booked(tmp_path):
    """An open pure-DP ledger with one reservation, and the release's context."""
    with Ledger.open(tmp_path / "ledger.sqlite") as ledger:
        ledger.register("pop", "pure", PureBudget(Fraction(10)), Fraction(0))
        ledger.reserve("pop", "r1", PureBudget(Fraction(5)))
        yield ledger, ReleaseContext(ledger, "r1", "pure", secure_noise())


MECHANISMS: list[Chargeable] = [
    DiscreteLaplace(l1_sensitivity=1, budget=EPS),
    DiscreteGaussian(l2_sensitivity=1, budget=ZCDPBudget(Fraction(1, 8))),
    AboveThreshold(l1_sensitivity=1, budget=EPS),
    MonotoneAboveThreshold(l1_sensitivity=1, budget=EPS),
    Sparse(l1_sensitivity=1, budget=EPS, cutoff=2),
    ExponentialMechanism(score_sensitivity=1, budget=EPS),
    PermuteAndFlip(score_sensitivity=1, budget=EPS),
    ReportNoisyMax(l1_sensitivity=1, budget=EPS),
]


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: type(m).__name__)
def test_every_mechanism_states_its_loss_scale_and_error_bars(mechanism: Chargeable):
    assert isinstance(mechanism, Chargeable)  # runtime-checkable: every method of the protocol is there
    assert mechanism.scale() > 0 and mechanism.privacy_loss().amount > 0
    releases_values = isinstance(mechanism, DiscreteLaplace | DiscreteGaussian)
    assert (mechanism.noise_sd() is not None) == releases_values
    assert (mechanism.ci95_halfwidth() is not None) == releases_values
    own = mechanism.zcdp_loss()
    assert own is None or isinstance(mechanism, ExponentialMechanism)


def test_the_gaussian_error_bar_is_sigma_an_upper_bound_on_the_standard_deviation():
    gaussian = DiscreteGaussian(l2_sensitivity=1, budget=ZCDPBudget(Fraction(1, 8)))
    assert gaussian.noise_sd() == gaussian.sigma() == 2.0
    z = np.arange(-60, 61, dtype=np.float64)
    weights = np.exp(-(z**2) / 8)
    assert np.sqrt((weights * z**2).sum() / weights.sum()) <= gaussian.noise_sd()


def test_additive_mechanism_follows_the_budget_kind():
    assert isinstance(additive_mechanism(EPS, 2), DiscreteLaplace)
    assert additive_mechanism(EPS, 2).l1_sensitivity == 2
    gaussian = additive_mechanism(ZCDPBudget(Fraction(1, 2)), 3)
    assert isinstance(gaussian, DiscreteGaussian) and gaussian.l2_sensitivity == 3


@dataclass(frozen=True)
class _ZeroScale:
    """A broken mechanism whose scale is 0: it would release exact values."""

    name = "broken"

    def privacy_loss(self) -> PureBudget:
        return EPS

    def zcdp_loss(self) -> None:
        return None

    def scale(self) -> float:
        return 0.0

    def sensitivity_text(self) -> str:
        return "L1=1"

    def noise_sd(self) -> float:
        return 0.0

    def ci95_halfwidth(self) -> float:
        return 0.0


def test_a_zero_noise_scale_is_refused_before_anything_is_booked_or_drawn(booked):
    ledger, context = booked
    drawn = []
    with pytest.raises(InternalError, match="noise scale must be positive"):
        noisy_result(_ZeroScale(), context, lambda noise: drawn.append(1), stage="one_way", query="q", cells=1,
                     sealed_as="values")
    assert drawn == [] and ledger.charges(release_id="r1") == []


def test_a_re_run_replays_the_sealed_result_without_a_second_charge_or_draw(booked):
    ledger, context = booked
    laplace = DiscreteLaplace(l1_sensitivity=1, budget=EPS)
    first, record = measure(laplace, np.array([5, 7, 9]), context, stage="one_way", query="q")
    calls = []
    again, replayed = noisy_result(laplace, context, lambda noise: calls.append(1), stage="one_way", query="q", cells=3,
                                   sealed_as="values", decode=lambda payload: np.asarray(payload, dtype=np.int64))
    assert calls == [] and np.array_equal(first, again) and replayed == record
    assert len(ledger.charges(release_id="r1")) == 1
