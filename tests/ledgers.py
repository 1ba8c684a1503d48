"""A ledger with one open release under pure DP, for the tests of the measurement paths (tests/dp)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path

from dprelease.dp.accounting.budget import PureBudget
from dprelease.dp.accounting.charges import ReleaseContext
from dprelease.dp.accounting.ledger import Ledger
from dprelease.dp.mechanisms.random import secure_noise


@contextmanager
def pure_release(folder: Path, cap: Fraction = Fraction(1000)) -> Iterator[ReleaseContext]:
    """Release ``r1`` of population ``pop`` (lifetime ``cap``, half of it reserved) with the production noise."""
    with Ledger.open(folder / "ledger.sqlite") as ledger:
        ledger.register("pop", "pure", PureBudget(cap), Fraction(0))
        ledger.reserve("pop", "r1", PureBudget(cap / 2))
        yield ReleaseContext(ledger, "r1", "pure", secure_noise())


def charged_queries(context: ReleaseContext) -> list[tuple[str, str]]:
    """(stage, query) of every charge booked for release ``r1``, in order."""
    return [(c.stage, c.query) for c in context.ledger.charges(release_id="r1")]
