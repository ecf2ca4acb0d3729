"""The mini GPT in both frameworks: same parameter count as the hand count, sound forward passes,
checkpointing that changes memory but not results, and reproducible synthetic data."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import helpers as hp

TINY = hp.GPTConfig(vocab=64, d_model=32, n_heads=4, n_layers=2, seq=16)


@pytest.mark.parametrize("cfg", [TINY, hp.GPTConfig(), hp.GPTConfig(vocab=256, d_model=64, n_heads=4,
                                                                     n_layers=6, seq=128)])
def test_both_frameworks_have_the_hand_counted_parameters(cfg):
    torch_count = sum(p.numel() for p in hp.MiniGPT(cfg).parameters())
    shapes = jax.eval_shape(lambda: hp.minigpt_init(cfg, jax.random.key(0)))
    jax_count = sum(x.size for x in jax.tree.leaves(shapes))
    assert torch_count == jax_count == hp.gpt_param_count(cfg)


def test_the_hand_count_of_the_original_sizes():
    # 2048*256 + 256*256 embeddings, 6 blocks of 12*256^2 + 13*256, final LN, 256*2048 head.
    assert hp.gpt_param_count(hp.GPTConfig()) == 2048 * 256 * 2 + 256 * 256 + 6 * (12 * 256**2 + 13 * 256) + 512


def test_config_rejects_bad_sizes():
    with pytest.raises(ValueError, match="divisible"):
        hp.GPTConfig(d_model=100, n_heads=8)
    with pytest.raises(ValueError, match="positive"):
        hp.GPTConfig(n_layers=0)


def test_synthetic_tokens_are_reproducible_and_follow_the_successor_rule():
    a = hp.synthetic_tokens(TINY, rows=32, seed=3)
    assert a.shape == (32, TINY.seq + 1) and a.dtype == np.int32
    assert np.array_equal(a, hp.synthetic_tokens(TINY, rows=32, seed=3))
    assert not np.array_equal(a, hp.synthetic_tokens(TINY, rows=32, seed=4))
    assert a.min() >= 0 and a.max() < TINY.vocab
    clean = hp.synthetic_tokens(TINY, rows=8, seed=3, noise=0.0)
    successor = {}
    for row in clean:   # without noise, each token always has the same successor
        for x, y in zip(row[:-1], row[1:]):
            assert successor.setdefault(int(x), int(y)) == int(y)


def test_torch_model_is_causal_and_checkpointing_changes_nothing_but_memory():
    torch.manual_seed(0)
    model = hp.MiniGPT(TINY)
    batch = torch.from_numpy(hp.synthetic_tokens(TINY, rows=4, seed=0))
    logits = model(batch[:, :-1])
    assert logits.shape == (4, TINY.seq, TINY.vocab)
    changed = batch[:, :-1].clone()
    changed[:, -1] = (changed[:, -1] + 1) % TINY.vocab          # only the last position differs
    assert torch.allclose(model(changed)[:, :-1], logits[:, :-1], atol=1e-6)
    assert abs(model.loss(batch).item() - np.log(TINY.vocab)) < 1.0  # near a uniform guess

    grads = {}
    for ckpt in (False, True):
        model.checkpoint = ckpt
        model.zero_grad()
        model.loss(batch).backward()
        grads[ckpt] = [p.grad.clone() for p in model.parameters()]
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(grads[False], grads[True]))


def test_torch_checkpointing_lowers_the_measured_peak():
    torch.manual_seed(0)
    batch = torch.from_numpy(hp.synthetic_tokens(TINY, rows=16, seed=0))
    peaks = {}
    for ckpt in (False, True):
        model = hp.MiniGPT(TINY, checkpoint=ckpt)
        peaks[ckpt] = hp.measure_memory(hp.Workload(lambda: model.loss(batch).backward(), model)).peak
    assert peaks[True] < peaks[False]


def _jax_setup(rows=4):
    params = hp.minigpt_init(TINY, jax.random.key(0))
    batch = jnp.asarray(hp.synthetic_tokens(TINY, rows=rows, seed=0))
    return params, batch


def test_jax_model_is_causal_and_starts_near_a_uniform_guess():
    params, batch = _jax_setup()
    logits_of = jax.jit(functools.partial(hp.minigpt_logits, cfg=TINY))
    logits = logits_of(params, batch[:, :-1])
    assert logits.shape == (4, TINY.seq, TINY.vocab) and logits.dtype == jnp.float32
    changed = batch[:, :-1].at[:, -1].set((batch[:, -2] + 1) % TINY.vocab)
    np.testing.assert_allclose(logits_of(params, changed)[:, :-1], logits[:, :-1], atol=1e-5)
    loss = jnp.mean(-jnp.take_along_axis(jax.nn.log_softmax(logits), batch[:, 1:, None], axis=-1))
    assert abs(float(loss) - np.log(TINY.vocab)) < 1.0


def test_jax_checkpointing_gives_the_same_gradients_and_a_smaller_plan():
    params, batch = _jax_setup(rows=16)
    grads, plans = {}, {}
    for c in (False, True):
        compiled = jax.jit(jax.grad(functools.partial(hp.minigpt_loss, cfg=TINY, checkpoint=c))
                           ).lower(params, batch).compile()
        grads[c], plans[c] = compiled(params, batch), hp.xla_memory_plan(compiled)
    for a, b in zip(jax.tree.leaves(grads[False]), jax.tree.leaves(grads[True])):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert plans[True].temp < plans[False].temp


def test_jax_bf16_computes_close_to_fp32_and_keeps_parameters_fp32():
    params, batch = _jax_setup()
    fp32 = float(jax.jit(functools.partial(hp.minigpt_loss, cfg=TINY))(params, batch))
    loss_and_grad = jax.jit(jax.value_and_grad(functools.partial(hp.minigpt_loss, cfg=TINY,
                                                                 dtype=jnp.bfloat16)))
    bf16, grads = loss_and_grad(params, batch)
    assert bf16.dtype == jnp.float32 and abs(float(bf16) - fp32) < 0.05 * fp32
    assert all(g.dtype == jnp.float32 for g in jax.tree.leaves(grads))


def test_sequences_longer_than_the_model_are_refused():
    too_long = np.zeros((1, TINY.seq + 1), dtype=np.int32)
    with pytest.raises(ValueError, match="longer"):
        hp.MiniGPT(TINY)(torch.from_numpy(too_long))
    with pytest.raises(ValueError, match="longer"):
        hp.minigpt_logits(hp.minigpt_init(TINY, jax.random.key(0)), jnp.asarray(too_long), TINY)


def test_make_step_accumulates_to_the_full_batch_gradient_and_rejects_bad_splits():
    torch.manual_seed(0)
    batch = torch.from_numpy(hp.synthetic_tokens(TINY, rows=8, seed=1)).long()
    grads, losses = [], []
    for accum in (1, 4):
        torch.manual_seed(0)
        model = hp.MiniGPT(TINY)
        opt = torch.optim.SGD(model.parameters(), lr=0.0)  # lr 0: the step keeps .grad, changes nothing
        losses.append(float(hp.make_step(model, opt, bf16=False, accum=accum)(batch)))
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert abs(losses[0] - losses[1]) < 1e-5
    assert torch.allclose(grads[0], grads[1], atol=1e-6)
    with pytest.raises(ValueError, match="equal micro-batches"):
        hp.make_step(model, opt, bf16=False, accum=3)(batch)
    with pytest.raises(ValueError, match="accum"):
        hp.make_step(model, opt, bf16=False, accum=0)
