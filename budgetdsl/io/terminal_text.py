"""Plan text made inert on a terminal: what the text reports and the diagnostics print.

A plan's strings (its name, launch values, even a file name from a pull request's tree) reach a
reviewer's terminal, which obeys control characters: ESC sequences (window title, clipboard via OSC
52), `\\r` and backspace that overwrite what was printed, C1 controls, bidi overrides. Each is shown
as its Python escape (`\\x1b`, `\\u202e`): shown, never obeyed. (Markdown: markdown_text; launch
scripts: exports/_text.)

A message on stderr is lines, and a line break inside a file name, a `--set` value or a ref would
print a line of its own (a forged `error[...]`). The one rule: `tell` takes a message's lines as
separate arguments and escapes every line break inside each (`\\n`, `\\r`, NEL, U+2028...), as
every other control; the message's own layout is the only place a line ends.
"""

from __future__ import annotations

import re
import sys

# C0 controls but tab and newline, DEL, C1, the Arabic letter mark, zero-width and direction marks,
# line/paragraph separators, bidi embeddings, overrides and isolates, word joiner..., the BOM.
# A surrogate is a byte of a file name that is not UTF-8 (Python reads those with surrogate escapes).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f"
                      "\ud800-\udfff\ufeff]")
_LAYOUT = re.compile("[\t\n]")


def _escaped(match: re.Match[str]) -> str:
    return match.group(0).encode("unicode_escape", "backslashreplace").decode("ascii")


def inert(text: str, keep_lines: bool = True) -> str:
    """`text` with every control or format character escaped; with `keep_lines`, newlines and tabs
    stay (a report's own layout), otherwise they are escaped too (a file name, a one-line value)."""
    text = _CONTROL.sub(_escaped, text)
    return text if keep_lines else _LAYOUT.sub(_escaped, text)


def one_line(text: str) -> str:
    """`text` inert and on one line: every control and line break escaped, tabs kept."""
    return _CONTROL.sub(_escaped, text).replace("\n", "\\n")


def tell(*lines: str, flush: bool = False) -> None:
    """Print a message for people on stderr, one argument a line, each `one_line`: the one way
    commands write to it, so that a file name, a ref or a value given on the command line is
    shown, never obeyed, and cannot start a line of its own."""
    print("\n".join(map(one_line, lines)), file=sys.stderr, flush=flush)


def json_text(text: str) -> str:
    """JSON (of json.dumps with ensure_ascii=False) with the same characters written as `\\uXXXX`
    escapes: the data stays exact, the bytes stay inert. JSON escapes C0 itself; the others can
    only stand inside strings, where the escape means the same character."""
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def inert_needed(text: str) -> bool:
    """Whether `text` holds a character that `inert` and `json_text` escape."""
    return _CONTROL.search(text) is not None
