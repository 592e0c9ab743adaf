"""Write files whole or not at all: plans, launch configs, calibrations and pictures.

Each file is written to a temporary file beside it (same file system), flushed to disk, and renamed
over the target with os.replace, so a reader — or a crash, or Ctrl-C — never sees half a file.
Several files are all written before any is renamed: an edit of a plan and its base plan either
lands in both or fails before touching either. A symbolic link is written through (its target
changes, the link stays), and temporary files that a killed writer left are removed by the next
write of the same file (their names carry the writer's pid).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from typing import TypeVar

_PathT = TypeVar("_PathT", bound=str | os.PathLike[str])


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # another user's process, or no way to tell: keep its file
    return True


def remove_stale_temps(path: str | os.PathLike[str]) -> list[str]:
    """Remove the temporary files a killed writer of `path` left beside it: `.NAME.PID.*.tmp`
    (write_files) and `NAME.PID.tmp` (calibration checkpoints), when process PID is gone.
    Called at the start of every write of `path`, so a SIGKILL leaves at most one orphan, until the
    next save or resume. Returns the files removed."""
    target = os.path.realpath(os.fspath(path))
    directory, name = os.path.split(target)
    stale = re.compile(rf"(?:\.{re.escape(name)}\.(\d+)\.[^/]*|{re.escape(name)}\.(\d+))\.tmp")
    removed: list[str] = []
    try:
        entries = os.listdir(directory)
    except OSError:
        return removed
    for entry in entries:
        m = stale.fullmatch(entry)
        if m is None or _alive(int(m.group(1) or m.group(2))):
            continue
        try:
            os.unlink(os.path.join(directory, entry))
            removed.append(os.path.join(directory, entry))
        except OSError:
            pass
    return removed


def _real(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.fspath(path))


def write_files(files: Mapping[_PathT, str | bytes], mode: int | None = None) -> None:
    """Replace every file of `files` (path -> text or bytes). A file that exists keeps its
    permissions; a new one gets `mode`, or the usual 0o666 less the umask. A path that is a
    symbolic link is followed: its target is replaced (the link stays a link), with the temporary
    file beside the target, on the target's file system."""
    temps: list[tuple[str, str]] = []
    try:
        for name, data in files.items():
            path = _real(name)
            remove_stale_temps(path)
            directory = os.path.dirname(path)
            fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.{os.getpid()}.", suffix=".tmp",
                                       dir=directory)
            temps.append((tmp, path))
            payload = data.encode("utf-8") if isinstance(data, str) else data
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            if os.path.exists(path):
                os.chmod(tmp, os.stat(path).st_mode & 0o777)
            else:
                os.chmod(tmp, mode if mode is not None else 0o666 & ~_umask())
        for tmp, path in temps:
            os.replace(tmp, path)
    finally:
        for tmp, _ in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)


def write_file(path: str | os.PathLike[str], data: str | bytes, mode: int | None = None) -> None:
    """Replace one file atomically (see `write_files`)."""
    write_files({path: data}, mode)
