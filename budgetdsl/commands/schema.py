"""`budgetdsl schema`: print the JSON Schema of plan files, for editors and other validators."""

from __future__ import annotations

import argparse
import json
from typing import Any

from budgetdsl.io.exit_codes import ExitCode


def schema_text() -> str:
    """The committed `budgetdsl.schema.json`, byte for byte (a test keeps the copy fresh)."""
    from budgetdsl.plan.model import Plan

    schema = _required_only_of_whole_plans(Plan.model_json_schema())
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema",
              "$id": "https://budgetdsl.dev/budgetdsl.schema.json", **schema}
    return json.dumps(schema, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


PARTIAL = "Partial"  # prefix of a section's copy without required keys


def _required_only_of_whole_plans(schema: dict[str, Any]) -> dict[str, Any]:
    """The keys a whole plan needs are required only of a file that has no `extends` and is not a
    base fragment (`fragment: true`): what such a file leaves out, its base sets.

    The loader deep-merges mappings (sections, a GPU range) key by key, so in a file that extends
    another every section is partial too: its required keys move into a copy of the section
    without them (`PartialHardware`, ...). Items of a list (batch-schedule stages) replace the
    base's list whole, so they keep their required keys. Every other constraint (types, units,
    ranges, unknown keys) holds for every file. Which keys are required comes from the models.
    """
    defs = schema["$defs"]
    partial = {name for name, d in defs.items() if d.get("required")}

    def relax(node: Any, in_items: bool = False) -> Any:
        if isinstance(node, list):
            return [relax(x, in_items) for x in node]
        if not isinstance(node, dict):
            return node
        out = {}
        for key, value in node.items():
            if key == "$ref" and not in_items and value.rpartition("/")[2] in partial:
                value = f"#/$defs/{PARTIAL}{value.rpartition('/')[2]}"
            out[key] = relax(value, in_items or key == "items")
        return out

    whole = {key: prop for key, prop in schema["properties"].items() if relax(prop) != prop}
    for name in sorted(partial):
        section = relax({k: v for k, v in defs[name].items() if k != "required"})
        section["description"] = (f"{defs[name].get('description', name)} (In a file that extends "
                                  "another, or a base fragment: any of its keys.)")
        defs[f"{PARTIAL}{name}"] = section
    required = schema.pop("required")
    schema["properties"] = relax(schema["properties"])
    schema["if"] = {"anyOf": [
        {"required": ["extends"], "properties": {"extends": {"type": "string"}}},
        {"required": ["fragment"], "properties": {"fragment": {"const": True}}},
    ]}
    schema["else"] = {"required": required, "properties": whole}
    used = json.dumps({k: v for k, v in schema.items() if k != "$defs"}) + json.dumps(defs)
    for name in [n for n in defs if n.startswith(PARTIAL) and f'"#/$defs/{n}"' not in used]:
        del defs[name]  # e.g. a partial stage: list items are never partial
    return schema


def run(args: argparse.Namespace) -> int:
    print(schema_text(), end="")
    return ExitCode.OK


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schema", help="print the JSON Schema of plan files",
                       description="Print the JSON Schema of plan files. Point your editor at it, e.g. "
                       "with a first line '# yaml-language-server: $schema=../budgetdsl.schema.json'.")
    p.set_defaults(handler=run)
