"""Two real architectures in JAX, written for the course, and their AdamW step planned at full size.

- GPT-2 (learned positions, LayerNorm, tanh GELU, tied embedding) and a Llama-family decoder
  (grouped-query attention, SwiGLU, RMSNorm, rotary positions, untied head), as pure functions over a
  pytree of parameters: the same parameter count as Hugging Face's models of the same config.
- plan_step compiles one optax.adamw step from abstract shapes (jax.ShapeDtypeStruct for parameters,
  optimizer state and batch, through jax.jit(...).lower(...).compile()): the compiler's memory plan of
  the full-size step, and no array of the model's size is ever allocated.
- plan_per_sequence fits the plan at two micro-batches to constant + b x per-sequence and checks the
  fit at a third; plan_per_layer does the same in the number of layers. XLA:CPU's plans are not affine
  to the byte (full-size GPT-2 in fp32 grows by 1.80 GB from b = 1 to 2, by 0.98 GB a sequence from 2
  to 4), so the fit reports its miss instead of assuming none.

As in helpers.gpt_jax (whose building blocks these reuse): blocks stacked on a layer axis under
jax.lax.scan, so a block compiles once whatever the depth; the attention core and the activation
function keep only their inputs for backward (as a fused attention kernel does); mixed precision is
autocast's: fp32 parameters (the master weights), matrix products in `dtype`, norms, softmax and the
loss in fp32, the residual stream in fp32.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp

from ._validate import positive
from .gpt_jax import _attention, _dense, _gelu, _layer_norm
from .memory_jax import XlaMemoryPlan, xla_memory_plan
from .program_text import dot_operand_dtypes, _while_carries

_Params = dict[str, Any]
# A plan is read, never run: LLVM need not optimize its machine code. XLA's HLO passes, and so the optimized
# program and its memory plan, are the same as at the default level (tests/test_models_jax.py); the compile
# takes about half the time.
PLAN_ONLY = {"xla_backend_optimization_level": 0}
_FAMILIES = ("gpt2", "llama")
_DTYPES = {"fp32": jnp.float32, "bf16": jnp.bfloat16}


@dataclass(frozen=True)
class TransformerShape:
    """Sizes of a decoder-only transformer: family 'gpt2' or 'llama', the rest as in a Hugging Face
    config (n_kv_heads < n_heads is grouped-query attention; d_ff is the MLP's inner width)."""

    family: str
    vocab: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    max_seq: int
    tied: bool
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0

    def __post_init__(self) -> None:
        if self.family not in _FAMILIES:
            raise ValueError(f"unknown family {self.family!r}: use one of {', '.join(_FAMILIES)}")
        for name in ("vocab", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "max_seq"):
            positive(f"TransformerShape.{name}", getattr(self, name), "pass the config's value", whole=True)
        if self.d_model % self.n_heads or self.n_heads % self.n_kv_heads:
            raise ValueError(f"d_model={self.d_model}, n_heads={self.n_heads}, n_kv_heads={self.n_kv_heads}: "
                             "d_model must divide into n_heads heads, and n_heads into n_kv_heads groups")
        if self.family == "gpt2" and self.n_kv_heads != self.n_heads:
            raise ValueError("GPT-2 has no grouped-query attention: pass n_kv_heads = n_heads")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def with_layers(self, n_layers: int) -> "TransformerShape":
        """The same model with another number of blocks (to plan a slice of a deep model)."""
        return dataclasses.replace(self, n_layers=n_layers)

    def __str__(self) -> str:
        kv = f" ({self.n_kv_heads} key/value)" if self.n_kv_heads != self.n_heads else ""
        return (f"{self.family}: {self.n_layers} layers, d {self.d_model}, {self.n_heads} heads{kv}, "
                f"d_ff {self.d_ff}, vocab {self.vocab}, {'tied' if self.tied else 'untied'} head")


# GPT-2 small as transformers.GPT2Config() builds it (124,439,808 parameters).
GPT2_124M = TransformerShape("gpt2", vocab=50257, d_model=768, n_layers=12, n_heads=12, n_kv_heads=12,
                             d_ff=3072, max_seq=1024, tied=True)
# LLAMA_1B, the Llama-family 1B-class shape of both twins, is read from helpers/configs/llama-1b.json
# (Llama-3.2-1B's: GQA 32/8 heads, SwiGLU 8192, tied head; 1,235,814,400 parameters) below shape_from_hf.


def shape_from_hf(config: Any) -> TransformerShape:
    """The TransformerShape of a Hugging Face GPT2Config or LlamaConfig, given as the config object
    or its dict (config.json's contents); transformers itself is not imported."""
    get = config.get if isinstance(config, Mapping) else (lambda k, d=None: getattr(config, k, d))
    kind = get("model_type")
    if kind == "gpt2":
        d = get("n_embd", 768)
        return TransformerShape("gpt2", get("vocab_size", 50257), d, get("n_layer", 12), get("n_head", 12),
                                get("n_head", 12), get("n_inner") or 4 * d, get("n_positions", 1024),
                                bool(get("tie_word_embeddings", True)), get("layer_norm_epsilon", 1e-5))
    if kind == "llama":
        for flag in ("attention_bias", "mlp_bias"):
            if get(flag, False):
                raise ValueError(f"this Llama config sets {flag}=True; the course's Llama has no biases")
        heads = get("num_attention_heads")
        if get("head_dim") not in (None, get("hidden_size") // heads):
            raise ValueError(f"head_dim={get('head_dim')} is not hidden_size / num_attention_heads; "
                             "the course's Llama assumes it is")
        rope = get("rope_parameters") or {}
        theta = get("rope_theta") or (rope.get("rope_theta") if isinstance(rope, Mapping) else None) or 10000.0
        return TransformerShape("llama", get("vocab_size"), get("hidden_size"), get("num_hidden_layers"),
                                heads, get("num_key_value_heads") or heads, get("intermediate_size"),
                                get("max_position_embeddings"), bool(get("tie_word_embeddings", False)),
                                get("rms_norm_eps", 1e-6), float(theta))
    raise ValueError(f"model_type {kind!r} is not one the course builds in JAX: pass a GPT-2 or Llama config")


# The Llama-3.2-1B shape that helpers.estimate traces in PyTorch (one Llama shape in both twins).
LLAMA_1B = shape_from_hf(json.loads((Path(__file__).parent / "configs" / "llama-1b.json").read_text()))


def transformer_param_count(shape: TransformerShape) -> int:
    """Parameters by hand: embeddings, blocks, final norm, and the head when it is not tied."""
    d, f, V, L = shape.d_model, shape.d_ff, shape.vocab, shape.n_layers
    head = 0 if shape.tied else V * d
    if shape.family == "gpt2":
        block = 2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * f + f) + (f * d + d)
        return V * d + shape.max_seq * d + L * block + 2 * d + head
    kv = shape.n_kv_heads * shape.head_dim
    block = 2 * d + d * d + 2 * d * kv + d * d + 3 * d * f   # two RMSNorms, q k v o, gate up down
    return V * d + L * block + d + head


def transformer_init(shape: TransformerShape, key: jax.Array) -> _Params:
    """Fresh fp32 parameters (matrices normal(0, 0.02), norms one, biases zero), blocks stacked on a
    leading layer axis. Under jax.eval_shape this gives the shapes alone, allocating nothing."""
    d, f, V, L = shape.d_model, shape.d_ff, shape.vocab, shape.n_layers
    keys = iter(jax.random.split(key, 10))

    def normal(*s: int) -> jax.Array:
        return 0.02 * jax.random.normal(next(keys), s, jnp.float32)

    params: _Params = {"tok": normal(V, d)}
    if shape.family == "gpt2":
        params["pos"] = normal(shape.max_seq, d)
        params["blocks"] = {
            "ln1_g": jnp.ones((L, d)), "ln1_b": jnp.zeros((L, d)),
            "qkv_w": normal(L, d, 3 * d), "qkv_b": jnp.zeros((L, 3 * d)),
            "proj_w": normal(L, d, d), "proj_b": jnp.zeros((L, d)),
            "ln2_g": jnp.ones((L, d)), "ln2_b": jnp.zeros((L, d)),
            "fc_w": normal(L, d, f), "fc_b": jnp.zeros((L, f)),
            "out_w": normal(L, f, d), "out_b": jnp.zeros((L, d))}
        params["ln_f_g"], params["ln_f_b"] = jnp.ones(d), jnp.zeros(d)
    else:
        kv = shape.n_kv_heads * shape.head_dim
        params["blocks"] = {
            "norm1": jnp.ones((L, d)), "q_w": normal(L, d, d), "k_w": normal(L, d, kv),
            "v_w": normal(L, d, kv), "o_w": normal(L, d, d), "norm2": jnp.ones((L, d)),
            "gate_w": normal(L, d, f), "up_w": normal(L, d, f), "down_w": normal(L, f, d)}
        params["norm_f"] = jnp.ones(d)
    if not shape.tied:
        params["head"] = normal(d, V)
    return params


def _rms_norm(x: jax.Array, g: jax.Array, eps: float) -> jax.Array:
    x = x.astype(jnp.float32)
    return x * jax.lax.rsqrt(jnp.square(x).mean(-1, keepdims=True) + eps) * g


def _rope(x: jax.Array, theta: float) -> jax.Array:
    """Rotary positions on (batch, T, heads, head_dim), Hugging Face's rotate-half layout."""
    T, hd = x.shape[1], x.shape[-1]
    inv = 1.0 / theta ** (jnp.arange(0, hd, 2, dtype=jnp.float32) / hd)
    angles = jnp.arange(T, dtype=jnp.float32)[:, None] * inv[None, :]
    cos, sin = (jnp.concatenate([a, a], -1)[None, :, None, :] for a in (jnp.cos(angles), jnp.sin(angles)))
    x1, x2 = jnp.split(x.astype(jnp.float32), 2, axis=-1)
    return (x * cos + jnp.concatenate([-x2, x1], -1) * sin).astype(x.dtype)


@jax.checkpoint
def _swiglu(gate: jax.Array, up: jax.Array) -> jax.Array:
    """silu(gate) * up, keeping only its two inputs for backward."""
    return jax.nn.silu(gate) * up


def _gpt2_block(x: jax.Array, p: _Params, shape: TransformerShape, dtype: Any) -> jax.Array:
    B, T, d = x.shape
    qkv = _dense(_layer_norm(x, p["ln1_g"], p["ln1_b"], shape.norm_eps), p["qkv_w"], p["qkv_b"], dtype)
    q, k, v = jnp.split(qkv.reshape(B, T, 3 * shape.n_heads, shape.head_dim), 3, axis=2)
    x = x + _dense(_attention(q, k, v).reshape(B, T, d), p["proj_w"], p["proj_b"], dtype)
    h = _gelu(_dense(_layer_norm(x, p["ln2_g"], p["ln2_b"], shape.norm_eps), p["fc_w"], p["fc_b"], dtype))
    return x + _dense(h, p["out_w"], p["out_b"], dtype)


def _llama_block(x: jax.Array, p: _Params, shape: TransformerShape, dtype: Any) -> jax.Array:
    B, T, d = x.shape
    n = _rms_norm(x, p["norm1"], shape.norm_eps)
    q = _dense(n, p["q_w"], None, dtype).reshape(B, T, shape.n_heads, shape.head_dim)
    k = _dense(n, p["k_w"], None, dtype).reshape(B, T, shape.n_kv_heads, shape.head_dim)
    v = _dense(n, p["v_w"], None, dtype).reshape(B, T, shape.n_kv_heads, shape.head_dim)
    y = _attention(_rope(q, shape.rope_theta), _rope(k, shape.rope_theta), v)   # GQA: k, v heads shared
    x = x + _dense(y.reshape(B, T, d), p["o_w"], None, dtype)
    n = _rms_norm(x, p["norm2"], shape.norm_eps)
    h = _swiglu(_dense(n, p["gate_w"], None, dtype), _dense(n, p["up_w"], None, dtype))
    return x + _dense(h, p["down_w"], None, dtype)


def transformer_logits(params: _Params, tokens: jax.Array, shape: TransformerShape, *, dtype: Any = jnp.float32,
              checkpoint: bool = False) -> jax.Array:
    """Logits (batch, T, vocab) for token ids (batch, T); checkpoint=True wraps each block in
    jax.checkpoint, so backward keeps only the block inputs and recomputes the rest."""
    T = tokens.shape[1]
    if T > shape.max_seq:
        raise ValueError(f"sequence of {T} tokens is longer than the model's {shape.max_seq}")
    x = params["tok"][tokens]
    if shape.family == "gpt2":
        x = x + params["pos"][:T]
        body = _gpt2_block
    else:
        body = _llama_block

    def block(x: jax.Array, p: _Params) -> jax.Array:
        return body(x, p, shape, dtype)

    if checkpoint:
        block = jax.checkpoint(block)
    x, _ = jax.lax.scan(lambda x, p: (block(x, p), None), x, params["blocks"])
    x = (_layer_norm(x, params["ln_f_g"], params["ln_f_b"], shape.norm_eps) if shape.family == "gpt2"
         else _rms_norm(x, params["norm_f"], shape.norm_eps))
    head = params["tok"].T if shape.tied else params["head"]
    return _dense(x, head, None, dtype)


def transformer_loss(params: _Params, batch: jax.Array, shape: TransformerShape, *, dtype: Any = jnp.float32,
            checkpoint: bool = False) -> jax.Array:
    """Next-token cross-entropy (in fp32) of a (batch, T + 1) block of token ids."""
    logits = transformer_logits(params, batch[:, :-1], shape, dtype=dtype, checkpoint=checkpoint)
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return -jnp.take_along_axis(logp, batch[:, 1:, None], axis=-1).mean()


def make_transformer_step(shape: TransformerShape, *, precision: str = "fp32", checkpoint: bool = False,
                    learning_rate: float = 3e-4, weight_decay: float = 0.1) -> tuple[Callable, Any]:
    """(step, optimizer): step(params, opt_state, batch) -> (params, opt_state, loss), one
    optax.adamw update; precision 'fp32' or 'bf16' (matrix products in bf16, fp32 master weights)."""
    if precision not in _DTYPES:
        raise ValueError(f"unknown precision {precision!r}: use one of {', '.join(_DTYPES)}")
    import optax

    opt = optax.adamw(learning_rate, weight_decay=weight_decay)
    dtype = _DTYPES[precision]

    def step(params: _Params, opt_state: Any, batch: jax.Array) -> tuple[_Params, Any, jax.Array]:
        loss, grads = jax.value_and_grad(transformer_loss)(params, batch, shape, dtype=dtype, checkpoint=checkpoint)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return step, opt


@dataclass(frozen=True)
class StepPlan:
    """The compiler's plan of one AdamW step at full size, compiled from abstract shapes."""

    shape: TransformerShape
    batch: int
    seq: int
    precision: str
    checkpoint: bool
    memory: XlaMemoryPlan
    param_bytes: int            # fp32 parameters (as many bytes again for each AdamW moment)
    compile_seconds: float      # lower + compile, on this machine
    dots_before: dict           # dot instructions by operand dtypes, as JAX lowered them
    dots_after: dict            # ... and as the compiler left them for this backend
    loops: tuple = ()           # the compiled program's while loops: (op_name, carried array types)

    def __str__(self) -> str:
        ck = " + checkpoint" if self.checkpoint else ""
        return f"{self.shape.family} b={self.batch} T={self.seq} {self.precision}{ck}: {self.memory}"


def _abstract_state(shape: TransformerShape, opt: Any) -> tuple[Any, Any]:
    """(parameters, optimizer state) as ShapeDtypeStruct pytrees: shapes and dtypes, no data."""
    params = jax.eval_shape(lambda: transformer_init(shape, jax.random.key(0)))
    return params, jax.eval_shape(opt.init, params)


@functools.lru_cache(maxsize=128)
def plan_step(shape: TransformerShape, batch: int, seq: int, *, precision: str = "fp32",
              checkpoint: bool = False, donate: bool = True) -> StepPlan:
    """Compile one AdamW step for a (batch, seq + 1) block of token ids from abstract shapes alone and
    return its plan; donate=True lets the new parameters and state reuse the old ones' buffers. The
    same arguments return the same plan (compiled once, with that compile's time)."""
    positive("batch", batch, "pass the micro-batch in sequences", whole=True)
    positive("seq", seq, "pass the sequence length in tokens", whole=True)
    if seq > shape.max_seq:
        raise ValueError(f"seq={seq} is longer than the model's {shape.max_seq} positions")
    step, opt = make_transformer_step(shape, precision=precision, checkpoint=checkpoint)
    params, state = _abstract_state(shape, opt)
    tokens = jax.ShapeDtypeStruct((batch, seq + 1), jnp.int32)
    start = time.perf_counter()
    lowered = jax.jit(step, donate_argnums=(0, 1) if donate else ()).lower(params, state, tokens)
    compiled = lowered.compile(compiler_options=PLAN_ONLY)
    seconds = time.perf_counter() - start
    return StepPlan(shape, batch, seq, precision, checkpoint, xla_memory_plan(compiled),
                    4 * transformer_param_count(shape), seconds, dot_operand_dtypes(lowered.as_text("hlo")),
                    dot_operand_dtypes(compiled.as_text()), tuple(_while_carries(compiled.as_text())))


@dataclass(frozen=True)
class AffineFit:
    """A plan's peak (arguments + outputs + temp - aliased) as constant + slope x n, fitted at two
    values of n and checked at a third. XLA packs its temporaries into one heap, so the peak need not
    be affine to the byte: `miss` says by how much it is not."""

    variable: str
    constant: int
    slope: int
    at: tuple[int, int, int]
    peaks: tuple[int, int, int]

    @property
    def predicted(self) -> int:
        """The fit's peak at the third point."""
        return self.constant + self.slope * self.at[2]

    @property
    def miss(self) -> int:
        """The third plan's peak less the fit's: 0 when the plan is affine to the byte."""
        return self.peaks[2] - self.predicted

    @property
    def affine(self) -> bool:
        """True when the fit predicts the third plan to the byte."""
        return self.miss == 0

    @property
    def relative_miss(self) -> float:
        """The miss as a fraction of the third plan's peak."""
        return self.miss / self.peaks[2]

    def __str__(self) -> str:
        verdict = "exact" if self.affine else f"off by {self.miss:+,} bytes, {self.relative_miss:+.2%}"
        return (f"plan total = {self.constant:,} + {self.slope:,} x {self.variable}; at {self.variable}="
                f"{self.at[2]} the fit gives {self.predicted:,} bytes, the plan {self.peaks[2]:,} ({verdict})")


def _fit(variable: str, at: tuple[int, int, int], plans: list[StepPlan]) -> AffineFit:
    if not (0 < at[0] < at[1]) or at[2] in at[:2] or at[2] <= 0:
        raise ValueError(f"{variable}: pass three distinct positive values, the first two increasing, got {at}")
    peaks = tuple(p.memory.total for p in plans)
    slope = (peaks[1] - peaks[0]) // (at[1] - at[0])   # a remainder shows up as a miss at the third point
    return AffineFit(variable, peaks[0] - slope * at[0], slope, at, peaks)  # type: ignore[arg-type]


def plan_per_sequence(shape: TransformerShape, seq: int, batches: tuple[int, int, int] = (4, 8, 16),
                       **options: Any) -> tuple[AffineFit, list[StepPlan]]:
    """The step's planned peak as constant + micro-batch x per-sequence bytes (fit at batches[0] and
    batches[1], checked at batches[2]) and the three plans; options go to plan_step. The default
    starts at 4: the smallest micro-batches compile differently (GPT-2 124M at T = 1024, fp32: a fit
    from 1 and 2 missed 4 by 22% where one from 4 and 8 hit 16 to the byte); read `fit.miss`."""
    plans = [plan_step(shape, b, seq, **options) for b in batches]
    return _fit("b", batches, plans), plans


def plan_per_layer(shape: TransformerShape, batch: int, seq: int, layers: tuple[int, int, int] = (2, 3, 4),
                    **options: Any) -> tuple[AffineFit, list[StepPlan]]:
    """The step's planned peak as constant + layers x per-layer bytes, the same model at fewer blocks
    (fit at layers[0] and layers[1], checked at layers[2]); extrapolate to the full depth with
    fit.constant + fit.slope * shape.n_layers. The default starts at 2 layers: a one-step scan
    compiles differently (a fit from 1 and 2 layers missed 3 layers by 8% where one from 2 and 3
    missed 4 by 0.5%)."""
    plans = [plan_step(shape.with_layers(n), batch, seq, **options) for n in layers]
    return _fit("layers", layers, plans), plans
