"""Encoding helpers shared by the formats: every untrusted string leaves through one of these.

`sh` (one shell word; bash's $'...' when it holds control characters, so a script stays one line
per command), `comment` (a `#` comment a newline cannot end), `dns1035` (a Kubernetes name, with a
hash of the original when it had to change, so two plans never share a job name), `dump_yaml`
(PyYAML's safe dumper, block style, key order kept, strings that would read as other types quoted).
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from typing import Any

import yaml

from budgetdsl.exports.spec import LaunchSpec, format_float
from budgetdsl.io.terminal_text import inert_needed, json_text

_BASH_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def sh(word: str) -> str:
    """Quote one word for bash so that it is read back exactly, whatever it holds."""
    if all(ch.isprintable() for ch in word):
        return shlex.quote(word)
    out = []
    for ch in word:
        if ch in _BASH_ESCAPES:
            out.append(_BASH_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        else:  # its UTF-8 bytes as \xHH: bash's \uHHHH depends on the locale, bytes do not
            out.append("".join(f"\\x{b:02x}" for b in ch.encode("utf-8")))
    return "$'" + "".join(out) + "'"


def literal_note(words: list[str]) -> str:
    """A shellcheck directive for scripts that single-quote `$` or a backtick from the plan on
    purpose (SC2016 says "expressions don't expand in single quotes": that is the point)."""
    if any("$" in w or "`" in w for w in words):
        return "# shellcheck disable=SC2016  # plan text is quoted so that nothing in it expands\n"
    return ""


def comment(text: str) -> str:
    """Text safe inside a one-line comment (shell or YAML)."""
    return "".join(ch if ch.isprintable() else json.dumps(ch)[1:-1] for ch in text)


def quoted_name(name: str) -> str:
    """The plan's name for a header: JSON string syntax, so quotes and newlines show as escapes."""
    return comment(json.dumps(name, ensure_ascii=False))


def dns1035(name: str, max_len: int = 40) -> str:
    """A valid RFC 1035 label derived from `name` (lower-case letters, digits, '-', starting with a
    letter, ending alphanumeric). `max_len` leaves room for the suffixes the operators append to pod
    names (`-master-0`, `-worker-127`, `-node-0-0`) within Kubernetes' 63 characters."""
    label = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    label = re.sub(r"^[^a-z]+", "", label)  # must start with a letter
    if label == name and len(label) <= max_len:
        return label
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:6]
    stem = (label or "run")[: max_len - len(digest) - 1].rstrip("-")
    return f"{stem}-{digest}"


class _Dumper(yaml.SafeDumper):
    """SafeDumper writing multi-line strings (a run script) as literal blocks. PyYAML itself falls
    back to a double-quoted scalar with escapes when a string cannot be a block (control
    characters, trailing spaces), so untrusted text stays exact either way."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if inert_needed(value):  # double-quoted, so that dump_yaml can write them as \u escapes
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(obj: Any) -> str:
    """PyYAML counts C1 controls, NEL and bidi overrides printable and writes them raw; a string
    holding one is double-quoted (_str), where a backslash-u escape is the same character, inert."""
    return json_text(yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                               allow_unicode=True, width=4096))


def time_limit(seconds: int) -> str:
    """Slurm's D-HH:MM:SS."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"


def header(spec: LaunchSpec, fmt: str, uses: frozenset[str], extra: list[str] | None = None) -> list[str]:
    """The lines (without comment markers) every text format opens with: what the file launches,
    the batch arithmetic, where the lr came from, what was defaulted and what to watch."""
    s = spec
    lines = [
        f"budgetdsl export --to {fmt}: plan {quoted_name(s.name)}. Generated: re-export, do not edit.",
        f"{s.nodes} node{'s' if s.nodes != 1 else ''} x {s.gpus_per_node} GPU{'s' if s.gpus_per_node != 1 else ''}"
        f" = {s.gpus} GPU{'s' if s.gpus != 1 else ''} = "
        f"data {s.data_parallel} x tensor {s.tensor_parallel} x pipeline {s.pipeline_parallel}"
        + (f" x context {s.context_parallel}" if s.context_parallel > 1 else "") + " parallel"
        + (f"; {s.experts} experts (top-{s.experts_per_token}) over expert parallel {s.expert_parallel}"
           if s.experts is not None else ""),
        f"global batch {s.global_batch_sequences} sequences = micro-batch {s.micro_batch} x "
        f"accumulation {s.grad_accum} x data parallel {s.data_parallel}; "
        f"{s.global_batch_tokens} tokens of {s.seq_len}",
        f"{s.steps} steps, {s.warmup_steps} warmup, then constant lr; ZeRO stage {s.zero_stage}; {s.precision}",
    ]
    if s.lr_derivation:
        lines.append(comment(s.lr_derivation))
    if s.time_limit_s is not None:
        lines.append(f"time limit {time_limit(s.time_limit_s)} = budget.deadline")
    lines += [comment(n) for n in s.notes]
    lines += [comment(e) for e in (extra or [])]
    lines += [f"defaulted: {comment(str(d))}" for d in s.defaults_for(uses)]
    lines += [f"warning: {comment(w)}" for w in s.warnings]
    return lines


def hash_comments(lines: list[str]) -> str:
    return "".join(f"# {line}\n" if line else "#\n" for line in lines)


def torchrun_flags(spec: LaunchSpec) -> list[str]:
    """The flags every torchrun launch carries: integers, never 'auto'."""
    return [f"--nnodes={spec.nodes}", f"--nproc-per-node={spec.gpus_per_node}"]


def fmt_lr(spec: LaunchSpec) -> str | None:
    return None if spec.lr is None else format_float(spec.lr)
