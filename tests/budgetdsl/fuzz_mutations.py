"""A mutation fuzzer over the example plans: loader -> solver -> renderers -> every export.

Plans arrive in pull requests, so any text must end in a Plan or in located diagnostics, a Plan in
a solution (or a located reason it cannot be solved), a solution in strict JSON and inert Markdown,
and a feasible solution in every export (or an ExportError saying why the format cannot carry it).
Anything else — an uncaught exception, a mutant running past its time bound, `Infinity`/`NaN` in
JSON — is a finding, grouped by the file and line where it was raised.

Mutation operators (each mutant applies one to three of them to one example plan):
    byte flips, token swaps, value swaps (a value from elsewhere in the plans), extreme numbers
    (.inf, .nan, 1e400, 1e-320, 400-digit integers, ...), YAML tags, deep nesting, long strings,
    and the layout search's forms (issue 13): `auto` or a hostile value for a layout key or
    run.micro_batch, `hardware.gpus` as a range or `{max: N}` up to the cap, and model shapes and
    objectives that make the search large (many head divisors, odd gpus_per_node, seq_len ends).

Deterministic: `Fuzzer(seed).mutants(n)` yields the same texts on every run and platform.
Used by tests/budgetdsl/test_fuzz_mutations.py (a bounded run in the suite) and bench/bench_fuzz.py.
"""

from __future__ import annotations

import json
import pathlib
import random
import re
import signal
import time
import traceback
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field

REPO = pathlib.Path(__file__).resolve().parents[2]
PLANS = REPO / "plans"

EXTREME = [
    ".inf", "-.inf", ".nan", ".NaN", "1e400", "-1e400", "1e-320", "5e-324", "1.79e308", "-1.79e308",
    "1e-10", "0", "-0", "-1", "0.5", "1e308", "9" * 400, "-" + "9" * 400, "1" + "0" * 30,
    "2**1023", "1.4T", "1e15", "1e300 * 1e10", "10^308", "1e-300 / 1e300", "!!float 1e400",
    "!!float .nan", "!!int 0.9999999999999999", "!!int " + "9" * 5000, "1" * 5000, "0x7fffffffffff",
    "0o777", "1_000_000_000_000_000", "18446744073709551617", "1e6 days", "1e30 GiB", "1e-30 s",
    "1e40 FLOP", "3.4e38", "4.9e-324 * 2", "100%", "1e-6%", "1e9 Ti", "2^64", "(1e154)^2",
]
TAGS = ["!!python/object:os.system", "!!python/name:os.system", "!!binary", "!!set", "!!omap",
        "!!str", "!!int", "!!float", "!!bool", "!!null", "!!timestamp", "!custom", "!!map", "!!seq",
        "!<tag:yaml.org,2002:python/tuple>"]
STRINGS = [
    "x` ![t](https://e.example/t.png) **all limits hold** `y", "<img src=x onerror=alert(1)>",
    "a\nb", "line\r\n## heading", "`" * 50, "$(touch /tmp/pwned)", "'; rm -rf / #", "\x00\x01\x1b[31m",
    "\u202etxt.exe", "[link](javascript:alert(1))", "|a|b|", "<details>", "A" * 10_000,
    "é" * 3000, "{{ template }}", "${HOME}", "\\", "\"quoted\"", "-- --flag=1",
]
PATHS = ["base/a100-cluster.yaml", "../plans/llama2-7b.yaml", "/etc/hostname.yaml", "/dev/zero",
         "llama2-7b.yaml", "base/../llama2-7b.yaml", "../../../../etc/passwd.yaml", "a\x00b.yaml",
         "http://example.com/x.yaml", "base", "."]

# The layout search's forms (issue 13): the GPU count as a range or a maximum, up to the cap of
# 10,000 counts, and malformed ones; `auto` and hostile values for each searched key.
GPU_FORMS = ["{max: 64}", "{max: 1}", "{min: 64, max: 2048, step: 64}", "{min: 990000, max: 1000000, step: 10000}",
             "{min: 1, max: 1000000, step: 100000}", "{max: 16}", "{min: 8, max: 512, step: 8}", "{min: 5, max: 3}",
             "{max: 0}", "{max: -8}", "{max: .inf}", "{max: 1e6}", "{min: 8, max: 16, step: 0}", "{min: 8.5, max: 16}",
             "{}", "{step: 8}", "{max: 128, extra: 1}", "{max: auto}", "auto", "[8, 16]", "{max: 2**20}",
             "{max: 1000001}", "{min: 1000000, max: 1000000}", "{max: 64, step: 1e-3}",
             "{min: 1, max: 1000000, step: 99}"]
