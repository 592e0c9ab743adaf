"""The complete lines a growing text log has gained since the last read, in bounded memory.

Each call opens the file as every log is opened (budgetdsl.io.guarded_read), seeks to where the
last call stopped and reads whole lines only: a last line without its newline is still being
written and is read on a later call. A line longer than MAX_LINE bytes is refused.
"""

from __future__ import annotations

from collections.abc import Iterator

from budgetdsl.io.guarded_read import open_regular
from budgetdsl.track.record import LogError

MAX_LINE = 1 << 16


class LineReader:
    def __init__(self, path: str):
        self.path = path
        self.offset = 0  # bytes of whole lines read so far
        self.number = 0  # lines read so far

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """(line number, line without its end) for each whole line added since the last call."""
        with open_regular(self.path) as f:
            f.seek(self.offset)
            while raw := f.readline(MAX_LINE + 1):
                if len(raw) > MAX_LINE:
                    raise LogError(self.path, f"{self.number + 1}", f"a line longer than {MAX_LINE} bytes",
                                   "not a text log")
                if not raw.endswith(b"\n"):
                    return  # being written
                self.offset += len(raw)
                self.number += 1
                yield self.number, raw.rstrip(b"\r\n")
