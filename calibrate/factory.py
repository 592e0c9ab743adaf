"""Resolving `--model` and `--data` (`package.module:function` or `path/file.py:function`) into a
proxy: a module, a train sampler, a held-out sampler. A user's factories (see the README):

    make_model() -> torch.nn.Module     # forward(batch) returns the mean loss over the batch
    make_data(split) -> sampler         # split "train" or "val"; may return None for "val"
    sampler(n, generator) -> batch      # n examples; the loop's generator: --seed, --resume
    sampler.tokens_per_example: int     # optional (default 1): converts examples to tokens
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from budgetdsl.calibrate.data import CorpusError, TokenSampler, load_corpus
from budgetdsl.calibrate.model import GPT, SIZES, gpt_config

_SPEC = re.compile(r"^(?P<module>[\w.]+|.+\.py):(?P<attr>[A-Za-z_]\w*)$")

Sampler = Callable[[int, torch.Generator], Any]


class FactoryError(ValueError):
    """`--model`/`--data` do not name something usable; the message says what to pass."""


@dataclass
class Proxy:
    model: torch.nn.Module
    train: Sampler
    heldout: Sampler | None  # None: the loss recorded is the training loss
    tokens_per_example: int
    model_info: dict = field(default_factory=dict)
    data_info: dict = field(default_factory=dict)


def is_factory_spec(spec: str) -> bool:
    return bool(_SPEC.match(spec)) and not Path(spec).exists()


def load_object(spec: str) -> Any:
    """Import `package.module:attr` (the current directory on the path, as `python -m` does) or
    `path/to/file.py:attr`."""
    m = _SPEC.match(spec)
    if not m:
        raise FactoryError(f"{spec!r} is not of the form package.module:function or file.py:function")
    module_name, attr = m["module"], m["attr"]
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise FactoryError(f"no such file: {module_name}")
        name = f"_budgetdsl_user_{abs(hash(str(path.resolve())))}"
        if name not in sys.modules:
            loader_spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[name] = module
            loader_spec.loader.exec_module(module)
        module = sys.modules[name]
    else:
        if "" not in sys.path and "." not in sys.path:
            sys.path.insert(0, "")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise FactoryError(f"cannot import {module_name!r}: {exc}") from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        raise FactoryError(f"{module_name} has no attribute {attr!r}") from None


def _user_model(spec: str) -> tuple[torch.nn.Module, dict]:
    model = load_object(spec)()
    if not isinstance(model, torch.nn.Module):
        raise FactoryError(f"{spec} returned {type(model).__name__}, expected a torch.nn.Module")
    n = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if n == 0:
        raise FactoryError(f"{spec} returned a module without trainable parameters")
    return model, {"name": spec, "kind": "factory", "config": {}, "n_params": n}


def build_proxy(
    model: str,
    data: str,
    *,
    block_size: int | None = None,
    n_layer: int | None = None,
    n_head: int | None = None,
    n_embd: int | None = None,
    vocab_size: int | None = None,
    data_bytes: int | None = None,
    tokens_per_example: int | None = None,
) -> Proxy:
    """Build the model (under the caller's torch seed) and the samplers."""
    if is_factory_spec(data):
        make_data = load_object(data)
        train = make_data("train")
        heldout = make_data("val")
        if not callable(train):
            raise FactoryError(f"{data} returned {type(train).__name__} for 'train', expected a sampler")
        tpe = tokens_per_example or int(getattr(train, "tokens_per_example", 1))
        data_info = {"kind": "factory", "source": data, "sha256": None, "heldout": heldout is not None}
        corpus = None
    else:
        try:
            corpus = load_corpus(data, max_bytes=data_bytes, vocab_size=vocab_size)
        except CorpusError as exc:
            raise FactoryError(str(exc)) from exc
        data_info = {**corpus.describe(), "heldout": True}

    if model in SIZES:
        if corpus is None:
            raise FactoryError(f"the built-in {model} needs token data (stdlib, text or .bin), not a factory")
        cfg = gpt_config(model, block_size=block_size, n_layer=n_layer, n_head=n_head, n_embd=n_embd,
                         vocab_size=corpus.vocab_size)
        if cfg.n_embd % cfg.n_head:  # the attention splits the width into heads
            changed = "--n-embd" if n_embd is not None else "--n-head"
            raise FactoryError(f"{changed}: {model} with n_embd {cfg.n_embd} and n_head {cfg.n_head}: "
                               "n_embd must be a multiple of n_head")
        net = GPT(cfg)
        try:
            train = TokenSampler(corpus.train, cfg.block_size)
            heldout = TokenSampler(corpus.heldout, cfg.block_size)
        except CorpusError as exc:
            raise FactoryError(str(exc)) from exc
        tpe = tokens_per_example or cfg.block_size
        model_info = {"name": model, "kind": "gpt", "config": cfg.to_dict(), "n_params": net.num_params(),
                      "flops_per_token": net.flops_per_token()}
    elif is_factory_spec(model):
        if corpus is not None:
            raise FactoryError("a --model factory needs a --data factory (package.module:function)")
        net, model_info = _user_model(model)
    else:
        raise FactoryError(
            f"unknown model {model!r}: use one of {', '.join(SIZES)} or package.module:function"
        )
    return Proxy(net, train, heldout, tpe, model_info, data_info)
