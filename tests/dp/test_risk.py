from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dprelease.dp.errors import ParameterError
from dprelease.quality.kanonymity import KAnonymityReport, k_anonymity, k_anonymity_comparison
from dprelease.quality.risk import DCRReport, RiskReport, closest_record_distances, disclosure_risk, exact_match_share

ADULT = Path(__file__).resolve().parents[2] / "examples" / "adult" / "adult.parquet"
ADULT_QIS = ["age", "sex", "race", "marital-status", "native-country", "education"]
AGE_BANDS = {"age": list(range(20, 95, 5))}


# ---------------------------------------------------------------- exact matches

def test_exact_matches_counted_with_nulls_equal_to_nulls():
    real = pa.table({"a": pa.array([1, 2, None], pa.int64()), "b": ["x", "y", "z"]})
    synthetic = pa.table({"a": pa.array([1, None, 2, 3, None], pa.int64()), "b": ["x", "z", "x", None, "y"]})
    # (1,x) and (None,z) are real rows; (2,x), (3,None) and (None,y) are not.
    assert exact_match_share(real, synthetic, ["a", "b"]) == pytest.approx(2 / 5)
    # On column a alone, 1, None, 2 and None occur in the real table; 3 does not.
    assert exact_match_share(real, synthetic, ["a"]) == pytest.approx(4 / 5)


def test_exact_matches_treat_nan_as_null_and_compare_ints_with_floats():
    real = pa.table({"x": pa.array([1.5, float("nan")]), "n": pa.array([1, 2], pa.int64())})
    synthetic = pa.table({"x": pa.array([None, 1.5, 2.5], pa.float64()), "n": pa.array([2.0, 1.0, 1.0])})
    assert exact_match_share(real, synthetic, ["x", "n"]) == pytest.approx(2 / 3)


def test_exact_matches_of_many_high_cardinality_columns_do_not_overflow():
    rng = np.random.default_rng(3)
    real = pa.table({f"c{i}": rng.integers(0, 1 << 40, 500) for i in range(8)})
    fresh = pa.table({f"c{i}": rng.integers(0, 1 << 40, 100) for i in range(8)})
    synthetic = pa.concat_tables([real.slice(0, 100), fresh])
    assert exact_match_share(real, synthetic, real.column_names) == pytest.approx(0.5)


def test_exact_match_share_of_a_table_with_itself_is_one():
    real = pa.table({"a": pa.array([None, None, 1], pa.int64()), "s": [None, "u", "u"]})
    assert exact_match_share(real, real, ["a", "s"]) == 1.0


# ---------------------------------------------------------------- distance to closest record

def test_dcr_of_an_identical_copy_is_zero():
    real = pa.table({"x": [0.0, 3.5, 10.0, None], "c": ["a", "b", None, "a"], "n": [1, 2, 3, 4]})
    report = closest_record_distances(real, real, ["x", "c", "n"])
    assert report.synthetic_median == 0.0 and report.synthetic_p05 == 0.0
    assert report.real_median > 0  # the baseline excludes the row itself
    assert report.synthetic_sample == report.real_sample == 4


def test_dcr_of_a_far_away_table_is_large():
    real = pa.table({"x": list(range(10)), "c": ["a", "b"] * 5})
    synthetic = pa.table({"x": pa.array([None] * 4, pa.int64()), "c": ["q"] * 4})
    report = closest_record_distances(real, synthetic, ["x", "c"])
    assert report.synthetic_median == 1.0 and report.synthetic_p05 == 1.0
    assert report.share_closer_than_real_p05 == 0.0


def test_dcr_hand_computed():
    real = pa.table({"x": [0, 10], "c": ["a", "b"]})
    synthetic = pa.table({"x": [5, 10], "c": ["a", "a"]})
    report = closest_record_distances(real, synthetic, ["x", "c"])
    # (5,a): to (0,a) (0.5 + 0)/2 = 0.25, to (10,b) (0.5 + 1)/2; (10,a): to (10,b) (0 + 1)/2 = 0.5.
    assert report.synthetic_median == pytest.approx(0.375)
    assert report.synthetic_p05 == pytest.approx(0.25 + 0.05 * 0.25)
    assert report.real_median == 1.0  # the only other real row differs everywhere
    assert report.share_closer_than_real_p05 == 1.0


