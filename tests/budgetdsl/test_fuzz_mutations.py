"""The mutation fuzzer (fuzz_mutations.py) in the suite: a fixed seed, a bounded number of mutants
of the example plans through loader, solver, renderers and every export. Zero uncaught exceptions,
zero mutants past their time bound, zero non-finite JSON. bench/bench_fuzz.py runs the long version.
"""

import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from fuzz_mutations import Fuzzer, fuzz  # noqa: E402

# ~30-60 s of suite time on a CI runner; BUDGETDSL_FUZZ_MUTANTS raises it locally.
MUTANTS = int(os.environ.get("BUDGETDSL_FUZZ_MUTANTS", "2500"))
BOUND_S = 10.0  # per mutant; the slowest takes well under a second


def test_mutants_are_deterministic_and_varied():
    a = [t for _, _, t in Fuzzer(7).mutants(50)]
    assert a == [t for _, _, t in Fuzzer(7).mutants(50)]
    assert len(set(a)) > 45
    ops = {op for _, o, _ in Fuzzer(7).mutants(400) for op in o}
    assert ops >= {"byte_flip", "token_swap", "value_swap", "extreme_number", "yaml_tag", "deep_nesting",
                   "long_string"}


def test_no_mutant_crashes_hangs_or_prints_non_finite_json():
    found = fuzz(MUTANTS, seed=14, bound_s=BOUND_S, deadline_s=120.0)
    print(found.summary())
    assert found.mutants >= min(MUTANTS, 300)
    assert found.failures == 0, found.summary()
    assert found.outcomes["exported"] > 0 and found.outcomes["invalid"] > 0  # both paths exercised


def test_mutants_through_the_command_line_never_exit_3(tmp_path, capsys, monkeypatch):
    """The same mutants as files, through `check`, `plan` (JSON, Markdown) and `export` in-process:
    every exit is 0, 1 or 2 — an internal error (3) is a finding — and JSON on stdout is strict."""
    import json
    import shutil

    from budgetdsl.cli import main
    from budgetdsl.exports import FORMATS
    from fuzz_mutations import PLANS, check_markdown

    shutil.copytree(PLANS, tmp_path / "plans")
    monkeypatch.setenv("BUDGETDSL_TRACEBACK_DIR", str(tmp_path))
    n = max(20, MUTANTS // 25)
    bad = []
    for i, (name, ops, text) in enumerate(Fuzzer(15).mutants(n)):
        path = tmp_path / "plans" / (name.replace(".yaml", f".m{i}.yaml"))
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        runs = [["check", str(path)], ["plan", str(path), "--format", "json"],
                ["plan", str(path), "--format", "markdown"]]
        runs += [["export", str(path), "--to", fmt] for fmt in FORMATS] if i % 5 == 0 else []
        for argv in runs:
            rc = main(argv)
            out = capsys.readouterr().out
            if rc not in (0, 1, 2):
                bad.append((rc, argv[0], name, ops))
            elif argv[-1] == "json" and out:
                json.loads(out, parse_constant=lambda c: bad.append(("non-finite", name, ops)))
            elif argv[-1] == "markdown" and out:
                check_markdown(out)
        path.unlink()
    assert not bad, bad[:5]
