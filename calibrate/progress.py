"""Progress of a calibration run: a rich progress bar with the held-out loss and the running
B_simple, drawn on stderr (stdout carries the result, so `budgetdsl calibrate > log` keeps the
summary and still shows the bar); nothing at all under --quiet, when stderr is not a TTY (CI,
redirected), or on replicas other than rank 0."""

from __future__ import annotations

import sys


class Progress:
    def __init__(self, total: int, enabled: bool, done: int = 0):
        self.enabled = enabled and sys.stderr.isatty()
        self._bar = None
        if not self.enabled:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as RichProgress

        self._bar = RichProgress(
            TextColumn("calibrating"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}  B_simple {task.fields[b]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            transient=False,
            console=Console(file=sys.stderr),
        )
        self._task = self._bar.add_task("calibrate", total=total, completed=done, loss="-", b="-")

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.stop()

    def update(self, step: int, loss: float | None = None, b_simple: float | None = None) -> None:
        if self._bar is None:
            return
        fields = {}
        if loss is not None:
            fields["loss"] = f"{loss:.3f}"
        if b_simple is not None:
            fields["b"] = f"{b_simple:,.1f}"
        self._bar.update(self._task, completed=step, **fields)
