"""PyTorch: which aten operators a function dispatches, with their dtypes or their times, seen by a
TorchDispatchMode (every operator call reaches its __torch_dispatch__ after autograd and autocast have run)."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _dispatched_ops(forward: Callable[[], Any]) -> list[tuple[Any, tuple[str, ...], str]]:
    """Run forward() and list every aten operator it dispatches as (operator, input dtypes, output
    dtype); the operator prints as e.g. 'aten.addmm.default'."""
    log: list[tuple[Any, tuple[str, ...], str]] = []

    class _Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            ins = tuple(_dtype_name(a.dtype) for a in tree_leaves(args) if isinstance(a, torch.Tensor))
            outs = [o for o in tree_leaves(out) if isinstance(o, torch.Tensor)]
            log.append((func, ins, _dtype_name(outs[0].dtype) if outs else "-"))
            return out

    with _Log():
        forward()
    return log


def op_dtypes(forward: Callable[[], Any]) -> list[tuple[str, tuple[str, ...], str]]:
    """Run forward() and list every aten operator it dispatches: (name, input dtypes, output
    dtype), e.g. ('addmm', ('bfloat16', 'bfloat16', 'bfloat16'), 'bfloat16')."""
    return [(func.overloadpacket.__name__, ins, out) for func, ins, out in _dispatched_ops(forward)]


def count_torch_ops(fn: Callable[[], Any]) -> dict[str, int]:
    """How many times each aten operator runs during fn(), e.g. {'aten.mm.default': 3, 'aten.relu.default': 1}."""
    return dict(Counter(str(func) for func, _, _ in _dispatched_ops(fn)))


def op_seconds(fn: Callable[[], Any]) -> dict[str, list[float]]:
    """Run fn() and list the wall seconds of every aten operator call it dispatches (each waited for
    on a GPU), by operator name, e.g. {'mm': [0.0012, ...], ...}."""
    times: dict[str, list[float]] = {}
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()

    class _Clock(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            out = func(*args, **(kwargs or {}))
            if cuda:
                torch.cuda.synchronize()
            times.setdefault(func.overloadpacket.__name__, []).append(time.perf_counter() - start)
            return out

    with _Clock():
        fn()
    return times
