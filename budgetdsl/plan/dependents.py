"""Which plans of a repository extend a file, directly or through other bases.

A change to a base fragment changes every plan that extends it, although none of those files
changed: a pre-commit hook handed only the changed files must find them (`budgetdsl check
--dependents`). The repository's YAML files are those git knows (tracked, or new and not ignored),
or, outside a git work tree, the files below the directory; only files that mention `extends` are
parsed, each with the bounded, tag-free reader the loader uses, and a file that does not parse is
no one's dependent (it is reported when checked itself).
"""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path

from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.yaml_source import MAX_FILE_BYTES, parse_yaml, read_bytes

_SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".mypy_cache"}


def repository_yaml_files(root: Path) -> list[Path]:
    """The YAML files of the repository at `root` (git's view where it is a work tree)."""
    from budgetdsl.plan.git_source import GitError, work_tree_files

    try:
        return [root / p for p in work_tree_files(root, ["*.yaml", "*.yml"]) if (root / p).is_file()]
    except GitError:  # not a work tree, or no git: every YAML file below root
        found: list[Path] = []
        for dirpath, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
            found.extend(Path(dirpath) / n for n in sorted(names) if n.endswith((".yaml", ".yml")))
        return found


def extends_target(path: Path) -> Path | None:
    """The resolved file that `path` extends, or None (no `extends`, not a plan, unreadable)."""
    try:  # the loader's reader: a FIFO or a device is refused without blocking, and bounded
        raw = read_bytes(str(path))
    except OSError:
        return None
    if len(raw) > MAX_FILE_BYTES or b"extends" not in raw:
        return None
    try:
        data = parse_yaml(raw.decode("utf-8"), str(path)).data
    except (PlanError, UnicodeDecodeError):
        return None
    parent = data.get("extends")
    if not isinstance(parent, str) or not parent.endswith((".yaml", ".yml")):
        return None
    return (path.parent / parent).resolve()


def repository_root(start: str | os.PathLike[str] = ".") -> Path:
    """The git work tree that holds `start`, or `start` itself outside one."""
    from budgetdsl.plan.git_source import GitError, repo_root

    try:
        return repo_root(start)
    except GitError:
        return Path(start).resolve()


def dependents(changed: list[str], root: Path | None = None) -> dict[str, str]:
    """Every file of the repository that extends one of `changed`, directly or transitively,
    mapped to the changed file it reaches; paths as the user would write them (relative to the
    working directory), in a stable order. The changed files themselves are not included."""
    root = root or repository_root()
    children: dict[Path, list[Path]] = {}
    for path in repository_yaml_files(root):
        target = extends_target(path)
        if target is not None:
            children.setdefault(target, []).append(path.resolve())
    starts = {Path(p).resolve(): p for p in changed}
    found: dict[Path, str] = {}
    queue = deque((real, name) for real, name in starts.items())
    while queue:
        real, origin = queue.popleft()
        for child in children.get(real, []):
            if child in starts or child in found:
                continue
            found[child] = origin
            queue.append((child, origin))
    return {os.path.relpath(p): origin for p, origin in sorted(found.items())}
