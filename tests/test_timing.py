import time

import pytest

import helpers as hp


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
    import jax.numpy as jnp

    x = jnp.ones((256, 256))
    bench = hp.Benchmark(lambda: x @ x, repeats=3, warmup=1, verbose=False)
    assert bench.time > 0


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


def test_timings_ratio_is_the_median_of_per_round_ratios():
    t = hp.Timings({"a": [2.0, 20.0, 2.2], "b": [1.0, 10.0, 1.0]})
    assert t["a"] == 2.0
    assert t.ratio("a", "b") == 2.0  # rounds: 2.0, 2.0, 2.2 -> median 2.0
