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
micro-batch) and redraw the layout & Pareto front box too.

Run: .venv/bin/python bench/bench_tui.py
"""

from __future__ import annotations

import asyncio
import pathlib
import statistics
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
PLAN = REPO / "plans" / "llama2-7b.yaml"
ROUNDS = 12  # per key
KEYS = (("deadline", "plus"), ("deadline", "minus"), ("batch", "plus"), ("batch", "minus"),
        (None, "f2"), (None, "ctrl+b"))
SEARCHED = REPO / "plans" / "minimal.yaml"
SEARCH_KEYS = (("gpus", "plus"), ("gpus", "minus"))


async def measure(size: tuple[int, int], plan: pathlib.Path = PLAN,
                  keys: tuple[tuple[str | None, str], ...] = KEYS) -> dict[str, list[float]]:
    from textual import events
    from textual._compositor import CompositorUpdate

    from budgetdsl.tui.app import make_app

    app = make_app(plan)
    samples: dict[str, list[float]] = {}
    async with app.run_test(size=size) as pilot:
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
                await asyncio.sleep(0.03)  # let the previous frame settle
                frame.clear()
                stamp.clear()
                start = time.perf_counter()
                app._driver.send_message(events.Key(key, "+" if key == "plus" else "-" if key == "minus" else None))
                await asyncio.wait_for(frame.wait(), 5)
                while getattr(app, "solving", False):  # a re-solve in a worker: until it is drawn
                    frame.clear()
                    stamp.clear()
                    await asyncio.wait_for(frame.wait(), 5)
                samples.setdefault(f"{control or 'app'} {key}" + ("" if plan == PLAN else f" ({plan.stem})"), []).append((stamp[0] - start) * 1000)
    return samples


def main() -> int:
    sys.path.insert(0, str(REPO))
    print(f"budgetdsl tui: keypress-to-redraw on {PLAN.relative_to(REPO)} "
          f"({ROUNDS} rounds × {len(KEYS)} keys per size; median / p95 / max ms)")
    worst = 0.0
    for size in ((80, 24), (160, 48)):
        samples = asyncio.run(measure(size))
        samples |= asyncio.run(measure(size, SEARCHED, SEARCH_KEYS))
        everything = [v for vs in samples.values() for v in vs]
        print(f"\n{size[0]}×{size[1]}")
        for name, vs in samples.items():
            vs = sorted(vs)
            print(f"  {name:<22} {statistics.median(vs):6.1f} {vs[int(0.95 * (len(vs) - 1))]:6.1f} {vs[-1]:6.1f}")
        everything.sort()
        p95 = everything[int(0.95 * (len(everything) - 1))]
        print(f"  {'all keys':<22} {statistics.median(everything):6.1f} {p95:6.1f} {everything[-1]:6.1f}")
        worst = max(worst, p95)
    print(f"\np95 over all keys and sizes: {worst:.1f} ms (aim ≤ 50 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
