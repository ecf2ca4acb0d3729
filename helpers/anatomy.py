"""Analytic memory estimates, to put a prediction next to every measurement."""

from __future__ import annotations

from dataclasses import dataclass

from ._validate import positive
from .checks import _note_call

# Bytes kept per parameter by each optimizer, in fp32 (Adam: first and second moment).
_OPTIMIZER_STATE_BYTES = {"sgd": 0, "momentum": 4, "adam": 8, "adamw": 8}
_PRECISIONS = ("fp32", "mixed")


@dataclass(frozen=True)
class ParamBytes:
    """Bytes per parameter of the persistent training state, by component."""

    parameters: int
    gradients: int
    optimizer: int
    low_precision_copies: int = 0

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer + self.low_precision_copies

    def __str__(self) -> str:
        parts = f"{self.parameters} params + {self.gradients} grads + {self.optimizer} optimizer"
        if self.low_precision_copies:
            parts += f" + {self.low_precision_copies} weight copy (16-bit)"
        return f"{self.total}P = {parts}"


def bytes_per_param(optimizer: str = "adam", precision: str = "fp32") -> ParamBytes:
    """Persistent bytes per parameter: 16 for Adam in fp32; mixed precision adds 2 for the 16-bit copy
    of the weights that the passes read (its 16-bit gradients are cast to fp32 as they arrive), so 18."""
    _note_call("bytes_per_param")  # a call before any watch counts in the first
    if optimizer not in _OPTIMIZER_STATE_BYTES:
        raise ValueError(f"unknown optimizer {optimizer!r}; use one of {', '.join(_OPTIMIZER_STATE_BYTES)}")
    if precision not in _PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; use one of {', '.join(_PRECISIONS)}")
    copies = 2 if precision == "mixed" else 0
    return ParamBytes(4, 4, _OPTIMIZER_STATE_BYTES[optimizer], copies)


def persistent_bytes(n_params: int, optimizer: str = "adam", precision: str = "fp32") -> int:
    """Bytes of parameters, gradients and optimizer state for n_params parameters."""
    _note_call("persistent_bytes")  # a call before any watch counts in the first
    positive("n_params", n_params, "pass the model's parameter count")
    return int(n_params) * bytes_per_param(optimizer, precision).total


def linear_stack_activation_bytes(batch: int, widths: list[int], dtype_bytes: int = 4) -> int:
    """Bytes a stack of Linear layers keeps for backward: the input of each layer.

    widths are the layer input widths in order (a nonlinearity between layers adds its
    output, the next layer's input, which is already counted)."""
    _note_call("linear_stack_activation_bytes")  # a call before any watch counts in the first
    positive("batch", batch, "pass the number of examples per step")
    positive("dtype_bytes", dtype_bytes, "use 4 for fp32, 2 for bf16/fp16")
    if not widths:
        raise ValueError("widths is empty: pass the input width of every layer")
    for w in widths:
        positive("every width", w, "pass the input width of every layer")
    return int(batch) * int(sum(widths)) * int(dtype_bytes)


@dataclass(frozen=True)
class GPTActivations:
    """Activation bytes of one sequence through a GPT (Korthikanti et al. 2022 count)."""

    blocks: int
    logits: int

    @property
    def total(self) -> int:
        return self.blocks + self.logits


def gpt_activation_bytes(*, d: int, n_layers: int, n_heads: int, seq: int, vocab: int,
                         value_bytes: int = 4, fused_attention: bool = True) -> GPTActivations:
    """Per-sequence activation bytes: 16d values per token and block (+ n_h T with a
    materialized attention), each of value_bytes; the logits are V fp32 values per token."""
    _note_call("gpt_activation_bytes")  # a call before any watch counts in the first
    for name, v in (("d", d), ("n_layers", n_layers), ("n_heads", n_heads), ("seq", seq),
                    ("vocab", vocab), ("value_bytes", value_bytes)):
        positive(name, v, "pass the model configuration's value")
    per_token = 16 * d + (0 if fused_attention else n_heads * seq)
    return GPTActivations(blocks=per_token * seq * n_layers * value_bytes, logits=vocab * seq * 4)
