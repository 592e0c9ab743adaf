"""A plan and the chain of base plans it `extends`, merged, with every position kept.

Each file of the chain is read (`yaml_source`), cycles are detected, mappings are deep-merged
(this file's keys win), and for every path the file, line, column and text span of its key and
value are kept — for located errors, and for `budgetdsl.plan.edit` to write a value back where it stands.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Any

from budgetdsl.plan.diagnostics import Diagnostic, Location, PlanError
from budgetdsl.plan.yaml_source import (
    Path,
    SourceDoc,
    Span,
    excerpt,
    parse_yaml,
    read_bytes,
    read_yaml_file,
)

MAX_EXTENDS = 16  # depth of an extends chain
ROOT_ENV = "BUDGETDSL_ROOT"  # the repository root where a plan has no git work tree


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


def find_root(plan: str | os.PathLike[str]) -> FsPath:
    """The directory a plan's `extends` chain must stay inside: the git work tree that holds the
    plan (the nearest ancestor directory with a `.git`, found without running git); when there is
    none, the directory named by the environment variable BUDGETDSL_ROOT; when that is unset too,
    the plan's own directory."""
    here = FsPath(os.path.realpath(os.path.dirname(os.path.abspath(plan)) or "."))
    for directory in (here, *here.parents):
        if os.path.lexists(directory / ".git"):
            return directory
    env = os.environ.get(ROOT_ENV)
    if env:
        return FsPath(os.path.realpath(env))
    return here


def confined(path: str | os.PathLike[str], root: FsPath, on_disk: bool = True) -> bool:
    """Whether `path` lies inside `root`, as written (`..` resolved) and, on disk, after following
    symbolic links: the rule for every file a plan names (its bases, its calibration). A path
    with a NUL byte names no file: False."""
    if "\0" in os.fspath(path):
        return False
    if not _inside(os.path.normpath(os.path.abspath(path)), root):
        return False
    return not on_disk or _inside(os.path.realpath(path), FsPath(os.path.realpath(root)))


def _inside(path: str, root: FsPath) -> bool:
    try:
        return os.path.commonpath([path, str(root)]) == str(root)
    except ValueError:  # another drive on Windows
        return False


def _outside_hint(root: FsPath) -> str:
    return (f"a base plan must be inside {_display(root)} (the repository: the git work tree, or "
            f"${ROOT_ENV} when there is none), written relative to this file")


def _base_path(where: Location, parent: str, current: FsPath, root: FsPath, on_disk: bool) -> FsPath:
    """The base plan `parent` names, relative to `current`, confined to `root`; PlanError located
    at the `extends` value when it is absolute or leads out of the repository (by `..` or through a
    symbolic link)."""
    shown = excerpt(parent)
    hint = _outside_hint(root)
    if "\0" in parent:
        raise PlanError([Diagnostic(where, "extends", f"extends {shown} holds a NUL byte")])
    nxt = current.parent / parent
    if not confined(nxt, root, on_disk=False):
        what = "is an absolute path outside" if os.path.isabs(parent) else "leads out of"
        raise PlanError([Diagnostic(where, "extends-outside", f"extends {shown} {what} the repository",
                                    hint)])
    if on_disk and not confined(nxt, root):
        raise PlanError([Diagnostic(where, "extends-outside", f"extends {shown} is a symbolic link out of "
                                    "the repository", hint)])
    return nxt


