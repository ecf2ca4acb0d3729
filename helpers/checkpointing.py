"""Activation checkpointing: the segment-length model, and reading what a framework stores for
backward or what a compiler kept of a recomputation.

Framework imports happen inside the functions that need them, so a JAX notebook never loads
torch and the other way round.
"""

from __future__ import annotations

import contextlib
import gc
import io
import math
import re
from collections import Counter
from typing import Any, Callable, Sequence


def segment_peak(n: int, s: int, c: float) -> float:
    """Peak activation memory, in units of one block input, of n blocks checkpointed every s:
    the inputs of the ceil(n/s) - 1 segments waiting their turn, plus all c units of each of the
    s blocks of the segment being recomputed (c = units one block keeps for backward, its input
    included; a block's input is the previous block's output, so no unit is counted twice)."""
    if n < 1 or s < 1 or s > n:
        raise ValueError(f"need 1 <= s <= n blocks, got s={s}, n={n}")
    if c < 1:
        raise ValueError(f"c counts the units a block keeps, its input included, so c >= 1; got {c}")
    return math.ceil(n / s) - 1 + c * s


def best_segment(n: int, c: float, choices: Sequence[int]) -> int:
    """The segment length among `choices` with the lowest segment_peak (the shortest on a tie)."""
    if not choices:
        raise ValueError("choices is empty: pass the segment lengths to compare")
    return min(sorted(choices), key=lambda s: segment_peak(n, s, c))


def count_ops(text: str, op: str) -> int:
    """How many times the operation `op` (e.g. 'stablehlo.dot_general', 'opt-barrier',
    'dot_general') is applied in a program's text: a jaxpr, lowered.as_text() or
    compiled.as_text()."""
    if not op:
        raise ValueError("op is empty: name the operation to count")
    # An application is the name followed by '(' (HLO), '[' (jaxpr) or a space (StableHLO).
    return len(re.findall(rf"(?<![\w.%-]){re.escape(op)}(?=[\s(\[])", text))


def saved_residuals(f: Callable, *args: Any) -> list[str]:
    """What JAX keeps from f's forward pass for its backward pass, one line per residual, as
    jax.ad_checkpoint.print_saved_residuals says it but without source-file locations."""
    from jax.ad_checkpoint import print_saved_residuals

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_saved_residuals(f, *args)
    # 'f32[8,4] output of dot_general from /path/file.py:3:9 (fn)' -> '... output of dot_general'
    return [re.sub(r" from (?!the argument|a literal)\S+:\d+(:\d+)?( \(.*\))?$", "", line)
            for line in out.getvalue().splitlines() if line.strip()]


def held_bytes(forward: Callable[[], Any], model: Any = None, inputs: Sequence[Any] = ()) -> int:
    """Bytes of tensor storage that forward() allocates and that are still alive once it returns
    (what autograd keeps for backward, plus the result), counted by hp.MemoryTracker; pass the
    model and inputs so views of their storage are not counted as new."""
    from .memory_torch import MemoryTracker

    tracker = MemoryTracker(model, None, inputs)
    with tracker:
        result = forward()
        gc.collect()  # storage awaiting the cycle collector is not held by the graph
        held = sum(sign * rec.nbytes for sign, rec in tracker.trace.events if rec.phase == "forward")
    del result
    return held


def count_torch_ops(fn: Callable[[], Any]) -> dict[str, int]:
    """How many times each aten operator runs during fn(), e.g. {'aten.addmm.default': 16}."""
    from .precision import dispatched_ops

    return dict(Counter(str(func) for func, _, _ in dispatched_ops(fn)))
