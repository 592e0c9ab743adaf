"""The installed package is the product: what the wheel puts into site-packages.

A wheel must install exactly one import package (`budgetdsl`): the top-level folders calibrate/
and tui/ go in as budgetdsl.calibrate and budgetdsl.tui, since distributions named `calibrate` and
`tui` exist on the package index. Every file the running code reads (the TUI's stylesheet, the
type marker) must be in it. `.ci/wheel-smoke.sh` runs the installed commands from a clean venv.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _not_source(folder: str, names: list[str]) -> set[str]:
    """What a build of a clean checkout would not see: VCS data, earlier builds, caches, virtual envs."""
    junk = {".git", "build", "dist", "__pycache__", ".hypothesis", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
    return {n for n in names if n in junk or n.endswith(".egg-info") or (Path(folder, n, "pyvenv.cfg")).exists()}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """The wheel pip builds from a copy of the sources. Built in the work tree, setuptools would write
    build/ and budgetdsl.egg-info/ there while the other workers of `make test` read the tree, and
    would pack whatever an earlier build left in build/lib."""
    src = tmp_path_factory.mktemp("src") / "budgetdsl"
    shutil.copytree(REPO, src, ignore=_not_source, symlinks=True)
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    (path,) = out.glob("budgetdsl-*.whl")
    return zipfile.ZipFile(path)


def test_one_top_level_import_package(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/")[0] for name in wheel.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"budgetdsl"}
    top_level = [n for n in wheel.namelist() if n.endswith(".dist-info/top_level.txt")]
    if top_level:
        assert wheel.read(top_level[0]).decode().split() == ["budgetdsl"]


@pytest.mark.parametrize("folder, package", [("calibrate", "budgetdsl/calibrate"), ("tui", "budgetdsl/tui"),
                                             ("budgetdsl", "budgetdsl")])
def test_every_source_and_data_file_is_installed(wheel: zipfile.ZipFile, folder: str, package: str) -> None:
    names = set(wheel.namelist())
    shipped = [p for p in (REPO / folder).rglob("*")
               if p.is_file() and "__pycache__" not in p.parts and p.suffix in {".py", ".tcss", ".typed"}]
    assert shipped
    missing = [str(p.relative_to(REPO)) for p in shipped
               if f"{package}/{p.relative_to(REPO / folder).as_posix()}" not in names]
    assert not missing, f"not in the wheel: {missing}"


def test_console_script(wheel: zipfile.ZipFile) -> None:
    (entry,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    assert "budgetdsl = budgetdsl.cli:main" in wheel.read(entry).decode()
