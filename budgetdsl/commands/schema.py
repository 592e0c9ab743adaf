"""`budgetdsl schema`: print the JSON Schema of plan files, for editors and other validators."""

from __future__ import annotations

import argparse
import json


def schema_text() -> str:
    """The committed `budgetdsl.schema.json`, byte for byte (a test keeps the copy fresh)."""
    from budgetdsl.plan_model import Plan

    schema = Plan.model_json_schema()
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema",
              "$id": "https://budgetdsl.dev/budgetdsl.schema.json", **schema}
    return json.dumps(schema, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


def run(args: argparse.Namespace) -> int:
    print(schema_text(), end="")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schema", help="print the JSON Schema of plan files",
                       description="Print the JSON Schema of plan files. Point your editor at it, e.g. "
                       "with a first line '# yaml-language-server: $schema=../budgetdsl.schema.json'.")
    p.set_defaults(handler=run)
