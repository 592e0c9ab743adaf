"""Read a plan file's YAML safely, remembering where every key and value stands.

PyYAML composes the node tree (with the C parser where available, which keeps marks); we build the
Python values ourselves instead of letting a constructor do it, which gives four things at once:
a position for every path (for located errors after validation, as dagster and rendercv do),
duplicate keys rejected (YAML parsers keep the last one silently), no tags that construct objects,
and a bound on alias expansion, in values and in characters (a "billion laughs" document, or one
long string repeated by aliases, is an error located at the alias, not an out-of-memory).
"""

from __future__ import annotations

import dataclasses
import os
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# isort: off
import budgetdsl.io.yaml_reader_pattern  # noqa: F401 - before yaml: its reader's pattern, cheaper
import yaml

# isort: on
from budgetdsl.io.guarded_read import NotRegularFile, OutsideRoot, read_regular
from budgetdsl.plan.diagnostics import Diagnostic, Location, PlanError

try:  # the C parser is faster and keeps marks too
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader

MAX_FILE_BYTES = 1 << 20  # a plan is a page of YAML; a megabyte is not a plan
MAX_NODES = 20_000  # values after alias expansion
# Characters of keys and scalars after alias expansion: without aliases a document holds no more
# text than its file, so this bound only stops aliases that repeat a long value (an export writes
# each repetition out: 199 aliases of a 400 KB string made an 80 MB launch script).
MAX_EXPANDED_CHARS = MAX_FILE_BYTES
MAX_DEPTH = 32  # nesting of mappings and lists; a plan is four levels deep

MAX_NUMBER_CHARS = 100  # characters of one number in YAML (a double needs about 25)
EXCERPT_CHARS = 30  # of a value quoted in a message

Path = tuple[str | int, ...]


def excerpt(value: Any, limit: int = EXCERPT_CHARS) -> str:
    """A short, inert quotation of a value for a message: control and format characters (newlines,
    escapes, bidi overrides) shown escaped, at most `limit` characters, quoted."""
    text = value if isinstance(value, str) else repr(value)
    out = []
    for ch in text[: limit + 1]:
        cat = unicodedata.category(ch)
        out.append(ch.encode("unicode_escape").decode("ascii") if cat[0] in "CZ" and ch != " " else ch)
    shown = "".join(out)
    if len(shown) > limit or len(text) > limit:
        shown = shown[: limit - 1] + "…"
    if not isinstance(value, str):
        return shown  # a number, a list: as Python writes it, unquoted
    shown = shown.replace("'", "\\'")
    return f"'{shown}'"


class _Invalid:
    """A scalar that could not be read; its diagnostic is already recorded."""

    def __repr__(self) -> str:
        return "<invalid>"

_STD = "tag:yaml.org,2002:"
_SCALAR_TAGS = {f"{_STD}{t}" for t in ("str", "int", "float", "bool", "null", "timestamp")}
_CONSTRUCT = yaml.constructor.SafeConstructor()


@dataclass(frozen=True, slots=True)
class Span:
    """Character offsets [start, end) of a node in its file's text, for in-place edits."""

    file: str
    start: int
    end: int
    flow: bool = False  # a mapping or list written inline, {a: 1} or [1, 2]


@dataclass
class SourceDoc:
    """The values of one YAML document and where each path's key and value stand."""

    data: dict[str, Any]
    values: dict[Path, Location] = field(default_factory=dict)
    keys: dict[Path, Location] = field(default_factory=dict)
    spans: dict[Path, Span] = field(default_factory=dict)  # value spans
    key_spans: dict[Path, Span] = field(default_factory=dict)
    text: str = ""


def _loc(filename: str, mark: Any) -> Location:
    return Location(filename, mark.line + 1, mark.column + 1)


