"""Write files whole or not at all: plans, launch configs, calibrations and pictures.

Each file is written to a temporary file beside it (same file system), flushed to disk, and renamed
over the target with os.replace, so a reader — or a crash, or Ctrl-C — never sees half a file.
Several files are all written before any is renamed: an edit of a plan and its base plan either
lands in both or fails before touching either.
"""

from __future__ import annotations

import os
import tempfile
from typing import Mapping


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_files(files: Mapping[str | os.PathLike[str], str | bytes], mode: int | None = None) -> None:
    """Replace every file of `files` (path -> text or bytes). A file that exists keeps its
    permissions; a new one gets `mode`, or the usual 0o666 less the umask."""
    temps: list[tuple[str, str]] = []
    try:
        for path, data in files.items():
            path = os.fspath(path)
            directory = os.path.dirname(os.path.abspath(path))
            fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
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
