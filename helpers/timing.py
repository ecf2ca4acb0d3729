"""Benchmark: time a callable correctly on any device (warm-up, synchronization, median)."""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any, Callable

from .units import fmt_timed


def synchronize(result: Any = None) -> None:
    """Wait until the work behind `result` is done: JAX arrays (and any leaf with
    block_until_ready) are blocked on, and pending CUDA work in torch is synchronized."""
    leaves = [result]
    if "jax" in sys.modules:
        import jax

        leaves = jax.tree.leaves(result)
    for leaf in leaves:
        wait = getattr(leaf, "block_until_ready", None)
        if callable(wait):
            wait()
    if "torch" in sys.modules:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()


class Benchmark:
    """Time fn(): `warmup` untimed calls (JIT compiles here), then the median of `repeats` calls,
    each waited for with synchronize(). `.time` is seconds per call; `.times` all repeats."""

    def __init__(self, fn: Callable[[], Any], desc: str = "time", *, repeats: int = 10,
                 warmup: int = 2, verbose: bool = True) -> None:
        if not callable(fn):
            raise TypeError(
                f"Benchmark needs a callable, got {type(fn).__name__}; "
                "wrap the work in a function, e.g. Benchmark(lambda: step(X))"
            )
        if repeats < 1 or warmup < 0:
            raise ValueError(f"Benchmark needs repeats >= 1 and warmup >= 0, got {repeats} and {warmup}")
        self.desc = desc
        for _ in range(warmup):
            synchronize(fn())
        self.times: list[float] = []
        for _ in range(repeats):
            start = time.perf_counter()
            synchronize(fn())
            self.times.append(time.perf_counter() - start)
        self.time = statistics.median(self.times)
        if verbose:
            print(self)

    def __str__(self) -> str:
        return f"{self.desc}: {fmt_timed(1000 * self.time, 'ms')}/call"
