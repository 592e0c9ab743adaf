"""The exit codes of every `budgetdsl` command: the one place they are defined.

A CI job branches on them, so each has one meaning across commands (ruff, pip and black follow
the same split): 1 is an answer ("no"), 2 is the caller's mistake, 3 is ours. An unexpected
exception must never look like an answer, which is why it has a code of its own (3) instead of
Python's default 1. docs/cli.md documents the table; a test keeps the two in step.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    NO = 1
    INVALID = 2
    INTERNAL = 3
    INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process stopped by Ctrl-C
    BROKEN_PIPE = 141  # 128 + SIGPIPE, as any Unix filter whose reader went away reports it

    @property
    def meaning(self) -> str:
        return MEANINGS[self]


MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "fine: every plan valid and feasible, the export or the calibration written",
    ExitCode.NO: 'the answer is "no": a plan is infeasible, `check --solve` found an infeasible '
                 "plan, a diff regressed, a calibration measurement failed",
    ExitCode.INVALID: "invalid input or usage: a plan that does not validate, a missing or "
                      "unreadable file, a bad flag, an output that cannot be written",
    ExitCode.INTERNAL: "internal error (a bug in budgetdsl): one line on stderr names the file "
                       "holding the traceback",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
    ExitCode.BROKEN_PIPE: "the reader of stdout went away (`| head`) before the whole answer "
                          "was written; nothing is printed",
}
