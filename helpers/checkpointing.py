"""Activation checkpointing's segment-length model: the peak of n blocks checkpointed every s, and
the best s. Framework-free arithmetic; what a framework really keeps is read with hp.held_bytes
(PyTorch) or hp.saved_residuals (JAX)."""

from __future__ import annotations

import math
from typing import Sequence


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
