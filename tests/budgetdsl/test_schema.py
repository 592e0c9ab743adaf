"""The JSON Schema: committed copy is fresh, and it accepts the example plans as editors see them."""

import pathlib

import jsonschema
import pytest
import yaml

from budgetdsl.commands.schema import schema_text

REPO = pathlib.Path(__file__).resolve().parents[2]
SCHEMA_FILE = REPO / "budgetdsl.schema.json"


def test_committed_schema_is_fresh():
    assert SCHEMA_FILE.read_text() == schema_text(), (
        "budgetdsl.schema.json is stale: run `budgetdsl schema > budgetdsl.schema.json`")


@pytest.fixture(scope="module")
def validator():
    import json
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


EXAMPLES = sorted((REPO / "plans").rglob("*.yaml"))  # the plans and the base fragments they extend


def test_the_examples_hold_plans_and_fragments():
    texts = [p.read_text() for p in EXAMPLES]
    assert any("\nfragment: true" in t for t in texts) and any("\nextends:" in t for t in texts)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(REPO / "plans")))
def test_example_plans_validate_against_the_schema(validator, path):
    errors = list(validator.iter_errors(yaml.safe_load(path.read_text())))
    assert errors == []


WHOLE = {"name": "run", "model": {"params": "7B", "seq_len": 4096},
         "hardware": {"gpu": "H100-SXM5-80GB", "gpus": 64},
         "target": {"min_tokens": "140B"}, "noise": {"b_crit": "2M"}}


def errors_of(validator, doc) -> list[str]:
    return sorted(e.message for e in validator.iter_errors(doc))


def test_a_plan_without_extends_needs_every_whole_plan_key(validator):
    assert errors_of(validator, WHOLE) == []
    for key in ("name", "model", "hardware", "target", "noise"):
        doc = {k: v for k, v in WHOLE.items() if k != key}
        assert errors_of(validator, doc) == [f"'{key}' is a required property"]
    assert errors_of(validator, {**WHOLE, "hardware": {"gpu": "H100-SXM5-80GB"}}) == [
        "'gpus' is a required property"]
    assert errors_of(validator, {**WHOLE, "fragment": False, "hardware": {"gpu": "H100-SXM5-80GB"}}) == [
        "'gpus' is a required property"]


def test_a_plan_that_extends_a_base_takes_whole_plan_keys_from_it(validator, tmp_path):
    from budgetdsl.plan.loader import load_plan

    child = {"name": "child", "extends": "base/a100-cluster.yaml", "model": {"params": "7B"},
             "hardware": {"mfu": 0.5}, "target": {"min_tokens": "140B"}, "noise": {"b_crit": "2M"}}
    assert errors_of(validator, child) == []  # no hardware.gpus, no model.seq_len: the base's
    assert errors_of(validator, {"extends": "base.yaml"}) == []
    # and the loader agrees: such a file is a valid plan once merged with its base
    (tmp_path / "base").mkdir()
    (tmp_path / "base/a100-cluster.yaml").write_text(
        "fragment: true\nhardware: {gpu: A100-SXM4-80GB, gpus: 64}\nmodel: {seq_len: 2048}\n")
    (tmp_path / "child.yaml").write_text(yaml.safe_dump(child))
    assert load_plan(tmp_path / "child.yaml").hardware.gpus == 64


def test_a_fragment_needs_no_whole_plan_key_but_its_values_are_checked(validator):
    assert errors_of(validator, {"fragment": True, "hardware": {"gpu": "H100-SXM5-80GB"}}) == []
    assert errors_of(validator, {"fragment": True, "hardware": {"gpu_count": 8}}) == [
        "Additional properties are not allowed ('gpu_count' was unexpected)"]
    assert errors_of(validator, {"fragment": True, "hardware": {"mfu": 2}}) != []
    assert errors_of(validator, {"fragment": "yes", "hardware": {}}) != []


def test_the_schema_and_the_loader_agree_on_what_a_whole_plan_needs(validator, tmp_path):
    """Every key the models require is required by the schema of a file without extends, and by
    nothing else: so the schema cannot drift from the loader when a key becomes required."""
    from budgetdsl.plan.diagnostics import PlanError
    from budgetdsl.plan.loader import load_plan

    for key in WHOLE:
        doc = {k: v for k, v in WHOLE.items() if k != key}
        path = tmp_path / f"no-{key}.yaml"
        path.write_text(yaml.safe_dump(doc))
        with pytest.raises(PlanError) as info:
            load_plan(path)
        loader_says = {d.message for d in info.value.diagnostics if d.code == "missing-key"}
        assert loader_says == {f"missing required key '{key}' in the top level"}
        assert errors_of(validator, doc) == [f"'{key}' is a required property"]


def test_the_schema_rejects_unknown_keys(validator):
    doc = yaml.safe_load((REPO / "plans/llama2-7b.yaml").read_text())
    doc["hardware"]["gpu_count"] = 8
    assert any("gpu_count" in e.message for e in validator.iter_errors(doc))


def test_every_field_is_described():
    import json
    schema = json.loads(schema_text())
    models = {"Plan": schema, **schema["$defs"]}

    def described(prop):  # a section's description is its model's, behind the $ref
        ref = prop.get("$ref", "").rpartition("/")[2]
        return "description" in prop or "description" in schema["$defs"].get(ref, {})

    undocumented = [f"{name}.{key}" for name, d in models.items()
                    for key, prop in d.get("properties", {}).items() if not described(prop)]
    assert undocumented == []


def test_every_quantity_field_is_annotated_with_the_type_it_validates():
    """A quantity field states its type twice: the annotation (what type checkers and readers see)
    and the `_quantity` flags (what the validator and the schema accept). They must agree."""
    import typing

    from pydantic import BaseModel

    from budgetdsl.plan.model import Plan, QuantitySpec

    def sections(model):
        yield model
        for info in model.model_fields.values():
            for arg in (info.annotation, *typing.get_args(info.annotation)):
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    yield from sections(arg)
                for inner in typing.get_args(arg):  # list[Stage]
                    if isinstance(inner, type) and issubclass(inner, BaseModel):
                        yield from sections(inner)

    checked = 0
    for model in set(sections(Plan)):
        for name, info in model.model_fields.items():
            spec = next((m for m in info.metadata if isinstance(m, QuantitySpec)), None)
            if spec is None:
                continue
            expected = {int if spec.integer else float}
            if spec.auto:
                expected.add(typing.Literal["auto"])
            if info.default is None:
                expected.add(type(None))
            assert set(typing.get_args(info.annotation) or [info.annotation]) == expected, (model, name)
            checked += 1
    assert checked > 40
