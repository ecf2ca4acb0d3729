"""The tracker (hp.measure_memory) checked by something other than itself.

On the CPU the oracle is torch's own profiler: torch.profiler.profile(profile_memory=True,
record_shapes=True, with_stack=True) records every allocation and free the CPU allocator makes, and
its memory timeline (torch.profiler._memory_profiler.MemoryProfileTimeline) files each tensor under
a category it infers from the data flow of the recorded operators (PARAMETER, OPTIMIZER_STATE,
INPUT, ACTIVATION, GRADIENT, TEMPORARY, AUTOGRAD_DETAIL). The tracker counts tensor storage from a
TorchDispatchMode instead, so the two share no code. The same step (an MLP of three blocks with
Adam, its optimizer state already made) is measured by both, and at each one's peak:

- the peak bytes agree exactly without checkpointing (fp32 and bf16 autocast); with checkpointing
  the profiler sees 5,056 bytes more: the CPU generator state (torch.get_rng_state()) that
  torch.utils.checkpoint saves per segment to replay dropout is made in C++ without dispatching an
  operator, so no TorchDispatchMode sees it (the profiler files it under no category). Tolerance:
  0 bytes, or at most one RNG state per checkpointed segment (under 0.1% of the peak here);
- parameters, gradients, optimizer state and inputs agree exactly, category for category;
- where the tracker is finer the sums agree: its cast copies + activations are the profiler's
  ACTIVATION (the profiler has no category for autocast's weight copies: backward uses them, so
  they are activations by data flow), and its recomputed + temporaries are the profiler's
  TEMPORARY + AUTOGRAD_DETAIL (the profiler files everything backward allocates there, a
  checkpoint's rerun included).

What holds on any model is the sums, not every category: on a Hugging Face GPT-2
(tests/test_memory_hf.py) the profiler files some forward tensors under INPUT by data flow, so
there parameters, gradients and optimizer state agree exactly, inputs + cast copies + activations
is the profiler's INPUT + ACTIVATION less what only the profiler sees (at most 64 bytes there), and
recomputed + temporaries is its TEMPORARY + AUTOGRAD_DETAIL exactly.

On CUDA (the `gpu` marker, skipped here) the oracle is the caching allocator's
torch.cuda.max_memory_allocated: it rounds every block up to 512 bytes and counts what no tensor
owns, so the bound is relative: within 2% of the allocator's peak for a step of ~40 MB.
"""

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

import helpers as hp
from helpers.memory_torch import PROFILER_CATEGORIES

RNG_STATE = torch.get_rng_state().numel()  # 5,056 bytes on the CPU
SEGMENTS = 3


def _workload(mode: str, device: str = "cpu") -> hp.Workload:
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256))
                            for _ in range(SEGMENTS)]).to(device)
    opt = torch.optim.Adam(model.parameters())
    X = torch.randn(512, 256, device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, torch.bfloat16, enabled=mode == "autocast"):
            h = X
            for block in model:
                h = checkpoint(block, h, use_reentrant=False) if mode == "checkpoint" else block(h)
        h.float().square().mean().backward()
        opt.step()

    step()  # the optimizer state exists before either measurement
    return hp.Workload(step, model, opt, (X,))


def _profiler_peak(step) -> tuple[int, dict[str, int]]:
    """The profiler's memory timeline at its highest point: (total bytes, bytes by category)."""
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX, MemoryProfileTimeline

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        step()
    _, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline("cpu")
    i = max(range(len(sizes)), key=lambda k: sum(sizes[k]))
    names = ["uncategorized" if c is None else c.name for c in _CATEGORY_TO_INDEX]
    return sum(sizes[i]), {name: sizes[i][k + 1] for k, name in enumerate(names)}


def _sum(breakdown: dict[str, int], names) -> int:
    return sum(breakdown.get(n, 0) for n in names)


@pytest.mark.parametrize("mode", ["fp32", "autocast", "checkpoint"])
def test_tracker_agrees_with_the_profilers_memory_timeline(mode):
    work = _workload(mode)
    report = hp.measure_memory(work)
    total, theirs = _profiler_peak(work.step)
    ours = report.peak_breakdown
    if mode == "checkpoint":
        assert 0 < total - report.peak <= SEGMENTS * RNG_STATE
        assert total - report.peak == theirs["uncategorized"]  # the RNG states, and nothing else
        assert (total - report.peak) / total < 1e-3
    else:
        assert report.peak == total and theirs["uncategorized"] == 0
    for ours_name in ("parameters", "gradients", "optimizer state", "inputs"):
        (their_name,) = PROFILER_CATEGORIES[ours_name]
        assert ours[ours_name] == theirs[their_name], ours_name
    assert _sum(ours, ["cast copies", "activations"]) == theirs["ACTIVATION"]
    assert _sum(ours, ["recomputed", "temporaries"]) == _sum(theirs, ["TEMPORARY", "AUTOGRAD_DETAIL"])


def test_the_finer_categories_hold_what_they_say():
    """What the profiler cannot tell apart, checked against the model's own sizes."""
    weights = sum(m.weight.numel() + m.bias.numel() for m in _workload("fp32").model.modules()
                  if isinstance(m, nn.Linear))
    plain = hp.measure_memory(_workload("fp32")).peak_breakdown
    cast = hp.measure_memory(_workload("autocast")).peak_breakdown
    ckpt = hp.measure_memory(_workload("checkpoint")).peak_breakdown
    assert plain["inputs"] == 512 * 256 * 4 and plain["cast copies"] == plain["recomputed"] == 0
    # autocast keeps a bf16 copy of every weight matrix (biases are added in bf16 too) of the
    # blocks whose backward has not run yet; at the peak that is all but the last block's
    assert 0 < cast["cast copies"] <= 2 * weights and cast["cast copies"] % (2 * 256 * 1024) == 0
    # checkpointing keeps only each segment's input and reruns one block at a time in backward
    assert ckpt["activations"] < plain["activations"] / 10
    assert 0 < ckpt["recomputed"] <= plain["activations"] / SEGMENTS


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("mode", ["fp32", "autocast", "checkpoint"])
def test_tracker_agrees_with_max_memory_allocated_on_cuda(mode):
    work = _workload(mode, "cuda")
    work.step()  # cuBLAS's workspace and the allocator's cache exist before the measurement
    report = hp.measure_memory(work)
    allocated = report.cuda_allocated
    assert allocated is not None and allocated > 0
    assert abs(report.peak - allocated) / allocated < 0.02, (report.peak, allocated)
