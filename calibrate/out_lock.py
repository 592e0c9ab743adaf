"""One writer per calibration file: an advisory lock on `<out>.lock` beside `--out`.

Two calibrations given the same `--out` would otherwise both train for minutes and the last to
finish would silently replace the other's file (and share its `<out>.ckpt.pt`). The lock is
`fcntl.flock`, taken without waiting: the second run stops at its start, naming the pid the first
one wrote into the lock file. flock locks die with their process, so a run killed with SIGKILL
leaves at worst an unlocked `<out>.lock` that the next run simply takes over; a run that ends
normally removes the file (while still holding the lock, and a taker checks that the file it locked
is still the one at the path, so removal cannot let two runs hold it). No torch: the CLI and tests
take it cheaply.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no advisory locks, runs are not serialised
    fcntl = None  # type: ignore[assignment]


class OutLocked(ValueError):
    """Another process is writing the same calibration file."""


def lock_path(out: Path) -> Path:
    """`<out>.lock` in the folder `out` names (resolved, so `./x.json` and `x.json` share it)."""
    out = Path(out)
    return Path(os.path.realpath(out.parent)) / (out.name + ".lock")


def _holder(fd: int) -> str:
    """" (pid N)" from the lock file already open (the holder writes its pid there), else ""."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return f" (pid {text})" if text.isdigit() else ""


@contextlib.contextmanager
def out_lock(out: Path, flag: str = "--out") -> Iterator[Path]:
    """Hold the lock for `out` for the body; OutLocked at once when another process holds it."""
    path = lock_path(out)
    if fcntl is None:  # pragma: no cover
        yield path
        return
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise OutLocked(
                f"{flag} {out} is being written by another calibration{holder}, which holds "
                f"{path}; wait for it to finish or choose another {flag}") from None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the holder removed the file as we opened it: lock the new one
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)
