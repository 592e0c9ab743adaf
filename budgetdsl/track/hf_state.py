"""Hugging Face Trainer's `trainer_state.json`: its `log_history`, one entry per logging step.

An entry holds `step`, `epoch`, the training `loss`, `learning_rate`, `grad_norm` and, with
`include_num_input_tokens_seen`, `num_input_tokens_seen`; evaluation entries (`eval_loss`) and the
closing summary (`train_runtime`) carry no training loss and are skipped. The file has no wall time
per entry: it gives progress and loss, and the forecast needs the run's TensorBoard events (the
Trainer writes them with `report_to="tensorboard"`) for time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from budgetdsl.io.guarded_read import read_regular
from budgetdsl.track.metrics import MetricMap
from budgetdsl.track.record import LogError, Record, finite, step_of

LIMIT = 256 << 20  # bytes: json holds the whole document; larger states are refused with a message


def read(path: str, metrics: MetricMap) -> Iterator[Record]:
    data = read_regular(path, LIMIT)
    if len(data) > LIMIT:
        raise LogError(path, "", f"larger than {LIMIT >> 20} MiB", "log less often (logging_steps), "
                       "or track the Trainer's TensorBoard events instead, which are streamed")
    try:
        state = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        raise LogError(path, f"{line}" if line else "", f"not a JSON trainer state: {exc}") from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise LogError(path, "", "no `log_history` list: not a Trainer's trainer_state.json")
    for index, entry in enumerate(history):
        where = f"log_history[{index}]"
        if not isinstance(entry, dict):
            raise LogError(path, where, "an entry that is not an object")
        if "step" not in entry or "train_runtime" in entry or "eval_loss" in entry:
            continue
        fields = metrics.pick(entry)
        if not fields:
            continue
        record = Record(step=step_of(path, where, entry["step"]), where=where)
        for name, value in fields.items():
            setattr(record, name, finite(path, where, name, value))
        yield record
