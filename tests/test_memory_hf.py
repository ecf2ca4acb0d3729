"""The memory helpers on a model nobody here wrote: a Hugging Face GPT2LMHeadModel built from a tiny
GPT2Config (random initialisation, nothing downloaded), trained with AdamW on a batch given as a dict
of keyword inputs, the way such a model takes it.

- hp.predict_memory (fake tensors) equals hp.measure_memory (real tensors) to the byte: the peak, its
  breakdown and phase, and what the steps leave. Not every event in the same order: a tensor made
  from data (torch.tensor(...), as Adam makes its step counters) is allocated before any operator
  runs, so the real run books Adam's counters when the step ends (the tracker labels the state then),
  the fake run when they are made.
- Against torch's own counters, as tests/test_memory_oracle.py compares them on the course's MLP:
  torch's MemTracker (torch.distributed._tools.mem_tracker, another TorchDispatchMode) agrees to the
  byte in every category; the profiler's memory timeline agrees on parameters, gradients, optimizer
  state and what backward allocates, and sees at most 64 bytes more in the forward categories
  (tensors made without an operator a dispatch mode sees; 48 bytes here, under 64 at GPT-2's full
  124M as well).
"""

import pytest
import torch

import helpers as hp

from test_memory_oracle import _profiler_peak, _sum  # tests/ is on sys.path under pytest

transformers = pytest.importorskip("transformers")  # a pinned dependency; the skip only spares a broken install
VOCAB, T, BATCH = 512, 32, 4


def gpt2_workload(warm: bool = True) -> hp.Workload:
    """A 2-layer GPT-2 (d = 64, T = 32, vocabulary 512), AdamW, a batch of input_ids and labels."""
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, n_positions=T, vocab_size=VOCAB,
                                     bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config)
    opt = torch.optim.AdamW(model.parameters())
    ids = torch.randint(0, VOCAB, (BATCH, T))
    batch = {"input_ids": ids, "labels": ids}

    def step():
        opt.zero_grad(set_to_none=True)
        model(**batch).loss.backward()
        opt.step()

    if warm:
        step()   # AdamW's state exists before the measurement
    return hp.Workload(step, model, opt, batch)


def test_gpt2_with_a_dict_batch_is_predicted_to_the_byte():
    work = gpt2_workload(warm=False)
    measured = hp.measure_memory(work, steps=2)
    predicted = hp.predict_memory(lambda: gpt2_workload(warm=False), steps=2)
    assert predicted.peak == measured.peak and predicted.peak_breakdown == measured.peak_breakdown
    assert predicted.peak_phase == measured.peak_phase == "backward"
    assert predicted.trace.totals()[-1] == measured.trace.totals()[-1]   # what the steps leave behind
    P = sum(p.numel() for p in work.model.parameters())
    assert measured.peak_breakdown["parameters"] == 4 * P          # the tied embedding counted once
    assert measured.peak_breakdown["inputs"] == BATCH * T * 8      # labels is input_ids: one storage
    assert measured.new_optimizer_state == 0 and measured.peak_breakdown["optimizer state"] > 8 * P


def test_gpt2_step_agrees_with_torchs_memtracker_and_profiler():
    from torch.distributed._tools.mem_tracker import MemTracker

    work = gpt2_workload()
    ours = hp.measure_memory(work)
    tracker = MemTracker()
    tracker.track_external(work.model, work.optimizer, *work.inputs.values())
    with tracker:
        work.step()
    (theirs,) = tracker.get_tracker_snapshot("peak").values()
    theirs = {getattr(k, "value", k): v for k, v in theirs.items()}
    b = ours.peak_breakdown
    assert theirs["Total"] == ours.peak
    assert (theirs["Parameter"] + theirs["Buffer"], theirs["Gradient"], theirs["Optstate"], theirs["Other"]) == \
        (b["parameters"], b["gradients"], b["optimizer state"], b["inputs"])
    assert theirs["Activation"] == _sum(b, ["cast copies", "activations"])
    assert theirs["Temp"] == _sum(b, ["recomputed", "temporaries"])

    total, prof = _profiler_peak(work.step)
    gap = total - ours.peak
    assert 0 <= gap <= 64 and prof["uncategorized"] == 0
    assert (prof["PARAMETER"], prof["GRADIENT"], prof["OPTIMIZER_STATE"]) == \
        (b["parameters"], b["gradients"], b["optimizer state"])
    # the profiler files some forward tensors under INPUT by data flow: the forward sums agree
    assert _sum(prof, ["INPUT", "ACTIVATION"]) - _sum(b, ["inputs", "cast copies", "activations"]) == gap
    assert _sum(prof, ["TEMPORARY", "AUTOGRAD_DETAIL"]) == _sum(b, ["recomputed", "temporaries"])
