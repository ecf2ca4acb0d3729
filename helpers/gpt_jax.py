"""The mini GPT-2 in JAX: pure functions over a pytree of parameters (no Flax).

The blocks' parameters are stacked on a leading layer axis and the blocks run under jax.lax.scan,
so the block is compiled once and jax.checkpoint on the scanned block gives per-block
checkpointing that XLA keeps (on an unrolled loop the CPU compiler may merge the recomputation
back). The attention core and the GELU keep only their inputs for backward and recompute the
rest (otherwise XLA:CPU stores every head's T x T scores). Mixed
precision mirrors PyTorch's autocast: parameters stay fp32 and matrix products run in `dtype`;
LayerNorm, softmax and the loss stay fp32.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from .gpt import GPTConfig

_Params = dict[str, Any]


def minigpt_init(cfg: GPTConfig, key: jax.Array) -> _Params:
    """Fresh fp32 parameters drawn like PyTorch's defaults: embeddings normal(0, 1); weights and
    biases uniform(+-1/sqrt(fan_in)); LayerNorm scales one, shifts zero."""
    d, f, L = cfg.d_model, cfg.mlp_ratio * cfg.d_model, cfg.n_layers
    k = iter(jax.random.split(key, 12))

    def uniform(fan_in: int, *shape: int) -> jax.Array:
        bound = fan_in ** -0.5
        return jax.random.uniform(next(k), shape, jnp.float32, -bound, bound)

    blocks = {
        "ln1_g": jnp.ones((L, d)), "ln1_b": jnp.zeros((L, d)),
        "qkv_w": uniform(d, L, d, 3 * d), "qkv_b": uniform(d, L, 3 * d),
        "proj_w": uniform(d, L, d, d), "proj_b": uniform(d, L, d),
        "ln2_g": jnp.ones((L, d)), "ln2_b": jnp.zeros((L, d)),
        "fc_w": uniform(d, L, d, f), "fc_b": uniform(d, L, f),
        "out_w": uniform(f, L, f, d), "out_b": uniform(f, L, d),
    }
    return {"tok": jax.random.normal(next(k), (cfg.vocab, d)),
            "pos": jax.random.normal(next(k), (cfg.seq, d)), "blocks": blocks,
            "ln_f_g": jnp.ones(d), "ln_f_b": jnp.zeros(d), "head": uniform(d, d, cfg.vocab)}


def _layer_norm(x: jax.Array, g: jax.Array, b: jax.Array, eps: float = 1e-5) -> jax.Array:
    x = x.astype(jnp.float32)
    mean = x.mean(-1, keepdims=True)
    var = jnp.square(x - mean).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * g + b


def _dense(x: jax.Array, w: jax.Array, b: jax.Array | None, dtype: Any) -> jax.Array:
    y = x.astype(dtype) @ w.astype(dtype)
    return y if b is None else y + b.astype(dtype)


@jax.checkpoint
def _attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    """Causal attention that keeps only q, k, v for backward and recomputes the scores (on CPU,
    XLA would otherwise keep the T x T scores per head)."""
    return jax.nn.dot_product_attention(q, k, v, is_causal=True)


@jax.checkpoint
def _gelu(x: jax.Array) -> jax.Array:
    """tanh GELU that keeps only its input for backward."""
    return jax.nn.gelu(x, approximate=True)


def _block(x: jax.Array, p: _Params, n_heads: int, dtype: Any) -> jax.Array:
    """Pre-LN block: x + attention(LN(x)), then x + MLP(LN(x)); the residual stays fp32."""
    B, T, d = x.shape
    qkv = _dense(_layer_norm(x, p["ln1_g"], p["ln1_b"]), p["qkv_w"], p["qkv_b"], dtype)
    q, k, v = jnp.split(qkv.reshape(B, T, 3 * n_heads, d // n_heads), 3, axis=2)
    y = _attention(q, k, v)
    x = x + _dense(y.reshape(B, T, d), p["proj_w"], p["proj_b"], dtype)
    h = _gelu(_dense(_layer_norm(x, p["ln2_g"], p["ln2_b"]), p["fc_w"], p["fc_b"], dtype))
    return x + _dense(h, p["out_w"], p["out_b"], dtype)


def minigpt_logits(params: _Params, tokens: jax.Array, cfg: GPTConfig, *, dtype: Any = jnp.float32,
                   checkpoint: bool = False) -> jax.Array:
    """Logits (batch, T, vocab) for token ids (batch, T); checkpoint=True wraps each block in
    jax.checkpoint, so backward keeps only the block inputs and recomputes the rest."""
    T = tokens.shape[1]
    if T > cfg.seq:
        raise ValueError(f"sequence of {T} tokens is longer than the model's {cfg.seq}")
    x = params["tok"][tokens] + params["pos"][:T]

    def block(x: jax.Array, p: _Params) -> jax.Array:
        return _block(x, p, cfg.n_heads, dtype)

    if checkpoint:
        block = jax.checkpoint(block)
    x, _ = jax.lax.scan(lambda x, p: (block(x, p), None), x, params["blocks"])
    return _dense(_layer_norm(x, params["ln_f_g"], params["ln_f_b"]), params["head"], None, dtype)


def minigpt_loss(params: _Params, batch: jax.Array, cfg: GPTConfig, *, dtype: Any = jnp.float32,
                 checkpoint: bool = False) -> jax.Array:
    """Next-token cross-entropy (computed in fp32) of a (batch, T + 1) block of token ids."""
    logits = minigpt_logits(params, batch[:, :-1], cfg, dtype=dtype, checkpoint=checkpoint)
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return -jnp.take_along_axis(logp, batch[:, 1:, None], axis=-1).mean()
