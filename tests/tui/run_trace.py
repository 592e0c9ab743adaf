"""The measured run the `--run` tests draw: the first 60 steps of a real CPU proxy run
(tests/track/proxy_train.py, read from its SummaryWriter events) against a plan whose MFU is 30 %
optimistic (fixtures/proxy-plan.yaml)."""

from __future__ import annotations

import pathlib

from budgetdsl.plan.loader import load_plan
from budgetdsl.solve.solver import solve
from budgetdsl.track.forecast import analyse
from budgetdsl.track.metrics import MetricMap
from budgetdsl.track.run import merge
from budgetdsl.track.sources import expand, timeline
from budgetdsl.track.trace import RunTrace, trace_of

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
RUN_PLAN = FIXTURES / "proxy-plan.yaml"
RUN_LOG = FIXTURES / "proxy-run.csv"


def run_trace() -> RunTrace:
    plan = load_plan(str(RUN_PLAN))
    solution = solve(plan)
    files = expand([str(RUN_LOG)])
    line = merge([timeline(f, MetricMap()) for f in files])
    track = analyse(line, solution, [f.path for f in files], plan.model.seq_len)
    return trace_of(line, track, solution, plan.model.seq_len)