def test_dcr_numeric_nulls_and_clamping():
    real = pa.table({"x": pa.array([0, 10, None], pa.int64())})
    synthetic = pa.table({"x": pa.array([None, 4, 25], pa.int64())})
    report = closest_record_distances(real, synthetic, ["x"])
    # null -> the real null (0); 4 -> 0 (0.4); 25 is clamped to 10 -> 10 (0).
    assert report.synthetic_median == 0.0
    assert report.synthetic_p05 == 0.0
    assert report.real_median == 1.0  # 0 <-> 10 is the whole range; null <-> value is 1


def test_dcr_constant_numeric_column_is_compared_by_equality():
    real = pa.table({"x": [5, 5]})
    report = closest_record_distances(real, pa.table({"x": [6, 5]}), ["x"])
    assert (report.synthetic_p05, report.synthetic_median) == (pytest.approx(0.05), 0.5)
    assert report.real_median == 0.0  # a duplicate elsewhere in the real table counts


def test_dcr_sampling_is_seeded_and_capped():
    rng = np.random.default_rng(5)
    real = pa.table({"x": rng.normal(size=300), "c": rng.choice(["a", "b", "c"], 300)})
    synthetic = pa.table({"x": rng.normal(size=200), "c": rng.choice(["a", "b", "c"], 200)})
    fixed = np.random.default_rng(1).integers(0, 256, size=8 * 300, dtype=np.uint8).tobytes()

    def source(size):
        return fixed[:size]

    first = closest_record_distances(real, synthetic, ["x", "c"], sample=50, seed=7, random_bytes=source)
    assert first == closest_record_distances(real, synthetic, ["x", "c"], sample=50, seed=7, random_bytes=source)
    assert (first.synthetic_sample, first.real_sample) == (50, 50)
    everything = closest_record_distances(real, synthetic, ["x", "c"], sample=10_000)
    assert (everything.synthetic_sample, everything.real_sample) == (200, 300)


# ---------------------------------------------------------------- k-anonymity

def test_k_anonymity_of_a_unique_combination_is_one():
    table = pa.table({"age": [30, 30, 30, 41], "sex": ["F", "F", "F", "M"]})
    report = k_anonymity(table, ["age", "sex"])
    assert (report.k, report.classes, report.rows) == (1, 2, 4)
    assert report.small_class_shares == {2: 0.25, 5: 1.0, 10: 1.0}


def test_k_anonymity_binning_generalises_numeric_qis():
    table = pa.table({"age": [21, 22, 23, 24, 26, 27], "sex": ["F"] * 6})
    assert k_anonymity(table, ["age", "sex"]).k == 1
    report = k_anonymity(table, ["age", "sex"], numeric_bins={"age": [20, 25, 30]})
    assert (report.k, report.classes) == (2, 2)
    assert report.small_class_shares == {2: 0.0, 5: 1.0, 10: 1.0}
    three = k_anonymity(table, ["age", "sex"], numeric_bins={"age": [20, 25, 30]}, thresholds=(3,))
    assert three.small_class_shares == {3: pytest.approx(2 / 6)}
    # Values below the first edge and above the last form the two open-ended bins.
    outer = k_anonymity(pa.table({"age": [5, 6, 90, 99]}), ["age"], numeric_bins={"age": [20, 25]})
    assert (outer.k, outer.classes) == (2, 2)


def test_k_anonymity_nulls_form_their_own_value():
    table = pa.table({"age": pa.array([None, None, 30, 30.5, float("nan")]), "sex": [None, None, "F", "F", None]})
    report = k_anonymity(table, ["age", "sex"], numeric_bins={"age": [25, 35]})
    assert (report.k, report.classes) == (2, 2)  # {null/NaN, null} x3 and {[25,35), F} x2


