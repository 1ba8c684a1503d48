"""Simulated populations for local-DP tests, examples and benchmarks (never people's data).

A population of n people, each with a state among 26 (the 26 states of the RAPPOR COVID example), drawn
with Zipf(1.1) weights over the states' population rank; a seeded generator makes it reproducible. Reports
are then produced by the real client encoders, from a :class:`dp.local.bits.Bits` source the caller
chooses (the secure one, or a seeded one for reproducible tests).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from dprelease.dp.local.rappor import RapporParams, design_matrix

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


def rappor_counts(values: Sequence[str], held: npt.ArrayLike, params: RapporParams,
                  seed: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per-cohort bit counts and reports per cohort, drawn from their exact distribution (simulation only).

    ``held[j]`` people hold ``values[j]``; each is put in a uniformly random cohort and sends one report (a
    fresh PRR, then an IRR). Clients and bits are independent, so a bit set in the Bloom filters of N1 of a
    cohort's n_m clients is reported by Binomial(N1, q*) + Binomial(n_m − N1, p*) of them: the same law as
    :func:`dp.local.rappor.encode_once` followed by :func:`dp.local.rappor.cohort_counts`, without
    drawing n × k bits.
    """
    rng = np.random.default_rng(seed)  # evaluation only: simulated reports, never anyone's
    people = np.asarray(held, dtype=np.int64)
    in_cohort = np.stack([rng.multinomial(int(c), np.full(params.m, 1.0 / params.m)) for c in people])
    incidence = (design_matrix(values, params, np.ones(params.m)) > 0).reshape(params.m, params.k, len(values))
    ones = np.einsum("mbj,jm->mb", incidence.astype(np.int64), in_cohort)
    per_cohort = in_cohort.sum(axis=0).astype(np.int64)
    counts = rng.binomial(ones, float(params.q_star)) + rng.binomial(per_cohort[:, None] - ones,
                                                                    float(params.p_star))
    return np.asarray(counts, dtype=np.int64), per_cohort
