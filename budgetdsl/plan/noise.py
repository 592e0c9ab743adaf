"""Where B_crit comes from: `noise.b_crit` (declared), `noise.kaplan_loss` (Kaplan et al. 2020's
fit), or `noise.calibration` (a file written by `budgetdsl calibrate`, read at `noise.at_loss`).

Each answer carries a provenance string for reports and a relative uncertainty: `noise.uncertainty`
when declared, else the calibration's own, else none. Calibration problems (missing file, a loss
outside the measured range) are malformed input, raised as a located PlanError pointing at the
key that caused them.

A calibration is measured on a proxy and transferred to the target at equal loss (Kaplan et al.
2020 section 5.1; McCandlish et al. 2018 section 4): `transfer_checks` refuses transfers whose
result means nothing (a training run whose trajectory gave no fit, a B_crit below one sequence of
the target) and warns, located, where it is only doubtful (losses on a different corpus or
tokenizer). The batch-side check (x = B/B_crit far from 1) is the solver's: it knows the batch.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from budgetdsl.plan.diagnostics import Diagnostic, Location, PlanError
from budgetdsl.plan.yaml_source import read_bytes
from budgetdsl.theory.frontier import KAPLAN_ALPHA_B, KAPLAN_B_STAR, X_DOUBTFUL, kaplan_b_crit

if TYPE_CHECKING:
    from budgetdsl.plan.model import Plan


@dataclass(frozen=True, slots=True)
class NoiseEstimate:
    b_crit: float  # tokens
    source: str  # provenance, for people
    uncertainty: float | None  # relative, e.g. 0.3 for ±30 %
    uncertainty_source: str | None
    warnings: tuple[Diagnostic, ...] = ()  # located, severity "warning": doubtful, not meaningless
    notes: tuple[str, ...] = ()  # for the report: e.g. what the calibration's hardware profile shows
    calibration: Any = field(default=None, compare=False)  # the calibration read (its B_noise trajectory)
    calibration_name: str | None = None  # the calibration file's name, for provenance


@dataclass(frozen=True, slots=True)
class ResolvedNoise:
    """A plan's noise source as read when the plan was loaded (`resolve_noise`, called by
    `plan.loader.load_merged`; `LoadedPlan.resolved_noise`): the estimate, or the located error
    reading it gave, and the sections it was read from. `solve` reads this instead of the
    calibration file, so a solve reads no file; a plan changed since (another noise section, model
    or GPU) must be loaded again."""

    noise: Any  # plan.noise
    model: Any  # plan.model (the transfer checks read seq_len and vocab)
    gpu: str | None  # plan.hardware.gpu (the calibration's kernel evidence names it)
    estimate: NoiseEstimate | None
    error: PlanError | None

    def matches(self, plan: Plan) -> bool:
        return plan.noise == self.noise and plan.model == self.model and plan.hardware.gpu == self.gpu


def locate(plan: Plan, path: tuple[str | int, ...]) -> Location:
    """Where `path` was written, for located errors; `<plan NAME>` when the plan has no source."""
    source = getattr(plan, "source", None)  # plan.loader.LoadedPlan
    if source is None:
        return Location(f"<plan {plan.name}>")
    return source.locate(path)


def plan_error(plan: Plan, path: tuple[str | int, ...], code: str, message: str,
               hint: str | None = None) -> PlanError:
    return PlanError([Diagnostic(locate(plan, path), code, message, hint)])


def _located(plan: Plan, path: tuple[str | int, ...], code: str, message: str,
             hint: str | None = None) -> Diagnostic:
    return Diagnostic(locate(plan, path), code, message, hint)


def plan_warning(plan: Plan, path: tuple[str | int, ...], code: str, message: str,
                 hint: str | None = None) -> Diagnostic:
    return Diagnostic(locate(plan, path), code, message, hint, severity="warning")


@functools.lru_cache(maxsize=32)
def _load_calibration(path: str, mtime_ns: int, inside: str | None) -> Any:
    """The calibration at `path` as of `mtime_ns` (a sweep's rows and the TUI's edits reload the
    plan, not the file); `inside`: the directory the opened file must lie in."""
    from budgetdsl.plan.calibration_file import load_calibration

    return load_calibration(path, inside)


def calibration_path(plan: Plan) -> Path:
    """`noise.calibration` resolved against the file that declared it."""
    assert plan.noise.calibration is not None
    raw = Path(plan.noise.calibration)
    if raw.is_absolute():
        return raw
    where = locate(plan, ("noise", "calibration"))
    base = Path(where.file).parent if not where.file.startswith("<") else Path.cwd()
    return base / raw


def read_calibration(plan: Plan, path: Path | None = None) -> Any:
    """The plan's calibration file, read the way the plan was read: from disk (cached by mtime),
    or through the plan's opener (a git revision, for `diff --base`). Located PlanError when it
    is missing or invalid."""
    path = path or calibration_path(plan)
    missing = plan_error(plan, ("noise", "calibration"), "calibration-missing",
                         f"calibration file {str(path)!r} not found",
                         "the path is relative to the plan file that names it; "
                         "write one with `budgetdsl calibrate`")
    source = getattr(plan, "source", None)  # plan.loader.LoadedPlan
    opener = getattr(source, "opener", None)
    plan_file = source.paths.get(source.files[0]) if source is not None and source.files else None
    inside = None  # checked again on the opened file: a link swapped after this check cannot lead out
    if plan_file is not None:  # a calibration stays inside the plan's repository, as bases do
        from budgetdsl.plan.source import ROOT_ENV, confined, find_root
        from budgetdsl.plan.yaml_source import excerpt

        root = find_root(plan_file)
        if not confined(path, root, on_disk=opener is None or opener is read_bytes):
            raise plan_error(plan, ("noise", "calibration"), "calibration-outside",
                             f"calibration {excerpt(str(plan.noise.calibration), 60)} is outside the repository",
                             f"a calibration file must be inside {root} (the git work tree, or ${ROOT_ENV} "
                             "when there is none)")
        inside = os.fspath(root)
    try:
        if opener is None or opener is read_bytes:
            if not path.is_file():
                raise missing
            return _load_calibration(os.fspath(path), path.stat().st_mtime_ns, inside)
        from budgetdsl.plan.calibration_file import parse_calibration

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


def _from_calibration(plan: Plan) -> NoiseEstimate:
    noise = plan.noise
    assert noise.at_loss is not None  # Noise._one_of: a calibration needs at_loss
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
    measured = float(b_crit)
    b_crit, rel, context_warning = context_transfer(plan, cal, measured, rel, path.name)
    if source_name == "sweep":
        sw = cal.sweep
        moved = abs(float(noise.at_loss) - sw.target_loss) > 0.02 * sw.target_loss
        source = (f"calibration {path.name} (sweep: {cal.describe('sweep')})"
                  + (f", carried to loss {noise.at_loss:g} along the B_simple law" if moved else ""))
    else:
        source = (f"calibration {path.name} ({noise.source}) at loss {noise.at_loss:g}"
                  + (" (extrapolated)" if noise.extrapolate else ""))
    if context_warning is not None:
        source += f", × {b_crit / measured:.3g} from its {cal.context}-token context to seq_len {plan.model.seq_len}"
    warnings = transfer_checks(plan, cal, float(b_crit), path, measured)
    if context_warning is not None:
        warnings = (context_warning, *warnings)
    from budgetdsl.hardware.calibration_hardware import kernel_evidence

    evidence = kernel_evidence(plan, cal, path.name)
    notes: tuple[str, ...] = (evidence,) if evidence else ()
    if source_name == "sweep":  # the seeds' scatter behind the pooled fit (several seeds only)
        notes += tuple(f"{path.name}: {line}" for line in cal.sweep.seed_lines())
    if noise.uncertainty is not None:
        return NoiseEstimate(float(b_crit), source, noise.uncertainty, "noise.uncertainty", warnings, notes,
                             cal, path.name)
    return NoiseEstimate(float(b_crit), source, float(rel) if rel else None, "calibration", warnings, notes,
                         cal, path.name)


def context_transfer(plan: Plan, cal: Any, b_crit: float, rel: float | None, name: str
                     ) -> tuple[float, float | None, Diagnostic | None]:
    """B_crit measured at the calibration's context c read for this model's seq_len s:
    (B_crit·(s/c)^γ, the relative uncertainty widened in quadrature by |ln(s/c)|·σ_γ, a located
    warning showing both), budgetdsl.theory.context_scaling. Unchanged, without a warning, at equal
    context or where the file records none (a factory's examples that are not token sequences)."""
    from budgetdsl.quantities.humanize import human
    from budgetdsl.theory.context_scaling import (
        CONTEXT_EVIDENCE,
        CONTEXT_GAMMA,
        CONTEXT_GAMMA_SIGMA,
        context_factor,
        context_widening,
    )

    context = getattr(cal, "context", None)
    seq_len = int(plan.model.seq_len)
    if not context or int(context) == seq_len:
        return b_crit, rel, None
    factor = context_factor(seq_len, context)
    widen = context_widening(seq_len, context)
    widened = math.hypot(rel or 0.0, widen)
    kept = (f"; the declared noise.uncertainty ({float(plan.noise.uncertainty):.0%}) is kept"
            if plan.noise.uncertainty is not None else "")
    warning = plan_warning(
        plan, ("noise", "calibration"), "calibration-context",
        f"calibration {name!r} measured at {context} tokens per example, this model's seq_len is {seq_len}: "
        f"B_crit × ({seq_len}/{context})^γ = × {factor:.3g}, {human('tokens', b_crit)} → "
        f"{human('tokens', b_crit * factor)} (γ = {CONTEXT_GAMMA:.2f} ± {CONTEXT_GAMMA_SIGMA:.2f}, {CONTEXT_EVIDENCE}, "
        f"docs/transfer.md); its uncertainty widened by |ln({seq_len}/{context})| × "
        f"{CONTEXT_GAMMA_SIGMA:.2f} = {widen:.0%}, to ±{widened:.0%}{kept}",
        "calibrate at the model's context where one micro-batch fits: `budgetdsl calibrate --plan PLAN` "
        "runs the proxy at the plan's seq_len")
    return b_crit * factor, widened, warning


# Corpora `budgetdsl calibrate` reads as bytes (calibrate/data.py): the built-in stdlib source and
# any text file or folder. A file without token statistics is judged by these kinds.
BYTE_CORPORA = ("stdlib", "text")


def _byte_level(data: Any) -> str | None:
    """What shows that a calibration's tokens are bytes, or None: its recorded token statistics
    (largest id below 256), whatever the corpus is called; for a file without statistics, a kind
    the reader always reads as bytes."""
    if data is None:
        return None
    stats = getattr(data, "token_stats", None)
    if stats is not None:
        if stats.max_token >= 256:
            return None
        return (f"{stats.tokens:,} tokens counted, ids up to {stats.max_token}, {stats.distinct} distinct, "
                f"unigram entropy {stats.unigram_entropy:.2f} nats")
    return f"{data.kind} data is read as bytes" if data.kind in BYTE_CORPORA else None


def _short(text: str) -> str:
    from budgetdsl.plan.yaml_source import excerpt

    return excerpt(str(text), 60)


def at_batch_warnings(plan: Plan, b_crit: float, source: str) -> tuple[Diagnostic, ...]:
    """A located warning when `target.at_batch` lies more than X_DOUBTFUL times B_crit from it:
    the declared tokens are then divided by 1 + x to give E_min (issue 25: x = 381 cut a declared
    260B-token target 382-fold), so at_batch or B_crit is likelier wrong than the plan meant it."""
    target = getattr(plan, "target", None)
    at_batch, tokens = getattr(target, "at_batch", None), getattr(target, "tokens", None)
    if at_batch is None or tokens is None or not b_crit > 0:
        return ()
    x = float(at_batch) / b_crit
    if 1.0 / X_DOUBTFUL <= x <= X_DOUBTFUL:
        return ()
    from budgetdsl.quantities.humanize import human

    e_min = float(tokens) / (1.0 + x)
    return (plan_warning(
        plan, ("target", "at_batch"), "at-batch-far-from-b-crit",
        f"target.at_batch is x = {x:.3g} × B_crit (B_crit {human('tokens', b_crit)}, {source}): on the "
        f"frontier the declared {human('tokens', float(tokens))} at that batch are E_min = tokens/(1 + x) = "
        f"{human('tokens', e_min)}, {1 + x:.3g}× fewer, far outside x in [1/{X_DOUBTFUL:g}, {X_DOUBTFUL:g}]",
        "check at_batch (tokens, not sequences) and where B_crit comes from (a calibration on another "
        "corpus or tokenizer transfers badly)"),)


def transfer_checks(plan: Plan, cal: Any, b_crit: float, path: Path,
                    measured: float | None = None) -> tuple[Diagnostic, ...]:
    """Whether the calibration's B_crit means anything for this plan's model. Raises a located
    PlanError where it does not; returns located warnings where it is doubtful.

    Errors:
    - a training run (EMA over a moving trajectory) whose fit failed: the last smoothed B_simple
      belongs to no loss in particular, and B_crit(L) is unknown (issue 15: a `--quick` file gave
      B_crit = 101 tokens to a 13B plan). A fixed-weights calibration (`--lr 0`, EMA beta 1) has
      no fit by design and is read at its one loss (CalibrationFile._point_estimate).
    - B_crit below one sequence of the target: every launchable batch is then at least
      seq_len / B_crit times B_crit, and a B_noise of a fraction of a sequence says the proxy's
      per-token losses are not the target's (B_noise at equal loss transfers only on the same
      data and tokenizer, Kaplan et al. 2020 section 5.1).
    - a fit whose slope is not told from zero (`fit.slope_z` at most the interval's z): the law
      B*/L^(1/α) then carries nothing from one loss to another (issue 25: a run at lr 0 fitted
      α = 0.89 ± 0.62 over losses 0.573-0.694 and was read elsewhere).
    Warnings:
    - the calibration's tokens are bytes — judged from its recorded token statistics (largest id
      below 256), not from the corpus's name, so the stdlib source passed as a folder is caught —
      unless the plan is of the proxy itself (its sequence length and vocabulary) or byte-level;
      or a vocabulary other than the plan's model.vocab: the loss scale differs, so `at_loss`
      reads a different point of the curve.
    Files that do not carry a field (a stub, an older writer) skip the check that needs it.
    `b_crit` is the value for this model (`context_transfer` applied); `measured`, when it differs,
    the calibration's own.
    """
    noise = plan.noise
    name = path.name
    assert noise.at_loss is not None  # Noise._one_of: a calibration needs at_loss
    prov = getattr(cal, "provenance", None)
    trained = prov is not None and float(prov.estimator.ema_beta) < 1.0
    errors: list[Diagnostic] = []
    if str(noise.source) == "b_simple" and trained and getattr(cal, "fit", "absent") is None:
        errors.append(_located(
            plan, ("noise", "calibration"), "calibration-no-fit",
            f"calibration {name!r} has no fit of B_crit(L) "
            f"({getattr(cal, 'fit_error', None) or 'no usable trajectory'}): the B_simple of a training "
            "run without a fit belongs to no particular loss and cannot be transferred",
            "calibrate for longer (more --steps, not --quick) until the fit has at least 3 points, "
            "or declare noise.b_crit"))
    fit = getattr(cal, "fit", None)
    slope_z = getattr(fit, "slope_z", None)
    conf = float(getattr(getattr(prov, "estimator", None), "confidence", 0.95))
    if str(noise.source) == "b_simple" and fit is not None and slope_z is not None and not slope_z > _z(conf):
        errors.append(_located(
            plan, ("noise", "calibration"), "calibration-flat-fit",
            f"calibration {name!r}'s fit of B_crit(L) has a slope {slope_z:.2g} standard errors from 0 "
            f"(over losses {fit.loss_min:.4g}-{fit.loss_max:.4g}): B_simple does not measurably change "
            "with the loss there, so its law read at another loss rests on no evidence",
            "calibrate until the loss falls further (more --steps, or a larger --lr) and B_simple "
            "visibly grows; or measure at fixed weights (`budgetdsl calibrate --lr 0`) and read the "
            "file at its one loss"))
    seq_len = int(plan.model.seq_len)
    if b_crit < seq_len:
        errors.append(_located(
            plan, ("noise",), "b-crit-below-sequence",
            f"B_crit from calibration {name!r} at loss {float(noise.at_loss):g} is {b_crit:.3g} tokens"
            + (f" ({measured:.3g} measured at its {cal.context}-token context)"
               if measured is not None and measured != b_crit else "")
            + f", less than one sequence of this model ({seq_len} tokens): the calibration's losses do "
            "not describe this model's training",
            "calibrate on the target's own data and tokenizer (budgetdsl.calibrate.gns, gns_hf or gns_lightning "
            "records B_simple inside an existing training loop), and read it at a loss the target "
            "reaches; or declare noise.b_crit"))
    if errors:
        raise PlanError(errors)
    warnings: list[Diagnostic] = []
    # A partial file (Ctrl-C, a failed measurement) is read, loudly: what it measured is valid.
    if getattr(cal, "interrupted", False) or getattr(getattr(cal, "sweep", None), "interrupted", False):
        from budgetdsl.plan.yaml_source import excerpt

        warnings.append(plan_warning(
            plan, ("noise", "calibration"), "calibration-interrupted",
            f"calibration {name!r} is a partial file: its run was interrupted "
            f"({excerpt(getattr(cal, 'stop_reason', None) or 'no reason recorded', 80)}), so B_crit rests on "
            "fewer measured steps than the run asked for",
            "finish it with `budgetdsl calibrate ... --resume` (the same command and --out)"))
    data = getattr(prov, "data", None)
    vocab = getattr(plan.model, "vocab", None)
    cal_vocab = getattr(data, "vocab_size", None)
    tokens = getattr(getattr(prov, "batch", None), "tokens_per_example", None)
    # A plan of the proxy itself (its sequence length, its vocabulary or none given) trains on the
    # proxy's own token stream, as plans/ramp-gpt-micro-proxy.yaml does: nothing is transferred.
    the_proxy = tokens == seq_len and (vocab is None or vocab == cal_vocab)
    byte_level = _byte_level(data)
    if data is not None and byte_level is not None and not the_proxy and (vocab is None or int(vocab) != 256):
        warnings.append(plan_warning(
            plan, ("noise", "calibration"), "calibration-corpus",
            f"calibration {name!r} measured byte-level tokens ({byte_level}; recorded as "
            f"{data.kind} data from {_short(data.source)}): losses in nats per byte are not comparable "
            f"with a loss on the target's corpus and tokenizer, so at_loss {float(noise.at_loss):g} "
            "reads B_crit at a point of a different curve",
            "calibrate on the target's data (`budgetdsl calibrate --data FILE`, or record B_simple "
            "in your own training with budgetdsl.calibrate.gns, gns_hf or gns_lightning)"))
    if vocab is not None and cal_vocab is not None and int(vocab) != int(cal_vocab):
        warnings.append(plan_warning(
            plan, ("noise", "at_loss"), "calibration-tokenizer",
            f"calibration {name!r} measured losses over a vocabulary of {cal_vocab}, this model's is "
            f"{int(vocab)}: nats per token of different tokenizers are not the same loss",
            "read at_loss on the calibration's own loss scale, or calibrate with the target's tokenizer"))
    return tuple(warnings)


def _z(confidence: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def noise_estimate(plan: Plan) -> NoiseEstimate:
    """B_crit in tokens and where it came from: a declared b_crit or kaplan_loss is arithmetic; a
    calibration is the estimate read when the plan was loaded (`LoadedPlan.resolved_noise`; a
    located PlanError when reading it failed). Reads no file: a calibrated plan built in memory, or
    changed since it was loaded, is a ValueError (load it: `plan.loader.load_merged`)."""
    if plan.noise.calibration is None:  # b_crit or kaplan_loss: arithmetic, nothing was read
        return _estimate(plan)
    res = getattr(plan, "resolved_noise", None)
    if res is None or not res.matches(plan):
        raise ValueError("noise.calibration is read when the plan is loaded (plan.loader.load_merged), "
                         "and this plan was built or changed without it: load it again")
    if res.error is not None:
        raise res.error
    assert res.estimate is not None
    return res.estimate


def resolve_noise(plan: Plan) -> ResolvedNoise:
    """Read the plan's noise source once (the calibration file, if any), keeping a located error
    for when the plan is solved: loading a plan does not fail on its calibration (`budgetdsl
    check` reports it, `solve` raises it)."""
    try:
        estimate, error = _estimate(plan), None
    except PlanError as exc:
        estimate, error = None, exc
    return ResolvedNoise(plan.noise, plan.model, plan.hardware.gpu, estimate, error)


def _estimate(plan: Plan) -> NoiseEstimate:
    """The estimate of `_source_estimate`, with the check of target.at_batch against its B_crit."""
    import dataclasses

    est = _source_estimate(plan)
    extra = at_batch_warnings(plan, est.b_crit, est.source)
    return dataclasses.replace(est, warnings=est.warnings + extra) if extra else est


def _source_estimate(plan: Plan) -> NoiseEstimate:
    noise = plan.noise
    declared_u = (noise.uncertainty, "noise.uncertainty") if noise.uncertainty is not None else (None, None)
    if noise.b_crit is not None:
        return NoiseEstimate(float(noise.b_crit), "declared (noise.b_crit)", *declared_u)
    if noise.kaplan_loss is not None:
        b = kaplan_b_crit(noise.kaplan_loss)
        return NoiseEstimate(b, f"Kaplan et al. 2020: {KAPLAN_B_STAR:.0e} / L^(1/{KAPLAN_ALPHA_B}) "
                             f"at L = {noise.kaplan_loss:g} nats", *declared_u)
    return _from_calibration(plan)
