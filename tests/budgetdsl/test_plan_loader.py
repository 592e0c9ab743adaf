"""Loading plans: examples, extends, late-bound references, and located errors for broken plans."""

import glob
import os
import pathlib
import textwrap

import pytest

from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.loader import load_plan
from budgetdsl.plan.model import GpuRange, Objective

REPO = pathlib.Path(__file__).resolve().parents[2]
BROKEN = pathlib.Path(__file__).parent / "broken"

MINIMAL = """\
name: minimal
model: {params: 7B, seq_len: 2048}
hardware: {gpu: H100-SXM5-80GB, gpus: 64}
target: {min_tokens: 140B}
noise: {b_crit: 2M}
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize("path", sorted(glob.glob(str(REPO / "plans" / "*.yaml"))), ids=os.path.basename)
def test_example_plans_load(path):
    plan = load_plan(path)
    assert plan.name


def test_llama2_values_in_base_units():
    plan = load_plan(REPO / "plans" / "llama2-7b.yaml")
    assert plan.hardware.gpu == "A100-SXM4-80GB"  # from the base plan
    assert plan.hardware.gpus == 1024  # from the plan itself
    assert plan.hardware.network == 25e9  # 200 Gb/s in bytes/s
    assert plan.budget.deadline == 21 * 86400
    assert plan.target.at_batch == 1024 * 4096
    assert plan.run.batch == 1024 * plan.model.seq_len
    assert plan.noise.uncertainty == pytest.approx(0.3)
    assert plan.objective is Objective.balanced


def broken_cases():
    for path in sorted(BROKEN.glob("*.yaml")):
        expected = [line[len("# expect: "):] for line in path.read_text().splitlines()
                    if line.startswith("# expect: ")]
        yield pytest.param(path.name, expected, id=path.stem)


@pytest.mark.parametrize("name, expected", list(broken_cases()))
def test_broken_plans_report_located_problems(name, expected, monkeypatch):
    """Each file under broken/ states, in its header, every diagnostic it must produce."""
    assert expected, f"{name} states no expected diagnostics"
    monkeypatch.chdir(BROKEN)
    with pytest.raises(PlanError) as info:
        load_plan(name)
    got = "\n".join(d.format() for d in info.value.diagnostics).splitlines()
    assert got == expected


def test_all_problems_of_a_file_are_reported_at_once(tmp_path):
    path = write(tmp_path, "p.yaml", """\
        name: many
        model: {params: -1, seq_len: 2048, colour: blue}
        hardware: {gpu: H100-SXM5-80GB, gpus: 64, mfu: 2}
        budget: {deadline: 3 fortnights}
        target: {min_tokens: 140B}
        noise: {b_crit: 2M}
        """)
    with pytest.raises(PlanError) as info:
        load_plan(path)
    codes = sorted(d.code for d in info.value.diagnostics)
    assert codes == ["out-of-range", "out-of-range", "unknown-key", "unknown-unit"]
    lines = sorted(d.location.line for d in info.value.diagnostics)
    assert lines == [2, 2, 3, 4]


def test_extends_chain_merges_deeply_and_the_child_wins(tmp_path):
    write(tmp_path, "base/cluster.yaml", """\
        hardware: {gpu: A100-SXM4-80GB, gpus: 256, mfu: 0.5, gpus_per_node: 8}
        budget: {deadline: 30 days}
        """)
    write(tmp_path, "base/team.yaml", """\
        extends: cluster.yaml
        hardware: {mfu: 0.45}
        noise: {b_crit: 2M}
        """)
    plan = load_plan(write(tmp_path, "plan.yaml", """\
        name: child
        extends: base/team.yaml
        model: {params: 7B, seq_len: 2048}
        hardware: {gpus: 512}
        target: {min_tokens: 140B}
        """))
    assert plan.hardware.gpus == 512  # the child
    assert plan.hardware.mfu == 0.45  # the middle
    assert plan.hardware.gpu == "A100-SXM4-80GB"  # the root
    assert plan.budget.deadline == 30 * 86400
    assert [pathlib.Path(f).name for f in plan.source.files] == ["plan.yaml", "team.yaml", "cluster.yaml"]


def test_a_base_value_may_refer_to_a_field_the_child_sets(tmp_path):
    write(tmp_path, "base.yaml", """\
        target: {min_tokens: 20 * model.params}
        noise: {b_crit: 2M}
        hardware: {gpu: H100-SXM5-80GB, gpus: 64}
        """)
    plan = load_plan(write(tmp_path, "plan.yaml", """\
        name: chinchilla-style
        extends: base.yaml
        model: {params: 70B, seq_len: 2048}
        """))
    assert plan.target.min_tokens == pytest.approx(1.4e12)


def test_an_error_in_a_base_points_into_the_base(tmp_path):
    write(tmp_path, "base.yaml", "hardware:\n  gpu: H100-SXM5-80GB\n  gpus: lots\n")
    path = write(tmp_path, "plan.yaml", "extends: base.yaml\n" + "\n".join(
        line for line in MINIMAL.splitlines() if not line.startswith("hardware")) + "\n")
    with pytest.raises(PlanError) as info:
        load_plan(path)
    [d] = info.value.diagnostics
    assert (pathlib.Path(d.location.file).name, d.location.line, d.location.col) == ("base.yaml", 3, 9)


def test_a_rule_broken_by_a_base_key_says_where_it_came_from_and_how_to_drop_it(tmp_path):
    """issue 16: the base gives noise.b_crit, the plan kaplan_loss: two B_crit sources."""
    write(tmp_path, "base.yaml", MINIMAL)  # noise: {b_crit: 2M} on line 5
    path = write(tmp_path, "plan.yaml", "extends: base.yaml\nnoise:\n  kaplan_loss: 2.2\n")
    with pytest.raises(PlanError) as info:
        load_plan(path)
    [d] = info.value.diagnostics
    assert d.message.startswith("give exactly one of b_crit, kaplan_loss or calibration")
    line = next(i for i, text in enumerate(MINIMAL.splitlines(), 1) if "b_crit" in text)
    import re

    m = re.match(r"b_crit comes from the base (\S+):(\d+):\d+; ", d.hint)
    assert m and (pathlib.Path(m[1]).resolve(), int(m[2])) == ((tmp_path / "base.yaml").resolve(), line)
    assert d.hint.endswith("`b_crit: null` under noise in this plan drops it")
    # ... and the advice works
    path.write_text("extends: base.yaml\nnoise:\n  kaplan_loss: 2.2\n  b_crit: null\n")
    assert load_plan(path).noise.kaplan_loss == 2.2
    # a rule broken inside one file has no such hint
    path.write_text(MINIMAL.replace("noise: {b_crit: 2M}", "noise: {b_crit: 2M, kaplan_loss: 2.2}"))
    with pytest.raises(PlanError) as info:
        load_plan(path)
    assert not info.value.diagnostics[0].hint


@pytest.mark.parametrize(("key", "text"), [("hardware.mfu", "40"), ("hardware.overlap", "80"),
                                         ("noise.uncertainty", "30"), ("hardware.mfu", "100")])
def test_a_fraction_given_as_a_percentage_asks_did_you_mean(tmp_path, key, text):
    """issue 16: `mfu: 40` -> must be at most 1, got 40; did you mean 40%? (and 40% loads)."""
    section, name = key.split(".")
    path = write(tmp_path, "p.yaml", MINIMAL + f"{section}: {{{name}: {text}}}\n"
                 if section not in MINIMAL else MINIMAL.replace(f"{section}: {{", f"{section}: {{{name}: {text}, "))
    with pytest.raises(PlanError) as info:
        load_plan(path)
    [d] = info.value.diagnostics
    assert d.message == f"must be at most 1, got {text}"
    assert d.hint.startswith(f"did you mean {text}%?")
    path.write_text(path.read_text().replace(f"{name}: {text}", f"{name}: {text}%"))
    plan = load_plan(path)
    assert getattr(getattr(plan, section), name) == pytest.approx(int(text) / 100)


def test_a_fraction_far_out_of_range_gets_no_percentage_hint(tmp_path):
    path = write(tmp_path, "p.yaml", MINIMAL.replace("hardware: {", "hardware: {mfu: 400, "))
    with pytest.raises(PlanError) as info:
        load_plan(path)
    assert not info.value.diagnostics[0].hint


@pytest.mark.parametrize("section", ["model", "hardware", "target", "noise"])
def test_a_missing_section_shows_an_example_of_each_way_to_write_it(tmp_path, section):
    """issue 16: each example the hint shows is a whole section the loader accepts."""
    from budgetdsl.plan.errors import SECTION_EXAMPLES

    lines = MINIMAL.splitlines()
    without = "\n".join(line for line in lines if not line.startswith(section + ":")) + "\n"
    with pytest.raises(PlanError) as info:
        load_plan(write(tmp_path, "p.yaml", without))
    [d] = info.value.diagnostics
    assert d.code == "missing-key"
    for example in SECTION_EXAMPLES[section]:
        shown = f"    {section}:\n" + "\n".join(f"      {line}" for line in example.splitlines())
        assert shown in d.hint
        body = textwrap.indent(example, "  ")
        load_plan(write(tmp_path, "q.yaml", without + f"{section}:\n{body}\n"))  # the file is read at solve


def test_a_child_mapping_replacing_a_base_scalar_points_into_the_child(tmp_path):
    write(tmp_path, "base.yaml", "hardware:\n  gpu: H100-SXM5-80GB\n  gpus: 64\n")
    path = write(tmp_path, "plan.yaml", MINIMAL.replace(
        "hardware: {gpu: H100-SXM5-80GB, gpus: 64}", "extends: base.yaml\nhardware:\n  gpus: {min: 16, max: 8}"))
    with pytest.raises(PlanError) as info:
        load_plan(path)
    [d] = info.value.diagnostics
    assert d.location.file.endswith("plan.yaml") and d.message == "max (8) is below min (16)"


def test_gpu_range():
    plan_text = MINIMAL.replace("gpus: 64", "gpus: {min: 8, max: 2^6, step: 2 * 4}")
    from budgetdsl.plan.loader import MergedSource, load_merged
    from budgetdsl.plan.yaml_source import parse_yaml
    doc = parse_yaml(plan_text, "p.yaml")
    plan = load_merged(MergedSource(doc.data, doc.values, doc.keys, ["p.yaml"]))
    assert isinstance(plan.hardware.gpus, GpuRange)
    assert list(plan.hardware.gpus.counts()) == [8, 16, 24, 32, 40, 48, 56, 64]


def test_a_missing_file_is_a_located_error(tmp_path):
    with pytest.raises(PlanError) as info:
        load_plan(tmp_path / "nope.yaml")
    assert info.value.diagnostics[0].code == "file-not-found"


def test_a_plan_never_executes_code(tmp_path):
    marker = tmp_path / "pwned"
    path = write(tmp_path, "p.yaml", MINIMAL + f'extra: !!python/object/apply:os.system ["touch {marker}"]\n')
    with pytest.raises(PlanError):
        load_plan(path)
    assert not marker.exists()


def test_a_reference_to_a_value_that_is_not_a_number(tmp_path):
    """Found by the fuzzer: a referenced field holding null (or a list) is a located error."""
    path = write(tmp_path, "p.yaml", MINIMAL.replace("target: {min_tokens: 140B}",
                                                     "target: {min_tokens: 20 * model.params}").replace(
        "params: 7B", "params: null"))
    with pytest.raises(PlanError) as info:
        load_plan(path)
    messages = [(d.location.line, d.message) for d in info.value.diagnostics]
    assert (4, "'model.params' is not a number here (None)") in messages


BLOCK = """\
name: typo
model: {params: 7B, seq_len: 2048, heads: 32}
hardware:
  gpu: H100-SXM5-80GB
  gpus: 64
