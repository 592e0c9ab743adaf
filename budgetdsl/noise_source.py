"""Where B_crit comes from: `noise.b_crit` (declared), `noise.kaplan_loss` (Kaplan et al. 2020's
fit), or `noise.calibration` (a file written by `budgetdsl calibrate`, read at `noise.at_loss`).

Each answer carries a provenance string for reports and a relative uncertainty: `noise.uncertainty`
when declared, else the calibration's own, else none. Calibration problems (missing file, a loss
outside the measured range) are malformed input, raised as a located PlanError pointing at the
key that caused them.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from budgetdsl.diagnostics import Diagnostic, Location, PlanError
from budgetdsl.frontier import KAPLAN_ALPHA_B, KAPLAN_B_STAR, kaplan_b_crit
from budgetdsl.yaml_source import read_bytes

if TYPE_CHECKING:
    from budgetdsl.plan_model import Plan


@dataclass(frozen=True, slots=True)
class NoiseEstimate:
    b_crit: float  # tokens
    source: str  # provenance, for people
    uncertainty: float | None  # relative, e.g. 0.3 for ±30 %
    uncertainty_source: str | None


def locate(plan: "Plan", path: tuple[str | int, ...]) -> Location:
    """Where `path` was written, for located errors; `<plan NAME>` when the plan has no source."""
    source = getattr(plan, "_source", None)
    if source is None:
        return Location(f"<plan {plan.name}>")
    return source.locate(path)


def plan_error(plan: "Plan", path: tuple[str | int, ...], code: str, message: str,
               hint: str | None = None) -> PlanError:
    return PlanError([Diagnostic(locate(plan, path), code, message, hint)])


@functools.lru_cache(maxsize=32)
def _load_calibration(path: str, mtime_ns: int) -> Any:
    from budgetdsl.calibration_file import load_calibration  # issue 4; imported only when used

    return load_calibration(path)


def calibration_path(plan: "Plan") -> Path:
    """`noise.calibration` resolved against the file that declared it."""
    assert plan.noise.calibration is not None
    raw = Path(plan.noise.calibration)
    if raw.is_absolute():
        return raw
    where = locate(plan, ("noise", "calibration"))
    base = Path(where.file).parent if not where.file.startswith("<") else Path.cwd()
    return base / raw


def read_calibration(plan: "Plan", path: Path | None = None) -> Any:
    """The plan's calibration file, read the way the plan was read: from disk (cached by mtime),
    or through the plan's opener (a git revision, for `diff --base`). Located PlanError when it
    is missing or invalid."""
    path = path or calibration_path(plan)
    missing = plan_error(plan, ("noise", "calibration"), "calibration-missing",
                         f"calibration file {str(path)!r} not found",
                         "the path is relative to the plan file that names it; "
                         "write one with `budgetdsl calibrate`")
    source = getattr(plan, "_source", None)
    opener = getattr(source, "opener", None)
    try:
        if opener is None or opener is read_bytes:
            if not path.is_file():
                raise missing
            return _load_calibration(os.fspath(path), path.stat().st_mtime_ns)
        from budgetdsl.calibration_file import parse_calibration

        try:
            raw = opener(os.fspath(path))
        except FileNotFoundError:
            raise missing from None
        return parse_calibration(raw.decode("utf-8"), path)
    except PlanError:
        raise
    except (ValueError, OSError) as exc:
        raise plan_error(plan, ("noise", "calibration"), "calibration-invalid",
                         f"cannot read calibration {str(path)!r}: {exc}") from None


def _from_calibration(plan: "Plan") -> NoiseEstimate:
    noise = plan.noise
    path = calibration_path(plan)
    cal = read_calibration(plan, path)
    source_name = str(noise.source)
    if source_name == "sweep" and getattr(cal, "sweep", None) is None:
        raise plan_error(plan, ("noise", "source"), "calibration-source",
                         f"calibration {str(path)!r} has no frontier sweep",
                         "measure one with `budgetdsl calibrate sweep`, or use source: b_simple")
    try:
        kwargs: dict[str, Any] = {"extrapolate": noise.extrapolate}
        if source_name != "b_simple":  # readers of schema 1 without a sweep take no `source`
            kwargs["source"] = source_name
        b_crit, rel = cal.b_crit_tokens_at(float(noise.at_loss), **kwargs)
    except ValueError as exc:
        raise plan_error(plan, ("noise", "at_loss"), "calibration-range", str(exc),
                         None if noise.extrapolate else "set noise.extrapolate: true to read "
                         "B_crit outside the calibrated range, at your own risk") from None
    if source_name == "sweep":
        sw = cal.sweep
        moved = abs(float(noise.at_loss) - sw.target_loss) > 0.02 * sw.target_loss
        source = (f"calibration {path.name} (sweep: {cal.describe('sweep')})"
                  + (f", carried to loss {noise.at_loss:g} along the B_simple law" if moved else ""))
    else:
        source = (f"calibration {path.name} ({noise.source}) at loss {noise.at_loss:g}"
                  + (" (extrapolated)" if noise.extrapolate else ""))
    if noise.uncertainty is not None:
        return NoiseEstimate(float(b_crit), source, noise.uncertainty, "noise.uncertainty")
    return NoiseEstimate(float(b_crit), source, float(rel) if rel else None, "calibration")


def noise_estimate(plan: "Plan") -> NoiseEstimate:
    """B_crit in tokens and where it came from."""
    noise = plan.noise
    declared_u = (noise.uncertainty, "noise.uncertainty") if noise.uncertainty is not None else (None, None)
    if noise.b_crit is not None:
        return NoiseEstimate(float(noise.b_crit), "declared (noise.b_crit)", *declared_u)
    if noise.kaplan_loss is not None:
        b = kaplan_b_crit(noise.kaplan_loss)
        return NoiseEstimate(b, f"Kaplan et al. 2020: {KAPLAN_B_STAR:.0e} / L^(1/{KAPLAN_ALPHA_B}) "
                             f"at L = {noise.kaplan_loss:g} nats", *declared_u)
    return _from_calibration(plan)
