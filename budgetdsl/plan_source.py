"""A plan and the chain of base plans it `extends`, merged, with every position kept.

Each file of the chain is read (`yaml_source`), cycles are detected, mappings are deep-merged
(this file's keys win), and for every path the file, line, column and text span of its key and
value are kept — for located errors, and for `plan_edit` to write a value back where it stands.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Any, Callable

from budgetdsl.diagnostics import Diagnostic, Location, PlanError
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
    # How the files were read (disk, or a git revision): files the plan names, such as its
    # calibration, are read the same way.
    opener: Callable[[str], bytes] = read_bytes

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

    merged = MergedSource({}, files=[doc.values.get((), Location(str(p))).file for p, doc in chain],
                          opener=opener)
    for fs_path, doc in reversed(chain):  # base first, so this file's keys win
        if doc is not chain[0][1]:  # a base's own `fragment` mark is not inherited
            doc = _without_fragment_mark(doc)
        merged.data = _merge(merged.data, doc.data)
        _drop_replaced(merged, doc)
        for table in ("values", "keys", "spans", "key_spans"):
            getattr(merged, table).update(getattr(doc, table))
        name = doc.values.get((), Location(str(fs_path))).file
        merged.texts[name] = doc.text
        merged.paths[name] = fs_path
    return merged


FRAGMENT_KEY = "fragment"


def is_fragment(data: Any) -> bool:
    """A base fragment: a file marked `fragment: true`, which plans extend and nobody plans alone.

    The mark is the one rule for what a fragment is (check, the pre-commit hook, diff and the
    JSON Schema all follow it): explicit in the file itself, so it holds wherever the file lives.
    """
    return isinstance(data, dict) and data.get(FRAGMENT_KEY) is True


def _without_fragment_mark(doc: SourceDoc) -> SourceDoc:
    if FRAGMENT_KEY not in doc.data:
        return doc
    path = (FRAGMENT_KEY,)
    return SourceDoc({k: v for k, v in doc.data.items() if k != FRAGMENT_KEY},
                     *({p: x for p, x in table.items() if p[:1] != path}
                       for table in (doc.values, doc.keys, doc.spans, doc.key_spans)), text=doc.text)


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