# Ranges of hundreds of counts up to the cap (10,000 counts, step 1): the search's worst cases. Not
# in the suite's run: the search does not yet end them within a second (seq_len 128 on {max: 512}
# takes > 30 s CPU; tests/budgetdsl/test_hostile_search.py holds them as xfail). bench_fuzz
# --full-ranges adds them.
GPU_FORMS_FULL = ["{max: 512}", "{min: 8, max: 4096, step: 8}", "{min: 1, max: 1000000, step: 1000}",
                  "{min: 8, max: 10000}", "{max: 10000}", "{min: 1, max: 10001}", "{min: 9999, max: 10000}",
                  "{max: 10000, step: 9999}", "{min: 990001, max: 1000000}", "{min: 1, max: 1000000, step: 100}"]
SEARCHED = {"hardware": ["tensor_parallel", "pipeline_parallel", "zero", "recompute"], "run": ["micro_batch"]}
SEARCH_VALUES = ["auto", "auto", "auto", "AUTO", "'auto'", "auto ", "1", "2", "3", "7", "8", "1000000", "1000001",
                 "0", "-1", "2.5", "none", "selective", "full", "null", "~", "[auto]", "{max: 8}", "auto * 2"]
SHAPES = [("model", "heads", ["720720", "5040", "1", "10000000", "64", "97"]),
          ("model", "layers", ["1", "100000", "99991", "5040"]),
          ("model", "seq_len", ["1", "2", "100000000", "1048576"]),
          ("model", "d_model", ["1", "10000000", "720720"]),
          ("hardware", "gpus_per_node", ["1", "7", "997", "1000000", "6", "12"]),
          ("hardware", "memory_per_device", ["1 MB", "1e15", "1 GiB"]),
          ("hardware", "mfu", ["0.4", "1e-4", "1", "auto"]),
          ("run", "batch", ["1", "4Mi", "1e15", "auto"]),
          ("", "objective", ["balanced", "min_time", "min_cost", "min_flops", "auto", "min_energy"])]

_TOKEN = re.compile(r"[A-Za-z_][\w.\-]*|\d[\w.\-+]*|[^\sA-Za-z\d]")
_VALUE = re.compile(r"(?m)^(\s*(?:- )?[\w]+:[ \t]+)([^#\n]+?)(\s*(?:#.*)?)$")
_KEY = re.compile(r"(?m)^(\s*)([\w]+):")


def seed_texts() -> dict[str, str]:
    """The example plans (and their bases), by path relative to plans/."""
    return {str(p.relative_to(PLANS)): p.read_text() for p in sorted(PLANS.rglob("*.yaml"))}