def test_k_anonymity_comparison_uses_the_same_bins_for_both_tables():
    real = pa.table({"age": [21, 22, 31], "sex": ["F", "F", "M"]})
    synthetic = pa.table({"age": [21, 24, 33, 34], "sex": ["F", "F", "M", "M"]})
    both = k_anonymity_comparison(real, synthetic, ["age", "sex"], {"age": [20, 25, 30, 35]})
    assert (both.real.k, both.synthetic.k) == (1, 2)
    assert both.to_dict()["synthetic"] == {
        "k": 2, "classes": 2, "rows": 4, "small_class_shares": {"2": 0.0, "5": 1.0, "10": 1.0},
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"quasi_identifiers": []}, "quasi_identifiers (empty) must name at least one column"),
        ({"quasi_identifiers": ["nope"]}, "quasi_identifiers ('nope') must be a column of the given table"),
        ({"numeric_bins": {"sex": [1]}}, "numeric_bins ('sex') must name a numeric column"),
        ({"numeric_bins": {"income": [1]}}, "numeric_bins ('income') must name a quasi-identifier"),
        ({"numeric_bins": {"age": [30, 20]}}, "numeric_bins.age must be finite and strictly increasing"),
        ({"numeric_bins": {"age": []}}, "numeric_bins.age must be finite and strictly increasing"),
        ({"thresholds": [0]}, "thresholds (0) must be positive integers"),
    ],
)
def test_k_anonymity_rejects_bad_arguments(kwargs, message):
    table = pa.table({"age": [30], "sex": ["F"], "income": [1]})
    arguments = {"quasi_identifiers": ["age", "sex"], **kwargs}
    with pytest.raises(ParameterError, match=re.escape(message)):
        k_anonymity(table, **arguments)


# ---------------------------------------------------------------- validation and bundling

def test_bad_arguments_are_rejected_without_values():
    real = pa.table({"a": [1, 2], "s": ["SECRET_1", "SECRET_2"]})
    with pytest.raises(ParameterError, match=re.escape("columns ('s') must be a column of the synthetic table")):
        exact_match_share(real, pa.table({"a": [1]}), ["a", "s"])
    with pytest.raises(ParameterError, match=re.escape("columns must not repeat a column")):
        exact_match_share(real, real, ["a", "a"])
    with pytest.raises(ParameterError, match=re.escape("the synthetic table must have at least 1 row")):
        exact_match_share(real, real.slice(0, 0), ["a"])
    with pytest.raises(ParameterError, match=re.escape("the real table must have at least 2 rows")):
        closest_record_distances(real.slice(0, 1), real, ["a"])
    with pytest.raises(ParameterError, match=re.escape("sample (0) must be a positive integer")):
        closest_record_distances(real, real, ["a"], sample=0)
    with pytest.raises(ParameterError, match="compatible types") as caught:
        exact_match_share(real, pa.table({"a": [1], "s": pa.array([[1]])}), ["s"])
    assert "SECRET" not in str(caught.value)


def _leaves(value: object) -> list[object]:
    if isinstance(value, dict):
        assert all(isinstance(key, str) for key in value)
        return [leaf for item in value.values() for leaf in _leaves(item)]
    return [value]


def test_report_holds_numbers_only_and_no_canary():
    real = pa.table({
        "age": [25, 31, 47, 52, 25, 38],
        "city": ["Oslo", "CANARY_Q9", "Bergen", None, "Oslo", "Bergen"],
        "score": [0.5, None, 2.0, 3.5, 0.5, 1.0],
    })
    synthetic = pa.table({"age": [25, 47, 60], "city": ["Oslo", "CANARY_Q9", None], "score": [0.5, 2.5, None]})
    report = disclosure_risk(real, synthetic, real.column_names, ["age", "city"], numeric_bins={"age": [30, 40, 50]})
    assert isinstance(report, RiskReport)
    text = json.dumps(report.to_dict())
    assert "CANARY" not in text and "Oslo" not in text
    for leaf in _leaves(report.to_dict()):
        assert type(leaf) in (int, float) and math.isfinite(leaf)
    assert json.loads(text)["exact_match_share"] == pytest.approx(1 / 3)


# ---------------------------------------------------------------- properties

