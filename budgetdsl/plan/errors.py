"""Turn pydantic's validation errors into located diagnostics with messages people read.

Each error's `loc` is looked up in the positions the YAML reader recorded (closest ancestor as
fallback; a missing key points at its parent), and messages are rewritten by pydantic's error
`type`, never by matching its message text, which changes between pydantic versions.
"""

from __future__ import annotations

import typing
from typing import Any

from pydantic import ValidationError

from budgetdsl.plan.diagnostics import Diagnostic, did_you_mean
from budgetdsl.plan.model import Plan, QuantitySpec
from budgetdsl.plan.schema import field_help, field_info, field_spec
from budgetdsl.plan.source import MergedSource
from budgetdsl.plan.values import Failed
from budgetdsl.plan.yaml_source import Path, excerpt
from budgetdsl.quantities.units import BASE_UNIT, DIMENSIONLESS, EXAMPLES


def _clean_loc(loc: tuple[Any, ...], data: Any) -> Path:
    """Drop pydantic's union tags (`count`, `range`) from a loc, keeping the real path."""
    out: list[Any] = []
    node = data
    for i, key in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(node, dict) and key in node:
            out.append(key)
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and key < len(node):
            out.append(key)
            node = node[key]
        elif last or isinstance(node, dict) and key not in ("count", "range", "auto", "stages"):
            out.append(key)
        # else: a union tag; skip it
    return tuple(out)


def _describe(path: Path) -> str:
    return "the top level" if not path else excerpt(".".join(map(str, path)), 60)


def validation_diagnostics(exc: ValidationError, source: MergedSource, data: dict[str, Any],
                           partial: bool = False) -> list[Diagnostic]:
    """Every error located. `partial` for a base fragment: a missing key, or a rule that relates
    several keys of a section, is left to the plans that extend the fragment (they may set them)."""
    out: list[Diagnostic] = []
    for err in exc.errors(include_url=False):
        path = _clean_loc(err["loc"], data)
        kind = err["type"]
        if partial and (kind == "missing" or kind == "plan_rule" and isinstance(_at(data, path), dict)):
            continue
        value = err.get("input")
        if isinstance(value, Failed) or any(isinstance(v, Failed) for v in _leaves(value)):
            continue  # already reported where it failed
        ctx = err.get("ctx") or {}
        if kind == "extra_forbidden":
            parent = path[:-1]
            spec = field_spec(parent) if parent else Plan
            allowed = list(spec.model_fields) if isinstance(spec, type) else []
            out.append(Diagnostic(source.locate(path, key=True), "unknown-key",
                                  f"unknown key {excerpt(str(path[-1]))} in {_describe(parent)}",
                                  did_you_mean(str(path[-1]), allowed) or
                                  (f"allowed keys: {', '.join(allowed)}" if allowed else None)))
        elif kind == "missing":
            parent = path[:-1]
            out.append(Diagnostic(source.locate(parent, key=True), "missing-key",
                                  f"missing required key {excerpt(str(path[-1]))} in {_describe(parent)}",
                                  _with_examples(field_help(path), path)))
        elif kind == "plan_rule":
            sub = tuple(int(p) if p.isdigit() else p for p in str(ctx.get("path", "")).split(".") if p)
            full = (*path, *sub)
            hints = [h for h in (ctx.get("hint"), _inherited(source, data, path, err["msg"])) if h]
            out.append(Diagnostic(source.locate(full, key=bool(sub)), "plan-rule", err["msg"],
                                  "; ".join(hints) or None))
        else:
            out.append(Diagnostic(source.locate(path), _CODES.get(kind, "invalid-value"),
                                  _message(kind, err, path), _hint(kind, path, err, _written(source, path))))
    return out


# A short example of each way to write a required section, shown when the section is missing: the
# schema's description says what the section is, these say how to write it. Each alternative is a
# complete section; tests load every one inside a whole plan.
SECTION_EXAMPLES: dict[str, tuple[str, ...]] = {
    "model": ("params: 1.3B\nseq_len: 2048",),
    "hardware": ("gpu: H100-SXM5-80GB\ngpus: 64",),
    "target": ("tokens: 20 * model.params\nat_batch: 1Mi", "min_tokens: 13B"),
    "noise": ("b_crit: 1M", "kaplan_loss: 2.2", "calibration: calibration.json\nat_loss: 2.5"),
}


def _with_examples(help_text: str | None, path: Path) -> str | None:
    """The schema's words for a missing section, then an example of each way to write it."""
    examples = SECTION_EXAMPLES.get(path[0]) if len(path) == 1 and isinstance(path[0], str) else None
    if not examples:
        return help_text
    shown = "\n  or\n".join(f"    {path[-1]}:\n" + "\n".join(f"      {line}" for line in ex.splitlines())
                            for ex in examples)
    lead = "for example" if len(examples) == 1 else "one of"
    return f"{help_text or path[-1]} Write {lead}:\n{shown}"


