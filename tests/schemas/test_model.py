from __future__ import annotations

import re
import shutil
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from dprelease.dp.accounting.budget import ZCDPBudget, approx_from_zcdp
from dprelease.dp.accounting.conversions import approx_from_zcdp_cks
from dprelease.schemas.model import SchemaError
from dprelease.schemas.spec import load_spec
from dprelease.schemas.table import load_schema

ADULT = Path(__file__).resolve().parents[2] / "examples" / "adult"


def test_adult_schema_declares_15_columns_from_public_documentation():
    schema = load_schema(ADULT / "schema.yaml")
    assert len(schema.columns) == 15
    assert [c.name for c in schema.columns if c.nullable] == ["workclass", "occupation", "native-country"]
    assert len(schema.column("native-country").categories) == 41
    assert {c.name for c in schema.columns if c.numeric and not c.has_public_bounds} == {
        "fnlwgt", "capital-gain", "capital-loss"}
    assert schema.column("education-num").derived_from == "education"


def test_adult_spec_budget_is_exact_zcdp():
    spec = load_spec(ADULT / "release-pairs.yaml")
    assert spec.definition == "zcdp" and spec.delta == Fraction(1, 10**9)
    assert isinstance(spec.budget, ZCDPBudget)
    assert approx_from_zcdp_cks(spec.budget, spec.delta).epsilon <= 1
    # The tighter CKS conversion buys a larger rho than Bun & Steinke's for the same (epsilon, delta).
    assert approx_from_zcdp(spec.budget, spec.delta).epsilon > 1
    assert sum(spec.allocation.values()) == 1


def _schema(tmp_path, columns, **extra):
    doc = {"table": "t", "columns": columns, **extra}
    path = tmp_path / "schema.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"age": {"type": "int", "min": 90, "max": 17}}, "columns.age: min (90) must be below max (17)"),
        ({"age": {"type": "int", "min": 1}}, "columns.age: declare both min and max"),
        ({"age": {"type": "text"}}, "columns.age.type: ('text') must be one of int, float, category"),
        ({"age": {"type": "int"}}, "columns.age: a numeric column without public min/max needs a search_range"),
        ({"age": {"type": "int", "min": 0, "max": float("nan")}}, "columns.age.max: (nan) must be a finite number"),
        ({"s": {"type": "category", "categories": []}}, "columns.s.categories: must be a non-empty list"),
        ({"s": {"type": "category", "categories": ["a", "a"]}}, "columns.s.categories[1]: duplicates"),
        ({"s": {"type": "category", "categories": ["é", "e\u0301"]}}, "columns.s.categories[1]: duplicates"),
        ({"s": {"type": "category", "categories": ["a"], "min": 1}}, "columns.s.min: applies to numeric"),
        ({"s": {"type": "category", "categories": ["a"], "colour": 1}}, "columns.s: unknown key 'colour'"),
        ({"x": {"type": "float", "min": 0, "max": 1, "bins": {"count": 0}}}, "columns.x.bins.count: (0) must be"),
    ],
)
def test_schema_errors_name_the_file_key_and_rule(tmp_path, columns, message):
    path = _schema(tmp_path, columns)
    with pytest.raises(SchemaError, match=re.escape(message)) as info:
        load_schema(path)
    assert str(path) in str(info.value)