target: {min_tokens: 140B}
noise: {b_crit: 2M}
run:
  micro_batch: 2
"""


@pytest.mark.parametrize(("key", "text", "message", "hint"), [
    # a searched key: what it takes, and `auto` suggested when the word is close to it
    ("tensor_parallel", "aut", "expected a whole number or 'auto', got 'aut'", "did you mean 'auto'?"),
    ("pipeline_parallel", "Auto", "expected a whole number or 'auto', got 'Auto'", "did you mean 'auto'?"),
    ("micro_batch", "autp", "expected a whole number or 'auto', got 'autp'", "did you mean 'auto'?"),
    ("tensor_parallel", "'auto '", "expected a whole number or 'auto', got 'auto '", "did you mean 'auto'?"),
    ("tensor_parallel", "two", "expected a whole number or 'auto', got 'two'",
     "write a whole number, or auto to let the solver search it"),
    ("zero", "aut", "'aut' is not one of 0, 1, 2, 3 or 'auto'", "did you mean 'auto'?"),
    ("recompute", "Full", "'Full' is not one of 'none', 'selective', 'full' or 'auto'", "did you mean 'full'?"),
    # hardware.gpus takes no `auto`: its range forms let the solver choose the count
    ("gpus", "auto", "expected a whole number, got 'auto': 'hardware.gpus' takes no 'auto'",
     "to let the solver choose the GPU count, give a range: {max: 256} (at most 256 GPUs) or "
     "{min: 64, max: 512, step: 64}"),
    ("gpus", "{max: aut}", "expected a whole number, got 'aut': 'hardware.gpus.max' takes no 'auto'", None),
])
def test_a_misspelt_auto_says_what_the_key_takes(tmp_path, key, text, message, hint):
    """issue 13: `tensor_parallel: aut` was 'unknown unit'; located at the word, one diagnostic."""
    line = f"  {key}: {text}"
    old = "  micro_batch: 2" if key == "micro_batch" else "  gpus: 64"
    new = line if key in ("micro_batch", "gpus") else f"  gpus: 64\n{line}"
    path = write(tmp_path, "p.yaml", BLOCK.replace(old, new))
    with pytest.raises(PlanError) as info:
        load_plan(path)
    [d] = info.value.diagnostics
    lineno = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if t == line)
    word = text.strip("{}'").split(": ")[-1].strip()
    assert (d.location.line, d.location.col) == (lineno, line.index(word) + 1), d.format()
    assert (d.message, d.hint) == (message, hint)
    assert d.code in ("invalid-value", "invalid-choice")


@pytest.mark.parametrize("key", ["tensor_parallel", "pipeline_parallel", "zero", "recompute", "micro_batch"])
def test_auto_spelt_right_still_loads(tmp_path, key):
    old = "  micro_batch: 2" if key == "micro_batch" else "  gpus: 64"
    new = "  micro_batch: auto" if key == "micro_batch" else f"  gpus: 64\n  {key}: auto"
    plan = load_plan(write(tmp_path, "p.yaml", BLOCK.replace(old, new)))
    section = plan.run if key == "micro_batch" else plan.hardware
    assert getattr(section, key) == "auto"