class _Builder:
    def __init__(self, filename: str):
        self.filename = filename
        self.doc = SourceDoc({})
        self.problems: list[Diagnostic] = []
        self.count = 0
        self.chars = 0  # of keys and scalars, aliases expanded
        self.built: set[int] = set()  # nodes built once: a node met again is an alias
        self.alias: Path | None = None  # the outermost alias being expanded

    def problem(self, mark: Any, code: str, message: str, hint: str | None = None) -> None:
        self.problems.append(Diagnostic(_loc(self.filename, mark), code, message, hint))

    def build(self, node: yaml.Node, path: Path) -> Any:
        outer = self.alias is None and id(node) in self.built
        if outer:
            self.alias = path
        self.built.add(id(node))
        value = self._build(node, path)
        if outer:
            self.alias = None
        return value

    def grow(self, text: str, mark: Any) -> None:
        """Count the characters of a key or a scalar; PlanError at the alias that takes the
        document past MAX_EXPANDED_CHARS."""
        self.chars += len(text)
        if self.chars <= MAX_EXPANDED_CHARS:
            return
        where, path = _loc(self.filename, mark), self.alias or ()
        for i in range(len(path), 0, -1):  # the alias's key, or the key of the list that holds it
            if path[:i] in self.doc.keys:
                where = self.doc.keys[path[:i]]
                break
        shown = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in path).replace(".[", "[")
        raise PlanError([Diagnostic(
            where, "too-large",
            f"the alias at {shown or 'this point'} expands the document past {MAX_EXPANDED_CHARS:,} "
            "characters, the size bound of a plan file",
            "an alias (*name) repeats its anchor's whole value: write a long value once, or "
            "shorten it (a long text belongs in a file the run reads)")])

    def _build(self, node: yaml.Node, path: Path) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise PlanError([Diagnostic(
                _loc(self.filename, node.start_mark), "too-large",
                f"the document expands to more than {MAX_NODES} values",
                "aliases (*name) that repeat large anchors multiply; write the values out")])
        if len(path) > MAX_DEPTH:
            raise PlanError([Diagnostic(_loc(self.filename, node.start_mark), "too-deep",
                                        f"values nested deeper than {MAX_DEPTH} levels")])
        loc = _loc(self.filename, node.start_mark)
        if isinstance(node, yaml.ScalarNode) and node.style in ("'", '"'):
            loc = Location(loc.file, loc.line, loc.col + 1)  # columns count inside the quotes
        self.doc.values[path] = loc
        self.doc.spans[path] = Span(self.filename, node.start_mark.index, node.end_mark.index,
                                    bool(getattr(node, "flow_style", False)))
        if isinstance(node, yaml.MappingNode):
            return self.mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            if node.tag != f"{_STD}seq":
                self.problem(node.start_mark, "tag", f"tag {excerpt(node.tag, 60)} is not allowed",
                             "plan files use plain YAML values, without tags")
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        assert isinstance(node, yaml.ScalarNode)  # the composer builds no other kind of node
        self.grow(node.value, node.start_mark)
        return self.scalar(node)

    def mapping(self, node: yaml.MappingNode, path: Path) -> dict[str, Any]:
        if node.tag != f"{_STD}map":
            self.problem(node.start_mark, "tag", f"tag {excerpt(node.tag, 60)} is not allowed",
                         "plan files use plain YAML values, without tags")
        out: dict[str, Any] = {}
        seen: dict[str, Location] = {}
        for key_node, value_node in node.value:
            if key_node.tag == f"{_STD}merge":
                self.problem(key_node.start_mark, "merge-key", "YAML merge keys ('<<') are not supported",
                             "to share values between plans, use 'extends: base.yaml'")
                continue
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != f"{_STD}str":
                self.problem(key_node.start_mark, "key-type", "a key must be a plain name",
                             "quote it if it is meant as text")
                continue
            key = key_node.value
            self.grow(key, key_node.start_mark)
            here = _loc(self.filename, key_node.start_mark)
            if key in seen:
                first = seen[key]
                self.problem(key_node.start_mark, "duplicate-key", f"duplicate key {excerpt(key)}",
                             f"it was first set at line {first.line}; keep one of the two")
                continue
            seen[key] = here
            self.doc.keys[(*path, key)] = here
            self.doc.key_spans[(*path, key)] = Span(self.filename, key_node.start_mark.index,
                                                    key_node.end_mark.index)
            out[key] = self.build(value_node, (*path, key))
        return out

    def scalar(self, node: yaml.ScalarNode) -> Any:
        tag = node.tag
        if tag not in _SCALAR_TAGS:
            self.problem(node.start_mark, "tag", f"tag {excerpt(tag, 60)} is not allowed",
                         "plan files use plain YAML values, without tags")
            return node.value
        if tag == f"{_STD}null":
            return None
        kind = tag[len(_STD):]
        if kind in ("bool", "int", "float"):
            # A tag (`!!int 0.5`, `!!bool maybe`) may force a kind onto any text, and Python's int()
            # refuses more than 4,300 digits: a value that is not one of its kind is a located error.
            # Numbers longer than MAX_NUMBER_CHARS are refused before conversion (the number gate in
            # budgetdsl.plan.values then checks every number's magnitude and finiteness).
            if kind != "bool" and len(node.value) > MAX_NUMBER_CHARS:
                self.problem(node.start_mark, "too-large",
                             f"a number written with more than {MAX_NUMBER_CHARS} characters",
                             "write large numbers with an exponent or a unit, e.g. 1.2e23 or 7B")
                return _Invalid()
            construct = {"bool": _CONSTRUCT.construct_yaml_bool, "int": _CONSTRUCT.construct_yaml_int,
                         "float": _CONSTRUCT.construct_yaml_float}[kind]
            try:
                return construct(node)
            except (ValueError, KeyError, TypeError, IndexError):
                self.problem(node.start_mark, "invalid-value",
                             f"{excerpt(node.value)} is not a valid {kind}",
                             "drop the tag: plan files use plain YAML values")
                return _Invalid()
        return node.value  # str, and timestamps kept as their text