class Fuzzer:
    """Deterministic mutants of the example plans."""

    def __init__(self, seed: int = 0, full_ranges: bool = False):
        self.rng = random.Random(seed)
        self.gpu_forms = GPU_FORMS + (GPU_FORMS_FULL if full_ranges else [])
        self.seeds = seed_texts()
        self.names = sorted(self.seeds)
        self.values = sorted({m.group(2) for t in self.seeds.values() for m in _VALUE.finditer(t)})
        self.keys = sorted({m.group(2) for t in self.seeds.values() for m in _KEY.finditer(t)})
        self.ops = [self.byte_flip, self.token_swap, self.value_swap, self.extreme_number, self.yaml_tag,
                    self.deep_nesting, self.long_string, self.value_swap, self.extreme_number,
                    self.key_swap, self.drop_line, self.dup_line, self.gpu_range, self.search_key,
                    self.search_shape]

    def mutants(self, n: int):
        """(seed plan name, operator names, text) for n mutants."""
        for _ in range(n):
            name = self.rng.choice(self.names)
            text = self.seeds[name]
            ops = [self.rng.choice(self.ops) for _ in range(self.rng.choice((1, 1, 1, 2, 3)))]
            for op in ops:
                text = op(text)
            yield name, tuple(op.__name__ for op in ops), text

    # -- operators ------------------------------------------------------------------------------
    def _value_site(self, text: str) -> re.Match[str] | None:
        sites = list(_VALUE.finditer(text))
        return self.rng.choice(sites) if sites else None

    def _set_value(self, text: str, value: str) -> str:
        m = self._value_site(text)
        if m is None:
            return text
        return text[: m.start(2)] + value + text[m.end(2):]

    def byte_flip(self, text: str) -> str:
        data = bytearray(text.encode("utf-8"))
        for _ in range(self.rng.randint(1, 4)):
            if data:
                i = self.rng.randrange(len(data))
                data[i] ^= 1 << self.rng.randrange(8)
        return data.decode("utf-8", errors="replace")

    def token_swap(self, text: str) -> str:
        toks = list(_TOKEN.finditer(text))
        if len(toks) < 2:
            return text
        a, b = sorted(self.rng.sample(toks, 2), key=lambda m: m.start())
        return text[: a.start()] + b.group() + text[a.end(): b.start()] + a.group() + text[b.end():]

    def value_swap(self, text: str) -> str:
        return self._set_value(text, self.rng.choice(self.values))

    def extreme_number(self, text: str) -> str:
        return self._set_value(text, self.rng.choice(EXTREME))

    def yaml_tag(self, text: str) -> str:
        m = self._value_site(text)
        if m is None:
            return text
        return text[: m.start(2)] + self.rng.choice(TAGS) + " " + text[m.start(2):]

    def deep_nesting(self, text: str) -> str:
        depth = self.rng.choice((20, 40, 100, 1000, 5000))
        kind = self.rng.randrange(3)
        if kind == 0:
            value = "[" * depth + "1" + "]" * depth
        elif kind == 1:
            value = "{a: " * depth + "1" + "}" * depth
        else:
            value = "(" * depth + "1" + ")" * depth
        return self._set_value(text, value)

    def long_string(self, text: str) -> str:
        s = self.rng.choice(STRINGS + PATHS)
        if self.rng.random() < 0.5:
            s = json.dumps(s)  # as a quoted YAML scalar, so control characters survive
        if self.rng.random() < 0.3:  # as the plan's name, which lands in report headings
            return re.sub(r"(?m)^name: .*$", lambda _m: "name: " + s, text, count=1)
        if self.rng.random() < 0.2:
            return re.sub(r"(?m)^extends: .*$", lambda _m: "extends: " + self.rng.choice(PATHS), text, count=1)
        return self._set_value(text, s)

    def _put(self, text: str, section: str, key: str, value: str) -> str:
        """`section.key: value` in the plan: the value replaced where the key is, else the key
        added under the section (the section added at the end when absent)."""
        if not section:
            if re.search(rf"(?m)^{key}:", text):
                return re.sub(rf"(?m)^{key}:.*$", lambda _m: f"{key}: {value}", text, count=1)
            return text.rstrip("\n") + f"\n{key}: {value}\n"
        m = re.search(rf"(?m)^{section}:[ \t]*(#.*)?$", text)
        if m is None:
            return text.rstrip("\n") + f"\n{section}:\n  {key}: {value}\n"
        body = re.compile(rf"(?m)^(  {key}:)[ \t]*([^#\n]*)")
        end = re.search(r"(?m)^\S", text[m.end():])
        stop = m.end() + (end.start() if end else len(text) - m.end())
        k = body.search(text, m.end(), stop)
        if k is not None:  # the comment after the value stays one (a space before its #)
            trail = k.group(2)[len(k.group(2).rstrip()):] or " "
            return text[: k.start(2)] + value + trail + text[k.end(2):]
        return text[: m.end()] + f"\n  {key}: {value}" + text[m.end():]

    def gpu_range(self, text: str) -> str:
        return self._put(text, "hardware", "gpus", self.rng.choice(self.gpu_forms))

    def search_key(self, text: str) -> str:
        for _ in range(self.rng.choice((1, 2, 5))):
            section = self.rng.choice(sorted(SEARCHED))
            text = self._put(text, section, self.rng.choice(SEARCHED[section]), self.rng.choice(SEARCH_VALUES))
        return text

    def search_shape(self, text: str) -> str:
        """A searched layout (every key auto, a GPU range) with a shape, limit or objective at an end."""
        section, key, values = self.rng.choice(SHAPES)
        text = self._put(text, section, key, self.rng.choice(values))
        if self.rng.random() < 0.5:
            forms = self.gpu_forms[:7] + self.gpu_forms[len(GPU_FORMS):]
            text = self._put(text, "hardware", "gpus", self.rng.choice(forms))
        return text

    def key_swap(self, text: str) -> str:
        sites = list(_KEY.finditer(text))
        if not sites:
            return text
        m = self.rng.choice(sites)
        return text[: m.start(2)] + self.rng.choice(self.keys) + text[m.end(2):]

    def drop_line(self, text: str) -> str:
        lines = text.split("\n")
        del lines[self.rng.randrange(len(lines))]
        return "\n".join(lines)

    def dup_line(self, text: str) -> str:
        lines = text.split("\n")
        i = self.rng.randrange(len(lines))
        lines.insert(i, lines[self.rng.randrange(len(lines))])
        return "\n".join(lines)