def _reference_dcr(real: pa.Table, synthetic: pa.Table, columns: list[str]) -> tuple[list[float], list[float]]:
    """Brute-force Gower nearest distances (synthetic -> real, real -> other real)."""

    def clean(value: object) -> object:
        return None if isinstance(value, float) and math.isnan(value) else value

    real_rows = [[clean(r[c]) for c in columns] for r in real.to_pylist()]
    syn_rows = [[clean(r[c]) for c in columns] for r in synthetic.to_pylist()]
    ranges: list[tuple[float, float] | None] = []
    for j, c in enumerate(columns):
        numeric = pa.types.is_integer(real.column(c).type) or pa.types.is_floating(real.column(c).type)
        values = [row[j] for row in real_rows if row[j] is not None]
        ranges.append((min(values), max(values)) if numeric and values and max(values) > min(values) else None)

    def distance(a: list[object], b: list[object]) -> float:
        total = 0.0
        for (x, y, bounds) in zip(a, b, ranges, strict=True):
            if x is None or y is None:
                total += float((x is None) != (y is None))
            elif bounds is not None:
                low, high = bounds
                total += abs(min(max(x, low), high) - min(max(y, low), high)) / (high - low)
            else:
                total += float(x != y)
        return total / len(columns)

    to_real = [min(distance(s, r) for r in real_rows) for s in syn_rows]
    baseline = [min(distance(r, o) for j, o in enumerate(real_rows) if j != i) for i, r in enumerate(real_rows)]
    return to_real, baseline


_ints = st.one_of(st.none(), st.integers(-5, 5))
_floats = st.one_of(st.none(), st.just(float("nan")), st.floats(-100, 100, allow_nan=False))
_strings = st.one_of(st.none(), st.sampled_from(["a", "b", "c"]))


@st.composite
def _table_pair(draw: st.DrawFn) -> tuple[pa.Table, pa.Table]:
    def table(rows: int) -> pa.Table:
        return pa.table({
            "i": pa.array(draw(st.lists(_ints, min_size=rows, max_size=rows)), pa.int64()),
            "f": pa.array(draw(st.lists(_floats, min_size=rows, max_size=rows)), pa.float64()),
            "s": pa.array(draw(st.lists(_strings, min_size=rows, max_size=rows)), pa.string()),
        })

    return table(draw(st.integers(2, 9))), table(draw(st.integers(1, 9)))


@settings(max_examples=60, deadline=None)
@given(_table_pair(), st.sampled_from([["i"], ["f"], ["s"], ["i", "s"], ["i", "f", "s"]]))
def test_dcr_matches_brute_force_and_stays_in_unit_interval(pair, columns):
    real, synthetic = pair
    report = closest_record_distances(real, synthetic, columns)
    for value in (report.synthetic_median, report.synthetic_p05, report.real_median, report.real_p05):
        assert 0.0 <= value <= 1.0
    to_real, baseline = _reference_dcr(real, synthetic, columns)
    assert report.synthetic_median == pytest.approx(float(np.median(to_real)), abs=1e-12)
    assert report.synthetic_p05 == pytest.approx(float(np.quantile(to_real, 0.05)), abs=1e-12)
    assert report.real_median == pytest.approx(float(np.median(baseline)), abs=1e-12)
    assert report.real_p05 == pytest.approx(float(np.quantile(baseline, 0.05)), abs=1e-12)
    assert 0.0 <= report.share_closer_than_real_p05 <= 1.0


@settings(max_examples=60, deadline=None)
@given(_table_pair())
def test_shares_are_in_unit_interval_and_self_match_is_total(pair):
    real, synthetic = pair
    columns = ["i", "f", "s"]
    share = exact_match_share(real, synthetic, columns)
    assert 0.0 <= share <= 1.0
    expected = {tuple(None if isinstance(v, float) and math.isnan(v) else v for v in row.values())
                for row in real.to_pylist()}
    hits = [tuple(None if isinstance(v, float) and math.isnan(v) else v for v in row.values()) in expected
            for row in synthetic.to_pylist()]
    assert share == pytest.approx(sum(hits) / len(hits))
    assert exact_match_share(real, real, columns) == 1.0
    report = k_anonymity(synthetic, columns, numeric_bins={"f": [-50, 0, 50]})
    assert 1 <= report.k <= report.rows == synthetic.num_rows and 1 <= report.classes <= report.rows
    shares = list(report.small_class_shares.values())
    assert all(0.0 <= s <= 1.0 for s in shares) and shares == sorted(shares)


# ---------------------------------------------------------------- Adult

@pytest.fixture(scope="module")
def adult() -> pa.Table:
    return pq.read_table(ADULT)


