"""The built-in proxy: a small GPT (nanoGPT-shaped), and nothing else. It never imports the loop
(`calibrate.run`), which drives any `nn.Module` whose `forward(batch)` returns the mean loss.

Why a GPT: B_noise depends on the model mainly through the loss (docs/design.md section 1), so a
proxy of the planned model's family, trained on real text, is measured and transferred to the
large model at equal loss.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class GPTConfig:
    block_size: int = 128  # sequence length T; tokens per example
    vocab_size: int = 256  # byte-level by default: no tokenizer to download
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    # No dropout: it adds gradient noise of its own, which would be measured as part of B_noise
    # and does not exist (or differs) in the large run the measurement is transferred to.
    dropout: float = 0.0
    bias: bool = False  # as in nanoGPT: a little faster, no worse

    def to_dict(self) -> dict:
        return asdict(self)


# Named sizes. The CPU-sized ones keep a calibration within minutes on two cores; the larger ones
# are for a GPU. `gpt-nano` exists for tests (seconds).
SIZES: dict[str, GPTConfig] = {
    "gpt-nano": GPTConfig(block_size=32, n_layer=1, n_head=2, n_embd=32),
    "gpt-micro": GPTConfig(block_size=64, n_layer=2, n_head=4, n_embd=64),
    "gpt-mini": GPTConfig(block_size=128, n_layer=4, n_head=4, n_embd=128),
    "gpt-small": GPTConfig(block_size=256, n_layer=6, n_head=8, n_embd=256),
    "gpt2-124m": GPTConfig(block_size=1024, n_layer=12, n_head=12, n_embd=768),  # GPT-2 small shape
}


def gpt_config(size: str, **overrides) -> GPTConfig:
    """A named size with some fields replaced (None values are ignored)."""
    if size not in SIZES:
        raise KeyError(size)
    return replace(SIZES[size], **{k: v for k, v in overrides.items() if v is not None})


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0, "n_embd must be a multiple of n_head"
        self.n_head = cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.dropout = cfg.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)  # each (B, T, C)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Decoder-only transformer. `forward(batch)` takes (B, T+1) token windows and returns the
    mean next-token cross-entropy (nats per token) over the batch: the proxy interface."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying (Press & Wolf 2017), as in GPT-2
        self.apply(self._init_weights)
        # GPT-2 paper: residual projections scaled by 1/sqrt(2 * n_layer) at init.
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def logits(self, idx: torch.Tensor) -> torch.Tensor:
        B, T = idx.size()
        if T > self.config.block_size:
            raise ValueError(f"sequence of {T} tokens exceeds block_size {self.config.block_size}")
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)  # (B, T, C)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))  # (B, T, V)

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        x, y = batch[:, :-1], batch[:, 1:]  # (B, T) inputs and next-token targets
        logits = self.logits(x)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))

    def num_params(self, non_embedding: bool = True) -> int:
        """Parameter count; by default without the position embedding (Kaplan et al. 2020 count
        non-embedding parameters; the token embedding is tied to the output layer and kept)."""
        n = sum(p.numel() for p in self.parameters())
        return n - self.wpe.weight.numel() if non_embedding else n

    def flops_per_token(self) -> float:
        """Training FLOPs per token, forward + backward: 6N + 12·L·d·T (PaLM, Chowdhery et al.
        2022, appendix B), the same convention as the planner's cost model."""
        c = self.config
        return 6.0 * self.num_params() + 12.0 * c.n_layer * c.n_embd * c.block_size
