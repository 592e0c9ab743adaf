"""The README and docs/ cite only what a clone of this repository holds: every relative link (and
its #anchor) resolves, every repository path quoted in inline code exists, nothing points outside
the project; the README stays short, and its first plan is the committed plans/minimal.yaml (which
the plan and export tests solve and validate with every other example plan)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
README_MAX_LINES = 220

FENCE = re.compile(r"^ {0,3}(```|~~~)[^\n]*\n.*?^ {0,3}\1[ \t]*$", re.M | re.S)
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^()\s<>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE = re.compile(r"(`+)([^`\n]+?)\1")
HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)
# Top-level names that are not part of the project: environments, build output, caches.
NOT_PROJECT = {".git", ".venv", "build", "dist", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache"}


def _prose(text: str) -> str:
    """The page without fenced code blocks (examples, outputs), line count kept."""
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, -1, -2 … on repeats."""
    seen: dict[str, int] = {}
    out = set()
    for title in HEADING.findall(_prose(page.read_text(encoding="utf-8"))):
        slug = re.sub(r"[^\w\- ]", "", title.replace("`", "").strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _top_level(repo: Path) -> set[str]:
    return {p.name for p in repo.iterdir()
            if p.name not in NOT_PROJECT and not p.name.endswith(".egg-info")}


def _cited_path(token: str, top: set[str]) -> bool:
    """Whether an inline-code span is a path into the repository: one word, no URL or placeholder,
    starting with a top-level folder of the project (`plans/llama2-7b.yaml`, `tests/fixtures/`),
    or a Markdown file name (`design.md`)."""
    if any(c in token for c in " <>{}…$=") or "://" in token:
        return False
    parts = token.removeprefix("./").split("/")
    if len(parts) > 1:
        return parts[0] in top
    return token.endswith(".md")


def problems(page: Path, repo: Path = REPO) -> list[str]:
    """Every broken link, missing anchor, missing cited path and outside reference of `page`."""
    text = page.read_text(encoding="utf-8")
    prose = _prose(text)
    top = _top_level(repo)
    found: list[str] = []

    def where(pos: int) -> str:
        return f"{page.name}:{prose.count(chr(10), 0, pos) + 1}"

    if "../shared" in text:
        found.append(f"{page.name}: refers to ../shared, which a clone does not have")
    for m in LINK.finditer(prose):
        target = m.group(1)
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            found.append(f"{where(m.start())}: link to {target!r}: {path} does not exist")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            found.append(f"{where(m.start())}: link to {target!r}: no heading #{anchor} in {dest.name}")
    for m in CODE.finditer(prose):
        token = re.sub(r"(::\S*|(:\d+)+)$", "", m.group(2).strip())  # pytest ids, file:line:col
        if not _cited_path(token, top):
            continue
        relative = token.removeprefix("./")
        if "*" in token:  # a glob, e.g. `plans/*.yaml` or `plans/**/*.yaml`: it must match something
            ok = any(any(base.glob(relative)) for base in (repo, page.parent))
        else:
            ok = any((base / relative).exists() for base in (repo, page.parent))
        if not ok:
            found.append(f"{where(m.start())}: cites `{token}`, which is not in the repository")
    return found


def test_there_are_docs() -> None:
    assert README.exists() and len(PAGES) > 1


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_and_cited_file_exists(page: Path) -> None:
    found = problems(page)
    assert not found, "\n".join(found)


def test_readme_stays_short() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; details belong in docs/"


def test_readme_first_plan_is_the_committed_minimal_plan() -> None:
    """The README shows plans/minimal.yaml whole, so the suite's plan tests check what it shows."""
    text = README.read_text(encoding="utf-8")
    after = text[text.index("(plans/minimal.yaml)"):]
    block = re.search(r"```yaml\n(.*?)```", after, re.S).group(1)
    assert block == (REPO / "plans/minimal.yaml").read_text(encoding="utf-8")


def test_the_checker_finds_what_is_broken(tmp_path: Path) -> None:
    """Negative control: each kind of mistake on a page is reported, a sound page is not."""
    (tmp_path / "other.md").write_text("# Other page\n\n## A `code` section: here\n")
    good = tmp_path / "good.md"
    good.write_text("# Good\n\n[other](other.md#a-code-section-here), [web](https://example.org), "
                    "[self](#good), `plans/llama2-7b.yaml`, `plans/*.yaml`, `budgetdsl/`, "
                    "`my_proxy.py`, `calibrations/gpt-mini.json`, `.venv/bin/budgetdsl plan`, `plans/**/*.yaml`, "
                    "`budgetdsl/cli.py:12`, `tests/test_docs_links.py::test_readme_stays_short`\n\n"
                    "```sh\ncat plans/missing.yaml  # [x](missing.md) in a code block is an example\n```\n")
    assert problems(good) == []
    bad = tmp_path / "bad.md"
    bad.write_text("# Bad\n\nSee [the design](design-missing.md) and [a part](other.md#no-such-part),\n"
                   "`plans/no-such-plan.yaml:3:5`, `docs/*.nothing`, `DESIGN.md`, and ../shared/DESIGN.md.\n")
    found = "\n".join(problems(bad))
    for expected in ("bad.md:3: link to 'design-missing.md'", "no heading #no-such-part in other.md",
                     "cites `plans/no-such-plan.yaml`", "cites `docs/*.nothing`", "cites `DESIGN.md`",
                     "refers to ../shared"):
        assert expected in found, found
    assert len(problems(bad)) == 6
