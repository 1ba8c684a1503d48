"""The internal evaluation at scale: samples chosen securely, exact matches against every real row."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dprelease.tasks.evaluate as evaluate
from dprelease.quality.risk import exact_match_share
from dprelease.schemas.spec import load_spec
from dprelease.tasks.evaluate import secure_order, take_rows

ROOT = Path(__file__).parents[2]
ADULT = ROOT / "examples" / "adult"
AUDIT = ROOT / "tests" / "schemas" / "data" / "audit_adult.json"


def test_secure_order_is_a_uniform_sample_in_random_order():
    order = secure_order(1000, 100)
    assert len(order) == 100 and len(set(order.tolist())) == 100 and order.min() >= 0 and order.max() < 1000
    assert not np.all(np.diff(order) > 0)  # random order, not sorted (probability 1/100! of failing)
    whole = secure_order(50, 80)
    assert sorted(whole.tolist()) == list(range(50))
    # Uniform: over many draws every row is chosen about size/population of the time.
    hits = np.zeros(20, dtype=np.int64)
    for _ in range(2000):
        hits[secure_order(20, 5)] += 1
    assert np.all(np.abs(hits / 2000 - 0.25) < 0.05)  # 5 sd of a binomial(2000, 1/4) share is 0.048


def test_secure_order_uses_the_given_source():
    calls = []

    def source(n: int) -> bytes:
        calls.append(n)
        return np.arange(n // 8, 0, -1, dtype=np.uint64).tobytes()  # keys descending: last rows first

    assert secure_order(10, 3, source).tolist() == [9, 8, 7] and calls == [80]


def test_take_rows_across_batches():
    table = pa.table({"x": np.arange(25)})
    batches = [table.slice(0, 10), table.slice(10, 0), table.slice(10, 15)]
    rows = np.array([0, 9, 10, 11, 24])
    assert take_rows(iter(batches), rows).column("x").to_pylist() == rows.tolist()
    assert take_rows(table.to_batches(max_chunksize=7), rows).column("x").to_pylist() == rows.tolist()


def test_exact_match_share_over_batches_equals_the_whole_table():
    real = pq.read_table(ADULT / "adult.parquet")
    synthetic = real.take(pa.array(np.random.default_rng(1).integers(0, real.num_rows, 500)))
    age = real.schema.field(0)
    changed = real.slice(0, 300).set_column(0, age, pa.array([200] * 300, age.type))  # no real row is 200 years old
    synthetic = pa.concat_tables([synthetic, changed])
    whole = exact_match_share(real, synthetic, real.column_names)
    assert whole == pytest.approx(500 / 800)
    assert exact_match_share(real.to_batches(max_chunksize=4000), synthetic, real.column_names) == whole
    assert exact_match_share(iter(()), synthetic, real.column_names) == 0.0


def _run_evaluation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, dict]:
    real = pq.read_table(ADULT / "adult.parquet")
    synthetic = real.take(pa.array(np.random.default_rng(2).integers(0, real.num_rows, 30_000)))
    staging = tmp_path / "staging"
    (staging / "synthetic").mkdir(parents=True)
    internal = tmp_path / "steward"
    internal.mkdir(mode=0o700)
    pq.write_table(synthetic, staging / "synthetic" / "adult.parquet")
    shutil.copy(AUDIT, staging / "audit.json")  # the internal report reads the release's identity from it
    plan = SimpleNamespace(spec_path=str(ADULT / "release.yaml"), spec=load_spec(ADULT / "release.yaml"), seed=7)
    monkeypatch.setattr(evaluate, "get_run_logger", lambda: logging.getLogger("test"))
    evaluate.evaluate_utility.fn(plan, str(staging), "synthetic/adult.parquet", str(internal))
    return json.loads((internal / "utility.json").read_text()), json.loads((internal / "risk.json").read_text())


def test_a_small_table_is_evaluated_whole(tmp_path, monkeypatch):
    utility, risk = _run_evaluation(tmp_path, monkeypatch)
    assert utility["evaluated"]["real_rows_evaluated"] == utility["evaluated"]["real_rows"] == 32_561
    assert utility["evaluated"]["synthetic_rows_evaluated"] == 30_000
    assert risk["dcr"]["real_sample"] == 2000 and risk["evaluated"]["dcr_reference_rows"] == 32_561
    assert risk["exact_match_share"] == 1.0  # a bootstrap of the real rows


def test_a_large_table_is_evaluated_on_samples(tmp_path, monkeypatch):
    monkeypatch.setattr(evaluate, "EVALUATION_ROWS", 8000)
    monkeypatch.setattr(evaluate, "EXACT_MATCH_ROWS", 3000)
    monkeypatch.setattr(evaluate, "DCR_REFERENCE_ROWS", 4000)
    monkeypatch.setattr(evaluate, "DCR_SAMPLE", 500)
    utility, risk = _run_evaluation(tmp_path, monkeypatch)
    sample = utility["evaluated"]
    assert (sample["real_rows"], sample["real_rows_evaluated"]) == (32_561, 8000)
    assert (sample["synthetic_rows"], sample["synthetic_rows_evaluated"]) == (30_000, 8000)
    assert risk["evaluated"]["dcr_reference_rows"] == 4000
    assert risk["evaluated"]["exact_match"] == "3000 synthetic rows against all 32561 real rows"
    assert risk["exact_match_share"] == 1.0  # every synthetic row is a real row, found among all real rows
    assert risk["k_anonymity"]["real"]["rows"] == risk["k_anonymity"]["synthetic"]["rows"] == 8000
    assert 0 < utility["tvd2"] < 0.1  # a bootstrap scored on samples of 8000 rows
    assert "Computed on samples" in (tmp_path / "steward" / "report.html").read_text()
