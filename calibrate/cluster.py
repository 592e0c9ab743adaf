"""The frontier sweep on a cluster: one Slurm array task per (batch, seed), collected and refitted.

A sweep folder holds everything: `sweep.json` (the settings, the tasks, each task's Slurm job and
log), `tasks/<key>/result.json` (written whole by the task: temporary file, then rename),
`tasks/<key>/ckpt.pt` (the task's state, every few steps, for a requeued or resubmitted task),
`tasks/<key>/error.json` (what a task that raised said), and `slurm/` (submitit's job files and
logs). Each task runs `sweep.train_batch`, the code the local sweep runs for one batch; the
smallest batch is the pilot that sets the target loss, so without `--target-loss` the other tasks
start after it (`--dependency=afterok`). The collector (`collect`) takes `<folder>/collect.lock`,
reads what has finished, refits S = S_min + E_min/B over it and rewrites the calibration file; a
sweep short of its batches is written as partial (`interrupted`, with the batches it rests on),
and no fit is made below `min_batches`.

submitit writes the sbatch script: every value that reaches it is checked here first (Slurm names,
integers, a folder path of plain characters), so nothing from a plan or a flag can add a line.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from budgetdsl.calibrate.config import RunConfig
from budgetdsl.calibrate.out_lock import OutLocked, out_lock
from budgetdsl.calibrate.run import UsageError
from budgetdsl.calibrate.sweep_config import SweepConfig

from budgetdsl.io.atomic_write import write_file

MANIFEST = "sweep.json"
MANIFEST_VERSION = 1
_SLURM_NAME = r"[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*"  # as budgetdsl.plan.launch: partition lists
_SAFE_PATH = r"[A-Za-z0-9_./@+=,-]+"  # what may reach an #SBATCH line of submitit's script
CHECKPOINT_EVERY = 20  # steps between a task's checkpoints
MIN_BATCHES = 3  # the fit S = S_min + E_min/B has two parameters: three batches leave one to check


class ClusterError(UsageError):
    """Slurm cannot take the sweep, or the folder is not a sweep: the message says what to do."""


# --- options --------------------------------------------------------------------------------

@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = None
    account: str | None = None
    time_min: int = 60  # per task
    gpus_per_task: int = 0  # on each of the task's nodes: one process per GPU
    nodes_per_task: int = 1
    cpus_per_task: int = 1

    @property
    def processes_per_node(self) -> int:
        """One process per GPU (torchrun's convention); one on a CPU node."""
        return max(1, self.gpus_per_task)

    @property
    def processes(self) -> int:
        return self.nodes_per_task * self.processes_per_node

    def check_split(self, cfg: SweepConfig) -> None:
        """ValueError, before anything is submitted, when the task's processes cannot share the
        batches' micro-batches evenly."""
        why = cfg.split_error(self.processes)
        if why:
            raise ValueError(f"--gpus-per-task {self.gpus_per_task} x --nodes-per-task {self.nodes_per_task}: {why}")

    def validate(self) -> None:
        """ValueError naming the flag (or plan key) for a value Slurm would refuse or that could
        reach the script as more than one word."""
        for flag, value in (("--partition (launch.partition)", self.partition),
                            ("--account (launch.account)", self.account)):
            if value is not None and not re.fullmatch(_SLURM_NAME, value):
                raise ValueError(f"{flag} {value!r} is not a Slurm name (letters, digits, '_', '.', '-')")
        if not 1 <= self.time_min <= 366 * 24 * 60:
            raise ValueError("--time must be between 1 minute and a year")
        if not 0 <= self.gpus_per_task <= 64:
            raise ValueError("--gpus-per-task must be between 0 and 64")
        if not 1 <= self.nodes_per_task <= 1024:
            raise ValueError("--nodes-per-task must be between 1 and 1024")
        if not 1 <= self.cpus_per_task <= 1024:
            raise ValueError("--cpus-per-task must be between 1 and 1024")


def parse_time(text: str) -> int:
    """Minutes from `90`, `90m`, `2h`, `1d`, or Slurm's `HH:MM:SS` / `D-HH:MM:SS`."""
    t = text.strip()
    m = re.fullmatch(r"(\d+)\s*(m|min|h|d)?", t)
    if m:
        return int(m.group(1)) * {None: 1, "m": 1, "min": 1, "h": 60, "d": 1440}[m.group(2)]
    m = re.fullmatch(r"(?:(\d+)-)?(\d+):(\d{2}):(\d{2})", t)
    if m:
        d, h, mi, s = (int(x or 0) for x in m.groups())
        return d * 1440 + h * 60 + mi + (1 if s else 0)
    raise ValueError(f"--time {text!r}: give minutes (90, 90m), hours (2h), days (1d) or HH:MM:SS")


def safe_folder(path: Path) -> Path:
    """The sweep folder, absolute; ValueError when its path holds a character that submitit would
    write into an #SBATCH line (a newline would start a directive of its own)."""
    folder = Path(os.path.abspath(path))
    if not re.fullmatch(_SAFE_PATH, str(folder)):
        raise ValueError(f"--sweep-dir {str(path)!r}: the folder's path may hold only letters, digits and "
                         "_ . / @ + = , - (it is written into the Slurm script)")
    return folder


# --- tasks and the folder -------------------------------------------------------------------

@dataclass(frozen=True)
class Task:
    batch: int
    seed: int
    pilot: bool  # sets the target loss for the others

    @property
    def key(self) -> str:
        return f"b{self.batch}-s{self.seed}"


def tasks_of(cfg: SweepConfig) -> list[Task]:
    """One task per (batch, seed), seed by seed; the pilot is the first seed's smallest batch."""
    pilot = cfg.target_loss is None
    smallest, first = min(cfg.batches), cfg.seed_list[0]
    return [Task(b, seed, pilot and b == smallest and seed == first)
            for seed in cfg.seed_list for b in sorted(cfg.batches)]


def task_dir(folder: Path, key: str) -> Path:
    return folder / "tasks" / key


def result_path(folder: Path, key: str) -> Path:
    return task_dir(folder, key) / "result.json"


def config_to_dict(cfg: SweepConfig) -> dict:
    return asdict(cfg)


def config_from_dict(d: dict) -> SweepConfig:
    values = dict(d)
    base = RunConfig(**values.pop("base"))
    for k in ("batches", "lr_grid", "seeds"):
        values[k] = tuple(values.get(k, ()))
    return SweepConfig(base=base, **values)


def write_manifest(folder: Path, manifest: dict) -> None:
    write_file(folder / MANIFEST, json.dumps(manifest, indent=1) + "\n")


MAX_FILE_BYTES = 64 << 20  # a task's result holds one calibration: as large as a calibration file may be


def _load_json(path: Path, inside: Path):
    """JSON of a sweep file, read by the one guarded reader: a regular file below `inside` (a link
    out of the sweep folder is refused) and bounded. ValueError for anything but whole JSON;
    FileNotFoundError when there is none."""
    from budgetdsl.io.guarded_read import NotRegularFile, OutsideRoot, read_regular

    try:
        raw = read_regular(path, MAX_FILE_BYTES, inside)
    except (NotRegularFile, OutsideRoot, IsADirectoryError) as exc:
        raise ValueError(f"{path}: not a regular file in the sweep folder ({exc})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ValueError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB")
    return json.loads(raw.decode("utf-8"))  # ValueError (UnicodeDecodeError, JSONDecodeError) when torn


def read_manifest(folder: Path) -> dict:
    path = Path(folder) / MANIFEST
    try:
        manifest = _load_json(path, Path(folder))
    except FileNotFoundError:
        raise ClusterError(f"{folder}: not a sweep folder (no {MANIFEST}); start one with "
                           "`budgetdsl calibrate sweep --executor slurm --sweep-dir DIR`") from None
    except (OSError, ValueError) as exc:
        raise ClusterError(f"{path}: unreadable ({exc}); it is written whole, so another program "
                           "changed it") from None
    if not isinstance(manifest, dict) or manifest.get("version") != MANIFEST_VERSION:
        raise ClusterError(f"{path}: not a sweep manifest of this budgetdsl (version {MANIFEST_VERSION})")
    return manifest


# --- Slurm ----------------------------------------------------------------------------------

def _slurm(argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def check_slurm(opts: SlurmOptions) -> None:
    """ClusterError when this machine cannot submit: no sbatch, the controller down, a partition
    or account the cluster does not have."""
    for tool in ("sbatch", "squeue", "scontrol", "sinfo"):
        if shutil.which(tool) is None:
            raise ClusterError(f"no Slurm here: `{tool}` is not on PATH; run on the cluster's login node, "
                               "or sweep on this machine with --executor local")
    try:
        ping = _slurm(["scontrol", "ping"])
    except subprocess.TimeoutExpired:
        ping = None
    if ping is None or ping.returncode != 0 or " is UP" not in ping.stdout:
        said = (ping.stdout + ping.stderr).strip() if ping is not None else "no answer in 30 s"
        raise ClusterError(f"the Slurm controller does not answer (`scontrol ping`: {said or 'DOWN'}); "
                           "nothing was submitted")
    # One line per partition and node configuration: name, availability, node count, GRES.
    lines = [p.split("|") for p in _slurm(["sinfo", "-h", "-o", "%R|%a|%D|%G"]).stdout.split()]
    known: dict[str, str] = {}
    nodes: dict[str, int] = {}
    gpus: dict[str, int] = {}
    for fields in lines:
        if len(fields) < 2:
            continue
        name = fields[0]
        known[name] = fields[1]
        nodes[name] = nodes.get(name, 0) + (int(fields[2]) if len(fields) > 2 and fields[2].isdigit() else 0)
        per_node = sum(int(n) for n in re.findall(r"gpu(?::[^:,()]+)?:(\d+)", fields[3])) if len(fields) > 3 else 0
        gpus[name] = max(gpus.get(name, 0), per_node)
    wanted = opts.partition.split(",") if opts.partition else []
    for name in wanted:
        if name not in known:
            raise ClusterError(f"--partition {name}: no such partition; this cluster has "
                               f"{', '.join(sorted(known)) or 'none'}")
        if known[name] != "up":
            raise ClusterError(f"--partition {name} is {known[name]}, not up")
    _check_resources(opts, [n for n in (wanted or list(known)) if nodes.get(n)], nodes, gpus)
    if opts.account is not None:
        test = _slurm(["sbatch", "--test-only", f"--account={opts.account}", "--wrap=true",
                       *([f"--partition={opts.partition}"] if opts.partition else [])])
        if test.returncode != 0:
            raise ClusterError(f"--account {opts.account}: Slurm refuses it: {test.stderr.strip()}")


def _check_resources(opts: SlurmOptions, partitions: list[str], nodes: dict[str, int], gpus: dict[str, int]) -> None:
    """ClusterError when no partition sinfo lists (of those asked for, else any) has the nodes and
    the GPUs per node a task asks for. Partitions whose nodes sinfo does not list (powered-down
    cloud nodes) are left to sbatch, which refuses what they cannot hold."""
    if not partitions or (opts.nodes_per_task == 1 and not opts.gpus_per_task):
        return
    fits = [p for p in partitions if nodes[p] >= opts.nodes_per_task and gpus[p] >= opts.gpus_per_task]
    if not fits:
        have = "; ".join(f"{p}: {nodes[p]} node(s) of {gpus[p]} GPU(s)" for p in partitions)
        raise ClusterError(f"a task asks for {opts.nodes_per_task} node(s) of {opts.gpus_per_task} GPU(s) "
                           f"(--nodes-per-task, --gpus-per-task); sinfo lists {have}; nothing was submitted")


@dataclass
class TaskState:
    key: str
    batch: int
    state: str  # pending | running | done | failed
    job: str | None = None
    slurm: str | None = None  # Slurm's own state (PENDING, RUNNING, CANCELLED, TIMEOUT, OUT_OF_MEMORY, ...)
    log: str | None = None
    reason: str | None = None


def _squeue(job_ids: list[str]) -> dict[str, tuple[str, str]] | None:
    """{job id: (state, reason)} of the jobs still in the queue (array tasks one by one); None when
    squeue does not answer (the controller restarting): nothing can be said about the jobs then."""
    if not job_ids:
        return {}
    arrays = sorted({j.split("_")[0] for j in job_ids})
    try:
        res = _slurm(["squeue", "-h", "-r", "-j", ",".join(arrays), "-o", "%i|%T|%r"])
    except subprocess.TimeoutExpired:
        return None
    if res.returncode != 0 and "Invalid job id" not in res.stderr:
        return None
    out = {}
    for line in res.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3:
            out[parts[0]] = (parts[1], parts[2])
    return out


def _scontrol(job: str) -> tuple[str, str] | None:
    """(JobState, Reason) of a job that left the queue recently (Slurm keeps it MinJobAge seconds)."""
    res = _slurm(["scontrol", "show", "job", "-o", job])
    if res.returncode != 0:
        return None
    fields = dict(w.split("=", 1) for w in res.stdout.split() if "=" in w)
    return fields.get("JobState", "UNKNOWN"), fields.get("Reason", "None")


def _read_result(path: Path) -> dict | None:
    """The task's result, or None when there is none; ValueError when the file is torn."""
    try:
        data = _load_json(path, path.parent)  # ValueError when torn
    except FileNotFoundError:
        return None
    if not isinstance(data, dict) or "runs" not in data or "calibration" not in data:
        raise ValueError("not a task result")
    return data


def states(folder: Path, manifest: dict, slurm: bool = True) -> list[TaskState]:
    """Every task's state: done (its result file), failed (an error file, a torn result, or a job
    gone from Slurm without a result), else Slurm's pending or running."""
    out: list[TaskState] = []
    jobs = manifest.get("jobs", {})
    slurm = slurm and manifest.get("executor", "slurm") == "slurm"
    queue = (_squeue([j["id"] for j in jobs.values()]) if shutil.which("squeue") else None) if slurm else {}
    for t in manifest["tasks"]:
        key = t["key"]
        job = jobs.get(key, {})
        st = TaskState(key, t["batch"], "pending", job.get("id"), log=job.get("log"))
        path = result_path(folder, key)
        try:
            if _read_result(path) is not None:
                st.state = "done"
                out.append(st)
                continue
        except ValueError:
            torn = path.with_name(f"result.torn-{int(time.time())}.json")
            os.replace(path, torn)  # kept for a look, out of the way of the rerun
            st.state, st.reason = "failed", f"result file torn (kept as {torn.name}); resubmit with --retry-failed"
            out.append(st)
            continue
        err = task_dir(folder, key) / "error.json"
        if queue is None and st.job is not None and not err.exists():
            st.reason = "Slurm did not answer (squeue); looking again"
            out.append(st)
            continue
        if manifest.get("executor") in ("kubernetes", "local"):
            if err.exists():
                st.state, st.reason = "failed", _safe_json(err).get("error", "the task raised")
            elif manifest.get("executor") == "local" and (task_dir(folder, key) / "ckpt.pt").exists():
                st.state, st.reason = "failed", "stopped before its end; its state is in ckpt.pt"
            elif manifest.get("executor") == "local":
                st.reason = "not run yet"
        elif st.job is None:
            st.state, st.reason = "failed", "never submitted"
        elif st.job in queue:
            st.slurm, why = queue[st.job]
            st.state = "running" if st.slurm in ("RUNNING", "COMPLETING", "CONFIGURING") else "pending"
            if why == "DependencyNeverSatisfied":
                st.state, st.reason = "failed", "its pilot task failed (DependencyNeverSatisfied)"
        elif err.exists():
            info = _safe_json(err)
            st.state, st.slurm = "failed", "FAILED"
            st.reason = info.get("error", "the task raised")
        elif not slurm:
            st.state = "unknown"
        else:
            seen = _scontrol(st.job)
            st.state = "failed"
            st.slurm = seen[0] if seen else None
            st.reason = ({"CANCELLED": "cancelled (scancel or preempted)", "TIMEOUT": "ran past --time",
                          "OUT_OF_MEMORY": "out of memory", "NODE_FAIL": "its node failed"}.get(st.slurm or "",
                                                                                                  None)
                         or ("the job ended without a result" if seen else
                             "the job left Slurm's queue without a result"))
        if st.state == "failed" and st.log and not Path(st.log).exists():
            st.log = None  # the job never started: no log to read
        out.append(st)
    return out


def _safe_json(path: Path) -> dict:
    try:
        data = _load_json(path, path.parent)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def progress_line(sts: list[TaskState]) -> str:
    counts = {k: sum(s.state == k for s in sts) for k in ("pending", "running", "done", "failed")}
    return ", ".join(f"{v} {k}" for k, v in counts.items())


def progress_table(sts: list[TaskState]) -> str:
    lines = [f"{'task':<14} {'state':<8} {'job':<12} {'slurm':<14} note"]
    for s in sts:
        lines.append(f"{s.key:<14} {s.state:<8} {s.job or '—':<12} {s.slurm or '':<14} "
                     f"{(s.reason or '') + (f' (log {s.log})' if s.state == 'failed' and s.log else '')}".rstrip())
    return "\n".join(lines)


# --- submission -----------------------------------------------------------------------------

def prepare(folder: Path, cfg: SweepConfig, out: Path, opts: SlurmOptions, command: list[str],
            tokens_per_example: int | None = None, executor: str = "slurm") -> dict:
    """Make the sweep folder and its manifest (nothing submitted yet); ClusterError when the folder
    already holds another sweep."""
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / MANIFEST).exists():
        raise ClusterError(f"--sweep-dir {folder} already holds a sweep; follow it with "
                           f"`budgetdsl calibrate sweep --collect {folder}`, or choose a new folder")
    manifest = {
        "version": MANIFEST_VERSION, "config": config_to_dict(cfg), "out": str(Path(os.path.abspath(out))),
        "slurm": asdict(opts), "command": command, "created": time.time(),
        "tasks": [{"key": t.key, "batch": t.batch, "seed": t.seed, "pilot": t.pilot} for t in tasks_of(cfg)],
        "jobs": {}, "attempts": [], "executor": executor, "tokens_per_example": tokens_per_example,
    }
    write_manifest(folder, manifest)
    return manifest


def submit(folder: Path, manifest: dict, keys: list[str], say: Callable[[str], None]) -> dict:
    """Submit `keys` (the pilot alone first when it is among them, the rest as one array that
    waits for an unfinished pilot) and record their jobs in the manifest."""
    import submitit

    opts = SlurmOptions(**manifest["slurm"])
    check_slurm(opts)
    executor = submitit.AutoExecutor(folder=str(folder / "slurm" / "%j"), cluster="slurm")
    # Slurm signals the task this long before its time limit, so that submitit requeues it (90 s,
    # submitit's default, or a tenth of a short limit): it then resumes from its checkpoint.
    # One Slurm task per process (one per GPU, torchrun's convention), on --nodes-per-task nodes.
    params: dict = dict(slurm_job_name="budgetdsl-sweep", timeout_min=opts.time_min, nodes=opts.nodes_per_task,
                        tasks_per_node=opts.processes_per_node,
                        cpus_per_task=opts.cpus_per_task, slurm_signal_delay_s=min(90, max(10, opts.time_min * 6)))
    if opts.partition:
        params["slurm_partition"] = opts.partition
    if opts.account:
        params["slurm_account"] = opts.account
    if opts.gpus_per_task:
        params["gpus_per_node"] = opts.gpus_per_task
    by_key = {t["key"]: t for t in manifest["tasks"]}
    pilot = next((t["key"] for t in manifest["tasks"] if t["pilot"]), None)
    jobs = manifest.setdefault("jobs", {})
    groups = [[k for k in keys if k == pilot], [k for k in keys if k != pilot]]
    for group in groups:
        if not group:
            continue
        extra: dict = {}
        pilot_job = jobs.get(pilot, {}).get("id") if pilot else None
        if pilot and pilot not in group and pilot_job and not result_path(folder, pilot).exists():
            extra["dependency"] = f"afterok:{pilot_job}"
        executor.update_parameters(**params, slurm_additional_parameters=extra)
        try:
            with executor.batch():
                submitted = [executor.submit(SweepTask(), str(folder), k) for k in group]
        except Exception as exc:  # submitit raises its own error types with sbatch's message
            raise ClusterError(f"sbatch refused the sweep: {str(exc).strip().splitlines()[-1]}") from None
        for k, job in zip(group, submitted):
            jobs[k] = {"id": str(job.job_id), "log": str(job.paths.stdout), "batch": by_key[k]["batch"]}
            (task_dir(folder, k) / "error.json").unlink(missing_ok=True)
        say(f"submitted {', '.join(group)} as Slurm job {submitted[0].job_id.split('_')[0]}"
            + (f" (after the pilot, job {extra['dependency'].split(':')[1]})" if extra else ""))
    manifest.setdefault("attempts", []).append({"time": time.time(), "keys": keys})
    write_manifest(folder, manifest)
    return manifest


def retry_failed(folder: Path, say: Callable[[str], None]) -> list[TaskState]:
    """Resubmit the failed tasks alone (each resumes from its checkpoint); the states before."""
    manifest = read_manifest(folder)
    sts = states(folder, manifest)
    failed = [s for s in sts if s.state == "failed"]
    if failed:
        stale = [s.job for s in failed if s.job and s.slurm in ("PENDING",)]
        if stale:  # tasks waiting on a pilot that failed: replaced by the resubmission
            _slurm(["scancel", *stale])
        submit(folder, manifest, [s.key for s in failed], say)
    return sts


# --- the task -------------------------------------------------------------------------------

try:  # the Slurm side: submitit runs this callable and requeues it on a time-out or preemption
    from submitit.helpers import Checkpointable as _Checkpointable
except ImportError:  # pragma: no cover - the `cluster` extra is not installed: only --task works
    _Checkpointable = object  # type: ignore[assignment,misc]


class SweepTask(_Checkpointable):
    """One task of the array. On Slurm's signal before the time limit (or a preemption) submitit
    calls `checkpoint`, which requeues this same call; the task then resumes from `ckpt.pt`."""

    def __call__(self, folder: str, key: str) -> str:
        if int(os.environ.get("SLURM_NTASKS", "1")) > 1:
            # Each Slurm task is one process of the task: torchrun's environment (RANK, WORLD_SIZE,
            # LOCAL_RANK, MASTER_ADDR/PORT on the first node), for distributed.init's env:// join.
            from submitit.helpers import TorchDistributedEnvironment

            TorchDistributedEnvironment().export(set_cuda_visible_devices=False, overwrite=True)
        return str(run_task(Path(folder), key))


def run_task(folder: Path, key: str, say: Callable[[str], None] | None = None, wait_s: float = 0.0) -> Path:
    """Train one task's batch (every lr multiplier) exactly as the local sweep does and write its
    result whole. Any failure is written to `error.json` (and raised, so Slurm marks the job FAILED)."""
    say = say or (lambda msg: print(msg, flush=True))
    err = task_dir(folder, key) / "error.json"
    try:
        return _run_task(folder, key, say, wait_s)
    except BaseException as exc:
        if not isinstance(exc, KeyboardInterrupt | SystemExit):
            task_dir(folder, key).mkdir(parents=True, exist_ok=True)
            write_file(err, json.dumps({"error": f"{type(exc).__name__}: {exc}",
                                        "job": os.environ.get("SLURM_JOB_ID")}) + "\n")
        raise


def _pilot_result(folder: Path, manifest: dict, wait_s: float) -> dict:
    pilot = next(t for t in manifest["tasks"] if t["pilot"])
    deadline = time.monotonic() + wait_s
    while True:
        res = _read_result(result_path(folder, pilot["key"]))
        if res is not None:
            return res
        if time.monotonic() >= deadline:
            raise UsageError(f"the pilot task {pilot['key']} has no result yet: this task needs its target loss")
        time.sleep(5)


def _run_task(folder: Path, key: str, say: Callable[[str], None], wait_s: float) -> Path:
    import torch
    from budgetdsl.calibrate import distributed
    from budgetdsl.calibrate.hardware import resolve_amp, resolve_device

    manifest = read_manifest(folder)
    cfg = config_from_dict(manifest["config"])
    task = next((t for t in manifest["tasks"] if t["key"] == key), None)
    if task is None:
        raise UsageError(f"{folder}: no task {key!r} in this sweep")
    if os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    device = resolve_device(cfg.base.device)
    amp = resolve_amp(cfg.base.amp, device)
    ctx = distributed.init(device.type)  # under torchrun (or its environment): nccl on CUDA, gloo on CPU
    try:
        return _train_task(folder, key, manifest, cfg, task, device, amp, ctx, say, wait_s)
    finally:
        distributed.shutdown(ctx)


def _train_task(folder: Path, key: str, manifest: dict, cfg: SweepConfig, task: dict, device, amp: str, ctx,
                say: Callable[[str], None], wait_s: float) -> Path:
    """The task's training on this process (one of `ctx.world_size`): rank 0 keeps the checkpoint
    and writes the result."""
    import torch
    from budgetdsl.calibrate import distributed
    from budgetdsl.calibrate.run import _StopRequest
    from budgetdsl.calibrate.sweep import (
        TaskCheckpoint,
        _best_of,
        _reference_calibration,
        _sweep_run,
        _Trainer,
        train_batch,
    )

    if device.type == "cuda" and ctx.active:
        device = torch.device("cuda", ctx.local_rank)
    if not ctx.is_main:
        say = lambda _msg: None  # noqa: E731 - rank 0 speaks for the task
    split_error = cfg.split_error(ctx.world_size)
    if split_error:
        raise UsageError(split_error)
    target = cfg.target_loss
    target_from = "given" if target is not None else "pilot"
    expected: float = cfg.steps_limit
    if target is None and task["pilot"]:
        expected = cfg.pilot_steps
    elif target is None:
        pilot = _pilot_result(folder, manifest, wait_s)
        target = pilot["target_loss"]
        reached = [r["steps_to_target"] for r in pilot["runs"] if r.get("steps_to_target") is not None]
        if reached:  # as the local sweep: evaluations spread over the steps a smaller batch needed
            expected = min(reached)
    trainer = _Trainer(cfg, device, amp, seed=task["seed"], ctx=ctx)
    tdir = task_dir(folder, key)
    tdir.mkdir(parents=True, exist_ok=True)
    ckpt = TaskCheckpoint(tdir / "ckpt.pt", CHECKPOINT_EVERY, writer=ctx.is_main)
    with _StopRequest((signal.SIGINT, signal.SIGTERM)) as stop:
        tried, target, stopped = train_batch(cfg, trainer, task["batch"], target, expected, say, stop, ckpt)
    if stopped:  # scancel or a preemption: the state is in ckpt.pt, Slurm says why the job ended
        if ctx.active:  # every process waits for rank 0's checkpoint before any of them exits
            distributed.all_reduce_sum(ctx, torch.zeros(1, device=device))
        say(f"task {key}: stopped by signal {stop.signum or signal.SIGTERM}; its state is in {ckpt.path}")
        raise SystemExit(128 + (stop.signum or signal.SIGTERM))  # a process the others' vote stopped
    best = _best_of(tried)[(task["batch"], task["seed"])]
    tpe = trainer.tpe
    runs = [_sweep_run(r, r is best, tpe).model_dump(mode="json") for r in tried]
    cal = _reference_calibration(cfg, trainer, best, tuple(manifest["command"]), False)
    result = {"key": key, "batch": task["batch"], "seed": task["seed"], "target_loss": target,
              "target_from": target_from, "tokens_per_example": tpe, "runs": runs,
              "calibration": cal.model_dump(mode="json"), "slurm_job": os.environ.get("SLURM_JOB_ID"),
              "array_task": os.environ.get("SLURM_ARRAY_TASK_ID"), "cpu_seconds": time.process_time(),
              "world_size": ctx.world_size}
    path = result_path(folder, key)
    if ctx.is_main:
        write_file(path, json.dumps(result) + "\n")
        ckpt.path.unlink(missing_ok=True)
    say(f"task {key}: wrote {path}" + (f" ({ctx.world_size} processes)" if ctx.active else ""))
    return path


# --- collection -----------------------------------------------------------------------------

@dataclass
class Collected:
    calibration: object | None  # CalibrationFile, None before any task is done
    states: list[TaskState] = field(default_factory=list)
    n_fitted: int = 0
    complete: bool = False


def assemble(folder: Path, manifest: dict, sts: list[TaskState], min_batches: int = MIN_BATCHES):
    """The calibration file from the finished tasks, as the local sweep writes it: the runs, the
    fit (only over at least `min_batches` batches that reached the target), the comparison; a
    sweep short of tasks is marked partial (`interrupted`) with the reason."""
    from budgetdsl.calibrate.sweep import compare, fit_sweep, seed_spread

    from budgetdsl.plan.calibration_file import CalibrationFile, Sweep, SweepRun

    cfg = config_from_dict(manifest["config"])
    done = {s.key for s in sts if s.state == "done"}
    results = [r for t in manifest["tasks"] if t["key"] in done
               and (r := _read_result(result_path(folder, t["key"]))) is not None]
    if not results:
        return None, 0
    results.sort(key=lambda r: (r["batch"], r["seed"]))
    runs = [SweepRun.model_validate(x) for r in results for x in r["runs"]]
    tpe = results[0]["tokens_per_example"]
    target = results[0]["target_loss"]
    reached = sorted({r.batch_examples for r in runs if r.best and r.reached})
    if len(reached) >= min_batches:
        fit, fit_error = fit_sweep(runs, tpe, cfg.base.confidence)
    else:
        fit, fit_error = None, (f"{len(reached)} batch(es) reached the target "
                                f"({', '.join(map(str, reached)) or 'none'}); the fit needs at least {min_batches}")
    comparison = compare([x for x in runs if x.best and x.reached], fit.b_crit_examples if fit else None, tpe,
                         cfg.base.confidence)
    seeds, steps_by_batch, seed_fits = seed_spread(runs, tpe, cfg.base.confidence)
    missing = [s for s in sts if s.state != "done"]
    partial = bool(missing)
    reason = (f"partial sweep: {len(done)} of {len(sts)} tasks collected; missing "
              + ", ".join(f"{s.key} ({s.state})" for s in missing)) if partial else None
    seconds = sum(r.seconds for r in runs)
    section = Sweep(
        target_loss=target if target is not None else math.nan, target_from=results[0]["target_from"],
        lr_rule=cfg.lr_rule, lr_base=cfg.base.lr, lr_base_batch=cfg.lr_base_batch, lr_grid=list(cfg.lr_grid),
        warmup_steps=cfg.warmup, max_steps=cfg.steps_limit, batches=sorted(cfg.batches), tokens_per_example=tpe,
        runs=runs, fit=fit, fit_error=fit_error,
        comparison=comparison if fit or comparison.b_simple_examples else None, seconds=seconds,
        interrupted=partial, seeds=seeds if len(cfg.seed_list) > 1 else [], steps_by_batch=steps_by_batch,
        seed_fits=seed_fits)
    first = cfg.seed_list[0]  # the reference run is the first seed's
    by_batch = {r["batch"]: r for r in results if r["seed"] == first}
    ref = by_batch.get(cfg.reference) or results[0]
    cal = CalibrationFile.model_validate(ref["calibration"])
    cal = cal.model_copy(update={"sweep": section, "interrupted": partial, "stop_reason": reason})
    return cal, (fit.n_points if fit else 0)


def collect(folder: Path, *, wait: bool = True, poll_s: float = 10.0, min_batches: int = MIN_BATCHES,
            say: Callable[[str], None] | None = None, out: Path | None = None) -> Collected:
    """Gather the finished tasks into the calibration file, refitting as each arrives; with `wait`,
    until no task is pending or running. One collector per folder (`collect.lock`)."""
    say = say or (lambda _msg: None)
    folder = Path(folder)
    manifest = read_manifest(folder)
    if wait and manifest.get("executor", "slurm") == "slurm" and shutil.which("squeue") is None:
        raise ClusterError("no Slurm here (`squeue` is not on PATH) to follow the tasks: collect where the sweep "
                           "was submitted, or add --no-wait to gather the finished tasks only")
    with _collector(folder):
        return _gather(folder, manifest, wait=wait and manifest.get("executor") != "local", poll_s=poll_s,
                       min_batches=min_batches, say=say, out=out)


@contextmanager
def _collector(folder: Path):
    """Hold `<folder>/collect.lock`: one process gathers (or, locally, runs) a sweep's tasks."""
    try:
        with out_lock(folder / "collect", flag="--collect"):
            yield
    except OutLocked as exc:
        pid = re.search(r" \(pid \d+\)", str(exc))
        raise ClusterError(f"--collect {folder}: another collector{pid.group(0) if pid else ''} is following this "
                           f"sweep (it holds {folder / 'collect.lock'}); wait for it, or stop it and collect "
                           "again: nothing is lost, the results stay in the tasks' folders") from None


def _gather(folder: Path, manifest: dict, *, wait: bool, poll_s: float, min_batches: int,
            say: Callable[[str], None], out: Path | None, seen: tuple = ()) -> Collected:
    from budgetdsl.plan.calibration_file import write_calibration

    out = Path(out) if out is not None else Path(manifest["out"])
    several = len(config_from_dict(manifest["config"]).seed_list) > 1
    result = Collected(None)
    while True:
        sts = states(folder, manifest)
        now = tuple((s.key, s.state, s.slurm) for s in sts)
        if now != seen:
            for line in (progress_line(sts), *progress_table(sts).splitlines()):
                say(line)
            done_before = {k for k, st, _ in seen if st == "done"}
            done_now = {s.key for s in sts if s.state == "done"}
            if done_now != done_before or result.calibration is None:
                cal, n = assemble(folder, manifest, sts, min_batches)
                if cal is not None:
                    write_calibration(out, cal)
                    fit = cal.sweep.fit  # type: ignore[attr-defined]
                    unit = "tasks (batch, seed)" if several else "batches"
                    say(f"refit over {n} of {len(sts)} {unit}: B_crit = {fit.b_crit_examples:.3g} examples"
                        if fit else f"no fit yet: {cal.sweep.fit_error}")  # type: ignore[attr-defined]
                result = Collected(cal, sts, n)
            seen = now
        result.states = sts
        active = [s for s in sts if s.state in ("pending", "running")]
        if not wait or not active:
            result.complete = all(s.state == "done" for s in sts)
            return result
        time.sleep(poll_s)


def run_local(folder: Path, keys: list[str] | None = None, *, min_batches: int = MIN_BATCHES,
              say: Callable[[str], None] | None = None) -> tuple[Collected, bool]:
    """Run a local sweep's tasks (`keys`, default every task without a result) one after another in
    this process, the pilot first, refitting after each: (what was collected, whether Ctrl-C
    stopped it). A task that raises is left failed (its `error.json`) and the next one runs; the
    others stop when the pilot fails, since they need its target. `--collect DIR --retry-failed`
    reruns what is not done, each task resuming from its checkpoint."""
    say = say or (lambda _msg: None)
    manifest = read_manifest(folder)
    order = [t for t in manifest["tasks"] if t["pilot"]] + [t for t in manifest["tasks"] if not t["pilot"]]
    with _collector(folder):
        todo = [t["key"] for t in order if (keys is None or t["key"] in keys)
                and _result_or_none(result_path(folder, t["key"])) is None]
        got = _gather(folder, manifest, wait=False, poll_s=0, min_batches=min_batches, say=say, out=None)
        for key in todo:
            pilot = next((t for t in order if t["pilot"]), None)
            if pilot is not None and key != pilot["key"] and _result_or_none(result_path(folder, pilot["key"])) is None:
                say(f"task {key}: not run, its pilot {pilot['key']} has no result")
                continue
            say(f"task {key}: running")
            (task_dir(folder, key) / "error.json").unlink(missing_ok=True)
            try:
                run_task(folder, key, say=lambda m: say(f"  {m}"))
            except SystemExit as exc:  # Ctrl-C: the task saved its state in ckpt.pt
                if exc.code in (0, None):
                    raise
                return _gather(folder, manifest, wait=False, poll_s=0, min_batches=min_batches, say=say,
                               out=None), True
            except UsageError:
                raise
            except Exception as exc:  # written to error.json by run_task; the others still run
                say(f"task {key} failed: {type(exc).__name__}: {exc}")
            got = _gather(folder, manifest, wait=False, poll_s=0, min_batches=min_batches, say=say, out=None)
        return got, False


def _result_or_none(path: Path) -> dict | None:
    try:
        return _read_result(path)
    except ValueError:
        return None


# --- cost -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class TaskCost:
    key: str
    tokens: float  # trained, at most (every lr multiplier to --max-steps; the pilot to --pilot-steps)
    flops: float
    gpu_hours: float | None  # the cost model's estimate; None on CPU or without a GPU preset
    limit_gpu_hours: float  # GPUs × --time: what the allocation can spend at most


def task_costs(cfg: SweepConfig, opts: SlurmOptions, flops_per_token: float, tokens_per_example: int,
               peak_flops: float | None, mfu: float | None) -> list[TaskCost]:
    """Each task's budget: training FLOPs f·tokens plus its evaluations (forward only, f/3 per
    token), and GPU-hours = FLOPs / (peak · MFU) / 3600 (the cost model's declared step time,
    T = f·B / (G·P·u), times the steps and the G GPUs: DESIGN.md section 2)."""
    out = []
    for t in tasks_of(cfg):
        steps = cfg.pilot_steps if t.pilot else cfg.steps_limit
        tokens = len(cfg.lr_grid) * steps * t.batch * tokens_per_example
        evals = len(cfg.lr_grid) * (cfg.evals_per_run + 1) * cfg.base.eval_batches * cfg.eval_micro * tokens_per_example
        flops = flops_per_token * tokens + flops_per_token / 3 * evals
        hours = (flops / (peak_flops * mfu) / 3600 if opts.gpus_per_task and peak_flops and mfu else None)
        out.append(TaskCost(t.key, tokens, flops, hours, opts.gpus_per_task * opts.nodes_per_task * opts.time_min / 60))
    return out


def with_slurm(opts: SlurmOptions, **changes) -> SlurmOptions:
    return replace(opts, **changes)


def main_task(argv: list[str] | None = None) -> int:
    """`python -m budgetdsl.calibrate.cluster FOLDER KEY`: run one task outside Slurm (a Kubernetes
    pod, a shell); waits up to an hour for the pilot's result when it needs its target."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m budgetdsl.calibrate.cluster SWEEP_DIR TASK_KEY", file=sys.stderr)
        return 2
    try:
        run_task(Path(args[0]), args[1], wait_s=3600)
    except UsageError as exc:
        print(f"budgetdsl sweep task: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main_task())
