"""Student's t quantile for intervals whose scale is estimated from the data: the noise-scale
estimator's (budgetdsl.calibrate.noise) and the B_noise growth of a run (budgetdsl.track.ramp).
Pure Python: NormalDist from the standard library.
"""

from __future__ import annotations

from statistics import NormalDist


def t_quantile(p: float, dof: float) -> float:
    """Student-t quantile by the Cornish-Fisher expansion in the normal quantile (Abramowitz &
    Stegun 26.7.5); within 0.2% of the exact value for dof >= 3, which is all we use."""
    z = NormalDist().inv_cdf(p)
    v = float(dof)
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * v**4)
    )
