from __future__ import annotations

import json
import multiprocessing
import os
import re
import sqlite3
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.accounting.ledger_rows import head_path
from dprelease.dp.accounting.processes import _names, release_lock
from dprelease.dp.errors import BudgetExceededError, LedgerError, ParameterError
from dprelease.dp.mechanisms.noise import DiscreteGaussian, measure
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
    with pytest.raises(LedgerError, match="charge 1 does not match the hash chain"), Ledger.open(path):
        pass  # the chain is verified on every open


def test_a_file_that_is_not_a_ledger_is_refused_and_left_as_it_was(tmp_path):
    text = tmp_path / "notes.sqlite"
    text.write_bytes(b"not a database, but a steward's notes\n" * 200)
    with pytest.raises(ParameterError, match=r"ledger .*notes.sqlite: is not an SQLite database \(or is damaged\)"), \
            Ledger.open(text):
        pass
    assert text.read_bytes() == b"not a database, but a steward's notes\n" * 200
    other = tmp_path / "app.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE users (name TEXT)")
    with pytest.raises(ParameterError, match="is an SQLite database of something else"), Ledger.open(other):
        pass
    with sqlite3.connect(other) as db:
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["users"]
    with pytest.raises(ParameterError, match=r"must be a file .* not a folder"), Ledger.open(tmp_path):
        pass
    empty = tmp_path / "empty.sqlite"
    empty.touch()  # an empty file is a new database: a new ledger
    with Ledger.open(empty) as ledger:
        ledger.register("pop", "zcdp", CAP, DELTA)
    with Ledger.open(empty) as ledger:
        assert ledger.status("pop").spent == 0


def test_deleted_trailing_rows_are_detected_by_the_head_file(tmp_path):
    path = tmp_path / "l.sqlite"
    with Ledger.open(path) as ledger:
        ledger.register("pop", "zcdp", CAP, DELTA)
        ledger.reserve("pop", "r1", ZCDPBudget(Fraction(1, 2)))
        for _ in range(3):
            _charge(ledger, "r1", Fraction(1, 8))
        assert ledger.head().rows == 3
    assert json.loads(head_path(path).read_text())["rows"] == 3
    db = sqlite3.connect(path)
    db.execute("DELETE FROM charges WHERE seq >= 2")  # the chain of what is left still verifies
    db.commit()
    db.close()
    with pytest.raises(LedgerError, match="2 charge row"), Ledger.open(path):
        pass


def test_a_charge_never_sealed_is_booked_as_lost_and_the_rerun_may_book_and_draw_it_again(tmp_path):
    path = tmp_path / "l.sqlite"
    with Ledger.open(path) as ledger:
        ledger.register("pop", "zcdp", CAP, DELTA)
        ledger.reserve("pop", "r1", ZCDPBudget(Fraction(1, 4)))
        context = ReleaseContext(ledger, "r1", "zcdp", SpyNoise())
        mechanism = DiscreteGaussian(1, ZCDPBudget(Fraction(1, 8)))
        measure(mechanism, np.arange(5), context, stage="one_way", query="marginal(a)")
        # The process dies between the charge of marginal(b) and its seal: charged, never sealed.
        ledger.charge("r1", stage="one_way", query="marginal(b)", mechanism=mechanism.name,
                      sensitivity="L2=1", scale=str(mechanism.scale()), loss=ZCDPBudget(Fraction(1, 8)))
        assert ledger.resume("r1") == Fraction(1, 8)  # booked as lost; the reservation grows by it
        assert ledger.resume("r1") == 0  # counted once
        spy = SpyNoise()
        context = ReleaseContext(ledger, "r1", "zcdp", spy)
        measure(mechanism, np.arange(5), context, stage="one_way", query="marginal(a)")  # replayed
        measure(mechanism, np.arange(5), context, stage="one_way", query="marginal(b)")  # booked and drawn
        assert len(spy.calls) == 1
        charges = ledger.charges(release_id="r1")
        assert [c.query for c in charges] == ["marginal(a)", "marginal(b)", "marginal(b)"]
        ledger.publish("r1")
        status = ledger.status("pop")
        assert status.spent == sum(c.loss for c in charges) == Fraction(3, 8) and status.reserved == 0


