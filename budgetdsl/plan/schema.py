"""What the plan schema says stands at a path: a quantity, a section, a list of sections.

The loader, the evaluator, error messages, `sweep --set` and the TUI all ask the pydantic models
the same questions (is `hardware.gpus` a number? what does `model.params` mean?); the answers are
here, derived from the models' annotations, never from a second hand-written table.
"""

from __future__ import annotations

import functools
import types
import typing
from typing import Any

from pydantic import BaseModel

from budgetdsl.plan.model import GpuRange, Plan, QuantitySpec
from budgetdsl.plan.yaml_source import Path
from budgetdsl.quantities.units import DIMENSIONLESS


def unwrap(annotation: Any) -> Any:
    """The model class inside `X | None`, or the annotation itself."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return unwrap(args[0])
    if typing.get_origin(annotation) is typing.Annotated:
        return unwrap(typing.get_args(annotation)[0])
    return annotation


def is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def field_spec(path: Path, model: type[BaseModel] = Plan) -> QuantitySpec | type[BaseModel] | None:
    """What the schema says stands at `path`: a quantity, a section model, or None (other/unknown).

    Memoized: the evaluator asks it for every key of every plan, and a sweep for every variant."""
    return _field_spec(tuple(path), model)


@functools.lru_cache(maxsize=8192)
def _field_spec(path: Path, model: type[BaseModel]) -> QuantitySpec | type[BaseModel] | None:
    for i, key in enumerate(path):
        info = model.model_fields.get(key) if isinstance(key, str) else None
        if info is None:
            return None
        last = i == len(path) - 1
        spec = next((m for m in info.metadata if isinstance(m, QuantitySpec)), None)
        if spec is not None:
            return spec if last else None
        inner = unwrap(info.annotation)
        if key == "gpus" and model.__name__ == "Hardware":  # a count, or a GpuRange
            if last:
                return QuantitySpec(DIMENSIONLESS, integer=True)
            inner = GpuRange
        item = _list_item_model(info.annotation)
        if item is not None and not last and isinstance(path[i + 1], int):
            if i + 1 == len(path) - 1:
                return item
            return field_spec(path[i + 2:], item)
        if not is_model(inner):
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
        return arg if is_model(arg) else None
    return None


def numeric_paths() -> list[str]:
    out: list[str] = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, info in model.model_fields.items():
            if any(isinstance(m, QuantitySpec) for m in info.metadata) or name == "gpus":
                out.append(prefix + name)
            inner = unwrap(info.annotation)
            if is_model(inner):
                walk(inner, prefix + name + ".")
    walk(Plan, "")
    return out


def default_of(path: Path) -> Any:
    model: Any = Plan
    for key in path[:-1]:
        model = unwrap(model.model_fields[key].annotation)
    info = model.model_fields[path[-1]]
    return None if info.is_required() else info.default


def field_info(path: Path) -> Any:
    """The pydantic FieldInfo of the field at `path`, or None when the plan has no such field."""
    model: Any = Plan
    for key in path[:-1]:
        info = model.model_fields.get(key) if isinstance(key, str) else None
        model = unwrap(info.annotation) if info else None
        if key == "gpus" and model is not None and not is_model(model):
            model = GpuRange
        if not is_model(model):
            return None
    return model.model_fields.get(path[-1]) if path and isinstance(path[-1], str) else None


def field_help(path: Path) -> str | None:
    """`params: Number of parameters N, e.g. 6.74e9 or 7B.`: the schema's own words."""
    info = field_info(path)
    if info is None:
        return None
    inner = unwrap(info.annotation)
    text = info.description or (inner.__doc__ if is_model(inner) else None)
    return f"{path[-1]}: {text}" if text else None
