"""The TensorBoard reader's batch path (what `budgetdsl track` and its benchmark run) gives the same
timeline as record by record, keeps every CRC check, and copes with what SummaryWriter writes
besides scalars."""

import math
import struct

import pytest

from budgetdsl.track.metrics import MetricMap
from budgetdsl.track.record import LogError
from budgetdsl.track.run import merge, timeline_of
from budgetdsl.track.sources import expand, records, timeline


def _by_records(path, until=None):
    metrics = MetricMap()
    return merge([timeline_of(f.path, records(f, metrics), until) for f in expand([str(path)])], until)


def _by_batches(path, until=None):
    metrics = MetricMap()
    return merge([timeline(f, metrics, until) for f in expand([str(path)])], until)


def _same(a, b):
    assert list(a.steps) == list(b.steps)
    assert set(a.columns) == set(b.columns)
    for name in a.columns:
        assert [x if not math.isnan(x) else None for x in a.columns[name]] == \
            [x if not math.isnan(x) else None for x in b.columns[name]], name
    assert [(r.from_step, r.to_step, r.dropped) for r in a.restarts] == \
        [(r.from_step, r.to_step, r.dropped) for r in b.restarts]
    assert a.restart_at == b.restart_at and a.last_where == b.last_where


@pytest.mark.parametrize("run", ["whole", "restarted"])
@pytest.mark.parametrize("until", [None, 60, 150])
def test_batches_give_the_timeline_records_give(proxy_runs, run, until):
    got = _by_batches(proxy_runs[run], until)
    _same(got, _by_records(proxy_runs[run], until))
    assert got.steps[-1] == (until or 200)


def _writer(folder):
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(str(folder), max_queue=10_000, flush_secs=3600)


def test_images_and_histograms_beside_the_scalars_are_passed_over(tmp_path):
    import numpy as np

    writer = _writer(tmp_path)
    for step in range(1, 31):
        writer.add_scalar("train/loss", 3.0 - step / 100, step, walltime=1e9 + step)
        writer.add_histogram("weights", np.arange(1000.0) * step, step, walltime=1e9 + step)
        writer.add_image("sample", np.full((3, 16, 16), step / 30), step, walltime=1e9 + step)
        writer.add_scalar("train/num_input_tokens_seen", step * 100.0, step, walltime=1e9 + step + 0.5)
    writer.close()
    line = _by_batches(tmp_path)
    assert list(line.steps) == list(range(1, 31))
    assert list(line.column("tokens")) == [s * 100.0 for s in range(1, 31)]
    assert list(line.times) == [1e9 + s + 0.5 for s in range(1, 31)]  # the step's last scalar event
    with pytest.raises(LogError, match="'weights' is not a scalar"):  # a tag read that holds a histogram
        [timeline(f, MetricMap({"loss": "weights"})) for f in expand([str(tmp_path)])]


def test_a_zero_value_is_zero_not_missing(tmp_path):
    writer = _writer(tmp_path)
    for step in range(1, 11):
        writer.add_scalar("train/learning_rate", 0.0 if step < 5 else 1e-3, step, walltime=1e9 + step)
    writer.close()
    assert list(_by_batches(tmp_path).column("lr")) == [0.0] * 4 + [pytest.approx(1e-3)] * 6


def test_a_nan_value_is_named_with_its_record(tmp_path):
    writer = _writer(tmp_path)
    for step in range(1, 11):
        writer.add_scalar("train/loss", float("nan") if step == 7 else 1.0, step, walltime=1e9 + step)
    writer.close()
    with pytest.raises(LogError) as err:
        _by_batches(tmp_path)
    assert err.value.where == "record 8" and "loss is nan" in err.value.message  # record 1: the file version


def _records_at(data):
    """Offsets of each TFRecord in an event file (its 8-byte length heads it)."""
    out, pos = [], 0
    while pos < len(data):
        out.append(pos)
        pos += 12 + struct.unpack_from("<Q", data, pos)[0] + 4
    return out


@pytest.mark.parametrize("part, offset", [("length", 0), ("length", 9), ("data", 14), ("data", -1)])
def test_every_record_is_checked_even_when_its_header_repeats(proxy_runs, tmp_path, part, offset):
    src = sorted(proxy_runs["whole"].glob("events.out.tfevents.*"))[0].read_bytes()
    starts = _records_at(src)
    k = len(starts) // 2
    at = starts[k] + offset if offset >= 0 else starts[k + 1] + offset  # -1: the last byte of the data CRC
    bad = bytearray(src)
    bad[at] ^= 0x01
    path = tmp_path / "events.out.tfevents.1.host"
    path.write_bytes(bytes(bad))
    with pytest.raises(LogError) as err:
        _by_batches(path)
    assert err.value.where == f"record {k + 1}" and f"the CRC of its {part}" in err.value.message
