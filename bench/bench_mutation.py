"""Mutation benchmark (not a test, not in CI): `python bench/bench_mutation.py [--sample N] [--seed S]`.

Injects one-line slips into budgetdsl/cost, budgetdsl/solve and budgetdsl/exports, one at a time,
and runs the tests that can see each one: the share of mutants some test catches (the kill rate)
says how much of a wrong answer the suite would notice. The operators are the slips of issue 23:
comparisons (< <=, > >=, == !=), and/or, + -, * /, // /, ceil/floor (math.ceil and the
-(-a // b) idiom), min/max, += -=, and integer constants one larger. Sites come from the AST (no
docstrings, annotations or f-strings), a seeded sample of them is run.

Which tests run per mutant: a test that never executes the mutated line behaves exactly as on clean
code, so only the tests that execute it can kill it. One traced run of TESTS (less SKIPPED_TESTS:
input handling and tooling, which a slip in an answer passes by design; sys.settrace, limited to the
three packages; CLI subprocesses traced too, through a generated sitecustomize) records which lines
each test executes (kept per test file in --cache, so a new test file is traced alone); each mutant
then runs the tests that executed any line of its span, fastest first, under -x. Lines that run at
import (module constants, default arguments, class bodies) are seen by every test, so their mutants
run all of TESTS. Equivalent mutants (EQUIVALENT) are not run. A mutant no test executes survives
without a run ("not executed": a gap in the suite, not a slow one). The per-mutant time limit is 5x
the selected tests' traced time plus 30 s, in CPU seconds of each process (on a loaded machine a
wall-clock limit counted slow survivors as killed; 10x that on the wall clock catches a hang that
waits); past it, the mutant counts as killed (a hang is a caught slip). The selection can only miss
a kill when a test reads a value another test computed and cached (a session fixture, a module
cache), so the rate stays a lower bound, as a survivor may also be an equivalent mutant: EQUIVALENT
lists those checked by hand, with the reason, and the report gives the rate with and without them.

Every mutant is written into a throwaway copy of the tracked files (a temporary folder), never into
the work tree; the tests run there with PYTHONPATH pointing at the copy, so subprocesses of the CLI
import the mutant too. mutmut was not used: version 3 wants its own section in pyproject.toml, a
clean run and coverage run of the whole suite before the first mutant, and has no seeded sample.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import copy
import hashlib
import json
import math
import os
import pathlib
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("budgetdsl/cost", "budgetdsl/solve", "budgetdsl/exports")
# The tests whose lines are traced; each mutant runs the ones that execute it, fastest first.
TESTS = ("tests/budgetdsl", "tests/exports")
# Left out: they check input handling, tooling or the command line's exits, or compare the solver
# with itself (warm against cold), so a slip in an answer passes them by design; they are also the
# slowest tests, run for nearly every mutant.
SKIPPED_TESTS = frozenset({
    "test_actions_workflow.py", "test_atomic_write.py", "test_calibration_gate.py", "test_check_command.py",
    "test_cli_exit_codes.py", "test_completion.py", "test_expressions.py", "test_fragments.py",
    "test_fuzz_mutations.py", "test_git_source.py", "test_hostile_inputs.py", "test_hostile_round2.py",
    "test_hostile_round3_files.py", "test_hostile_search.py", "test_hostile_sinks.py", "test_plan_edit.py",
    "test_plan_fuzz.py", "test_plan_loader.py", "test_precommit_hook.py", "test_schema.py",
    "test_schema_fuzz.py", "test_solve_caches.py", "test_stdout_errors.py", "test_frontier_plot.py",
    "test_plan_plot_option.py",
})
WALL_FACTOR = 10  # a mutant's wall-clock limit, in CPU limits (`_pytest`)
TRACE_ENV, SUBTRACE_ENV, SELECT_ENV = "BENCH_MUTATION_TRACE", "BENCH_MUTATION_SUBTRACE", "BENCH_MUTATION_SELECT"

# Survivors checked by hand and found equivalent (no input tells them from the original): keyed by
# file, the mutated line's text (stripped), which of the lines of that text it is (0: the first),
# the column in it and the slip, so that they follow the line when it moves; they are not run.
_BALANCED_X = "x0, x1 = (k0 if k0 > 1 else 1) * b_min / b_crit, (k1 if k1 > 1 else 1) * b_min / b_crit"
_PAIRS_CACHE = ("@functools.lru_cache(maxsize=1 << 16)  # a pure function of four integers, asked the same few on "
                "every solve")
_NO_WORSE = "no_worse = (W <= wj * (1 + t)) & (Cc <= cj * (1 + t)) & (F <= fj * (1 + t))"
_STALE_PICK = ("Pool.min_wall / min_cost only decide when _Walk._scan refreshes a stale pick; a stale pick is an "
               "earlier pool item, whose key is no better than the fresh one's (the break comes later) and which "
               "dominates a pair only if a pool item does (skipping it is safe): the pairs placed, and the "
               "answer, are the same")
_DIRECTION = ("_gpu_relaxation, _next_counts and _step_count read a direction only as `direction > 0` (which "
              "ladder, × or ÷ 1.1, which end the bisection keeps, ≥ or ≤): 2 and 1 are both above 0, −2 and −1 "
              "both not, so every count tried and every message is the same")
EQUIVALENT: dict[tuple[str, str, int, int, str], str] = {
    ("budgetdsl/solve/search_space.py", "total = step.reduce + step.gather", 0, 8, "+ -> -"):
        "step_bound's ZeRO 0-2 line 2 intercept: reduce − gather ≤ reduce + gather, so the lower bound only "
        "weakens and prunes less; answers change only where two candidates tie on every key and the "
        "bound's order of placing them decides",
    ("budgetdsl/solve/search_space.py", "gpu_hours = g * wall / 3600.0", 2, 12, "* -> /"):
        "the FLOP-budget threat test's GPU-hours bound: g / wall / 3600 is below g · wall / 3600 for every "
        "wall clock over √g seconds (a run of hours), so the bound only admits more pairs: the search "
        "places more, the answer is the same",
    ("budgetdsl/solve/sweep_kernel.py", "steps_ = np.abs(wm - start) + 1.0", 0, 16, "- -> +"):
        "a winner's path length that no longer matches its listed floors marks the row unsure: solve() "
        "answers it, the same answer, more slowly",
    ("budgetdsl/solve/sweep_kernel.py",
     "bad |= np.bincount(c_el[np.isnan(c_dist) | np.isnan(c_wall)], minlength=R) > 0", 0, 77, "0 -> 1"):
        "an element reaches the split search with a pick whose wall clock is finite and evaluated splits "
        "whose walls are finite (`_evaluate`'s ok); a NaN distance needs a NaN target, which no row of "
        "finite limits and B_crit gives: the guard counts 0 either way",
    ("budgetdsl/solve/notes.py",
     "assert cm.shape is not None and cm.device is not None and cm.layout is not None  # a breakdown: a shape",
     0, 7, "and -> or"):
        "an assertion for the type checker: a breakdown exists only with a shape, device and layout, so "
        "each operand is true and both forms pass",
    ("budgetdsl/solve/search_space.py",
     "if not any(k[0] >= r[0] and k[1] >= r[1] and k[2] >= r[2] and k[3] >= r[3] for k in kept):", 0, 62,
     ">= -> >"):
        "keeps a stage that another equals in per-sequence bytes and exceeds in the rest: a dominated stage "
        "never sets the least micro-batch room, so only the work changes",
    ("budgetdsl/solve/batch_ramp.py", "knots = [a] + [p for p in self.progress if a < p < b] + [b]", 0, 43,
     "< -> <="):
        "either end then appears twice among the knots: a trapezoid of width 0 adds exactly 0.0",
    ("budgetdsl/solve/cache.py", "if len(self.cost_models) > COST_MODELS:", 0, 3, "> -> >="):
        "the cost-model cache keeps one model fewer: a cost model is a function of its key, so only the "
        "time to rebuild one changes",
    ("budgetdsl/solve/objectives.py",
     "if point[0] != point[0] or point[1] != point[1] or point[2] != point[2]:", 0, 27, "!= -> =="):
        "marks every pool as holding NaN, so Pool.pick and Pool.front defer to choose_among and pareto over "
        "all items: the answers the pool computes incrementally (its contract), only slower",
    ("budgetdsl/solve/objectives.py",
     "if a is None or len(a) < n + 1:  # grow by doubling, the points so far copied in", 0, 16, "< -> <="):
        "the numpy buffer grows one point earlier: capacity only",
    ("budgetdsl/cost/throughput.py",
     "slow = max(range(p), key=lambda i: sum(per_stage[i]) + (i == p - 1) * 1e-18)", 0, 56, "== -> !="):
        "a tie-break among stages of exactly equal time; stages tie only with equal layers and no vocabulary "
        "(no head FLOPs), when their parameters are equal too",
    ("budgetdsl/solve/objectives.py",
     "if not (q0 > u0 or q1 > u1 or q2 > u2) and (q0 < d0 or q1 < d1 or q2 < d2):", 1, 44, "< -> <="):
        "_pareto3_sorted's scan of the later points (the second of three such lines): there q0 >= p0 > "
        "p0(1 - tol) = d0 on positive axes, so q0 <= d0 is never true either",
    ("budgetdsl/solve/objectives.py",
     "by = ~((q[:, 0] > u[0]) | (q[:, 1] > u[1]) | (q[:, 2] > u[2])) & \\", 0, 27, "> -> >="):
        "only a shortcut: when no front point is found to dominate p, every point is compared again with the "
        "original comparisons, so finding fewer dominators here changes nothing",
    ("budgetdsl/solve/sweep_kernel.py",
     'if sum(p.startswith("target.") for p in paths) > 1 or {"budget.usd", "budget.usd_per_gpu_hour"} <= set(paths):',
     0, 54, "<= -> <"):
        "sends a sweep of exactly budget.usd and budget.usd_per_gpu_hour to the kernel: their rule (usd needs a "
        "price) holds in every row, as a sweep value cannot unset a key, so the kernel's rows equal solve()'s",
    ("budgetdsl/solve/placement.py",
     "return xp.where(c > 0.0, cf.min_time_batch(fr.b_crit, cm.flops_per_token, cm.rate, xp.maximum(c, 0.0), xp),",
     0, 16, "> -> >="):
        "at c = 0 both branches are 0 (min_time_batch is sqrt(c·B_crit·rate/f)); a NaN c fails both tests",
    ("budgetdsl/solve/sweep_kernel.py", "go = st.go & (p.micro_max >= 1)", 0, 29, "1 -> 2"):
        "skips the wall-clock check where only micro-batch 1 fits: there T = m·u(1) + v(1) is exactly the line "
        "`place` walks (its reference micro-batch is 1), so the walk's pick is the wall search's and no row is unsure",
    ("budgetdsl/solve/sweep_kernel.py", _NO_WORSE, 0, 12, "<= -> <"):
        "differs only where a wall clock equals another's times (1 + tolerance) to the last bit; none on the "
        "random sweeps of 60 seeds (tests/budgetdsl/test_slips_sweep_random.py's generator)",
    ("budgetdsl/solve/sweep_kernel.py", _NO_WORSE, 0, 34, "<= -> <"):
        "differs only where a cost equals another's times (1 + tolerance) to the last bit; none on the "
        "random sweeps of 60 seeds (tests/budgetdsl/test_slips_sweep_random.py's generator)",
    ("budgetdsl/solve/sweep_kernel.py", _NO_WORSE, 0, 57, "<= -> <"):
        "differs only where a FLOP count equals another's times (1 + tolerance) to the last bit; none on the "
        "random sweeps of 60 seeds (tests/budgetdsl/test_slips_sweep_random.py's generator)",
    ("budgetdsl/solve/sweep_kernel.py", "below = (r.objective[c] == 0) & (d.batch[c] <= r.bc[c])", 0, 33, "<= -> <"):
        "prunes fewer pairs at a pick exactly at B_crit (the pairs are placed instead): performance only",
    ("budgetdsl/solve/placement.py", "exact = exact or pair[0] * pair[1] == n", 0, 22, "0 -> 1"):
        "`exact` only decides whether `place` walks past the target's neighbours: the slip walks on (to "
        "_FALLBACK_SCAN counts), meeting counts farther from the target, which rank no better on the measures, "
        "convex in B, and the wall-clock search covers the rest; the same answers on every test, 638 s CPU",
    ("budgetdsl/solve/sweep_kernel.py",
     "threat = ((lw <= pw[None, :] * (1 + margin)) & (lc <= pc[None, :] * (1 + margin))", 0, 11, "<= -> <"):
        "differs only where a pair's wall-clock bound equals the pick's times (1 + 1e-8) to the last bit",
    ("budgetdsl/solve/search_space.py", "pw, pc, pf = pw * (1.0 + 1e-9), pc * (1.0 + 1e-9), pf * (1.0 + 1e-9)",
     0, 13, "* -> /"):
        "the float-noise margin on the pick's wall clock turns from 1e-9 above to 1e-9 below: a pair is "
        "pruned differently only where its bound is within 1e-9 (relative) of the pick, below the solver's TOLERANCE",
    ("budgetdsl/solve/placement.py",
     "if b <= top and m_hi >= 1.0 and floor0 * (1.0 - _BOUND_MARGIN) <= threshold:", 0, 32, "* -> /"):
        "as the `elif` beside it: the margin turns from 1e-9 below the bound to 1e-9 above it, so a size is "
        "searched differently only where its floor is within 1e-9 (relative) of the best wall clock met",
    ("budgetdsl/cost/memory.py", "fp8: bool = False, context_parallel: int = 1,", 0, 43, "1 -> 2"):
        "a default no product path reads: the one caller (cost_model.build_cost_model) always passes the plan's "
        "context_parallel",
    ("budgetdsl/solve/search_space.py", "pw, pc, pf = pw * (1.0 + 1e-9), pc * (1.0 + 1e-9), pf * (1.0 + 1e-9)",
     0, 32, "* -> /"): "as the wall clock's margin beside it, on the cost",
    ("budgetdsl/solve/search_space.py", "pw, pc, pf = pw * (1.0 + 1e-9), pc * (1.0 + 1e-9), pf * (1.0 + 1e-9)",
     0, 51, "* -> /"): "as the wall clock's margin beside it, on the FLOPs",
    ("budgetdsl/solve/sweep_kernel.py",
     "threat = ((lw <= pw[None, :] * (1 + margin)) & (lc <= pc[None, :] * (1 + margin))", 0, 48, "<= -> <"):
        "as the wall clock's comparison beside it, on the cost",
    ("budgetdsl/solve/batch_ramp.py", "lo = s_min * min(batches) + e_min", 0, 5, "* -> /"):
        "only lowers the bisection's lower bracket (the run's tokens are still above it): 80 halvings find "
        "the same fixed point to double precision",
    ("budgetdsl/solve/placement.py", "elif floor0 * (1.0 - _BOUND_MARGIN) > threshold:", 0, 5, "* -> /"):
        "equivalent up to float noise: the margin turns from 1e-9 below the bound to 1e-9 above it, so the size "
        "search stops early only where the next sizes' floor is within 1e-9 (relative) of the best wall clock "
        "met, and a split there is at most that much faster (the solver's TOLERANCE); none on 80 random plans",
    ("budgetdsl/solve/search_space.py", "return self._get()[0]", 0, 19, "0 -> 1"):
        "_Bounds.seq_len has no caller (dead code: the search reads the tokens per sequence from the cost "
        "model); deleting the property removes the mutant",
    ("budgetdsl/solve/search_space.py", "if b_max < b_min:", 0, 3, "< -> <="):
        "_threat's FLOP cap: the two differ only when the computed cap B_crit(pf/(f·E_min·(1 - 1e-9)) - 1) "
        "equals the pair's smallest batch to the last bit, where the interval is one point",
    ("budgetdsl/solve/objectives.py", "if n >= self._VECTOR:", 0, 3, ">= -> >"):
        "a pool of exactly _VECTOR items compares in Python instead of numpy: the same comparisons "
        "(test_slips_pareto checks both against the definition), only the speed changes",
    ("budgetdsl/solve/search_space.py", "if len(consts.per_pair) >= _VECTOR_PAIRS:", 1, 3, ">= -> >"):
        "a space of exactly _VECTOR_PAIRS pairs is ordered by the Python keys instead of numpy's: the same "
        "float operations in the same order and the same tie order (_sorted_keys), only the speed changes",
    ("budgetdsl/solve/search_space.py", "if len(consts.per_pair) >= _VECTOR_PAIRS:", 0, 3, ">= -> >"):
        "a space of exactly _VECTOR_PAIRS pairs has its bounds from the scalar wall_bound and balanced_key "
        "instead of numpy's: the same float operations in the same order (test_search_space checks the two agree)",
    ("budgetdsl/solve/search_space.py", "if memo is not None and memo[0] is consts:", 0, 29, "0 -> 1"):
        "the walk's bounds memo always misses (its walls list is never the constants): the bounds are "
        "recomputed, the same numbers, only slower",
    ("budgetdsl/cost/throughput.py", "@functools.lru_cache(maxsize=1024)", 0, 29, "1024 -> 1025"):
        "the size of a cache of a pure function (_stage_shares): only the time changes",
    ("budgetdsl/solve/placement.py", _PAIRS_CACHE, 0, 29, "1 -> 2"):
        "the size of a cache of a pure function (_pairs_near): only the time changes",
    ("budgetdsl/solve/placement.py", _PAIRS_CACHE, 0, 34, "16 -> 17"):
        "the size of a cache of a pure function (_pairs_near): only the time changes",
    ("budgetdsl/solve/relaxations.py", "if _step_count(ctx, low, -1) is None:", 0, 26, "1 -> 2"):
        "_step_count reads only the direction's sign (direction > 0): -2 walks down as -1 does",
    ("budgetdsl/solve/context.py", "if group is None or group[0] is not cm:", 0, 26, "0 -> 1"):
        "the placement cache's older generation always misses (a group's dict is never the cost model), so "
        "groups are rebuilt: a placement is a function of its key, so only the time changes",
    ("budgetdsl/solve/sweep_kernel.py", "if isinstance(value, int) and abs(value) > 2 ** 53:", 0, 48, "53 -> 54"):
        "every path the kernel sweeps is a float field of the plan (the loader turns an integer into a float), "
        "so the integer guard never fires",
    ("budgetdsl/exports/_text.py", "allow_unicode=True, width=4096))", 0, 26, "4096 -> 4097"):
        "equivalent in meaning: the width only moves where PyYAML folds a plain scalar longer than 4,096 "
        "characters, and a folded scalar parses to the same string",
    ("budgetdsl/solve/sweep_kernel.py", "& np.isfinite(d.steps * d.batch)", 0, 14, "* -> /"):
        "a guard against a token count that overflows: steps × batch is the run's tokens, at most "
        "MAX_TOKENS × (1 + MAX_BATCH) ≈ 1e30 under the plan's ranges, so it is finite exactly where steps "
        "and batch are, as steps / batch is (batch ≥ one sequence)",
    ("budgetdsl/solve/sweep_kernel.py",
     "lone_nan = ~differ & (np.isnan(best[4]) | np.isnan(best[1]) | np.isnan(np.abs(best[2] - clipped)))",
     0, 36, "4 -> 5"):
        "CONFIG[4] is the wall clock, CONFIG[5] the GPU-hours g · wall / 3600 of the same pick: NaN exactly "
        "where the wall clock is",
    ("budgetdsl/solve/batch_ramp.py", "if last or full <= budget:", 0, 11, "<= -> <"):
        "differs only where a stage's remaining tokens equal its budget to the last bit; the bisection then "
        "ends the stage at progress 1.0 as the shortcut does, and the next stage adds zero tokens",
    ("budgetdsl/solve/sweep_kernel.py", "if isinstance(value, int) and abs(value) > 2 ** 53:", 0, 30, "> -> >="):
        "2 ** 53 itself is exact in a float; refusing it sends the sweep to the per-row solve (prepare "
        "returns None on ValueError), which answers the same",
    ("budgetdsl/solve/objectives.py", "grown = np.empty((max(2 * self._VECTOR, 2 * (n + 1)), 3))", 0, 22,
     "2 -> 3"):
        "the growth of a scratch array's capacity (the first n rows are copied, the rest unread)",
    ("budgetdsl/solve/search_space.py", "line2 = (k + slope, fixed + total)", 0, 20, "+ -> -"):
        "step_bound's line 2 intercept where the reduction hides past b_c: total = reduce + gather ≥ 0, so "
        "fixed − total is below fixed + total and the lower bound only weakens (prunes less), as the "
        "intercept's other slip above",
    ("budgetdsl/solve/sweep_kernel.py",
     "met = (floor0[wp] * (1.0 - _BOUND_MARGIN) <= w_wall) & (floor_c[wp] * (1.0 - _BOUND_MARGIN) <= w_wall)",
     0, 56, "<= -> <"):
        "a floor (already lowered by the bound margin) equal to the winner's wall clock to the last bit: "
        "the slip calls that winner not met, which marks its row bad, hence unsure, and solve() answers "
        "it, the same answer",
    ("budgetdsl/solve/sweep_kernel.py",
     "lone_nan = ~differ & (np.isnan(best[4]) | np.isnan(best[1]) | np.isnan(np.abs(best[2] - clipped)))",
     0, 83, "2 -> 3"):
        "CONFIG[2] is the pick's batch, CONFIG[3] its steps: both NaN exactly where no split was picked, so "
        "|steps − clipped| is NaN where |batch − clipped| is",
    ("budgetdsl/solve/placement.py",
     "if b <= top and m_hi >= 1.0 and floor0 * (1.0 - _BOUND_MARGIN) <= threshold:", 0, 42, "- -> +"):
        "the bound margin (1e-9, float noise) applied the other way: a size is skipped only where its wall "
        "floor lies within 1e-9 relative of the threshold, i.e. where it could at best tie the best "
        "split's wall clock to nine digits",
    ("budgetdsl/solve/layout_search.py",
     "key = (self.tensor_parallel * self.pipeline_parallel * (self.context_parallel or 1), self.pipeline_parallel,",
     0, 7, "* -> /"):
        "LayoutChoice.sort_key orders layouts only where the search's keys tie: the walk visits pairs by "
        "their bound keys and keeps the best placement by the objective's full key, so a different order "
        "of simplicity changes the pick only between two layouts that tie on wall clock, cost and FLOPs "
        "to the last bit",
    ("budgetdsl/solve/cache.py", "PLACEMENTS = 64  # per generation: kept many, they cost more than they save "
     "(memory a new limit no longer reuses)", 0, 13, "64 -> 65"):
        "a cache's capacity: SolveCache is pure (a solve with or without it answers the same bytes, "
        "test_solve_pure), so keeping 65 placements instead of 64 changes only time",
    ("budgetdsl/solve/placement.py",
     "return (n_lo if n_lo > f else (n_hi if f > n_hi else f)), (n_lo if n_lo > c else (n_hi if c > n_hi else c))",
     0, 67, "> -> >="):
        "_neighbours' clip at the lower end: where n_lo equals c both forms return that number",
    ("budgetdsl/solve/placement.py",
     "return (n_lo if n_lo > f else (n_hi if f > n_hi else f)), (n_lo if n_lo > c else (n_hi if c > n_hi else c))",
     0, 90, "> -> >="):
        "_neighbours' clip at the upper end: where c equals n_hi both forms return that number",
    ("budgetdsl/solve/search_space.py",
     "threats = [i for i in order if walls[i] <= pw and not done[i] and costs[i] <= pc and flops[i] <= pf",
     0, 85, "<= -> <"):
        "the threat test's FLOP bound against the pick's FLOPs already raised by 1e-9: a pair whose bound "
        "equals that to the last bit could at best tie the pick to nine digits",
    ("budgetdsl/solve/layout_search.py", "BLOCK_AUTO = -1  # LayoutChoice.recompute_layers of the block "
     "candidate whose N the search finds per GPU count", 0, 14, "1 -> 2"):
        "a sentinel compared only by name (search_space: `== BLOCK_AUTO`); -2 sorts where -1 does, before "
        "every N >= 0",
    ("budgetdsl/solve/notes.py", 'side = (f"spends E/E_min = {1 + x:.3g}× the minimal tokens" if x > 1', 0, 64,
     "> -> >="):
        "x_warnings returns before this line for x in [1/X_DOUBTFUL, X_DOUBTFUL], so x is never 1 here",
    ("budgetdsl/solve/objectives.py", "if point[0] < self.min_wall:", 0, 9, "0 -> 1"):
        _STALE_PICK,
    ("budgetdsl/solve/objectives.py", "if point[1] < self.min_cost:", 0, 9, "1 -> 2"):
        _STALE_PICK,
    ("budgetdsl/solve/sweep_kernel.py",
     "threat = ((lw <= pw[None, :] * (1 + margin)) & (lc <= pc[None, :] * (1 + margin))", 0, 32, "+ -> -"):
        "the kernel's threat margin (1e-8) on the wall-clock bound turned the other way: a pair is missed "
        "only where its bound lies within 1e-8 of the pick's wall clock, a pair that could at best tie it "
        "to eight digits",
    ("budgetdsl/cost/cost_model.py", "if ex.expert_tensor_parallel < gpn else 1", 0, 3, "< -> <="):
        "the experts' in-node peers for the assumptions line: at etp equal to the GPUs per node both forms "
        "give 1 (gpn // etp = 1)",
    ("budgetdsl/cost/cost_model.py", "if len(self._memory) < 4096:", 0, 23, "4096 -> 4097"):
        "the capacity of CostModel.memory_at's memo of a pure function of the micro-batch: one more entry "
        "kept changes only time",
    ("budgetdsl/solve/search_space.py", "_VECTOR_PAIRS = 8192", 0, 16, "8192 -> 8193"):
        "where the bounds and the walk's order switch to numpy: the same float operations in the same order "
        "as the scalar wall_bound and balanced_key (test_search_space checks the two agree), so a space of "
        "8,192 pairs gets the same numbers either way",
    ("budgetdsl/solve/objectives.py", "grown = np.empty((max(2 * self._VECTOR, 2 * (n + 1)), 3))", 0, 22,
     "* -> /"):
        "the scratch array's least capacity: 2 / _VECTOR is below 2·(n + 1), which then sizes it; the "
        "first n rows are copied and the rest unread either way",
    ("budgetdsl/solve/search_space.py",
     "stale = [o for o in (*self.others, objective) if ended.get(o, -1) != now]", 0, 63, "1 -> 2"):
        "a default no count of placed pairs equals (done.count(True) >= 0): -1 and -2 both mark an "
        "objective not yet brought up to date",
    ("budgetdsl/solve/search_space.py", "mm = float(max(1, micro_max))", 0, 15, "1 -> 2"):
        "a larger micro-batch room in step_bound only lowers both lines (the per-micro-batch terms ÷ mm): "
        "a weaker lower bound prunes less, the walk ends at the same pick",
    ("budgetdsl/solve/search_space.py", "self.fe = consts.flops_per_token * fr.e_min", 0, 10, "* -> /"):
        "fe feeds only _threat's FLOP bound (f·E_min·(1 + b_min/B_crit)); a smaller one makes more pairs "
        "threaten, so more are placed and compared: the same pick, found slower",
    ("budgetdsl/solve/sweep_kernel.py", "go = st.go & (p.micro_max >= 1)", 0, 14, ">= -> >"):
        "at a micro-batch room of 1 the wall-clock search has one micro-batch size, the placement's own: "
        "nothing for _wall_check to mark (checked on six memory-bound min_time grids, kernel = solve())",
    ("budgetdsl/solve/objectives.py",
     "if point[0] != point[0] or point[1] != point[1] or point[2] != point[2]:", 0, 51, "!= -> =="):
        "the pool's NaN flag set for every finite point sends front() to pareto(), the same front by "
        "the slower path; a NaN wall clock never reaches the pool (solution models refuse non-finite)",
    ("budgetdsl/solve/placement.py", "clipped = lo if lo > target else target", 0, 16, "> -> >="):
        "where lo equals the target both branches give the same number",
    ("budgetdsl/solve/sweep_kernel.py", "pushed_lo, pushed_hi = tgt < lo, tgt > hi", 0, 23, "< -> <="):
        "a target exactly at the interval's low end places the batch on that end, where what set it (the "
        "floor, or a limit met with no slack) binds either way; checked on a tie built on purpose "
        "(B_crit 1Mi = the floor of 2,048-token sequences on 512 GPUs): kernel rows = solve()",
    ("budgetdsl/solve/placement.py",
     "return all(balance_at(b_crit, micro * accum * per * 1.0) > best for micro, accum in near)", 0, 30,
     "* -> /"):
        "x · 1.0 and x / 1.0 are the same float (the 1.0 only makes the product a float)",
    ("budgetdsl/cost/throughput.py", "bubble = (p - 1) / v * micro_time if p > 1 else 0.0", 0, 37, "> -> >="):
        "at p = 1 the bubble (p − 1)/v · micro_time is 0.0 either way",
    ("budgetdsl/solve/relaxations.py", "now = int(current if direction > 0 else lo_count)", 0, 21, "> -> >="):
        "direction is +1 or −1, never 0",
    ("budgetdsl/solve/search_space.py", "t = 0.5 * (v * (1.0 + 1e-11) - 2.0)  # x + 1/x ≤ 2t", 0, 16, "+ -> -"):
        "the balanced bound's tie margin: a balance within 1e-11 of the least rounds to it at 12 digits "
        "either way except at a near-tie in the 11th digit, where the walk's exact keys decide",
    ("budgetdsl/solve/notes.py", "if len(cm._shown) < _SHOWN_AT_MOST:", 0, 3, "< -> <="):
        "a memo's capacity: one entry more kept, the same notes built",
    ("budgetdsl/exports/megatron.py", "moe = (spec.layers or 0) - spec.dense_layers", 0, 22, "0 -> 1"):
        "dense_layers needs experts and experts need model.layers (plan.model's MoE rules), so a launch "
        "spec with dense layers always has its layers: the fallback is never taken",
    ("budgetdsl/solve/sweep_kernel.py",
     "met = (floor0[wp] * (1.0 - _BOUND_MARGIN) <= w_wall) & (floor_c[wp] * (1.0 - _BOUND_MARGIN) <= w_wall)", 0,
     7, "<= -> <"):
        "a floor shrunk by the bound margin equal to a winner's wall clock to the last bit: a measure-zero "
        "coincidence, and only marks a row for the scalar path (which decides it exactly) or not",
    ("budgetdsl/solve/search_space.py",
     "if not any(k[0] >= r[0] and k[1] >= r[1] and k[2] >= r[2] and k[3] >= r[3] for k in kept):", 0, 30,
     "1 -> 2"):
        "a stage's gradients and optimizer state are both its local parameters times a constant (4 or 2 "
        "and 12 bytes), so k[1] >= r[1] holds exactly when k[2] >= r[2]; k[2] >= r[1] adds nothing",
    ("budgetdsl/solve/search_space.py", "return v, cost_of(gpus * wall / 3600.0), wall", 0, 18, "* -> /"):
        "the balanced bound's cost (its key's second measure) made far smaller: a weaker bound, so the "
        "walk skips fewer pairs and ends at the same pick",
    ("budgetdsl/cost/throughput.py", "@functools.lru_cache(maxsize=65536)", 0, 29, "65536 -> 65537"):
        "a cache's capacity: one entry more kept, the same values",
    ("budgetdsl/solve/objectives.py", "pts = np.empty((max(2 * self._VECTOR, 2 * len(idx)), 3))", 0, 38, "2 -> 3"):
        "a scratch array's capacity: len(idx) rows are written and read, the rest never",
    ("budgetdsl/solve/sweep_kernel.py",
     "_DECIDE_SPLITS = 4 * WALL_EVALUATIONS  # splits per element `_wall_decide` lists before the bound's filter",
     0, 17, "4 -> 5"):
        "past this many splits an element goes to the scalar path, which decides it exactly: a higher cap "
        "only lets the kernel list a few more itself, with the same answer",
    ("budgetdsl/cost/experts.py", "if ranks <= 1 or nbytes <= 0:", 0, 17, "<= -> <"):
        "an all-to-all of 0 bytes takes max(0, 0) = 0 s by the formula below too",
    ("budgetdsl/solve/infeasibility.py", "if iv[0] > jv[1]:", 0, 3, "> -> >="):
        "two limits' interval ends equal to the last bit (or a limit's own interval a single point) is a "
        "measure-zero coincidence of independent limits; no plan reaches it",
    # seed 4 (2026-12-07, at 5f82a54)
    ("budgetdsl/solve/infeasibility.py",
     "pushed_lo = pl.clipped is not None and pl.target < pl.lo and not pinned", 0, 39, "< -> <="):
        "the scalar twin of the kernel's pushed_lo entry: a target exactly at the interval's low end places the "
        "batch on that end, where what set it binds either way; checked on the same built tie (B_crit 1Mi = the "
        "floor of 2,048-token sequences on 512 GPUs, deadlines 0.5-30 days): `plan --format json` byte-identical",
    ("budgetdsl/solve/objectives.py",
     "limit = u0 if p0 >= 0 else d0  # a later point within tolerance on the first axis", 0, 14, ">= -> >"):
        "at p0 = 0 both branches are 0 (u0 = p0·up, d0 = p0·down)",
    ("budgetdsl/solve/batch_ramp.py", "if b <= a:", 0, 3, "<= -> <"):
        "at b = a the trapezoids below sum one interval of zero width: 0, the early return's value",
    ("budgetdsl/solve/objectives.py", "_VECTOR = 256  # pool size from which the comparisons run in numpy", 0, 10,
     "256 -> 257"):
        "the pool size from which numpy does the same comparisons: the same pool, one item later",
    ("budgetdsl/solve/placement.py",
     "SEED_CONFIGS = 256  # configurations handed on at most (each new upper end adds a few): past it, afresh",
     0, 15, "256 -> 257"):
        "a capacity: one more evaluated configuration handed on before evaluating afresh, the same values",
    ("budgetdsl/solve/objectives.py",
     "return round(v, 12 - (0 if v == 0 or not _isfinite(v) else int(_floor(_log10(abs(v))))))", 0, 22, "0 -> 1"):
        "only v = 0 and non-finite v take the 0: round(0, 12) = round(0, 11) = 0, and round returns inf/nan as is",
    ("budgetdsl/solve/ramp_solution.py",
     "micro = max(1, min(micro_batch, int(smallest // (data_parallel * seq_len))))", 0, 36, "// -> /"):
        "int() truncates a positive quotient as floor division does; they differ only where x / y rounds up to "
        "an integer within an ulp, at stage sizes a whole number of sequences per replica to the last bit",
    ("budgetdsl/solve/batch_ramp.py", "if walk(m)[0] > m:", 0, 3, "> -> >="):
        "the bisection's side at a midpoint whose walk uses exactly m tokens (to the last bit): either side "
        "holds the root, 80 halvings end within the same ulp",
    ("budgetdsl/solve/sweep_kernel.py", "sane = real & (u > 0.0) & np.isfinite(m2) & sized", 0, 15, "> -> >="):
        "u is a micro-batch's seconds per sequence, positive for every model with FLOPs: u = 0 never occurs",
    ("budgetdsl/solve/relaxations.py",
     "if g < unit or (direction > 0 and g > min(64 * start, MAX_GPUS)) or (out and g == out[-1]):", 0, 42,
     "64 -> 65"):
        "the GPU relaxation ladder's reach (64 times the plan's count): a wider search, not a different "
        "answer below it",
    ("budgetdsl/solve/search_space.py",
     "if abs(sequences - round(sequences)) > 1e-9 * max(1.0, sequences):", 0, 39, "* -> /"):
        "a float-noise tolerance on run.batch / seq_len: a batch of whole sequences written as a number "
        "divides exactly, so both tolerances see 0",
    ("budgetdsl/solve/search_space.py",
     "return axis_bounds(step_bound(step, micro_max, b_min, linear), b_min, gpus, ref.flops_per_token * fr.e_min,",
     0, 76, "* -> /"):
        "a pair's FLOP lower bound f / E_min is below f · E_min: the bound only weakens, so the search prunes less "
        "and places more pairs, with the same pick",
    ("budgetdsl/solve/search_space.py", "line2 = (k + min(0.0, slope - share), fixed + total)", 0, 38, "+ -> -"):
        "the step bound's second line with its intercept lowered: a weaker lower bound, the same pick",
    ("budgetdsl/solve/placement.py",
     "WALL_EVALUATIONS = 64  # splits `_wall_search` evaluates at most (near-ties of a degenerate plan)", 0, 19,
     "64 -> 65"):
        "a capacity reached only where every split nearly ties (a fixed step of 1e10 s): one more near-tie "
        "evaluated, the picks equal at the objectives' 12 digits",
    # seed 5's relaxation ladders (2026-12-07): the GPU search reads a direction only as `direction > 0`
    ("budgetdsl/solve/relaxations.py", "for direction, start in ((1, hi_count), (-1, lo_count)):", 0, 26, "1 -> 2"):
        _DIRECTION,
    ("budgetdsl/solve/relaxations.py", "for direction, start in ((1, hi_count), (-1, lo_count)):", 0, 42, "1 -> 2"):
        _DIRECTION,
    ("budgetdsl/solve/relaxations.py", "top = _next_counts(ctx, hi_count, 1)", 0, 34, "1 -> 2"): _DIRECTION,
    ("budgetdsl/solve/relaxations.py", "bottom = _next_counts(ctx, lo_count, -1)", 0, 38, "1 -> 2"): _DIRECTION,
    # seed 6 (2026-12-07, at 1864391)
    ("budgetdsl/solve/layout_search.py",
     "return list(interleavings((accounted_slots(m.layers, *hw.split_slots()) // pipeline_parallel,),", 0, 27,
     "// -> /"):
        "virtual_degrees reaches this line only with p > 1 dividing the accounted slots (candidates keeps the depths "
        "accounted_problem accepts; a pinned depth that does not divide is refused at load), where slots / p is "
        "the same whole number as a float, and interleavings only tests n % v == 0 and returns its own powers of 2",
    ("budgetdsl/solve/search_space.py", "free_one, free_many = family.free_bytes(1), family.free_bytes(2)", 0, 62,
     "2 -> 3"):
        "CostModel.free_bytes reads its data_parallel only as data_parallel · cp > 1 (the data-parallel "
        "communicator's buffers): 2 and 3 replicas give the same bytes",
    ("budgetdsl/cost/throughput.py",
     "expert_parallel: int = 1  # ep, and etp (0: t), of the routed experts (budgetdsl.cost.experts)", 0, 23,
     "1 -> 2"):
        "a default no product path reads: cost_model.build_cost_model and search_space pass the layout's ep, and "
        "the one Layout built without it (throughput's per-layout shares) reads stages, recomputation, t and the "
        "stack, never the experts",
    ("budgetdsl/solve/placement.py", "if filled is None or top > filled[0] or threshold > filled[1]:", 0, 40,
     "> -> >="):
        "a refill at a threshold equal to the filled one: every size it wants was kept by the earlier fill (the "
        "same bounds, a threshold no higher, a top no larger), and fill adds only missing sizes, each a function "
        "of its size: the same sizes, only the work differs",
    ("budgetdsl/solve/sweep_kernel.py", "ivs={name: (v[2 + 2 * j], v[3 + 2 * j], f[1 + 2 * j], f[2 + 2 * j])", 0,
     56, "+ -> -"):
        "a limit's nonempty flag for j >= 1 read from flag 0, `put`'s done (True on every row put, False where "
        "nothing was, as nonempty): it is read only for the chosen pair of a feasible row (every present limit's "
        "interval nonempty there, so both True), and for an absent limit the binding bit is masked by "
        "~isnan(limit) (usd without a price is refused at load); j = 0 (flops) reads the same flag",
    ("budgetdsl/cost/cost_model.py",
     "assert preset is not None and preset.fp8_peak_flops > 0  # Hardware._preset", 0, 7, "and -> or"):
        "an assertion of what Hardware._preset validates (precision fp8 needs a preset with an FP8 peak, else "
        "the plan is refused): both operands hold wherever this line runs, so both forms pass",
    ("budgetdsl/solve/placement.py", "if math.ceil(n_t) < n_hi and math.ceil(n_t) < n_was:", 0, 29, "< -> <="):
        "`carried` at ceil(n_t) = n_was < n_hi: the `else` branch's _neighbours clip c to c under both upper "
        "ends, so `near` agrees, n_hi (above every neighbour) is not in it, and both branches return None "
        "exactly where n_hi == n_lo",
    ("budgetdsl/solve/sweep_kernel.py",
     "inside = wall_floor(s_min[pair], beta[pair], u[pair], v[pair], m) * (1.0 - _BOUND_MARGIN) <= threshold[pair]",
     0, 9, "* -> /"):
        "as its scalar twin in placement.py (listed above): the bound margin turns from 1e-9 below the floor to "
        "1e-9 above it, so a split is left out only where its floor is within 2e-9 (relative) of the best wall "
        "clock met, a split that could at best tie it to eight digits",
    ("budgetdsl/solve/sweep_kernel.py",
     'if sum(p.startswith("target.") for p in paths) > 1 or {"budget.usd", "budget.usd_per_gpu_hour"} <= set(paths):',
     0, 3, "or -> and"):
        "sends two kinds of sweep to the kernel: budget.usd with its price (listed above: the kernel's rows equal "
        "solve()'s) and two target paths, whose rule relates only which keys are present (a sweep value cannot "
        "unset one), so a combination is valid exactly where each value is; checked: a 4 × 4 tokens × at_batch "
        "grid and a min_tokens × tokens one on minimal.yaml, kernel rows = solve()",
    ("budgetdsl/solve/search_space.py", "line1, line2 = (k + d / mm, const), (k, const + d)", 0, 40, "+ -> -"):
        "step_bound's ZeRO-3 line 2 under a declared overlap: d = dp_per_micro · (1 − overlap) ≥ 0, so const − d "
        "≤ const + d and the lower bound only weakens (prunes less): the walk ends at the same pick, as the "
        "other line-2 intercepts above",
    ("budgetdsl/solve/placement.py", "while len(out) < top:", 0, 6, "< -> <="):
        "_WallSizes.bounds computes the bound of one size more than asked: each entry is a function of its size "
        "alone, and its one reader (`candidates`) indexes bounds[b − 1] for b ≤ top only: the work differs",
    ("budgetdsl/solve/search_space.py", "line1 = line2 = (k, const + exposed(1.0))", 0, 20, "+ -> -"):
        "step_bound's ZeRO 0-2 lines under a declared overlap: exposed_dp returns max(0, ...) ≥ 0, so the "
        "intercept const − exposed only weakens the lower bound (prunes less): the same pick, as line 2's above",
}

SWAP_CMP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq}
SWAP_BIN = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div}
SWAP_CALL = {"ceil": "floor", "floor": "ceil", "min": "max", "max": "min"}
SYMBOL = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Add: "+",
          ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.And: "and", ast.Or: "or"}


@dataclass(frozen=True)
class Mutant:
    path: str  # relative to the repository
    line: int
    col: int
    end_line: int
    end_col: int
    text: str  # what replaces the span
    what: str  # e.g. "< -> <="

    def apply(self, source: str) -> str:
        lines = source.splitlines(keepends=True)
        start = sum(len(x) for x in lines[:self.line - 1]) + _char_offset(lines[self.line - 1], self.col)
        end = sum(len(x) for x in lines[:self.end_line - 1]) + _char_offset(lines[self.end_line - 1], self.end_col)
        return source[:start] + self.text + source[end:]


def _char_offset(line: str, byte_col: int) -> int:
    """ast's col_offset counts UTF-8 bytes; the source string counts characters."""
    return len(line.encode()[:byte_col].decode(errors="ignore"))