def test_derived_column_must_map_every_category(tmp_path):
    path = _schema(tmp_path, {"e": {"type": "category", "categories": ["a", "b"]},
                              "n": {"type": "int", "min": 1, "max": 2, "derived_from": "e", "mapping": {"a": 1}}})
    with pytest.raises(SchemaError, match="must give exactly one value for every category of e"):
        load_schema(path)


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(SchemaError, match="file not found"):
        load_schema(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("table: [unclosed\n", encoding="utf-8")
    with pytest.raises(SchemaError, match="not valid YAML"):
        load_schema(bad)


def _spec(tmp_path, **changes):
    for name in ("schema.yaml", "adult.parquet"):
        if not (tmp_path / name).exists():
            shutil.copy(ADULT / name, tmp_path / name)
    doc = yaml.safe_load((ADULT / "release-pairs.yaml").read_text(encoding="utf-8"))
    doc.update(changes)
    path = tmp_path / "release.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"budget": {"epsilon": 0, "delta": 1e-9}}, "budget: epsilon (0) must be positive"),
        ({"budget": {"epsilon": -1, "delta": 1e-9}}, "budget: epsilon (-1) must be positive"),
        ({"budget": {"epsilon": ".nan", "delta": 1e-9}}, "budget: epsilon ('.nan') must be a number"),
        ({"budget": {"epsilon": True, "delta": 1e-9}}, "budget: epsilon (a boolean) must be a number"),
        ({"budget": {"epsilon": "one", "delta": 1e-9}}, "budget: epsilon ('one') must be a number"),
        ({"budget": {"epsilon": 1, "delta": 1}}, "budget: delta (1) must be in (0, 1)"),
        ({"budget": {"epsilon": 1, "delta": -0.5}}, "budget: delta (-0.5) must be in (0, 1)"),
        ({"budget": {"epsilon": 5, "delta": 1e-9}}, "budget: must not exceed lifetime_budget"),
        ({"allocation": {"bounds": 0.5, "one_way": 0.3, "two_way": 0.3}},
         "shares sum to 1.1; they must sum to at most 1"),
        ({"allocation": {"bounds": 0, "one_way": 0.5, "two_way": 0.5}}, "allocation.bounds: must be positive: fnlwgt"),
        ({"two_way": [["age", "age"]]}, "two_way[0]: must be a list of two different column names"),
        ({"two_way": [["age", "height"]]}, "two_way[0]: ('height') is not a declared column"),
        ({"two_way": [["education-num", "age"]]}, "is derived from another column"),
        ({"lifetime_budget": {"epsilon": 3}}, "lifetime_budget: must use the same definition and delta"),
        ({"two_way": "auto"}, "allocation: two_way: auto needs positive selection and two_way shares"),
        ({"allocation": {"bounds": 0.05, "one_way": 0.2, "selection": 0.1, "two_way": 0.6, "hierarchy": 0.05}},
         "allocation.selection: must be 0 or absent unless two_way or cliques is auto"),
        ({"two_way": "everything"}, "two_way: must be 'auto' or a list of column pairs"),
        ({"weighting": "sqrt"}, "weighting: ('sqrt') must be 'cells', 'balanced' or 'equal'"),
    ],
)
def test_spec_errors(tmp_path, changes, message):
    with pytest.raises(SchemaError, match=re.escape(message)):
        load_spec(_spec(tmp_path, **changes))


def test_allocation_shares_are_compared_exactly(tmp_path):
    # 0.05 + 0.55 + 0.3 + 0.1 is 1.0000000000000002 in floating point, exactly 1 as written.
    assert 0.05 + 0.55 + 0.3 + 0.1 > 1
    spec = load_spec(_spec(tmp_path, allocation={"bounds": 0.05, "one_way": 0.55, "two_way": 0.3, "hierarchy": 0.1}))
    assert sum(spec.allocation.values()) == 1


# --- hierarchies ---------------------------------------------------------------------------------------------

COUNTRY = {"type": "category", "nullable": True, "categories": ["US", "CA", "MX", "FR"]}


def _geo(parents, levels=("region",), column="country", **more):
    columns = {"country": COUNTRY, "sex": {"type": "category", "categories": ["F", "M"]}, **more}
    return {"columns": columns, "hierarchies": {"geo": {"column": column, "levels": list(levels), "parents": parents}}}


def test_adult_schema_declares_region_over_native_country():
    schema = load_schema(ADULT / "schema.yaml")
    (geo,) = schema.hierarchies
    assert (geo.name, geo.column, geo.levels) == ("geography", "native-country", ("region",))
    assert len(geo.parents[0]) == 42  # 41 countries and null, each with one region
    assert geo.labels[0][geo.parents[0][-1]] == "Unknown"


