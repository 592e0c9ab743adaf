"""The wording and the numbers a reviewer reads beside the answer: why the GPU count was chosen,
the notes on where the objective's batch landed, the located warning when the batch is far from
B_crit, the throughput breakdown and the assumptions (each coefficient with its origin). No
decision is made here: everything is read off the chosen placement.
"""

from __future__ import annotations

from budgetdsl.cost.cost_model import CostModel
from budgetdsl.solve.context import Context
from budgetdsl.solve.infeasibility import conflicting_names
from budgetdsl.solve.objectives import MEASURE
from budgetdsl.solve.placement import Config, Placement
from budgetdsl.solve.solution import Coefficient, PlanWarning, Status, Throughput
from budgetdsl.theory.frontier import X_DOUBTFUL


def gpu_choice_reason(ctx: Context, chosen: Placement, placements: list[Placement]) -> str:
    measure = MEASURE[ctx.objective]
    feasible = [p for p in placements if p.feasible]
    g = chosen.cm.gpus
    smaller_bad = [p for p in placements if p.cm.gpus < g and not p.feasible]
    why = f"{g} GPUs give the best {measure} of the {len(feasible)} feasible counts"
    if smaller_bad:
        names = sorted({n for p in smaller_bad for n in conflicting_names(p)})
        why += f"; fewer GPUs miss the {', '.join(names)} limit" + ("s" if len(names) > 1 else "")
    larger = [p for p in feasible if p.cm.gpus > g]
    if larger:
        if ctx.objective in ("min_time",):
            why += "; more GPUs are slower (the all-reduce and the batch floor grow)"
        elif ctx.objective in ("min_cost", "min_flops", "balanced"):
            why += "; more GPUs cost more or gain nothing" if ctx.objective == "min_cost" else \
                "; more GPUs do not improve it, so the fewest are chosen"
    return why


# What `throughput` and `assumptions` build at a configuration is a pure function of the (cached,
# frozen) cost model and the configuration's numbers: kept in the cost model's `_shown`, a few per
# cost model (a warm re-solve launches the same configuration; a sweep's rows many).
_SHOWN_AT_MOST = 64


def throughput(cm: CostModel, cfg: Config | None) -> Throughput | None:
    """Utilization and seconds per step by cause at the launched
    configuration (declared: the modelled shares scaled inside the declared MFU)."""
    if cfg is None:
        return None
    return _kept(cm, ("throughput", cfg.batch, cfg.grad_accum, cfg.micro_batch, cfg.sequences),
                 lambda: _throughput(cm, cfg))


def _kept(cm: CostModel, key: tuple, build):
    """What `build()` makes at a configuration, kept in the cost model's `_shown` (at most
    _SHOWN_AT_MOST entries per cost model; a warm re-solve builds it once)."""
    out = cm._shown.get(key)
    if out is None:
        out = build()
        if len(cm._shown) < _SHOWN_AT_MOST:
            cm._shown[key] = out
    return out


def _throughput(cm: CostModel, cfg: Config) -> Throughput:
    bd = cm.breakdown(cfg.batch, cfg.grad_accum)
    if bd is None:  # no shape: declared MFU only
        total = cm.step_time(cfg.batch, cfg.grad_accum)
        return Throughput(source=cm.mode, mfu=cm.mfu, hfu=None, model_tflops_per_gpu=cm.flops_per_token * cfg.batch
                                / (total * cm.gpus) / 1e12, hardware_tflops_per_gpu=None, step_time_s=total,
                                breakdown={"compute": total})
    out = dict(source=cm.mode, mfu=bd.mfu, hfu=bd.hfu, model_tflops_per_gpu=bd.model_tflops_per_gpu,
               hardware_tflops_per_gpu=bd.hardware_tflops_per_gpu, step_time_s=bd.total,
               breakdown=bd.seconds(), stage_layers=list(bd.stage_layers))
    if cm.mode == "declared":  # what the layout alone would predict, for comparison
        from budgetdsl.cost.throughput import step_time as predicted_step

        assert cm.shape is not None and cm.device is not None and cm.layout is not None  # a breakdown: a shape
        out["predicted_mfu"] = predicted_step(cm.shape, cm.device, cm.layout, cfg.micro_batch,
                                              cfg.sequences).mfu
    return Throughput(**out)