def _skipped(tree: ast.Module) -> set[int]:
    """ids of the nodes no mutant touches: annotations, docstrings, f-strings and what they hold."""
    roots: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            roots += [a.annotation for a in (*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs,
                                             node.args.vararg, node.args.kwarg) if a is not None and a.annotation]
            if node.returns is not None:
                roots.append(node.returns)
        if isinstance(node, ast.AnnAssign):
            roots.append(node.annotation)
        if isinstance(node, ast.JoinedStr):
            roots.append(node)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body \
                and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            roots.append(node.body[0])
    return {id(n) for r in roots for n in ast.walk(r)}


def _variants(node: ast.AST) -> list[tuple[ast.AST | str, str]]:
    """(replacement node or source text, description) of each slip at `node`."""
    out: list[tuple[ast.AST | str, str]] = []
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in SWAP_CMP:
                new = copy.deepcopy(node)
                new.ops[i] = SWAP_CMP[type(op)]()
                out.append((new, f"{SYMBOL[type(op)]} -> {SYMBOL[SWAP_CMP[type(op)]]}"))
    elif isinstance(node, ast.BoolOp):
        new = copy.deepcopy(node)
        new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        out.append((new, f"{SYMBOL[type(node.op)]} -> {SYMBOL[type(new.op)]}"))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.BinOp) \
            and isinstance(node.operand.op, ast.FloorDiv) and isinstance(node.operand.left, ast.UnaryOp) \
            and isinstance(node.operand.left.op, ast.USub):  # -(-a // b), a ceiling
        out.append((ast.BinOp(node.operand.left.operand, ast.FloorDiv(), node.operand.right),
                    "-(-a // b) -> a // b (ceil -> floor)"))
    elif isinstance(node, ast.BinOp) and type(node.op) in SWAP_BIN:
        new = copy.deepcopy(node)
        new.op = SWAP_BIN[type(node.op)]()
        out.append((new, f"{SYMBOL[type(node.op)]} -> {SYMBOL[type(new.op)]}"))
    elif isinstance(node, ast.AugAssign) and type(node.op) in (ast.Add, ast.Sub):
        new = copy.deepcopy(node)
        new.op = SWAP_BIN[type(node.op)]()
        out.append((new, f"{SYMBOL[type(node.op)]}= -> {SYMBOL[type(new.op)]}="))
    elif isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "math" \
            and f.attr in ("ceil", "floor") else f.id if isinstance(f, ast.Name) and f.id in ("min", "max") else None
        if name:
            new = copy.deepcopy(node)
            if isinstance(new.func, ast.Attribute):
                new.func.attr = SWAP_CALL[name]
            else:
                assert isinstance(new.func, ast.Name)
                new.func.id = SWAP_CALL[name]
            out.append((new, f"{name} -> {SWAP_CALL[name]}"))
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        out.append((repr(node.value + 1), f"{node.value} -> {node.value + 1}"))  # one per constant
    return out


