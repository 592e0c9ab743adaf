"""Load a plan file: resolve `extends`, evaluate values, validate, and locate every problem.

    load_plan(path) -> Plan            raises PlanError with every diagnostic of the file

The steps, each reporting all of its problems before giving up:
1. read each file of the `extends` chain (`yaml_source`), detect cycles, deep-merge mappings
   (this file's keys win), keeping for every path the file and position that set it;
2. evaluate every quantity field (`expressions`) against the merged document, so a value in a
   base plan may refer to a field the child sets (late binding), with reference cycles reported;
3. validate with the pydantic models (`plan_model`) and map each error's `loc` back to the file,
   line and column of the value (closest ancestor as fallback; a missing key points at its parent),
   rewriting messages by pydantic's error type, never by its message text.
"""

from __future__ import annotations

import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Any, Callable

from pydantic import BaseModel, ValidationError

from budgetdsl.diagnostics import Diagnostic, Location, PlanError, did_you_mean
from budgetdsl.expressions import ExpressionError, Quantity, evaluate
from budgetdsl.plan_model import GpuRange, Plan, QuantitySpec
from budgetdsl.units import BASE_UNIT, DIMENSIONLESS, EXAMPLES, dim_name
from budgetdsl.yaml_source import Path, SourceDoc, Span, parse_yaml, read_bytes, read_yaml_file

MAX_EXTENDS = 16  # depth of an extends chain


@dataclass
class MergedSource:
    """A plan document after `extends`: the values, and where each path's key and value stand."""

    data: dict[str, Any]
    values: dict[Path, Location] = field(default_factory=dict)
    keys: dict[Path, Location] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)  # the chain, this file first
    spans: dict[Path, Span] = field(default_factory=dict)  # where each value's text stands
    key_spans: dict[Path, Span] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)  # each file's text, by display name
    paths: dict[str, FsPath] = field(default_factory=dict)  # each file's path on disk

    def locate(self, path: Path, *, key: bool = False) -> Location:
        """Where `path` stands; the closest located ancestor where it is not in the file."""
        table = self.keys if key else self.values
        while path:
            if path in table:
                return table[path]
            if path in self.values:
                return self.values[path]
            path = path[:-1]
        return self.values.get((), Location(self.files[0] if self.files else "<plan>", 1, 1))


# -- 1. extends ---------------------------------------------------------------------------------

def _merge(base: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in child.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _display(path: FsPath) -> str:
    """A path as people wrote it: relative to the working directory when below it."""
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)


def read_merged(path: str | os.PathLike[str], text: str | None = None,
                opener: Callable[[str], bytes] = read_bytes) -> MergedSource:
    """Read a plan file and the chain of files it extends, merged, with every position kept.

    With `text`, the plan's own content is `text` (an editor buffer) and `path` only names it and
    anchors relative `extends` paths. `opener` reads a file's bytes: from disk by default, from a
    git revision for `budgetdsl diff --base REF`.
    """
    chain: list[tuple[FsPath, SourceDoc]] = []
    current = FsPath(path)
    display = str(path)
    seen: dict[FsPath, str] = {}
    while True:
        real = current.resolve()
        if text is not None and not chain:
            doc = parse_yaml(text, display)
        else:
            doc = read_yaml_file(str(current), display, opener)
        if real in seen:  # pragma: no cover - caught below before reading again
            break
        seen[real] = display
        chain.append((current, doc))
        parent = doc.data.get("extends")
        if parent is None:
            break
        where = doc.values.get(("extends",), Location(display, 1, 1))
        if not isinstance(parent, str) or not parent.strip():
            raise PlanError([Diagnostic(where, "extends", "extends must be a path to a base plan",
                                        "e.g. extends: base/a100-cluster.yaml")])
        if not parent.endswith((".yaml", ".yml")):
            raise PlanError([Diagnostic(where, "extends", f"extends must name a .yaml file, got {parent!r}")])
        nxt = (current.parent / parent)
        if nxt.resolve() in seen:
            cycle = " -> ".join([*seen.values(), _display(nxt)])
            raise PlanError([Diagnostic(where, "extends-cycle", f"extends forms a cycle: {cycle}",
                                        "a plan may not extend itself, directly or through others")])
        if len(chain) >= MAX_EXTENDS:
            raise PlanError([Diagnostic(where, "extends", f"extends chain longer than {MAX_EXTENDS} files")])
        current, display = nxt, _display(nxt)
        try:
            opener(str(current))
        except OSError:
            raise PlanError([Diagnostic(where, "extends", f"base plan {parent!r} not found",
                                        f"the path is relative to {chain[-1][1].values[()].file!r}: "
                                        f"{display}")]) from None

    merged = MergedSource({}, files=[doc.values.get((), Location(str(p))).file for p, doc in chain])
    for fs_path, doc in reversed(chain):  # base first, so this file's keys win
        merged.data = _merge(merged.data, doc.data)
        _drop_replaced(merged, doc)
        for table in ("values", "keys", "spans", "key_spans"):
            getattr(merged, table).update(getattr(doc, table))
        name = doc.values.get((), Location(str(fs_path))).file
        merged.texts[name] = doc.text
        merged.paths[name] = fs_path
    return merged