def test_three_level_hierarchy_by_prefix_and_mapping(tmp_path):
    tracts = [f"S{s}C{c}T{t}" for s in range(2) for c in range(3) for t in range(4)]
    doc = {"columns": {"tract": {"type": "category", "categories": tracts}},
           "hierarchies": {"geo": {"column": "tract", "levels": ["state", "county"],
                                   "parents": {"state": {"prefix": 2}, "county": {"prefix": 4}}}}}
    schema = load_schema(_schema(tmp_path, **doc))
    (geo,) = schema.hierarchies
    assert geo.labels == (("S0", "S1"), tuple(f"S{s}C{c}" for s in range(2) for c in range(3)))
    assert geo.parents[0] == (0, 0, 0, 1, 1, 1)
    assert geo.parents[1] == tuple(i // 4 for i in range(24))


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (_geo({"region": {"NA": ["US", "CA", "MX", None]}}), "child 'FR' has no parent"),
        (_geo({"region": {"NA": ["US", "CA", "MX"], "EU": ["FR", "MX", None]}}), "child 'MX' has two parents"),
        (_geo({"region": {"NA": ["US", "CA", "MX", "XX"], "EU": ["FR", None]}}),
         "child 'XX' is not among the declared categories of the column"),
        (_geo({"region": {"NA": ["US", "CA", "MX"], "EU": ["FR"]}}), "child null has no parent"),
        (_geo({"region": {"NA": ["US"]}}, levels=("region", "country")), "not the column itself (a cycle)"),
        (_geo({"region": {"A": ["B"]}}, levels=("region", "region")), "must name each level once"),
        (_geo({"sex": {"A": ["B"]}}, levels=("sex",)), "('sex') is a declared column"),
        (_geo({"region": {"NA": ["US"]}}, column="sex"), "hierarchies.geo.parents.region.NA: child 'US' is not"),
        (_geo({"region": {"NA": ["US"]}}, column="nope"), "hierarchies.geo.column: ('nope') is not a declared column"),
        (_geo({"region": {"prefix": 5}}), "hierarchies.geo.parents.region.prefix: (5) must be shorter"),
        (_geo({"region": {"NA": []}}), "hierarchies.geo.parents.region.NA: must list at least one child"),
        (_geo({}), "hierarchies.geo.parents: missing required key 'region'"),
    ],
)
def test_hierarchy_errors(tmp_path, doc, message):
    with pytest.raises(SchemaError, match=re.escape(message)):
        load_schema(_schema(tmp_path, **doc))


def test_a_repeated_yaml_key_is_an_error_not_a_silent_overwrite(tmp_path):
    # PyYAML keeps the last of two equal keys: a node listed twice would silently lose a parent.
    path = tmp_path / "schema.yaml"
    path.write_text("table: t\ncolumns:\n  a: {type: category, categories: [x]}\n  a: {type: int, min: 0, max: 1}\n")
    with pytest.raises(SchemaError, match=re.escape("not valid YAML at line 4: key 'a' is repeated in one mapping")):
        load_schema(path)


def test_hierarchy_split_and_allocation(tmp_path):
    spec = load_spec(_spec(tmp_path, hierarchy_split={"geography": {"region": 1, "native-country": 3}}))
    assert spec.hierarchy_split == {"geography": (Fraction(1), Fraction(3))}
    from dprelease.schemas.plan import plan_release

    plan = plan_release(spec, "r", 1)
    levels = [m for m in plan.measurements if m.stage == "hierarchy"]
    assert [m.query for m in levels] == ["hierarchy(geography: region)", "hierarchy(geography: native-country)"]
    assert levels[1].budget.amount == 3 * levels[0].budget.amount
    assert levels[0].budget.amount + levels[1].budget.amount == plan.stages["hierarchy"].amount
    with pytest.raises(SchemaError, match=re.escape("hierarchy_split.geography.region: (0) must be positive")):
        load_spec(_spec(tmp_path, hierarchy_split={"geography": {"region": 0, "native-country": 1}}))
    with pytest.raises(SchemaError, match=re.escape("allocation.hierarchy: must be positive: the schema declares")):
        load_spec(_spec(tmp_path, allocation={"bounds": 0.05, "one_way": 0.35, "two_way": 0.6}))


