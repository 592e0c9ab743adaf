"""The `budgetdsl` console command: argument parsing and exit codes (budgetdsl.io.exit_codes), nothing else.

Diagnostics go to stderr, results to stdout, so `budgetdsl plan --format json | jq` works.
argparse rather than click/typer: it costs nothing at start-up, and plans are checked in CI and
pre-commit hooks.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import textwrap
import types
from typing import NoReturn

from budgetdsl import __version__
from budgetdsl.commands import COMMANDS
from budgetdsl.io.exit_codes import ExitCode
from budgetdsl.io.result_stream import OutputError, results_stdout
from budgetdsl.io.terminal_text import inert, one_line, tell


class _Parser(argparse.ArgumentParser):
    """argparse quotes most of what it was given with repr(), but not all ("unrecognized
    arguments: ..."): its messages go out inert, as every other message on stderr, and the error's
    words on one line (`terminal_text.tell`)."""

    def error(self, message: str) -> NoReturn:
        super().error(one_line(message))

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        super().exit(status, inert(message) if message else message)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every command, or with `only`, that command alone (main() passes
    the command that argv names, so `budgetdsl plan` neither imports nor compiles the modules of
    calibrate, sweep, tui, ...; the chosen command parses exactly as in the full parser)."""
    parser = _Parser(
        prog="budgetdsl",
        description="Plan the budget of a training run on the critical-batch frontier.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit codes (docs/cli.md):\n" + "\n".join(
            textwrap.fill(c.meaning, 92, initial_indent=f"  {int(c):<5}", subsequent_indent=" " * 7)
            for c in ExitCode),
    )
    parser.add_argument("--version", action="version", version=f"budgetdsl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS if only is None else (only,):
        module = importlib.import_module(f"budgetdsl.commands.{name}")
        module.register(sub)
    return parser


def _without_pydantic_plugins() -> None:
    """Turn pydantic's plugins off for the command line, before pydantic is imported.

    pydantic looks for plugins (the `pydantic` entry points of every installed distribution) when
    it builds its first model, reading each distribution's metadata at start-up. budgetdsl uses no
    pydantic plugin, so the command line sets pydantic's documented switch,
    PYDANTIC_DISABLE_PLUGINS (unless the user set it). Python code that imports budgetdsl keeps
    pydantic's own behaviour.

    pydantic's plugin loader imports importlib.metadata (and with it email, zipfile, ...) at the
    top of its module, before it reads the switch, about 5 % of a cold `budgetdsl plan`. With every
    plugin off that loader answers no plugins and nothing else, so the command line registers a
    stand-in that answers the same without the import."""
    if "pydantic" in sys.modules or os.environ.get("PYDANTIC_DISABLE_PLUGINS") is not None:
        return
    os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"
    sys.modules.setdefault(_PLUGIN_LOADER, _no_plugins_loader())


_PLUGIN_LOADER = "pydantic.plugin._loader"


def _no_plugins_loader() -> types.ModuleType:
    """A stand-in for pydantic's plugin loader with every plugin disabled: `get_plugins()` is empty."""
    module = types.ModuleType(_PLUGIN_LOADER, "pydantic's plugin loader with every plugin disabled (budgetdsl.cli)")
    module.PYDANTIC_ENTRY_POINT_GROUP = "pydantic"  # type: ignore[attr-defined]
    module.get_plugins = tuple  # type: ignore[attr-defined]  # () as the real one with PYDANTIC_DISABLE_PLUGINS=__all__
    return module


def _unicode_safe_stdio() -> None:
    """Results (stdout) in UTF-8, diagnostics (stderr) in the terminal's encoding with escapes.

    Reports use '—', '→', '×' and plan names hold any character; with stdout in ASCII or Latin-1
    (PYTHONIOENCODING, a C locale without Python's UTF-8 mode, a Windows pipe in cp1252) the
    first of them would raise UnicodeEncodeError (exit 3). JSON, YAML and the scripts are read as UTF-8,
    so stdout becomes UTF-8 (the data stays exact); stderr is for people, so it keeps the
    terminal's encoding and writes what it cannot show as \\u escapes."""
    out, err = sys.stdout, sys.stderr
    try:
        if (getattr(out, "encoding", None) or "utf-8").lower().replace("-", "").replace("_", "") != "utf8":
            out.reconfigure(encoding="utf-8", errors="backslashreplace")  # type: ignore[union-attr]
        elif getattr(out, "errors", None) == "strict":  # UTF-8 encodes all but a file name's odd bytes
            out.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
        if getattr(err, "errors", "strict") == "strict":
            err.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):  # not a TextIOWrapper (an embedding host's stream)
        pass


def main(argv: list[str] | None = None) -> int:
    _without_pydantic_plugins()
    _unicode_safe_stdio()
    stdout = sys.stdout
    sys.stdout = results_stdout(stdout)  # every write flushed and checked: OutputError, EPIPE
    try:
        words = sys.argv[1:] if argv is None else argv
        parser = build_parser(words[0] if words and words[0] in COMMANDS else None)
        args = parser.parse_args(argv)  # usage errors: SystemExit(2) with argparse's message
        code = int(args.handler(args))
        sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        tell("budgetdsl: interrupted")
        return ExitCode.INTERRUPTED
    except OutputError as exc:  # a full disk under `> file`: the user's to act on, not a bug
        tell(exc.line())
        return ExitCode.INVALID
    except BrokenPipeError as exc:
        if not _stdout_closed():
            from budgetdsl.io.crash_report import report_internal_error

            return report_internal_error(exc, argv)
        return ExitCode.BROKEN_PIPE
    except Exception as exc:  # a bug: never exit 0 or 1, which are answers
        from budgetdsl.io.crash_report import report_internal_error

        return report_internal_error(exc, argv)
    finally:
        sys.stdout = stdout


def _stdout_closed() -> bool:
    """True when stdout's reader went away (`budgetdsl plan ... | head`), False when the broken
    pipe was another one (a bug to report). Stdout is then pointed at /dev/null, so that the
    interpreter's last flush does not print a second BrokenPipeError."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):  # not a real file (tests capture stdout)
        return True
    try:
        import select

        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        if not any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0)):
            return False  # stdout still has a reader
    except (OSError, AttributeError):  # no poll() here: take the usual cause
        pass
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except OSError:
        pass
    return True


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
