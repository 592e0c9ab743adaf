"""The GitHub Actions example (docs/github-actions.yml), validated and run as a runner would.

The workflow is checked by the tools GitHub users check workflows with: the schema of workflow
files (check-jsonschema's bundled `vendor.github-workflows`, no network) and shellcheck on every
`run:` script. Then its steps run against a throwaway git repository: the shell steps under bash
as the runner starts them, the comment step's JavaScript under Node.js with a stand-in for the
GitHub API. The promise under test: the comment is posted (or updated in place) in every case,
and the job fails afterwards exactly when a plan is invalid or a feasible plan became infeasible.
"""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
WORKFLOW_FILE = REPO / "docs/github-actions.yml"
WORKFLOW = yaml.safe_load(WORKFLOW_FILE.read_text())
STEPS = WORKFLOW["jobs"]["plans"]["steps"]
BIN = pathlib.Path(sys.executable).parent
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def need(tool: str) -> str:
    """A validator: skips where it is missing, fails under CI (which installs .ci/validators.txt)."""
    path = shutil.which(tool, path=str(BIN)) or shutil.which(tool)
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{tool!r} is not installed, and CI must run it (.ci/validators.txt)")
        pytest.skip(f"{tool!r} is not installed (pip install -r .ci/validators.txt)")
    return path


def step(key: str) -> dict:
    """The step with this id or name, else the one that uses this action."""
    return next((s for s in STEPS if key in (s.get("id"), s.get("name"))), None) or \
        next(s for s in STEPS if key in s.get("uses", ""))


GATE = STEPS[-1]


# -- the file as GitHub reads it ---------------------------------------------------------------

