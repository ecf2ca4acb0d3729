"""PyTorch: what autograd keeps from the forward pass for the backward pass, and what autocast casts.

saved_for_backward runs the forward pass under torch.autograd.graph.saved_tensors_hooks, whose pack
hook sees every tensor autograd saves; a TorchDispatchMode beside it sees every aten._to_copy, so a
saved tensor can be named: a parameter, an input, a cast copy of one, or an activation. held_bytes
counts what the forward pass leaves alive with hp.MemoryTracker.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.weak import WeakIdKeyDictionary


@dataclass(frozen=True)
class SavedTensor:
    """One storage that autograd keeps from the forward pass for the backward pass."""

    kind: str  # 'parameter', 'input' (no new memory), 'weight copy', 'input copy', 'activation'
    shape: tuple[int, ...]
    dtype: str
    nbytes: int

    def __str__(self) -> str:
        return f"{self.kind:<12}{str(list(self.shape)):<14}{self.dtype:<10}{self.nbytes:>12,d} B"


_NEW_MEMORY = ("weight copy", "input copy", "activation")


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _watch_casts(params: Iterable[Any], inputs: Any):
    """A dispatch mode that records the cast copies made of parameters and inputs, and the origin
    of the original storages. Both are keyed by storage identity (weakly, as in memory_torch), not
    by address: a freed copy's address can be reused by an activation, which must not inherit the
    copy's label."""
    from .memory_torch import _batch_tensors

    origin = WeakIdKeyDictionary()
    for p in params:
        origin[p.untyped_storage()] = "parameter"
    for x in _batch_tensors(inputs):  # a tensor, a dict (keyword inputs) or a tuple of them
        origin[x.untyped_storage()] = "input"

    class _WatchCasts(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.copies = WeakIdKeyDictionary()  # storage -> kind, while the copy lives
            self.totals = {"weight copy": 0, "input copy": 0}  # bytes of every copy ever made

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.aten._to_copy.default and isinstance(out, torch.Tensor):
                src = origin.get(args[0].untyped_storage())
                if src is not None:
                    kind = "weight copy" if src == "parameter" else "input copy"
                    storage = out.untyped_storage()
                    if storage not in self.copies:
                        self.copies[storage] = kind
                        self.totals[kind] += storage.nbytes()
            return out

    return _WatchCasts(), origin


def copies_made(forward: Callable[[], Any], params: Iterable[Any],
                inputs: Any = ()) -> dict[str, int]:
    """Run forward() and total the bytes of the cast copies it makes of parameters ('weight
    copy') and of inputs ('input copy'), whether or not the backward pass keeps them."""
    mode, _ = _watch_casts(params, inputs)
    with mode:
        forward()
    return dict(mode.totals)


def saved_for_backward(forward: Callable[[], Any], params: Iterable[Any],
                       inputs: Any = ()) -> list[SavedTensor]:
    """Run forward() and list the storages autograd saves for backward, once each, labelled:
    a parameter or input saved as is, a cast copy of one (made by autocast or .to()), or an
    activation (anything else the forward computed)."""
    mode, origin = _watch_casts(params, inputs)
    seen = WeakIdKeyDictionary()  # storages already listed (by identity, as above)
    saved: list[SavedTensor] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage not in seen:
            seen[storage] = True
            kind = origin.get(storage) or mode.copies.get(storage, "activation")
            saved.append(SavedTensor(kind, tuple(t.shape), _dtype_name(t.dtype), storage.nbytes()))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), mode:
        out = forward()
    del out
    return saved


def bytes_by_kind(saved: Iterable[SavedTensor]) -> dict[str, int]:
    """Total bytes of saved storages per kind, for the kinds that take new memory."""
    totals = dict.fromkeys(_NEW_MEMORY, 0)
    for s in saved:
        if s.kind in totals:
            totals[s.kind] += s.nbytes
    return totals


def held_bytes(forward: Callable[[], Any], model: Any = None, inputs: Any = ()) -> int:
    """Bytes of tensor storage that forward() allocates and that are still alive once it returns
    (what autograd keeps for backward, plus the result), counted by hp.MemoryTracker; pass the
    model and inputs so views of their storage are not counted as new."""
    from .memory_torch import MemoryTracker

    tracker = MemoryTracker(model, None, inputs)
    with tracker:
        result = forward()
        gc.collect()  # storage awaiting the cycle collector is not held by the graph
        held = sum(sign * rec.nbytes for sign, rec in tracker.trace.events if rec.phase == "forward")
    del result
    return held