def test_two_hierarchy_columns_joined_by_marginals_are_refused_before_any_data(tmp_path):
    from dprelease.schemas.plan import plan_release

    doc = yaml.safe_load((ADULT / "schema.yaml").read_text())
    doc["hierarchies"]["work"] = {"column": "occupation", "levels": ["sector"],
                                  "parents": {"sector": {"all": [*doc["columns"]["occupation"]["categories"], None]}}}
    (tmp_path / "schema.yaml").write_text(yaml.safe_dump(doc))
    spec = load_spec(_spec(tmp_path))
    with pytest.raises(SchemaError, match="joins the hierarchy columns"):
        plan_release(spec, "r", 1)


def test_auto_spec_plans_a_private_selection_before_any_data(tmp_path):
    from dprelease.schemas.plan import plan_release

    for name in ("schema.yaml", "adult.parquet", "release-auto.yaml"):
        shutil.copy(ADULT / name, tmp_path / name)
    spec = load_spec(tmp_path / "release-auto.yaml")
    assert spec.auto_pairs and spec.two_way == ()
    plan = plan_release(spec, "r", 1)
    assert plan.selection is not None and plan.selection.rounds == 13
    assert len(plan.selection.candidates) == 14 * 13 // 2
    # the exponential mechanism is booked at epsilon²/8 (bounded range): the share buys that epsilon, rounded down
    selection = plan.stages["selection"].amount
    assert selection * Fraction(999, 1000) < plan.selection.run_budget.epsilon ** 2 / 8 * 13 <= selection
    assert not [m for m in plan.measurements if m.stage == "two_way"]  # planned once the pairs are chosen
    assert plan.total == spec.budget
    assert any("rounds of the exponential mechanism" in line for line in plan.lines())


def test_cells_weighting_gives_larger_marginals_more_budget(tmp_path):
    from dprelease.schemas.plan import plan_release

    plan = plan_release(load_spec(_spec(tmp_path)), "r", 1)
    by_query = {m.query: m.budget.amount for m in plan.measurements}
    assert by_query["marginal(age)"] > by_query["marginal(sex)"]  # at most 75 cells (a public bound) against 2
    ratio = by_query["marginal(age)"] / by_query["marginal(sex)"]
    assert abs(float(ratio) - (75 / 2) ** (2 / 3)) < 0.01
    equal = plan_release(load_spec(_spec(tmp_path, weighting="equal")), "r", 1)
    assert len({m.budget.amount for m in equal.measurements if m.stage == "one_way"}) == 1
    balanced = plan_release(load_spec(_spec(tmp_path, weighting="balanced")), "r", 1)
    by_query = {m.query: m.budget.amount for m in balanced.measurements}
    ratio = by_query["marginal(age)"] / by_query["marginal(sex)"]
    assert abs(float(ratio) - (75 / 2) ** (1 / 3)) < 0.01  # half the power of cells
    one_way = sum(m.budget.amount for m in balanced.measurements if m.stage == "one_way")
    assert one_way == balanced.stages["one_way"].amount  # the stage is split exactly


def test_privacy_unit_id_column(tmp_path):
    columns = {"tenure": {"type": "category", "categories": ["own", "rent"]}}
    schema = load_schema(_schema(tmp_path, columns, privacy_unit={"id_column": "household", "max_rows": 3}))
    assert (schema.privacy_unit.id_column, schema.privacy_unit.max_rows) == ("household", 3)
    assert "at most 3 rows kept per id" in schema.privacy_unit.describe()
    message = "privacy_unit.id_column: ('tenure') must not be a declared column"
    with pytest.raises(SchemaError, match=re.escape(message)):
        load_schema(_schema(tmp_path, columns, privacy_unit={"id_column": "tenure", "max_rows": 3}))
    with pytest.raises(SchemaError, match=re.escape("privacy_unit.max_rows: (0) must be a positive whole number")):
        load_schema(_schema(tmp_path, columns, privacy_unit={"id_column": "household", "max_rows": 0}))