def test_the_workflow_matches_the_github_workflow_schema(tmp_path):
    tool = need("check-jsonschema")
    ok = subprocess.run([tool, "--builtin-schema", "vendor.github-workflows", str(WORKFLOW_FILE)],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    broken = tmp_path / "broken.yml"  # the validator can fail: a step key GitHub does not know
    broken.write_text(WORKFLOW_FILE.read_text().replace("      - name: Install budgetdsl\n",
                                                        "      - name: Install budgetdsl\n        runz: x\n"))
    bad = subprocess.run([tool, "--builtin-schema", "vendor.github-workflows", str(broken)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "runz" in bad.stdout


def test_every_run_script_passes_shellcheck(tmp_path):
    tool = need("shellcheck")
    for i, s in enumerate(x for x in STEPS if "run" in x):
        script = tmp_path / f"step{i}.sh"
        script.write_text(s["run"])
        result = subprocess.run([tool, "--shell=bash", "--severity=style", str(script)],
                                capture_output=True, text=True)
        assert result.returncode == 0, f"{s.get('name')}:\n{result.stdout}"


def test_nothing_is_interpolated_into_a_script():
    """`${{ }}` in a script is text substitution before the shell or Node.js parse it: a value
    from the pull request could become code. Values travel through env instead."""
    for s in STEPS:
        for text in (s.get("run", ""), s.get("with", {}).get("script", "")):
            assert "${{" not in text, s.get("name")


def test_it_installs_budgetdsl_from_the_checkout_as_written():
    """No release tag exists: the template installs the checked-out clone, and says how to name
    another repository at a commit (issue 23: `@v0.1.0` named a tag that was never made)."""
    assert WORKFLOW["env"]["BUDGETDSL"] == "."
    text = WORKFLOW_FILE.read_text()
    assert "@COMMIT" in text.split("BUDGETDSL:")[0] and "v0.1.0" not in text
    assert '"$BUDGETDSL"' in step("Install budgetdsl")["run"]


def test_the_comment_comes_before_the_failure_and_both_run_after_a_failed_step():
    order = [s.get("id") or s.get("uses", s.get("name")) for s in STEPS]
    assert order.index("check") < order.index("diff") < order.index(step("github-script")["uses"])
    assert STEPS.index(step("github-script")) == len(STEPS) - 2
    for s in (step("github-script"), GATE):
        assert s["if"] == "${{ !cancelled() }}"
    for key in ("check", "diff"):
        assert "set +e" in step(key)["run"]  # the step records its exit code instead of failing


# -- the steps, run ------------------------------------------------------------------------------

def git(cwd, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)


class Runner:
    """Runs the workflow's steps in `repo` as a runner would, keeping each step's outputs."""

    def __init__(self, repo: pathlib.Path):
        self.repo = repo
        self.outputs: dict[str, dict[str, str]] = {}
        self.context = {"github.base_ref": "main"}

    def expand(self, value: str) -> str:
        def one(m: re.Match) -> str:
            expr = m.group(1)
            if expr.startswith("steps."):
                _, sid, _, key = expr.split(".")
                return self.outputs.get(sid, {}).get(key, "")
            return self.context[expr]  # a KeyError: an expression this test does not know
        return EXPRESSION.sub(one, str(value))

    def env(self, s: dict) -> dict[str, str]:
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
        env.update({k: self.expand(v) for k, v in {**WORKFLOW.get("env", {}), **s.get("env", {})}.items()})
        return env

    def shell(self, s: dict) -> subprocess.CompletedProcess:
        output = self.repo / ".github_output"
        output.write_text("")
        script = self.repo.parent / "step.sh"
        script.write_text(s["run"])
        # how the runner starts a `run:` step of a Linux job without `shell:`
        result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                                cwd=self.repo, capture_output=True, text=True, timeout=300,
                                env={**self.env(s), "GITHUB_OUTPUT": str(output)})
        if "id" in s:
            self.outputs[s["id"]] = dict(line.split("=", 1) for line in output.read_text().splitlines())
        return result

    def comment(self, existing: list[dict]) -> list:
        """The github-script step under Node.js; `github` answers from `existing` and records calls."""
        s = step("github-script")
        harness = self.repo.parent / "comment.js"
        harness.write_text("""
const fs = require("fs");
const calls = [];
const existing = JSON.parse(process.env.EXISTING);
const github = {
  paginate: async (method, args) => { calls.push(["list", args]); return existing; },
  rest: { issues: {
    listComments: "listComments",
    updateComment: async (args) => { calls.push(["update", args]); },
    createComment: async (args) => { calls.push(["create", args]); },
  } },
};
const context = { repo: { owner: "octo", repo: "plans" }, issue: { number: 7 } };
(async () => {
""" + s["with"]["script"] + """
})().then(() => fs.writeFileSync(process.env.CALLS, JSON.stringify(calls)),
          (e) => { console.error(e); process.exit(1); });
""")
        calls = self.repo.parent / "calls.json"
        result = subprocess.run([need("node"), str(harness)], cwd=self.repo, capture_output=True,
                                text=True, timeout=60,
                                env={**self.env(s), "EXISTING": json.dumps(existing), "CALLS": str(calls)})
        assert result.returncode == 0, result.stderr
        return [c for c in json.loads(calls.read_text()) if c[0] != "list"]

    def pull_request(self) -> tuple[list, subprocess.CompletedProcess]:
        """check, diff, comment (first push: create; second push: update), gate."""
        for key in ("check", "diff"):
            assert self.shell(step(key)).returncode == 0  # a step that records its code passes
        [(verb, created)] = self.comment([])
        assert verb == "create" and created["issue_number"] == 7
        theirs = {"id": 1, "user": {"type": "User"}, "body": created["body"]}  # someone quoting it
        ours = {"id": 2, "user": {"type": "Bot"}, "body": created["body"]}
        [(verb, updated)] = self.comment([theirs, ours])
        assert verb == "update" and updated["comment_id"] == 2 and updated["body"] == created["body"]
        return created["body"], self.shell(GATE)


@pytest.fixture
def repo(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "plans", repo / "plans")
    shutil.copytree(REPO / "tests/fixtures/calibration", repo / "tests/fixtures/calibration")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "plans")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")  # what checkout's fetch-depth: 0 gives
    git(repo, "checkout", "-qb", "pr")
    return repo


def edit(path: pathlib.Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_a_harmless_change_is_commented_and_passes(repo):
    edit(repo / "plans/llama2-7b.yaml", "deadline: 21 days", "deadline: 20 days")
    body, gate = Runner(repo).pull_request()
    assert body.startswith("<!-- budgetdsl-plan-report -->\nNo plan became invalid or infeasible.")
    assert "budgetdsl.yaml" not in body and "llama2-7b" in body and "20 days" in body
    assert gate.returncode == 0, gate.stdout + gate.stderr


def test_a_plan_made_infeasible_is_commented_and_then_fails(repo):
    edit(repo / "plans/llama2-7b.yaml", "deadline: 21 days", "deadline: 2 days")
    runner = Runner(repo)
    body, gate = runner.pull_request()
    assert runner.outputs == {"check": {"code": "0"}, "diff": {"code": "1"}}
    assert "this check fails" in body and "feasible → infeasible" in body
    assert gate.returncode != 0 and "budgetdsl diff exited 1" in gate.stdout


def rendered(markdown: str) -> str:
    """The comment as HTML, by a CommonMark parser with GitHub's tables and raw HTML allowed."""
    markdown_it = pytest.importorskip("markdown_it")  # installed with rich and textual
    return markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


def test_a_broken_base_and_hostile_names_are_commented_inertly_and_then_fail(repo):
    # a base that breaks the plans extending it; a valid plan (it sets its own tensor_parallel)
    # whose name carries markup, shell and backticks; an invalid one whose key does: none of it
    # may run, and none may close the comment's code block
    edit(repo / "plans/base/a100-cluster.yaml", "tensor_parallel: 1", "tensor_parallel: 3")
    seven_b = (repo / "plans/llama2-7b.yaml").read_text()
    (repo / "plans" / "$(touch pwned-file).yaml").write_text(
        seven_b.replace("name: llama2-7b", "name: \"$(touch pwned-name)`x`|<img src=x onerror=alert(1)>\"")
        .replace("hardware:\n", "hardware:\n  tensor_parallel: 1\n"))
    (repo / "plans/bad.yaml").write_text(
        seven_b.replace("name: llama2-7b", "name: bad")
        .replace("model:\n", "model:\n  \"````$(touch pwned-key)\": 1\n"))
    runner = Runner(repo)
    body, gate = runner.pull_request()
    assert runner.outputs == {"check": {"code": "2"}, "diff": {"code": "2"}}
    assert "this check fails" in body and "<details><summary>Problems</summary>" in body
    report, problems = body.split("<details><summary>Problems</summary>\n\n", 1)
    assert "pwned-name" in report and "img src" in report  # the name is shown ...
    assert "<img" not in rendered(body)  # ... and, as GitHub renders the comment, no tag of it is live
    fence = re.match(r"`+", problems).group(0)
    inside = problems[len(fence):problems.rindex(fence)]
    assert "````$(touch pwned-key)" in inside  # the diagnostic, quoted ...
    assert max(len(r) for r in re.findall(r"`+", inside)) < len(fence)  # ... and it cannot close
    assert inside.count("plans/bad.yaml") == inside.count("\nplans/bad.yaml") + inside.startswith("plans/bad.yaml")
    assert not list(repo.parent.rglob("pwned-name")) and not list(repo.parent.rglob("pwned-key"))
    assert not list(repo.parent.rglob("pwned-file"))
    assert gate.returncode != 0


def test_a_failed_diff_still_posts_a_comment_saying_so(repo):
    runner = Runner(repo)
    runner.context["github.base_ref"] = "no-such-branch"
    body, gate = runner.pull_request()
    assert runner.outputs["diff"] == {"code": "2"}
    assert "budgetdsl diff wrote no report" in body and "no-such-branch" in body
    assert gate.returncode != 0
