"""PyYAML's reader pattern, given to `re` before PyYAML compiles it: import this before `yaml`.

PyYAML's pure-Python reader compiles, as `yaml` is imported, a pattern of the characters YAML
forbids, written as the complement of the allowed ranges; `re` builds that set by walking some
63,000 code points in Python, about 5 % of a cold `budgetdsl plan`, for a reader budgetdsl does
not use where libyaml parses (CSafeLoader). This module puts into `re`'s cache, under that
pattern's text, the same set written as the forbidden characters (short ranges), so PyYAML's
`re.compile` returns it from the cache: the same match for every code point (a test checks all).
"""

import re
import sys

# yaml/reader.py, Reader.NON_PRINTABLE: the characters YAML 1.1 allows, negated
READER = "[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010ffff]"
# the same set: what those ranges leave out of U+0000..U+10FFFF
FORBIDDEN = "[\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x84\x86-\x9F\uD800-\uDFFF\uFFFE\uFFFF]"


def seed() -> None:
    """The pattern cached for PyYAML, unless `yaml` is loaded already or `re` keeps no such cache."""
    cache = getattr(re, "_cache", None)
    if "yaml.reader" not in sys.modules and isinstance(cache, dict):
        cache.setdefault((str, READER, 0), re.compile(FORBIDDEN))


seed()