def read_merged(path: str | os.PathLike[str], text: str | None = None, opener: Callable[[str], bytes] = read_bytes,
                root: str | os.PathLike[str] | None = None) -> MergedSource:
    """Read a plan file and the chain of files it extends, merged, with every position kept.

    With `text`, the plan's own content is `text` (an editor buffer) and `path` only names it and
    anchors relative `extends` paths. `opener` reads a file's bytes: from disk by default, from a
    git revision for `budgetdsl diff --base REF`. Every file of the chain must lie inside `root`
    (default: `find_root(path)`, the plan's repository).
    """
    chain: list[tuple[FsPath, SourceDoc]] = []
    current = FsPath(path)
    display = str(path)
    seen: dict[str, str] = {}
    box = FsPath(os.path.realpath(root)) if root is not None else find_root(path)
    on_disk = opener is read_bytes
    where: Location | None = None
    parent = ""
    while True:
        real = os.path.realpath(current)
        if text is not None and not chain:
            doc = parse_yaml(text, display)
        elif where is None:
            doc = read_yaml_file(str(current), display, opener)
        else:
            # A base on disk is checked where it was opened (the descriptor's real path), not by
            # its path again: a link swapped after _base_path's check cannot lead out.
            reader = functools.partial(read_bytes, inside=box) if on_disk else opener
            try:
                doc = read_yaml_file(str(current), display, reader)
            except PlanError as exc:
                first = exc.diagnostics[0]
                if first.code == "outside":
                    raise PlanError([Diagnostic(where, "extends-outside", f"extends {excerpt(parent)} is a "
                                                "symbolic link out of the repository", _outside_hint(box))]) from None
                if first.code not in ("file-not-found", "not-a-file", "io"):
                    raise
                message = (f"base plan {excerpt(parent)} not found" if first.code == "file-not-found"
                           and "directory" not in first.message else f"base plan {excerpt(parent)}: {first.message}")
                from budgetdsl.io.terminal_text import inert  # the path is plan text: one line

                raise PlanError([Diagnostic(where, "extends", message,
                                            f"the path is relative to {chain[-1][1].values[()].file!r}: "
                                            f"{inert(display, keep_lines=False)}")]) from None
        seen[real] = display
        chain.append((current, doc))
        extends = doc.data.get("extends")
        if extends is None:
            break
        where = doc.values.get(("extends",), Location(display, 1, 1))
        if not isinstance(extends, str) or not extends.strip():
            raise PlanError([Diagnostic(where, "extends", "extends must be a path to a base plan",
                                        "e.g. extends: base/a100-cluster.yaml")])
        parent = extends
        if not parent.endswith((".yaml", ".yml")):
            raise PlanError([Diagnostic(where, "extends", f"extends must name a .yaml file, got {excerpt(parent)}")])
        nxt = _base_path(where, parent, current, box, on_disk)
        if os.path.realpath(nxt) in seen:
            cycle = " -> ".join([*seen.values(), _display(nxt)])
            raise PlanError([Diagnostic(where, "extends-cycle", f"extends forms a cycle: {cycle}",
                                        "a plan may not extend itself, directly or through others")])
        if len(chain) >= MAX_EXTENDS:
            raise PlanError([Diagnostic(where, "extends", f"extends chain longer than {MAX_EXTENDS} files")])
        current, display = nxt, _display(nxt)

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

    def kept(table: dict[Path, Any]) -> dict[Path, Any]:
        return {p: x for p, x in table.items() if p[:1] != path}

    return SourceDoc({k: v for k, v in doc.data.items() if k != FRAGMENT_KEY}, kept(doc.values),
                     kept(doc.keys), kept(doc.spans), kept(doc.key_spans), text=doc.text)


def _drop_replaced(merged: MergedSource, doc: SourceDoc) -> None:
    """A child value that replaces a base mapping or list also replaces the base's positions below it.

    Linear in the number of paths (times their depth, at most yaml_source.MAX_DEPTH): the child's
    paths that have nothing below them in the child replace whatever the base has below them."""
    inner = {p[:i] for p in doc.values for i in range(len(p))}  # paths with something below, in the child
    replaced = {p for p in doc.values if p and p not in inner}
    if not replaced:
        return
    doomed = [q for q in merged.values if any(q[:i] in replaced for i in range(1, len(q)))]
    for q in doomed:
        for table in (merged.values, merged.keys, merged.spans, merged.key_spans):
            table.pop(q, None)