def test_a_reservation_whose_process_is_gone_is_reclaimed(tmp_path):
    path = tmp_path / "l.sqlite"
    with Ledger.open(path) as ledger:
        ledger.register("pop", "zcdp", CAP, DELTA)
        ledger.reserve("pop", "held", ZCDPBudget(Fraction(1, 2)))
        _charge(ledger, "held", Fraction(1, 8))
        ledger.reserve("pop", "mine", ZCDPBudget(Fraction(1, 8)))
        assert ledger.reclaim_stale("pop") == []  # this process holds both
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    db = sqlite3.connect(path)
    db.execute("UPDATE leases SET pid = ?, started = '' WHERE release_id = 'held'", (int(dead.stdout),))
    db.commit()
    db.close()
    with Ledger.open(path) as ledger:
        assert ledger.reclaim_stale("pop") == ["held"]
        assert ledger.release_status("held") == "failed" and ledger.release_status("mine") == "reserved"
        status = ledger.status("pop")
        assert status.spent == Fraction(1, 8) and status.reserved == Fraction(1, 8)  # only "mine" is open
        ledger.abandon("mine")
        assert ledger.status("pop").reserved == 0


def test_one_run_per_release_id(tmp_path):
    with release_lock(tmp_path / "l.sqlite", "r1"):
        with pytest.raises(LedgerError, match="being run by another process"):
            with release_lock(tmp_path / "l.sqlite", "r1"):
                pass
        with release_lock(tmp_path / "l.sqlite", "r2"):
            pass
    with release_lock(tmp_path / "l.sqlite", "r1"):
        pass


def test_a_release_lock_leaves_no_file_and_a_removed_lock_file_does_not_hold_the_id(tmp_path):
    import fcntl

    ledger, path = tmp_path / "l.sqlite", tmp_path / "l.sqlite.lock-r1"
    with release_lock(ledger, "r1"):
        assert path.exists()
        stale = os.open(path, os.O_RDWR)  # another process opened it just before this run ended
    assert list(tmp_path.iterdir()) == []  # one file per release id ever run would pile up beside the ledger
    try:
        fcntl.flock(stale, fcntl.LOCK_EX | fcntl.LOCK_NB)  # ... and locks it now: a file no longer at the path
        assert not _names(path, stale)
        with release_lock(ledger, "r1"):  # so it does not hold the id; this run locks the new file
            fresh = os.open(path, os.O_RDWR)
            assert _names(path, fresh)
            with pytest.raises(BlockingIOError):
                fcntl.flock(fresh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.close(fresh)
    finally:
        os.close(stale)


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


def test_a_write_the_disk_refuses_is_one_storage_error_naming_the_ledger_and_the_ledger_stays_usable(tmp_path):
    from dprelease.dp.errors import ReleaseError, StorageError

    path = tmp_path / "l.sqlite"
    with Ledger.open(path) as ledger:
        ledger.register("pop", "zcdp", CAP, DELTA)
        ledger.reserve("pop", "r1", ZCDPBudget(Fraction(1, 2)))
        _charge(ledger, "r1", Fraction(1, 8))
        pages = ledger._db.execute("PRAGMA page_count").fetchone()[0]
        ledger._db.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own limit: its refusal is SQLITE_FULL
        with pytest.raises(StorageError) as caught:
            ledger.seal("r1", "one_way/q", json.dumps({"counts": list(range(20_000))}))
        message = str(caught.value)
        assert message.startswith(f"ledger {path}: could not be written: its disk is full")
        assert "run the same release id again" in message and "replayed" in message
        assert "OperationalError" not in message and "database or disk is full" not in message  # not SQLite's text
        assert isinstance(caught.value, ReleaseError) and caught.value.__cause__ is None
        assert not ledger._db.in_transaction  # SQLite rolled back; no ROLLBACK error replaced the refusal
        assert ledger.sealed("r1", "one_way/q") is None
        ledger._db.execute(f"PRAGMA max_page_count = {pages + 1000}")  # room again
        ledger.seal("r1", "one_way/q", "{}")
        ledger.publish("r1")
    with Ledger.open(path) as ledger:
        ledger.verify()
        assert ledger.release_status("r1") == "published"
