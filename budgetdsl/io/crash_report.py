"""What the command line does with an exception nobody expected: one line on stderr, the whole
traceback in a file.

A bug must not read as an answer: it exits ExitCode.INTERNAL (3), never 0 or 1, and says so in a
single line a CI log shows whole — the exception's type, a short message and where the traceback
went — instead of forty lines of stack that bury the diagnostics printed before it. The file goes
to $BUDGETDSL_TRACEBACK_DIR, or the system's temporary folder; its name carries the time and the
process id, and it is created private (0600: a traceback shows paths and values of the plan).
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import time
import traceback

from budgetdsl.io.exit_codes import ExitCode
from budgetdsl.io.terminal_text import tell

TRACEBACK_DIR_ENV = "BUDGETDSL_TRACEBACK_DIR"
MESSAGE_CHARS = 200  # of the exception's message on the one line; the file has all of it


def short_message(exc: BaseException) -> str:
    """The first line of the exception's message, printable and at most MESSAGE_CHARS long."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 3] + "..."


def write_traceback(exc: BaseException, argv: list[str] | None = None) -> str:
    """Write the full traceback (with the versions and the command line) to a new file; its path."""
    from budgetdsl import __version__

    folder = os.environ.get(TRACEBACK_DIR_ENV) or tempfile.gettempdir()
    os.makedirs(folder, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    fd, path = tempfile.mkstemp(prefix=f"budgetdsl-traceback-{stamp}-{os.getpid()}-", suffix=".txt",
                                dir=folder)
    with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as f:
        f.write(f"budgetdsl {__version__}, Python {platform.python_version()} on {platform.platform()}\n")
        f.write(f"command: {' '.join(['budgetdsl', *(argv if argv is not None else sys.argv[1:])])}\n\n")
        f.write("".join(traceback.format_exception(exc)))
    return path


def report_internal_error(exc: BaseException, argv: list[str] | None = None) -> ExitCode:
    """Print the one line (the traceback itself, when no file can be written); ExitCode.INTERNAL."""
    what = type(exc).__name__
    message = short_message(exc)
    head = f"budgetdsl: internal error: {what}" + (f": {message}" if message else "")
    try:
        path = write_traceback(exc, argv)
    except OSError as io_error:
        tell(f"{head}; could not write the traceback ({io_error.strerror or io_error}), so here it is:")
        tell(*"".join(traceback.format_exception(exc)).rstrip("\n").split("\n"))
    else:
        tell(f"{head}; traceback written to {path}")
    return ExitCode.INTERNAL
