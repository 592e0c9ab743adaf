"""The one reader for every file the tool reads from a path a user or a plan gave: plans, their
bases, calibrations, the TUI's keymap.

A path may name a FIFO (opening it for reading blocks until a writer comes), a device (/dev/zero
never ends) or a symbolic link swapped between a check and the open. So the file is opened once
without blocking (O_NONBLOCK), the open descriptor is checked with fstat (a regular file only),
at most `limit + 1` bytes are read (the caller refuses more than `limit`), and where the file must
lie inside a directory, the check is made on what was opened, not on the path again.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)


class NotRegularFile(OSError):
    """A path that names a FIFO, a device or a socket: never read (it may block or never end)."""


class OutsideRoot(PermissionError):
    """The file opened lies outside the directory it must stay in (a symbolic link led out)."""


def _opened_path(fd: int, path: str) -> str:
    """The real path of the file open on `fd`, as the kernel sees it (/proc/self/fd on Linux);
    elsewhere the path resolved now, accepted only when it names the very file that was opened."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        real = os.path.realpath(path)
        opened, named = os.fstat(fd), os.stat(real)
        if (opened.st_dev, opened.st_ino) != (named.st_dev, named.st_ino):
            raise OutsideRoot(errno.EACCES, "the file changed while it was opened", path) from None
        return real


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # another drive on Windows
        return False


def _open_checked(path: str | os.PathLike[str], inside: str | os.PathLike[str] | None) -> int:
    """A descriptor open on the regular file at `path`, opened without blocking and checked (above)."""
    fd = os.open(path, _FLAGS)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", os.fspath(path))
        if not stat.S_ISREG(mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file", os.fspath(path))
        if inside is not None and not _inside(_opened_path(fd, os.fspath(path)), os.path.realpath(inside)):
            raise OutsideRoot(errno.EACCES, "a symbolic link out of the repository", os.fspath(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: str | os.PathLike[str], inside: str | os.PathLike[str] | None = None) -> BinaryIO:
    """The regular file at `path` open for streaming reads (a log too large to hold), after the
    checks of `read_regular`; the caller bounds what it keeps."""
    return os.fdopen(_open_checked(path, inside), "rb")


def read_regular(path: str | os.PathLike[str], limit: int, inside: str | os.PathLike[str] | None = None) -> bytes:
    """At most `limit + 1` bytes of the regular file at `path` (more than `limit` means too large).

    IsADirectoryError for a directory, NotRegularFile for a FIFO, a device or a socket (without
    blocking), OutsideRoot when `inside` is given and the file opened is not below it."""
    fd = _open_checked(path, inside)
    try:
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 16, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
