"""Helpers to drive the app as a person would: focus a control, type plan-language text, read
what a panel shows."""

from __future__ import annotations

import pathlib

import pytest

pytest.importorskip("textual")

from textual.geometry import Region  # noqa: E402
from textual.keys import _character_to_key  # noqa: E402
from textual.widget import Widget  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
PLAN = REPO / "plans" / "llama2-7b.yaml"


def shown(widget: Widget) -> str:
    """The text a widget shows on screen now, line by line."""
    width, height = widget.size
    return "\n".join(strip.text.rstrip() for strip in widget.render_lines(Region(0, 0, width, height)))


async def ready(pilot) -> None:
    """Wait until the app has drawn the answer of every solve asked for (the first solve at
    launch and the one after save run in the app's worker thread)."""
    await pilot.app.wait_solved()
    await pilot.pause()


async def type_into(pilot, control_id: str, text: str) -> None:
    """Focus a control, clear it and type `text`, then Enter, key by key; wait for the answer."""
    pilot.app.query_one(f"#{control_id}").focus()
    await pilot.pause()
    await pilot.press("end", "ctrl+u")
    await pilot.press(*[_character_to_key(c) for c in text])
    await pilot.press("enter")
    await ready(pilot)


def notifications(app) -> list[str]:
    return [n.message for n in app._notifications]


def headless(test):
    """Run an async test (a Pilot scenario) to completion: no asyncio plugin needed."""
    import asyncio
    import functools

    @functools.wraps(test)
    def run(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))
    return run
