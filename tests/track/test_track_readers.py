"""Each reader turns what a real logger writes into records; bad input is a located error."""

import json
import math
import os
import shutil
from pathlib import Path

import pytest

from budgetdsl.track.metrics import MetricMap, parse_overrides
from budgetdsl.track.record import LogError
from budgetdsl.track.run import merge, timeline_of
from budgetdsl.track.sources import expand, kind_of, records

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _read(path, **overrides):
    metrics = MetricMap(overrides)
    return [r for f in expand([str(path)]) for r in records(f, metrics)]


def _event_file(run_dir: Path) -> Path:
    files = sorted(run_dir.glob("events.out.tfevents.*"))
    assert files
    return files[0]


def test_tensorboard_events_of_a_real_run_give_every_step(proxy_runs):
    got = _read(proxy_runs["whole"])
    assert [r.step for r in got] == list(range(1, 201))
    assert all(r.tokens == r.step * 256 for r in got)  # SummaryWriter's train/num_input_tokens_seen
    assert all(r.loss is not None and math.isfinite(r.loss) for r in got)
    assert all(r.lr == pytest.approx(3e-3) for r in got)
    times = [r.time for r in got]
    assert times == sorted(times) and times[-1] - times[0] > 199 * 0.04 * 0.9


def test_a_corrupted_tensorboard_record_is_named(proxy_runs, tmp_path):
    bad = tmp_path / "events.out.tfevents.1.host"
    data = bytearray(_event_file(proxy_runs["whole"]).read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    with pytest.raises(LogError) as err:
        _read(bad)
    assert err.value.file == str(bad) and err.value.where.startswith("record ")
    assert "corrupted" in err.value.message


def test_a_tensorboard_file_cut_mid_record_reads_to_its_last_whole_record(proxy_runs, tmp_path):
    cut = tmp_path / "events.out.tfevents.2.host"
    data = _event_file(proxy_runs["whole"]).read_bytes()
    cut.write_bytes(data[:-7])  # the writer was still writing the last record
    got = _read(cut)
    assert got[-1].step == 200 and len(got) == 200  # the last step's earlier tags came whole
    assert got[-1].lr is None or got[-1].lr == pytest.approx(3e-3)


def test_metric_override_reads_another_tag(proxy_runs):
    got = _read(proxy_runs["whole"], loss="", tokens="train/loss")
    assert got[0].loss is None and got[0].tokens == pytest.approx(got[0].tokens)
    assert all(r.tokens < 10 for r in got)  # the loss tag, read as tokens


def test_metric_flags_are_checked():
    assert parse_overrides(["tokens=seen", "loss="]) == {"tokens": "seen", "loss": ""}
    with pytest.raises(ValueError, match="FIELD=NAME"):
        parse_overrides(["speed=x"])


def test_megatron_log_lines_follow_training_log():
    got = _read(FIXTURES / "track" / "megatron-gpt.log")
    assert [r.step for r in got] == list(range(10, 201, 10))
    first = got[0]
    assert first.samples == 1280 and first.lr == pytest.approx(3e-5) and first.loss == pytest.approx(8.8)
    assert first.tflops_per_gpu == pytest.approx(401.3)
    assert got[1].time - first.time == pytest.approx(15.2)


def test_megatron_log_without_timestamps_sums_elapsed_time(tmp_path):
    lines = (FIXTURES / "track" / "megatron-gpt.log").read_text().splitlines()
    stripped = [line.split("]", 1)[1] if line.startswith(" [") else line for line in lines]
    log = tmp_path / "train.log"
    log.write_text("\n".join(stripped) + "\n")
    got = _read(log)
    assert got[1].time - got[0].time == pytest.approx(10 * 1.52)


def test_gns_calibration_file_gives_b_noise_with_its_interval():
    path = FIXTURES / "calibration" / "gpt-micro-stdlib.json"
    assert kind_of(str(path)) == "gns"
    got = _read(path)
    assert got and all(r.b_noise > 0 and r.time is None for r in got)
    cal = json.loads(path.read_text())
    per_example = cal["provenance"]["batch"]["tokens_per_example"]
    last = [p for p in cal["trajectory"] if p["b_simple_tokens"] is not None][-1]
    assert got[-1].b_noise == last["b_simple_tokens"]
    assert got[-1].loss == last["loss_smoothed"]  # the loss B_simple was measured at: the ramp's fit reads it
    if last["ci_low"] is not None:
        assert got[-1].b_noise_low == pytest.approx(last["ci_low"] * per_example)


def _trainer_state(tmp_path, history):
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"global_step": 30, "log_history": history}))
    return path


