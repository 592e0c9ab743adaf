from pathlib import Path

import pytest

LINREG = Path(__file__).with_name("linreg_proxy.py")


@pytest.fixture
def linreg_args() -> list[str]:
    """--model/--data naming the analytic proxy through the factory interface (file.py:function)."""
    return ["--model", f"{LINREG}:make_model", "--data", f"{LINREG}:make_data"]


@pytest.fixture
def cli():
    """Run `budgetdsl ...` in-process through the real entry point; returns the exit code."""
    from budgetdsl.cli import main

    return main
