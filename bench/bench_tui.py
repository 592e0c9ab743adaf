"""Benchmark: keypress-to-redraw time of `budgetdsl tui` (aim: ≤ 50 ms).

The app runs headless on plans/llama2-7b.yaml at 80×24 and 160×48. Each sample sends one key
event to the app's driver and stops the clock when the next frame is ready to be written: the
compositor update after the key, serialised to the escape sequences a terminal would receive
(the work `App._display` does on a real terminal; headless it skips only the final write). So a
sample holds the key's handling (parse, re-solve with `solve`, every panel and the plot re-drawn)
and Textual's own frame pacing (a frame at most every 1/60 s), but not the terminal emulator.

Keys: `+`/`-` on the deadline and on the batch (each re-solves), F2 (the plot's x axis: wall
clock through the cost model), Ctrl+B (pin / unpin the batch: re-solves with the comparison).

A second plan, plans/minimal.yaml, leaves its layout to the solver (issue 13): `+`/`-` on its
GPU count (64 <-> 128) re-search the layout (tensor/pipeline parallelism, ZeRO, recomputation,
micro-batch) and redraw the layout & Pareto front box too. A third, plans/7b-h100-choose-gpus.yaml
without its `mfu` and `zero` lines, searches the layout over a GPU range (64-2048, step 64):
`+`/`-` on its deadline re-solve for hundreds of milliseconds, so after the first the re-solves
run in the app's worker thread; for those keys two figures are printed, the first frame after the
key (the controls and the status bar: `solving…`) and the frame that draws the answer.

Run: .venv/bin/python bench/bench_tui.py
"""

from __future__ import annotations

import asyncio
import pathlib
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
PLAN = REPO / "plans" / "llama2-7b.yaml"
ROUNDS = 12  # per key
KEYS = (("deadline", "plus"), ("deadline", "minus"), ("batch", "plus"), ("batch", "minus"),
        (None, "f2"), (None, "ctrl+b"))
SEARCHED = REPO / "plans" / "minimal.yaml"
SEARCH_KEYS = (("gpus", "plus"), ("gpus", "minus"))
RANGE_KEYS = (("deadline", "plus"), ("deadline", "minus"))


def range_plan(folder: pathlib.Path) -> pathlib.Path:
    """plans/7b-h100-choose-gpus.yaml with the layout left to the solver (no mfu, no zero)."""
    text = (REPO / "plans" / "7b-h100-choose-gpus.yaml").read_text()
    lines = [line for line in text.splitlines() if not line.lstrip().startswith(("mfu:", "zero:"))]
    out = folder / "7b-h100-search-range.yaml"
    out.write_text("\n".join(lines) + "\n")
    return out


async def measure(size: tuple[int, int], plan: pathlib.Path = PLAN,
                  keys: tuple[tuple[str | None, str], ...] = KEYS) -> dict[str, list[float]]:
    from textual import events
    from textual._compositor import CompositorUpdate

    from budgetdsl.tui.app import make_app

    app = make_app(plan)
    samples: dict[str, list[float]] = {}
    async with app.run_test(size=size) as pilot:
        if hasattr(app, "wait_solved"):  # the first solve runs in the app's worker
            await app.wait_solved()
        await pilot.pause()
        frame = asyncio.Event()
        stamp: list[float] = []

        def display(screen, renderable) -> None:  # what App._display does before writing
            if isinstance(renderable, CompositorUpdate):
                renderable.render_segments(app.console)
                if not frame.is_set():
                    stamp.append(time.perf_counter())
                    frame.set()

        app._display = display  # type: ignore[method-assign]
        for _ in range(ROUNDS):
            for control, key in keys:
                if control is not None and app.focused is not app.query_one(f"#{control}"):
                    app.query_one(f"#{control}").focus()
                    await pilot.pause()
                await pilot.pause()
                await asyncio.sleep(0.03)  # let the previous frame settle
                frame.clear()
                stamp.clear()
                start = time.perf_counter()
                app._driver.send_message(events.Key(key, "+" if key == "plus" else "-" if key == "minus" else None))
                await asyncio.wait_for(frame.wait(), 5)
                name = f"{control or 'app'} {key}" + ("" if plan == PLAN else f" ({plan.stem})")
                if app.solving:  # a re-solve in the worker: the first frame, then the answer's
                    samples.setdefault(name + " first", []).append((stamp[0] - start) * 1000)
                    while app.solving:
                        await asyncio.sleep(0.001)
                    frame.clear()
                    stamp.clear()
                    app.refresh()
                    await asyncio.wait_for(frame.wait(), 5)
                    name += " drawn"
                samples.setdefault(name, []).append((stamp[0] - start) * 1000)
    return samples


def _row(name: str, vs: list[float]) -> str:
    vs = sorted(vs)
    return f"  {name:<44} {statistics.median(vs):6.1f} {vs[int(0.95 * (len(vs) - 1))]:6.1f} {vs[-1]:6.1f}"


def main() -> int:
    sys.path.insert(0, str(REPO))
    print(f"budgetdsl tui: keypress-to-redraw ({ROUNDS} rounds per key and size; median / p95 / max ms)")
    worst = 0.0
    for size in ((80, 24), (160, 48)):
        print(f"\n{size[0]}×{size[1]}")
        samples = asyncio.run(measure(size))
        print(f" {PLAN.relative_to(REPO)}")
        for name, vs in samples.items():
            print(_row(name, vs))
        everything = [v for vs in samples.values() for v in vs]
        print(_row("all keys", everything))
        everything.sort()
        worst = max(worst, everything[int(0.95 * (len(everything) - 1))])
        searched = asyncio.run(measure(size, SEARCHED, SEARCH_KEYS))
        with tempfile.TemporaryDirectory() as tmp:
            searched |= asyncio.run(measure(size, range_plan(pathlib.Path(tmp)), RANGE_KEYS))
        print(" layout searched")
        for name, vs in searched.items():
            print(_row(name, vs))
    print(f"\np95 over {PLAN.relative_to(REPO)}'s keys and both sizes: {worst:.1f} ms (aim ≤ 50 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
