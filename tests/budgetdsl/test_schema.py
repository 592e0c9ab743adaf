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


@pytest.mark.parametrize("path", sorted((REPO / "plans").glob("*.yaml")), ids=lambda p: p.name)
def test_example_plans_validate_against_the_schema(validator, path):
    errors = list(validator.iter_errors(yaml.safe_load(path.read_text())))
    assert errors == []


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
