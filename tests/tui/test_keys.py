"""Keys as a person reaches for them: Esc leaves a field so single letters are commands again
(as in k9s, lazygit, htop), entering a field selects its value so typing replaces it, and every
binding has an id that a keymap can move to other keys (Textual's keymap, as posting does)."""

import pytest
from budgetdsl.tui.app import binding_ids, make_app
from budgetdsl.tui.keymap import load_keymap
from budgetdsl.tui.widgets.controls.quantity_input import QuantityInput
from budgetdsl.tui.widgets.frontier.plot import FrontierPlot
from budgetdsl.tui.widgets.screens.quit_screen import QuitScreen
from textual.keys import _character_to_key
from tui_helpers import PLAN, headless, notifications, ready


def keys(text: str) -> list[str]:
    return [_character_to_key(c) for c in text]


@headless
async def test_escape_leaves_the_input_and_q_then_quits_through_the_unsaved_dialog(plans):
    app = make_app(plans / "llama2-7b.yaml", keymap={})
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.pause()
        await pilot.press("tab", "minus")  # into the GPU count; 1024 -> 512 GPUs: an unsaved change
        await pilot.pause()
        batch = app.query_one("#batch", QuantityInput)
        batch.focus()
        await pilot.pause()
        await pilot.press(*keys("512 * model.seq_len"), "q")  # in a field, q is a character
        await pilot.pause()
        assert batch.value == "512 * model.seq_lenq" and app.is_running
        assert not isinstance(app.screen, QuitScreen)
        await pilot.press("escape")  # drops the typed text and leaves the field
        await pilot.pause()
        assert batch.value == batch.committed == "1024 * model.seq_len"
        assert isinstance(app.focused, FrontierPlot)
        assert dict(app.state.changes) == {"hardware.gpus": 512}  # the typed text was not applied
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, QuitScreen) and app.is_running  # unsaved changes: asked first
        await pilot.press("d")
        await pilot.pause()
    assert not app.is_running


@headless
async def test_q_quits_at_once_from_the_plot_without_changes():
    app = make_app(PLAN, keymap={})
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.pause()
        await pilot.press("escape", "q")
        await pilot.pause()
    assert not app.is_running


@headless
async def test_the_footer_says_esc_leaves_a_field():
    app = make_app(PLAN, keymap={})
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        await pilot.press("tab")  # from the plot, where the app opens, into the GPU count
        await pilot.pause()
        shown = {b.binding.key: b.binding.description for b in app.screen.active_bindings.values()
                 if b.binding.show}
        assert shown.get("escape") == "Leave field"
        assert "q" not in app.screen.active_bindings  # the focused Input types it
        app.query_one(FrontierPlot).focus()
        await pilot.pause()
        assert "escape" not in app.screen.active_bindings and "q" in app.screen.active_bindings


@pytest.mark.parametrize("control,typed,expected", [("gpus", "512", "512"),
                                                    ("deadline", "14 days", "14 days")])
@headless
async def test_typing_into_a_field_replaces_its_value(control, typed, expected):
    app = make_app(PLAN, keymap={})
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.pause()
        app.query_one(FrontierPlot).focus()
        await pilot.pause()
        field = app.query_one(f"#{control}", QuantityInput)
        field.focus()  # as Tab, ↑ ↓ do
        await pilot.pause()
        assert app.focused is field
        await pilot.press(*keys(typed))
        assert field.value == expected  # not 1024512 / 21 days14 days
        await pilot.press("enter")
        await pilot.pause()
        assert field.committed == expected
        await pilot.press(*keys(typed[:1]))  # after Enter the new value is selected again
        assert field.value == typed[:1]


def test_every_binding_has_an_id_and_the_ids_are_documented():
    from tui_helpers import REPO

    ids = binding_ids()
    assert {"quit", "quit.letter", "save", "reset", "pin-batch", "help", "plot.x-axis",
            "field.leave"} <= set(ids)
    doc = (REPO / "docs" / "tui.md").read_text()
    missing = [i for i in ids if f"`{i}`" not in doc]
    assert not missing, f"binding ids not in docs/tui.md: {missing}"


@headless
async def test_a_keymap_moves_a_binding(plans):
    app = make_app(plans / "llama2-7b.yaml", keymap={"plot.x-axis": "f6", "quit": "ctrl+x"})
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.pause()
        plot = app.query_one(FrontierPlot)
        await pilot.press("f2")  # no longer bound
        await pilot.pause()
        assert plot.x_axis == "steps"
        await pilot.press("f6")
        await pilot.pause()
        assert plot.x_axis == "wall"
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert app.is_running
        await pilot.press("ctrl+x")
        await pilot.pause()
    assert not app.is_running


@headless
async def test_a_keymap_moves_a_field_binding_too():
    app = make_app(PLAN, keymap={"field.leave": "ctrl+g"})
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.pause()
        await pilot.press("tab", "escape")  # into the GPU count; Esc no longer leaves it
        await pilot.pause()
        assert app.focused.id == "gpus"
        await pilot.press("ctrl+g")
        await pilot.pause()
        assert isinstance(app.focused, FrontierPlot)


@headless
async def test_the_keymap_file_is_read_and_a_bad_entry_is_named(tmp_path, monkeypatch):
    (tmp_path / "budgetdsl").mkdir()
    (tmp_path / "budgetdsl" / "keymap.yaml").write_text("plot.y-axis: f7\nno-such-binding: f8\nhelp: 3\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    keymap, problems = load_keymap()
    assert keymap == {"plot.y-axis": "f7"}
    assert any("'no-such-binding'" in p for p in problems) and any("help:" in p for p in problems)
    app = make_app(PLAN)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.pause()
        await pilot.press("f7")
        await pilot.pause()
        assert app.query_one(FrontierPlot).y_axis == "flops"
        assert any("no-such-binding" in n for n in notifications(app))


@pytest.mark.parametrize("key", ["q", "question_mark", "x"])
@headless
async def test_the_first_keypress_does_what_the_help_says(key):
    """The app opened with focus in the GPUs field, so the first `q` typed "q" into it. It opens on
    the plot: a letter is a command at once, and Tab enters the first control."""
    app = make_app(PLAN, keymap={})
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.pause()
        gpus = app.query_one("#gpus", QuantityInput)
        before, x_axis = gpus.value, app.query_one(FrontierPlot).x_axis
        await pilot.press(key)
        await pilot.pause()
        assert gpus.value == before and not app.state.changes
        if key == "q":
            assert not app.is_running
            return
        if key == "question_mark":
            assert type(app.screen).__name__ == "HelpScreen"
        else:
            assert app.query_one(FrontierPlot).x_axis != x_axis
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("tab")
        await pilot.pause()
        assert app.focused is gpus
