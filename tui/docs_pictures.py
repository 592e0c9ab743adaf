"""The pictures in docs/, redrawn from committed inputs: `python -m budgetdsl.tui.docs_pictures`.

The frontier and sweep pictures come from the report's plots; the TUI screenshot is the Textual
app's own SVG export, re-laid on the cell grid so every SVG renderer shows it aligned. It lives
beside the app because it starts the app; the core never imports the TUI.
"""

from __future__ import annotations

# The pictures under docs/ and what draws each; `python -m budgetdsl.tui.docs_pictures` redraws them all
# (run from the repository root; the TUI screenshot needs the `tui` extra).
DOCS_PICTURES = {
    "docs/frontier-7b-h100.svg": "budgetdsl plan plans/7b-h100-choose-gpus.yaml --plot docs/frontier-7b-h100.svg",
    "docs/sweep-gpt-micro.svg": "the sweep of tests/fixtures/calibration/sweep-gpt-micro-stdlib.json "
                                "(budgetdsl calibrate sweep --plot draws the same from a new sweep)",
    "docs/tui.svg": "budgetdsl tui plans/llama2-7b.yaml at 120×36, exported by Textual, cell-aligned",
}
TUI_SIZE = (120, 36)
_PIECE = 16  # cells per <text> at most: a font whose advance is 1.5 % off the cell drifts < 0.25 cell
# Braille (the plot's curve) is missing from common monospace fonts (DejaVu Sans Mono): cairosvg
# takes only the first family and has no fallback, so braille cells name a font that has it, one
# cell per <text> since that font is proportional.
_BRAILLE_FONTS = "DejaVu Sans, Segoe UI Symbol, monospace"


def _braille(ch: str) -> bool:
    return 0x2800 <= ord(ch) <= 0x28FF


def cell_aligned_svg(svg: str) -> str:
    """A terminal screenshot (Rich/Textual's SVG export) that every renderer lays out on the grid.

    The export writes each run of one style as one <text> of many cells, stretched to its width by
    `textLength`, in Fira Code. Renderers that ignore `textLength` (cairosvg) or lack the font
    (rsvg, cairosvg without Fira Code installed: a proportional fallback) drift along a run, so axis
    labels slid off their ticks; and rsvg drops a run's leading spaces, which ran words together.
    Here each run is cut at its spaces and into pieces of at most `_PIECE` cells, each its own
    <text> at its own cell's x, and the font is the generic `monospace` first (cairosvg uses only
    the first family it is given), so the error stays within a piece; braille cells get a font
    that has braille (`_BRAILLE_FONTS`)."""
    import html
    import re

    from rich.cells import cell_len

    text_re = re.compile(r'<text class="([^"]+)" x="([\d.]+)" y="([\d.]+)" textLength="([\d.]+)" '
                         r'clip-path="([^"]+)">([^<]*)</text>')
    from collections import Counter

    widths = Counter(round(float(m.group(4)) / cell_len(html.unescape(m.group(6))), 4)
                     for m in text_re.finditer(svg) if cell_len(html.unescape(m.group(6))))
    if not widths:
        return svg
    cell = widths.most_common(1)[0][0]  # 12.2 for the export's 20px font

    def split(m: re.Match) -> str:
        cls, x, y, _length, clip, body = m.groups()
        chars = html.unescape(body)
        out, col, piece, start = [], 0, "", 0

        def flush() -> None:
            if piece:
                font = f' font-family="{_BRAILLE_FONTS}"' if _braille(piece[0]) else ""
                out.append(f'<text class="{cls}" x="{float(x) + start * cell:.4g}" y="{y}" '
                           f'textLength="{cell_len(piece) * cell:.4g}" clip-path="{clip}"{font}>'
                           f'{html.escape(piece, quote=False)}</text>')

        for ch in chars:
            if ch.isspace():
                flush()
                piece = ""
            else:
                if not piece or cell_len(piece) >= _PIECE or _braille(ch) or _braille(piece[0]):
                    flush()
                    piece, start = "", col
                piece += ch
            col += cell_len(ch)
        flush()
        return "".join(out)

    svg = text_re.sub(split, svg)
    return svg.replace("font-family: Fira Code, monospace;", 'font-family: monospace, "Fira Code";')


def tui_screenshot(plan: str, path: str, size: tuple[int, int] = TUI_SIZE) -> None:
    """Write the TUI on `plan` as it first appears, `size` (columns, rows), as a cell-aligned SVG."""
    import asyncio
    import os

    from budgetdsl.tui.app import make_app

    from budgetdsl.io.atomic_write import write_file

    async def shoot() -> str:
        app = make_app(plan, keymap={})
        async with app.run_test(size=size) as pilot:
            await app.wait_solved()  # the first solve runs in the app's worker
            await pilot.pause()
            return app.export_screenshot(title=f"budgetdsl tui {os.path.relpath(plan)}")

    write_file(path, cell_aligned_svg(asyncio.run(shoot())).encode())


def redraw_docs(root: str = ".") -> list[str]:
    """Redraw every picture of DOCS_PICTURES from the committed inputs; the paths written."""
    import os

    from budgetdsl.plan.calibration_file import load_calibration
    from budgetdsl.plan.loader import load_plan
    from budgetdsl.report import frontier_plot, sweep_plot
    from budgetdsl.solve.solver import solve

    def at(rel: str) -> str:
        return os.path.join(root, rel)

    frontier_plot.draw(solve(load_plan(at("plans/7b-h100-choose-gpus.yaml"))), at("docs/frontier-7b-h100.svg"))
    cal = load_calibration(at("tests/fixtures/calibration/sweep-gpt-micro-stdlib.json"))
    sweep_plot.draw(cal.sweep, at("docs/sweep-gpt-micro.svg"))
    tui_screenshot(at("plans/llama2-7b.yaml"), at("docs/tui.svg"))
    return list(DOCS_PICTURES)


if __name__ == "__main__":
    for written in redraw_docs():
        print(f"drew {written}")