def assumptions(cm: CostModel, cfg: Config | None) -> dict[str, Coefficient]:
    """Every coefficient the answer rests on, with its origin; at a configuration, the ones derived
    at its micro-batch too."""
    shown = cm._shown.get("coefficients")  # immutable models: built once per (cached) cost model
    if shown is None:
        shown = cm._shown["coefficients"] = {
            k: Coefficient(value=c.value, unit=c.unit, origin=c.origin, detail=c.detail)
            for k, c in cm.coefficients.items()}
    if cfg is None:
        return dict(shown)
    at = _kept(cm, ("assumptions", cfg.batch, cfg.grad_accum, cfg.micro_batch, cfg.memory),
               lambda: _at_configuration(cm, cfg))
    return {**shown, **at}


def _at_configuration(cm: CostModel, cfg: Config) -> dict[str, Coefficient]:
    """The coefficients derived at the configuration's micro-batch (`assumptions`)."""
    out: dict[str, Coefficient] = {}
    declared = cm.mode == "declared"
    line = declared and cm.anchor is None  # T(B) = f·B/(G·P·u): nothing depends on the micro-batch
    at_micro = "" if line else f" at micro-batch {cfg.micro_batch}"
    rate, fixed = cm.linear_at(cfg.micro_batch)  # T(B) = f·B/rate + c at the launched micro-batch
    out["achieved_flops"] = Coefficient(
        value=rate, unit="FLOP/s", origin="derived",
        detail=cm.coefficients["achieved_flops"].detail + ("" if line else f", at micro-batch {cfg.micro_batch}"))
    out["fixed_time"] = Coefficient(
        value=fixed, unit="s", origin="derived",
        detail=cm.coefficients["fixed_time"].detail.rsplit(" at micro-batch", 1)[0] + at_micro)
    out["step_time"] = Coefficient(
        value=cm.step_time(cfg.batch, cfg.grad_accum), unit="s", origin="derived",
        detail=("T(B) = f·B/(G·P·u), declared MFU" if cm.anchor is None else
                f"the modelled step at micro-batch {cfg.micro_batch} × {cfg.grad_accum} accumulation, "
                "anchored to the declared MFU (see mfu)") if declared else
        f"predicted at micro-batch {cfg.micro_batch} × {cfg.grad_accum} accumulation "
        "(budgetdsl.cost.throughput; see throughput.breakdown)")
    out["memory_at_micro_batch"] = Coefficient(
        value=cfg.memory, unit="B", origin="derived",
        detail="weights + grads + optimizer + micro-batch × activations + reserve")
    return out


def run_notes(ctx: Context, pl: Placement, status: Status) -> list[str]:
    from budgetdsl.quantities.humanize import human

    notes: list[str] = []
    cm, cfg = pl.cm, pl.config
    if cfg is None:
        return notes
    if status is Status.optimal and pl.clipped is not None:
        t = pl.target
        what = {"balanced": "the balanced point B = B_crit", "min_time": "the minimum-time batch",
                "min_cost": "the minimum-time batch (on a fixed GPU count cost follows the wall clock)",
                "min_flops": "the smallest batch"}[ctx.objective]
        if ctx.objective == "min_flops":
            notes.append(f"{ctx.objective}: {what} the limits allow, {human('tokens', pl.lo)}")
        elif t < pl.lo or t > pl.hi:
            notes.append(f"{ctx.objective}: {what}, {human('tokens', t)}, lies outside the feasible "
                         f"{human('tokens', pl.lo)}–{human('tokens', pl.hi)}; clipped to "
                         f"{human('tokens', pl.clipped)}")
        else:
            notes.append(f"{ctx.objective}: {what}, {human('tokens', t)}, is feasible")
        if cm.fixed_time > 0 and ctx.objective != "min_time":
            from budgetdsl.theory import closed_forms_generated as cf
            b_star = cf.min_time_batch(ctx.frontier.b_crit, cm.flops_per_token, cm.rate, cm.fixed_time)
            notes.append(f"past B = {human('tokens', b_star)} a bigger batch no longer buys time on "
                         f"{cm.gpus} GPUs (bubble, exposed gradient reduction and optimizer step = "
                         f"{human('s', cm.fixed_time)} per step)")
    if abs(cfg.batch - (pl.clipped or cfg.batch)) > 0 and status is Status.optimal:
        notes.append(f"snapped to {cfg.sequences} sequences = {cfg.micro_batch} × {cfg.grad_accum} "
                     f"accumulation × {cfg.data_parallel} replicas; steps rounded up to {cfg.steps}")
    if (cfg.micro_batch * cm.seq_len) % 8:
        notes.append(f"micro-batch of {cfg.micro_batch * cm.seq_len} tokens is not a multiple of 8 "
                     "(tensor cores prefer it)")
    return notes


