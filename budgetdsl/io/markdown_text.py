"""Plan text made inert in the Markdown of pull-request comments (report.py, diff_report.py).

A plan comes from a pull request, and its strings — the name, paths, launch fields, values as
written — land in a comment that GitHub renders. Nothing a plan says may become an image, a link,
raw HTML, a heading or a second table row there. Three contexts, three rules (CommonMark 0.31):

- `code(text)`: an inline code span whose content is verbatim. Its fence is one backtick longer
  than the longest backtick run inside (§6.1), so no content closes it early; inside a code span
  nothing is a link, an image or HTML.
- `inline(text)`: running text. Every ASCII punctuation character that can open a construct is
  backslash-escaped (§2.4: any ASCII punctuation may be), `:` and `@` and the dot of `www.`
  included so that GitHub's extended autolinks do not fire.
- `html(text)`: text inside an HTML block such as `<details><summary>…</summary>`, where Markdown
  is not parsed: HTML entities (html.escape).

All three fold line breaks and other control or format characters (bidi overrides included) into
spaces or U+FFFD first: a newline would end a table row, a blank line an HTML block, and `|` is
escaped for GitHub's tables (its table parser splits cells before inline parsing).
"""

from __future__ import annotations

import html as _html
import re
import unicodedata

_INLINE = re.compile(r"([\\`*_\[\]<>!&|~#:@])")
_WWW = re.compile(r"(?i)(www)\.")


def flat(text: str) -> str:
    """One line, no control or format characters: whitespace controls become spaces, others U+FFFD."""
    out = []
    for ch in str(text):
        cat = unicodedata.category(ch)
        if ch in "\t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029":
            out.append(" ")
        elif cat in ("Cc", "Cf", "Cs", "Co", "Cn"):
            out.append("\ufffd")
        else:
            out.append(ch)
    return "".join(out)


def inline(text: str) -> str:
    """`text` as inert Markdown running text (also safe in a table cell)."""
    return _WWW.sub(r"\1\\.", _INLINE.sub(r"\\\1", flat(text)))


def code(text: str) -> str:
    """`text` verbatim in an inline code span (also safe in a table cell)."""
    text = flat(text).replace("|", "\\|")
    runs = re.findall(r"`+", text)
    fence = "`" * (max(map(len, runs), default=0) + 1)
    pad = " " if text[:1] in ("`", " ") or text[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def html(text: str) -> str:
    """`text` as inert content of an HTML block."""
    return _html.escape(flat(text), quote=True)