def _drop_replaced(merged: MergedSource, doc: SourceDoc) -> None:
    """A child value that replaces a base mapping or list also replaces the base's positions below it."""
    for path in doc.values:
        if not path:
            continue
        below = [p for p in merged.values if len(p) > len(path) and p[: len(path)] == path]
        child_has_below = any(len(p) > len(path) and p[: len(path)] == path for p in doc.values)
        if below and not child_has_below:
            for p in below:
                for table in (merged.values, merged.keys, merged.spans, merged.key_spans):
                    table.pop(p, None)


# -- 2. evaluation ------------------------------------------------------------------------------

def _unwrap(annotation: Any) -> Any:
    """The model class inside `X | None`, or the annotation itself."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _unwrap(args[0])
    if typing.get_origin(annotation) is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    return annotation


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def field_spec(path: Path, model: type[BaseModel] = Plan) -> QuantitySpec | type[BaseModel] | None:
    """What the schema says stands at `path`: a quantity, a section model, or None (other/unknown)."""
    for i, key in enumerate(path):
        info = model.model_fields.get(key) if isinstance(key, str) else None
        if info is None:
            return None
        last = i == len(path) - 1
        spec = next((m for m in info.metadata if isinstance(m, QuantitySpec)), None)
        if spec is not None:
            return spec if last else None
        inner = _unwrap(info.annotation)
        if key == "gpus" and model.__name__ == "Hardware":  # a count, or a GpuRange
            if last:
                return QuantitySpec(DIMENSIONLESS, integer=True)
            inner = GpuRange
        item = _list_item_model(info.annotation)
        if item is not None and not last and isinstance(path[i + 1], int):
            if i + 1 == len(path) - 1:
                return item
            return field_spec(path[i + 2:], item)
        if not _is_model(inner):
            return None
        if last:
            return inner
        model = inner
    return model


def _list_item_model(annotation: Any) -> type[BaseModel] | None:
    """The model X of a `list[X]` (also inside a union such as `"auto" | list[X] | None`)."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _list_item_model(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return next((m for a in typing.get_args(annotation) if (m := _list_item_model(a))), None)
    if typing.get_origin(annotation) is list:
        (arg,) = typing.get_args(annotation)
        return arg if _is_model(arg) else None
    return None


@dataclass
class _Failed:
    """A value that did not evaluate; its diagnostic is already recorded."""


