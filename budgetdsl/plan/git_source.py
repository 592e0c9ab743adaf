"""Read plan files as they were at a git revision, for `budgetdsl diff --base REF`.

A plan at a revision must be read with its `extends` chain at that same revision (a base plan may
have changed too), so this gives the loader an `opener` that reads bytes with `git show REF:path`
instead of from disk. Only git's plumbing is called, with arguments passed as a list (no shell).
Paths go to and come from git as bytes, decoded as the file system's names are (os.fsdecode:
a byte that is not UTF-8 becomes a surrogate escape, \\udcXX), so any name git allows works.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


class GitError(RuntimeError):
    """git failed: not a repository, an unknown revision, git missing."""


def _git(args: list[str], cwd: str | os.PathLike[str]) -> bytes:
    try:  # a path argument with surrogate escapes goes back to git as its original bytes
        result = subprocess.run([b"git", *map(os.fsencode, args)], cwd=cwd, capture_output=True, check=False)
    except FileNotFoundError:
        raise GitError("git is not installed") from None
    if result.returncode != 0:
        raise GitError(result.stderr.decode(errors="replace").strip() or f"git {' '.join(args)} failed")
    return result.stdout


def repo_root(cwd: str | os.PathLike[str] = ".") -> Path:
    return Path(os.fsdecode(_git(["rev-parse", "--show-toplevel"], cwd).rstrip(b"\n")))


def shown_ref(ref: str, limit: int = 80) -> str:
    """`ref` quoted for a message, cut to `limit` characters with its length (a ref is argv)."""
    text = repr(ref)
    return text if len(text) <= limit else f"{text[:limit - 1]}… ({len(ref):,} characters)"


def resolve_revision(ref: str, cwd: str | os.PathLike[str] = ".") -> str:
    """The commit id of `ref`; GitError with git's message when it does not name one."""
    if ref.startswith("-"):
        raise GitError(f"not a revision: {shown_ref(ref)}")
    try:
        return _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd).decode().strip()
    except GitError as exc:
        if str(exc).startswith("fatal:"):  # not a repository, ...: git's own words
            raise
        raise GitError(f"unknown revision {shown_ref(ref)}\n  hint: a branch or commit this clone has; fetch it "
                       "first (git fetch origin main; a CI checkout needs the base's history, e.g. "
                       "actions/checkout with fetch-depth: 0)") from None


def files_at(commit: str, root: Path, paths: list[str]) -> list[str]:
    """Files under `paths` (relative to `root`) that exist at `commit`."""
    out = _git(["ls-tree", "-r", "--name-only", "-z", commit, "--", *paths], root)
    return [os.fsdecode(p) for p in out.split(b"\0") if p]


def work_tree_files(root: Path, patterns: list[str]) -> list[str]:
    """Files of the work tree at `root` matching git pathspecs: tracked, or new and not ignored."""
    out = _git(["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *patterns], root)
    return sorted({os.fsdecode(p) for p in out.split(b"\0") if p})


def opener_at(commit: str, root: Path):
    """An opener for `budgetdsl.plan.source.read_merged` that reads files at `commit` (paths on disk are
    mapped to paths in the repository relative to `root`)."""

    def open_at(path: str) -> bytes:
        rel = os.path.relpath(os.path.abspath(path), root)
        if rel.startswith(".."):
            raise FileNotFoundError(path)
        try:
            data = _git(["show", f"{commit}:{Path(rel).as_posix()}"], root)
        except GitError:
            raise FileNotFoundError(path) from None
        return data  # the readers bound what they accept (a plan: MAX_FILE_BYTES)

    return open_at
