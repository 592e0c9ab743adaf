"""No string from outside reaches a terminal as control bytes (issue 23 defect 7).

One list of hostile strings — ESC sequences (an OSC window title, a screen clear), C0 and C1
controls, NEL, a bidi override, zero-width and isolate characters — is fed through every way text
enters budgetdsl (a plan's name and launch values, a file's name, a `--set` value, an `-o` path, a
`diff --base` path and ref, a calibration's device name), and every output path is read back: the
text, JSON and Markdown reports, the sweep's tables, every export format (its file and its notes on
stderr), the error messages, `check`'s diagnostics and `diff`. None may hold a raw control or format
character but the newline and the tab of a report's own layout; JSON holds the escaped forms.
A line break in an outside string (LF, CR LF, CR, NEL, U+2028) must not forge a line: each sink
prints no more lines for it than for the same string with its breaks replaced by a letter; only a
YAML export or a CSV table, whose syntax quotes a multi-line value (a block scalar, a quoted
field) and whose readers parse it back exact, may carry the value's own lines on stdout.
"""

import importlib.util
import json
import os
import pathlib
import re
import subprocess
import unicodedata

import pytest

from budgetdsl.cli import main
from budgetdsl.exports import FORMATS

HOSTILE = {
    "osc-title": "\x1b]0;pwned\x07",
    "screen-clear": "\x1b[2J",
    "c0": "bell\x07back\x08cr\rvt\x0bff\x0c",
    "c1-csi": "\x9b31m",
    "nel": "a\x85b",
    "bidi-override": "abc\u202edcba",
    "zero-width": "z\u200bw\u200dj\ufeff",
    "isolate": "\u2066iso\u2069",
    "line-separator": "l\u2028p\u2029",
    "newline": "n\nforged.yaml:1:1: error[forged]: a line of its own",
    "crlf": "c\r\nforged: hint: another line\r\n",
}
BREAKS = re.compile("[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")  # what str.splitlines splits at


def flat(hostile: str) -> str:
    """`hostile` with every line break replaced by a letter: the same sinks' baseline."""
    return BREAKS.sub("_", hostile)

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "fixtures/calibration/gpt-micro-stdlib.json"


