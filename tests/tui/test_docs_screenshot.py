"""docs/tui.svg reads the same in every renderer: each word is its own <text> at its own cell, so
renderers that ignore `textLength` or lack the font (cairosvg, rsvg) keep the x-axis labels under
their ticks and the plan name apart from the file name. Redrawn by `python -m budgetdsl.tui.docs_pictures`."""

import html
import re

import pytest
from budgetdsl.tui.docs_pictures import cell_aligned_svg
from tui_helpers import REPO

TEXT = re.compile(r'<text class="[^"]+" x="([\d.]+)" y="([\d.]+)" textLength="([\d.]+)" '
                  r'clip-path="url\(#[^)]*line-\d+\)"[^>]*>([^<]*)</text>')


def texts(svg: str) -> list[tuple[float, float, str]]:
    """(x, y, text) of every terminal <text>."""
    return [(float(x), float(y), html.unescape(body)) for x, y, _l, body in TEXT.findall(svg)]


def test_each_word_is_placed_at_its_own_cell():
    from rich.console import Console

    console = Console(record=True, width=40, color_system="truecolor", file=open("/dev/null", "w"))
    console.print("  ab   cdefghijklmnopqrs z", style="bold", end="")
    svg = cell_aligned_svg(console.export_svg())
    placed = texts(svg)
    x0 = placed[0][0] - 2 * 12.2  # the row starts two cells left of "ab"
    # the export's cell is 12.2 px (0.61 × its 20 px font); long words are cut at 16 cells
    assert [(round((x - x0) / 12.2, 6), t) for x, _, t in placed] == [
        (2, "ab"), (7, "cdefghijklmnopqr"), (23, "s"), (25, "z")]
    assert 'font-family: monospace, "Fira Code";' in svg


@pytest.fixture(scope="module")
def screenshot() -> list[tuple[float, float, str]]:
    """The words of docs/tui.svg: pieces that abut on a row joined again."""
    out: list[tuple[float, float, str]] = []
    for x, y, t in sorted(texts((REPO / "docs" / "tui.svg").read_text()), key=lambda p: (p[1], p[0])):
        if out and out[-1][1] == y and abs(out[-1][0] + len(out[-1][2]) * 12.2 - x) < 0.01:
            out[-1] = (out[-1][0], y, out[-1][2] + t)
        else:
            out.append((x, y, t))
    return out


def test_no_text_starts_with_or_holds_a_space(screenshot):
    assert screenshot and not [t for _, _, t in screenshot if not t or any(c.isspace() for c in t)]


def test_the_title_keeps_plan_and_file_apart(screenshot):
    top = min(y for _, y, _ in screenshot)
    line = sorted((x, t) for x, y, t in screenshot if y == top)
    words = [t for _, t in line]
    i = words.index("llama2-7b")
    assert words[i + 1] == "llama2-7b.yaml"
    (x_name, name), (x_file, _) = line[i], line[i + 1]
    assert x_file - x_name >= (len(name) + 1) * 12.2 - 0.01  # at least one blank cell between


def test_x_axis_labels_sit_under_their_ticks(screenshot):
    rows: dict[float, list[tuple[float, str]]] = {}
    for x, y, t in screenshot:
        rows.setdefault(y, []).append((x, t))
    label_y = next(y for y, items in rows.items() if {"500k", "1M", "2M"} <= {t for _, t in items})
    axis_y = max(y for y in rows if y < label_y)  # the row above: the x axis with its ┬ ticks
    ticks = [x + i * 12.2 for x, t in rows[axis_y] for i, c in enumerate(t) if c == "┬"]
    labels = [(x, t) for x, t in rows[label_y] if t[0].isdigit()]
    assert len(labels) >= 4 and len(ticks) >= len(labels)
    for x, t in labels:
        centre = x + len(t) * 12.2 / 2
        nearest = min(ticks, key=lambda tx: abs(tx + 6.1 - centre))
        assert abs(nearest + 6.1 - centre) <= 12.2, (t, x, nearest)  # within a cell of its tick
