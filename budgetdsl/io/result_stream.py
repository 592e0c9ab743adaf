"""stdout for results: each write goes out whole and at once, or fails as an OutputError.

The command line writes its results through `results_stdout(sys.stdout)`. Every write is flushed
and checked, so a full disk or an I/O error shows while the command runs (main() reports it in one
line, exit 2) instead of in the interpreter's last flush or as an internal error. With
PYTHONUNBUFFERED=1 (usual in containers and CI) sys.stdout writes straight to the descriptor, and
Python drops the rest of a write that a pipe took only in part (its reader left: `| head -c 10`):
there the bytes go through a writer that repeats a short write until all are written or the error
(EPIPE: exit 141) is raised.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import BinaryIO, TextIO, cast


class OutputError(Exception):
    """The results could not be written to stdout (a full disk, an I/O error). Not an OSError, so
    that a command's own `except OSError` around the files it reads cannot take it for theirs."""

    def __init__(self, error: OSError):
        super().__init__(error.strerror or str(error))
        self.error = error

    def line(self) -> str:
        return f"budgetdsl: error[io]: cannot write the results to stdout: {self}"


class _WholeWrites(io.RawIOBase):
    """A descriptor that writes all it is given (os.write repeated over a short write)."""

    def __init__(self, fd: int):
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        total = len(view)
        while view:
            view = view[os.write(self._fd, view):]
        return total


class _Checked:
    """A text stream that flushes after each write and raises OutputError for its errors (a broken
    pipe stays a BrokenPipeError: main() tells a closed stdout from another pipe)."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    @contextmanager
    def _checked(self) -> Iterator[None]:
        try:
            yield
        except BrokenPipeError:
            raise
        except OSError as exc:
            self._discard()
            raise OutputError(exc) from exc

    def _discard(self) -> None:
        """Point stdout at /dev/null: what is still buffered cannot be written either, and the
        interpreter's last flush must not report the same error again."""
        try:
            fd = self._stream.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass

    def write(self, text: str) -> int:
        with self._checked():
            written = self._stream.write(text)
            self._stream.flush()
        return written

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        with self._checked():
            self._stream.flush()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def results_stdout(stream: TextIO) -> TextIO:
    """`stream` (sys.stdout) with every write flushed, whole and checked."""
    if isinstance(getattr(stream, "buffer", None), io.RawIOBase):  # unbuffered: python -u
        try:
            fd = stream.fileno()
        except (OSError, ValueError):
            pass
        else:
            stream.flush()
            stream = io.TextIOWrapper(cast(BinaryIO, _WholeWrites(fd)), encoding=stream.encoding,
                                      errors=stream.errors, write_through=True)
    return cast(TextIO, _Checked(stream))
