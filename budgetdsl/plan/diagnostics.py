"""Located diagnostics: the one shape every problem with a plan is reported in.

A plan file comes from a pull request, so a problem must say *where* (file:line:col), *what*
(a stable code and a message) and *what to do* (a hint), in the style of ruff and rustc:

    plans/a.yaml:12:5: error[unknown-key]: unknown key 'gpu_count' in 'hardware'
      hint: did you mean 'gpus'?
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TextIO


@dataclass(frozen=True, slots=True, order=True)
class Location:
    """A 1-based position in a source file."""

    file: str
    line: int = 0
    col: int = 0

    def __str__(self) -> str:
        if self.line <= 0:
            return self.file
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One problem, located, with a stable machine-readable code."""

    location: Location
    code: str
    message: str
    hint: str | None = None
    severity: str = "error"

    def lines(self) -> list[str]:
        """The diagnostic's lines, inert (file names and plan text: shown, not obeyed): the head on
        one line, whatever its message holds, then the hint's own lines (`terminal_text.tell`)."""
        from budgetdsl.io.terminal_text import inert, one_line

        head = f"{one_line(str(self.location))}: {self.severity}[{self.code}]: {one_line(self.message)}"
        if not self.hint:
            return [head]
        first, *rest = inert(self.hint).split("\n")
        return [head, f"  hint: {first}", *rest]

    def format(self) -> str:
        return "\n".join(self.lines())

    def to_json(self) -> dict:
        data = asdict(self)
        data["location"] = asdict(self.location)
        return data

    def sort_key(self) -> tuple:
        return (self.location, self.code, self.message)


class PlanError(Exception):
    """Raised when a plan cannot be loaded; carries every diagnostic found, not just the first."""

    def __init__(self, diagnostics: Iterable[Diagnostic]):
        unique = {d.format(): d for d in diagnostics}  # keep each distinct problem once
        self.diagnostics: list[Diagnostic] = sorted(unique.values(), key=Diagnostic.sort_key)
        super().__init__("\n".join(d.format() for d in self.diagnostics))

    def report(self, stream: TextIO | None = None) -> None:
        """Print every diagnostic, one after another, to stderr (or `stream`)."""
        for d in self.diagnostics:
            print(d.format(), file=stream or sys.stderr)


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """A `did you mean 'x'?` hint for the closest candidate, or None when nothing is close."""
    import difflib  # only a misspelled name reaches here

    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else None
