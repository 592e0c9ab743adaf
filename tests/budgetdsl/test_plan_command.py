"""`budgetdsl plan`: exit codes, output channels and formats, --list-gpus, a light start."""

import ast
import json
import os
import pathlib
import subprocess
import sys

from budgetdsl.cli import main

REPO = pathlib.Path(__file__).resolve().parents[2]
PLANS = sorted(str(p) for p in (REPO / "plans").glob("*.yaml"))
INFEASIBLE = """name: too-soon
model: {params: 6.74e9, layers: 32, d_model: 4096, heads: 32, seq_len: 4096}
hardware: {gpu: A100-SXM4-80GB, gpus: 64, zero: 1}
budget: {deadline: 2 days}
target: {tokens: 2T, at_batch: 4Mi}
noise: {b_crit: 3M}
"""


def test_every_example_plan_is_feasible(capsys):
    assert main(["plan", *PLANS]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.count("Launch\n") == len(PLANS)


def test_json_one_plan_is_an_object_several_an_array(capsys):
    assert main(["plan", "--format", "json", str(REPO / "plans/llama2-7b.yaml")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["feasible"] is True and doc["status"] == "pinned"
    assert main(["plan", "--format", "json", *PLANS[:2]]) == 0
    docs = json.loads(capsys.readouterr().out)
    assert isinstance(docs, list) and len(docs) == 2


def test_infeasible_exits_1_and_invalid_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(INFEASIBLE)
    assert main(["plan", str(bad)]) == 1
    out, _ = capsys.readouterr()
    assert "INFEASIBLE" in out and "deadline ≥ " in out
    broken = tmp_path / "broken.yaml"
    broken.write_text(INFEASIBLE.replace("zero: 1", "zero: 1, gpu_count: 3"))
    assert main(["plan", str(bad), str(broken)]) == 2  # invalid wins, the other is still reported
    out, err = capsys.readouterr()
    assert "INFEASIBLE" in out
    assert "broken.yaml:3:" in err and "error[unknown-key]" in err
    assert main(["plan", str(tmp_path / "missing.yaml")]) == 2


def test_markdown(capsys):
    assert main(["plan", "--format", "markdown", str(REPO / "plans/gpt3-175b.yaml")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("### ✅ `gpt3-175b`: pinned (balanced)")
    assert "**Against the objective:**" in out


def test_list_gpus(capsys):
    assert main(["plan", "--list-gpus"]) == 0
    out = capsys.readouterr().out
    assert "A100-SXM4-80GB  312 TFLOP/s" in out and "NVIDIA H100 datasheet" in out
    h800 = next(line for line in out.splitlines() if line.startswith("H800-SXM5-80GB"))
    assert h800.split()[1:5] == ["989", "TFLOP/s", "1.98", "PFLOP/s"]  # the FP8 peak of hardware.precision: fp8


def test_no_plan_is_a_usage_error(capsys):
    assert main(["plan"]) == 2
    assert "give one or more plan files" in capsys.readouterr().err


def test_plan_starts_light():
    """`budgetdsl plan` imports neither sympy (the closed forms are emitted) nor torch, textual or submitit."""
    code = ("import sys\nfrom budgetdsl.cli import main\n"
            f"rc = main(['plan', '--format', 'json', {str(REPO / 'plans/llama2-7b.yaml')!r}])\n"
            "heavy = sorted(m for m in ('sympy', 'torch', 'textual', 'submitit') if m in sys.modules)\n"
            "print('HEAVY', heavy, file=sys.stderr)\nsys.exit(rc)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert res.returncode == 0, res.stderr
    assert "HEAVY []" in res.stderr


def test_plan_imports_only_what_it_needs():
    """Cold start (issue 13, item 4): `budgetdsl plan` loads the plan command alone, not the other
    commands' modules (calibrate, sweep, tui, exports, ...), no Markdown escaping for text
    output. A fresh process, as a user runs it; `--format markdown` then does import the Markdown helper."""
    code = ("import sys\nfrom budgetdsl.cli import main\n"
            "rc = main(sys.argv[1:])\n"
            "print('MODULES', sorted(m for m in sys.modules if m.startswith('budgetdsl.')"
            " or m == 'importlib.metadata'), file=sys.stderr)\nsys.exit(rc)")
    unneeded = {f"budgetdsl.commands.{c}" for c in ("calibrate", "check", "completion", "diff", "export",
                                                     "schema", "sweep", "tui")}
    unneeded |= {"budgetdsl.exports", "budgetdsl.io.markdown_text", "budgetdsl.plan.edit", "budgetdsl.solve.sweep",
                 "budgetdsl.plan.errors"}  # plan_errors: only for a plan that fails
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    for fmt in ("text", "markdown"):
        res = subprocess.run([sys.executable, "-c", code, "plan", "--format", fmt, str(REPO / "plans/minimal.yaml")],
                             capture_output=True, text=True, cwd=REPO, env=env)
        assert res.returncode == 0, res.stderr
        modules = set(ast.literal_eval(res.stderr.rsplit("MODULES ", 1)[1]))
        assert "budgetdsl.commands.plan" in modules and "budgetdsl.solve.solver" in modules
        # pydantic's plugin loader, stood in for by the command line (cli._without_pydantic_plugins)
        assert "importlib.metadata" not in modules
        loaded = modules & unneeded
        assert loaded == ({"budgetdsl.io.markdown_text"} if fmt == "markdown" else set()), loaded
    # `check` validates: no solver, no report, and no other command
    res = subprocess.run([sys.executable, "-c", code, "check", str(REPO / "plans/minimal.yaml")],
                         capture_output=True, text=True, cwd=REPO, env=env)
    assert res.returncode == 0, res.stderr
    modules = set(ast.literal_eval(res.stderr.rsplit("MODULES ", 1)[1]))
    unneeded = (unneeded - {"budgetdsl.commands.check"}) | {"budgetdsl.commands.plan", "budgetdsl.solve.solver",
                                                              "budgetdsl.report.text"}
    assert "budgetdsl.commands.check" in modules and not modules & unneeded, modules & unneeded


def test_plugins_off_without_the_loader():
    """The command line turns pydantic's plugins off and stands in for their loader (which would
    import importlib.metadata), answering no plugins as the loader does; a user's own setting is
    left to pydantic."""
    code = ("import os, sys\nfrom budgetdsl.cli import main\n"
            f"rc = main(['plan', '--format', 'json', {str(REPO / 'plans/minimal.yaml')!r}])\n"
            "from pydantic.plugin._loader import get_plugins\n"
            "print('PLUGINS', list(get_plugins()), os.environ.get('PYDANTIC_DISABLE_PLUGINS'),"
            " 'importlib.metadata' in sys.modules, file=sys.stderr)\nsys.exit(rc)")
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env)
    assert res.returncode == 0, res.stderr
    assert "PLUGINS [] __all__ False" in res.stderr
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**env, "PYDANTIC_DISABLE_PLUGINS": "some-plugin"})
    assert res.returncode == 0, res.stderr
    assert "PLUGINS [] some-plugin True" in res.stderr  # pydantic's own loader: no plugin installed