def sites(root: pathlib.Path = REPO) -> list[Mutant]:
    """Every mutant of PACKAGES, in a fixed order."""
    out: list[Mutant] = []
    for package in PACKAGES:
        for path in sorted((root / package).glob("*.py")):
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
            skip = _skipped(tree)
            rel = str(path.relative_to(root))
            for node in ast.walk(tree):
                if id(node) in skip or not hasattr(node, "lineno"):
                    continue
                for new, what in _variants(node):
                    text = new if isinstance(new, str) else (
                        ast.unparse(new) if isinstance(new, ast.stmt) else f"({ast.unparse(new)})")
                    m = Mutant(rel, node.lineno, node.col_offset, node.end_lineno or node.lineno,
                               node.end_col_offset or 0, text, what)
                    out.append(m)  # parenthesised unparsed nodes: valid wherever the node stood
    out.sort(key=lambda m: (m.path, m.line, m.col, m.what))
    return out


# The line tracer, run inside pytest (as this module's plugin) and, through a generated
# sitecustomize, inside every Python subprocess a test starts. Only frames of PACKAGES are traced
# line by line; module and class bodies (code without CO_NEWLOCALS) count as import time.
_TRACER = '''
import sys, threading
def _start_trace(packages, state):
    files = {}
    marks = tuple("/" + p + "/" for p in packages)
    def local_for(rel):
        def local(frame, event, arg):
            if event == "line":
                (state.imports if frame.f_code.co_flags & 2 == 0 else state.hits).add((rel, frame.f_lineno))
            return local
        return local
    def glob(frame, event, arg):
        name = frame.f_code.co_filename
        fn = files.get(name)
        if fn is None:
            at = max(name.rfind(m) for m in marks)
            fn = files[name] = local_for(name[at + 1:]) if at >= 0 and name.endswith(".py") else False
        return fn or None
    sys.settrace(glob)
    threading.settrace(glob)
'''