def raw_controls(text: str) -> list[str]:
    """The control and format characters of `text` a terminal would act on (newline and tab are a
    report's layout)."""
    return sorted({repr(c) for c in text
                   if c not in "\n\t" and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs")})


def _plan_text(name: str, value: str) -> str:
    q = json.dumps  # a JSON string is a YAML double-quoted scalar: the escapes stand for the characters
    return (f"name: {q(name)}\ndescription: {q('about ' + value)}\n"
            "model: {params: 1B, layers: 16, d_model: 2048, heads: 16, seq_len: 2048}\n"
            "hardware: {gpu: H100-SXM5-80GB, gpus: 16}\nbudget: {deadline: 30 days}\n"
            "target: {min_tokens: 20B}\nnoise: {b_crit: 2M}\n"
            f"launch: {{env: {{NOTE: {q(value)}}}, command: [train.py, --tag, {q(value)}]}}\n")


class Sinks:
    """Runs the CLI in process and records each sink's leaks."""

    def __init__(self, capsys):
        self.capsys = capsys
        self.leaks: dict[str, list[str]] = {}
        self.lines: dict[str, int] = {}  # each sink's (and stream's) line count
        self.baseline = False  # running the flat twin: only the line counts are wanted

    def run(self, sink: str, argv: list[str], files: tuple[pathlib.Path, ...] = (),
            quoted: bool = False) -> tuple[int, str, str]:
        """Run `argv`; `quoted`: stdout and `files` are YAML or CSV, which quote a value's lines."""
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:  # argparse usage errors
            code = exc.code
        out, err = self.capsys.readouterr()
        assert code != 3, f"{sink}: internal error\n{err}"
        for stream, text in (("stdout", out), ("stderr", err)):
            if stream == "stderr" or not quoted:
                self.lines[f"{sink} ({stream})"] = len(text.splitlines())
            if raw_controls(text):
                self.leaks[f"{sink} ({stream})"] = raw_controls(text)
        for f in files:
            text = f.read_text(errors="surrogateescape") if f.exists() else ""
            if not quoted:
                self.lines[f"{sink} (file)"] = len(text.splitlines())
            if raw_controls(text):
                self.leaks[f"{sink} (file {f.name})"] = raw_controls(text)
        return code, out, err

    def check(self, drive, hostile: str, root: pathlib.Path) -> None:
        """Run `drive(self, hostile, folder)`; no leak, and where `hostile` breaks lines, no sink
        prints more lines than `drive` of its flat twin does."""
        (root / "h").mkdir()
        drive(self, hostile, root / "h")
        assert self.leaks == {}, "\n".join(f"{k}: {v}" for k, v in self.leaks.items())
        if BREAKS.search(hostile):
            got, self.lines = self.lines, {}
            self.baseline = True
            (root / "f").mkdir()
            drive(self, flat(hostile), root / "f")
            forged = {k: (n, self.lines[k]) for k, n in got.items() if k in self.lines and n > self.lines[k]}
            assert forged == {}, "lines (with the breaks, without): " + "; ".join(
                f"{k}: {v}" for k, v in forged.items())


@pytest.fixture(params=list(HOSTILE), ids=list(HOSTILE))
def hostile(request):
    return HOSTILE[request.param]


def _plan_sinks(s: Sinks, hostile: str, tmp_path: pathlib.Path) -> None:
    os.chdir(tmp_path)
    plan = tmp_path / f"p{hostile}.yaml"  # the file's name is hostile, and so is its text
    plan.write_text(_plan_text(f"run{hostile}", hostile))
    other = tmp_path / "q.yaml"
    other.write_text(_plan_text(f"other{hostile}", hostile + "2").replace("gpus: 16", "gpus: 32"))
    bad = tmp_path / f"bad{hostile}.yaml"
    bad.write_text(_plan_text(f"bad{hostile}", hostile).replace("H100-SXM5-80GB", json.dumps(f"H9{hostile}")))
    for fmt in ("text", "json", "markdown"):
        code, out, _ = s.run(f"plan --format {fmt}", ["plan", plan, "--format", fmt])
        assert code == 0 and out
    s.run("plan of a missing file", ["plan", tmp_path / f"missing{hostile}.yaml"])
    s.run("plan of an invalid plan", ["plan", bad])
    s.run("plan --plot into a missing folder", ["plan", plan, "--plot", tmp_path / f"nowhere{hostile}" / "p.svg"])
    if not s.baseline and importlib.util.find_spec("matplotlib") is not None:  # the name in its title
        (tmp_path / "pics").mkdir()
        s.run("plan --plot", ["plan", plan, "--plot", tmp_path / "pics" / "{name}.svg"])
        for picture in (tmp_path / "pics").iterdir():
            if raw_controls(picture.read_text()):
                s.leaks["plan --plot (the picture)"] = raw_controls(picture.read_text())
    for fmt in ("text", "json"):
        s.run(f"check --format {fmt}", ["check", "--solve", "--format", fmt, plan, bad])
    for fmt in ("text", "json", "markdown"):
        s.run(f"diff --format {fmt}", ["diff", "--format", fmt, plan, other])
    for to in FORMATS:
        yaml = FORMATS[to].suffix == ".yaml"
        code, out, _ = s.run(f"export --to {to}", ["export", plan, "--to", to], quoted=yaml)
        out_file = tmp_path / f"job-{to}.out"
        s.run(f"export --to {to} -o", ["export", plan, "--to", to, "-o", out_file], files=(out_file,), quoted=yaml)
    s.run("export -o into a missing folder", ["export", plan, "--to", "slurm", "-o",
                                              tmp_path / f"nowhere{hostile}" / "job.sh"])
    s.run("an unrecognized argument", ["export", plan, "--to", "slurm", hostile])
    s.run("an invalid choice", ["plan", plan, "--format", hostile])
    s.run("export -o onto the plan", ["export", plan, "--to", "slurm", "-o", plan])
    for fmt in ("text", "csv", "json"):
        s.run(f"sweep --format {fmt}", ["sweep", plan, "--format", fmt, "--set", "hardware.gpus=16,32",
                                        "--set", f"hardware.gpu=H100-SXM5-80GB,{hostile}"], quoted=fmt == "csv")
        s.run(f"sweep --format {fmt} of a bad --set", ["sweep", plan, "--format", fmt,
                                                       "--set", f"hardware.gpus={hostile}"], quoted=fmt == "csv")
        s.run(f"sweep --format {fmt} of an unknown --set path", ["sweep", plan, "--format", fmt,
                                                                  "--set", f"hardware.gp{hostile}=1,2"])


def test_plan_text_and_file_names_reach_no_output_raw(hostile, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # undone after the test
    Sinks(capsys).check(_plan_sinks, hostile, tmp_path)


def _committed(root: pathlib.Path, hostile: str) -> None:
    """A git repository at `root` whose committed plans' names and text are hostile, changed since."""
    root.mkdir()
    (root / "p.yaml").write_text(_plan_text("run", "x"))
    (root / f"n{hostile}.yaml").write_text(_plan_text(f"n{hostile}", hostile))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "plans"]):
        subprocess.run([*git, *args], cwd=root, check=True)
    (root / "p.yaml").write_text(_plan_text(f"run{hostile}", hostile))
    (root / f"new{hostile}.yaml").write_text(_plan_text("new", hostile))


def _git_sinks(s: Sinks, hostile: str, tmp_path: pathlib.Path) -> None:
    _committed(tmp_path / "repo", hostile)
    os.chdir(tmp_path / "repo")
    for fmt in ("text", "markdown", "json"):
        s.run(f"diff --base HEAD --format {fmt}", ["diff", "--base", "HEAD", "--format", fmt])
        s.run(f"diff --base HEAD of a missing path ({fmt})", ["diff", "--base", "HEAD", "--format", fmt,
                                                             f"gone{hostile}.yaml"])
        s.run(f"diff --base of a hostile ref ({fmt})", ["diff", "--base", f"HEAD{hostile}", "--format", fmt])
    s.run("check --dependents", ["check", "--dependents", "p.yaml"])


def test_git_refs_and_paths_reach_no_output_raw(hostile, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Sinks(capsys).check(_git_sinks, hostile, tmp_path)


def _calibration_sinks(s: Sinks, hostile: str, tmp_path: pathlib.Path) -> None:
    data = json.loads(FIXTURE.read_text())
    data["hardware"]["device_name"] = f"GPU{hostile}"
    data["stop_reason"], data["interrupted"] = f"stopped{hostile}", True
    (tmp_path / "cal.json").write_text(json.dumps(data))
    plan = tmp_path / "p.yaml"
    plan.write_text("name: proxy\nmodel: {params: 25M, layers: 6, d_model: 512, heads: 8, seq_len: 64}\n"
                    "hardware: {gpu: H100-SXM5-80GB, gpus: 8}\ntarget: {min_tokens: 2B}\n"
                    "noise: {calibration: cal.json, at_loss: 2.7}\n")
    for fmt in ("text", "json", "markdown"):
        s.run(f"plan --format {fmt}", ["plan", plan, "--format", fmt])
    s.run("check", ["check", "--solve", plan])


def test_a_calibration_s_device_name_reaches_no_output_raw(hostile, tmp_path, capsys):
    Sinks(capsys).check(_calibration_sinks, hostile, tmp_path)


def test_the_tui_shows_hostile_plan_text_inert(hostile, tmp_path):
    """The TUI draws the plan's name and values through Rich; what it draws holds no control byte."""
    pytest.importorskip("textual")
    import asyncio

    from budgetdsl.tui.app import make_app
    from textual.geometry import Region

    plan = tmp_path / f"p{hostile}.yaml"
    plan.write_text(_plan_text(f"run{hostile}", hostile))

    async def drawn() -> str:
        app = make_app(plan)
        async with app.run_test(size=(120, 40)) as pilot:
            await app.wait_solved()
            await pilot.pause()
            lines = []
            for widget in app.screen.walk_children(with_self=True):
                width, height = widget.size
                if width and height and widget.display:
                    lines += [strip.text for strip in widget.render_lines(Region(0, 0, width, height))]
            return "\n".join(lines)

    text = asyncio.run(drawn())
    assert "run" in text and "pwned" in text if "pwned" in hostile else "run" in text
    assert raw_controls(text) == []


def test_a_newline_in_a_set_value_forges_no_row_of_the_sweep_table(tmp_path, capsys, monkeypatch):
    """A table cell is one line: `--set hardware.gpu=$'H100\\nforged row'` shows the escape in its
    cell (the row is invalid), and the table keeps one line per row."""
    monkeypatch.chdir(tmp_path)
    plan = tmp_path / "p.yaml"
    plan.write_text(_plan_text("run", "x"))
    code = main(["sweep", str(plan), "--set", "hardware.gpu=H100-SXM5-80GB,H100\nforged  0  0  0"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert code == 2 and len(lines) == 3, out  # the header and two rows
    assert "H100\\nforged" in lines[2] and not any(line.startswith("forged") for line in lines)
