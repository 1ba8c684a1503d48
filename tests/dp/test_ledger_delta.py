"""Delta accounting in the ledger: (epsilon, delta) mechanisms booked as approximate zCDP.

``docs/proofs/approximate_zcdp.md``: a dataset declared (epsilon, delta) keeps
epsilon_CKS(sum rho, delta - sum delta_mech) <= epsilon; its usable rho shrinks as delta is spent.
"""

from __future__ import annotations

import sqlite3
from fractions import Fraction

import pytest

from dprelease.dp.accounting.approximate import effective_cap, release_budget
from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget
from dprelease.dp.accounting.conversions import approx_from_zcdp_cks, zcdp_from_approx_cks
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.errors import BudgetExceededError, LedgerError, ParameterError

EPSILON, DELTA = Fraction(1), Fraction(1, 10**6)
CAP = zcdp_from_approx_cks(EPSILON, DELTA)


@pytest.fixture
def ledger(tmp_path):
    with Ledger.open(tmp_path / "ledger.sqlite") as book:
        book.register("pop", "zcdp", CAP, DELTA, epsilon=EPSILON)
        yield book


def test_the_usable_cap_is_the_cks_rho_at_the_delta_left():
    used = Fraction(1, 2 * 10**6)
    shrunk = effective_cap(CAP.rho, EPSILON, DELTA, used)
    assert shrunk < CAP.rho and approx_from_zcdp_cks(ZCDPBudget(shrunk), DELTA - used).epsilon <= EPSILON
    assert effective_cap(CAP.rho, EPSILON, DELTA, Fraction(0)) == CAP.rho
    assert effective_cap(CAP.rho, EPSILON, DELTA, DELTA) == 0
    with pytest.raises(LedgerError, match="declared epsilon"):
        effective_cap(CAP.rho, None, DELTA, used)


def test_a_release_spending_delta_gets_the_rho_of_the_delta_left():
    rho = release_budget(EPSILON, DELTA, Fraction(1, 10**7))
    assert rho.rho < CAP.rho and approx_from_zcdp_cks(rho, DELTA - Fraction(1, 10**7)).epsilon <= EPSILON
    with pytest.raises(ParameterError, match="must be below the declared delta"):
        release_budget(EPSILON, DELTA, DELTA)


def test_reserving_delta_shrinks_what_is_left_and_an_overspend_is_refused(ledger):
    half = Fraction(1, 2 * 10**6)
    whole = effective_cap(CAP.rho, EPSILON, DELTA, half)
    with pytest.raises(BudgetExceededError, match="and delta=5e-07"):
        ledger.reserve("pop", "too-much", ZCDPBudget(whole * Fraction(1001, 1000)), delta=half)
    ledger.reserve("pop", "r1", ZCDPBudget(whole / 2), delta=half)
    status = ledger.status("pop")
    assert status.delta_reserved == half and status.remaining == whole / 2
    ledger.charge("r1", stage="stats", query="q", mechanism="m", sensitivity="L1=1", scale="1.0",
                  loss=ZCDPBudget(whole / 4), delta=half)
    after = ledger.status("pop")
    assert after.delta_spent == half and after.delta_reserved == 0 and after.remaining == whole / 2
    ledger.verify()
    assert ledger.charges(release_id="r1")[0].delta == half


def test_a_charge_beyond_the_reserved_delta_is_refused(ledger):
    ledger.reserve("pop", "r1", ZCDPBudget(CAP.rho / 4), delta=Fraction(1, 10**8))
    with pytest.raises(LedgerError, match="exceeds the delta the release reserved"):
        ledger.charge("r1", stage="stats", query="q", mechanism="m", sensitivity="L1=1", scale="1.0",
                      loss=ZCDPBudget(CAP.rho / 8), delta=Fraction(2, 10**8))
    assert ledger.charges(release_id="r1") == []


def test_a_pure_ledger_books_no_delta(tmp_path):
    with Ledger.open(tmp_path / "p.sqlite") as book:
        book.register("pop", "pure", PureBudget(Fraction(1)), Fraction(0))
        with pytest.raises(LedgerError, match="only a zCDP dataset can book delta"):
            book.reserve("pop", "r1", PureBudget(Fraction(1, 2)), delta=Fraction(1, 10**9))


def test_the_delta_of_a_charge_is_in_the_hash_chain(ledger, tmp_path):
    ledger.reserve("pop", "r1", ZCDPBudget(CAP.rho / 4), delta=Fraction(1, 10**8))
    ledger.charge("r1", stage="stats", query="q", mechanism="m", sensitivity="L1=1", scale="1.0",
                  loss=ZCDPBudget(CAP.rho / 8), delta=Fraction(1, 10**8))
    ledger._db.execute("UPDATE charges SET delta = '0/1'")
    with pytest.raises(LedgerError, match="hash chain"):
        ledger.verify()


def test_a_registered_epsilon_must_match_the_cap(tmp_path):
    with Ledger.open(tmp_path / "e.sqlite") as book:
        with pytest.raises(LedgerError, match="not the rho of the declared"):
            book.register("pop", "zcdp", CAP, DELTA, epsilon=Fraction(2))
        book.register("pop", "zcdp", CAP, DELTA)  # an old registration without epsilon
        book.register("pop", "zcdp", CAP, DELTA, epsilon=EPSILON)  # filled in later
        assert book.status("pop").epsilon == EPSILON


def test_an_old_ledger_file_is_migrated(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE datasets (dataset TEXT PRIMARY KEY, definition TEXT NOT NULL, cap TEXT NOT NULL,
            release_cap TEXT, delta TEXT NOT NULL, created_at REAL NOT NULL);
        CREATE TABLE releases (release_id TEXT PRIMARY KEY, dataset TEXT NOT NULL, reserved TEXT NOT NULL,
            status TEXT NOT NULL, created_at REAL NOT NULL, closed_at REAL, plan TEXT NOT NULL DEFAULT '{}');
        CREATE TABLE charges (seq INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL, release_id TEXT NOT NULL,
            stage TEXT NOT NULL, query TEXT NOT NULL, mechanism TEXT NOT NULL, sensitivity TEXT NOT NULL,
            scale TEXT NOT NULL, loss TEXT NOT NULL, native_loss TEXT NOT NULL, created_at REAL NOT NULL,
            prev_hash TEXT NOT NULL, hash TEXT NOT NULL);
    """)
    db.close()
    with Ledger.open(path) as book:
        book.register("pop", "zcdp", CAP, DELTA, epsilon=EPSILON)
        book.reserve("pop", "r1", ZCDPBudget(CAP.rho / 2), delta=Fraction(1, 10**9))
        assert book.status("pop").delta_reserved == Fraction(1, 10**9)
