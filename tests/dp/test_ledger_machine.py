"""A hypothesis state machine over reserve / draw / fail / publish: the cap always holds."""

from __future__ import annotations

import tempfile
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import BudgetExceededError, LedgerError, ParameterError

CAP = Fraction(1)
amounts = st.fractions(min_value=Fraction(1, 100), max_value=Fraction(3, 4), max_denominator=1000)


class LedgerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.folder = tempfile.TemporaryDirectory()
        self.context = Ledger.open(Path(self.folder.name) / "l.sqlite")
        self.ledger = self.context.__enter__()
        self.ledger.register("pop", "zcdp", ZCDPBudget(CAP), Fraction(1, 10**9), ZCDPBudget(Fraction(1, 2)))
        self.open: dict[str, Fraction] = {}  # release -> reserved
        self.drawn: dict[str, Fraction] = {}
        self.counter = 0

    def teardown(self) -> None:
        self.context.__exit__(None, None, None)
        self.folder.cleanup()

    def _model_remaining(self) -> Fraction:
        spent = sum(self.drawn.values(), Fraction(0))
        held = sum(max(Fraction(0), r - self.drawn.get(k, Fraction(0))) for k, r in self.open.items())
        return CAP - spent - held

    @rule(amount=amounts)
    def reserve(self, amount: Fraction) -> None:
        self.counter += 1
        release = f"r{self.counter}"
        expected_ok = amount <= Fraction(1, 2) and amount <= self._model_remaining()
        try:
            self.ledger.reserve("pop", release, ZCDPBudget(amount))
        except BudgetExceededError:
            assert not expected_ok
            return
        assert expected_ok
        self.open[release] = amount
        self.drawn.setdefault(release, Fraction(0))

    @precondition(lambda self: bool(self.open))
    @rule(data=st.data(), amount=amounts)
    def draw(self, data: st.DataObject, amount: Fraction) -> None:
        release = data.draw(st.sampled_from(sorted(self.open)))
        fits = self.drawn[release] + amount <= self.open[release]
        try:
            self.ledger.charge(release, stage="s", query="q", mechanism="m", sensitivity="L2=1", scale="1",
                               loss=ZCDPBudget(amount))
        except BudgetExceededError:
            assert not fits
            return
        assert fits
        self.drawn[release] += amount

    @precondition(lambda self: bool(self.open))
    @rule(data=st.data(), publish=st.booleans())
    def close(self, data: st.DataObject, publish: bool) -> None:
        release = data.draw(st.sampled_from(sorted(self.open)))
        (self.ledger.publish if publish else self.ledger.fail)(release)
        del self.open[release]
        with pytest.raises(LedgerError):
            self.ledger.charge(release, stage="s", query="q", mechanism="m", sensitivity="L2=1", scale="1",
                               loss=ZCDPBudget(Fraction(1, 1000)))

    @invariant()
    def cap_holds_and_drawn_is_never_refunded(self) -> None:
        status = self.ledger.status("pop")
        assert status.spent == sum(self.drawn.values(), Fraction(0))
        assert status.spent + status.reserved <= CAP
        assert status.remaining == self._model_remaining()
        assert status.remaining >= 0


TestLedgerMachine = LedgerMachine.TestCase
TestLedgerMachine.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1, 0, "x", True])
def test_charges_that_are_not_positive_finite_numbers_are_rejected(tmp_path, bad):
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        ledger.register("pop", "zcdp", ZCDPBudget(CAP), Fraction(1, 10**9))
        ledger.reserve("pop", "r", ZCDPBudget(Fraction(1, 2)))
        with pytest.raises((ParameterError, LedgerError)):
            ledger.charge("r", stage="s", query="q", mechanism="m", sensitivity="L2=1", scale="1",
                          loss=ZCDPBudget(bad))
        with pytest.raises(LedgerError):
            ledger.charge("r", stage="s", query="q", mechanism="m", sensitivity="L2=1", scale="1",
                          loss=bad)  # type: ignore[arg-type]
        assert ledger.status("pop").spent == 0


def test_per_release_cap(tmp_path):
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        ledger.register("pop", "pure", PureBudget(Fraction(4)), Fraction(0), PureBudget(Fraction(1)))
        with pytest.raises(BudgetExceededError, match="one release may take at most epsilon=1"):
            ledger.reserve("pop", "r", PureBudget(Fraction(3, 2)))
        with pytest.raises(LedgerError, match="caps cannot be changed"):
            ledger.register("pop", "pure", PureBudget(Fraction(4)), Fraction(0), PureBudget(Fraction(2)))
