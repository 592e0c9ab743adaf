"""Hostile inputs, round 2: what a second adversarial pass over every command found (each test is the
minimal reproducer, with the old behaviour in a comment), and what it tried that already held.
docs/fuzzing.md lists the round. Every case ends in an answer or a located diagnostic, in seconds.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import sys

import pytest
import yaml

from budgetdsl.cli import main
from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.loader import load_plan

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from fuzz_mutations import time_bound  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "exports"))
from export_validators import k8s_container  # noqa: E402  (the kubelet's reading of a container)

REPO = pathlib.Path(__file__).resolve().parents[2]
MINIMAL = (REPO / "plans" / "minimal.yaml").read_text()
CALIBRATIONS = REPO / "tests" / "fixtures" / "calibration"


# -- exports: plan text stays data -----------------------------------------------------------------

K8S_WORDS = ["$(BUDGETDSL_RUN_NAME)", "$(HOME)", "a$$b", "$$(X)", "$", "x$", "$(", "$(NO_SUCH)"]


@pytest.mark.parametrize("fmt", ["kubeflow", "pytorchjob"])
def test_kubernetes_variable_references_in_the_plan_stay_literal(fmt, tmp_path):
    """Kubernetes expands `$(VAR)` and turns `$$` into `$` in a container's command, args and env
    values: the command `train.py a$$b` ran as `train.py a$b`, an argument `$(HOME)` read the
    container's HOME, and launch.env FOO: '$(BUDGETDSL_RUN_NAME)' became the run's name. Each `$`
    is now written as `$$`, so what the container sees is what the plan says."""
    plan = tmp_path / "k8s.yaml"
    plan.write_text(MINIMAL + "launch:\n"
                    f"  command: {json.dumps(['train$(HOME).py', *K8S_WORDS])}\n"
                    "  env: {FOO: '$(BUDGETDSL_RUN_NAME)', BAR: 'a$$b', BAZ: '$(FOO)'}\n")
    out = tmp_path / f"job.{fmt}.yaml"
    assert main(["export", str(plan), "--to", fmt, "-q", "-o", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    containers = ([doc["spec"]["trainer"]] if fmt == "kubeflow" else
                  [r["template"]["spec"]["containers"][0] for r in doc["spec"]["pytorchReplicaSpecs"].values()])
    for c in containers:
        argv, env = k8s_container(c, {"HOME": "/root"})
        assert env["FOO"] == "$(BUDGETDSL_RUN_NAME)" and env["BAR"] == "a$$b" and env["BAZ"] == "$(FOO)"
        assert env["BUDGETDSL_RUN_NAME"] == "minimal-1b"
        assert argv[argv.index("train$(HOME).py"):] == ["train$(HOME).py", *K8S_WORDS]


# -- calibration files referenced by a plan --------------------------------------------------------

RAMP_PLAN = (REPO / "plans" / "ramp-gpt-micro-proxy.yaml").read_text().replace(
    "../tests/fixtures/calibration/", "")


def _ramp_repo(tmp_path, monkeypatch, edit) -> pathlib.Path:
    """A repository holding the ramp example plan and its sweep calibration, changed by `edit`."""
    monkeypatch.delenv("BUDGETDSL_ROOT", raising=False)
    (tmp_path / ".git").mkdir()
    cal = json.loads((CALIBRATIONS / "sweep-gpt-micro-stdlib.json").read_text())
    edit(cal)
    (tmp_path / "sweep-gpt-micro-stdlib.json").write_text(json.dumps(cal))
    plan = tmp_path / "ramp.yaml"
    plan.write_text(RAMP_PLAN)
    return plan


def _solve_located(plan: pathlib.Path, code: str, seconds: float = 10) -> str:
    from budgetdsl.solve.solver import solve

    with time_bound(seconds):
        with pytest.raises(PlanError) as info:
            solve(load_plan(plan))
    text = "\n".join(d.format() for d in info.value.diagnostics)
    assert f"error[{code}]" in text and f"{plan.name}:" in text, text
    return text


def _last_step(cal, step):
    cal["trajectory"][-1]["step"] = step


def _swap_steps(cal):
    t = cal["trajectory"]
    t[10]["step"], t[20]["step"] = t[20]["step"], t[10]["step"]


@pytest.mark.parametrize("edit, told", [
    # batch_ramp looped once per proxy step up to the last: a step of 10**12 ran for hours
    (lambda cal: _last_step(cal, 10**12), "steps"),
    (lambda cal: _last_step(cal, 10**400), "steps"),
    # steps out of order: KeyError at batch_ramp.py:140 (an internal error)
    (_swap_steps, "order"),
    (lambda cal: _last_step(cal, -5), "order"),
])
def test_a_hostile_calibration_trajectory_is_a_located_ramp_error(edit, told, tmp_path, monkeypatch):
    plan = _ramp_repo(tmp_path, monkeypatch, edit)
    text = _solve_located(plan, "ramp-trajectory")
    assert told in text


@pytest.mark.parametrize("key, value", [
    ("b_simple", float("inf")),  # ValueError at batch_ramp.py:65 (an internal error)
    ("b_simple_tokens", None),  # TypeError at batch_ramp.py:64
])
def test_a_calibration_point_without_a_finite_b_simple_is_skipped(key, value, tmp_path, monkeypatch):
    from budgetdsl.solve.solver import solve

    plan = _ramp_repo(tmp_path, monkeypatch, lambda cal: cal["trajectory"][31].__setitem__(key, value))
    with time_bound(10):
        sol = solve(load_plan(plan))
    assert sol.feasible and sol.ramp is not None


def test_a_long_calibration_trajectory_plans_its_ramp_in_linear_time(tmp_path, monkeypatch):
    """B_noise at each proxy step was found by a scan from the first point: steps × points work
    (20,000 points over 200,000 steps did not end in minutes)."""
    def dense(cal):
        first = cal["trajectory"][-1]
        cal["trajectory"] = [{**first, "step": 20 + 10 * i, "b_simple": 3.0 + (i % 7),
                              "b_simple_tokens": 64 * (3.0 + (i % 7))} for i in range(20_000)]
    from budgetdsl.solve.solver import solve

    plan = _ramp_repo(tmp_path, monkeypatch, dense)
    with time_bound(10):
        sol = solve(load_plan(plan))
    assert sol.feasible and sol.ramp is not None


# -- Markdown: the plot's image line --------------------------------------------------------------

@pytest.mark.parametrize("name", [
    "x](https://evil.example/t.png) ![y",  # was a second image, fetched from evil.example
    "a\n\n<img src=x onerror=alert(1)>\n\n# Approved",  # was raw HTML and a heading
])
def test_the_plot_link_of_a_markdown_report_keeps_the_name_inert(name, tmp_path, capsys):
    from markdown_it import MarkdownIt

    plan = tmp_path / "md.yaml"
    plan.write_text(MINIMAL.replace("name: minimal-1b", f"name: {json.dumps(name)}"))
    assert main(["plan", str(plan), "--format", "markdown", "--plot", str(tmp_path / "{name}.svg")]) == 0
    md = capsys.readouterr().out
    images, others = [], []
    for block in MarkdownIt("commonmark").parse(md):
        for tok in [block, *(block.children or [])]:
            if tok.type == "image":
                images.append((tok.attrs["src"], "".join(c.content for c in tok.children or [])))
            elif tok.type in ("link_open", "html_inline", "html_block") and "<details>" not in tok.content \
                    and "</details>" not in tok.content and "summary>" not in tok.content:
                others.append(tok.content)
    assert len(images) == 1 and images[0][0].startswith(str(tmp_path)), images
    assert images[0][1] == "frontier of " + name.replace("\n", " "), images  # the name, as text
    assert not others and md.count("\n# ") == 0, others


# -- check --dependents: reading the repository's YAML files ---------------------------------------

def test_check_dependents_outside_git_does_not_block_on_a_fifo(tmp_path, monkeypatch, capsys):
    """Outside a git work tree every *.yaml below the directory is read to find what extends a base;
    a FIFO named fifo.yaml was opened for a blocking read, and `check --dependents` hung forever."""
    import os

    (tmp_path / "plans" / "base").mkdir(parents=True)
    shutil.copy(REPO / "plans" / "base" / "a100-cluster.yaml", tmp_path / "plans" / "base")
    shutil.copy(REPO / "plans" / "llama2-7b.yaml", tmp_path / "plans")
    os.mkfifo(tmp_path / "plans" / "fifo.yaml")
    os.symlink("/dev/zero", tmp_path / "plans" / "zero.yaml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BUDGETDSL_ROOT", raising=False)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))  # no enclosing work tree
    with time_bound(10):
        code = main(["check", "--dependents", "plans/base/a100-cluster.yaml"])
    err = capsys.readouterr().err
    assert code == 0 and "1 checked because it extends a given file" in err, err


# -- diff --base ----------------------------------------------------------------------------------

@pytest.fixture
def git_repo(committed_repo):
    def fill(root):
        (root / "plans").mkdir()
        (root / "plans" / "minimal.yaml").write_text(MINIMAL)
    return committed_repo(fill)


@pytest.mark.parametrize("path", ["plans/minimal.yml", "plan/", "no-such-dir/x.yaml"])
def test_diff_base_with_a_path_that_names_nothing_is_a_usage_error(git_repo, capsys, path):
    """A misspelt path compared nothing and exited 0 ("0 plans: none"): a CI job went green."""
    assert main(["diff", "--base", "HEAD", path]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"budgetdsl diff: {path}: no such file or folder" in err, err


def test_diff_base_with_an_unknown_revision_says_what_to_do(git_repo, capsys):
    """It said `git rev-parse --verify --quiet origin/nope^{commit} failed`; and a newline in the
    revision was printed as is."""
    assert main(["diff", "--base", "origin/nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown revision 'origin/nope'" in err and "fetch" in err, err
    assert main(["diff", "--base", "HEAD\n# x"]) == 2
    err = capsys.readouterr().err
    assert "'HEAD\\n# x'" in err and err.count("\n") == 2, err  # the message and its hint


def test_diff_base_does_not_read_a_work_tree_plan_through_a_link_out_of_the_repository(
        git_repo, tmp_path, capsys):
    """The work tree of a pull request may hold a symbolic link plans/x.yaml -> a file outside the
    repository; diff --base read it and showed it in the PR comment (its name, its values)."""
    import os

    secret = tmp_path / "secret.yaml"
    secret.write_text(MINIMAL.replace("name: minimal-1b", "name: SECRET-VALUE"))
    os.symlink(secret, git_repo / "plans" / "leak.yaml")
    code = main(["diff", "--base", "HEAD", "--format", "markdown"])
    out, err = capsys.readouterr()
    assert "SECRET-VALUE" not in out + err
    assert code == 2 and "plans/leak.yaml" in err and "outside the repository" in err, err


# -- the environment ------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, code", [
    (["plan", "{plan}"], 0),
    (["plan", "{plan}", "--format", "json"], 0),
    (["export", "{plan}", "--to", "kubeflow"], 0),
    (["check", "{bad}"], 2),
])
def test_a_non_utf8_stdout_does_not_crash_and_data_stays_exact(argv, code, tmp_path):
    """With stdout in ASCII or Latin-1 (PYTHONIOENCODING, a C locale without UTF-8 mode, a Windows
    pipe in cp1252) every command died at its first '—' or '→': exit 3, UnicodeEncodeError. Results
    are now UTF-8 (what JSON, YAML and scripts are read as); diagnostics keep the terminal's
    encoding, with escapes for what it cannot show."""
    import os
    import subprocess

    name = "run — ü \u2028 ✓"
    plan = tmp_path / "p.yaml"
    plan.write_text(MINIMAL.replace("name: minimal-1b", f"name: {json.dumps(name)}"), encoding="utf-8")
    bad = tmp_path / "bad.yaml"
    bad.write_text(MINIMAL.replace("gpus: 64", "gpus: 64 ✓"), encoding="utf-8")
    words = [w.format(plan=plan, bad=bad) for w in argv]
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "PYTHONUTF8": "0", "LC_ALL": "C",
           "BUDGETDSL_TRACEBACK_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "budgetdsl", *words], capture_output=True, env=env,
                          timeout=120)
    assert done.returncode == code, done.stderr.decode("ascii", "replace")
    done.stderr.decode("ascii")  # the terminal's encoding, escapes where it lacks a character
    out = done.stdout.decode("utf-8")
    if "json" in argv:
        assert json.loads(out)["plan"] == name
    elif "kubeflow" in argv:
        assert yaml.safe_load(out)["metadata"]["annotations"]["budgetdsl.dev/plan"] == name
    elif code == 0:
        assert "run — ü" in out


# -- the terminal: plan text is shown, never obeyed -------------------------------------------------

ESCAPES = "\x1b]0;PWNED\x07\x1b[2J\r\x9b31m\u202e\x08"  # set the title, clear, CR, 8-bit CSI, RLO, BS
RAW = ("\x1b", "\x07", "\r", "\x9b", "\u202e", "\x08")


def _terminal_safe(text: str) -> None:
    found = [repr(c) for c in RAW if c in text]
    assert not found, (found, text[:400])


def test_control_characters_of_a_plan_reach_no_terminal(tmp_path, capsys):
    """A plan name `"\\e]0;PWNED\\a\\e[2J\\r…"` went raw to the terminal in `plan` and `diff` text:
    the reviewer's terminal title changed, the screen cleared, `\\r` overwrote the line (a report
    could be made to read "feasible"). A file name is plan text too (diff --base lists the PR's files)."""
    plan = tmp_path / "p.yaml"
    plan.write_text(MINIMAL.replace("name: minimal-1b", f"name: {json.dumps('run' + ESCAPES)}"))
    other = tmp_path / "q.yaml"
    other.write_text(plan.read_text().replace("gpus: 64", "gpus: 128") + "launch:\n  env: {FOO: "
                     + json.dumps("v" + ESCAPES) + "}\n")
    bad = tmp_path / f"bad{ESCAPES}.yaml"
    bad.write_text(MINIMAL.replace("gpus: 64", "gpus: lots"))
    for argv in (["plan", str(plan)], ["diff", str(plan), str(other)], ["check", str(bad)],
                 ["plan", str(bad)], ["sweep", str(plan), "--set", "hardware.gpus=64,128"],
                 ["export", str(bad), "--to", "slurm"]):
        main(argv)
        out, err = capsys.readouterr()
        _terminal_safe(out)
        _terminal_safe(err)
    main(["plan", str(plan)])
    assert "run\\x1b]0;PWNED\\x07" in capsys.readouterr().out  # shown, escaped
    for argv in (["plan", str(plan), "--format", "json"], ["diff", str(plan), str(other), "--format", "json"]):
        main(argv)
        out = capsys.readouterr().out
        _terminal_safe(out)
        data = json.loads(out)  # JSON keeps the exact text (its own escapes)
        assert "run" + ESCAPES in _strings(data)
    main(["export", str(plan), "--to", "hf", "-q"])
    out = capsys.readouterr().out
    _terminal_safe(out)
    assert json.loads(out)["run_name"] == "run" + ESCAPES
    for fmt in ("kubeflow", "pytorchjob", "skypilot"):  # PyYAML wrote U+202E and NEL raw
        main(["export", str(other), "--to", fmt, "-q"])
        out = capsys.readouterr().out
        _terminal_safe(out)
        strings = _strings(yaml.safe_load(out))
        assert "run" + ESCAPES in strings or fmt == "skypilot", fmt  # SkyPilot names no plan
        assert "v" + ESCAPES in strings or "v" + ESCAPES.replace("$", "$$") in strings, fmt


def _strings(data) -> set[str]:
    if isinstance(data, dict):
        return set().union(*map(_strings, data.values())) if data else set()
    if isinstance(data, list):
        return set().union(*map(_strings, data)) if data else set()
    return {data} if isinstance(data, str) else set()


def test_control_characters_of_a_plan_reach_no_terminal_in_the_tui(tmp_path):
    """Rich drops BEL, BS and CR but not ESC: the status bar wrote `\\x1b]0;PWNED…` to the terminal."""
    pytest.importorskip("textual")
    import asyncio

    from budgetdsl.tui.app import make_app
    from textual.geometry import Region

    plan = tmp_path / f"p{ESCAPES}.yaml"
    plan.write_text(MINIMAL.replace("name: minimal-1b", f"name: {json.dumps('run' + ESCAPES)}"))

    async def scenario() -> str:
        app = make_app(plan)
        async with app.run_test(size=(160, 40)) as pilot:
            await app.wait_solved()
            await pilot.pause()
            lines = []
            for widget in app.screen.walk_children():
                width, height = widget.size
                lines += [strip.text for strip in widget.render_lines(Region(0, 0, width, height))]
            return "\n".join(lines)

    screen = asyncio.run(scenario())
    assert "run\\x1b]0;PWNED" in screen  # the name is shown, escaped
    _terminal_safe(screen)


# -- values: what a reviewer reads is what the tool computes ---------------------------------------

@pytest.mark.parametrize("key, text", [
    ("gpus", "৪"),  # Bengali four, drawn like an 8: was accepted as 4 GPUs
    ("gpus", "６４"),  # fullwidth digits: was 64
    ("at_batch", "1\u0660Mi"),  # Arabic-Indic zero inside a number: was 10Mi
    ("tokens", "٢ * model.params"),
])
def test_a_number_is_written_in_ascii_digits(key, text):
    """The expression tokenizer's `\\d` matched every Unicode digit, and float() read them: a plan
    could show a reviewer one number and plan with another."""
    plan = REPO / "plans" / "digits.yaml"
    source = MINIMAL.replace(f"  {key}: ", f"  {key}: {text} # ", 1) if key != "gpus" else \
        MINIMAL.replace("gpus: 64", f"gpus: {text}")
    with pytest.raises(PlanError) as info:
        load_plan(plan, text=source)
    out = "\n".join(d.format() for d in info.value.diagnostics)
    assert "digits.yaml:" in out and "error[expression]" in out and "0-9" in out, out


@pytest.mark.parametrize("changes", [
    {"hardware:\n": "hardware:\n  step_overhead: 1e10 s\n", "seq_len: 2048": "seq_len: 1"},
    {"hardware:\n": "hardware:\n  step_overhead: 1e10 s\n"},
    # the same cancellation in cost_model.linear_at (solution_notes' assumptions): line 148
    {"hardware:\n": "hardware:\n  step_overhead: 1e10 s\n", "seq_len: 2048": "seq_len: 1",
     "at_batch: 1Mi": "at_batch: 1", "b_crit: 1M": "b_crit: 1"},
])
def test_a_fixed_time_that_swamps_a_micro_batch_is_no_division_by_zero(changes):
    """T(B) = B·a + c was linearised as a = (T(2 micro-batches) − T(1))/tokens: with a fixed time
    of 10^10 s per step beside microseconds of compute, the difference rounded to 0 and `f / a`
    raised ZeroDivisionError at cost_model.py:313 (exit 3). Valid values, at the ends of their
    ranges: the plan is answered."""
    from budgetdsl.solve.solver import solve

    text = MINIMAL
    for old, new in changes.items():
        assert old in text
        text = text.replace(old, new, 1)
    plan = load_plan(REPO / "plans" / "swamped.yaml", text=text)
    with time_bound(20):
        sol = solve(plan)
    assert sol.wall_clock_s > 0 if sol.feasible else sol.status is not None


@pytest.mark.parametrize("changes, where", [
    ({"seq_len: 2048": "seq_len: 2048\n  vocab: 1e9"}, "model.vocab"),  # V·d = 2e12 > N = 1.3e9
    ({"seq_len: 2048": "seq_len: 2048\n  vocab: 700000"}, "model.vocab"),  # 1.43e9 > 1.3e9
    ({"seq_len: 2048": "seq_len: 2048\n  vocab: 50000\n  flops_per_token: 1e8"}, "model.flops_per_token"),
])
def test_an_embedding_larger_than_the_model_is_a_located_error(changes, where):
    """N counts the embedding (V·d parameters) and f the LM head (6·d·V FLOPs per token); with V·d
    above N each layer had negative parameters and FLOPs, a step took −16 s, and the solver divided
    by zero (vocab 1e9 with zero: 0 on one GPU: ZeroDivisionError at cost_model.py:313, exit 3)."""
    text = MINIMAL
    for old, new in changes.items():
        text = text.replace(old, new, 1)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if row.strip().startswith(where.split(".")[1] + ":"))
    with pytest.raises(PlanError) as info:
        load_plan(REPO / "plans" / "embedding.yaml", text=text)
    out = "\n".join(d.format() for d in info.value.diagnostics)
    assert f"embedding.yaml:{line}:" in out and "error[plan-rule]" in out and "params" in out, out


