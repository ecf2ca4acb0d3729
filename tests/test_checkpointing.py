import pytest

import helpers as hp


def test_segment_peak_counts_waiting_inputs_and_one_recomputed_segment():
    # 16 blocks, 3 units each: per-block keeps 15 waiting inputs + the 3 units of the rerun block.
    assert hp.segment_peak(16, 1, 3) == 15 + 3
    assert hp.segment_peak(16, 4, 3) == 3 + 3 * 4  # the rerun segment holds its inner block inputs too
    assert hp.segment_peak(16, 16, 3) == 3 * 16   # one segment: everything, as storing it all
    assert hp.segment_peak(10, 3, 2) == 3 + 6  # ceil(10 / 3) segments, three of them waiting


def test_segment_peak_rejects_impossible_segments():
    with pytest.raises(ValueError, match="s <= n"):
        hp.segment_peak(4, 5, 3)
    with pytest.raises(ValueError, match="c >= 1"):
        hp.segment_peak(4, 2, 0.5)


def test_best_segment_is_near_sqrt_n_over_c():
    assert hp.best_segment(16, 4, [1, 2, 4, 8, 16]) == 2  # sqrt(16 / 4) = 2
    assert hp.best_segment(64, 1, [1, 2, 4, 8, 16, 32, 64]) == 8  # sqrt(64) = 8
    assert hp.best_segment(16, 2, [4, 2, 1]) == 2  # tie between 2 and 4 (11 units each): the shorter
    with pytest.raises(ValueError):
        hp.best_segment(16, 3, [])


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