def parse_yaml(text: str, filename: str) -> SourceDoc:
    """Parse one plan document; raise PlanError with every problem found."""
    # A byte-order mark (Windows editors write one) is not YAML content; libyaml's offsets skip it
    # and the pure-Python parser's count it, so it is set aside and the spans shifted back below:
    # they index the text as read, which an edit (budgetdsl.plan.edit, the TUI's save) rewrites in place.
    bom = 1 if text.startswith("\ufeff") else 0
    try:
        node = yaml.compose(text[bom:], Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        loc = _loc(filename, mark) if mark is not None else Location(filename, 1, 1)
        message = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        raise PlanError([Diagnostic(loc, "yaml-syntax", message,
                                    "check the indentation and the quoting around this point")]) from None
    except yaml.YAMLError as exc:  # e.g. a second document in the stream
        raise PlanError([Diagnostic(Location(filename, 1, 1), "yaml-syntax", str(exc).splitlines()[0],
                                    "a plan file holds exactly one YAML document")]) from None
    if node is None:
        raise PlanError([Diagnostic(Location(filename, 1, 1), "empty-file", "the plan file is empty",
                                    "a plan needs at least 'name', 'model', 'hardware', 'budget', "
                                    "'target' and 'noise'")])
    builder = _Builder(filename)
    if not isinstance(node, yaml.MappingNode):
        raise PlanError([Diagnostic(_loc(filename, node.start_mark), "not-a-mapping",
                                    "a plan file must be a mapping of keys to values",
                                    "start with 'name: my-run'")])
    builder.doc.data = builder.build(node, ())
    if bom:
        for spans in (builder.doc.spans, builder.doc.key_spans):
            for key, span in spans.items():
                spans[key] = dataclasses.replace(span, start=span.start + bom, end=span.end + bom)
    builder.doc.text = text
    if builder.problems:
        raise PlanError(builder.problems)
    return builder.doc


def read_bytes(path: str, inside: str | os.PathLike[str] | None = None) -> bytes:
    """Read a plan file from disk through the guarded reader (budgetdsl.io.guarded_read): a
    regular file only, without blocking, at most MAX_FILE_BYTES + 1 bytes; with `inside`, the
    file opened must lie below that directory (a base plan inside its repository)."""
    return read_regular(path, MAX_FILE_BYTES, inside)


def read_yaml_file(path: str, display: str | None = None,
                   opener: Callable[[str], bytes] = read_bytes) -> SourceDoc:
    """Read and parse a plan file, bounded in size, with located errors for unreadable files.

    `opener` reads the bytes of a path (from disk by default; from a git revision for `diff`)
    and raises FileNotFoundError for a missing file."""
    display = display or path
    try:
        raw = opener(path)
    except FileNotFoundError:
        raise PlanError([Diagnostic(Location(display), "file-not-found", "no such file")]) from None
    except IsADirectoryError:
        raise PlanError([Diagnostic(Location(display), "file-not-found", "is a directory, not a plan file",
                                    f"to check every plan in it: budgetdsl check {display}/*.yaml")]) from None
    except OutsideRoot:
        raise PlanError([Diagnostic(Location(display), "outside", "leads out of the repository "
                                    "(through a symbolic link)")]) from None
    except NotRegularFile:
        raise PlanError([Diagnostic(Location(display), "not-a-file",
                                    "not a regular file (a FIFO, a device or a socket)",
                                    "a plan is a YAML file")]) from None
    except OSError as exc:
        raise PlanError([Diagnostic(Location(display), "io", f"cannot read: {exc.strerror or exc}")]) from None
    except ValueError:  # a NUL byte in the path
        raise PlanError([Diagnostic(Location(display), "io", "the path holds a NUL byte")]) from None
    if len(raw) > MAX_FILE_BYTES:
        raise PlanError([Diagnostic(Location(display), "too-large",
                                    f"the file is larger than {MAX_FILE_BYTES >> 10} KiB")])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise PlanError([Diagnostic(Location(display, line, 1), "encoding", "the file is not valid UTF-8",
                                    "save the plan as UTF-8")]) from None
    return parse_yaml(text, display)
