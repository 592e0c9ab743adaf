"""`budgetdsl check`: exit codes, output channels, JSON, and a light start (no torch/textual/sympy)."""

import json
import pathlib
import shutil
import subprocess
import sys

import pytest

from budgetdsl.cli import main

REPO = pathlib.Path(__file__).resolve().parents[2]
PLANS = sorted(str(p) for p in (REPO / "plans").glob("*.yaml"))
BROKEN = pathlib.Path(__file__).parent / "broken"


def test_valid_plans_exit_0(capsys):
    assert main(["check", *PLANS]) == 0
    out, err = capsys.readouterr()
    assert out == ""  # nothing on stdout in text mode: diagnostics and the summary go to stderr
    assert err.strip() == f"{len(PLANS)} plan{'s' if len(PLANS) > 1 else ''} valid"


def test_an_invalid_plan_exits_2_and_reports_on_stderr(capsys, monkeypatch):
    monkeypatch.chdir(BROKEN)
    assert main(["check", "unknown_key.yaml", "duplicate_key.yaml"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "unknown_key.yaml:6:3: error[unknown-key]: unknown key 'layer' in 'model'" in err
    assert "  hint: did you mean 'layers'?" in err
    assert err.rstrip().endswith("2 of 2 plans invalid (2 problems)")


def test_json_report(capsys, monkeypatch):
    monkeypatch.chdir(BROKEN)
    assert main(["check", "--format", "json", "unknown_key.yaml", str(REPO / "plans/llama2-7b.yaml")]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is False
    bad, good = report["files"]
    assert good["valid"] and good["diagnostics"] == []
    [d] = bad["diagnostics"]
    assert d["code"] == "unknown-key"
    assert d["location"] == {"file": "unknown_key.yaml", "line": 6, "col": 3}
    assert d["hint"] == "did you mean 'layers'?"


def test_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["check"])
    assert info.value.code == 2


def test_many_files_in_one_process(tmp_path, capsys):
    for i in range(200):
        shutil.copy(REPO / "plans/llama2-7b.yaml", tmp_path / f"plan{i}.yaml")
    shutil.copytree(REPO / "plans/base", tmp_path / "base")  # a link out of the directory is refused
    assert main(["check", *sorted(str(p) for p in tmp_path.glob("*.yaml"))]) == 0
    assert "200 plans valid" in capsys.readouterr().err


def test_check_does_not_import_heavy_modules():
    """Checking a plan must start fast: no torch, textual, sympy or submitit (proved in a fresh process)."""
    code = ("import sys; from budgetdsl.cli import main; rc = main(['check', '-q', *sys.argv[1:]]); "
            "heavy = sorted(m for m in ('torch', 'textual', 'sympy', 'numpy', 'rich', 'submitit') "
            "if m in sys.modules); "
            "print(heavy); sys.exit(rc)")
    result = subprocess.run([sys.executable, "-c", code, *PLANS], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_console_script_and_module_entry_points_agree():
    result = subprocess.run([sys.executable, "-m", "budgetdsl", "check", *PLANS], capture_output=True, text=True)
    assert result.returncode == 0 and "valid" in result.stderr


def test_solve_fails_on_an_infeasible_plan(tmp_path, capsys):
    (tmp_path / "base").symlink_to(REPO / "plans/base")
    tight = tmp_path / "tight.yaml"
    tight.write_text((REPO / "plans/llama2-7b.yaml").read_text().replace("deadline: 21 days", "deadline: 3 days"))
    assert main(["check", str(tight)]) == 0  # valid ...
    capsys.readouterr()
    assert main(["check", "--solve", str(tight), *PLANS]) == 1  # ... but infeasible
    err = capsys.readouterr().err
    assert f"{tight}: infeasible: deadline" in err
    assert err.rstrip().endswith(f"1 of {len(PLANS) + 1} plans infeasible")
    assert main(["check", "--solve", "--format", "json", str(tight)]) == 1
    [entry] = json.loads(capsys.readouterr().out)["files"]
    assert entry["valid"] is True and entry["feasible"] is False and entry["conflicts"]


def test_check_reads_the_calibration_a_plan_names(tmp_path, capsys):
    """A missing calibration file, or a loss it does not cover, fails `check`, not only `plan`."""
    text = (REPO / "plans/ramp-gpt-micro-proxy.yaml").read_text()
    missing = tmp_path / "missing.yaml"
    missing.write_text(text.replace("../tests/fixtures/calibration/sweep-gpt-micro-stdlib.json", "nope.json"))
    assert main(["check", str(missing)]) == 2
    assert "error[calibration-missing]" in capsys.readouterr().err
    assert main(["check", str(REPO / "plans/ramp-gpt-micro-proxy.yaml")]) == 0
