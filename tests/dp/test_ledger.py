from __future__ import annotations

import multiprocessing
import re
import sqlite3
from fractions import Fraction

import numpy as np
import pytest

from dp.accounting import Ledger, ReleaseContext, measure
from dp.budget import PureBudget, ZCDPBudget
from dp.errors import BudgetExceededError, LedgerError
from dp.mechanisms import DiscreteGaussian
from tests.noise import SpyNoise

CAP = ZCDPBudget(Fraction(1))
DELTA = Fraction(1, 10**9)


def _charge(ledger, release_id, rho, stage="one_way"):
    return ledger.charge(release_id, stage=stage, query="q", mechanism="m", sensitivity="L2=1", scale="1.0",
                         loss=ZCDPBudget(rho))


def test_reserve_charge_publish(tmp_path):
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        ledger.register("pop", "zcdp", CAP, DELTA)
        ledger.register("pop", "zcdp", CAP, DELTA)  # idempotent
        before = ledger.reserve("pop", "r1", ZCDPBudget(Fraction(1, 2)))
        assert before.spent == 0 and before.remaining == 1
        assert ledger.status("pop").remaining == Fraction(1, 2)
        _charge(ledger, "r1", Fraction(1, 8))
        _charge(ledger, "r1", Fraction(1, 8))
        assert ledger.status("pop").spent == Fraction(1, 4)
        assert ledger.status("pop").reserved == Fraction(1, 4)
        ledger.publish("r1")
        status = ledger.status("pop")
        assert (status.spent, status.reserved, status.remaining) == (Fraction(1, 4), 0, Fraction(3, 4))
        ledger.verify()


def test_overspending_release_is_refused_with_dataset_remaining_and_requested(tmp_path):
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        ledger.register("pop", "zcdp", CAP, DELTA)
        ledger.reserve("pop", "r1", ZCDPBudget(Fraction(3, 4)))
        _charge(ledger, "r1", Fraction(3, 4))
        ledger.publish("r1")
        with pytest.raises(BudgetExceededError) as info:
            ledger.reserve("pop", "r2", ZCDPBudget(Fraction(1, 2)))
        err = info.value
        assert (err.dataset, err.remaining, err.requested) == ("pop", Fraction(1, 4), Fraction(1, 2))
        assert "'pop'" in str(err) and "0.25" in str(err) and "rho=0.5" in str(err)
        assert ledger.status("pop").reserved == 0  # nothing written


def test_charge_beyond_reservation_and_after_close_is_refused(tmp_path):
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        ledger.register("pop", "zcdp", CAP, DELTA)
        ledger.reserve("pop", "r1", ZCDPBudget(Fraction(1, 4)))
        with pytest.raises(BudgetExceededError, match="exceeds the reservation"):
            _charge(ledger, "r1", Fraction(1, 2))
        _charge(ledger, "r1", Fraction(1, 8))
        ledger.fail("r1")
        with pytest.raises(LedgerError, match="is failed; it takes no more charges"):
            _charge(ledger, "r1", Fraction(1, 16))
        # Drawn budget is never refunded; the undrawn reservation is released.
        status = ledger.status("pop")
        assert (status.spent, status.reserved) == (Fraction(1, 8), 0)


def test_release_id_is_used_once(tmp_path):
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        ledger.register("pop", "zcdp", CAP, DELTA)
        ledger.reserve("pop", "r1", ZCDPBudget(Fraction(1, 4)))
        ledger.fail("r1")
        with pytest.raises(LedgerError, match=re.escape("release 'r1' is already in the ledger")):
            ledger.reserve("pop", "r1", ZCDPBudget(Fraction(1, 4)))


def test_lifetime_cap_cannot_be_changed(tmp_path):
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        ledger.register("pop", "zcdp", CAP, DELTA)
        with pytest.raises(LedgerError, match="cannot be changed"):
            ledger.register("pop", "zcdp", ZCDPBudget(Fraction(2)), DELTA)
        with pytest.raises(LedgerError, match="must be a PureBudget"):
            ledger.register("other", "pure", CAP, Fraction(0))


def test_tampering_is_detected(tmp_path):
    path = tmp_path / "l.sqlite"
    with Ledger.open(path) as ledger:
        ledger.register("pop", "zcdp", CAP, DELTA)
        ledger.reserve("pop", "r1", ZCDPBudget(Fraction(1, 2)))
        _charge(ledger, "r1", Fraction(1, 8))
        _charge(ledger, "r1", Fraction(1, 8))
    db = sqlite3.connect(path)
    db.execute("UPDATE charges SET loss = '1/1000' WHERE seq = 1")
    db.commit()
    db.close()
    with Ledger.open(path) as ledger, pytest.raises(LedgerError, match="charge 1 does not match the hash chain"):
        ledger.verify()


def test_measure_charges_before_drawing(tmp_path):
    spy = SpyNoise()
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        ledger.register("pop", "zcdp", CAP, DELTA)
        ledger.reserve("pop", "r1", ZCDPBudget(Fraction(1, 8)))
        context = ReleaseContext(ledger, "r1", "zcdp", spy)
        mechanism = DiscreteGaussian(1, ZCDPBudget(Fraction(1, 8)))
        _, record = measure(mechanism, np.arange(5), context, stage="one_way", query="marginal(a)")
        assert spy.calls == [("gaussian", 5, 2.0)]
        assert ledger.charges(release_id="r1")[0].loss == record.loss.amount == Fraction(1, 8)
        # Over budget: refused before any draw.
        with pytest.raises(BudgetExceededError):
            measure(mechanism, np.arange(5), context, stage="one_way", query="marginal(b)")
        assert len(spy.calls) == 1


def test_pure_ledger_books_epsilon(tmp_path):
    with Ledger.open(tmp_path / "l.sqlite") as ledger:
        ledger.register("pop", "pure", PureBudget(Fraction(2)), Fraction(0))
        ledger.reserve("pop", "r1", PureBudget(Fraction(1)))
        ledger.charge("r1", stage="s", query="q", mechanism="m", sensitivity="L1=1", scale="1",
                      loss=PureBudget(Fraction(1, 3)))
        assert ledger.status("pop").spent == Fraction(1, 3)


def _race(path: str, release_id: str, barrier, results) -> None:
    with Ledger.open(path) as ledger:
        barrier.wait()
        try:
            ledger.reserve("pop", release_id, ZCDPBudget(Fraction(3, 4)))
            results.put(release_id)
        except BudgetExceededError:
            results.put("refused")


def test_two_processes_racing_for_the_last_budget_exactly_one_wins(tmp_path):
    path = str(tmp_path / "l.sqlite")
    with Ledger.open(path) as ledger:
        ledger.register("pop", "zcdp", CAP, DELTA)
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(path, f"r{i}", barrier, results)) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    outcomes = sorted(results.get(timeout=10) for _ in procs)
    assert outcomes[1] == "refused" and outcomes[0] in ("r0", "r1")
    with Ledger.open(path) as ledger:
        assert ledger.status("pop").reserved == Fraction(3, 4)