class _Evaluator:
    def __init__(self, source: MergedSource):
        self.source = source
        self.done: dict[Path, Quantity | _Failed] = {}
        self.active: list[Path] = []
        self.problems: list[Diagnostic] = []

    def at(self, path: Path, col: int) -> Location:
        loc = self.source.locate(path)
        return Location(loc.file, loc.line, loc.col + col)

    def raw(self, path: Path) -> Any:
        node: Any = self.source.data
        for key in path:
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
                node = node[key]
            else:
                raise KeyError(path)
        return node

    def value_of(self, path: Path, spec: QuantitySpec) -> Quantity | _Failed:
        if path in self.done:
            return self.done[path]
        raw = self.raw(path)
        self.active.append(path)
        try:
            q = self._evaluate(raw, path, spec)
        finally:
            self.active.pop()
        self.done[path] = q
        return q

    def _evaluate(self, raw: Any, path: Path, spec: QuantitySpec) -> Quantity | _Failed:
        if isinstance(raw, bool) or raw is None or not isinstance(raw, (int, float, str)):
            return Quantity(raw)  # type: ignore[arg-type] - left for pydantic to reject, located
        if isinstance(raw, (int, float)):
            q = Quantity(float(raw))
        else:
            def resolve(ref: str, col: int) -> Quantity:
                return self.reference(ref, col, path)
            try:
                q = evaluate(raw, resolve)
            except _RefFailed:
                return _Failed()
            except ExpressionError as exc:
                self.problems.append(Diagnostic(self.at(path, exc.column), exc.code, exc.message, exc.hint))
                return _Failed()
        if q.dim != DIMENSIONLESS and q.dim != spec.dim:
            expected = dim_name(spec.dim)
            self.problems.append(Diagnostic(
                self.at(path, 0), "dimension", f"expected {expected}, got {dim_name(q.dim)}",
                f"e.g. {EXAMPLES[spec.dim]!r}" if spec.dim in EXAMPLES else None))
            return _Failed()
        return q

    def reference(self, ref: str, col: int, origin: Path) -> Quantity:
        path: Path = tuple(ref.split("."))
        spec = field_spec(path)
        if not isinstance(spec, QuantitySpec):
            self.problems.append(Diagnostic(
                self.at(origin, col), "reference", f"{ref!r} is not a numeric field of the plan",
                did_you_mean(ref, numeric_paths())))
            raise _RefFailed
        if path in self.active:
            cycle = " -> ".join(".".join(map(str, p)) for p in [*self.active[self.active.index(path):], path])
            self.problems.append(Diagnostic(self.at(origin, col), "reference-cycle",
                                            f"values refer to each other in a cycle: {cycle}"))
            raise _RefFailed
        try:
            q = self.value_of(path, spec)
        except KeyError:
            default = _default_of(path)
            if default is None:
                self.problems.append(Diagnostic(self.at(origin, col), "reference",
                                                f"{ref!r} is not set in this plan"))
                raise _RefFailed from None
            return Quantity(float(default), spec.dim)
        if isinstance(q, _Failed):
            raise _RefFailed
        if not isinstance(q.value, (int, float)) or isinstance(q.value, bool):
            self.problems.append(Diagnostic(self.at(origin, col), "reference",
                                            f"{ref!r} is not a number here ({q.value!r})"))
            raise _RefFailed
        if isinstance(q.value, float) and q.dim == DIMENSIONLESS:
            return Quantity(q.value, spec.dim)  # a plain number carries its field's unit
        return q

    def run(self, node: Any, path: Path) -> Any:
        """The document with every quantity replaced by its value in base units."""
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                spec = field_spec((*path, key))
                if isinstance(value, dict):  # a section, or a GPU range {min, max, step}
                    out[key] = self.run(value, (*path, key))
                elif isinstance(value, list):  # a list of sections, e.g. batch-schedule stages
                    out[key] = [self.run(item, (*path, key, i)) for i, item in enumerate(value)]
                elif isinstance(spec, QuantitySpec):
                    out[key] = self.final(self.value_of((*path, key), spec), (*path, key), spec)
                else:
                    out[key] = value
            return out
        return node

    def final(self, q: Quantity | _Failed, path: Path, spec: QuantitySpec) -> Any:
        if isinstance(q, _Failed):
            return _Failed()
        value = q.value
        if spec.integer and isinstance(value, float):
            if value != int(value):
                self.problems.append(Diagnostic(self.at(path, 0), "not-integer",
                                                f"expected a whole number, got {value:g}"))
                return _Failed()
            return int(value)
        return value


class _RefFailed(Exception):
    pass


def numeric_paths() -> list[str]:
    out: list[str] = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, info in model.model_fields.items():
            if any(isinstance(m, QuantitySpec) for m in info.metadata) or name == "gpus":
                out.append(prefix + name)
            inner = _unwrap(info.annotation)
            if _is_model(inner):
                walk(inner, prefix + name + ".")
    walk(Plan, "")
    return out


def _default_of(path: Path) -> Any:
    model: Any = Plan
    for key in path[:-1]:
        model = _unwrap(model.model_fields[key].annotation)
    info = model.model_fields[path[-1]]
    return None if info.is_required() else info.default


# -- 3. validation ------------------------------------------------------------------------------

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
    return "the top level" if not path else f"'{'.'.join(map(str, path))}'"


