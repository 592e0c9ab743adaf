"""Plan text made inert in the Markdown of pull-request comments (the report and diff commands).

A plan's strings land in a comment GitHub renders, and none may become an image, a link, raw HTML,
a heading or a second table row. Each context has its rule (CommonMark 0.31): `code` (a fence one
backtick longer than any run inside, §6.1), `inline` (ASCII punctuation backslash-escaped, §2.4,
`:`, `@` and `www.` included against GitHub's autolinks), `html` (entities). All three first fold
control and format characters (`flat`): a newline would end a table row, a blank line an HTML block.
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