def test_a_missing_or_ill_typed_id_column_is_a_structural_problem():
    import pyarrow as pa

    from dprelease.quality.validation import structural_problems
    from dprelease.schemas.model import Column, PrivacyUnit, TableSchema

    schema = TableSchema("t", (Column("tenure", "category", categories=("own",)),), PrivacyUnit("household", 2))
    missing = structural_problems(schema, pa.schema([("tenure", pa.string())]))
    assert [str(p) for p in missing] == [
        "column 'household': must be present exactly once (the privacy-unit id column)"]
    floats = structural_problems(schema, pa.schema([("tenure", pa.string()), ("household", pa.float64())]))
    assert [str(p) for p in floats] == ["column 'household': must be integers or strings (the privacy-unit id column)"]


def test_the_adult_example_plans_a_private_junction_tree(tmp_path):
    from dprelease.schemas.plan import plan_release

    spec = load_spec(ADULT / "release.yaml")
    assert spec.auto_cliques and spec.root is None and spec.clique_bins == 8
    plan = plan_release(spec, "r", 1)
    assert plan.total == spec.budget and plan.cliques is not None
    c = plan.cliques
    assert (c.tree_rounds, c.parent_rounds, len(c.candidates)) == (13, 12, 91)
    selection = plan.stages["selection"].amount
    booked = c.tree_budget.epsilon ** 2 / 8 * 13 + c.parent_budget.epsilon ** 2 / 8 * 12  # bounded range
    assert selection * Fraction(999, 1000) < booked <= selection
    assert c.clique_budget.amount * 13 == plan.stages["cliques"].amount
    assert any("second parents" in line for line in plan.lines())


