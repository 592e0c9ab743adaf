"""Write changed values back into plan files as a minimal diff.

Plans are reviewed in pull requests, so an edit (from the TUI, say) must touch only the values
that changed: each is replaced in place in the file that holds it (the plan itself, or the base it
extends), keeping comments, key order, quoting style elsewhere and formatting. A key the plan chain
does not set yet is added to the plan file itself, at the end of its section. Nothing is written
unless every changed file re-reads to the intended values; files are replaced atomically.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from budgetdsl.io.atomic_write import write_files
from budgetdsl.plan.loader import MergedSource, load_plan, read_merged
from budgetdsl.plan.yaml_source import Path

_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._*/^()+%-]*")


class EditError(ValueError):
    """An edit that cannot be written as a minimal in-place change."""


class ChangedOnDisk(EditError):
    """A file of the plan chain changed on disk since it was loaded: writing the edits would
    silently undo someone else's change (a value edited, a key deleted). `files` names them."""

    def __init__(self, files: list[str]):
        self.files = files
        super().__init__(f"{', '.join(files)} changed on disk since it was loaded; reload it, or "
                         "overwrite it with these changes")


def content_hash(text: str) -> str:
    """The identity of a file's content when it was loaded (SHA-256 of its UTF-8 text)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _changed(source: MergedSource, loaded: Mapping[str, str]) -> list[str]:
    """The files of `source` whose content differs from `loaded` (display name -> content hash at
    load); a file added to or dropped from the chain counts as changed."""
    now = {name: content_hash(text) for name, text in source.texts.items()}
    return sorted(name for name in set(now) | set(loaded) if now.get(name) != loaded.get(name))


@dataclass(frozen=True, slots=True)
class Edit:
    """One text replacement in one file."""

    file: str
    start: int
    end: int
    text: str


def render_scalar(value: Any) -> str:
    """A YAML scalar for `value` that reads back as the same value: plain where safe, else quoted."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if value != int(value) or abs(value) >= 1e16 else str(int(value))
    text = str(value)
    if _PLAIN.fullmatch(text) and not text.endswith(" ") and yaml.safe_load(text) == text:
        return text
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def render_flow(value: Any) -> str:
    """A value in YAML flow style: a scalar as `render_scalar`, `{a: 1}`, `[1, 2]`."""
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {render_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(render_flow(v) for v in value) + "]"
    return render_scalar(value)


def _block_list(items: list[Any], indent: int) -> str:
    """A list as block-style lines at `indent`, one flow-style item a line (`- {until: 25%, ...}`)."""
    return "".join(" " * indent + f"- {render_flow(item)}\n" for item in items)


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def _expand(source: MergedSource, changes: Mapping[str, Any]) -> list[tuple[Path, Any]]:
    """(path, value) of each change; a list of mappings that replaces a list of as many mappings in
    the plan file becomes one change per item key (the minimal diff: a stage's changed values)."""
    out: list[tuple[Path, Any]] = []
    for dotted, value in changes.items():
        path: Path = tuple(dotted.split("."))
        span = source.spans.get(path)
        old = _get(source.data, path) if span is not None else None
        if (isinstance(value, list) and isinstance(old, list) and len(old) == len(value)
                and span is not None and span.file == source.files[0]
                and all(isinstance(v, Mapping) for v in value) and all(isinstance(o, dict) for o in old)):
            for i, (new_item, old_item) in enumerate(zip(value, old)):
                out += [((*path, i, k), v) for k, v in new_item.items()]
                out += [((*path, i, k), None) for k in old_item if k not in new_item]
            continue
        out.append((path, value))
    return out


def _plan_edits(source: MergedSource, changes: Mapping[str, Any]) -> list[Edit]:
    plan_file = source.files[0]
    edits: list[Edit] = []
    additions: dict[Path, list[tuple[str, Any]]] = {}
    for path, value in _expand(source, changes):
        dotted = ".".join(map(str, path))
        span = source.spans.get(path)
        if value is None:
            if span is not None:
                edits.append(_deletion(source, path))
            continue
        if span is not None and isinstance(value, list):
            edits.append(_list_replacement(source, path, value))
            continue
        if span is not None:
            if isinstance(_get(source.data, path), (dict, list)):
                raise EditError(f"{dotted} holds a mapping or list; edit its entries instead")
            if source.texts[span.file][span.start:span.start + 1] == "&":  # `&name value`, used by `*name`
                raise EditError(f"{dotted} is a YAML anchor that other values repeat (*name); a change "
                                "would change them too: edit it by hand")
            edits.append(_replacement(source.texts[span.file], span.file, span.start, span.end,
                                      render_scalar(value)))
            continue
        # Not set anywhere in the chain: add it, under the deepest existing section of the plan file.
        parent = path[:-1]
        while parent and not (parent in source.spans and source.spans[parent].file == plan_file):
            parent = parent[:-1]
        additions.setdefault(parent, []).append((".".join(map(str, path[len(parent):])), value))
    for section, entries in additions.items():
        edits.append(_addition(source, section, entries))
    return edits


def _list_replacement(source: MergedSource, path: Path, value: list[Any]) -> Edit:
    """A list written anew in the style of what it replaces: `- item` lines at the indentation of a
    block list, else inline (`[...]` in place of an inline list or a scalar such as `auto`)."""
    span = source.spans[path]
    text = source.texts[span.file]
    old = _get(source.data, path)
    if span.flow or not isinstance(old, list) or not old or not value:
        if "\n" in text[span.start:span.end].rstrip():
            raise EditError(f"{'.'.join(map(str, path))} spans several lines; replace it by hand")
        return Edit(span.file, span.start, span.end, render_flow(value))
    end = source.spans[(*path, len(old) - 1)].end  # a block's end mark lies past what follows it
    while end > span.start and text[end - 1] in " \n":
        end -= 1
    indent = span.start - _line_start(text, span.start)
    return Edit(span.file, span.start, end, _block_list(value, indent).strip())


def _replacement(text: str, file: str, start: int, end: int, new: str) -> Edit:
    """Replace a value, keeping a trailing comment in its column where the padding allows."""
    m = re.compile(r"( +)#").match(text, end)
    if m is None or "\n" in text[start:end]:
        return Edit(file, start, end, new)
    pad = max(1, len(m.group(1)) - (len(new) - (end - start)))
    return Edit(file, start, m.end(1), new + " " * pad)


def _get(data: Any, path: Path) -> Any:
    for key in path:
        data = data[key]
    return data


def _deletion(source: MergedSource, path: Path) -> Edit:
    span, key = source.spans[path], source.key_spans[path]
    text = source.texts[span.file]
    parent = source.spans.get(path[:-1])
    if parent is not None and parent.flow:
        # `{a: 1, b: 2}`: drop `b: 2` with the comma before it (or after it, for the first entry).
        before = text.rfind(",", parent.start, key.start)
        if before > parent.start and text[before:key.start].strip() == ",":
            return Edit(span.file, before, span.end, "")
        after = text.find(",", span.end, parent.end)
        end = after + 1 if after != -1 and not text[span.end:after].strip() else span.end
        while end < parent.end and text[end] == " ":
            end += 1
        return Edit(span.file, key.start, end, "")
    line_end = text.find("\n", span.end)
    line_end = len(text) if line_end == -1 else line_end + 1
    if "\n" in text[key.start:span.end]:
        raise EditError(f"{'.'.join(map(str, path))} spans several lines; remove it by hand")
    return Edit(span.file, _line_start(text, key.start), line_end, "")


def _addition(source: MergedSource, parent: Path, entries: list[tuple[str, Any]]) -> Edit:
    plan_file = source.files[0]
    text = source.texts[plan_file]
    nested = [(name.split("."), value) for name, value in entries]
    if not parent:  # a new top-level section (or key) at the end of the file
        lines = _block_lines(nested, indent=0)
        sep = "" if text.endswith("\n") or not text else "\n"
        return Edit(plan_file, len(text), len(text), sep + "".join(lines))
    span = source.spans[parent]
    if span.flow:
        close = text.rfind("}", span.start, span.end)
        if close == -1 or any(len(n) > 1 for n, _ in nested):
            raise EditError(f"cannot add to the inline mapping {'.'.join(map(str, parent))}; edit it by hand")
        inner = text[span.start + 1:close].strip()
        addition = ", ".join(f"{n[0]}: {render_flow(v)}" for n, v in nested)
        return Edit(plan_file, close, close, (", " if inner else "") + addition)
    # A block mapping: add after its last line, at the indentation of its keys.
    first_key = min((k for p, k in source.key_spans.items() if p[:-1] == parent and k.file == plan_file),
                    key=lambda k: k.start)
    indent = first_key.start - _line_start(text, first_key.start)
    # after its last entry's value: a block's own end lies past the comments that follow it
    end = max(v.end for p, v in source.spans.items() if p[:-1] == parent and v.file == plan_file)
    while end > span.start and text[end - 1] in " \n":
        end -= 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end + 1
    lines = _block_lines(nested, indent)
    prefix = "" if text[:line_end].endswith("\n") else "\n"
    return Edit(plan_file, line_end, line_end, prefix + "".join(lines))


def _block_lines(nested: list[tuple[list[str], Any]], indent: int) -> list[str]:
    lines: list[str] = []
    groups: dict[str, list[tuple[list[str], Any]]] = {}
    for names, value in nested:
        if len(names) == 1 and isinstance(value, list) and value:
            lines.append(" " * indent + f"{names[0]}:\n" + _block_list(value, indent + 2))
        elif len(names) == 1:
            lines.append(" " * indent + f"{names[0]}: {render_flow(value)}\n")
        else:
            groups.setdefault(names[0], []).append((names[1:], value))
    for head, rest in groups.items():
        lines.append(" " * indent + f"{head}:\n")
        lines.extend(_block_lines(rest, indent + 2))
    return lines


def apply_edits(texts: Mapping[str, str], edits: list[Edit]) -> dict[str, str]:
    """The new text of each file that an edit touches (edits applied from the end backwards)."""
    out: dict[str, str] = {}
    for file in sorted({e.file for e in edits}):
        text = texts[file]
        for e in sorted((e for e in edits if e.file == file), key=lambda e: e.start, reverse=True):
            text = text[:e.start] + e.text + text[e.end:]
        out[file] = text
    return out


def edited_texts(plan_path: str | os.PathLike[str], changes: Mapping[str, Any],
                 loaded: Mapping[str, str] | None = None) -> dict[str, str]:
    """New texts for the files of a plan chain after setting `changes` (dotted path -> value;
    None removes the key). Raises EditError, or PlanError when the result would not validate.
    With `loaded` (display name -> content_hash when the changes were made), ChangedOnDisk when
    a file of the chain is no longer what it was."""
    source = read_merged(plan_path)
    if loaded is not None and (changed := _changed(source, loaded)):
        raise ChangedOnDisk(changed)
    new = apply_edits(source.texts, _plan_edits(source, changes))
    plan_text = new.get(source.files[0], source.texts[source.files[0]])
    bases = {n: t for n, t in new.items() if n != source.files[0]}
    if bases:  # validate the whole chain as it would be on disk
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.commonpath([os.path.abspath(p) for p in source.paths.values()])
            for name, fs_path in source.paths.items():
                copy = os.path.join(tmp, os.path.relpath(os.path.abspath(fs_path), root))
                os.makedirs(os.path.dirname(copy), exist_ok=True)
                with open(copy, "w", encoding="utf-8") as f:
                    f.write(new.get(name, source.texts[name]))
            load_plan(os.path.join(tmp, os.path.relpath(os.path.abspath(source.paths[source.files[0]]), root)),
                      root=tmp)
    else:
        load_plan(plan_path, text=plan_text)
    return {str(source.paths[name]): text for name, text in new.items()}


def save_changes(plan_path: str | os.PathLike[str], changes: Mapping[str, Any],
                 loaded: Mapping[str, str] | None = None) -> list[str]:
    """Validate and write `changes` into the plan's files; return the files written.

    With `loaded` (display name -> content_hash of each file of the chain when it was loaded, as
    `loaded_hashes` gives), nothing is written when a file changed on disk since: ChangedOnDisk.
    Without it the files are overwritten with the changes (the caller chose to)."""
    files = edited_texts(plan_path, changes, loaded)
    if loaded is not None:  # once more just before writing: the window is the write itself
        if changed := _changed(read_merged(plan_path), loaded):
            raise ChangedOnDisk(changed)
    write_files(files)
    return sorted(files)


def loaded_hashes(source: MergedSource) -> dict[str, str]:
    """What `save_changes(loaded=...)` compares against: each file's content hash as read."""
    return {name: content_hash(text) for name, text in source.texts.items()}
