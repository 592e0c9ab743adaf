"""The frontier (McCandlish et al. 2018) and the closed forms sympy derives for the solver."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budgetdsl.plan.model import Target
from budgetdsl.solve.placement import quadratic_interval
from budgetdsl.theory import closed_forms
from budgetdsl.theory import closed_forms_generated as cf
from budgetdsl.theory.frontier import Frontier, e_min_of, kaplan_b_crit

pos = st.floats(1e-3, 1e3)


@pytest.mark.parametrize("x, s_ratio, e_ratio", [(1 / 8, 9.0, 1.125), (1.0, 2.0, 2.0), (8.0, 1.125, 9.0)])
def test_seed_table(x, s_ratio, e_ratio):
    """docs/design.md section 1: x = 1/8 costs 9× the steps and 1.125× the data, and so on."""
    fr = Frontier(b_crit=3e6, e_min=8e11)
    b = x * fr.b_crit
    assert fr.s_over_smin(b) == pytest.approx(s_ratio, rel=1e-9, abs=0)
    assert fr.e_over_emin(b) == pytest.approx(e_ratio, rel=1e-9, abs=0)
    assert fr.steps(b) / fr.s_min == pytest.approx(s_ratio, rel=1e-9, abs=0)
    assert fr.examples(b) / fr.e_min == pytest.approx(e_ratio, rel=1e-9, abs=0)
    # x = 1 minimizes the product 2 + x + 1/x
    assert fr.s_over_smin(b) * fr.e_over_emin(b) == pytest.approx(2 + x + 1 / x, rel=1e-12)


@given(b_crit=st.floats(1e3, 1e9), e_min=st.floats(1e6, 1e14), x=st.floats(1e-4, 1e4))
def test_hyperbola_and_definitions(b_crit, e_min, x):
    fr = Frontier(b_crit=b_crit, e_min=e_min)
    b = x * b_crit
    assert (fr.steps(b) / fr.s_min - 1) * (fr.examples(b) / fr.e_min - 1) == pytest.approx(1.0, rel=1e-9)
    assert fr.steps(b) * b == pytest.approx(fr.examples(b), rel=1e-12)  # E = B·S
    assert fr.e_min / fr.s_min == pytest.approx(b_crit, rel=1e-12)  # B_crit = E_min / S_min


def test_e_min_from_target_lies_on_the_frontier():
    t = Target(tokens=2e12, at_batch=4e6)
    e_min = e_min_of(t, 3e6)
    assert Frontier(3e6, e_min).examples(4e6) == pytest.approx(2e12, rel=1e-12)
    assert e_min == pytest.approx(2e12 / (1 + 4 / 3), rel=1e-12)
    assert e_min_of(Target(min_tokens=5e11), 3e6) == 5e11


def test_kaplan_fit():
    # Kaplan et al. 2020 eq. 1.4: B_crit(L) = 2e8 / L^(1/0.21); at L = 1 it is B* itself.
    assert kaplan_b_crit(1.0) == pytest.approx(2e8)
    assert kaplan_b_crit(2.0) == pytest.approx(2e8 / 2 ** (1 / 0.21), rel=1e-12)
    # 3^(1/0.21) = e^(4.762·ln 3) ≈ 187, so B_crit(3 nats) ≈ 1.07M tokens; it falls as L^-4.76
    assert 1e6 < kaplan_b_crit(3.0) < 2e6
    assert kaplan_b_crit(1.5) > kaplan_b_crit(2.0)


# -- the closed forms -------------------------------------------------------------------------------

def test_generated_module_is_fresh():
    """The committed emission equals a fresh sympy derivation (`python -m budgetdsl.theory.closed_forms`)."""
    assert closed_forms.GENERATED.read_text(encoding="utf-8") == closed_forms.render_module()


def _wall(b, b_crit, e_min, f, rate, c):
    return (e_min / b_crit) * (1 + b_crit / b) * (f * b / rate + c)


def _scan(lo, hi, n=20001):
    return [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]


@settings(max_examples=60, deadline=None)
@given(b_crit=st.floats(1e5, 1e8), e_min=st.floats(1e9, 1e13), f=st.floats(1e9, 1e12),
       rate=st.floats(1e15, 1e18), c=st.floats(1e-3, 5.0), slack=st.floats(1.01, 20.0))
def test_closed_forms_agree_with_a_brute_force_scan(b_crit, e_min, f, rate, c, slack):
    grid = _scan(b_crit * 1e-4, b_crit * 1e4)
    walls = [_wall(b, b_crit, e_min, f, rate, c) for b in grid]
    # minimum-time batch: the scan's minimum lies within one grid step of sqrt(c·B_crit·rate/f)
    b_star = cf.min_time_batch(b_crit, f, rate, c)
    i = min(range(len(grid)), key=walls.__getitem__)
    if 0 < i < len(grid) - 1:
        assert grid[i - 1] <= b_star <= grid[i + 1]
    # deadline roots: W(B) ≤ w_max exactly on the interval between them
    w_max = _wall(b_star, b_crit, e_min, f, rate, c) * slack
    lo, hi = quadratic_interval(*cf.time_quadratic(b_crit, e_min, f, rate, c, w_max))
    inside = [b for b, w in zip(grid, walls) if w <= w_max]
    if inside and grid[0] < inside[0] and inside[-1] < grid[-1]:
        step = grid[1] / grid[0]
        assert lo / step <= inside[0] <= lo * step and hi / step <= inside[-1] <= hi * step
    assert _wall(lo, b_crit, e_min, f, rate, c) == pytest.approx(w_max, rel=1e-7)
    assert _wall(hi, b_crit, e_min, f, rate, c) == pytest.approx(w_max, rel=1e-7)
    # sympy's own roots (the emitted formula) agree with the cancellation-free evaluation
    r_lo, r_hi = cf.time_roots(b_crit, e_min, f, rate, c, w_max)
    # (the textbook formula cancels for the small root: its error is bounded by ~eps x the large root)
    assert abs(r_lo - lo) <= 1e-12 * hi and r_hi == pytest.approx(hi, rel=1e-9)
    # the FLOP bound: f·E(B) = flops exactly at the bound, linear
    flops = f * e_min * slack * 2
    ub = cf.flops_upper_bound(b_crit, e_min, f, flops)
    assert f * Frontier(b_crit, e_min).examples(ub) == pytest.approx(flops, rel=1e-12)
    # balanced point: the scan's minimum of (S/S_min)(E/E_min) sits at B_crit
    prod = [(1 + b_crit / b) * (1 + b / b_crit) for b in grid]
    j = min(range(len(grid)), key=prod.__getitem__)
    assert grid[j - 1] <= cf.balanced_batch(b_crit) <= grid[j + 1]


def test_no_fixed_time_makes_the_deadline_linear():
    # c = 0: W(B) = S_min·f·(B + B_crit)/rate, increasing; the bound is B ≤ D·rate/(S_min·f) − B_crit
    b_crit, e_min, f, rate, d = 3e6, 8e11, 4.7e10, 1.3e17, 1.8e6
    lo, hi = quadratic_interval(*cf.time_quadratic(b_crit, e_min, f, rate, 0.0, d))
    assert lo == 0.0
    assert hi == pytest.approx(d * rate / (e_min / b_crit * f) - b_crit, rel=1e-12)
    assert cf.min_time_batch(b_crit, f, rate, 0.0) == 0.0


def test_an_impossible_deadline_is_empty():
    b_crit, e_min, f, rate, c = 3e6, 8e11, 4.7e10, 1.3e17, 0.5
    fastest = _wall(cf.min_time_batch(b_crit, f, rate, c), b_crit, e_min, f, rate, c)
    assert quadratic_interval(*cf.time_quadratic(b_crit, e_min, f, rate, c, fastest * 0.999)) is None
    assert quadratic_interval(*cf.time_quadratic(b_crit, e_min, f, rate, c, fastest * 1.001)) is not None
    assert math.isclose(cf.e_min_from_target(2e12, 4e6, 3e6), 2e12 / (1 + 4 / 3))
