"""objectives.pareto (sorted, O(n·|front|)) against its definition: the points no other point
dominates, by brute force over all pairs, on random point sets with exact and near (within the
dominance tolerance) ties."""

import random

from budgetdsl.solve.objectives import dominates, pareto


def test_pareto_equals_the_brute_force_definition():
    rng = random.Random(13)
    for _ in range(3000):
        values = [1.0, 2.0, 3.0, 1.0 + 1e-10, 2.0 - 1e-10]
        points = [tuple(rng.choice(values + [rng.random()]) for _ in range(3)) for _ in range(rng.randint(0, 40))]
        brute = [p for p in points if not any(dominates(q, p) for q in points)]
        assert pareto(points, lambda p: p) == brute, points
