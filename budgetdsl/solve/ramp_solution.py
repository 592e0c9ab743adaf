"""The batch-size ramp (`run.batch_schedule`) of the launched configuration: the stages snapped to
whole accumulation steps of the solution's micro-batch and replicas, each priced by one model
(`budgetdsl.solve.batch_ramp`) beside the fixed batch. Its own module: the ramp is a schedule over the
run, not a point of the frontier, and reads the B_noise trajectory of the calibration.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from budgetdsl.plan.noise import plan_error
from budgetdsl.solve.context import Context
from budgetdsl.solve.placement import Placement
from budgetdsl.solve.solution import Ramp, RampStage


def launchable(smallest: float, micro_batch: int, data_parallel: int,
               seq_len: int) -> tuple[int, Callable[[float], float]]:
    """The micro-batch of every stage and the snap of a stage's batch to whole accumulation steps.
    One micro-batch for every stage (Megatron's schedules keep --micro-batch-size): the launched
    one, or smaller when the smallest stage (`smallest` tokens) wants fewer sequences per replica."""
    micro = max(1, min(micro_batch, int(smallest // (data_parallel * seq_len))))
    unit = float(micro * data_parallel * seq_len)  # one accumulation step

    def snap(batch: float) -> float:
        return max(1, round(batch / unit)) * unit

    return micro, snap


def ramp(ctx: Context, pl: Placement) -> Ramp | None:
    """The `Ramp` of `run.batch_schedule`, or None without one (or a configuration)."""
    run, cfg, cm, fr = ctx.plan.run, pl.config, pl.cm, ctx.frontier
    if run is None or run.batch_schedule is None or cfg is None:
        return None
    from budgetdsl.quantities.humanize import human
    from budgetdsl.solve import batch_ramp as br  # a plan without a ramp does not import it

    notes: list[str] = []
    assumption = br.ASSUMPTION
    if run.stage_b_noise:  # a trajectory the plan writes (budgetdsl track --replan), stage by stage
        assert isinstance(run.batch_schedule, list)
        traj = br.NoiseTrajectory.from_stages(
            [(float(st.until), float(st.batch), float(st.b_noise or 0)) for st in run.batch_schedule],
            "the stages' b_noise (run.batch_schedule), scaled to the plan's B_crit")
        assumption = br.STAGES_ASSUMPTION
    elif ctx.noise.calibration is not None:  # read when the plan was loaded (noise_source.resolve_noise)
        try:
            name = ctx.noise.calibration_name
            assert name is not None  # read with the calibration
            traj = br.NoiseTrajectory.from_calibration(ctx.noise.calibration, name)
        except ValueError as exc:
            raise plan_error(ctx.plan, ("run", "batch_schedule"), "ramp-trajectory", str(exc)) from None
    else:
        traj = br.NoiseTrajectory.constant(fr.b_crit, "none: noise is not a calibration, B_noise taken constant")
        notes.append("without a calibration there is no B_noise trajectory: B_noise is taken constant "
                     "over the run, so a ramp can only cost against the fixed batch")
    traj = traj.scaled_to_mean(fr.b_crit)
    if run.batch_schedule == "auto":
        bounds = br.auto_boundaries(traj, int(run.ramp_stages))
        smallest = min(float(run.ramp_x) * traj.mean(a, b) for a, b in zip(bounds, bounds[1:]))
    else:
        smallest = min(float(st.batch) for st in run.batch_schedule)
    micro, snap = launchable(smallest, cfg.micro_batch, cfg.data_parallel, cm.seq_len)
    unit = float(micro * cfg.data_parallel * cm.seq_len)

    if run.batch_schedule == "auto":
        x = float(run.ramp_x)
        costs = br.plan_auto(traj, fr.s_min, int(run.ramp_stages), x, snap)
        closed = br.adaptive_closed_form(fr.s_min, fr.e_min, x)
    else:
        x, closed = None, None
        given = [(float(st.until), float(st.batch)) for st in run.batch_schedule]
        snapped = [(u, snap(b)) for u, b in given]
        for (u, b), (_, b2) in zip(given, snapped):
            if abs(b2 - b) > 1e-9 * b:
                notes.append(f"the stage until {u:.0%} ({human('tokens', b)}) snapped to "
                             f"{human('tokens', b2)}: whole accumulation steps of {micro} "
                             f"sequences × {cfg.data_parallel} replicas")
        costs = br.stages_from_token_fractions(traj, fr.s_min, snapped)
    rows, acc_tokens = [], 0.0
    for c in costs:
        steps = math.ceil(c.steps - 1e-9)
        tokens = steps * c.batch
        acc_tokens += tokens
        rows.append((c, steps, tokens, steps * cm.step_time(c.batch)))
    stages, acc = [], 0.0
    for c, steps, tokens, seconds in rows:  # `until` as the plan language writes it: a fraction of the
        acc += tokens                        # run's tokens
        stages.append(RampStage(until=acc / acc_tokens, progress_start=c.start, progress_end=c.end,
                                batch_tokens=c.batch, sequences=round(c.batch / cm.seq_len),
                                grad_accum=round(c.batch / unit), b_noise_tokens=c.b_noise, x=c.x, steps=steps,
                                tokens=tokens, wall_clock_s=seconds))
    steps = sum(st.steps for st in stages)
    wall = sum(st.wall_clock_s for st in stages)
    limit = ctx.limits.deadline
    if limit is not None and wall > limit:
        notes.append(f"the ramp's wall clock {human('s', wall)} exceeds the deadline {human('s', limit)}")
    return Ramp(schedule="auto" if run.batch_schedule == "auto" else "stages", x=x, micro_batch=micro,
                trajectory=traj.source, assumption=assumption, stages=stages, steps=steps,
                tokens=acc_tokens, flops=acc_tokens * cm.flops_per_token, wall_clock_s=wall,
                fixed_steps=cfg.steps, fixed_tokens=cfg.tokens, fixed_wall_clock_s=cfg.wall,
                saves_steps=cfg.steps - steps, saves_tokens=cfg.tokens - acc_tokens,
                saves_wall_clock_s=cfg.wall - wall,
                closed_form_steps=closed[0] if closed else None,
                closed_form_tokens=closed[1] if closed else None, notes=notes)
