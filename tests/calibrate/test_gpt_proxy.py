"""The built-in GPT proxy, and the hard boundary between the model and the loop."""

import ast
import math
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from budgetdsl.calibrate.model import GPT, SIZES, gpt_config  # noqa: E402

CALIBRATE = Path(__file__).resolve().parents[2] / "calibrate"


def test_loss_at_init_is_uniform_over_the_vocabulary():
    torch.manual_seed(0)
    model = GPT(SIZES["gpt-nano"])
    batch = torch.randint(0, 256, (4, 33))
    loss = model(batch)
    assert loss.ndim == 0 and loss.item() == pytest.approx(math.log(256), abs=0.05)
    assert model.logits(batch[:, :-1]).shape == (4, 32, 256)
    with pytest.raises(ValueError, match="exceeds block_size"):
        model.logits(torch.zeros(1, 64, dtype=torch.long))


def test_cli_help_lists_the_named_sizes():
    from budgetdsl.commands.calibrate import GPT_SIZES

    assert GPT_SIZES.split("|") == list(SIZES)


def test_sizes_counts_and_flops():
    for name, cfg in SIZES.items():
        assert cfg.n_embd % cfg.n_head == 0, name
    cfg = gpt_config("gpt-nano", n_layer=2, block_size=None)
    assert cfg.n_layer == 2 and cfg.block_size == SIZES["gpt-nano"].block_size
    model = GPT(cfg)
    d, L, V = cfg.n_embd, cfg.n_layer, cfg.vocab_size
    # per layer: attention 4d², MLP 8d², two LayerNorms 2d (no biases); tied embedding Vd; final LN d
    assert model.num_params() == L * (12 * d * d + 2 * d) + V * d + d
    assert model.num_params(non_embedding=False) == model.num_params() + cfg.block_size * d
    assert model.flops_per_token() == 6 * model.num_params() + 12 * L * d * cfg.block_size


def test_model_never_imports_the_loop():
    tree = ast.parse((CALIBRATE / "model.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in imported if m and m.startswith(("calibrate", "budgetdsl.calibrate"))}
    code = ("import sys, budgetdsl.calibrate.model; "
            "print(sorted(m for m in sys.modules if m.startswith('budgetdsl.calibrate')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=CALIBRATE.parent).stdout
    assert out.strip() == "['budgetdsl.calibrate', 'budgetdsl.calibrate.model']"