def x_warnings(ctx: Context, x: float | None, pinned: bool) -> list:
    """A located warning when the batch is more than X_DOUBTFUL times B_crit, or less than its
    inverse: most likely B_crit is wrong (a transfer from another corpus), not the batch."""
    from budgetdsl.plan.noise import plan_warning
    from budgetdsl.quantities.humanize import human

    if x is None or 1.0 / X_DOUBTFUL <= x <= X_DOUBTFUL:
        return []
    fr = ctx.frontier
    side = (f"spends E/E_min = {1 + x:.3g}× the minimal tokens" if x > 1
            else f"takes S/S_min = {1 + 1 / x:.3g}× the minimal steps")
    where = ("run", "batch") if pinned else ("noise",)
    return [plan_warning(
        ctx.plan, where, "batch-far-from-b-crit",
        f"the batch is x = {x:.3g} × B_crit (B_crit {human('tokens', fr.b_crit)}, {ctx.noise.source}); "
        f"on the frontier it {side}, far outside x in [1/{X_DOUBTFUL:g}, {X_DOUBTFUL:g}]",
        "check where B_crit comes from (a calibration on another corpus or tokenizer transfers badly)")]


def layout_warnings(ctx: Context) -> list:
    """A located warning when the plan pins a ZeRO stage that does not run with its pipeline
    (`layout.zero_problem`): the numbers are the model's, but no framework launches that layout.
    (The search never picks one.)"""
    from budgetdsl.hardware.layout import zero_problem
    from budgetdsl.plan.noise import plan_warning

    hw = ctx.plan.hardware
    problem = zero_problem(int(hw.zero), int(hw.pipeline_parallel))
    if problem is None:
        return []
    return [plan_warning(ctx.plan, ("hardware", "zero"), "zero-with-pipeline", problem,
                         "write zero: 1 (what FSDP or the distributed optimizer does under a pipeline), "
                         "or pipeline_parallel: 1")]


def shape_warnings(ctx: Context) -> list:
    """A located warning when the plan writes params and a detailed shape (kv_heads, ffn_hidden,
    mlp or tied_embeddings) that counts more than PARAMS_MISMATCH apart: one of them is probably
    wrong, and FLOPs (from params) and activations (from the shape) would disagree."""
    from budgetdsl.plan.model import PARAMS_MISMATCH
    from budgetdsl.plan.noise import plan_warning

    mismatch = ctx.plan.model.params_mismatch()
    if mismatch is None:
        return []
    declared, counted = mismatch
    return [plan_warning(
        ctx.plan, ("model", "params"), "params-vs-shape",
        f"params ({declared:.4g}) is {declared / counted - 1:+.1%} off the {counted:.4g} parameters its shape "
        f"counts (layers, d_model, heads, kv_heads, ffn_hidden, mlp, vocab, tied_embeddings; more than "
        f"{PARAMS_MISMATCH:.0%}); FLOPs follow params, activation memory the shape",
        "check the shape against the model's config, or omit params to use the shape's count")]


def warning_fields(d) -> PlanWarning:
    """A located diagnostic of severity warning, as the answer carries it."""
    return PlanWarning(file=d.location.file, line=d.location.line, col=d.location.col, code=d.code,
                message=d.message, hint=d.hint)
