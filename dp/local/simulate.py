"""Simulated populations for local-DP tests, examples and benchmarks (never people's data).

A population of n people, each with a state among 26 (the 26 states of the RAPPOR COVID example), drawn
with Zipf(1.1) weights over the states' population rank; a seeded generator makes it reproducible. Reports
are then produced by the real client encoders, from a :class:`dp.local.bits.Bits` source the caller
chooses (the secure one, or a seeded one for reproducible tests).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

STATES = ("CA", "TX", "FL", "NY", "PA", "IL", "OH", "GA", "NC", "MI", "NJ", "VA", "WA", "AZ", "MA", "TN",
          "IN", "MO", "MD", "WI", "CO", "MN", "SC", "AL", "LA", "KY")
"""26 US states, most populous first (2020 census order)."""

DECOYS = ("ZZ", "QQ", "XA", "XB", "XC", "XD", "XE", "XF", "XG", "XH", "XI", "XJ", "XK", "XL", "XM", "XN", "XO",
          "XP", "XQ", "XR", "XS", "XT", "XU", "XV", "XW")
"""25 candidate values no one holds: false positives of a decoder are counted on them."""


def zipf_weights(k: int = len(STATES), exponent: float = 1.1) -> npt.NDArray[np.float64]:
    """Shares proportional to 1 / rank^exponent."""
    raw = 1.0 / np.arange(1, k + 1, dtype=np.float64) ** exponent
    return np.asarray(raw / raw.sum(), dtype=np.float64)


def population(n: int, seed: int, k: int = len(STATES), exponent: float = 1.1) -> npt.NDArray[np.int64]:
    """The state codes (in [0, k)) of n people drawn from the Zipf weights (simulation only)."""
    rng = np.random.default_rng(seed)  # evaluation only: simulated people, never anyone's data
    return np.asarray(rng.choice(k, size=n, p=zipf_weights(k, exponent)), dtype=np.int64)
