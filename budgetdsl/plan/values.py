"""Evaluate a plan document's values: every quantity field to a number in base units.

Runs over the merged document (after `extends`), so a value in a base plan may refer to a field
the child sets (late binding). References are resolved on demand with cycle detection; every
problem becomes a located diagnostic, and a value that failed is marked `Failed` so that
validation does not report it twice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from budgetdsl.plan.diagnostics import Diagnostic, Location, did_you_mean
from budgetdsl.plan.expressions import ExpressionError, Quantity, evaluate
from budgetdsl.plan.model import MLA_KEYS, MOE_KEYS, LatentAttention, QuantitySpec, transformer_params
from budgetdsl.plan.schema import default_of, field_spec, numeric_paths
from budgetdsl.plan.source import MergedSource
from budgetdsl.plan.yaml_source import Path, excerpt
from budgetdsl.quantities.units import DIMENSIONLESS, EXAMPLES, dim_name

MAX_INTEGER = 10**18  # a whole number beyond this is no plan's value (see the bounds in budgetdsl.plan.model)
# What to write instead of `auto` where a field does not take it, when another form searches it.
_NO_AUTO_HINTS: dict[Path, str] = {
    ("hardware", "gpus"): "to let the solver choose the GPU count, give a range: {max: 256} (at most "
                          "256 GPUs) or {min: 64, max: 512, step: 64}",
}


@dataclass
class Failed:
    """A value that did not evaluate; its diagnostic is already recorded."""


@dataclass(frozen=True, slots=True)
class Verbatim:
    """A value that is no quantity (`auto`, null, a bool, a list): passed on as written, for the
    model to accept (`auto`) or reject with a located error."""

    value: Any


class _Evaluator:
    def __init__(self, source: MergedSource, partial: bool = False):
        self.source = source
        self.partial = partial  # a base fragment: the plans that extend it set what it refers to
        self.done: dict[Path, Quantity | Verbatim | Failed] = {}
        self.active: list[Path] = []
        self.problems: list[Diagnostic] = []

    def at(self, path: Path, col: int) -> Location:
        loc = self.source.locate(path)
        return Location(loc.file, loc.line, loc.col + col)

    def raw(self, path: Path) -> Any:
        node: Any = self.source.data
        for key in path:
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
                node = node[key]
            else:
                raise KeyError(path)
        return node

    def value_of(self, path: Path, spec: QuantitySpec) -> Quantity | Verbatim | Failed:
        if path in self.done:
            return self.done[path]
        raw = self.raw(path)
        self.active.append(path)
        try:
            q = self._evaluate(raw, path, spec)
        finally:
            self.active.pop()
        self.done[path] = q
        return q

    def _evaluate(self, raw: Any, path: Path, spec: QuantitySpec) -> Quantity | Verbatim | Failed:
        if isinstance(raw, bool) or raw is None or not isinstance(raw, (int, float, str)) or \
                (spec.auto and raw == "auto"):  # `auto`: the solver searches the value
            return Verbatim(raw)
        if isinstance(raw, (int, float)):
            number = self.gate(raw, path)
            if number is None:
                return Failed()
            q = Quantity(number)
        else:
            def resolve(ref: str, col: int) -> Quantity:
                return self.reference(ref, col, path)
            try:
                q = evaluate(raw, resolve)
            except _RefFailed:
                return Failed()
            except ExpressionError as exc:
                self.problems.append(self.bare_word(raw, path, spec, exc) or
                                     Diagnostic(self.at(path, exc.column), exc.code, exc.message, exc.hint))
                return Failed()
        if q.dim != DIMENSIONLESS and q.dim != spec.dim:
            expected = dim_name(spec.dim)
            self.problems.append(Diagnostic(
                self.at(path, 0), "dimension", f"expected {expected}, got {dim_name(q.dim)}",
                f"e.g. {EXAMPLES[spec.dim]!r}" if spec.dim in EXAMPLES else None))
            return Failed()
        return q

    def bare_word(self, raw: str, path: Path, spec: QuantitySpec, exc: ExpressionError) -> Diagnostic | None:
        """A lone word where a number (or `auto`) stands, e.g. `tensor_parallel: aut`: the expression
        reader took it for a unit; say instead what the field takes, suggesting `auto` when the word
        is close to it. None for any other problem (the expression's own diagnostic stands)."""
        word = raw.strip()
        if exc.code != "unknown-unit" or not word.isidentifier():
            return None
        at = self.at(path, raw.index(word))
        number = "a whole number" if spec.integer else "a number"
        close = did_you_mean(word.lower(), ("auto",))
        if spec.auto:
            return Diagnostic(at, "invalid-value", f"expected {number} or 'auto', got {excerpt(raw)}",
                              close or f"write {number}, or auto to let the solver search it")
        if close:
            name = excerpt(".".join(map(str, path)), 60)
            return Diagnostic(at, "invalid-value", f"expected {number}, got {excerpt(raw)}: {name} takes "
                              "no 'auto'", _NO_AUTO_HINTS.get(path))
        return None

    def gate(self, raw: int | float, path: Path) -> float | None:
        """The number gate for values YAML typed (`.inf`, `!!float 1e400`, a 400-digit integer):
        the same checks the expression evaluator makes of every result — finite, and of a size a
        double holds — located; None after recording the problem. Each field's physical range is
        then checked by validation (the bounds in `budgetdsl.plan.model`, stated in the schema)."""
        if isinstance(raw, int) and abs(raw) > MAX_INTEGER:
            self.problems.append(Diagnostic(self.at(path, 0), "out-of-range",
                                            f"the number {excerpt(raw)} is far too large",
                                            "no field of a plan takes a number above 1e18"))
            return None
        number = float(raw)
        if not math.isfinite(number):
            self.problems.append(Diagnostic(self.at(path, 0), "not-finite",
                                            f"must be a finite number, got {excerpt(raw)}",
                                            "write the number itself; .inf and .nan are not values"))
            return None
        return number

    def reference(self, ref: str, col: int, origin: Path) -> Quantity:
        path: Path = tuple(ref.split("."))
        spec = field_spec(path)
        if not isinstance(spec, QuantitySpec):
            self.problems.append(Diagnostic(
                self.at(origin, col), "reference", f"{excerpt(ref, 60)} is not a numeric field of the plan",
                did_you_mean(ref, numeric_paths())))
            raise _RefFailed
        if path in self.active:
            cycle = " -> ".join(".".join(map(str, p)) for p in [*self.active[self.active.index(path):], path])
            self.problems.append(Diagnostic(self.at(origin, col), "reference-cycle",
                                            f"values refer to each other in a cycle: {cycle}"))
            raise _RefFailed
        try:
            q = self.value_of(path, spec)
        except KeyError:
            derived = self.derived_params() if path == ("model", "params") else None
            if derived is not None:
                return Quantity(derived, spec.dim)
            default = default_of(path)
            if default is None and self.partial:
                raise _RefFailed from None
            if default is None:
                self.problems.append(Diagnostic(self.at(origin, col), "reference",
                                                f"{excerpt(ref, 60)} is not set in this plan"))
                raise _RefFailed from None
            return Quantity(float(default), spec.dim)
        if isinstance(q, Failed):
            raise _RefFailed
        if isinstance(q, Verbatim):
            self.problems.append(Diagnostic(self.at(origin, col), "reference",
                                            f"{excerpt(ref, 60)} is not a number here ({excerpt(q.value)})"))
            raise _RefFailed
        if isinstance(q.value, float) and q.dim == DIMENSIONLESS:
            return Quantity(q.value, spec.dim)  # a plain number carries its field's unit
        return q

    def derived_params(self) -> float | None:
        """`model.params` where the plan omits it: the count of its shape (`transformer_params`, as
        validation derives it), so `20 * model.params` works either way; None where the shape is
        incomplete or a value of it failed (its own diagnostic says why)."""
        numbers: dict[str, float | None] = {}
        for key in ("layers", "d_model", "vocab", "heads", "kv_heads", "ffn_hidden", *MOE_KEYS[:5], *MLA_KEYS):
            path: Path = ("model", key)
            spec = field_spec(path)
            try:
                q = self.value_of(path, spec) if isinstance(spec, QuantitySpec) and path not in self.active else None
            except KeyError:
                q = None
            if q is not None and not isinstance(q, Quantity):
                return None
            numbers[key] = q.value if q is not None and isinstance(q.value, (int, float)) else None
        model = self.source.data.get("model") if isinstance(self.source.data, dict) else None
        written = model if isinstance(model, dict) else {}
        mlp = written.get("mlp", default_of(("model", "mlp")))
        tied = written.get("tied_embeddings", default_of(("model", "tied_embeddings")))
        attention = written.get("attention", default_of(("model", "attention")))
        if mlp not in ("gelu", "swiglu") or not isinstance(tied, bool) or attention not in ("mha", "mla"):
            return None
        layers, d_model, vocab = numbers["layers"], numbers["d_model"], numbers["vocab"]
        if layers is None or d_model is None or vocab is None:
            return None
        mla = None
        if attention == "mla":  # as ModelShape.latent_attention: the four dimensions it needs
            rkv, nope, rope, v = (numbers[k] for k in MLA_KEYS[1:])
            if rkv is None or nope is None or rope is None or v is None:
                return None
            rq = numbers["q_lora_rank"]
            mla = LatentAttention(int(rkv), int(nope), int(rope), int(v), None if rq is None else int(rq))
        experts = numbers["experts"]
        return transformer_params(layers, d_model, vocab, heads=numbers["heads"], kv_heads=numbers["kv_heads"],
                                  ffn_hidden=numbers["ffn_hidden"], mlp=mlp, tied_embeddings=tied,
                                  experts=None if experts is None else int(experts),
                                  experts_per_token=None if numbers["experts_per_token"] is None
                                  else int(numbers["experts_per_token"]),
                                  expert_ffn_hidden=numbers["expert_ffn_hidden"],
                                  shared_experts=int(numbers["shared_experts"] or 0),
                                  dense_layers=int(numbers["dense_layers"] or 0), mla=mla)

    def run(self, node: Any, path: Path) -> Any:
        """The document with every quantity replaced by its value in base units."""
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                spec = field_spec((*path, key))
                if isinstance(value, dict):  # a section, or a GPU range {min, max, step}
                    out[key] = self.run(value, (*path, key))
                elif isinstance(value, list):  # a list of sections, e.g. batch-schedule stages
                    out[key] = [self.run(item, (*path, key, i)) for i, item in enumerate(value)]
                elif isinstance(spec, QuantitySpec):
                    out[key] = self.final(self.value_of((*path, key), spec), (*path, key), spec)
                else:
                    out[key] = value
            return out
        return node

    def final(self, q: Quantity | Verbatim | Failed, path: Path, spec: QuantitySpec) -> Any:
        if isinstance(q, Failed):
            return Failed()
        value = q.value
        if spec.integer and isinstance(value, float) and math.isfinite(value):
            if value != int(value):
                self.problems.append(Diagnostic(self.at(path, 0), "not-integer",
                                                f"expected a whole number, got {value:g}"))
                return Failed()
            return int(value)
        return value


class _RefFailed(Exception):
    pass


def evaluate_document(source: MergedSource, partial: bool = False) -> tuple[dict[str, Any], list[Diagnostic]]:
    """The document with every quantity in base units, and the problems found on the way.

    `partial` for a base fragment: a reference to a field it does not set is left unevaluated
    (a plan that extends the fragment sets it), not reported."""
    evaluator = _Evaluator(source, partial)
    return evaluator.run(source.data, ()), evaluator.problems
