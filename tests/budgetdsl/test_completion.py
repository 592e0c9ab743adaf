"""`budgetdsl completion bash|zsh|fish`: scripts the shells themselves accept, and that complete
what a user types (run by the real shells, not compared with a golden copy)."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from budgetdsl.cli import main
from budgetdsl.exports import FORMATS

REPO = pathlib.Path(__file__).resolve().parents[2]
pytest.importorskip("shtab")


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("completion")
    out = {}
    for shell in ("bash", "zsh", "fish"):
        result = subprocess.run([sys.executable, "-m", "budgetdsl", "completion", shell],
                                capture_output=True, text=True)
        assert result.returncode == 0 and result.stderr == "", result.stderr
        out[shell] = folder / f"budgetdsl.{shell}"
        out[shell].write_text(result.stdout)
    return out


def _bash_complete(script: pathlib.Path, words: list[str], cwd=REPO) -> list[str]:
    """COMPREPLY of the script's completion function for the command line `words` (the cursor at
    the end of the last word), as bash would call it on Tab."""
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    program = (f"source {script}\n"
               f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}\n"
               'COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}\n'
               'fn=$(complete -p budgetdsl | sed -E "s/.*-F ([^ ]+).*/\\1/")\n'
               '"$fn" budgetdsl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"\n'
               'printf "%s\\n" "${COMPREPLY[@]}"\n')
    result = subprocess.run(["bash", "-c", program], capture_output=True, text=True, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if line]


def test_bash_script_parses(scripts):
    result = subprocess.run(["bash", "-n", str(scripts["bash"])], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_bash_completes_commands(scripts):
    assert _bash_complete(scripts["bash"], ["budgetdsl", "ex"]) == ["export"]
    assert set(_bash_complete(scripts["bash"], ["budgetdsl", ""])) >= {
        "check", "plan", "diff", "export", "sweep", "calibrate", "tui", "schema", "completion"}


def test_bash_completes_flags_choices_and_plan_files(scripts):
    assert set(_bash_complete(scripts["bash"], ["budgetdsl", "export", "p.yaml", "--to", ""])) == set(FORMATS)
    assert _bash_complete(scripts["bash"], ["budgetdsl", "plan", "--form"]) == ["--format"]
    plans = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "plans").glob("llama2-*.yaml"))
    assert sorted(_bash_complete(scripts["bash"], ["budgetdsl", "check", "plans/llama2-"])) == plans
    assert _bash_complete(scripts["bash"], ["budgetdsl", "calibrate", "sw"]) == ["sweep"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed (apt-get install zsh)")
def test_zsh_script_parses(scripts):
    result = subprocess.run(["zsh", "-n", str(scripts["zsh"])], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert scripts["zsh"].read_text().startswith("#compdef budgetdsl")  # what compinit looks for


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed (apt-get install fish)")
def test_fish_script_parses_and_completes(scripts):
    result = subprocess.run(["fish", "-n", str(scripts["fish"])], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr

    def complete(line: str) -> list[str]:
        r = subprocess.run(["fish", "--no-config", "-c", f"source {scripts['fish']}; complete -C '{line}'"],
                           capture_output=True, text=True, cwd=REPO, env={**os.environ, "HOME": "/nonexistent"})
        assert r.returncode == 0, r.stderr
        return [c.split("\t")[0] for c in r.stdout.splitlines()]

    assert complete("budgetdsl ex") == ["export"]
    assert set(complete("budgetdsl export p.yaml --to ")) == set(FORMATS)
    assert "plans/llama2-7b.yaml" in complete("budgetdsl check plans/llama2-")


def test_unknown_shell_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["completion", "powershell"])
    assert exc.value.code == 2
    assert "invalid choice: 'powershell'" in capsys.readouterr().err


def test_other_commands_do_not_import_shtab():
    code = ("import sys; from budgetdsl.cli import main; rc = main(['check', '-q', sys.argv[1]]); "
            "print('shtab' in sys.modules); sys.exit(rc)")
    result = subprocess.run([sys.executable, "-c", code, str(REPO / "plans/llama2-7b.yaml")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