# -- running one mutant through everything --------------------------------------------------------

class Hang(Exception):
    """The mutant ran past its time bound."""


@contextmanager
def time_bound(seconds: float, wall_factor: float = 6.0):
    """Raise Hang in the main thread after `seconds` of this process's CPU time (SIGPROF), or after
    `wall_factor` × `seconds` of wall-clock time (SIGALRM; a blocking read burns no CPU). CPU time
    is the measure: on a shared machine a mutant's wall time depends on the other jobs (Unix)."""
    def fire(what: str):
        def handler(signum, frame):
            raise Hang(f"ran past {what}")
        return handler
    old_prof = signal.signal(signal.SIGPROF, fire(f"{seconds:g} s of CPU"))
    old_alrm = signal.signal(signal.SIGALRM, fire(f"{seconds * wall_factor:g} s of wall clock"))
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, seconds * wall_factor)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGPROF, old_prof)
        signal.signal(signal.SIGALRM, old_alrm)


def _no_constant(name: str):
    raise ValueError(f"non-finite JSON constant {name}")


class NonFinite(Exception):
    """A renderer wrote Infinity or NaN into JSON."""


class Injected(Exception):
    """Markdown of a solution holds an image, a link or raw HTML that came from the plan."""


def check_markdown(md: str) -> None:
    """The report's Markdown holds no image, link or HTML other than its own <details> fold."""
    try:
        from markdown_it import MarkdownIt
    except ImportError:  # pragma: no cover - installed with textual
        return
    for tok in MarkdownIt("commonmark").enable("table").parse(md):
        kids = tok.children or []
        for t in [tok, *kids]:
            if t.type in ("image", "link_open"):
                raise Injected(f"{t.type} in the Markdown report")
            if t.type in ("html_inline", "html_block"):
                if not re.fullmatch(r"\s*</?(details|summary|code)>(\s*<summary>Assumptions</summary>)?\s*"
                                    r"|\s*<details><summary>.*</summary>\s*", t.content, re.S):
                    raise Injected(f"raw HTML {t.content[:40]!r} in the Markdown report")


def run_pipeline(text: str, plan_path: pathlib.Path) -> str:
    """Loader -> solver -> text/json/markdown -> every export. Returns the outcome
    (invalid / unsolvable / infeasible / exported); raises on any finding."""
    from budgetdsl.exports import FORMATS, export
    from budgetdsl.exports.spec import ExportError, launch_spec
    from budgetdsl.plan.diagnostics import PlanError
    from budgetdsl.plan.loader import load_plan
    from budgetdsl.report.text import render
    from budgetdsl.solve.solver import solve

    try:
        plan = load_plan(plan_path, text=text)
    except PlanError as exc:
        assert exc.diagnostics and all(d.message for d in exc.diagnostics)
        for d in exc.diagnostics:
            d.format()
        return "invalid"
    try:
        sol = solve(plan)
    except PlanError as exc:
        assert exc.diagnostics
        return "unsolvable"
    render(sol, "text")
    check_markdown(render(sol, "markdown"))
    try:
        json.loads(render(sol, "json"), parse_constant=_no_constant)
    except ValueError as exc:
        raise NonFinite(str(exc)) from None
    if not sol.feasible:
        try:
            launch_spec(plan, sol)
        except ExportError:
            return "infeasible"
        raise AssertionError("launch_spec accepted an infeasible solution")
    try:
        spec = launch_spec(plan, sol)
    except ExportError:
        return "not-exportable"
    for fmt in FORMATS:
        try:
            out = export(spec, fmt)
        except ExportError:
            continue
        assert isinstance(out, str) and out
        if fmt in ("deepspeed", "hf"):
            try:
                json.loads(out, parse_constant=_no_constant)
            except ValueError as exc:
                raise NonFinite(f"{fmt}: {exc}") from None
    return "exported"


