import math

import pytest

import helpers as hp


def _segment_peak(n: int, s: int, c: int) -> int:
    """The segment model (exercise 3's answer, kept out of the helpers a student sees): the inputs of
    the ceil(n / s) - 1 segments waiting, plus c units for each of the s blocks being rerun."""
    return math.ceil(n / s) - 1 + c * s


def test_segment_model_counts_pytorch_activation_memory_for_every_segment_length():
    # Lesson 03's stack, smaller: X, the kept segment inputs and the rerun segment's tensors, at their
    # highest, are the model's units (c = 3, as the lesson measures) to within a few bytes.
    import torch
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d))

        def forward(self, x):
            return x + self.net(x)

    torch.manual_seed(0)
    n, width, rows = 8, 32, 64
    blocks = nn.ModuleList([Block(width) for _ in range(n)])
    X = torch.randn(rows, width, requires_grad=True)
    unit = X.numel() * X.element_size()

    def loss(s):  # a function of its own, so that no name holds the stack's output during backward
        h = X
        for i in range(0, n, s):
            h = checkpoint(nn.Sequential(*blocks[i:i + s]), h, use_reentrant=False)
        return h.pow(2).mean()

    def step(s):
        for p in blocks.parameters():
            p.grad = None
        X.grad = None
        loss(s).backward()

    for s in (1, 2, 4, 8):
        series = hp.measure_memory(hp.Workload(lambda: step(s), blocks, None, (X,))).trace.by_category()
        held = max(x + a + r for x, a, r in zip(series["inputs"], series["activations"], series["recomputed"]))
        assert 0 <= held - _segment_peak(n, s, 3) * unit <= 8, (s, held / unit)


def test_count_ops_counts_applications_not_mentions():
    text = ("%a = f32[2] opt-barrier(%x)\n%b = f32[2] opt-barrier(%a), metadata={x=\"opt-barrier\"}\n"
            "%0 = stablehlo.dot_general %a, %b\n%1 = stablehlo.dot_general %0, %b\n"
            "c:f32[2] = dot_general[dimension_numbers=...] a b\n")
    assert hp.count_ops(text, "opt-barrier") == 2
    assert hp.count_ops(text, "stablehlo.dot_general") == 2
    assert hp.count_ops(text, "dot_general") == 1  # the jaxpr line; the others are longer names


def test_saved_residuals_lists_what_backward_keeps_without_paths():
    import jax
    import jax.numpy as jnp

    def f(w, x):
        return ((x @ w) @ w).sum()  # the second product's weight gradient needs x @ w

    w, x = jnp.ones((4, 4)), jnp.ones((2, 4))
    plain = hp.saved_residuals(f, w, x)
    assert any("output of dot_general" in line for line in plain)
    assert not any(".py" in line for line in plain)
    remat = hp.saved_residuals(jax.checkpoint(f), w, x)
    assert not any("dot_general" in line for line in remat)
    assert any("from the argument" in line for line in remat)


def test_held_bytes_and_count_torch_ops():
    import torch
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 8))
    x = torch.randn(32, 8, requires_grad=True)
    unit = 32 * 8 * 4
    # Plain: the first Linear's output is freed (tanh's backward needs only tanh's output, which
    # is also the last Linear's input); x was allocated before, so it is not counted.
    plain = hp.held_bytes(lambda: net(x), net, (x,))
    ckpt = hp.held_bytes(lambda: checkpoint(net, x, use_reentrant=False), net, (x,))
    assert ckpt == unit  # only the result: the input x is not new
    assert plain == 2 * unit  # tanh's output (also the last input) and the result
    out = checkpoint(net, x, use_reentrant=False)
    counts = hp.count_torch_ops(lambda: out.sum().backward())
    assert counts.get("aten.addmm.default", 0) == 1  # recompute stops after what backward needs
