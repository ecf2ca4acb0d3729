"""The helpers' GPU branches: `pytest -m gpu tests` on a machine with CUDA (and JAX's CUDA wheels).

Every test here skips without the device it needs, so the CPU suite stays green. The workloads are
chosen so the expected figures follow by hand: elementwise products of 4 MiB tensors (no cuBLAS
workspace, and whole multiples of the caching allocator's 512-byte blocks).
"""

import numpy as np
import pytest
import torch
from torch import nn

import helpers as hp

pytestmark = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

MiB = 1 << 20
N = MiB  # float32 values: 4 MiB per tensor


def _jax_has_gpu() -> bool:
    import jax

    try:
        return jax.default_backend() == "gpu"
    except RuntimeError:  # e.g. JAX_PLATFORMS names a backend that is not installed
        return False


needs_jax_gpu = pytest.mark.skipif(not _jax_has_gpu(), reason="JAX has no GPU backend here")


def _elementwise_workload(device) -> hp.Workload:
    """w, X and G live before the step (12 MiB); the step makes y = w * X (4 MiB, kept until
    backward ends) and the gradient G * X (4 MiB): a peak of exactly 20 MiB of tensor storage."""
    w = nn.Parameter(torch.ones(N, device=device))
    X = torch.full((N,), 2.0, device=device)
    G = torch.ones(N, device=device)

    def step():
        w.grad = None
        y = w * X
        y.backward(G)

    return hp.Workload(step, nn.ParameterList([w]), None, (X, G))


ANALYTIC_PEAK = 5 * 4 * N


def _allocations(report: "helpers.memory_torch.MemoryReport") -> int:
    return sum(1 for sign, _ in report.trace.events if sign > 0)


@needs_cuda
def test_measure_memory_on_cuda_equals_the_analytic_bytes():
    report = hp.measure_memory(_elementwise_workload(torch.device("cuda")))
    assert report.device.startswith("cuda")
    assert report.peak == ANALYTIC_PEAK
    # The allocator rounds every allocation up to a multiple of 512 bytes: less than 512 extra each.
    assert ANALYTIC_PEAK <= report.cuda_allocated < ANALYTIC_PEAK + 512 * _allocations(report)
    assert report.cuda_reserved >= report.cuda_allocated
    assert "torch.cuda peak:" in str(report)


@needs_cuda
def test_the_cuda_peak_is_the_steps_own_not_the_processs():
    device = torch.device("cuda")
    earlier = torch.empty(64 * MiB, device=device)  # 256 MiB: a high-water mark set before the step
    del earlier
    elsewhere = torch.empty(16 * MiB, device=device)  # 64 MiB that other code keeps alive meanwhile
    report = hp.measure_memory(_elementwise_workload(device))
    assert ANALYTIC_PEAK <= report.cuda_allocated < ANALYTIC_PEAK + 512 * _allocations(report)
    assert torch.cuda.memory_allocated(device) >= elsewhere.numel() * 4  # it was there all along
    del elsewhere


@needs_cuda
def test_prediction_on_cuda_equals_the_measurement():
    predicted = hp.predict_memory(lambda: _elementwise_workload(torch.device("cuda")))
    assert predicted.predicted and predicted.cuda_allocated is None
    assert predicted.peak == ANALYTIC_PEAK


@needs_cuda
def test_benchmark_waits_for_cuda_kernels():
    cycles = 200_000_000  # a kernel that spins about 0.1 s on a 2 GHz GPU
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(cycles // 10)  # warm-up
    torch.cuda.synchronize()
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    kernel = start.elapsed_time(end) / 1000  # seconds
    bench = hp.Benchmark(lambda: torch.cuda._sleep(cycles), repeats=3, warmup=1, verbose=False)
    # Without synchronization each call would return as soon as the kernel is queued (microseconds).
    assert bench.time >= 0.5 * kernel > 0


@needs_cuda
def test_device_helpers_choose_the_gpu(monkeypatch):
    monkeypatch.delenv("COURSE_PROFILE", raising=False)
    assert hp.profile() == "gpu" and hp.torch_device().type == "cuda"
    assert hp.profile() == "gpu" and hp.sized(cpu=1, gpu=2) == 2
    assert f"torch on {torch.cuda.get_device_name(hp.torch_device())}" in hp.describe()


@needs_jax_gpu
def test_jax_device_memory_differences_count_what_a_step_leaves():
    import jax

    assert jax.default_backend() == "gpu"
    double = jax.jit(lambda a: a * 2)
    x = jax.device_put(np.ones(N, np.float32))
    warm = double(x).block_until_ready()  # compiled (and kept) before the first reading
    reading = hp.device_memory()
    assert set(reading) == {"bytes_in_use"}  # no process-wide high-water mark passed off as a peak
    y = double(x).block_until_ready()
    grown = hp.device_memory()["bytes_in_use"] - reading["bytes_in_use"]
    assert 0 <= grown - y.nbytes < 512  # the step's output, up to the allocator's rounding
    del warm, y