_SITECUSTOMIZE = _TRACER + '''
def _main():
    import atexit, json, os, types
    out = os.environ.get("SUBTRACE_ENV")
    if not out:
        return
    state = types.SimpleNamespace(hits=set(), imports=set())
    _start_trace(PACKAGES, state)
    def dump():
        sys.settrace(None)
        with open(f"{out}.{os.getpid()}.json", "w") as f:
            json.dump({"hits": sorted(state.hits), "imports": sorted(state.imports)}, f)
    atexit.register(dump)
_main()
'''.replace("SUBTRACE_ENV", SUBTRACE_ENV).replace("PACKAGES", repr(PACKAGES))


class _Trace:
    def __init__(self, out: str) -> None:
        self.out, self.index = out, 0
        self.hits: set[tuple[str, int]] = set()
        self.imports: set[tuple[str, int]] = set()
        self.tests: list[dict] = []


_trace: _Trace | None = None


def pytest_configure(config) -> None:
    global _trace
    if os.environ.get(TRACE_ENV) and _trace is None:
        _trace = _Trace(os.environ[TRACE_ENV])
        scope: dict = {}
        exec(_TRACER, scope)
        scope["_start_trace"](PACKAGES, _trace)


def pytest_collection_modifyitems(session, config, items) -> None:
    select = os.environ.get(SELECT_ENV)
    if select:
        order = {nodeid: i for i, nodeid in enumerate(pathlib.Path(select).read_text(encoding="utf-8").split("\0"))}
        keep = sorted((item for item in items if item.nodeid in order), key=lambda item: order[item.nodeid])
        config.hook.pytest_deselected(items=[item for item in items if item.nodeid not in order])
        items[:] = keep


