"""`budgetdsl diff` in a throwaway git repository: changed, added, removed and broken plans."""

import json
import os
import pathlib
import shutil
import subprocess

import pytest

from budgetdsl.cli import main

REPO = pathlib.Path(__file__).resolve().parents[2]


def git(cwd, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)


def edit(path, old, new):
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


@pytest.fixture
def repo(tmp_path, monkeypatch):
    shutil.copytree(REPO / "plans", tmp_path / "plans")
    # plans may read committed calibration files (noise.calibration: ../tests/fixtures/...)
    shutil.copytree(REPO / "tests" / "fixtures" / "calibration", tmp_path / "tests" / "fixtures" / "calibration")
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "plans")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys, *args):
    rc = main(["diff", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_no_change(repo, capsys):
    rc, out, _ = run(capsys, "--base", "HEAD")
    assert rc == 0
    n = len(list((repo / "plans").glob("*.yaml")))
    assert out.splitlines()[-1] == f"{n} plans: {n} unchanged"
    rc, md, _ = run(capsys, "--base", "HEAD", "--format", "markdown")
    assert "No plan changes" in md


def test_fewer_gpus_and_a_later_deadline(repo, capsys):
    edit(repo / "plans/llama2-7b.yaml", "gpus: 1024", "gpus: 512")
    edit(repo / "plans/llama2-7b.yaml", "deadline: 21 days", "deadline: 30 days")
    rc, out, _ = run(capsys, "--base", "HEAD")
    assert rc == 0
    block = out.split("\n\n")[0].splitlines()
    assert block[0] == "plans/llama2-7b.yaml (llama2-7b): changed — feasible"
    assert any(line.split() == ["hardware.gpus", "1024", "→", "512"] for line in block)
    assert any(line.split() == ["budget.deadline", "21", "days", "→", "30", "days"] for line in block)
    assert any(line.split()[:2] == ["data", "parallel"] and line.split()[-1] == "×0.5" for line in block)
    assert any(line.split()[:1] == ["accumulation"] and line.split()[-1] == "×2" for line in block)


def test_feasible_to_infeasible_exits_1_with_a_warning_in_markdown(repo, capsys):
    edit(repo / "plans/llama2-7b.yaml", "gpus: 1024", "gpus: 256")
    rc, md, _ = run(capsys, "--base", "HEAD", "--format", "markdown")
    assert rc == 1
    row = next(line for line in md.splitlines() if line.startswith("| `llama2-7b`"))
    assert "⚠️ feasible → infeasible" in row
    assert "| deadline" in row or "→ deadline" in row  # the deadline now binds
    assert "<details><summary><code>plans/llama2-7b.yaml</code>: 1 input changed</summary>" in md
    payload = json.loads(run(capsys, "--base", "HEAD", "--format", "json")[1])
    assert payload["regressed"] is True


def test_a_changed_base_shows_on_the_plans_that_extend_it(repo, capsys):
    # every plan declares its own MFU now (the one its paper implies); they inherit the network
    edit(repo / "plans/base/a100-cluster.yaml", "network: 200 Gb/s", "network: 100 Gb/s")
    rc, out, _ = run(capsys, "--base", "HEAD")
    assert rc == 0
    extending = sorted(p.name for p in (repo / "plans").glob("*.yaml")
                       if "a100-cluster" in p.read_text() and "network:" not in p.read_text())
    changed = sorted(line.split()[0].split("/")[-1] for line in out.splitlines() if " changed — " in line)
    assert changed == extending and "llama2-7b.yaml" in changed
    assert "hardware.network" in out


def test_a_base_fragment_is_not_diffed_as_a_plan_even_with_a_name(repo, capsys):
    base = repo / "plans/base/a100-cluster.yaml"
    edit(base, "fragment: true", "fragment: true\nname: a100-cluster")
    edit(base, "tensor_parallel: 1", "tensor_parallel: 3")  # breaks the plans that extend it
    rc, out, _ = run(capsys, "--base", "HEAD")
    assert rc == 2
    assert "a100-cluster.yaml" not in out  # the fragment is no row of its own ...
    assert "plans/llama2-7b.yaml (llama2-7b): invalid" in out  # ... its plans show what it broke


def test_added_removed_and_broken_plans(repo, capsys):
    shutil.copy(repo / "plans/llama2-7b.yaml", repo / "plans/llama2-7b-copy.yaml")
    edit(repo / "plans/llama2-7b-copy.yaml", "name: llama2-7b", "name: llama2-7b-copy")
    removed = sorted((repo / "plans").glob("*.yaml"))[0]
    os.remove(removed)
    rc, out, _ = run(capsys, "--base", "HEAD")
    assert rc == 0
    assert "plans/llama2-7b-copy.yaml (llama2-7b-copy): added — feasible" in out
    assert f"plans/{removed.name} " in out and "removed" in out
    edit(repo / "plans/llama2-7b.yaml", "gpus: 1024", "gpus: 1024x")
    rc, out, err = run(capsys, "--base", "HEAD")
    assert rc == 2
    assert "plans/llama2-7b.yaml (llama2-7b): invalid — feasible → invalid" in out
    assert "error[unknown-unit]" in err


def test_two_files(repo, capsys):
    shutil.copy(repo / "plans/llama2-7b.yaml", repo / "plans/other.yaml")
    edit(repo / "plans/other.yaml", "deadline: 21 days", "deadline: 30 days")
    rc, out, _ = run(capsys, "plans/llama2-7b.yaml", "plans/other.yaml")
    assert rc == 0
    assert "budget.deadline" in out and "30 days" in out


def test_a_bad_revision_is_a_usage_error(repo, capsys):
    rc, _, err = run(capsys, "--base", "no-such-ref")
    assert rc == 2 and "budgetdsl diff:" in err


def test_output_is_deterministic(repo, capsys):
    edit(repo / "plans/llama2-7b.yaml", "gpus: 1024", "gpus: 512")
    first = run(capsys, "--base", "HEAD", "--format", "markdown")[1]
    assert run(capsys, "--base", "HEAD", "--format", "markdown")[1] == first
