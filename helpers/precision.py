"""Floating-point formats from their bit layout, and what PyTorch's autocast casts and keeps.

The format figures are derived from the exponent and mantissa widths alone, so a notebook can
compare them with torch.finfo / jnp.finfo and extend them to tf32, which is a compute mode and
has no dtype. The PyTorch functions import torch only when called.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable


@dataclass(frozen=True)
class FloatFormat:
    """An IEEE-style binary format: 1 sign bit, `exponent_bits`, `mantissa_bits` (stored)."""

    name: str
    exponent_bits: int
    mantissa_bits: int

    @property
    def bits(self) -> int:
        """Bits that carry information (tf32 uses 19 of the 32 it is stored in)."""
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def bias(self) -> int:
        return 2 ** (self.exponent_bits - 1) - 1

    @property
    def smallest_normal(self) -> float:
        return 2.0 ** (1 - self.bias)

    @property
    def smallest_subnormal(self) -> float:
        return 2.0 ** (1 - self.bias - self.mantissa_bits)

    @property
    def max(self) -> float:
        return (2.0 - 2.0 ** -self.mantissa_bits) * 2.0 ** self.bias

    @property
    def eps(self) -> float:
        """Gap between 1 and the next representable number (relative spacing near 1)."""
        return 2.0 ** -self.mantissa_bits

    def __str__(self) -> str:
        return (f"{self.name:<5} 1+{self.exponent_bits}+{self.mantissa_bits:<2} bits  "
                f"normal >= {self.smallest_normal:.3g}  max {self.max:.4g}  eps {self.eps:.3g}")


FORMATS = {f.name: f for f in (FloatFormat("fp32", 8, 23), FloatFormat("tf32", 8, 10),
                               FloatFormat("bf16", 8, 7), FloatFormat("fp16", 5, 10))}


def float_format(name: str) -> FloatFormat:
    """The FloatFormat called `name` (fp32, tf32, bf16 or fp16)."""
    if name not in FORMATS:
        raise ValueError(f"unknown format {name!r}; use one of {', '.join(FORMATS)}")
    return FORMATS[name]


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


def _watch_casts(params: Iterable[Any], inputs: Iterable[Any]):
    """A dispatch mode that records the cast copies made of parameters and inputs, and the origin
    of the original storages. Both are keyed by storage identity (weakly, as in memory_torch), not
    by address: a freed copy's address can be reused by an activation, which must not inherit the
    copy's label."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.weak import WeakIdKeyDictionary

    origin = WeakIdKeyDictionary()
    for p in params:
        origin[p.untyped_storage()] = "parameter"
    for x in inputs:
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
                inputs: Iterable[Any] = ()) -> dict[str, int]:
    """Run forward() and total the bytes of the cast copies it makes of parameters ('weight
    copy') and of inputs ('input copy'), whether or not the backward pass keeps them."""
    mode, _ = _watch_casts(params, inputs)
    with mode:
        forward()
    return dict(mode.totals)


def saved_for_backward(forward: Callable[[], Any], params: Iterable[Any],
                       inputs: Iterable[Any] = ()) -> list[SavedTensor]:
    """Run forward() and list the storages autograd saves for backward, once each, labelled:
    a parameter or input saved as is, a cast copy of one (made by autocast or .to()), or an
    activation (anything else the forward computed)."""
    import torch
    from torch.utils.weak import WeakIdKeyDictionary

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


def dispatched_ops(forward: Callable[[], Any]) -> list[tuple[Any, tuple[str, ...], str]]:
    """Run forward() and list every aten operator it dispatches as (operator, input dtypes, output
    dtype); the operator prints as e.g. 'aten.addmm.default'."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

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
    return [(func.overloadpacket.__name__, ins, out) for func, ins, out in dispatched_ops(forward)]


def first_below(diff: Callable[[int], float], lo: int, hi: int) -> int:
    """The smallest integer b in (lo, hi] with diff(b) < 0, given diff(lo) >= 0 > diff(hi) and
    diff changing sign once (e.g. bf16 peak minus fp32 peak against the batch size). Each round
    evaluates diff at a pair of neighbours b, b+1 and steps to where the local slope reaches
    zero (Newton), so a piecewise-linear diff is solved in a few rounds; after three rounds
    that do not halve the interval, or a step outside it, comes a bisection."""
    dlo, dhi = diff(lo), diff(hi)
    if not (dlo >= 0 > dhi):
        raise ValueError(f"diff must be >= 0 at lo={lo} and < 0 at hi={hi}, got {dlo} and {dhi}")
    g = lo + int((hi - lo) * dlo / (dlo - dhi))  # where the secant crosses zero
    slow = 0  # rounds in a row that did not halve the interval
    while True:
        width = hi - lo
        g = min(max(g, lo), hi - 1)
        d0 = dlo if g == lo else diff(g)
        d1 = dhi if g + 1 == hi else diff(g + 1)
        if d0 >= 0 > d1:
            return g + 1
        if d1 >= 0:
            lo, dlo = g + 1, d1
        else:
            hi, dhi = g, d0
        slow = slow + 1 if 2 * (hi - lo) > width else 0
        slope = d1 - d0
        step = g - d0 / slope if slope < 0 else None
        if step is None or not lo <= step < hi or slow >= 3:
            g, slow = (lo + hi) // 2, 0
        else:
            g = int(step)


def dot_operand_dtypes(hlo_text: str) -> dict[tuple[str, ...], int]:
    """Count the dot instructions of an HLO module's text by their operand types, e.g.
    {('bf16', 'bf16'): 3}: what the compiler really multiplies (JAX: lowered.as_text('hlo')
    before optimization, compiled.as_text() after)."""
    import re

    types = dict(re.findall(r"%?([\w.\-]+) = (\w+)\[", hlo_text))
    counts: dict[tuple[str, ...], int] = {}
    for args in re.findall(r" dot\(([^)]*)\)", hlo_text):
        key = tuple(types.get(a.strip().lstrip("%"), "?") for a in args.split(","))
        counts[key] = counts.get(key, 0) + 1
    return counts
