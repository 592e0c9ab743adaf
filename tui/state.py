"""The what-if state: the plan files as read, and the values the person changed on top of them.

Changes are kept as `budgetdsl.plan.edit.save_changes` takes them (dotted path -> the value as it
would be written: `"14 days"`, `2048 * model.seq_len`, or None to remove the key), and the plan is
built by the plan loader from the merged document with those values in. So the TUI accepts exactly
the plan language, reports a bad value with the loader's message, and what is saved loads back to
the plan shown. No solver logic lives here.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from budgetdsl.plan.loader import MergedSource
    from budgetdsl.plan.model import Plan

_MISSING = object()


def get_raw(data: Mapping[str, Any], dotted: str) -> Any:
    """The raw (unevaluated) value at `dotted` in a document, or `_MISSING`."""
    node: Any = data
    for key in dotted.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return _MISSING
        node = node[key]
    return node


def _apply(data: dict[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of `data` with each change set (None: removed)."""
    out = copy.deepcopy(data)
    for dotted, value in changes.items():
        keys = dotted.split(".")
        node = out
        for key in keys[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                if value is None:
                    break
                child = node[key] = {}
            node = child
        else:
            if value is None:
                node.pop(keys[-1], None)
            else:
                node[keys[-1]] = value
    return out


@dataclass(frozen=True)
class WhatIf:
    """A plan file (and the bases it extends) with unsaved changes on top. Immutable."""

    path: str
    source: MergedSource
    changes: Mapping[str, Any] = field(default_factory=dict)
    plan: Plan = field(default=None, compare=False)  # type: ignore[assignment] - set by build

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> WhatIf:
        """Read the plan chain from disk. Raises PlanError (located) or OSError."""
        from budgetdsl.plan.loader import read_merged

        return cls._build(str(path), read_merged(path), {})

    @classmethod
    def _build(cls, path: str, source: MergedSource, changes: Mapping[str, Any]) -> WhatIf:
        from budgetdsl.plan.loader import load_merged

        merged = dataclasses.replace(source, data=_apply(source.data, changes)) if changes else source
        plan = load_merged(merged)  # located errors and the calibration path resolve against the files
        return cls(path, source, dict(changes), plan)

    # -- reading ---------------------------------------------------------------------------------

    def raw(self, dotted: str) -> Any:
        """The value as written (or as changed) at `dotted`; None when absent."""
        if dotted in self.changes:
            return self.changes[dotted]
        value = get_raw(self.source.data, dotted)
        return None if value is _MISSING else value

    def file_raw(self, dotted: str) -> Any:
        value = get_raw(self.source.data, dotted)
        return None if value is _MISSING else value

    @property
    def dirty(self) -> bool:
        return bool(self.changes)

    def changed_keys(self) -> list[str]:
        return sorted(self.changes)

    # -- changing --------------------------------------------------------------------------------

    def with_changes(self, updates: Mapping[str, Any]) -> WhatIf:
        """A new state with `updates` applied; a value equal to the file's drops its change.

        Raises PlanError when the resulting plan does not validate (nothing changes then)."""
        changes = dict(self.changes)
        for dotted, value in updates.items():
            on_file = get_raw(self.source.data, dotted)
            same = (value is None and on_file is _MISSING) or (on_file is not _MISSING and on_file == value)
            if same:
                changes.pop(dotted, None)
            else:
                changes[dotted] = value
        return self._build(self.path, self.source, changes)

    def reset(self) -> WhatIf:
        """Re-read the files from disk, dropping every change."""
        return WhatIf.load(self.path)

    def save(self, overwrite: bool = False) -> list[str]:
        """Write the changes as a minimal in-place diff (plan_edit); return the files written.

        Raises EditError or PlanError when they cannot be written; nothing is written then.
        ChangedOnDisk (an EditError) when a file of the chain changed on disk since it was
        loaded, unless `overwrite`."""
        from budgetdsl.plan.edit import loaded_hashes, save_changes

        if not self.changes:
            return []
        return save_changes(self.path, self.changes, None if overwrite else loaded_hashes(self.source))
