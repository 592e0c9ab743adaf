"""Write files whole or not at all: plans, launch configs, calibrations and pictures.

Each file is written to a temporary file beside it (same file system), flushed to disk, and renamed
over the target with os.replace, so a reader — or a crash, or Ctrl-C — never sees half a file.
Several files are all written before any is renamed: an edit of a plan and its base plan either
lands in both or fails before touching either. A symbolic link is written through (its target
changes, the link stays), and temporary files that a killed writer left are removed by the next
write of the same file (their names carry the writer's pid). Only a regular file (or a new path) is
replaced: a character device or a FIFO (/dev/null, /dev/stdout on a pipe, a named pipe) is written
into as a stream, opened without O_CREAT or O_TRUNC; a socket, a block device or a directory is
refused, so `-o /dev/null` run as root never turns /dev/null into a file.

One rule for every output path (`export -o`, `plan --plot`, `calibrate --out`, a TUI save): its
folder must exist; none is made (MissingFolder), so a misspelt path fails loudly instead of
leaving a new tree of folders (docs/cli.md, "Output paths").
"""

from __future__ import annotations

import errno
import os
import re
import shlex
import stat
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


class NotAFile(OSError):
    """An output path that names a socket or a block device: nothing is written."""


class MissingFolder(FileNotFoundError):
    """An output path whose folder does not exist: nothing is written, and no folder made."""


def check_folder(name: str | os.PathLike[str]) -> None:
    """MissingFolder when the folder `name` would be written in does not exist (a symbolic link's
    target's folder, for a link), with what to run; the one rule of every output path. A path
    through a file is NotADirectoryError; anything else the write itself reports."""
    try:
        if stat.S_ISDIR(os.stat(os.path.dirname(_real(name))).st_mode):
            return
        missing = False
    except FileNotFoundError:
        missing = True
    except NotADirectoryError:
        missing = False
    except OSError:
        return
    if not missing:
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), os.fspath(name))
    folder = os.path.dirname(os.fspath(name)) or "."
    raise MissingFolder(errno.ENOENT, f"no such folder {folder}; make it first (mkdir -p {shlex.quote(folder)})",
                        os.fspath(name))


def _is_stream(name: str | os.PathLike[str]) -> bool:
    """Whether `name` (links followed) is a character device or a FIFO, written into in place;
    NotAFile for what is neither that nor a regular file (nor a new path)."""
    try:
        mode = os.stat(name).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISREG(mode):
        return False
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return True
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory; nothing written", os.fspath(name))
    what = "a socket" if stat.S_ISSOCK(mode) else "a block device" if stat.S_ISBLK(mode) else "not a regular file"
    raise NotAFile(errno.EINVAL, f"{what}, not a file; nothing written", os.fspath(name))


def _write_stream(name: str | os.PathLike[str], payload: bytes) -> None:
    """Write into a device or a FIFO as a shell's `>` does, without creating or truncating: the
    path is opened as it is (/dev/stdout reopens this process's stdout, whatever it is)."""
    fd = os.open(name, os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0))
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):  # swapped for a regular file since the check
            raise NotAFile(errno.EAGAIN, "changed while it was opened; nothing written", os.fspath(name))
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def write_files(files: Mapping[_PathT, str | bytes], mode: int | None = None) -> None:
    """Replace every file of `files` (path -> text or bytes). A file that exists keeps its
    permissions; a new one gets `mode`, or the usual 0o666 less the umask. A path that is a
    symbolic link is followed: its target is replaced (the link stays a link), with the temporary
    file beside the target, on the target's file system. A character device or a FIFO is written
    into after the files are replaced; anything else but a regular file is NotAFile. A path whose
    folder does not exist is MissingFolder (`check_folder`), before anything is written."""
    temps: list[tuple[str, str]] = []
    for name in files:
        check_folder(name)
    streams = [name for name in files if _is_stream(name)]
    try:
        for name, data in files.items():
            if name in streams:
                continue
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
        for name in streams:
            data = files[name]
            _write_stream(name, data.encode("utf-8") if isinstance(data, str) else data)
    finally:
        for tmp, _ in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)


def write_file(path: str | os.PathLike[str], data: str | bytes, mode: int | None = None) -> None:
    """Replace one file atomically (see `write_files`)."""
    write_files({path: data}, mode)