def test_trainer_state_log_history(tmp_path):
    _trainer_state(tmp_path, [
        {"epoch": 0.1, "grad_norm": 1.0, "learning_rate": 5e-5, "loss": 3.2, "step": 10,
         "num_input_tokens_seen": 20480},
        {"epoch": 0.1, "eval_loss": 3.0, "step": 10},
        {"epoch": 0.2, "learning_rate": 4e-5, "loss": 3.0, "step": 20, "num_input_tokens_seen": 40960},
        {"train_runtime": 12.0, "step": 20}])
    got = _read(tmp_path)
    assert [(r.step, r.loss, r.tokens, r.time) for r in got] == [(10, 3.2, 20480, None), (20, 3.0, 40960, None)]


def test_a_nan_loss_is_named_with_its_record(tmp_path):
    _trainer_state(tmp_path, [{"loss": 3.2, "step": 10}, {"loss": float("nan"), "step": 20}])
    with pytest.raises(LogError) as err:
        _read(tmp_path)
    assert err.value.where == "log_history[1]" and "loss is nan" in err.value.message


def test_csv_and_jsonl_schema(tmp_path):
    csv = tmp_path / "run.csv"
    csv.write_text("step,time,tokens,loss\n1,2026-08-01T00:00:00Z,100,3.0\n2,2026-08-01T00:00:02Z,200,\n")
    got = _read(csv)
    assert [(r.step, r.tokens, r.loss) for r in got] == [(1, 100, 3.0), (2, 200, None)]
    assert got[1].time - got[0].time == 2
    jsonl = tmp_path / "run.jsonl"
    jsonl.write_text('{"step": 1, "time": 10, "seen": 5}\n{"step": 2, "time": 11, "seen": 9}\n{"step": 3, "ti')
    got = _read(jsonl, tokens="seen")
    assert [(r.step, r.tokens) for r in got] == [(1, 5), (2, 9)]  # the last line is still being written


@pytest.mark.parametrize("text, where, words", [
    ("step,loss\n1,3.0\nx,2.0\n", "3", "step"),
    ("step,loss\n1,3.0\n2,inf\n", "3", "not finite"),
    ("step,loss\n1,3.0,4\n", "2", "cells"),
    ("loss\n3.0\n", "1", "no `step` column"),
])
def test_bad_table_rows_are_located(tmp_path, text, where, words):
    path = tmp_path / "run.csv"
    path.write_text(text)
    with pytest.raises(LogError) as err:
        _read(path)
    assert err.value.where == where and words in err.value.message


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "events.out.tfevents.3.host"
    os.mkfifo(fifo)
    with pytest.raises(LogError, match="not a regular file"):
        _read(fifo)


def _timeline(path, until=None):
    metrics = MetricMap()
    return merge([timeline_of(f.path, records(f, metrics), until) for f in expand([str(path)])], until)


def test_time_running_backwards_is_bad_input(tmp_path):
    path = tmp_path / "run.csv"
    path.write_text("step,time,tokens\n1,10,1\n2,12,2\n3,11,3\n")
    with pytest.raises(LogError) as err:
        _timeline(path)
    assert err.value.where == "4" and "backwards" in err.value.message


def test_a_restart_keeps_the_latest_segment(tmp_path):
    path = tmp_path / "run.csv"
    rows = [(s, s, s * 10) for s in range(1, 8)] + [(s, 20 + s, s * 10) for s in range(5, 10)]
    path.write_text("step,time,tokens\n" + "".join(f"{s},{t},{e}\n" for s, t, e in rows))
    line = _timeline(path)
    assert list(line.steps) == list(range(1, 10))
    assert list(line.times) == [1, 2, 3, 4, 25, 26, 27, 28, 29]
    assert len(line.restarts) == 1 and line.restarts[0].from_step == 7 and line.restarts[0].to_step == 5
    assert line.restart_at == [4]


def test_several_ranks_files_make_one_timeline(tmp_path):
    rank0 = "".join(f"{s},{s},{s * 10}\n" for s in range(1, 11))
    rank1 = "".join(f"{s},{s + 0.1},{5 - s / 10}\n" for s in range(1, 11))
    (tmp_path / "rank0.csv").write_text("step,time,tokens\n" + rank0)
    (tmp_path / "rank1.csv").write_text("step,time,loss\n" + rank1)
    line = merge([timeline_of(str(p), records(f, MetricMap())) for p in sorted(tmp_path.iterdir())
                  for f in expand([str(p)])])
    assert list(line.steps) == list(range(1, 11))
    assert list(line.column("loss")) == pytest.approx([5 - s / 10 for s in range(1, 11)])


def test_the_real_restarted_run_keeps_its_latest_steps(proxy_runs):
    line = _timeline(proxy_runs["restarted"])
    assert list(line.steps) == list(range(1, 201))
    assert [(r.from_step, r.to_step) for r in line.restarts] == [(120, 101)]


def test_an_unknown_file_is_named(tmp_path):
    path = tmp_path / "notes.md"
    path.write_text("# hello\n")
    with pytest.raises(LogError, match="not a log track reads"):
        kind_of(str(path))
    shutil.rmtree(tmp_path)
