"""The solver: placement on the frontier, the layout search, objectives, infeasibility, ramps, sweeps."""