def _diagnostics(exc: ValidationError, source: MergedSource, data: dict[str, Any]) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for err in exc.errors(include_url=False):
        path = _clean_loc(err["loc"], data)
        kind = err["type"]
        value = err.get("input")
        if isinstance(value, _Failed) or any(isinstance(v, _Failed) for v in _leaves(value)):
            continue  # already reported where it failed
        ctx = err.get("ctx") or {}
        if kind == "extra_forbidden":
            parent = path[:-1]
            spec = field_spec(parent) if parent else Plan
            allowed = list(spec.model_fields) if isinstance(spec, type) else []
            out.append(Diagnostic(source.locate(path, key=True), "unknown-key",
                                  f"unknown key '{path[-1]}' in {_describe(parent)}",
                                  did_you_mean(str(path[-1]), allowed) or
                                  (f"allowed keys: {', '.join(allowed)}" if allowed else None)))
        elif kind == "missing":
            parent = path[:-1]
            out.append(Diagnostic(source.locate(parent, key=True), "missing-key",
                                  f"missing required key '{path[-1]}' in {_describe(parent)}",
                                  _field_help(path)))
        elif kind == "plan_rule":
            sub = tuple(int(p) if p.isdigit() else p for p in str(ctx.get("path", "")).split(".") if p)
            full = (*path, *sub)
            out.append(Diagnostic(source.locate(full, key=bool(sub)), "plan-rule", err["msg"],
                                  ctx.get("hint") or None))
        else:
            out.append(Diagnostic(source.locate(path), _CODES.get(kind, "invalid-value"),
                                  _message(kind, err, path), _hint(kind, path)))
    return out


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


def field_info(path: Path) -> Any:
    """The pydantic FieldInfo of the field at `path`, or None when the plan has no such field."""
    model: Any = Plan
    for key in path[:-1]:
        info = model.model_fields.get(key) if isinstance(key, str) else None
        model = _unwrap(info.annotation) if info else None
        if key == "gpus" and model is not None and not _is_model(model):
            model = GpuRange
        if not _is_model(model):
            return None
    return model.model_fields.get(path[-1]) if path and isinstance(path[-1], str) else None


def _field_help(path: Path) -> str | None:
    """`params: Number of parameters N, e.g. 6.74e9 or 7B.`: the schema's own words."""
    info = field_info(path)
    if info is None:
        return None
    inner = _unwrap(info.annotation)
    text = info.description or (inner.__doc__ if _is_model(inner) else None)
    return f"{path[-1]}: {text}" if text else None


def _show(value: Any, path: Path = ()) -> str:
    spec = field_spec(path) if path else None
    if isinstance(spec, QuantitySpec) and spec.dim != DIMENSIONLESS and isinstance(value, (int, float)):
        from budgetdsl.humanize import quantity

        return quantity(float(value), spec.dim)
    if isinstance(value, float):
        return f"{value:g}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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


def _hint(kind: str, path: Path) -> str | None:
    spec = field_spec(path) if path else None
    if isinstance(spec, QuantitySpec) and kind in _CODES and _CODES[kind] == "wrong-type":
        unit = BASE_UNIT.get(spec.dim) or ""
        return f"write a number{' in ' + unit if unit else ''} or an expression such as {EXAMPLES[spec.dim]!r}"
    return None


def load_merged(source: MergedSource) -> Plan:
    """Evaluate and validate a merged document; raise PlanError with every problem."""
    evaluator = _Evaluator(source)
    data = evaluator.run(source.data, ())
    problems = list(evaluator.problems)
    try:
        plan = Plan.model_validate(data)
    except ValidationError as exc:
        problems.extend(_diagnostics(exc, source, data))
        if not problems:  # pragma: no cover - every error maps to a diagnostic
            raise
        raise PlanError(problems) from None
    if problems:
        raise PlanError(problems)
    return plan


def load_plan(path: str | os.PathLike[str], text: str | None = None,
              opener: Callable[[str], bytes] = read_bytes) -> Plan:
    """Load, evaluate and validate a plan file; raise PlanError with every problem found.

    `text` and `opener` are as for `read_merged`."""
    source = read_merged(path, text, opener)
    plan = load_merged(source)
    plan._source = source  # where every value came from (for reports, the TUI's save)
    return plan
