import jax
import jax.numpy as jnp
import pytest

import helpers as hp
from helpers.memory_jax import XlaMemoryPlan


def _loss(params, X):
    h = X
    for W in params:
        h = jax.nn.relu(h @ W)
    return h.sum()


def _setup(n=3, d=128, b=32):
    keys = jax.random.split(jax.random.PRNGKey(0), n)
    params = [jax.random.normal(k, (d, d)) for k in keys]
    return params, jnp.ones((b, d))


def test_plan_counts_arguments_and_outputs_exactly():
    params, X = _setup()
    plan = hp.xla_memory_plan(jax.grad(_loss), params, X)
    assert plan.arguments == hp.tree_bytes(params) + X.nbytes == 3 * 128 * 128 * 4 + 32 * 128 * 4
    # One gradient per weight, plus XLA's tuple of output pointers (8 bytes per output).
    assert plan.outputs == hp.tree_bytes(params) + 8 * len(params)
    assert plan.temp > 0 and plan.aliased == 0
    assert plan.total == plan.arguments + plan.outputs + plan.temp


def test_plan_from_shapes_alone_equals_plan_from_arrays():
    params, X = _setup()
    real = hp.xla_memory_plan(jax.grad(_loss), params, X)
    abstract = hp.xla_memory_plan(jax.grad(_loss), hp.shapes_of(params), hp.shapes_of(X))
    assert real == abstract


def test_donation_shows_up_as_aliasing():
    params, X = _setup()

    def sgd(params, X):
        grads = jax.grad(_loss)(params, X)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

    plan = hp.xla_memory_plan(sgd, params, X, donate_argnums=(0,))
    assert plan.aliased == hp.tree_bytes(params)


def test_live_bytes_are_attributed_to_their_pytrees():
    params, X = _setup(n=2, d=64, b=8)
    extra = jnp.zeros((1000,), jnp.float32) + 1
    live = hp.live_bytes_by({"parameters": params, "inputs": X})
    assert live["parameters"] == 2 * 64 * 64 * 4
    assert live["inputs"] == 8 * 64 * 4
    assert live["activations"] >= extra.nbytes
    baseline = jax.live_arrays()
    fresh = jnp.zeros((500,), jnp.float32) + 2
    later = hp.live_bytes_by({"parameters": params}, ignore=baseline)
    assert later["activations"] == fresh.nbytes and later["parameters"] == 0


def test_eager_step_samples_count_each_phase():
    import optax

    n, d, b = 3, 64, 16  # batch-sized arrays (b x d) are smaller than weights (d x d)
    P = n * d * d
    samples = hp.eager_step_samples(lambda W, h: jax.nn.relu(h @ W), lambda: _setup(n, d, b), optax.adam(1e-3))
    labels = [label for label, _ in samples]
    step = ["start"] + ["forward"] * n + ["backward"] * n + ["update"]
    assert labels == [f"{i}: {p}" for i in (1, 2) for p in step]
    start, last_backward, update = samples[0][1], samples[2 * n][1], samples[2 * n + 1][1]
    assert start["parameters"] == 4 * P and start["optimizer state"] == 8 * P + 4 and start["activations"] == 0
    assert last_backward["gradients"] == 4 * P and last_backward["activations"] == 0
    # after the update returns: old and new parameters and state, the gradients and the updates
    assert update["new params and state"] == 12 * P + 4 and update["temporaries"] == 4 * P
    assert samples[2 * n + 2][1]["parameters"] == 4 * P  # step 2 starts from the new weights alone
    assert [live for _, live in samples[:len(step)]] == [live for _, live in samples[len(step):]]  # steps repeat


def test_device_memory_is_none_on_cpu():
    if jax.default_backend() == "cpu":
        assert hp.device_memory() is None
    else:  # no process-wide high-water mark: a step's cost is a difference of two readings
        assert set(hp.device_memory()) == {"bytes_in_use"}


def test_xla_memory_plan_rejects_non_functions():
    with pytest.raises(TypeError, match="needs a function"):
        hp.xla_memory_plan(3)


def test_plan_prints_in_megabytes():
    assert str(XlaMemoryPlan(2_000_000, 1_000_000, 500_000, 0)) == (
        "arguments 2.0 MB, outputs 1.0 MB, temp 0.5 MB, aliased 0.0 MB")


def test_hlo_schedule_of_a_compiled_step_ends_with_its_outputs():
    params, X = _setup()
    text = jax.jit(jax.grad(_loss)).lower(params, X).compile().as_text()
    order = hp.hlo_schedule(text)
    when = {op.name: i for i, op in enumerate(order)}
    assert [op.opcode for op in order].count("parameter") == len(params) + 1
    assert order[-1].opcode == "tuple" and len(order[-1].operands) == len(params)  # one gradient per weight
    # each instruction comes after the instructions it reads
    assert all(when[a] < when[op.name] for op in order for a in op.operands)
    with pytest.raises(ValueError, match="no schedule"):
        hp.hlo_schedule(jax.jit(jax.grad(_loss)).lower(params, X).as_text(dialect="hlo"))
