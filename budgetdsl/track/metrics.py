"""Which logged name feeds which field of a record: a small default table, overridable by name.

Frameworks name the same quantity differently (`train/loss`, `loss`, `lm loss`); the defaults below
cover TensorBoard tags of the Hugging Face Trainer and Megatron-LM, the Trainer's `log_history`
keys and Megatron-LM's log line. `--metric tokens=my/tag` puts `my/tag` first for `tokens`;
`--metric loss=` turns the field off. The first name present in a record wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

DEFAULTS: dict[str, tuple[str, ...]] = {
    "tokens": ("tokens", "train/tokens", "num_input_tokens_seen", "train/num_input_tokens_seen",
               "consumed_tokens", "consumed-tokens"),
    "samples": ("samples", "train/samples", "consumed samples", "consumed_samples",
                "consumed-samples", "samples vs steps"),
    "loss": ("loss", "train/loss", "lm loss", "lm-loss", "train_loss", "loss/train"),
    "lr": ("lr", "learning_rate", "train/learning_rate", "learning rate", "learning-rate", "train/lr"),
    "tokens_per_s": ("tokens_per_s", "tokens_per_second", "train/tokens_per_second", "throughput/tokens_per_s"),
    "tflops_per_gpu": ("tflops_per_gpu", "throughput per GPU (TFLOP/s/GPU)", "throughput"),
    "b_noise": ("b_noise", "gns", "b_simple_tokens", "train/b_noise"),
    "b_noise_low": ("b_noise_low",),
    "b_noise_high": ("b_noise_high",),
}
MAPPED = tuple(DEFAULTS)


class MetricMap:
    """Field -> the names that feed it, first match wins; and name -> field, for tagged logs."""

    def __init__(self, overrides: Mapping[str, str] | None = None):
        names = {field: list(DEFAULTS[field]) for field in MAPPED}
        for field, name in (overrides or {}).items():
            names[field] = [name] + [n for n in names[field] if n != name] if name else []
        self.names = {field: tuple(v) for field, v in names.items()}
        # A name feeds one field: the override's field when a name is listed twice.
        self.field_of: dict[str, tuple[str, int]] = {}
        for field in MAPPED:
            for rank, name in enumerate(self.names[field]):
                if name not in self.field_of or rank == 0 and field in (overrides or {}):
                    self.field_of[name] = (field, rank)

    def pick(self, values: Mapping[str, object]) -> dict[str, object]:
        """The fields a flat record (name -> value) gives, by the first listed name present."""
        out: dict[str, object] = {}
        for field in MAPPED:
            for name in self.names[field]:
                if name in values and values[name] is not None:
                    out[field] = values[name]
                    break
        return out


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """`--metric field=name` flags as a dict; ValueError with what is wrong."""
    out: dict[str, str] = {}
    for item in items:
        field, sep, name = item.partition("=")
        field = field.strip()
        if not sep or field not in MAPPED:
            raise ValueError(f"--metric {item!r}: write FIELD=NAME with FIELD one of "
                             f"{', '.join(MAPPED)} (an empty NAME turns the field off)")
        out[field] = name.strip()
    return out
