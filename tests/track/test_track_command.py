"""`budgetdsl track PLAN RUN`: on real training logs, the forecast, the limits and the exit codes."""

import json

import pytest

from budgetdsl.cli import main
from budgetdsl.track.metrics import MetricMap
from budgetdsl.track.sources import expand, records

SEQ, BATCH_TOKENS, STEPS = 32, 256, 200  # conftest.py's run
REQUEUE_S = 1.5  # conftest.py's
PEAK = 1e12
FLOPS_PER_TOKEN = 6e5


def _track(capsys, *argv):
    code = main(["track", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _plan(tmp_path, tokens_per_s: float, deadline_s: float | None = None, name="proxy") -> str:
    """A plan of the proxy run whose declared MFU predicts `tokens_per_s` (T = f·B/(G·P·u))."""
    mfu = tokens_per_s * FLOPS_PER_TOKEN / PEAK
    budget = f"budget: {{deadline: {deadline_s} s, usd_per_gpu_hour: 2}}\n" if deadline_s else ""
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"name: {name}\n"
        f"model: {{params: 100k, layers: 2, d_model: 32, seq_len: {SEQ}, flops_per_token: {FLOPS_PER_TOKEN}}}\n"
        f"hardware: {{peak_flops: {PEAK}, memory_per_device: 8 GiB, gpus: 1, mfu: {mfu}}}\n"
        f"{budget}"
        f"target: {{tokens: {STEPS * BATCH_TOKENS}, at_batch: {BATCH_TOKENS}}}\n"
        "noise: {b_crit: 512}\n"
        f"run: {{batch: {BATCH_TOKENS}, micro_batch: 8}}\n")
    return str(path)


def _actual(capsys, tmp_path, run) -> dict:
    """The whole run as track reads it: its real tokens per second and wall clock."""
    code, out, _ = _track(capsys, _plan(tmp_path, 1e4, name="probe"), str(run), "--format", "json")
    assert code == 0
    return json.loads(out)


def test_an_optimistic_plan_is_caught_after_a_fifth_of_the_run(proxy_runs, tmp_path, capsys):
    actual = _actual(capsys, tmp_path, proxy_runs["whole"])
    assert actual["status"] == "finished"
    rate, wall = actual["tokens_per_s"]["value"], actual["elapsed_s"]
    planned_wall = STEPS * BATCH_TOKENS / (1.3 * rate)
    plan = _plan(tmp_path, 1.3 * rate, deadline_s=planned_wall * 1.15)  # 30 % optimistic throughput
    code, out, err = _track(capsys, plan, str(proxy_runs["whole"]), "--until-step", str(STEPS // 5),
                            "--format", "json")
    got = json.loads(out)
    assert code == 1, (err, got["status"], got["wall_clock_s"], wall, got["limits"])
    assert got["steps_done"] == STEPS // 5 and got["status"] == "breaks"
    assert got["wall_clock_s"]["value"] == pytest.approx(wall, rel=0.05), (got["wall_clock_s"], wall)
    assert got["wall_clock_s"]["low"] <= got["wall_clock_s"]["value"] <= got["wall_clock_s"]["high"]
    deadline = next(limit for limit in got["limits"] if limit["name"] == "deadline")
    assert deadline["breaks"] and deadline["when"] == pytest.approx(got["start"] + planned_wall * 1.15)
    assert got["tokens_per_s"]["value"] / got["tokens_per_s_planned"] == pytest.approx(1 / 1.3, rel=0.1)
    assert got["mfu"] / got["mfu_planned"] == pytest.approx(1 / 1.3, rel=0.1)


def test_a_plan_that_holds_exits_0_and_says_so(proxy_runs, tmp_path, capsys):
    actual = _actual(capsys, tmp_path, proxy_runs["whole"])
    plan = _plan(tmp_path, actual["tokens_per_s"]["value"], deadline_s=actual["elapsed_s"] * 3)
    code, out, _ = _track(capsys, plan, str(proxy_runs["whole"]), "--until-step", "100")
    assert code == 0
    assert "the plan holds" in out and "deadline" in out
    code, md, _ = _track(capsys, plan, str(proxy_runs["whole"]), "--until-step", "100", "--format", "markdown")
    assert code == 0 and md.startswith("### proxy: the plan holds") and "| deadline |" in md


def test_a_killed_and_requeued_run_reports_its_downtime_and_totals(proxy_runs, tmp_path, capsys):
    code, out, err = _track(capsys, _plan(tmp_path, 1e4), str(proxy_runs["restarted"]), "--format", "json")
    assert code == 0, err
    got = json.loads(out)
    assert got["steps_done"] == STEPS and got["tokens_done"] == STEPS * BATCH_TOKENS
    assert [(r["from_step"], r["to_step"]) for r in got["restarts"]] == [(120, 101)]
    assert len(got["files"]) == 2
    # downtime: the outage between the dead job's last record and the new job's first (the queue's
    # wait and the new process's start), plus the 20 steps after the checkpoint that were run twice
    old, new = (list(records(f, MetricMap())) for f in expand([str(proxy_runs["restarted"])]))
    outage = new[0].time - old[-1].time
    assert outage >= REQUEUE_S
    redone = (old[-1].step - new[0].step + 1) * got["step_time_s"]
    assert outage <= got["downtime_s"] <= outage + 1.5 * redone + got["step_time_s"]
    assert got["status"] == "finished"


def test_too_few_points_says_so(proxy_runs, tmp_path, capsys):
    code, out, _ = _track(capsys, _plan(tmp_path, 1e4), str(proxy_runs["whole"]), "--until-step", "4")
    assert code == 0 and "too few points" in out


def test_a_log_of_another_batch_is_bad_input(proxy_runs, tmp_path, capsys):
    plan = _plan(tmp_path, 1e4).replace("", "")
    text = open(plan).read().replace(f"batch: {BATCH_TOKENS}, micro", f"batch: {2 * BATCH_TOKENS}, micro")
    open(plan, "w").write(text.replace("at_batch: 256", "at_batch: 512"))
    code, out, err = _track(capsys, plan, str(proxy_runs["whole"]))
    assert code == 2 and out == ""
    assert "another run" in err and "Traceback" not in err


def test_bad_input_exits_2_with_the_file_and_record(tmp_path, capsys):
    log = tmp_path / "run.csv"
    log.write_text("step,time,tokens,loss\n1,1,256,3.0\n2,2,512,nan\n")
    code, out, err = _track(capsys, _plan(tmp_path, 1e4), str(log))
    assert code == 2 and out == ""
    assert f"{log}:3: error[track]: loss is nan" in err and "Traceback" not in err
    code, _, err = _track(capsys, _plan(tmp_path, 1e4), str(tmp_path / "missing"))
    assert code == 2 and "no such file" in err
    code, _, err = _track(capsys, _plan(tmp_path, 1e4), str(log), "--metric", "speed=x")
    assert code == 2 and "FIELD=NAME" in err


def test_replan_writes_a_feasible_plan_of_the_rest_at_the_measured_throughput(proxy_runs, tmp_path, capsys):
    actual = _actual(capsys, tmp_path, proxy_runs["whole"])
    rate = actual["tokens_per_s"]["value"]
    deadline = STEPS * BATCH_TOKENS / (1.3 * rate) * 1.15
    plan = _plan(tmp_path, 1.3 * rate, deadline_s=deadline)
    before = open(plan).read()
    code, out, err = _track(capsys, plan, str(proxy_runs["whole"]), "--until-step", "60", "--format", "json",
                            "--replan")
    assert code == 0, err
    at_60 = json.loads(out)
    measured = at_60["tokens_per_s"]["value"]
    after = open(plan).read()
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b]
    assert [a.split(":")[0] for a, _ in changed] == ["hardware", "budget", "target"]  # mfu, deadline, tokens
    assert "replan: hardware.mfu" in err and "replan: budget.deadline" in err and "--since-step 60" in err
    code = main(["plan", plan, "--format", "json"])
    replanned = json.loads(capsys.readouterr().out)
    assert code == 0 and replanned["feasible"]
    predicted = replanned["batch"]["tokens"] / replanned["throughput"]["step_time_s"]
    assert predicted == pytest.approx(measured, rel=0.01)
    # the rest: the 140 steps left, by the deadline the forecast's high end leaves after step 60
    assert replanned["tokens"] == pytest.approx((STEPS - 60) * BATCH_TOKENS, rel=0.01)
    high_left = at_60["limits"][0]["high"] - at_60["elapsed_s"]
    deadline_left = next(c["limit"] for c in replanned["constraints"] if c["name"] == "deadline")
    assert high_left <= deadline_left <= high_left * 1.01 + 0.01
    code, out, _ = _track(capsys, plan, str(proxy_runs["whole"]), "--since-step", "60", "--format", "json")
    rest = json.loads(out)
    assert code == 0 and rest["status"] == "finished"
    assert rest["steps_done"] == STEPS - 60 and rest["tokens_done"] == (STEPS - 60) * BATCH_TOKENS
    assert rest["elapsed_s"] == pytest.approx(actual["elapsed_s"] - at_60["elapsed_s"], rel=0.05)


def test_replan_with_too_few_points_changes_nothing(proxy_runs, tmp_path, capsys):
    plan = _plan(tmp_path, 1e4)
    before = open(plan).read()
    code, _, err = _track(capsys, plan, str(proxy_runs["whole"]), "--until-step", "3", "--replan")
    assert code == 0 and "nothing to replan" in err and open(plan).read() == before


def test_an_unreadable_log_exits_2_without_a_traceback(tmp_path, capsys):
    log = tmp_path / "trainer_state.json"
    log.write_text('{"log_history": []}')
    log.chmod(0)
    code, _, err = _track(capsys, _plan(tmp_path, 1e4), str(log))
    import os

    if os.access(log, os.R_OK):  # root reads it anyway: then it is a log without steps
        assert code == 2 and "no step" in err
    else:
        assert code == 2 and "error" in err
    assert "Traceback" not in err


def test_plot_draws_the_run_against_its_plan_reproducibly(proxy_runs, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    plan = _plan(tmp_path, 1e4, deadline_s=60)
    pictures = [tmp_path / "a.svg", tmp_path / "b.svg"]
    for picture in pictures:
        code, _, err = _track(capsys, plan, str(proxy_runs["whole"]), "--until-step", "60", "--plot", str(picture))
        assert code == 0, err
    svg = pictures[0].read_bytes()
    assert svg == pictures[1].read_bytes()  # the same logs, the same bytes
    for label in (b"logged", b"plan", b"forecast interval", b"deadline"):
        assert label in svg
    code, _, err = _track(capsys, plan, str(proxy_runs["whole"]), "--plot", str(tmp_path / "x.pdf"))
    assert code == 2 and ".svg or .png" in err


def test_replan_leaves_each_limit_less_what_the_run_spent(tmp_path, capsys):
    """The first 60 steps of a real proxy run (tests/tui/fixtures/proxy-run.csv) against a plan that
    sets every limit and holds: the rest gets each limit less the wall clock, GPU-hours, dollars and
    FLOPs spent, and the tokens not yet done."""
    from pathlib import Path

    log = Path(__file__).resolve().parents[1] / "tui" / "fixtures" / "proxy-run.csv"
    plan = tmp_path / "proxy.yaml"
    plan.write_text(
        "name: proxy\n"
        f"model: {{params: 100k, layers: 2, d_model: 32, seq_len: {SEQ}, flops_per_token: {FLOPS_PER_TOKEN}}}\n"
        f"hardware: {{peak_flops: {PEAK}, memory_per_device: 8 GiB, gpus: 4, mfu: 0.001}}\n"
        "budget: {deadline: 100 s, gpu_hours: 0.5, usd: 3, usd_per_gpu_hour: 2, flops: 1e11}\n"
        f"target: {{min_tokens: {STEPS * BATCH_TOKENS / 1.5}}}\n"
        "noise: {b_crit: 512}\n"
        f"run: {{batch: {BATCH_TOKENS}, micro_batch: 2}}\n")
    code, out, err = _track(capsys, str(plan), str(log), "--format", "json", "--replan")
    assert code == 0, err
    at_60 = json.loads(out)
    assert at_60["status"] == "on_track" and at_60["steps_done"] == 60
    elapsed, gpu_h = at_60["elapsed_s"], at_60["elapsed_s"] * 4 / 3600
    code = main(["plan", str(plan), "--format", "json"])
    rest = json.loads(capsys.readouterr().out)
    limits = {c["name"]: c["limit"] for c in rest["constraints"]}
    for name, left in (("deadline", 100 - elapsed), ("gpu_hours", 0.5 - gpu_h), ("usd", 3 - 2 * gpu_h),
                       ("flops", 1e11 - FLOPS_PER_TOKEN * 60 * BATCH_TOKENS)):
        assert left <= limits[name] <= left * 1.01, name
    # min_tokens × the share left (a whole number of tokens, rounded up): the 140 steps left, at most one more
    assert 0 <= rest["tokens"] - (STEPS - 60) * BATCH_TOKENS <= BATCH_TOKENS
