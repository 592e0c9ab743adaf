"""The mutation fuzzer (fuzz_mutations.py) in the suite: a fixed seed, a bounded number of mutants
of the example plans through loader, solver, renderers and every export. Zero uncaught exceptions,
zero mutants past their time bound, zero non-finite JSON. bench/bench_fuzz.py runs the long version.
"""

import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from fuzz_mutations import Fuzzer, fuzz  # noqa: E402

# ~30-60 s of suite time on a CI runner; BUDGETDSL_FUZZ_MUTANTS raises it locally.
MUTANTS = int(os.environ.get("BUDGETDSL_FUZZ_MUTANTS", "1500"))
BOUND_S = 10.0  # per mutant; the slowest takes well under a second


def test_mutants_are_deterministic_and_varied():
    a = [t for _, _, t in Fuzzer(7).mutants(50)]
    assert a == [t for _, _, t in Fuzzer(7).mutants(50)]
    assert len(set(a)) > 45
    ops = {op for _, o, _ in Fuzzer(7).mutants(400) for op in o}
    assert ops >= {"byte_flip", "token_swap", "value_swap", "extreme_number", "yaml_tag", "deep_nesting",
                   "long_string"}


def test_no_mutant_crashes_hangs_or_prints_non_finite_json():
    found = fuzz(MUTANTS, seed=14, bound_s=BOUND_S, deadline_s=120.0)
    print(found.summary())
    assert found.mutants >= min(MUTANTS, 300)
    assert found.failures == 0, found.summary()
    assert found.outcomes["exported"] > 0 and found.outcomes["invalid"] > 0  # both paths exercised
