"""Local-DP parameters that would give no signal, or hash into positions that do not exist, are refused."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest

from dprelease.dp.errors import ParameterError
from dprelease.dp.local.randomizers import GRR, OLH, OUE, SUE
from dprelease.dp.local.rappor import RapporParams, bloom


@pytest.mark.parametrize(("make", "owner"), [(GRR, "GRR"), (SUE, "SUE"), (OUE, "OUE"), (OLH, "GRR")])
def test_an_epsilon_too_small_for_the_probability_grid_is_refused(make, owner):
    # Rounded to multiples of 2^-32, p* <= q*: GRR with k = 3 stated a negative epsilon, OUE 5e-324.
    with pytest.raises(ParameterError, match=re.escape(f"{owner}: epsilon (1e-12) is too small")):
        make(3, 1e-12)


@pytest.mark.parametrize("make", [GRR, SUE, OUE, OLH])
def test_the_smallest_epsilon_the_grid_holds_states_a_positive_epsilon(make):
    randomizer = make(3, 1e-8)
    p, q = randomizer.support_probabilities
    assert p > q and 0 < randomizer.epsilon <= 1e-8


def test_rappor_refuses_more_hashes_than_one_digest_gives():
    assert len(set(bloom("CA", 0, RapporParams(k=4096, h=8, m=1)).tolist())) == 8
    with pytest.raises(ParameterError, match=re.escape("RAPPOR: h (9) must be at most 8")):
        RapporParams(k=64, h=9, m=1)  # hashes 9 and on were all position 0


@pytest.mark.parametrize(("name", "size"), [("k", 4097), ("m", 4097)])
def test_rappor_refuses_a_bloom_filter_or_cohorts_beyond_the_decoder(name, size):
    arguments = {"k": 32, "h": 1, "m": 64, "f": Fraction(1, 2), name: size}
    with pytest.raises(ParameterError, match=re.escape(f"RAPPOR: {name} ({size}) must be at most 4096")):
        RapporParams(**arguments)


@pytest.mark.parametrize("name", ["f", "p"])
def test_rappor_refuses_a_probability_the_client_encoders_cannot_draw(name):
    arguments = {"k": 32, "h": 1, "m": 64, "f": Fraction(9, 16), "p": Fraction(1, 8), "q": Fraction(11, 16),
                 name: Fraction("0.1234567890123456789")}  # a denominator of 10^19: the secure source stops at 2^62
    with pytest.raises(ParameterError, match=re.escape(f"RAPPOR: {name} must be a fraction with a denominator of at "
                                                       "most 2^32")):
        RapporParams(**arguments)
    assert RapporParams(**{**arguments, name: Fraction("0.1")}).p_star > 0


def test_olh_support_counts_the_reports_whose_hash_of_each_value_is_their_bucket():
    import numpy as np

    from dprelease.dp.local.randomizers import olh_hash

    protocol = OLH(50, 1.5)
    rng = np.random.default_rng(3)  # public test reports (no sensitive value)
    seeds, buckets = rng.integers(0, 1 << 62, 2000), rng.integers(0, protocol.g, 2000)
    expected = [int(np.count_nonzero(olh_hash(seeds, np.full(seeds.shape, v), protocol.g) == buckets))
                for v in range(protocol.k)]
    assert protocol.support((seeds, buckets)).tolist() == expected


def test_olh_support_in_blocks_counts_as_each_reports_own_hash(monkeypatch):
    import numpy as np

    import dprelease.dp.local.randomizers as randomizers
    from dprelease.dp.local.randomizers import olh_hash

    monkeypatch.setattr(randomizers, "OLH_BLOCK", 700)  # 2,000 reports: two whole blocks and a part
    protocol = OLH(40, 2.5)
    rng = np.random.default_rng(5)  # public test reports (no sensitive value)
    seeds, buckets = rng.integers(0, 1 << 62, 2000), rng.integers(0, protocol.g, 2000)
    hashes = np.stack([olh_hash(seeds, np.full(seeds.shape, v), protocol.g) for v in range(protocol.k)])
    assert protocol.support((seeds, buckets)).tolist() == (hashes == buckets).sum(axis=1).tolist()
    assert protocol.support((seeds[:1], buckets[:1])).tolist() == (hashes[:, :1] == buckets[:1]).sum(axis=1).tolist()