def _inherited(source: MergedSource, data: dict[str, Any], section: Path, message: str) -> str | None:
    """For a rule broken by keys of a section, the keys the rule names that this plan did not write
    but took from a base it extends, where each stands, and how to drop one: a base's
    `noise.b_crit` plus this plan's `kaplan_loss` gives two B_crit sources, and the fix is in this
    file, `b_crit: null`, not in the shared base."""
    import re

    values = _at(data, section)
    if not isinstance(values, dict) or not source.files:
        return None
    here = source.files[0]
    found = []
    for key in values:
        if not isinstance(key, str) or not re.search(rf"(?<![\w.]){re.escape(key)}(?![\w])", message):
            continue
        info = field_info((*section, key))
        if info is None or info.is_required() or info.default is not None:
            continue  # only a key whose absence is its default (None) is dropped by `null`
        where = source.locate((*section, key), key=True)
        if where.file != here and where.file in source.files:  # a base it extends (not a sweep's --set)
            found.append((key, where))
    if not found:
        return None
    froms = "; ".join(f"{key} comes from the base {where}" for key, where in found)
    nulls = " or ".join(f"`{key}: null`" for key, _ in found)
    return (f"{froms}; {nulls} under {'.'.join(map(str, section)) or 'the top level'} in this plan "
            f"drops {'it' if len(found) == 1 else 'them'}")


def _at(data: Any, path: Path) -> Any:
    """The value at `path` in the document, or None."""
    for key in path:
        if isinstance(data, dict) and key in data:
            data = data[key]
        elif isinstance(data, list) and isinstance(key, int) and 0 <= key < len(data):
            data = data[key]
        else:
            return None
    return data


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [value]


_CODES = {
    "greater_than": "out-of-range", "greater_than_equal": "out-of-range", "less_than": "out-of-range",
    "less_than_equal": "out-of-range", "enum": "invalid-choice", "literal_error": "invalid-choice",
    "string_type": "wrong-type", "int_type": "wrong-type", "float_type": "wrong-type",
    "bool_type": "wrong-type", "model_type": "wrong-type", "dict_type": "wrong-type",
    "finite_number": "out-of-range", "string_too_short": "invalid-value", "string_too_long": "invalid-value",
    "model_attributes_type": "wrong-type", "union_tag_invalid": "wrong-type",
}


def _show(value: Any, path: Path = ()) -> str:
    spec = field_spec(path) if path else None
    if isinstance(spec, QuantitySpec) and spec.dim != DIMENSIONLESS and isinstance(value, (int, float)):
        from budgetdsl.quantities.humanize import quantity

        return quantity(float(value), spec.dim)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        return f"{float(value):g}"
    return excerpt(value)


def _message(kind: str, err: Any, path: Path) -> str:
    ctx, value = err.get("ctx") or {}, err.get("input")
    bounds = {"greater_than": ("greater than", "gt"), "greater_than_equal": ("at least", "ge"),
              "less_than": ("less than", "lt"), "less_than_equal": ("at most", "le")}
    if kind in bounds:
        word, key = bounds[kind]
        return f"must be {word} {_show(ctx.get(key), path)}, got {_show(value, path)}"
    if kind in ("enum", "literal_error"):
        return f"{_show(value)} is not one of {ctx.get('expected', '')}"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"{_describe(path)} must be a mapping of keys to values, got {_show(value)}"
    if kind == "string_type":
        return f"expected text, got {_show(value)}"
    if kind in ("int_type", "float_type"):
        return f"expected a number, got {_show(value)}"
    if kind == "bool_type":
        return f"expected true or false, got {_show(value)}"
    if kind == "finite_number":
        return "must be a finite number"
    return f"{err['msg']}, got {_show(value)}"


def _written(source: MergedSource, path: Path) -> str:
    """The text of the value at `path` as the file has it ('' when unknown)."""
    span = source.spans.get(path)
    text = source.texts.get(span.file, "") if span else ""
    return text[span.start:span.end] if span else ""


def _hint(kind: str, path: Path, err: Any = None, written: str = "") -> str | None:
    spec = field_spec(path) if path else None
    value = None if err is None else err.get("input")
    if (kind == "less_than_equal" and isinstance(spec, QuantitySpec) and spec.dim == DIMENSIONLESS
            and (err.get("ctx") or {}).get("le") == 1 and isinstance(value, (int, float))
            and not isinstance(value, bool) and 1 < value <= 100 and "%" not in written):
        # a fraction given as a percentage (`mfu: 40`)
        return f"did you mean {value:g}%? a fraction is written {value / 100:g} or {value:g}%"
    if kind == "list_type" and path == ("launch", "command") and isinstance(value, str):
        import json  # a shell string where the command's words belong: show them as a list
        import shlex

        try:
            shown = json.dumps(shlex.split(value) or ["train.py"])
        except ValueError:  # unbalanced quotes
            shown = ""
        if not shown or len(shown) > 200:
            shown = '["train.py", "--config", "cfg.yaml"]'
        return f"write the program and its arguments as a list of words (never a shell string), e.g. command: {shown}"
    if kind in ("enum", "literal_error") and isinstance(value, str):  # `zero: aut`, `recompute: ful`
        return did_you_mean(value.strip().lower(), _choices(path))
    if isinstance(spec, QuantitySpec) and kind in _CODES and _CODES[kind] == "wrong-type":
        unit = BASE_UNIT.get(spec.dim) or ""
        return f"write a number{' in ' + unit if unit else ''} or an expression such as {EXAMPLES[spec.dim]!r}"
    return None


def _choices(path: Path) -> list[str]:
    """The words a choice field takes (its Literal's strings, its StrEnum's values)."""
    import enum

    info = field_info(path)
    out: list[str] = []
    stack = [info.annotation] if info is not None else []
    while stack:
        a = stack.pop()
        if isinstance(a, type) and issubclass(a, enum.Enum):
            out += [str(m.value) for m in a]
        else:
            stack += typing.get_args(a)
            if typing.get_origin(a) is typing.Literal:
                out += [v for v in typing.get_args(a) if isinstance(v, str)]
    return out
