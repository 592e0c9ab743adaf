"""What several commands do the same way at the edge: load a plan, or say why not."""

from __future__ import annotations

from typing import TYPE_CHECKING

from budgetdsl.io.terminal_text import tell
from budgetdsl.plan.diagnostics import PlanError

if TYPE_CHECKING:
    from budgetdsl.plan.model import Plan


def load_or_report(path: str) -> Plan | None:
    """The plan at `path`, or None after printing its diagnostics (the caller exits 2)."""
    from budgetdsl.plan.loader import load_plan

    try:
        return load_plan(path)
    except PlanError as exc:
        exc.report()
    except OSError as exc:
        tell(f"{path}: error[io]: {exc.strerror or exc}")
    return None


def extra_hint(extra: str) -> str:
    """How to install an optional extra, as the README installs budgetdsl: from a clone. It is not
    on PyPI, so a bare `pip install 'budgetdsl[x]'` would fail (or fetch someone else's package)."""
    return (f"install the '{extra}' extra: pip install '.[{extra}]' in the clone of budgetdsl "
            "(README, 'Install from the repository'; not on PyPI)")
