"""The mini GPT-2 in PyTorch (an nn.Module), with optional per-block activation checkpointing."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from ._validate import positive
from .gpt import GPTConfig


class GPTBlock(nn.Module):
    """Pre-LN transformer block: x + attention(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        d, f = cfg.d_model, cfg.mlp_ratio * cfg.d_model
        self.n_heads = cfg.n_heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, f), nn.Linear(f, d)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        """Causal multi-head self-attention through F.scaled_dot_product_attention."""
        B, T, d = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class MiniGPT(nn.Module):
    """Token and position embeddings, n_layers blocks, final LayerNorm, untied head.
    With checkpoint=True each block keeps only its input and recomputes the rest in backward."""

    def __init__(self, cfg: GPTConfig, checkpoint: bool = False) -> None:
        super().__init__()
        self.cfg, self.checkpoint = cfg, checkpoint
        self.tok = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.seq, cfg.d_model)
        self.blocks = nn.ModuleList(GPTBlock(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits (batch, T, vocab) for token ids (batch, T), T <= cfg.seq."""
        T = tokens.shape[1]
        if T > self.cfg.seq:
            raise ValueError(f"sequence of {T} tokens is longer than the model's {self.cfg.seq}")
        x = self.tok(tokens) + self.pos(torch.arange(T, device=tokens.device))
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.checkpoint and self.training else block(x)
        return self.head(self.ln_f(x))

    def loss(self, batch: torch.Tensor) -> torch.Tensor:
        """Next-token cross-entropy of a (batch, T + 1) block of token ids."""
        logits = self(batch[:, :-1])
        return F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten().long())


def make_step(model: nn.Module, opt: torch.optim.Optimizer, bf16: bool, accum: int):
    """One optimizer step on a batch fed as `accum` micro-batches (bf16 autocast if asked);
    the returned step(batch) gives the batch's mean loss."""
    positive("accum", accum, "pass the number of micro-batches per step (1: no accumulation)", whole=True)

    def step(batch: torch.Tensor) -> torch.Tensor:
        if batch.shape[0] % accum:
            raise ValueError(f"a batch of {batch.shape[0]} does not split into {accum} equal micro-batches; "
                             "pick a batch size that accum divides")
        opt.zero_grad(set_to_none=True)
        total = torch.zeros((), device=batch.device)
        for micro in batch.chunk(accum):
            with torch.autocast(batch.device.type, dtype=torch.bfloat16, enabled=bf16):
                loss = model.loss(micro) / accum
            loss.backward()
            total += loss.detach()
        opt.step()
        return total
    return step
