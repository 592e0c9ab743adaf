"""What a new user reads first says what is true: the README's install block names the version
that `budgetdsl --version` prints, no doc installs a release tag that does not exist, and the
documented `repo: local` pre-commit hooks are the repository's own hooks. (.ci/readme-install.sh
runs the install block and the hooks in a fresh clone.)"""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def _block(path: Path, heading: str, lang: str) -> str:
    text = path.read_text(encoding="utf-8")
    return re.search(rf"```{lang}\n(.*?)```", text[text.index(heading):], re.S).group(1)


def test_the_readme_the_package_and_the_command_agree_on_the_version():
    from budgetdsl import __version__

    install = _block(REPO / "README.md", "## Install from the repository", "sh")
    assert f"budgetdsl --version           # budgetdsl {VERSION}\n" in install
    assert __version__ == VERSION
    out = subprocess.run([sys.executable, "-m", "budgetdsl", "--version"], capture_output=True, text=True)
    assert out.stdout == f"budgetdsl {VERSION}\n"


def test_the_install_block_installs_from_the_clone_without_placeholders():
    install = _block(REPO / "README.md", "## Install from the repository", "sh")
    assert re.findall(r"pip install (\S+)", install) == [".", '".[tui,plot]"']
    assert not re.search(r"<\w+>|OWNER", install)


def test_no_doc_installs_a_tag_that_does_not_exist():
    tags = subprocess.run(["git", "tag"], cwd=REPO, capture_output=True, text=True).stdout.split()
    for path in [REPO / "README.md", REPO / ".pre-commit-hooks.yaml", *sorted((REPO / "docs").glob("*.*"))]:
        if path.suffix in (".svg", ".csv"):
            continue
        text = path.read_text(encoding="utf-8")
        named = set(re.findall(r"@(v\d+\.\d+\.\d+)\b", text)) | set(re.findall(r"rev: (v\d[\w.]*)", text))
        assert named <= set(tags), f"{path.name} installs tag(s) {sorted(named - set(tags))}"


def test_the_documented_local_hooks_are_the_repositorys_hooks():
    config = yaml.safe_load(_block(REPO / "docs/pr-workflow.md", "## pre-commit", "yaml"))
    [local] = config["repos"]
    assert local["repo"] == "local"
    ours = {h["id"]: h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    documented = {h["id"]: h for h in local["hooks"]}
    assert documented.keys() == ours.keys()
    for hook_id, hook in documented.items():
        assert hook["language"] == "system"  # the budgetdsl of the active environment
        for key in ("name", "entry", "files", "require_serial"):
            assert hook[key] == ours[hook_id][key], (hook_id, key)


def test_the_documented_launch_section_loads_in_a_whole_plan(tmp_path):
    from budgetdsl.plan.loader import load_plan

    launch = _block(REPO / "docs/plan-language.md", "A `launch:` section", "yaml")
    plan = tmp_path / "p.yaml"
    plan.write_text((REPO / "plans/minimal.yaml").read_text() + launch)
    loaded = load_plan(str(plan))
    assert loaded.launch.command == ["train.py", "--config", "configs/llama2-7b.yaml"]
    assert loaded.launch.env == {"NCCL_DEBUG": "WARN"}


def test_a_command_written_as_a_string_is_shown_as_a_list(tmp_path, capsys):
    from budgetdsl.cli import main

    plan = tmp_path / "p.yaml"
    plan.write_text((REPO / "plans/minimal.yaml").read_text()
                    + "launch:\n  command: python train.py --config 'my cfg.yaml'\n")
    assert main(["check", str(plan)]) == 2
    err = capsys.readouterr().err
    assert ("hint: write the program and its arguments as a list of words (never a shell string), "
            'e.g. command: ["python", "train.py", "--config", "my cfg.yaml"]') in err
