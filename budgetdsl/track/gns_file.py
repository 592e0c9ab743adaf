"""B_noise measured during the run: the calibration file budgetdsl.calibrate.gns (and its adapters
gns_hf, gns_lightning) write, read with the plan layer's own loader and checks.

Each trajectory point gives a step, the tokens consumed and B_simple in tokens with its interval
(McCandlish et al. 2018 appendix A); the file has no wall times, so it only adds B_noise to the
records of the log that has them.
"""

from __future__ import annotations

from collections.abc import Iterator

from budgetdsl.plan.calibration_file import CalibrationFileError, load_calibration
from budgetdsl.track.record import LogError, Record


def looks_like(head: bytes) -> bool:
    return head.lstrip().startswith(b"{") and b'"trajectory"' in head and b'"provenance"' in head


def read(path: str) -> Iterator[Record]:
    try:
        cal = load_calibration(path)
    except CalibrationFileError as exc:
        raise LogError(path, "", f"not a readable gns calibration file: {str(exc).splitlines()[0]}") from None
    per_example = cal.provenance.batch.tokens_per_example
    for index, point in enumerate(cal.trajectory):
        if point.b_simple_tokens is None:
            continue
        yield Record(step=point.step, where=f"trajectory[{index}]", tokens=float(point.tokens),
                     loss=point.loss_smoothed, b_noise=point.b_simple_tokens,
                     b_noise_low=point.ci_low * per_example if point.ci_low is not None else None,
                     b_noise_high=point.ci_high * per_example if point.ci_high is not None else None)
