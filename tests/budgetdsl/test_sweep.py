"""`budgetdsl sweep`: each row equals `budgetdsl plan` of the plan file edited to those values."""

import csv
import io
import json
import pathlib
import shutil

import pytest

from budgetdsl.cli import main
from budgetdsl.plan.edit import save_changes
from budgetdsl.plan.loader import load_plan, read_merged
from budgetdsl.solve.solver import solve
from budgetdsl.solve.sweep import parse_setting, sweep

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def plans(tmp_path):
    shutil.copytree(REPO / "plans", tmp_path / "plans")
    return tmp_path / "plans"


def test_rows_agree_with_individual_plans(plans):
    path = plans / "llama2-7b.yaml"
    settings = [parse_setting("hardware.gpus=512,1024"), parse_setting("budget.deadline=14d,28 days")]
    rows = sweep(read_merged(path), settings)
    assert [tuple(r.values.values()) for r in rows] == [
        ("512", "14d"), ("512", "28 days"), ("1024", "14d"), ("1024", "28 days")]
    original = path.read_text()
    for row in rows:
        path.write_text(original)
        save_changes(path, row.values)
        assert row.solution == solve(load_plan(path)), row.values
    assert [r.solution.feasible for r in rows] == [False, True, True, True]


def test_text_csv_and_json(plans, capsys, monkeypatch):
    monkeypatch.chdir(plans.parent)
    args = ["sweep", "plans/llama2-7b.yaml", "--set", "hardware.gpus=512,1024", "--set", "hardware.mfu=40%,0.5"]
    assert main(args) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["hardware.gpus", "hardware.mfu", "feasible"]
    assert len(table) == 5
    assert main([*args, "--format", "csv"]) == 0
    records = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["hardware.gpus"], r["hardware.mfu"]) for r in records] == [
        ("512", "40%"), ("512", "0.5"), ("1024", "40%"), ("1024", "0.5")]
    # a higher MFU shortens the run, exactly in the compute term
    assert float(records[1]["wall_clock_s"]) < float(records[0]["wall_clock_s"])
    assert main([*args, "--format", "json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload[3]["set"] == {"hardware.gpus": "1024", "hardware.mfu": "0.5"}
    assert payload[3]["solution"]["gpus"] == 1024


@pytest.mark.parametrize("option, message", [
    ("hardware.gpuz=8", "--set hardware.gpuz=8: error[unknown-key]: 'hardware.gpuz' is not a field of the plan"),
    ("hardware.gpus", "--set hardware.gpus: error[usage]: expected PATH=VALUE[,VALUE...]"),
    ("hardware.gpus=8,,16", "--set hardware.gpus=8,,16: error[usage]: empty value in the list"),
    ("hardware.gpus=64x", "--set hardware.gpus=64x: error[unknown-unit]: unknown unit 'x'"),
    ("hardware.mfu=2", "--set hardware.mfu=2: error[out-of-range]: must be at most 1, got 2"),
])
def test_bad_settings_are_located_at_the_option(option, message, capsys):
    assert main(["sweep", str(REPO / "plans/llama2-7b.yaml"), "--set", option]) == 2
    assert capsys.readouterr().err.splitlines()[0] == message


def test_an_invalid_combination_is_a_row_and_the_sweep_goes_on(capsys):
    # tensor_parallel 3 cannot split 1024 GPUs; the rows after it are still solved (issue 13 item 7)
    code = main(["sweep", str(REPO / "plans/llama2-7b.yaml"), "--set", "hardware.tensor_parallel=3,1",
                 "--format", "csv"])
    out, err = capsys.readouterr()
    rows = out.splitlines()[1:]
    assert code == 2 and len(rows) == 2
    assert rows[0].startswith("3,invalid,") and rows[1].startswith("1,True,")
    assert "tensor_parallel × pipeline_parallel = 3" in err


# -- where an invalid row's problems are reported ----------------------------------------------------

def _line_of(path: pathlib.Path, start: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.startswith(start))


@pytest.mark.parametrize("scalar", [False, True], ids=["kernel", "scalar"])
@pytest.mark.parametrize("extra, sets, first, note", [
    # a cross-field rule: the file's 64 GPUs are valid; the --set tensor_parallel is what fails the rule,
    # which pydantic locates at hardware.gpus (the note)
    ("", ["hardware.tensor_parallel=3"],
     "--set hardware.tensor_parallel=3: error[plan-rule]: 64 GPUs cannot be split into "
     "tensor_parallel × pipeline_parallel = 3 groups", ("  gpus: 64", "gpus", "plan-rule", "hardware.gpus")),
    # the rule's own path is set, but the cause is the other --set: 64 GPUs split into 2 or 8 groups
    ("", ["hardware.gpus=64", "hardware.tensor_parallel=3"],
     "--set hardware.tensor_parallel=3: error[plan-rule]: 64 GPUs cannot be split into "
     "tensor_parallel × pipeline_parallel = 3 groups", None),
    # neither --set alone fails the rule (63 GPUs with the file's tensor_parallel 1; 64 GPUs in 2
    # groups): both are named; a third --set that changes nothing of it is not
    ("", ["hardware.gpus=63", "hardware.tensor_parallel=2", "budget.deadline=30d"],
     "--set hardware.gpus=63 --set hardware.tensor_parallel=2: error[plan-rule]: 63 GPUs cannot be split "
     "into tensor_parallel × pipeline_parallel = 2 groups", None),
    # a PlanError of solve() at the set path itself (the plan has no run: section to point at)
    ("", ["run.batch=3M"],
     "--set run.batch=3M: error[run-batch]: run.batch (3e+06 tokens) is not a whole number of "
     "2048-token sequences", None),
    # a PlanError of solve() at a path of the file that the set value makes wrong
    ("run:\n  micro_batch: 3\n", ["run.batch=4Mi"],
     "--set run.batch=4Mi: error[run-batch]: run.micro_batch (3) divides the sequences per replica on "
     "no searched layout", ("  micro_batch: 3", "3", "run-batch", "run.micro_batch")),
    # out of range at the set path
    ("", ["hardware.mfu=2"], "--set hardware.mfu=2: error[out-of-range]: must be at most 1, got 2", None),
    # out of range in an expression of the file that reads the set path (tokens: 20 * model.params)
    ("", ["model.params=-5"], "--set model.params=-5: error[out-of-range]: must be at least 1, got -100",
     ("  tokens: 20 * model.params", "20", "out-of-range", "target.tokens")),
])
def test_a_problem_the_set_values_bring_is_reported_at_the_set(extra, sets, first, note, tmp_path, capsys,
                                                                 monkeypatch, scalar):
    """A problem the plan file alone does not have names the --set that causes it (not the line of
    the file where the rule or the solver found it; that line comes as a note). The row is invalid,
    the sweep goes on, the exit code is 2, on the kernel's path and the scalar path alike."""
    plan = tmp_path / "plan.yaml"
    plan.write_text((REPO / "plans" / "minimal.yaml").read_text() + extra)
    monkeypatch.chdir(tmp_path)
    if scalar:
        monkeypatch.setenv("BUDGETDSL_SWEEP_SCALAR", "1")
    else:
        monkeypatch.setenv("BUDGETDSL_SWEEP_SCALAR", "0")  # the kernel, however few the rows
    assert main(["sweep", "plan.yaml", *[a for s in sets for a in ("--set", s)], "--format", "csv"]) == 2
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert lines[0].startswith(first), err
    assert ",invalid," in out.splitlines()[1]
    notes = [line for line in lines if ": note[" in line]
    assert not any(line.startswith("plan.yaml") and ": error[" in line for line in lines), err
    if note is None:
        assert not notes, err
    else:
        start, token, code, path = note  # the note stands where the problem was found: a key or a value
        row = _line_of(plan, start)
        col = plan.read_text().splitlines()[row - 1].index(token) + 1
        assert notes == [f"plan.yaml:{row}:{col}: note[{code}]: found at {path}, written here; "
                         "the plan file alone has no such problem"], err


def test_a_problem_of_the_plan_file_itself_stays_at_its_line(tmp_path, capsys, monkeypatch):
    """tensor_parallel 3 on 64 GPUs is the file's own: every row has it, whatever the --set."""
    plan = tmp_path / "plan.yaml"
    plan.write_text((REPO / "plans" / "minimal.yaml").read_text().replace(
        "  gpus: 64", "  gpus: 64\n  tensor_parallel: 3"))
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", "plan.yaml", "--set", "budget.deadline=1d,30d", "--format", "csv"]) == 2
    err = capsys.readouterr().err.splitlines()
    row = _line_of(plan, "  gpus: 64")
    assert err == [f"plan.yaml:{row}:3: error[plan-rule]: 64 GPUs cannot be split into "
                   "tensor_parallel × pipeline_parallel = 3 groups"] * 2


def test_csv_lines_are_csv_writers(capsys):
    """The CSV renderer joins a summary's fields itself (speed): each line equals csv.writer's
    writerow of the same cells, whatever the values (quotes, commas inside a value's text, None,
    floats' shortest repr, an infeasible row's empty fields, an invalid row), and reads back."""
    from budgetdsl.commands.sweep import render_csv
    from budgetdsl.plan.diagnostics import Diagnostic, Location, PlanError
    from budgetdsl.solve.sweep import Setting, Summary, SweepRow

    settings = [Setting("objective", ('"min_time"', "a b", "x\"y")), Setting("budget.deadline", ("1d",))]
    feasible = Summary("optimal", True, 64, 131072.0, 1, 1, 64, 1, 1, 0, "none", 39908, 5230821376.0,
                       4.711902737874498e+19, 1722.1948287728023, 1e-7, None, 1.31072, ("deadline", "min_batch"))
    priced = Summary("optimal", True, 8, 2.5e20, 3, 7, 8, 2, 4, 3, "full", 2 ** 60, float(2 ** 80), 0.1 + 0.2,
                     1e300, 5e-324, 12.25, 1 / 3, ())
    infeasible = Summary("infeasible", False, 64, None, None, None, 8, 1, 1, 0, "none", None, None, None,
                         None, None, None, None, ("deadline",))
    error = PlanError([Diagnostic(Location("--set x"), "out-of-range", 'must be "positive", got -1')])
    rows = [SweepRow({"objective": v, "budget.deadline": "1d"}, None, None, summary=s)
            for v, s in zip(('"min_time"', "a b", "x\"y"), (feasible, priced, infeasible))]
    rows.append(SweepRow({"objective": "a,b", "budget.deadline": "1d"}, None, None, error))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["objective", "budget.deadline", "feasible", "gpus", "batch_tokens", "micro_batch",
                     "grad_accum", "data_parallel", "steps", "tokens", "flops", "wall_clock_s", "gpu_hours",
                     "usd", "x", "binding"])
    for r in rows:
        s = r.summary
        writer.writerow([*r.values.values(), *(["invalid"] + [""] * 12 + [
            "out-of-range: must be \"positive\", got -1"] if s is None else [
            s.feasible, s.gpus, s.batch_tokens, s.micro_batch, s.grad_accum, s.data_parallel, s.steps,
            s.tokens, s.flops, s.wall_clock_s, s.gpu_hours, s.usd, s.x, ";".join(s.binding)])])
    assert render_csv(rows, settings) == out.getvalue()
    back = list(csv.reader(io.StringIO(out.getvalue())))
    assert [r[0] for r in back[1:]] == ['"min_time"', "a b", "x\"y", "a,b"]
    assert float(back[2][13]) == 12.25 and back[1][13] == "" and back[3][4] == ""


def _search_heavy(plans) -> pathlib.Path:
    """plans/7b-h100-choose-gpus.yaml with the layout searched (no mfu, no zero) on 8–2,048 GPUs:
    ~16,000 layout × GPU-count pairs, seconds of solve() a row."""
    text = (plans / "7b-h100-choose-gpus.yaml").read_text()
    assert "  mfu: 0.40\n" in text and "  zero: 1\n" in text and "step: 64}" in text
    text = text.replace("  mfu: 0.40\n", "").replace("  zero: 1\n", "").replace(
        "gpus: {min: 64, max: 2048, step: 64}", "gpus: {min: 8, max: 2048, step: 8}")
    path = plans / "heavy.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_search_heavy_sweep_is_refused_up_front(plans, capsys, fmt):
    """Hundreds of rows of a searched 7B plan would take the better part of an hour: refused (exit 2)
    before any row is solved, with the count and what to narrow; the kernel's path is counted too."""
    lengths = ",".join(str(n) for n in range(2048, 2048 + 8 * 400, 8))  # 400 rows, each a solve()
    assert main(["sweep", str(_search_heavy(plans)), "--set", f"model.seq_len={lengths}",
                 "--format", fmt]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert "too-slow" in out.err and "400 rows" in out.err and "--yes" in out.err
    assert "narrow hardware.gpus" in out.err


def test_the_estimate_counts_rows_times_pairs(plans, monkeypatch):
    """Deterministic (counted, not timed): the first row's search space × the rows, the kernel's
    path counted cheaper than solve() per row."""
    from budgetdsl.solve.search_space import search_space
    from budgetdsl.solve.sweep import SLOW_SECONDS, estimate

    monkeypatch.delenv("BUDGETDSL_SWEEP_SCALAR", raising=False)
    heavy = read_merged(_search_heavy(plans))
    pairs = len(search_space(load_plan(_search_heavy(plans))).pairs)
    assert pairs > 10_000
    days = [parse_setting("budget.deadline=" + ",".join(f"{d} d" for d in range(10, 5010)))]
    kernel, scalar = estimate(heavy, days, full=False), estimate(heavy, days, full=True)
    assert (kernel.rows, kernel.pairs, kernel.path) == (5000, pairs, "kernel")
    assert (scalar.rows, scalar.pairs, scalar.path) == (5000, pairs, "scalar")
    assert SLOW_SECONDS < kernel.seconds < scalar.seconds
    assert estimate(heavy, days, full=False) == kernel  # the same answer every time
    small = estimate(read_merged(plans / "minimal.yaml"), days, full=False)
    assert small is not None and small.seconds < SLOW_SECONDS  # a cheap plan's 5,000 rows run


def test_yes_runs_a_sweep_past_the_estimate(plans, capsys, monkeypatch):
    monkeypatch.setattr("budgetdsl.solve.sweep.SLOW_SECONDS", 0.0)
    argv = ["sweep", str(plans / "minimal.yaml"), "--set", "budget.deadline=7d,14d", "--format", "csv"]
    assert main(argv) == 2 and "too-slow" in capsys.readouterr().err
    assert main([*argv, "--yes"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3
