"""One module per subcommand. Each defines `register(subparsers)`; a command's handler imports what
it needs (sympy, torch, textual) inside the handler, never at module import, so that
`budgetdsl check` does not pay for `budgetdsl calibrate`.

To add a command, write `budgetdsl/commands/<name>.py` and list it in COMMANDS.
"""

COMMANDS = ("check", "schema", "calibrate", "plan", "diff", "export", "sweep", "tui", "completion", "track")
