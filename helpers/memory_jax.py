"""JAX memory: the compiler's plan for a jitted function, live bytes as the runtime sees them, and
what JAX keeps from a forward pass for its backward pass.

XLA decides every buffer of a jitted computation at compile time; memory_analysis() reports that
plan (arguments, outputs, temporaries, aliases) before anything runs. On a GPU the runtime also
counts the bytes in use (Device.memory_stats()); differences of two readings say what a step left
allocated. On the CPU it keeps no such counters, so the plan is the figure to read there.

Nothing here changes how XLA allocates: a notebook that reads GPU memory sets
XLA_PYTHON_CLIENT_PREALLOCATE=false itself, in its setup cell, before importing jax.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import jax

from .units import fmt_bytes


@dataclass(frozen=True)
class XlaMemoryPlan:
    """The compiler's memory plan of one compiled function, in bytes."""

    arguments: int
    outputs: int
    temp: int
    aliased: int

    @property
    def total(self) -> int:
        """Arguments + outputs + temp, less what outputs reuse of donated arguments."""
        return self.arguments + self.outputs + self.temp - self.aliased

    def __str__(self) -> str:
        return (f"arguments {fmt_bytes(self.arguments)}, outputs {fmt_bytes(self.outputs)}, "
                f"temp {fmt_bytes(self.temp)}, aliased {fmt_bytes(self.aliased)}")


def xla_memory_plan(fn: Any, *args: Any, static_argnums: Sequence[int] = (),
                    donate_argnums: Sequence[int] = ()) -> XlaMemoryPlan:
    """The compiler's memory plan, from compiled.memory_analysis(): of an already compiled function
    (jax.jit(f).lower(...).compile(), no arguments), or of fn compiled for these arguments (arrays
    or jax.ShapeDtypeStruct)."""
    if hasattr(fn, "memory_analysis"):
        if args:
            raise TypeError("xla_memory_plan got a compiled function and arguments: a compiled "
                            "function already has its shapes, so pass it alone")
        compiled = fn
    elif callable(fn):
        jitted = jax.jit(fn, static_argnums=tuple(static_argnums), donate_argnums=tuple(donate_argnums))
        compiled = jitted.lower(*args).compile()
    else:
        raise TypeError(f"xla_memory_plan needs a function or a compiled function, got {type(fn).__name__}")
    a = compiled.memory_analysis()
    if a is None:
        raise RuntimeError("this backend reports no memory analysis for compiled functions")
    return XlaMemoryPlan(a.argument_size_in_bytes, a.output_size_in_bytes, a.temp_size_in_bytes,
                         a.alias_size_in_bytes)


def tree_bytes(tree: Any) -> int:
    """Bytes of every array (or ShapeDtypeStruct) in a pytree."""
    return sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(tree))


def shapes_of(tree: Any) -> Any:
    """The same pytree with every array replaced by a ShapeDtypeStruct (no data)."""
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), tree)


def device_memory() -> dict[str, int] | None:
    """{'bytes_in_use': ...} of the default device now, or None where the runtime keeps no
    counters (the CPU). What a step costs is the difference of two readings around it. The
    runtime's peak_bytes_in_use is left out on purpose: it is the process's high-water mark since
    start-up, which JAX cannot reset, so it is no step's peak (the compiler's plan gives that)."""
    stats = jax.devices()[0].memory_stats()
    if not stats or "bytes_in_use" not in stats:
        return None
    return {"bytes_in_use": stats["bytes_in_use"]}


def live_bytes_by(categories: dict[str, Any], ignore: Sequence[Any] = ()) -> dict[str, int]:
    """Bytes of every live device array, attributed to the first named pytree that holds it;
    arrays held by none of them count as 'activations'. Arrays in `ignore` (e.g. a baseline from
    jax.live_arrays() taken earlier, kept alive by the caller) are left out."""
    owner: dict[int, str] = {}
    for name, tree in categories.items():
        for leaf in jax.tree.leaves(tree):
            owner.setdefault(leaf.unsafe_buffer_pointer(), name)
    seen = {x.unsafe_buffer_pointer() for x in ignore if not x.is_deleted()}
    out = dict.fromkeys(list(categories) + ["activations"], 0)
    for arr in jax.live_arrays():
        if arr.is_deleted():
            continue
        ptr = arr.unsafe_buffer_pointer()
        if ptr in seen:
            continue
        seen.add(ptr)
        out[owner.get(ptr, "activations")] += arr.nbytes
    return out


def eager_step_samples(layer: Callable, make: Callable[[], tuple[list, Any]], opt: Any,
                       steps: int = 2) -> list[tuple[str, dict[str, int]]]:
    """Live bytes by category (hp.live_bytes_by) in `steps` eager optimizer steps of the stack
    h = layer(W, h) over the weights, loss h.sum(), one layer at a time; `make()` returns (weights, batch),
    built after the baseline of arrays already alive is taken. A sample is labelled 'i: phase' and taken
    at the start of step i, after each layer's forward and backward, and after the update returns (what a
    call holds while it runs is not seen)."""
    import jax.numpy as jnp

    baseline = jax.live_arrays()  # whatever already exists does not belong to these steps
    params, X = make()
    state = opt.init(params)
    samples: list[tuple[str, dict[str, int]]] = []
    for i in range(1, steps + 1):
        named = {"parameters": params, "optimizer state": state, "inputs": X}

        def live(phase: str, **more: Any) -> None:
            samples.append((f"{i}: {phase}", live_bytes_by({**named, **more}, ignore=baseline)))

        live("start")
        h, backs, grads = X, [], []
        for W in params:  # forward: each vjp closure keeps what its layer's backward pass needs
            h, back = jax.vjp(layer, W, h)
            backs.append(back)
            live("forward")
        del back
        g, h = jnp.ones_like(h), None  # the gradient of h.sum() is all ones
        while backs:  # backward: each closure is used once, then dropped
            gW, g = backs.pop()(g)
            grads.insert(0, gW)
            live("backward", gradients=grads, temporaries=g)
        g = None
        updates, new_state = opt.update(grads, state, params)
        new_params = jax.tree.map(lambda p, u: p + u, params, updates)
        live("update", gradients=grads, temporaries=updates, **{"new params and state": (new_params, new_state)})
        params, state = new_params, new_state
        del W, gW, grads, updates, new_params, new_state, named  # nothing of this step outlives it
    return samples


def saved_residuals(f: Callable, *args: Any) -> list[str]:
    """What JAX keeps from f's forward pass for its backward pass, one line per residual, as
    jax.ad_checkpoint.print_saved_residuals says it but without source-file locations."""
    from jax.ad_checkpoint import print_saved_residuals

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_saved_residuals(f, *args)
    # 'f32[8,4] output of dot_general from /path/file.py:3:9 (fn)' -> '... output of dot_general'
    return [re.sub(r" from (?!the argument|a literal)\S+:\d+(:\d+)?( \(.*\))?$", "", line)
            for line in out.getvalue().splitlines() if line.strip()]
