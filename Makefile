# Two promises of the README, each one command on a fresh machine:
#   make demo   set up .venv and plan every example plan
#   make test   set up .venv (with the calibration, cluster, TUI, test and lint extras) and run the whole suite
#   make lint   ruff check and mypy, both configured in pyproject.toml (CI runs it before the suite)
#
# TORCH names the torch requirement installed before the calibrate extra. The default takes the CPU
# wheel that lies on the development machines' disk; elsewhere, set it to the build you want, e.g.
#   make test TORCH="torch --index-url https://download.pytorch.org/whl/cpu"
#
# The suite runs on every CPU (pytest-xdist, WORKERS=logical: one worker per CPU the machine shows),
# one test file per worker at a time (--dist loadfile: a file's module fixtures are built once, its
# tests run in file order, as they would in one process). `make test WORKERS=0` runs it in one process.
PYTHON  ?= python3
VENV    ?= .venv
TORCH   ?= torch==2.13.0
WORKERS ?= logical
BIN     := $(VENV)/bin

.PHONY: demo test lint bench schema clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.core: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.full: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e '.[calibrate,cluster,plot,tui,track,test,lint]'
	touch $@ $(VENV)/.core

demo: $(VENV)/.core
	$(BIN)/budgetdsl check plans/*.yaml
	$(BIN)/budgetdsl plan plans/*.yaml

test: $(VENV)/.full
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadfile --durations=20

lint: $(VENV)/.full
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: $(VENV)/.full
	for b in bench/bench_*.py; do $(BIN)/python $$b || exit 1; done

schema: $(VENV)/.core
	$(BIN)/budgetdsl schema > budgetdsl.schema.json

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