def pytest_runtest_protocol(item, nextitem):  # a plain hook: runs the test itself when tracing
    if _trace is None:
        return None
    from _pytest.runner import runtestprotocol
    _trace.index += 1
    sub = f"{_trace.out}.sub.{_trace.index}"
    os.environ[SUBTRACE_ENV] = sub
    _trace.hits = set()
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    t0 = time.process_time()
    reports = runtestprotocol(item, nextitem=nextitem)
    seconds = time.process_time() - t0
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    os.environ.pop(SUBTRACE_ENV, None)
    _trace.tests.append({"nodeid": item.nodeid, "lines": sorted(_trace.hits), "sub": sub,
                         "seconds": seconds, "passed": all(r.passed or r.skipped for r in reports)})
    return True


def pytest_sessionfinish(session) -> None:
    if _trace is not None:
        sys.settrace(None)
        pathlib.Path(_trace.out).write_text(json.dumps({"tests": _trace.tests, "imports": sorted(_trace.imports)}),
                                            encoding="utf-8")


def _copy(dest: pathlib.Path) -> None:
    """The tracked files and the untracked ones git does not ignore (a new test is run before its commit)."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           check=True, capture_output=True).stdout
    for rel in files.decode().split("\0"):
        if rel and (REPO / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)


def _pytest(tree: pathlib.Path, extra_env: dict[str, str], pythonpath: list[pathlib.Path], limit: float,
            args: list[str], first_failure: bool = True) -> tuple[str, float, str]:
    """'pass', 'fail' or 'timeout' of pytest in `tree`, its CPU seconds (children included), its output.

    `limit` is CPU seconds (RLIMIT_CPU of pytest and of each process it starts): on a loaded machine
    a wall-clock limit would count a slow survivor as killed. A hang that waits without spending
    CPU is caught by the wall clock at WALL_FACTOR times the limit."""
    # BUDGETDSL_ROOT: the copy is no git work tree, and plans extend and read files inside it
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, [tree, *pythonpath, tree / "bench"])),
           "PYTHONDONTWRITEBYTECODE": "1", "BUDGETDSL_ROOT": str(tree), **extra_env}
    cpu_limit = max(1, math.ceil(limit))

    def limit_cpu() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit, cpu_limit + 5))

    with tempfile.TemporaryDirectory(prefix="hypothesis-") as store:
        env["HYPOTHESIS_STORAGE_DIRECTORY"] = store  # no example of one mutant replays on the next
        before = os.times()
        try:
            proc = subprocess.run([sys.executable, "-m", "pytest", *(["-x"] if first_failure else []), "-q",
                                   "-p", "no:cacheprovider",
                                   "-p", "no:randomly", "-p", "no:xdist", "-p", "bench_mutation",
                                   f"--timeout={int(WALL_FACTOR * cpu_limit)}", *args],
                                  cwd=tree, env=env, capture_output=True, timeout=WALL_FACTOR * cpu_limit, text=True,
                                  preexec_fn=limit_cpu)
        except subprocess.TimeoutExpired:
            return "timeout", limit, ""
        after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    if proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL):  # past the CPU limit
        return "timeout", cpu, proc.stdout[-3000:] + proc.stderr[-2000:]
    outcome = "pass" if proc.returncode in (0, 5) else "fail"  # 5: nothing selected ran
    return outcome, cpu, proc.stdout[-3000:] + proc.stderr[-2000:]


@dataclass
class Coverage:
    """Which tests execute which lines of PACKAGES, from one traced run of TESTS."""
    tests: list[str]  # node ids, fastest first
    seconds: dict[str, float]
    lines: dict[tuple[str, int], set[str]]
    imports: set[tuple[str, int]]

    def select(self, m: Mutant) -> list[str] | None:
        """The tests that can see `m`, fastest first; None: it runs at import, so every test."""
        span = [(m.path, n) for n in range(m.line, m.end_line + 1)]
        if any(s in self.imports for s in span):
            return None
        chosen = set().union(*(self.lines.get(s, set()) for s in span))
        return [t for t in self.tests if t in chosen]


def _test_files(tree: pathlib.Path, tests: tuple[str, ...]) -> list[str]:
    out = []
    for entry in tests:
        path = tree / entry
        found = sorted(path.rglob("test_*.py")) if path.is_dir() else [path]
        out += [str(f.relative_to(tree)) for f in found if f.name not in SKIPPED_TESTS]
    return out


def trace(tree: pathlib.Path, tests: tuple[str, ...] = TESTS, cache: pathlib.Path | None = None) -> Coverage:
    """Which tests execute which lines. `cache`: a folder of each test file's trace, keyed by the
    file and every other copied file but bench/ and docs/, so that a new test file is traced alone."""
    files = _test_files(tree, tests)
    common = hashlib.sha256()
    for path in sorted(p for p in tree.rglob("*") if p.is_file()):
        rel = str(path.relative_to(tree))
        if not (rel.startswith("tests/") and path.name.startswith("test_")) and not rel.startswith(("bench/", "docs/")):
            common.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    keys = {f: hashlib.sha256(common.digest() + (tree / f).read_bytes()).hexdigest()[:32] for f in files}
    traced: dict[str, dict] = {}
    if cache is not None:
        for f in files:
            if (cache / f"{keys[f]}.json").exists():
                traced[f] = json.loads((cache / f"{keys[f]}.json").read_text(encoding="utf-8"))
    missing = [f for f in files if f not in traced]
    if missing:
        print(f"tracing {len(missing)} test files", flush=True)
        with tempfile.TemporaryDirectory(prefix="budgetdsl-trace-") as tmp:
            site = pathlib.Path(tmp) / "site"
            site.mkdir()
            (site / "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
            out = pathlib.Path(tmp) / "trace.json"
            # no -x here: a failing test is reported and left out of the selection
            outcome, _, log = _pytest(tree, {TRACE_ENV: str(out)}, [site], 7200, missing, first_failure=False)
            if not out.exists():
                raise SystemExit(f"the traced run of the tests failed ({outcome}):\n{log}")
            data = json.loads(out.read_text(encoding="utf-8"))
            imports = {tuple(x) for x in data["imports"]}
            per_file: dict[str, list[dict]] = {f: [] for f in missing}
            for test in data["tests"]:
                hit = {tuple(x) for x in test.pop("lines")}
                for sub in pathlib.Path(tmp).glob(pathlib.Path(test.pop("sub")).name + ".*.json"):
                    part = json.loads(sub.read_text(encoding="utf-8"))
                    hit |= {tuple(x) for x in part["hits"]}
                    imports |= {tuple(x) for x in part["imports"]}
                test["lines"] = sorted(hit)
                per_file.setdefault(test["nodeid"].split("::")[0], []).append(test)
        for f in missing:
            traced[f] = {"tests": per_file.get(f, []), "imports": sorted(imports)}
            if cache is not None:
                cache.mkdir(parents=True, exist_ok=True)
                (cache / f"{keys[f]}.json").write_text(json.dumps(traced[f]), encoding="utf-8")
    lines: dict[tuple[str, int], set[str]] = {}
    imports = set()
    seconds: dict[str, float] = {}
    failed = []
    for entry in traced.values():
        imports |= {tuple(x) for x in entry["imports"]}
        for test in entry["tests"]:
            if not test["passed"]:
                failed.append(test["nodeid"])
                continue
            seconds[test["nodeid"]] = test["seconds"]
            for x in test["lines"]:
                lines.setdefault(tuple(x), set()).add(test["nodeid"])
    if failed:
        print(f"{len(failed)} tests fail on clean code and are left out: {failed[:5]}")
    return Coverage(sorted(seconds, key=lambda t: seconds[t]), seconds, lines, imports)


def _worker(mutants: list[Mutant], cov: Coverage, report) -> list[tuple[Mutant, str, float]]:
    results = []
    with tempfile.TemporaryDirectory(prefix="budgetdsl-mutant-") as tmp:
        tree = pathlib.Path(tmp)
        _copy(tree)
        for m in mutants:
            if _equivalent(m):
                results.append((m, "equivalent", 0.0))
                report(m, "equivalent", 0.0, 0)
                continue
            selected = cov.select(m)
            if selected == []:
                results.append((m, "unexecuted", 0.0))
                report(m, "unexecuted", 0.0, 0)
                continue
            tests = cov.tests if selected is None else selected
            limit = 30 + 5 * sum(cov.seconds[t] for t in tests)
            target = tree / m.path
            original = target.read_text(encoding="utf-8")
            target.write_text(m.apply(original), encoding="utf-8")
            select = tree / ".bench-mutation-select"
            select.write_text("\0".join(tests), encoding="utf-8")
            files = sorted({t.split("::")[0] for t in tests})
            try:
                outcome, seconds, _ = _pytest(tree, {SELECT_ENV: str(select)}, [], limit, files)
            finally:
                target.write_text(original, encoding="utf-8")
            results.append((m, outcome, seconds))
            report(m, outcome, seconds, len(tests))
    return results


def _line_text(m: Mutant) -> str:
    return (REPO / m.path).read_text(encoding="utf-8").splitlines()[m.line - 1].strip()


def _equivalent(m: Mutant) -> str | None:
    lines = (REPO / m.path).read_text(encoding="utf-8").splitlines()
    line = lines[m.line - 1]
    nth = sum(x.strip() == line.strip() for x in lines[:m.line - 1])
    return EQUIVALENT.get((m.path, line.strip(), nth, m.col - (len(line) - len(line.lstrip())), m.what))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=100, help="mutants to run (0: every site)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1, help="mutants run at once, each in its own copy")
    ap.add_argument("--only", nargs="*", default=[],
                    help="run only the sampled mutants at these path:line (budgetdsl/cost/memory.py:116)")
    ap.add_argument("--range", default="", help="A:B: only the sampled mutants A..B-1 (B:A: the same, last first)")
    ap.add_argument("--tests", nargs="*", default=list(TESTS), help="the tests to trace and run (default: %(default)s)")
    ap.add_argument("--cache", default=str(pathlib.Path(tempfile.gettempdir()) / "budgetdsl-mutation-trace"),
                    help="folder of the test files' traces, reused while the files are unchanged ('': none)")
    ap.add_argument("--list", action="store_true", help="print the sampled mutants and stop")
    args = ap.parse_args()

    every = sites()
    chosen = every if args.sample <= 0 else random.Random(args.seed).sample(every, min(args.sample, len(every)))
    if args.range:
        a, b = (int(x) for x in args.range.split(":"))
        chosen = chosen[a:b] if a <= b else chosen[b:a][::-1]
    if args.only:
        chosen = [m for m in chosen if f"{m.path}:{m.line}" in args.only]
    for m in chosen:  # checked here, not for every site: parsing each mutated file takes a while
        ast.parse(m.apply((REPO / m.path).read_text(encoding="utf-8")))
    print(f"{len(every)} mutation sites in {', '.join(PACKAGES)}; running {len(chosen)} (seed {args.seed})")
    if args.list:
        for m in chosen:
            print(f"  {m.path}:{m.line}:{m.col}  {m.what}")
        return 0

    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="budgetdsl-clean-") as tmp:
        _copy(pathlib.Path(tmp))
        cov = trace(pathlib.Path(tmp), tuple(args.tests), pathlib.Path(args.cache) if args.cache else None)
    print(f"traced run of {', '.join(args.tests)}: {len(cov.tests)} tests, {sum(cov.seconds.values()):.0f} s CPU "
          f"(traced), {len(cov.lines)} lines executed, {len(cov.imports)} at import; {time.monotonic() - t0:.0f} s")

    done = [0]

    def report(m: Mutant, outcome: str, seconds: float, n: int) -> None:
        done[0] += 1
        mark = {"fail": "killed", "timeout": "killed (time limit)", "pass": "SURVIVED", "equivalent": "equivalent",
                "unexecuted": "SURVIVED (not executed)"}[outcome]
        print(f"[{done[0]}/{len(chosen)}] {mark:24} {seconds:5.1f} s CPU {n:4} tests  {m.path}:{m.line}  {m.what}",
              flush=True)

    t0 = time.monotonic()
    shares = [chosen[i::args.jobs] for i in range(args.jobs)]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = [r for part in pool.map(lambda s: _worker(s, cov, report), shares) for r in part]

    killed = sum(o in ("fail", "timeout") for _, o, _ in results)
    equivalent = [(m, _equivalent(m)) for m, o, _ in results if o == "equivalent"]
    n, ne = len(results), len(results) - len(equivalent)
    print(f"\nkill rate {killed}/{n} = {100 * killed / n:.1f} % "
          f"({sum(o == 'timeout' for _, o, _ in results)} by the time limit); "
          f"without the {len(equivalent)} equivalent mutants {killed}/{ne} = {100 * killed / max(ne, 1):.1f} %; "
          f"{time.monotonic() - t0:.0f} s, {sum(s for _, _, s in results):.0f} s CPU")
    for package in PACKAGES:
        mine = [o for m, o, _ in results if m.path.startswith(package)]
        if mine:
            print(f"  {package}: {sum(o in ('fail', 'timeout') for o in mine)}/{len(mine)}")
    if equivalent:
        print("equivalent (EQUIVALENT):")
        for m, why in sorted(equivalent, key=lambda e: (e[0].path, e[0].line)):
            print(f"  {m.path}:{m.line}:{m.col}  {m.what}: {why}")
    survivors = sorted(((m, o) for m, o, _ in results if o in ("pass", "unexecuted")),
                       key=lambda x: (x[0].path, x[0].line))
    if survivors:
        print("survivors:")
        for m, o in survivors:
            print(f"  {m.path}:{m.line}:{m.col}  {m.what}{'  (not executed)' if o == 'unexecuted' else ''}"
                  f"   {_line_text(m)[:90]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
