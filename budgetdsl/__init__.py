"""budgetdsl: plan the budget of a training run on the critical-batch frontier.

The package root stays import-light: `budgetdsl check` must start fast, so nothing here pulls in
sympy, torch or textual. Import the pieces from their modules.
"""

__version__ = "0.1.0"
