"""The solver's closed forms, derived once with sympy and emitted as plain Python.

docs/design.md section 3: the frontier and the constraints are sympy expressions in the global batch B
(tokens); sympy derives the boundaries once, so one solve costs microseconds and never calls the
CAS. The derivation lives here (`derive()`); its result is printed into the committed module
`budgetdsl/theory/closed_forms_generated.py` (`python -m budgetdsl.theory.closed_forms` rewrites it), which the
solver imports. A test re-derives the module with sympy and fails when the committed copy is stale.

Why emitted rather than lambdified at run time: importing sympy costs ~0.35 s and the derivation
plus `lambdify` ~0.5 s more on the development machines, which alone would spend the cold-start
budget of `budgetdsl plan` (≤ 1 s). `lambdified()` keeps the run-time path available (cached per
process) and the tests check that both agree.

Symbols (all positive):
    B      global batch, tokens           b_crit  B_crit, tokens
    e_min  E_min, tokens                  f       training FLOPs per token
    rate   G·P·u, achieved FLOP/s          c       T_comm + T_fixed, seconds per step
    flops  FLOP budget                     w_max   a wall-clock limit, seconds

The frontier (McCandlish et al. 2018, "An Empirical Model of Large-Batch Training", eq. 2.11 and
2.12):  S(B) = S_min (1 + B_crit/B),  E(B) = E_min (1 + B/B_crit),  S_min = E_min / B_crit.
Step time (docs/design.md section 2):  T(B) = f·B/rate + c.  Wall clock W(B) = S(B)·T(B).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

GENERATED = Path(__file__).with_name("closed_forms_generated.py")

# name -> (argument names, docstring); the order of arguments is the emitted signature.
SIGNATURES: dict[str, tuple[tuple[str, ...], str]] = {
    "flops_upper_bound": (("b_crit", "e_min", "f", "flops"),
                          "Largest B with f·E(B) ≤ flops (the FLOP budget bound is linear in B)."),
    "time_quadratic": (("b_crit", "e_min", "f", "rate", "c", "w_max"),
                       "Coefficients (a2, a1, a0) of B·(W(B) − w_max): W(B) ≤ w_max ⇔ a2·B² + a1·B + a0 ≤ 0."),
    "time_roots": (("b_crit", "e_min", "f", "rate", "c", "w_max"),
                   "The two roots of the wall-clock quadratic, as sympy solves them (lower, upper)."),
    "min_time_batch": (("b_crit", "f", "rate", "c"),
                       "B minimizing W(B) = S(B)·T(B): sqrt(c·B_crit·rate/f)."),
    "balanced_batch": (("b_crit",),
                       "B minimizing (S/S_min)(E/E_min) = 2 + x + 1/x: B = B_crit."),
    "e_min_from_target": (("tokens", "at_batch", "b_crit"),
                          "E_min from the tokens that reach the target at a batch: tokens/(1 + at_batch/B_crit)."),
    "kaplan_b_crit": (("loss", "b_star", "alpha_b"),
                      "Kaplan et al. (2020) eq. 1.4 / 5.3: B_crit(L) = B*/L^(1/alpha_B)."),
}


@functools.cache
def derive() -> dict[str, Any]:
    """Every closed form as a sympy expression (or tuple of them); sympy is imported here only."""
    import sympy as sp

    B, b_crit, e_min, f, rate, c, flops, w_max = sp.symbols(
        "B b_crit e_min f rate c flops w_max", positive=True)
    tokens, at_batch, loss, b_star, alpha_b = sp.symbols("tokens at_batch loss b_star alpha_b", positive=True)

    s_min = e_min / b_crit
    steps = s_min * (1 + b_crit / B)  # S(B)
    examples = e_min * (1 + B / b_crit)  # E(B)
    step_time = f * B / rate + c  # T(B)
    wall = steps * step_time  # W(B)

    # FLOP budget: f·E(B) = flops is linear in B, one root.
    (flops_bound,) = sp.solve(sp.Eq(f * examples, flops), B)

    # Wall clock: B·(W(B) − w_max) is a quadratic in B with a positive leading coefficient, so
    # W(B) ≤ w_max holds between its two roots.
    poly = sp.Poly(sp.expand(B * (wall - w_max)), B)
    a2, a1, a0 = (sp.simplify(k) for k in poly.all_coeffs())
    disc = a1**2 - 4 * a2 * a0
    roots = ((-a1 - sp.sqrt(disc)) / (2 * a2), (-a1 + sp.sqrt(disc)) / (2 * a2))
    assert sp.simplify(poly.as_expr().subs(B, roots[0])) == 0  # noqa: S101 - a derivation check
    # Minimum of W: dW/dB = 0 has one positive root.
    critical = [r for r in sp.solve(sp.diff(wall, B), B) if r.is_positive]
    assert len(critical) == 1  # noqa: S101
    # Balanced point: minimum of (S/S_min)(E/E_min).
    product = sp.simplify((steps / s_min) * (examples / e_min))
    balanced = [r for r in sp.solve(sp.diff(product, B), B) if r.is_positive]
    assert len(balanced) == 1  # noqa: S101
    # E_min from `target.tokens` reached at `target.at_batch`: tokens = E(at_batch).
    (e_min_target,) = sp.solve(sp.Eq(examples.subs(B, at_batch), tokens), e_min)
    return {
        "flops_upper_bound": flops_bound,
        "time_quadratic": (a2, a1, a0),
        "time_roots": roots,
        "min_time_batch": critical[0],
        "balanced_batch": balanced[0],
        "e_min_from_target": e_min_target,
        "kaplan_b_crit": b_star / loss ** (1 / alpha_b),
        "_symbols": {s.name: s for s in (B, b_crit, e_min, f, rate, c, flops, w_max, tokens, at_batch,
                                        loss, b_star, alpha_b)},
    }


def render_module() -> str:
    """The source of `closed_forms_generated.py`, from `derive()` (deterministic text)."""
    import sympy as sp
    from sympy.printing.pycode import pycode

    forms = derive()
    lines = [
        '"""GENERATED by `python -m budgetdsl.theory.closed_forms` from the sympy derivation in',
        "budgetdsl/theory/closed_forms.py. Do not edit: a test re-derives this file and fails when it is stale.",
        '"""',
        "",
        "import math",
        "",
    ]
    for name, (args, doc) in SIGNATURES.items():
        expr = forms[name]
        exprs = expr if isinstance(expr, tuple) else (expr,)
        body = ", ".join(pycode(sp.simplify(e) if name != "time_roots" else e, fully_qualified_modules=True)
                         for e in exprs)
        lines += ["", f"def {name}({', '.join(args)}):", f'    """{doc}"""', f"    return {body}", ""]
    return "\n".join(lines).rstrip() + "\n"


@functools.cache
def lambdified() -> dict[str, Callable[..., Any]]:
    """The same closed forms through `sympy.lambdify`, compiled once per process."""
    import sympy as sp

    forms = derive()
    symbols = forms["_symbols"]
    out: dict[str, Callable[..., Any]] = {}
    for name, (args, _doc) in SIGNATURES.items():
        expr = forms[name]
        out[name] = sp.lambdify([symbols[a] for a in args], list(expr) if isinstance(expr, tuple) else expr,
                                modules="math")
    return out


def main(argv: list[str] | None = None) -> int:
    """Rewrite the generated module (`--check`: exit 1 when the committed copy is stale)."""
    from budgetdsl.io.exit_codes import ExitCode

    argv = sys.argv[1:] if argv is None else argv
    text = render_module()
    if "--check" in argv:
        stale = not GENERATED.exists() or GENERATED.read_text(encoding="utf-8") != text
        print(f"{GENERATED.name}: {'stale' if stale else 'up to date'}")
        return ExitCode.NO if stale else ExitCode.OK
    GENERATED.write_text(text, encoding="utf-8")
    print(f"wrote {GENERATED}")
    return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
