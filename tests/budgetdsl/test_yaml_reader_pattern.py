"""The pattern budgetdsl.io.yaml_reader_pattern caches for PyYAML's reader: the same set, and used."""

import re
import subprocess
import sys

from budgetdsl.io.yaml_reader_pattern import FORBIDDEN, READER


def test_same_match_for_every_code_point():
    text = "".join(map(chr, range(0x110000)))
    ours = [m.start() for m in re.compile(FORBIDDEN).finditer(text)]
    theirs = [m.start() for m in re.compile(READER + "|(?!)").finditer(text)]  # past the cache: compiled
    assert ours == theirs and len(ours) == 0x800 + 63  # the surrogates and 63 controls


def test_the_reader_pattern_is_pyyamls():
    """READER is the text of PyYAML's own pattern (else the cache would hold an unused entry), and a
    plan's loading gives PyYAML the cached pattern."""
    code = ("import re, budgetdsl.plan.yaml_source, yaml.reader\n"
            "from budgetdsl.io.yaml_reader_pattern import FORBIDDEN\n"
            "print(yaml.reader.Reader.NON_PRINTABLE.pattern == FORBIDDEN)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.stdout.strip() == "True", res.stderr
    import inspect

    import yaml.reader

    assert f"re.compile('{READER}')" in inspect.getsource(yaml.reader).encode().decode("unicode_escape")