# -- calibrate: its flags ---------------------------------------------------------------------------

@pytest.mark.parametrize("flags, told", [
    (["--lr", "nan"], "--lr"),  # ValueError from torch.optim (exit 3)
    (["--lr", "inf"], "--lr"),  # trained 11 steps of NaN, then exit 1 ("a measurement failed")
    (["--weight-decay", "nan"], "--weight-decay"),  # exit 3
    (["--grad-clip", "nan"], "--grad-clip"),
    (["--warmup", "-5"], "--warmup"),  # accepted
    (["--max-nonfinite", "-1"], "--max-nonfinite"),  # exit 1, "aborted at step 0"
    (["--n-head", "3"], "--n-head"),  # AssertionError in the model (exit 3)
    (["--n-head", "0"], "--n-head"),  # ZeroDivisionError (exit 3)
    (["--n-embd", "1"], "--n-embd"),
    (["--block-size", "0"], "--block-size"),  # trained on empty sequences, exit 1
    (["--tokens-per-example", "0"], "--tokens-per-example"),
])
def test_calibrate_refuses_flags_that_cannot_run_before_training(flags, told, tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "c.json"
    code = main(["calibrate", "--quick", "--quiet", "--device", "cpu", "--out", str(out), *flags])
    err = capsys.readouterr().err
    assert code == 2 and f"budgetdsl calibrate: error: {told}" in err, err
    assert not out.exists()


@pytest.mark.parametrize("where", ["folder", "/proc/budgetdsl-h29/c.json"])
def test_calibrate_to_an_output_it_cannot_write_is_refused_before_training(where, tmp_path, capsys):
    """--out /tmp said '/.tmp.908.feo0e93t.tmp: Is a directory' after the whole run; an --out in
    /proc raised RuntimeError from torch.save at the first checkpoint (exit 3)."""
    pytest.importorskip("torch")
    out = tmp_path if where == "folder" else pathlib.Path(where)
    code = main(["calibrate", "--quick", "--quiet", "--device", "cpu", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and f"budgetdsl calibrate: error: --out {out}" in err, err


# -- saving edits (the TUI's save) ----------------------------------------------------------------

def test_an_edit_of_a_plan_with_a_byte_order_mark_lands_on_its_value(tmp_path):
    """Editors on Windows start UTF-8 files with a BOM; libyaml's offsets do not count it, so the
    TUI's save wrote `gpus:1284` for gpus 128 (and refused: a YAML error at the next line)."""
    from budgetdsl.plan.edit import save_changes

    plan = tmp_path / "bom.yaml"
    plan.write_text("\ufeff" + MINIMAL, encoding="utf-8")
    save_changes(plan, {"hardware.gpus": 128, "budget.deadline": "7 days"})
    text = plan.read_text(encoding="utf-8")
    assert text.startswith("\ufeff") and "  gpus: 128\n" in text
    saved = load_plan(plan)
    assert saved.hardware.gpus == 128 and saved.budget.deadline == 7 * 86400


def test_an_edit_of_an_anchored_value_is_refused_with_the_reason(tmp_path):
    """`gpus: &g 8` with `tensor_parallel: *g`: the edit replaced `&g 8` and the save failed with
    'found undefined alias' at another line; keeping the anchor would change tensor_parallel too."""
    from budgetdsl.plan.edit import EditError, save_changes

    plan = tmp_path / "anchor.yaml"
    text = MINIMAL.replace("  gpus: 64", "  gpus: &g 8\n  tensor_parallel: *g")
    plan.write_text(text)
    with pytest.raises(EditError, match=r"hardware\.gpus .*anchor"):
        save_changes(plan, {"hardware.gpus": 16})
    assert plan.read_text() == text


def test_a_newline_in_plan_text_forges_no_line_of_a_text_report(tmp_path, capsys):
    """A name 'evil\\nunchanged: everything fine\\n8 plans: 8 unchanged' printed those lines as the
    tool's own in `plan` and `diff` text; a description value did the same in diff's inputs."""
    forged = "evil\nunchanged: everything fine\n8 plans: 8 unchanged"
    old = tmp_path / "old.yaml"
    old.write_text(MINIMAL.replace("name: minimal-1b", f"name: {json.dumps(forged)}\n"
                                   f"description: {json.dumps('d' + chr(10) + 'line')}"))
    new = tmp_path / "new.yaml"
    new.write_text(old.read_text().replace("gpus: 64", "gpus: 128").replace("line", "FORGED LINE"))
    main(["plan", str(old)])
    out = capsys.readouterr().out
    assert out.startswith("evil\\nunchanged: everything fine\\n8 plans: 8 unchanged: feasible"), out[:200]
    main(["diff", str(old), str(new)])
    lines = capsys.readouterr().out.splitlines()
    assert not any(line.startswith(("unchanged:", "8 plans", "FORGED", "line")) for line in lines), lines
    assert lines[-1] == "1 plan: 1 changed"
    based = tmp_path / "based.yaml"  # a hint quoting the base's path (was printed as is)
    based.write_text('extends: "x\\nFORGED: ok\\n.yaml"\n' + MINIMAL)
    assert main(["check", str(based)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert not any(line.startswith(("FORGED", ".yaml")) for line in err), err


def test_a_calibration_file_past_its_size_bound_is_refused_unread(tmp_path, monkeypatch):
    """A calibration was read whole, whatever its size (84 MB: 4.4 s and 843 MB of memory; a plan
    is bounded at 1 MiB). A 65 MiB file (sparse here) is now a located calibration-invalid error."""
    def nothing(cal):
        pass
    plan = _ramp_repo(tmp_path, monkeypatch, nothing)
    big = tmp_path / "sweep-gpt-micro-stdlib.json"
    with open(big, "r+b") as f:
        f.truncate(65 << 20)
    text = _solve_located(plan, "calibration-invalid", seconds=5)
    assert "MiB" in text


def test_the_tui_without_a_terminal_says_so_instead_of_waiting_forever(tmp_path):
    """`budgetdsl tui plan.yaml` in CI, or with stdin from /dev/null, drew escape codes and waited
    for keys that could never come (killed by the timeout). Textual reads keys on stdin and draws
    on stderr: without a terminal on both, the command now exits 2 at once."""
    pytest.importorskip("textual")
    import os
    import subprocess

    env = {**os.environ, "BUDGETDSL_TRACEBACK_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "budgetdsl", "tui", str(REPO / "plans" / "minimal.yaml")],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2, done.stderr[-300:]
    assert done.stderr == ("budgetdsl tui: needs an interactive terminal: it reads keys from stdin and "
                           "draws on stderr, and one of them is not a terminal\n")


@pytest.mark.parametrize("encoding", ["utf-8", "ascii"])
def test_a_file_name_that_is_not_utf8_reaches_stdout_without_a_crash(encoding, tmp_path):
    """A pull request can add plans/\\xfe.yaml (git allows any byte); Python reads the name with
    surrogate escapes, and `diff` printed it on a strict stdout: UnicodeEncodeError, exit 3."""
    import os
    import subprocess

    old, new = os.fsdecode(bytes(tmp_path) + b"/\xff.yaml"), os.fsdecode(bytes(tmp_path) + b"/\xfe.yaml")
    pathlib.Path(old).write_text(MINIMAL)
    pathlib.Path(new).write_text(MINIMAL.replace("gpus: 64", "gpus: 128"))
    env = {**os.environ, "PYTHONIOENCODING": encoding, "BUDGETDSL_TRACEBACK_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "budgetdsl", "diff", old, new], capture_output=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-300:]
    assert b"\\udcfe.yaml (minimal-1b): changed" in done.stdout, done.stdout[:300]


def test_a_keymap_file_that_is_not_utf8_is_a_problem_shown_not_a_crash(tmp_path):
    """~/.config/budgetdsl/keymap.yaml in Latin-1: UnicodeDecodeError at launch (exit 3)."""
    pytest.importorskip("textual")
    from budgetdsl.tui.keymap import load_keymap

    keymap = tmp_path / "keymap.yaml"
    keymap.write_bytes(b"quit: \xff\n")
    assert load_keymap(keymap) == ({}, [f"{keymap}: not UTF-8 text (byte 7); save it as UTF-8"])


@pytest.mark.parametrize("flags, told", [
    (["--lr", "nan"], "--lr"),  # ValueError from torch.optim (exit 3)
    (["--lr", "inf"], "--lr"),  # AssertionError (exit 3)
    (["--weight-decay", "nan"], "--weight-decay"),  # exit 3
    (["--grad-clip", "nan"], "--grad-clip"),  # accepted
    (["--plot", "/proc/budgetdsl-h29/x.svg"], "--plot"),  # FileNotFoundError after every run (exit 3)
    (["--data-mb", "0"], "--data-mb"),  # read as the default corpus size (calibrate itself refused it)
    (["--data-mb", "-1"], "--data-mb"),
])
def test_calibrate_sweep_refuses_flags_that_cannot_run_before_training(flags, told, tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "sweep.json"
    code = main(["calibrate", "sweep", "--quick", "--quiet", "--device", "cpu", "--out", str(out), *flags])
    err = capsys.readouterr().err
    assert code == 2 and f"budgetdsl calibrate sweep: error: {told}" in err, err
    assert not out.exists()


def test_a_batch_schedule_has_at_most_64_stages():
    """Each stage of a given schedule is found by a bisection inside a bisection over the run's
    tokens: 5,000 stages (10,000 YAML values, under the document's bound) took 58 s, and twice as
    many about two minutes. A schedule now has at most 64 stages, as `ramp_stages` does."""
    n = 65
    stages = ", ".join(f"{{until: {(i + 1) / n:.8f}, batch: {i + 1}M}}" for i in range(n - 1))
    text = MINIMAL + f"run: {{batch_schedule: [{stages}, {{until: 100%, batch: {n}M}}]}}\n"
    with pytest.raises(PlanError) as info:
        load_plan(REPO / "plans" / "stages.yaml", text=text)
    out = "\n".join(d.format() for d in info.value.diagnostics)
    assert "stages.yaml:" in out and "error[plan-rule]" in out and "at most 64 stages" in out, out


def test_export_never_writes_over_the_plan_it_reads(tmp_path, capsys):
    """`export plan.yaml --to slurm -o plan.yaml` (a slip of the shell's history) replaced the plan
    with the script; so did -o naming the base it extends."""
    plan = tmp_path / "p.yaml"
    base = tmp_path / "base.yaml"
    base.write_text("fragment: true\nhardware: {gpu: H100-SXM5-80GB}\n")
    plan.write_text("extends: base.yaml\n" + MINIMAL.replace("  gpu: H100-SXM5-80GB", ""))
    before = plan.read_text(), base.read_text()
    for target in (plan, base, tmp_path / "." / "p.yaml"):
        assert main(["export", str(plan), "--to", "slurm", "-q", "-o", str(target)]) == 2
        assert "error[io]" in capsys.readouterr().err
    assert (plan.read_text(), base.read_text()) == before


@pytest.mark.parametrize("name", ['"   "', '"\\t"', '" \\u3000 "'])
def test_a_blank_name_is_refused_where_it_is_written(tmp_path, name):
    """A blank name titled the report ('   : feasible') and named the exported jobs; now a located
    plan-rule error at the name (the loader's), exit 2 for check."""
    plan = tmp_path / "p.yaml"
    plan.write_text(MINIMAL.replace("name: minimal-1b", f"name: {name}"))
    with pytest.raises(PlanError) as info:
        load_plan(plan)
    d = info.value.diagnostics[0]
    assert (d.code, d.location.line) == ("plan-rule", MINIMAL.splitlines().index("name: minimal-1b") + 1)
    assert "blank" in d.message
    assert main(["check", str(plan)]) == 2


def test_a_set_value_that_breaks_a_rule_is_not_said_to_come_from_a_base(capsys):
    """A --set value breaking a plan rule was hinted as inherited: 'vocab comes from the base --set
    model.vocab=1e9; `vocab: null` under model in this plan drops it' (extends' hint, issue 16)."""
    assert main(["sweep", str(REPO / "plans" / "minimal.yaml"), "--set", "model.vocab=1e9,50000"]) == 2
    err = capsys.readouterr().err
    assert "--set model.vocab=1e9: error[plan-rule]" in err
    assert "comes from the base" not in err and "null" not in err, err
