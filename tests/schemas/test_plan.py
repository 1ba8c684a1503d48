from __future__ import annotations

import shutil
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from dprelease.dp.accounting.budget import PureBudget, ZCDPBudget
from dprelease.schemas.model import SchemaError
from dprelease.schemas.plan import plan_release
from dprelease.schemas.spec import load_spec

ADULT = Path(__file__).resolve().parents[2] / "examples" / "adult"


def test_adult_plan_splits_exactly_and_never_exceeds_the_total():
    spec = load_spec(ADULT / "release-pairs.yaml")
    plan = plan_release(spec, "r", 1)
    assert plan.total == spec.budget  # all four stages are used
    assert sum((b.amount for b in plan.stages.values()), Fraction(0)) == spec.budget.amount
    marginal_total = sum((m.budget.amount for m in plan.measurements), Fraction(0))
    bounds_total = sum((b.booked.amount for b in plan.bounds), Fraction(0))
    assert marginal_total == sum(plan.stages[s].amount for s in ("one_way", "two_way", "hierarchy"))
    assert bounds_total <= plan.stages["bounds"].amount
    assert len([m for m in plan.measurements if m.stage == "one_way"]) == 14  # education-num is derived
    assert all(isinstance(m.budget, ZCDPBudget) for m in plan.measurements)


def test_pure_plan_books_epsilon(tmp_path):
    for name in ("schema.yaml", "adult.parquet"):
        shutil.copy(ADULT / name, tmp_path / name)
    doc = yaml.safe_load((ADULT / "release-pairs.yaml").read_text(encoding="utf-8"))
    doc["budget"], doc["lifetime_budget"], doc["release_cap"] = {"epsilon": 1}, {"epsilon": 4}, {"epsilon": 2}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    plan = plan_release(load_spec(tmp_path / "r.yaml"), "r", 1)
    assert plan.total == PureBudget(Fraction(1))
    assert sum((b.booked.amount for b in plan.bounds), Fraction(0)) == Fraction(1, 20)
    assert all(isinstance(m.budget, PureBudget) for m in plan.measurements)


def test_cell_limit(tmp_path, monkeypatch):
    import dprelease.schemas.plan

    monkeypatch.setattr(dprelease.schemas.plan, "MAX_CELLS", 100)
    with pytest.raises(SchemaError, match="the limit is 100"):
        plan_release(load_spec(ADULT / "release-pairs.yaml"), "r", 1)


def test_the_printed_plan_is_aligned_in_columns():
    lines = plan_release(load_spec(ADULT / "release.yaml"), "r", 0).lines()
    stages = [line for line in lines if line.startswith("  stage ")]
    measured = [line for line in lines if line.startswith("    ") and "rho=" in line and ": " not in line]
    bounds = [line for line in lines if "AboveThreshold" in line]
    assert len(stages) >= 4 and len(measured) >= 14 and len(bounds) == 3
    assert len({line.index("rho=") for line in stages}) == 1
    # the query column and the budget column start at one offset on every bounds and measurement row
    assert len({line.index("rho=") for line in measured} | {line.index("2 x ") for line in bounds}) == 1
    assert len({len(line) - len(line[4:].split("  ", 1)[1].lstrip()) for line in measured + bounds}) == 1
