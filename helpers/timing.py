"""Timing on any device: Benchmark times one callable (warm-up, synchronization, median);
time_together times several in interleaved rounds and returns Timings, whose times and ratios all
follow one rule (medians, the ratio of medians, the range of the per-round ratios)."""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from .units import fmt_timed


def _leaves(tree: Any) -> Iterator[Any]:
    """The leaves of nested dicts, lists and tuples (JAX's tree_leaves when JAX is not loaded)."""
    if isinstance(tree, dict):
        for value in tree.values():
            yield from _leaves(value)
    elif isinstance(tree, (list, tuple)):
        for value in tree:
            yield from _leaves(value)
    elif tree is not None:
        yield tree


def synchronize(result: Any = None) -> None:
    """Wait until the work behind `result` is done: JAX arrays (and any leaf with
    block_until_ready) are blocked on, and pending CUDA work in torch is synchronized (on the
    current device and on every device that holds a tensor of the result)."""
    if "jax" in sys.modules:
        import jax

        leaves = jax.tree.leaves(result)
    else:
        leaves = list(_leaves(result))
    for leaf in leaves:
        wait = getattr(leaf, "block_until_ready", None)
        if callable(wait):
            wait()
    if "torch" in sys.modules:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()  # the current device: work that returned nothing
            for device in {x.device for x in leaves if isinstance(x, torch.Tensor) and x.is_cuda}:
                torch.cuda.synchronize(device)  # and every other device that holds a result


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


@dataclass
class Timings:
    """Seconds per call of several functions timed together in the same rounds.

    One rule for every figure: `timings[name]` is the median of that function's rounds, and
    `ratio(a, b)` is the ratio of those medians, so a printed ratio always agrees with the printed
    times; `spread(a, b)` is the range of the per-round ratios (each round compares runs made
    moments apart), which always contains ratio(a, b). `cpu_rounds[name]`, when recorded, holds the
    process CPU time (all its threads, time.process_time) of the same calls: `cpu_time(name)`."""

    rounds: dict[str, list[float]]
    cpu_rounds: dict[str, list[float]] = field(default_factory=dict)

    def __getitem__(self, name: str) -> float:
        if name not in self.rounds:
            raise KeyError(f"{name!r} was not timed; the timed functions are {', '.join(self.rounds)}")
        return statistics.median(self.rounds[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self.rounds)

    def cpu_time(self, name: str) -> float:
        """Median CPU seconds that this process's threads spent in one call of name, from the same
        rounds as timings[name]: above the wall time, threads worked in parallel; below, the call
        waited (for the machine's other work, or for a device)."""
        self[name]  # noqa: B018 (a clear KeyError for an unknown name)
        if name not in self.cpu_rounds:
            raise ValueError("these Timings hold no CPU times; time_together records them")
        return statistics.median(self.cpu_rounds[name])

    def ratio(self, a: str, b: str) -> float:
        """Median time of a over median time of b (the figure compare() prints)."""
        return self[a] / self[b]

    def spread(self, a: str, b: str, cpu: bool = False) -> tuple[float, float]:
        """The smallest and largest per-round ratio time(a) / time(b); of CPU times if cpu."""
        self[a], self[b]  # noqa: B018 (a clear KeyError for an unknown name)
        if cpu:
            self.cpu_time(a)  # noqa: B018 (a clear error when no CPU times were recorded)
        rounds = self.cpu_rounds if cpu else self.rounds
        per_round = [x / y for x, y in zip(rounds[a], rounds[b])]
        return min(per_round), max(per_round)

    def within_noise(self, a: str, b: str, cpu: bool = False) -> bool:
        """Whether the per-round ratios of a to b fall on both sides of 1 (no direction to read), read
        at the 3 significant digits compare() prints them with: a round of 1.004 is printed as 1, and
        a reader of 'rounds ~1 x to ~1.03 x' must not be told there is a direction."""
        lo, hi = (float(f"{r:.3g}") for r in self.spread(a, b, cpu))
        return lo <= 1 <= hi

    def direction(self, a: str, b: str) -> str | None:
        """'less' or 'more' when a takes less (more) time than b outside the noise on both clocks,
        wall and CPU time; None when either clock's rounds hold 1 or the clocks disagree."""
        if self.within_noise(a, b) or self.within_noise(a, b, cpu=True):
            return None
        wall, cpu = self.ratio(a, b) < 1, self.cpu_time(a) < self.cpu_time(b)
        return ("less" if wall else "more") if wall == cpu else None

    def compare(self, a: str, b: str, cpu: bool = False) -> str:
        """One line, 'a / b: ~1.24 x (rounds ~1.1 x to ~1.3 x)', or, when the rounds' ratios fall
        on both sides of 1, '..., within the noise of this machine (rounds ...)'. Masked figures;
        of CPU times if cpu ('a / b, CPU time: ...')."""
        lo, hi = self.spread(a, b, cpu)
        ratio = self.cpu_time(a) / self.cpu_time(b) if cpu else self.ratio(a, b)
        noise = ", within the noise of this machine" if self.within_noise(a, b, cpu) else ""
        return (f"{a} / {b}{', CPU time' * cpu}: {fmt_timed(ratio, 'x')}{noise} "
                f"(rounds {fmt_timed(lo, 'x')} to {fmt_timed(hi, 'x')})")


def time_together(fns: dict[str, Callable[[], Any]], *, repeats: int = 8, warmup: int = 1,
                  verbose: bool = True) -> Timings:
    """Time several functions in interleaved rounds (one call of each per round, every call waited
    for with synchronize(), the order reversed every other round), so that a change in machine
    load hits all of them alike. Prints the median round of each ('name: ~12.3 ms/call'), the
    figure that Timings.ratio and Timings.compare divide.

    torch.utils.benchmark.Timer measures one statement at a time (its blocked_autorange picks the
    number of runs), so two variants timed with it are timed minutes apart on a loaded machine;
    interleaved rounds are what let a ratio cancel that load, so they are written here."""
    if not fns:
        raise ValueError("pass at least one function to time, as {name: fn}")
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got {repeats} and {warmup}")
    for _ in range(warmup):
        for fn in fns.values():
            synchronize(fn())
    rounds: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns)
    for r in range(repeats):
        for name in (order if r % 2 == 0 else order[::-1]):
            start, start_cpu = time.perf_counter(), time.process_time()
            synchronize(fns[name]())
            rounds[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    timings = Timings(rounds, cpu)
    if verbose:
        for name in timings:
            print(f"{name}: {fmt_timed(1000 * timings[name], 'ms')}/call")
    return timings
