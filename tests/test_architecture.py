"""The package tree is the architecture: data flows plan → cost → solve → report, never back up.

Layers, lowest first (docs/design.md, "The package tree"); a module may import its own layer and
the layers below it. `exports` and `commands` sit on top; the core never imports the TUI or the
calibration extra (torch, textual), except the commands that run them. Imports under
`if TYPE_CHECKING:` count too: a type that only a higher layer defines is an upward dependency.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
LAYERS = ["io", "quantities", "theory", "hardware", "plan", "cost", "solve", "report", "track", "exports", "commands"]
EXTRAS = ("budgetdsl.calibrate", "budgetdsl.tui")


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in sorted((ROOT / "budgetdsl").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, module) of every budgetdsl import in the file, wherever it stands."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("budgetdsl"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.append((node.lineno, sub if sub in MODULES else node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("budgetdsl")]
    return found


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def test_every_module_lives_in_a_layer():
    loose = [m for m in MODULES if _layer(m) is None and m not in
             ("budgetdsl", "budgetdsl.__main__", "budgetdsl.cli")]
    assert not loose, f"modules outside the concept packages: {loose}"


def test_no_import_runs_back_up():
    upward = []
    for name, path in MODULES.items():
        own = _layer(name)
        for line, target in _imports(path):
            if target.startswith(EXTRAS):
                if own != "commands":
                    upward.append(f"{path.relative_to(ROOT)}:{line} imports {target} (an extra)")
                continue
            other = _layer(target)
            if own and other and LAYERS.index(other) > LAYERS.index(own):
                upward.append(f"{path.relative_to(ROOT)}:{line} ({own}) imports {target} ({other})")
    assert not upward, "\n".join(upward)


def test_the_import_graph_has_no_circle():
    graph = {name: {t for _, t in _imports(path) if t in MODULES and t != name} for name, path in MODULES.items()}
    # Tarjan's strongly connected components: any component of two or more modules is a circle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not circles, f"import circles: {circles}"


@pytest.mark.parametrize("layer", LAYERS[:-2])
def test_each_layer_package_says_what_it_holds(layer):
    init = ROOT / "budgetdsl" / layer / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
    assert doc and len(doc.splitlines()) <= 6, f"{init}: a docstring of a few lines says what the package holds"
