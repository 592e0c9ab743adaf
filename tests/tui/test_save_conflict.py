"""Saving never silently undoes a change made on disk since the TUI loaded the plan (issue 14):
the save refuses with a notice and a dialog, and the person reloads or overwrites. Saving through
a symbolic link writes the link's target."""

from __future__ import annotations

import os

from budgetdsl.tui.app import make_app
from budgetdsl.tui.widgets.screens.conflict_screen import ConflictScreen
from tui_helpers import headless, notifications, ready


async def _change_gpus_then(app, pilot, edit_on_disk) -> None:
    await pilot.press("tab")  # from the plot, where the app opens, into the GPU count
    await pilot.pause()
    assert app.focused.id == "gpus"
    await pilot.press("minus")  # 1024 -> 512 GPUs
    await pilot.pause()
    assert dict(app.state.changes) == {"hardware.gpus": 512}
    edit_on_disk()
    await pilot.press("ctrl+s")
    await pilot.pause()


@headless
async def test_a_value_changed_on_disk_is_not_overwritten_and_reload_shows_it(plans):
    path = plans / "llama2-7b.yaml"
    app = make_app(path)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        edited = path.read_text().replace("deadline: 21 days", "deadline: 30 days")
        await _change_gpus_then(app, pilot, lambda: path.write_text(edited))
        assert isinstance(app.screen, ConflictScreen)
        assert "changed on disk" in notifications(app)[-1]
        assert path.read_text() == edited  # nothing written
        await pilot.press("r")  # reload: the file's new value, this session's change dropped
        await pilot.pause()
        assert not app.state.dirty and app.state.raw("budget.deadline") == "30 days"
    assert path.read_text() == edited


@headless
async def test_a_key_deleted_on_disk_is_not_re_added_unless_overwritten(plans):
    path = plans / "llama2-7b.yaml"
    app = make_app(path)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        edited = path.read_text().replace("  uncertainty: 30%\n", "")
        await _change_gpus_then(app, pilot, lambda: path.write_text(edited))
        assert isinstance(app.screen, ConflictScreen) and "uncertainty" not in path.read_text()
        await pilot.press("o")  # overwrite: this session's value lands on the file's new content
        await pilot.pause()
        assert not app.state.dirty
    text = path.read_text()
    assert "  gpus: 512" in text and "uncertainty" not in text


@headless
async def test_saving_through_a_symlink_writes_its_target(plans):
    target = plans / "llama2-7b.yaml"
    link = plans / "link.yaml"
    os.symlink("llama2-7b.yaml", link)
    app = make_app(link)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await _change_gpus_then(app, pilot, lambda: None)
        assert not isinstance(app.screen, ConflictScreen) and not app.state.dirty
    assert os.path.islink(link) and "  gpus: 512" in target.read_text()
    assert not [p for p in os.listdir(plans) if p.endswith(".tmp")]