def test_root_auto_takes_one_more_round_from_the_trees_half(tmp_path):
    from dprelease.schemas.plan import plan_release

    for name in ("schema.yaml", "adult.parquet"):
        shutil.copy(ADULT / name, tmp_path / name)
    doc = yaml.safe_load((ADULT / "release.yaml").read_text(encoding="utf-8"))
    doc["root"] = "auto"
    (tmp_path / "release.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    spec = load_spec(tmp_path / "release.yaml")
    plan = plan_release(spec, "r", 1)
    c = plan.cliques
    assert c is not None and c.root == "auto" and c.root_budget == c.tree_budget and c.parent_budget is not None
    selection = plan.stages["selection"].amount
    booked = c.tree_budget.epsilon ** 2 / 8 * 14 + c.parent_budget.epsilon ** 2 / 8 * 12  # 13 tree rounds + the root
    assert selection * Fraction(999, 1000) < booked <= selection
    assert any("chosen privately among the tree's leaves" in line for line in plan.lines())


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"two_way": [["age", "sex"]]}, "two_way: must be absent with cliques: auto"),
        ({"cliques": "all"}, "cliques: must be 'auto'"),
        ({"root": "education-num"}, "root: ('education-num') must be a measured column"),
        ({"clique_bins": 1}, "clique_bins: (1) must be a whole number from 2 to 64"),
        ({"allocation": {"bounds": 0.05, "one_way": 0.3, "cliques": 0.6, "hierarchy": 0.05}},
         "cliques: auto needs positive selection and cliques shares"),
        ({"cross_pairs": 4}, "cross_pairs: needs a positive allocation.cross"),
        ({"allocation": {"bounds": 0.05, "one_way": 0.4, "selection": 0.04, "cliques": 0.36, "cross": 0.1,
                         "hierarchy": 0.05}, "cross_pairs": 0}, "cross_pairs: must be a whole number from 1 to 64"),
        ({"allocation": {"bounds": 0.05, "one_way": 0.4, "selection": 0.04, "cliques": 0.36, "cross": 0.1,
                         "hierarchy": 0.05}, "cross_pairs": True}, "cross_pairs: must be a whole number from 1 to 64"),
        ({"allocation": {"bounds": 0.05, "one_way": 0.86, "cross": 0.04, "hierarchy": 0.05}, "cliques": None,
          "clique_bins": None},
         "allocation.cross: applies to cliques: auto only"),
    ],
)
def test_cliques_spec_errors(tmp_path, changes, message):
    for name in ("schema.yaml", "adult.parquet"):
        shutil.copy(ADULT / name, tmp_path / name)
    doc = yaml.safe_load((ADULT / "release.yaml").read_text(encoding="utf-8"))
    doc.update(changes)
    doc = {k: v for k, v in doc.items() if v is not None}  # None: the key dropped
    (tmp_path / "release.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(SchemaError, match=re.escape(message)):
        load_spec(tmp_path / "release.yaml")


def test_root_and_bins_apply_to_cliques_only(tmp_path):
    with pytest.raises(SchemaError, match=re.escape("root: applies to cliques: auto only")):
        load_spec(_spec(tmp_path, root="age"))


def test_the_acs_example_schema_loads_plans_and_matches_its_file():
    from dprelease.schemas.plan import plan_release
    from dprelease.tasks.ingest import check_structure

    example = Path(__file__).resolve().parents[2] / "examples" / "acs-ma2019"
    spec = load_spec(example / "release.yaml")
    assert len(spec.schema.columns) == 24 and spec.schema.hierarchies[0].column == "PUMA"
    assert check_structure(spec.data, spec.schema) == []
    plan = plan_release(spec, "r", 0)
    assert plan.cliques is not None and plan.total.amount > 0


def test_root_auto_is_refused_when_a_column_is_named_auto(tmp_path):
    # 'auto' would be ambiguous between the private choice and the column of that name.
    schema = yaml.safe_load((ADULT / "schema.yaml").read_text(encoding="utf-8"))
    schema["columns"]["auto"] = schema["columns"].pop("sex")
    schema["quasi_identifiers"] = ["auto" if c == "sex" else c for c in schema["quasi_identifiers"]]
    (tmp_path / "schema.yaml").write_text(yaml.safe_dump(schema, sort_keys=False), encoding="utf-8")
    shutil.copy(ADULT / "adult.parquet", tmp_path / "adult.parquet")
    doc = yaml.safe_load((ADULT / "release.yaml").read_text(encoding="utf-8"))
    doc["root"] = "auto"
    (tmp_path / "release.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(SchemaError, match=re.escape("root: 'auto' is ambiguous: a column is named auto")):
        load_spec(tmp_path / "release.yaml")
    doc["root"] = "age"  # the same schema with a public root loads
    (tmp_path / "release.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    assert load_spec(tmp_path / "release.yaml").root == "age"


def test_cross_pairs_default_to_eight_and_plan_their_stage(tmp_path):
    from dprelease.schemas.plan import plan_release

    for name in ("schema.yaml", "adult.parquet"):
        shutil.copy(ADULT / name, tmp_path / name)
    doc = yaml.safe_load((ADULT / "release.yaml").read_text(encoding="utf-8"))
    doc["allocation"] = {"bounds": 0.05, "one_way": 0.4, "selection": 0.04, "cliques": 0.36, "cross": 0.1,
                         "hierarchy": 0.05}
    (tmp_path / "release.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    plan = plan_release(load_spec(tmp_path / "release.yaml"), "r", 1)
    assert plan.cross is not None and plan.cross.rounds == 8 and "cross" in plan.stages
    assert any(line.startswith("    cross: up to 8 pairs") for line in plan.lines())
    del doc["allocation"]["cross"]
    (tmp_path / "release.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    plain = plan_release(load_spec(tmp_path / "release.yaml"), "r", 1)
    assert plain.cross is None and "cross" not in plain.stages


def test_the_adult_cross_example_plans_its_cross_stage_from_the_cliques_share():
    from dprelease.schemas.plan import plan_release

    plain, cross = (plan_release(load_spec(ADULT / name), "r", 1) for name in ("release.yaml", "release-cross.yaml"))
    assert cross.cross is not None and cross.cross.rounds == 8 and plain.cross is None
    assert cross.stages["cross"].amount + cross.stages["cliques"].amount == plain.stages["cliques"].amount
    assert cross.total == plain.total
