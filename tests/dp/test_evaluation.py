"""The internal yardstick is the evaluator's (``shared/bench/utility.py``), and it cannot fail on extreme values."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dprelease.quality.utility import joint_tvd, utility

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT.parent / "shared" / "bench" / "utility.py"
ADULT = ROOT / "examples" / "adult" / "adult.parquet"


def _bench():
    if not BENCH.is_file():
        pytest.skip("shared/bench/utility.py is not beside this checkout")
    spec = importlib.util.spec_from_file_location("shared_bench_utility", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _agree(real: pa.Table, synthetic: pa.Table, tmp_path: Path) -> None:
    bench = _bench()
    pq.write_table(real, tmp_path / "real.parquet")
    pq.write_table(synthetic, tmp_path / "synthetic.parquet")
    theirs = bench.report(pd.read_parquet(tmp_path / "real.parquet"), pd.read_parquet(tmp_path / "synthetic.parquet"),
                          real.column_names)
    ours = utility(pq.read_table(tmp_path / "real.parquet"), pq.read_table(tmp_path / "synthetic.parquet"),
                   real.column_names)
    assert round(ours.tvd1, 4) == theirs["tvd1"]
    assert round(ours.tvd2, 4) == theirs["tvd2"]
    assert round(float(ours.tvd3), 4) == theirs["tvd3"]
    assert round(max(ours.two_way.values()), 4) == theirs["tvd2_max"]


def test_agrees_with_the_evaluator_on_adult_against_a_shuffled_copy(tmp_path):
    real = pq.read_table(ADULT).slice(0, 6000)
    rng = np.random.default_rng(3)  # evaluation only: a synthetic stand-in with independent columns
    columns = {name: real.column(name).take(pa.array(rng.permutation(real.num_rows))) for name in real.column_names}
    _agree(real, pa.table(columns), tmp_path)


def test_agrees_with_the_evaluator_on_mixed_codes_nulls_and_numbers_as_strings(tmp_path):
    rng = np.random.default_rng(5)  # evaluation only
    n = 3000

    def table(shift: float) -> pa.Table:
        income = rng.lognormal(10 + shift, 1, n).round()
        coded = np.where(rng.random(n) < 0.1, "N", income.astype(int).astype(str)).tolist()
        small = rng.integers(0, 5, n).astype(float)
        small[rng.random(n) < 0.05] = np.nan
        category = rng.choice(["a", "b", "1", "1.0"], n).tolist()
        return pa.table({"income": pa.array(income), "coded": pa.array(coded), "small": pa.array(small),
                         "category": pa.array(category), "int_nulls": pa.array(
                             [None if i % 11 == 0 else int(v) for i, v in enumerate(rng.integers(0, 40, n))],
                             pa.int64())})

    _agree(table(0.0), table(0.3), tmp_path)


def test_extreme_integers_do_not_raise():
    values = [2**53 + 1, -(2**63), 2**63 - 1, 0, 5]
    real = pa.table({"x": pa.array(values * 10, pa.int64()), "y": pa.array(list("abcde") * 10)})
    report = utility(real, real, ["x", "y"])
    assert report.tvd1 == 0.0 and report.tvd2 == 0.0


def test_joint_marginals_are_counted_over_occurring_cells_only():
    # Three columns of 200,000 distinct labels each: 8e15 cells if counted densely.
    n = 200_000
    codes = np.arange(n, dtype=np.int64)
    assert joint_tvd([codes, codes, codes], [codes, codes, codes]) == 0.0
    shifted = (codes + 1) % n
    assert joint_tvd([codes, codes], [codes, shifted]) == pytest.approx(1.0)


def test_joint_tvd_matches_a_dense_count():
    rng = np.random.default_rng(9)  # evaluation only
    a, b = rng.integers(0, 4, 500), rng.integers(0, 3, 500)
    c, d = rng.integers(0, 4, 400), rng.integers(0, 3, 400)
    dense_p = np.bincount(a * 3 + b, minlength=12) / 500
    dense_q = np.bincount(c * 3 + d, minlength=12) / 400
    assert joint_tvd([a, b], [c, d]) == pytest.approx(0.5 * np.abs(dense_p - dense_q).sum(), abs=1e-15)
