"""Plan text made inert on a terminal: what the text reports and the diagnostics print.

A plan comes from a pull request, and its strings (the name, launch values, even the file's own
name, which `diff --base` takes from the PR's tree) reach the reviewer's terminal. A terminal obeys
control characters: ESC starts a sequence that can set the window title, clear the screen or write
the clipboard (OSC 52), `\\r` and backspace overwrite what was printed (a report could be made to
read "feasible"), the 8-bit C1 controls (U+0080–U+009F: U+009B is CSI) act like ESC sequences on
some terminals, and bidi overrides reorder a line. Every such character is shown as its Python
escape (`\\x1b`, `\\u202e`), so the text is shown, never obeyed; newlines and tabs of the
report's own layout are kept where the caller says so. (Markdown has markdown_text.py, the launch
scripts exports/_text.py.)
"""

from __future__ import annotations

import re

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


def json_text(text: str) -> str:
    """JSON (of json.dumps with ensure_ascii=False) with the same characters written as `\\uXXXX`
    escapes: the data stays exact, the bytes stay inert. JSON escapes C0 itself; the others can
    only stand inside strings, where the escape means the same character."""
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def inert_needed(text: str) -> bool:
    """Whether `text` holds a character that `inert` and `json_text` escape."""
    return _CONTROL.search(text) is not None
