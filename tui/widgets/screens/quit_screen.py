"""Asked on quit with unsaved changes: save, discard, or stay."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class QuitScreen(ModalScreen[str]):
    """Dismisses with "save", "discard" or "cancel"."""

    BINDINGS = [
        Binding("s", "choose('save')", "Save and quit", id="quit-dialog.save"),
        Binding("d", "choose('discard')", "Discard and quit", id="quit-dialog.discard"),
        Binding("escape,c", "choose('cancel')", "Cancel", id="quit-dialog.cancel"),
    ]

    def __init__(self, changed: list[str]) -> None:
        super().__init__()
        self.changed = changed

    def compose(self) -> ComposeResult:
        with Vertical(id="quit-dialog"):
            yield Static(f"[b]Unsaved changes[/b] to {', '.join(self.changed)}.", markup=True)
            with Horizontal(id="quit-buttons"):
                yield Button("Save and quit [s]", id="save", variant="primary")
                yield Button("Discard [d]", id="discard", variant="error")
                yield Button("Cancel [esc]", id="cancel")

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id or "cancel")
