"""Benchmark: keypress-to-redraw time of `budgetdsl tui`, headless at 80×24 and 160×48.

A sample runs from one key event to the next frame serialised for a terminal: the key's handling
(re-solve, panels, plot) and Textual's frame pacing, not the terminal emulator. Keys on llama2-7b,
on minimal (its layout searched) and on 7b-h100-choose-gpus without `mfu`/`zero` (a GPU range
searched in the worker: the first frame and the answer's both shown). Each row: wall clock median /
p95 / max and the UI thread's CPU time. Run: .venv/bin/python bench/bench_tui.py [--cold] [--rounds=N]
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
ROUNDS = next((int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--rounds=")), 12)  # per key
# The keys step back and forth, so from the second round each picture was drawn before: the plot
# keeps its last drawings by their inputs. `--cold` drops them before each key, all but the one on
# screen (as for a value never seen).
COLD = "--cold" in sys.argv
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
    from budgetdsl.tui.app import make_app
    from textual import events
    from textual._compositor import CompositorUpdate

    app = make_app(plan)
    samples: dict[str, list[tuple[float, float]]] = {}  # (wall ms, UI-thread CPU ms) per key
    async with app.run_test(size=size) as pilot:
        if hasattr(app, "wait_solved"):  # the first solve runs in the app's worker
            await app.wait_solved()
        await pilot.pause()
        frame = asyncio.Event()
        stamp: list[tuple[float, float]] = []

        def display(screen, renderable) -> None:  # what App._display does before writing
            if isinstance(renderable, CompositorUpdate):
                renderable.render_segments(app.console)
                if not frame.is_set():
                    stamp.append((time.perf_counter(), time.thread_time()))
                    frame.set()

        def sample(start: tuple[float, float]) -> tuple[float, float]:
            return (stamp[0][0] - start[0]) * 1000, (stamp[0][1] - start[1]) * 1000

        app._display = display  # type: ignore[method-assign]
        for _ in range(ROUNDS):
            for control, key in keys:
                if control is not None and app.focused is not app.query_one(f"#{control}"):
                    app.query_one(f"#{control}").focus()
                    await pilot.pause()
                await pilot.pause()
                await asyncio.sleep(0.03)  # let the previous frame settle
                kept = getattr(app.query_one("#plot"), "_drawn", None)
                while COLD and kept and len(kept) > 1:  # only the drawing on screen is kept
                    kept.popitem(last=False)
                frame.clear()
                stamp.clear()
                start = (time.perf_counter(), time.thread_time())
                app._driver.send_message(events.Key(key, "+" if key == "plus" else "-" if key == "minus" else None))
                await asyncio.wait_for(frame.wait(), 5)
                name = f"{control or 'app'} {key}" + ("" if plan == PLAN else f" ({plan.stem})")
                if app.solving:  # a re-solve in the worker: the first frame, then the answer's
                    samples.setdefault(name + " first", []).append(sample(start))
                    while app.solving:
                        await asyncio.sleep(0.001)
                    frame.clear()
                    stamp.clear()
                    app.refresh()
                    await asyncio.wait_for(frame.wait(), 5)
                    name += " drawn"
                samples.setdefault(name, []).append(sample(start))
    return samples


def _p95(vs: list[float]) -> float:
    return sorted(vs)[int(0.95 * (len(vs) - 1))]


def _row(name: str, samples: list[tuple[float, float]]) -> str:
    wall, cpu = [w for w, _ in samples], [c for _, c in samples]
    return (f"  {name:<44} {statistics.median(wall):6.1f} {_p95(wall):6.1f} {max(wall):6.1f}"
            f"   cpu {statistics.median(cpu):5.1f} {_p95(cpu):5.1f}")


def main() -> int:
    sys.path.insert(0, str(REPO))
    print(f"budgetdsl tui: keypress-to-redraw ({ROUNDS} rounds per key and size; median / p95 / max ms,"
          " then the UI thread's CPU ms: median / p95)"
          + (", nothing drawn before kept" if COLD else ""))
    worst = 0.0
    for size in ((80, 24), (160, 48)):
        print(f"\n{size[0]}×{size[1]}")
        samples = asyncio.run(measure(size))
        print(f" {PLAN.relative_to(REPO)}")
        for name, vs in samples.items():
            print(_row(name, vs))
        everything = [v for vs in samples.values() for v in vs]
        print(_row("all keys", everything))
        worst = max(worst, _p95([w for w, _ in everything]))
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
