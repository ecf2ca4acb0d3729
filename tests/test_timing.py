import time

import pytest

import helpers as hp
from helpers.timing import Timings


class FakeAsync:
    """A result whose work only happens when someone waits for it, like a queued GPU kernel."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def block_until_ready(self) -> "FakeAsync":
        time.sleep(self.seconds)
        return self


def test_benchmark_waits_for_asynchronous_work():
    bench = hp.Benchmark(lambda: FakeAsync(0.02), "async", repeats=5, warmup=1, verbose=False)
    # An unsynchronized timer would see only the call that enqueues the work (microseconds).
    assert 0.018 < bench.time < 0.2


def test_benchmark_waits_inside_pytrees():
    bench = hp.Benchmark(lambda: {"a": [FakeAsync(0.01), FakeAsync(0.01)]}, repeats=3, warmup=0,
                         verbose=False)
    assert bench.time > 0.018


def test_benchmark_reports_the_median_and_excludes_warmup():
    durations = iter([0.3, 0.001, 0.001, 0.05, 0.001])  # first call is warm-up (like a JIT compile)

    def work():
        time.sleep(next(durations))

    bench = hp.Benchmark(work, repeats=4, warmup=1, verbose=False)
    assert len(bench.times) == 4
    assert bench.time < 0.02  # median of 1, 1, 50, 1 ms; the 300 ms warm-up is not counted


def test_benchmark_prints_masked_milliseconds(capsys):
    hp.Benchmark(lambda: None, "noop", repeats=2, warmup=0)
    out = capsys.readouterr().out
    assert out.startswith("noop: ~") and out.endswith(" ms/call\n")


def test_benchmark_rejects_non_callables_with_a_hint():
    with pytest.raises(TypeError, match=r"wrap the work in a function"):
        hp.Benchmark(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="repeats >= 1"):
        hp.Benchmark(lambda: None, repeats=0)


def test_benchmark_synchronizes_jax():
    """A jitted function whose work takes 20 ms in the runtime: JAX dispatches it asynchronously
    (the call returns a not-yet-ready array), so only a timer that blocks on the result sees 20 ms."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def slow_identity(x):
        time.sleep(0.02)
        return np.asarray(x)

    f = jax.jit(lambda x: jax.pure_callback(slow_identity, jax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1)
    x = jnp.ones((4,))
    bench = hp.Benchmark(lambda: f(x), repeats=3, warmup=1, verbose=False)
    assert 0.018 < bench.time < 0.5
    assert float(f(x)[0]) == 2.0


def test_time_together_interleaves_rounds_and_compares_them(capsys):
    calls = []
    fast = lambda: calls.append("a")  # noqa: E731
    slow = lambda: (calls.append("b"), time.sleep(0.01))  # noqa: E731
    t = hp.time_together({"fast": fast, "slow": slow}, repeats=3, warmup=1)
    assert calls == ["a", "b"] + ["a", "b", "b", "a", "a", "b"]  # warm-up, then alternating order
    assert t["slow"] > 0.009 > t["fast"]
    assert list(t) == ["fast", "slow"] and len(t.rounds["slow"]) == 3
    assert t.ratio("slow", "fast") > 1 > t.ratio("fast", "slow")
    assert "slow: ~" in capsys.readouterr().out
    with pytest.raises(ValueError):
        hp.time_together({})


def test_timings_use_one_rule_medians_and_the_ratio_of_medians():
    t = Timings({"a": [2.0, 20.0, 2.2], "b": [1.0, 10.0, 1.0]})
    assert t["a"] == 2.2 and t["b"] == 1.0  # the median round of each
    assert t.ratio("a", "b") == pytest.approx(2.2)  # the ratio of the two printed figures
    assert t.spread("a", "b") == pytest.approx((2.0, 2.2))  # per-round ratios 2.0, 2.0, 2.2
    lo, hi = t.spread("a", "b")
    assert lo <= t.ratio("a", "b") <= hi
    with pytest.raises(KeyError, match="'c' was not timed"):
        t["c"]  # noqa: B018


def test_the_ratio_of_medians_lies_within_the_per_round_ratios():
    """If every round has a > r * b, the medians do too: the printed ratio never leaves the range."""
    import random

    rng = random.Random(0)
    for _ in range(500):
        n = rng.randint(1, 9)
        t = Timings({"a": [rng.uniform(0.1, 2) for _ in range(n)],
                        "b": [rng.uniform(0.1, 2) for _ in range(n)]})
        lo, hi = t.spread("a", "b")
        assert lo - 1e-12 <= t.ratio("a", "b") <= hi + 1e-12


def test_compare_prints_a_direction_only_outside_the_noise():
    apart = Timings({"slow": [2.0, 2.4, 2.2], "fast": [1.0, 1.0, 1.1]})
    line = apart.compare("slow", "fast")
    assert line == "slow / fast: ~2.2 x (rounds ~2 x to ~2.4 x)" and not apart.within_noise("slow", "fast")
    close = Timings({"x": [1.0, 1.2, 0.9], "y": [1.1, 1.0, 1.0]})
    assert close.within_noise("x", "y")
    assert close.compare("x", "y") == ("x / y: ~1 x, within the noise of this machine "
                                       "(rounds ~0.9 x to ~1.2 x)")


def test_time_together_records_the_cpu_time_of_the_same_calls():
    """A sleeping call takes wall time and almost no CPU time; a busy one takes CPU time: the CPU
    times come from the same rounds as the wall times, so the two can be compared."""
    def busy():
        end = time.process_time() + 0.02
        while time.process_time() < end:
            pass

    t = hp.time_together({"sleep": lambda: time.sleep(0.02), "busy": busy}, repeats=3, warmup=0,
                         verbose=False)
    assert len(t.cpu_rounds["sleep"]) == len(t.rounds["sleep"]) == 3
    assert t.cpu_time("sleep") < 0.5 * t["sleep"]  # waiting is not computing
    assert t.cpu_time("busy") >= 0.02  # the loop spins until its process has used 20 ms of CPU
    with pytest.raises(ValueError, match="no CPU times"):
        Timings({"a": [1.0]}).cpu_time("a")
    with pytest.raises(KeyError):
        t.cpu_time("other")


def test_a_lowest_round_printed_as_1_counts_as_touching_1():
    # rounds 1.004 and 1.03: printed '~1 x to ~1.03 x', so no direction may be claimed beside them
    edge = Timings({"a": [1.004, 1.03], "b": [1.0, 1.0]})
    assert edge.within_noise("a", "b")
    assert edge.compare("a", "b").endswith("within the noise of this machine (rounds ~1 x to ~1.03 x)")
    assert not Timings({"a": [1.006, 1.03], "b": [1.0, 1.0]}).within_noise("a", "b")  # printed ~1.01


def test_a_direction_is_stated_only_outside_the_noise_on_both_clocks():
    wall_clear = {"a": [0.5, 0.6, 0.7], "b": [1.0, 1.0, 1.0]}
    both = Timings(wall_clear, {"a": [0.8, 0.9, 0.85], "b": [1.0, 1.0, 1.0]})
    assert both.direction("a", "b") == "less" and both.direction("b", "a") == "more"
    cpu_noisy = Timings(wall_clear, {"a": [0.8, 1.1, 0.9], "b": [1.0, 1.0, 1.0]})  # CPU rounds hold 1
    assert cpu_noisy.direction("a", "b") is None and cpu_noisy.within_noise("a", "b", cpu=True)
    assert "within the noise" in cpu_noisy.compare("a", "b", cpu=True)
    wall_noisy = Timings({"a": [0.5, 1.2, 0.7], "b": [1.0, 1.0, 1.0]}, both.cpu_rounds)
    assert wall_noisy.direction("a", "b") is None
    against = Timings(wall_clear, {"a": [1.2, 1.3, 1.25], "b": [1.0, 1.0, 1.0]})  # clocks disagree
    assert against.direction("a", "b") is None
    assert against.compare("a", "b", cpu=True) == "a / b, CPU time: ~1.25 x (rounds ~1.2 x to ~1.3 x)"
    with pytest.raises(ValueError, match="no CPU times"):
        Timings(wall_clear).direction("a", "b")
