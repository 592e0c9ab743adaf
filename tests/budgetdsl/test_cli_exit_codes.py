"""Exit codes a CI job can branch on: a bug is never an answer (exit 3, one line, the traceback in a
file), Ctrl-C is 130, a closed pipe is quiet, and the known crash sites of issue 14 are located
exit-2 errors."""

import ast
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from budgetdsl.cli import main
from budgetdsl.io.exit_codes import ExitCode

REPO = pathlib.Path(__file__).resolve().parents[2]
PLAN = str(REPO / "plans/llama2-7b.yaml")
CALIBRATED = REPO / "plans/ramp-gpt-micro-proxy.yaml"  # names a calibration file
ONE_LINE = re.compile(r"budgetdsl: internal error: (\w+): (.*); traceback written to (\S+)\n")


def _boom(args):
    raise ZeroDivisionError("the cost model divided by zero\nsecond line of the message")


def test_an_unexpected_exception_exits_3_with_one_line_and_the_traceback_in_a_file(
        monkeypatch, tmp_path, capsys):
    import budgetdsl.commands.plan as plan_command

    monkeypatch.setattr(plan_command, "run", _boom)
    monkeypatch.setenv("BUDGETDSL_TRACEBACK_DIR", str(tmp_path / "tb"))
    assert main(["plan", PLAN]) == ExitCode.INTERNAL == 3
    out, err = capsys.readouterr()
    assert out == ""
    match = ONE_LINE.fullmatch(err)  # exactly one line
    assert match, err
    assert match[1] == "ZeroDivisionError" and match[2] == "the cost model divided by zero"
    written = pathlib.Path(match[3])
    assert written.parent == tmp_path / "tb" and written.name.startswith("budgetdsl-traceback-")
    text = written.read_text()
    assert "Traceback (most recent call last)" in text and "in _boom" in text
    assert "second line of the message" in text  # the file has the whole message
    assert f"command: budgetdsl plan {PLAN}" in text
    assert oct(written.stat().st_mode & 0o777) == oct(0o600)  # a traceback shows plan values


@pytest.mark.parametrize("argv", [["plan", PLAN], ["export", PLAN, "--to", "hf"], ["check", "--solve", PLAN],
                                  ["diff", PLAN, PLAN], ["sweep", PLAN, "--set", "hardware.gpus=64,128"]])
def test_an_exception_deep_inside_any_command_exits_3(monkeypatch, tmp_path, capsys, argv):
    import budgetdsl.solve.solver as solver

    def broken_solver(plan, *a, **k):
        raise AttributeError("'NoneType' object has no attribute 'value'")

    monkeypatch.setattr(solver, "solve", broken_solver)
    monkeypatch.setenv("BUDGETDSL_TRACEBACK_DIR", str(tmp_path))
    assert main(argv) == 3
    err = capsys.readouterr().err
    match = ONE_LINE.search(err)
    assert match and match[1] == "AttributeError" and err.endswith(match[0])  # the last line
    assert "in broken_solver" in pathlib.Path(match[3]).read_text()


