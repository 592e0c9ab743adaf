"""The suite's own layout: test folders have no __init__.py (pytest's default "prepend" import mode),
so two test files with one basename stop the whole run at collection ("import file mismatch",
exit 2, nothing runs). This names the clash instead, and runs in every `make test`."""

import collections
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent


def test_no_two_test_files_share_a_basename():
    by_name = collections.defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        by_name[path.name].append(str(path.relative_to(TESTS)))
    clashes = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not clashes, f"rename one of each: {clashes}"
