"""objectives.pareto (sorted, O(n·|front|)) against its definition: the points no other point
dominates, by brute force over all pairs, on random point sets with exact and near (within the
dominance tolerance) ties."""

import random

import pytest

from budgetdsl.solve.objectives import dominates, pareto


def test_pareto_equals_the_brute_force_definition():
    rng = random.Random(13)
    for _ in range(3000):
        values = [1.0, 2.0, 3.0, 1.0 + 1e-10, 2.0 - 1e-10]
        points = [tuple(rng.choice(values + [rng.random()]) for _ in range(3)) for _ in range(rng.randint(0, 40))]
        brute = [p for p in points if not any(dominates(q, p) for q in points)]
        assert pareto(points, lambda p: p) == brute, points


@pytest.mark.parametrize("x", [3.7e-4, 0.5, 1.0, 42.0, 8.64e4, 2.5e11, 6.02e23])
def test_measures_tie_at_twelve_significant_digits(x):
    """Objectives compare a measure at 12 significant digits (`objectives.rounded`), at any
    magnitude: float noise in the 14th digit ties (the next measure decides), a difference in
    the 10th does not."""
    from budgetdsl.solve.objectives import rounded

    assert rounded(x * (1 + 1e-14)) == rounded(x) == rounded(x * (1 - 1e-14))
    assert rounded(x * (1 + 1e-10)) != rounded(x) != rounded(x * (1 - 1e-10))
    assert rounded(x) == pytest.approx(x, rel=1e-12)
