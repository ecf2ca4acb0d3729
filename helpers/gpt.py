"""The mini GPT-2 shared by both frameworks: its configuration, its parameter count, and the
synthetic token data every variant trains on. No framework is imported here, so the PyTorch model
(helpers.gpt_torch) and the JAX one (helpers.gpt_jax) can both rely on it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validate import positive


@dataclass(frozen=True)
class GPTConfig:
    """Sizes of a GPT-2-style model: pre-LN blocks, causal attention, an MLP of mlp_ratio x d."""

    vocab: int = 2048
    d_model: int = 256
    n_heads: int = 8
    n_layers: int = 6
    seq: int = 256
    mlp_ratio: int = 4

    def __post_init__(self) -> None:
        for name in ("vocab", "d_model", "n_heads", "n_layers", "seq", "mlp_ratio"):
            positive(f"GPTConfig.{name}", getattr(self, name), "pass a count such as the default "
                     f"{getattr(GPTConfig, name)}", whole=True)
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                             "every head needs the same width")

    def __str__(self) -> str:
        return (f"vocab {self.vocab}, d_model {self.d_model}, {self.n_heads} heads, "
                f"{self.n_layers} layers, sequence {self.seq}")


def gpt_param_count(cfg: GPTConfig) -> int:
    """Parameters of the mini GPT by hand: embeddings, blocks, final LayerNorm, untied head."""
    d, f = cfg.d_model, cfg.mlp_ratio * cfg.d_model
    embeddings = cfg.vocab * d + cfg.seq * d
    attention = (d * 3 * d + 3 * d) + (d * d + d)        # fused q, k, v projection; output projection
    mlp = (d * f + f) + (f * d + d)
    block = 2 * (2 * d) + attention + mlp                # two LayerNorms (scale and shift)
    return embeddings + cfg.n_layers * block + 2 * d + d * cfg.vocab


def synthetic_tokens(cfg: GPTConfig, rows: int, seed: int = 0, noise: float = 0.1) -> np.ndarray:
    """rows sequences of cfg.seq + 1 tokens (int32) that follow a fixed random successor rule, so a
    model can learn them: each token is the successor of the one before, or with probability
    `noise` a random token. Same seed, same data, in either framework."""
    positive("rows", rows, "pass the number of sequences to make", whole=True)
    if not 0.0 <= noise <= 1.0:
        raise ValueError(f"noise is a probability, got {noise}")
    rng = np.random.default_rng(seed)
    successor = rng.permutation(cfg.vocab)
    out = np.empty((rows, cfg.seq + 1), dtype=np.int64)
    out[:, 0] = rng.integers(0, cfg.vocab, rows)
    for t in range(1, cfg.seq + 1):
        random = rng.integers(0, cfg.vocab, rows)
        out[:, t] = np.where(rng.random(rows) < noise, random, successor[out[:, t - 1]])
    return out.astype(np.int32)