def site_of(exc: BaseException) -> str:
    """file:line of the innermost frame inside budgetdsl (the crash site)."""
    frames = traceback.extract_tb(exc.__traceback__)
    inside = [f for f in frames if "/budgetdsl/" in f.filename and "/tests/" not in f.filename]
    f = (inside or frames or [None])[-1]
    if f is None:
        return type(exc).__name__
    path = f.filename.split("/budgetdsl/", 1)[-1]
    return f"{type(exc).__name__} at budgetdsl/{path}:{f.lineno}"


@dataclass
class Findings:
    mutants: int = 0
    outcomes: Counter = field(default_factory=Counter)
    crashes: Counter = field(default_factory=Counter)  # site -> count
    examples: dict = field(default_factory=dict)  # site -> (seed name, ops, text)
    hangs: int = 0
    non_finite: int = 0
    slowest: float = 0.0
    seconds: float = 0.0

    def merge(self, other: Findings) -> None:
        """Add another run's figures (bench_fuzz runs in chunks): counts add up, the slowest is the
        slowest of both, and each site keeps its first example."""
        self.mutants += other.mutants
        self.outcomes.update(other.outcomes)
        self.crashes.update(other.crashes)
        for site, example in other.examples.items():
            self.examples.setdefault(site, example)
        self.hangs += other.hangs
        self.non_finite += other.non_finite
        self.slowest = max(self.slowest, other.slowest)
        self.seconds += other.seconds

    @property
    def failures(self) -> int:
        return sum(self.crashes.values())

    def summary(self) -> str:
        lines = [f"{self.mutants} mutants in {self.seconds:.1f} s ({self.mutants / max(self.seconds, 1e-9):.0f}/s), "
                 f"slowest {self.slowest * 1000:.0f} ms CPU; outcomes: "
                 + ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items())),
                 f"findings: {self.failures} (hangs {self.hangs}, non-finite JSON {self.non_finite})"]
        for site, n in self.crashes.most_common():
            name, ops, text = self.examples[site]
            lines.append(f"  {n:6d}  {site}   e.g. {name} {'+'.join(ops)}")
        return "\n".join(lines)


def fuzz(n: int, seed: int = 0, bound_s: float = 5.0, deadline_s: float | None = None,
         full_ranges: bool = False) -> Findings:
    """Run n mutants (or until deadline_s seconds have passed) and collect the findings."""
    import warnings

    out = Findings()
    start = time.perf_counter()
    plan_path = PLANS / "fuzzed.yaml"  # never written: the text is given, extends resolve from plans/
    for name, ops, text in Fuzzer(seed, full_ranges).mutants(n):
        if deadline_s is not None and time.perf_counter() - start > deadline_s:
            break
        t0 = time.process_time()
        path = plan_path if "/" not in name else PLANS / name
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with time_bound(bound_s):
                    outcome = run_pipeline(text, path)
            out.outcomes[outcome] += 1
        except Exception as exc:  # noqa: BLE001 - every exception is a finding
            site = "hang" if isinstance(exc, Hang) else site_of(exc)
            out.hangs += isinstance(exc, Hang)
            out.non_finite += isinstance(exc, NonFinite)
            out.crashes[site] += 1
            out.examples.setdefault(site, (name, ops, text))
        out.slowest = max(out.slowest, time.process_time() - t0)  # CPU seconds, as the bound
        out.mutants += 1
    out.seconds = time.perf_counter() - start
    return out


if __name__ == "__main__":  # pragma: no cover - quick look: python tests/budgetdsl/fuzz_mutations.py 2000
    import sys

    print(fuzz(int(sys.argv[1]) if len(sys.argv) > 1 else 1000, int(sys.argv[2]) if len(sys.argv) > 2 else 0).summary())
