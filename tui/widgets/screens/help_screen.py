"""The help screen: what each key does, and how values are typed."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """\
[b]budgetdsl tui[/b] — move the run along the critical-batch frontier

[b]Controls[/b]  (Tab / Shift+Tab or ↑ ↓ move between them)
  type a value in the plan language and press Enter: [i]2048[/i], [i]14 days[/i], [i]1.2e23[/i],
  [i]8Mi[/i], [i]2048 * model.seq_len[/i], [i]3M[/i]; entering a control selects its value, so
  typing replaces it. Esc drops what was typed and leaves the control for the plot
  [b]+[/b] / [b]-[/b]   step the value: GPUs and batch by powers of two, the deadline by a day
          (an hour below two days), FLOP budget and B_crit along 1-1.2-1.5-2-2.5-3-4-5-6-8
  empty     deadline or FLOP budget: no such limit; batch: optimized by the objective
  B_crit    a value here replaces the plan's noise source (kaplan_loss / calibration)

[b]Keys[/b]  letters (q ? x y m l) act where no control has focus: press Esc first
  Ctrl+S   save the changes into the plan file(s): only the changed values are rewritten
  Ctrl+R   reset: re-read the plan from disk, dropping unsaved changes
  Ctrl+B   pin the batch at the optimized value / go back to the optimized batch
  F2 (x)   plot against steps or wall clock
  F3 (y)   plot tokens or FLOPs
  F4 (m)   braille or plain-ASCII markers (for fonts without braille)
  F5 (l)   under the plot: the limits, or the layout search and the Pareto front
  F1 (?)   this help          Ctrl+P   command palette          Ctrl+Q (q)   quit
  every key can be moved: binding ids in ~/.config/budgetdsl/keymap.yaml (docs/tui.md)

[b]Plot[/b]
  the frontier S/S_min = 1 + B_crit/B, E/E_min = 1 + B/B_crit on log-log axes; the arc every
  limit allows in green, the run ●, B_crit ◆ (x = 1), the Pareto front ○, the deadline ┊ and
  the FLOP budget ┄. On the steps axis the deadline is where the wall clock reaches it.

Press Esc, F1 or q to close."""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,f1,q,question_mark", "dismiss", "Close", show=False, id="help.close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(HELP, markup=True)