def test_a_real_process_exits_3(tmp_path):
    code = ("import sys, budgetdsl.commands.export as e\n"
            "def boom(args): raise KeyError('megatron')\n"
            "e.run = boom\n"
            "from budgetdsl.cli import main\n"
            f"sys.exit(main(['export', {PLAN!r}, '--to', 'hf']))\n")
    env = {**os.environ, "BUDGETDSL_TRACEBACK_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 3 and result.stdout == ""
    match = ONE_LINE.fullmatch(result.stderr)
    assert match and match[1] == "KeyError" and match[2] == "'megatron'"
    assert 'line 2, in boom\nKeyError:' in pathlib.Path(match[3]).read_text()


def test_an_unwritable_traceback_folder_prints_the_traceback_instead(monkeypatch, tmp_path, capsys):
    import budgetdsl.commands.plan as plan_command

    (tmp_path / "a-file").write_text("")
    monkeypatch.setattr(plan_command, "run", _boom)
    monkeypatch.setenv("BUDGETDSL_TRACEBACK_DIR", str(tmp_path / "a-file" / "tb"))
    assert main(["plan", PLAN]) == 3
    err = capsys.readouterr().err
    assert err.startswith("budgetdsl: internal error: ZeroDivisionError: the cost model divided by "
                          "zero; could not write the traceback")
    assert "Traceback (most recent call last)" in err and "in _boom" in err


def test_ctrl_c_exits_130(monkeypatch, capsys):
    import budgetdsl.commands.plan as plan_command

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(plan_command, "run", interrupted)
    assert main(["plan", PLAN]) == ExitCode.INTERRUPTED == 130
    assert capsys.readouterr().err == "budgetdsl: interrupted\n"


def test_a_closed_stdout_is_a_quiet_exit():
    """`budgetdsl ... | head`: the reader is gone before the answer is written."""
    proc = subprocess.Popen([sys.executable, "-m", "budgetdsl", "schema"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # before the child has imported anything: its first write fails
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == ExitCode.BROKEN_PIPE
    assert err == ""  # no traceback, no "Exception ignored" at shutdown


def test_a_broken_pipe_elsewhere_is_an_internal_error(tmp_path):
    """Only stdout's reader going away is quiet; a broken pipe to a subprocess is a bug."""
    code = ("import sys, budgetdsl.commands.plan as p\n"
            "def boom(args): raise BrokenPipeError(32, 'Broken pipe')\n"
            "p.run = boom\n"
            "from budgetdsl.cli import main\n"
            f"sys.exit(main(['plan', {PLAN!r}]))\n")
    env = {**os.environ, "BUDGETDSL_TRACEBACK_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 3
    assert ONE_LINE.fullmatch(result.stderr)[1] == "BrokenPipeError"


def test_usage_errors_stay_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--format", "yaml", PLAN])
    assert exc.value.code == 2


def test_exit_codes_have_one_home():
    """No command writes an exit code as a number or defines its own EXIT_ constants."""
    files = [REPO / "budgetdsl/cli.py", *sorted((REPO / "budgetdsl/commands").glob("*.py"))]
    for path in files:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Constant):
                value = node.value.value
                assert type(value) is not int, f"{path.name}:{node.lineno}: return {value}"
            if isinstance(node, (ast.Name, ast.Attribute)):
                name = node.id if isinstance(node, ast.Name) else node.attr
                assert not name.startswith("EXIT_"), f"{path.name}:{node.lineno}: {name}"


def test_docs_table_lists_every_exit_code():
    text = (REPO / "docs/cli.md").read_text()
    rows = dict(re.findall(r"^\| `(\d+)` \| `(\w+)` \|", text, re.MULTILINE))
    assert rows == {str(int(c)): c.name for c in ExitCode}


# -- the crash sites of issue 14: input problems, located, exit 2 -----------------------------------

def _plan_with_calibration(tmp_path, calibration: str) -> pathlib.Path:
    text = CALIBRATED.read_text()
    old = re.search(r"calibration: (\S+)", text)[1]
    shutil.copytree(REPO / "plans/base", tmp_path / "base")  # a copy: `extends` stays inside
    plan = tmp_path / "p.yaml"
    plan.write_text(text.replace(f"calibration: {old}", f"calibration: {calibration}"))
    return plan


def test_export_with_a_missing_calibration_is_a_located_error(tmp_path, capsys):
    plan = _plan_with_calibration(tmp_path, "missing.json")
    assert main(["export", str(plan), "--to", "hf"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert re.match(rf"{re.escape(str(plan))}:\d+:\d+: error\[calibration-missing\]: calibration "
                    r"file '.*missing.json' not found", err), err


@pytest.mark.parametrize("command", [["check"], ["plan"], ["export", "--to", "slurm"]])
def test_a_100k_deep_calibration_json_is_a_located_error(tmp_path, capsys, command):
    depth = 100_000
    (tmp_path / "deep.json").write_text('{"schema_version": 1, "trajectory": ' + "[" * depth + "]" * depth + "}")
    plan = _plan_with_calibration(tmp_path, "deep.json")
    assert main([command[0], str(plan), *command[1:]]) == 2
    err = capsys.readouterr().err
    assert re.match(rf"{re.escape(str(plan))}:\d+:\d+: error\[calibration-invalid\]: .*deep.json: not a "
                    r"calibration file \(JSON nested too deeply\)", err), err


def test_parse_calibration_bounds_the_depth_of_any_json():
    from budgetdsl.plan.calibration_file import CalibrationFileError, parse_calibration

    with pytest.raises(CalibrationFileError, match=r"^c.json: .*nested too deeply"):
        parse_calibration("[" * 200_000 + "]" * 200_000, "c.json")


def test_plot_to_a_folder_that_cannot_be_made_is_a_located_error(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    (tmp_path / "a-file").write_text("")
    target = tmp_path / "a-file" / "pictures" / "f.svg"
    assert main(["plan", PLAN, "--plot", str(target)]) == 2
    out, err = capsys.readouterr()
    assert "llama2-7b" in out  # the answer is still printed
    assert re.fullmatch(rf"{re.escape(str(tmp_path / 'a-file'))}\S*: error\[io\]: cannot write the "
                        r"picture: Not a directory\n", err), err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_plot_to_a_read_only_folder_is_a_located_error(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        assert main(["plan", PLAN, "--plot", str(folder / "f.svg")]) == 2
    finally:
        folder.chmod(0o755)
    assert "error[io]: cannot write the picture: Permission denied" in capsys.readouterr().err


@pytest.fixture
def repo(committed_repo):
    return committed_repo(lambda root: shutil.copytree(REPO / "plans", root / "plans"))


@pytest.mark.parametrize("outside", ["/etc", "../elsewhere"])
def test_diff_base_with_a_path_outside_the_repository_is_an_error(repo, capsys, outside):
    assert main(["diff", "--base", "HEAD", outside]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"budgetdsl diff: {outside}: outside the repository {repo} (--base compares paths "
                   "inside the git work tree)\n")


def test_diff_base_reports_what_git_refuses(repo, capsys):
    assert main(["diff", "--base", "HEAD", ":(nonsense)plans"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("budgetdsl diff: fatal: ") and "nonsense" in err



def test_a_crash_inside_the_tui_exits_3(monkeypatch, tmp_path, capsys):
    """Textual catches an app's exception and returns; the command must not exit 0 after it."""
    pytest.importorskip("textual")
    import budgetdsl.tui.app as tui_app
    from textual.app import App

    class Crashing(App):
        def on_mount(self) -> None:
            raise LookupError("no widget with id #gpus")

        def run(self, **kwargs):
            return super().run(headless=True, **kwargs)

    monkeypatch.setattr(tui_app, "make_app", lambda path, markers, **_: Crashing())
    monkeypatch.setenv("BUDGETDSL_TRACEBACK_DIR", str(tmp_path))
    assert main(["tui", PLAN]) == 3
    match = ONE_LINE.search(capsys.readouterr().err)
    assert match and match[1] == "LookupError" and match[2] == "no widget with id #gpus"
    assert "in on_mount" in pathlib.Path(match[3]).read_text()