def test_adult_bootstrap_copies_are_flagged(adult):
    rng = np.random.default_rng(11)
    bootstrap = adult.take(rng.integers(0, adult.num_rows, adult.num_rows))
    share = exact_match_share(adult, bootstrap, adult.column_names)
    assert share == 1.0  # every resampled row is a real row
    report = disclosure_risk(adult, bootstrap, adult.column_names, ADULT_QIS, numeric_bins=AGE_BANDS)
    assert report.dcr.synthetic_median == 0.0 and report.dcr.share_closer_than_real_p05 == 1.0
    assert report.dcr.real_median > 0.0
    assert isinstance(report.dcr, DCRReport) and isinstance(report.k_anonymity.real, KAnonymityReport)
    assert report.k_anonymity.real.k == 1 and report.k_anonymity.real.rows == adult.num_rows


def test_adult_column_shuffle_is_not_flagged(adult):
    rng = np.random.default_rng(12)
    shuffled = pa.table({c: adult.column(c).take(rng.permutation(adult.num_rows)) for c in adult.column_names})
    report = disclosure_risk(adult, shuffled, adult.column_names, ADULT_QIS, numeric_bins=AGE_BANDS)
    assert report.exact_match_share < 0.01
    assert report.dcr.synthetic_median > 5 * report.dcr.real_median
    assert report.dcr.share_closer_than_real_p05 < 0.05


def test_adult_canary_never_reaches_the_report(adult):
    city = adult.column("native-country").to_pylist()
    city[17] = "CANARY_Q9"
    real = adult.set_column(adult.column_names.index("native-country"), "native-country", pa.array(city))
    synthetic = real.slice(0, 5000)
    report = disclosure_risk(real, synthetic, real.column_names, ADULT_QIS, numeric_bins=AGE_BANDS, sample=500)
    text = json.dumps(report.to_dict())
    assert "CANARY_Q9" not in text and "United-States" not in text


def test_real_rows_for_the_dcr_are_chosen_by_the_secure_source(monkeypatch):
    import secrets

    import dprelease.quality.risk

    calls = []

    def spy(size):
        calls.append(size)
        return secrets.token_bytes(size)

    monkeypatch.setattr(dprelease.quality.risk.closest_record_distances, "__kwdefaults__",
                        {**dprelease.quality.risk.closest_record_distances.__kwdefaults__, "random_bytes": spy})
    rng = np.random.default_rng(5)
    real = pa.table({"x": rng.normal(size=300)})
    closest_record_distances(real, pa.table({"x": rng.normal(size=20)}), ["x"], sample=50)
    assert calls == [8 * 300]  # one secure key per real row; no seeded generator chooses among them


def test_the_prefilter_of_exact_matching_keeps_every_possible_match():
    from dprelease.quality.risk import _possible_matches

    real = pa.table({"a": pa.array([1, 2, None, 4], pa.int64()), "s": pa.array(["x", None, "y", "x"]),
                     "f": pa.array([0.5, float("nan"), 1.0, 2.0])})
    synthetic = pa.table({"a": pa.array([1, None, 9], pa.int64()), "s": pa.array(["x", "y", None]),
                          "f": pa.array([0.5, 1.0, 3.0])})
    kept = _possible_matches(real, synthetic, ["a", "s", "f"], {})
    # Row 1 (a=2) and row 3 (a=4) cannot match; the null in `a` matches a null; floats are not filtered.
    assert kept.column("a").to_pylist() == [1, None]
    assert exact_match_share(real.to_batches(max_chunksize=1), synthetic, ["a", "s", "f"]) == pytest.approx(2 / 3)
    other_type = synthetic.set_column(0, "a", pa.array([1, None, 9], pa.int32()))
    assert _possible_matches(real, other_type, ["a"], {}).num_rows == 4  # types differ: no filter on `a`


def test_a_subnormal_range_does_not_overflow():
    """Hypothesis found it: a real range of 2.2e-313 made the scaling overflow (an error under -W error)."""
    real = pa.table({"f": pa.array([None, None, 0.0, 2.2250738585e-313])})
    synthetic = pa.table({"f": pa.array([None, 1.0])})
    report = closest_record_distances(real, synthetic, ["f"])
    assert 0.0 <= report.synthetic_median <= 1.0 and 0.0 <= report.real_median <= 1.0
