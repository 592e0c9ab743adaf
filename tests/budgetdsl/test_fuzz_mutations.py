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
                   "long_string", "gpu_range", "search_key", "search_shape"}


def test_search_mutations_write_the_new_forms_where_the_plan_reads_them():
    """The layout search's forms land under their section, as YAML the loader reads (not as a
    broken line): a GPU range, `auto` for a layout key, run.micro_batch; at the cap only on demand."""
    import yaml
    from fuzz_mutations import GPU_FORMS_FULL

    f = Fuzzer(3, full_ranges=True)
    seen: dict[str, set] = {"gpus": set(), "auto": set()}
    for name in ("minimal.yaml", "llama2-7b.yaml", "7b-h100-choose-gpus.yaml"):
        for _ in range(60):
            for op in (f.gpu_range, f.search_key):
                doc = yaml.safe_load(op(f.seeds[name]))
                hw, run = doc.get("hardware") or {}, doc.get("run") or {}
                if isinstance(hw.get("gpus"), dict):
                    seen["gpus"].add(hw["gpus"].get("max"))
                seen["auto"].update(k for k in ("tensor_parallel", "pipeline_parallel", "zero", "recompute")
                                    if hw.get(k) == "auto")
                seen["auto"].update({"micro_batch"} if run.get("micro_batch") == "auto" else set())
    assert 10000 in seen["gpus"] and 64 in seen["gpus"] and 512 in seen["gpus"]
    assert seen["auto"] == {"tensor_parallel", "pipeline_parallel", "zero", "recompute", "micro_batch"}
    assert not any(form in t for _, _, t in Fuzzer(3).mutants(400) for form in GPU_FORMS_FULL[:5])


def test_findings_of_chunks_add_up():
    """bench_fuzz adds its chunks' findings: the slowest mutant, hangs and non-finite answers of a
    chunk count even when it raised nothing else (they were added only for chunks with a crash)."""
    from fuzz_mutations import Findings

    total = Findings()
    a = Findings(mutants=10, slowest=0.2, seconds=1.0)
    b = Findings(mutants=5, slowest=3.5, hangs=1, seconds=2.0)
    b.crashes["hang"] += 1
    b.examples["hang"] = ("minimal.yaml", ("gpu_range",), "text")
    c = Findings(mutants=5, slowest=7.0, seconds=1.0)
    for part in (a, b, c):
        total.merge(part)
    assert (total.mutants, total.slowest, total.hangs, total.failures, total.seconds) == (20, 7.0, 1, 1, 4.0)


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

    from fuzz_mutations import PLANS, check_markdown

    from budgetdsl.cli import main
    from budgetdsl.exports import FORMATS

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
                json.loads(out, parse_constant=lambda c, name=name, ops=ops: bad.append(("non-finite", name, ops)))
            elif argv[-1] == "markdown" and out:
                check_markdown(out)
        path.unlink()
    assert not bad, bad[:5]


def test_the_time_bound_is_cpu_time_with_a_wall_clock_backstop():
    """A mutant is a hang when it burns `bound` CPU seconds (a loaded machine stretches wall time:
    a 2 s mutant read as a 10 s hang in bench_fuzz), or sleeps/blocks past wall_factor × bound."""
    import time

    import pytest
    from fuzz_mutations import Hang, time_bound

    with pytest.raises(Hang, match="CPU"):
        with time_bound(0.2, wall_factor=50):
            while True:
                pass
    with pytest.raises(Hang, match="wall clock"):
        with time_bound(0.05, wall_factor=4):
            time.sleep(5)
    with time_bound(0.2):
        time.sleep(0.3)  # past the CPU bound in wall time, but idle: not a hang
