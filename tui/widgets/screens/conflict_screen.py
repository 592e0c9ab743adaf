"""Asked when a save finds the plan changed on disk since it was loaded: reload, overwrite, or stay.

Saving silently would undo the other change (a value edited in an editor, a key deleted by a
merge); reloading drops this session's unsaved changes instead. The person chooses.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConflictScreen(ModalScreen[str]):
    """Dismisses with "reload", "overwrite" or "cancel". Styled as the quit dialog (app.tcss)."""

    DEFAULT_CSS = "ConflictScreen { align: center middle; }"
    BINDINGS = [
        Binding("r", "choose('reload')", "Reload from disk"),
        Binding("o", "choose('overwrite')", "Overwrite"),
        Binding("escape,c", "choose('cancel')", "Cancel"),
    ]

    def __init__(self, files: list[str]) -> None:
        super().__init__()
        self.files = files

    def compose(self) -> ComposeResult:
        with Vertical(id="quit-dialog"):
            yield Static("Changed on disk since it was loaded: " + ", ".join(self.files)
                         + ".\nReload drops your unsaved changes; overwrite replaces the file's new content "
                         "where you changed values.", markup=False)
            with Horizontal(id="quit-buttons"):
                yield Button("Reload [r]", id="reload", variant="primary")
                yield Button("Overwrite [o]", id="overwrite", variant="error")
                yield Button("Cancel [esc]", id="cancel")

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id or "cancel")
