"""PyTorch memory: peak bytes, an allocation trace split by category, and a prediction of a
step's peak without running it. Works on the CPU as well as on CUDA.

torch.cuda's counters exist only on CUDA, so the course counts memory itself: a
TorchDispatchMode sees every tensor an operator returns, and a weak reference to each tensor's
storage tells when that storage is freed. The live total is the sum of storage bytes (no
allocator rounding, no kernel workspaces). On CUDA the report adds the allocator's own peaks
during the measured steps (max_memory_allocated and max_memory_reserved, reset just before
them). Under FakeTensorMode the same counting runs on tensors without data: that is the
prediction. torch's MemTracker (torch.distributed._tools) works the same way but records
per-module snapshots, not the per-allocation trace we plot.
"""

from __future__ import annotations

import gc
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map_only
from torch.utils.weak import WeakIdKeyDictionary

from ._validate import positive
from .units import fmt_bytes

CATEGORIES = ("parameters", "gradients", "optimizer state", "inputs", "cast copies", "activations",
              "recomputed", "temporaries")

# What torch.profiler's memory timeline (torch.profiler._memory_profiler.Category) files each of
# them under (tests/test_memory_oracle.py checks it). The profiler has no category for cast copies
# or recomputed tensors: it files a forward-pass cast copy that backward uses as an ACTIVATION, and
# everything the backward pass allocates, a checkpoint's rerun included, as TEMPORARY or
# AUTOGRAD_DETAIL.
PROFILER_CATEGORIES = {"parameters": ("PARAMETER",), "gradients": ("GRADIENT",),
                       "optimizer state": ("OPTIMIZER_STATE",), "inputs": ("INPUT",),
                       "cast copies": ("ACTIVATION",), "activations": ("ACTIVATION",),
                       "recomputed": ("TEMPORARY", "AUTOGRAD_DETAIL"),
                       "temporaries": ("TEMPORARY", "AUTOGRAD_DETAIL")}


class _Record:
    """One tracked storage: its size, what it holds, and the phase that allocated it."""

    __slots__ = ("nbytes", "category", "phase")

    def __init__(self, nbytes: int, category: str, phase: str) -> None:
        self.nbytes, self.category, self.phase = nbytes, category, phase


@dataclass
class MemoryTrace:
    """Every allocation (+) and free (-) of tracked storage, in order, with marks between steps."""

    events: list[tuple[int, _Record]] = field(default_factory=list)
    marks: list[tuple[int, str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.events)

    def totals(self) -> list[int]:
        """Live tracked bytes after each event."""
        live, out = 0, []
        for sign, rec in self.events:
            live += sign * rec.nbytes
            out.append(live)
        return out

    def by_category(self) -> dict[str, list[int]]:
        """Live bytes of each category after each event (categories are final: a storage that
        became a gradient counts as a gradient from its allocation on)."""
        live = dict.fromkeys(CATEGORIES, 0)
        series: dict[str, list[int]] = {c: [] for c in CATEGORIES}
        for sign, rec in self.events:
            live[rec.category] += sign * rec.nbytes
            for c in CATEGORIES:
                series[c].append(live[c])
        return series

    def step_of(self, i: int) -> str:
        """The label of the last mark at or before event i (e.g. 'step 2')."""
        labels = [label for pos, label in self.marks if pos <= i]
        return labels[-1] if labels else ""

    def peak_index(self) -> int:
        """Index of the first event at which the live total is highest."""
        totals = self.totals()
        if not totals:
            raise ValueError("the trace is empty: nothing was allocated while tracking")
        return max(range(len(totals)), key=totals.__getitem__)


class MemoryTracker(TorchDispatchMode):
    """Count live tensor storage while active, by category and phase.

    Categories (CATEGORIES): parameters (and buffers); gradients (relabelled when autograd
    accumulates them); optimizer state (relabelled after each optimizer step); inputs (the tensors
    passed as `inputs`); cast copies (a parameter converted to another dtype, e.g. autocast's bf16
    weight copies); activations (whatever else the forward pass allocates); recomputed (what the
    backward pass allocates with grad mode on, i.e. a checkpointed segment's forward rerun; the
    ordinary backward runs with grad mode off); temporaries (whatever else backward or the optimizer
    allocates that is neither a gradient nor optimizer state).

    Pass the model, optimizer and inputs that exist before tracking starts so their storage is
    counted (and labelled); everything operators allocate inside is tracked automatically. The
    optimizer may be a list of optimizers, e.g. one per parameter stepped from a
    post-accumulate-grad hook inside backward (the optimizer fused into backward): each step is
    booked as the optimizer phase, and the gradients it reads are labelled just before it."""

    def __init__(self, model: torch.nn.Module | None = None,
                 optimizer: torch.optim.Optimizer | Iterable[torch.optim.Optimizer] | None = None,
                 inputs: Iterable[torch.Tensor] = ()) -> None:
        super().__init__()
        self.model, self.optimizer, self.inputs = model, optimizer, tuple(inputs)
        self.optimizers = (() if optimizer is None else (optimizer,)
                           if isinstance(optimizer, torch.optim.Optimizer) else tuple(optimizer))
        self.trace = MemoryTrace()
        self._seen: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self._live = 0
        self._active = False
        self._in_optimizer = False
        self._hooks: list[Any] = []

    # -- bookkeeping -------------------------------------------------------------------------
    def _record(self, t: torch.Tensor, category: str | None = None, phase: str | None = None) -> None:
        st = t.untyped_storage()
        entry = self._seen.get(st)
        if entry is not None:
            if category is not None:
                entry[0].category = category
            return
        phase = phase or self._phase()
        if category is None:  # what the forward pass makes is kept for backward; the rest is scratch
            if phase in ("setup", "forward"):
                category = "activations"
            elif phase == "backward" and torch.is_grad_enabled():
                category = "recomputed"  # the engine runs backward with grad mode off; a rerun turns it on
            else:
                category = "temporaries"
        rec = _Record(st.nbytes(), category, phase)
        self._seen[st] = (rec, weakref.ref(st, lambda _ref, rec=rec: self._free(rec)))
        self._live += rec.nbytes
        self.trace.events.append((+1, rec))

    def _free(self, rec: _Record) -> None:
        if self._active:
            self._live -= rec.nbytes
            self.trace.events.append((-1, rec))

    def _phase(self) -> str:
        if self._in_optimizer:
            return "optimizer"
        return "backward" if torch._C._current_autograd_node() is not None else "forward"

    def _label_optimizer_state(self, optimizers: Iterable[torch.optim.Optimizer] | None = None) -> None:
        for optimizer in self.optimizers if optimizers is None else optimizers:
            for state in optimizer.state.values():
                for v in state.values():
                    if isinstance(v, torch.Tensor):
                        self._record(v, "optimizer state", "optimizer")

    def _label_gradient(self, p: torch.Tensor) -> None:
        if p.grad is not None:  # an optimizer stepped from an earlier hook may have taken it already
            self._record(p.grad, "gradients")

    def mark(self, label: str) -> None:
        """Remember a point in the trace (e.g. the start of a step), for plots."""
        self.trace.marks.append((len(self.trace.events), label))

    # -- mode protocol -----------------------------------------------------------------------
    def __enter__(self) -> "MemoryTracker":
        gc.collect()
        self._active = True
        if self.model is not None:
            for p in self.model.parameters():
                self._record(p, "parameters", "setup")
                if p.grad is not None:
                    self._record(p.grad, "gradients", "setup")
                if p.requires_grad:
                    self._hooks.append(p.register_post_accumulate_grad_hook(self._label_gradient))
            for b in self.model.buffers():
                self._record(b, "parameters", "setup")
        for x in self.inputs:
            self._record(x, "inputs", "setup")
        self._label_optimizer_state()
        for optimizer in self.optimizers:
            self._hooks.append(optimizer.register_step_pre_hook(self._enter_step))
            self._hooks.append(optimizer.register_step_post_hook(self._leave_step))
        return super().__enter__()

    def _enter_step(self, optimizer: torch.optim.Optimizer, *_: Any) -> None:
        for group in optimizer.param_groups:  # what the step reads is a gradient, whoever made it
            for p in group["params"]:
                self._label_gradient(p)
        self._in_optimizer = True

    def _leave_step(self, optimizer: torch.optim.Optimizer, *_: Any) -> None:
        self._label_optimizer_state((optimizer,))
        self._in_optimizer = False

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
        self._active = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: D105
        out = func(*args, **(kwargs or {}))
        # An output that shares storage with an input (a view, an in-place result) allocated nothing,
        # even when that storage was never tracked (a tensor made before tracking started).
        shared = {t.untyped_storage()._cdata for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}

        # A dtype conversion of a parameter (autocast's weight copies, or .to()) is a cast copy.
        cast = None
        if func is torch.ops.aten._to_copy.default and isinstance(args[0], torch.Tensor):
            source = self._seen.get(args[0].untyped_storage())
            if source is not None and source[0].category == "parameters":
                cast = "cast copies"

        def record_new(t: torch.Tensor) -> None:
            if t.untyped_storage()._cdata not in shared:
                self._record(t, cast)

        tree_map_only(torch.Tensor, record_new, out)
        return out


@dataclass
class MemoryReport:
    """What a measurement (or a prediction) found: the tracked peak, its anatomy and phase, and
    on CUDA the allocator's own peaks during the measured steps."""

    device: str
    peak: int
    peak_breakdown: dict[str, int]
    peak_phase: str
    trace: MemoryTrace
    cuda_allocated: int | None = None
    cuda_reserved: int | None = None
    predicted: bool = False

    def __str__(self) -> str:
        kind = "predicted" if self.predicted else "measured"
        lines = [f"{kind} peak (live tensor storage): {fmt_bytes(self.peak)}, reached in {self.peak_phase}"]
        lines += [f"  {c:<16}{fmt_bytes(b):>12}" for c, b in self.peak_breakdown.items()]
        if self.cuda_allocated is not None:
            lines.append(f"torch.cuda peak: {fmt_bytes(self.cuda_allocated)} allocated, "
                         f"{fmt_bytes(self.cuda_reserved or 0)} reserved")
        return "\n".join(lines)


@dataclass
class Workload:
    """A training step and the objects whose memory it uses."""

    step: Callable[[], Any]
    model: torch.nn.Module | None = None
    optimizer: torch.optim.Optimizer | list[torch.optim.Optimizer] | None = None  # a list: one per hook
    inputs: tuple[torch.Tensor, ...] = ()


def _device_of(work: Workload) -> torch.device:
    """The device of the workload's first parameter, else of its first input, else the CPU."""
    params = list(work.model.parameters()) if work.model is not None else []
    for t in params + [x for x in work.inputs if isinstance(x, torch.Tensor)]:
        return t.device
    return torch.device("cpu")


def measure_memory(work: Workload, steps: int = 1, *, _predicted: bool = False) -> MemoryReport:
    """Run work.step() `steps` times while counting memory; report the peak and the trace.

    On CUDA the report adds the caching allocator's peaks during these steps (the peak statistics
    are reset just before them): cuda_allocated is the workload's storage at the start plus the
    most the allocator's allocated bytes grew over their level at the start, so tensors that other
    code keeps alive are left out as they are from the tracked peak; cuda_reserved is the most the
    allocator held from the driver during the steps, for the whole process (a cache is not owned
    by one workload)."""
    if not isinstance(work, Workload):
        raise TypeError(f"measure_memory needs a hp.Workload, got {type(work).__name__}; "
                        "wrap your step as hp.Workload(step, model, optimizer, inputs)")
    positive("steps", steps, "pass how many training steps to run, 1 or more", whole=True)
    device = _device_of(work)
    on_cuda = device.type == "cuda" and not _predicted
    if on_cuda:
        gc.collect()  # garbage freed during the steps would otherwise lower the level we measure from
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        allocated_before = torch.cuda.memory_allocated(device)
    tracker = MemoryTracker(work.model, work.optimizer, work.inputs)
    with tracker:
        for i in range(steps):
            tracker.mark(f"step {i + 1}")
            work.step()
    trace = tracker.trace
    i = trace.peak_index()
    breakdown = {c: s[i] for c, s in trace.by_category().items()}
    report = MemoryReport(
        device=str(device), peak=trace.totals()[i],
        peak_breakdown=breakdown, peak_phase=trace.events[i][1].phase, trace=trace,
        predicted=_predicted)
    if on_cuda:
        torch.cuda.synchronize(device)
        first = trace.marks[0][0]  # the events before it are the workload's storage at the start
        tracked_before = trace.totals()[first - 1] if first else 0
        report.cuda_allocated = (torch.cuda.max_memory_allocated(device) - allocated_before
                                 + tracked_before)
        report.cuda_reserved = torch.cuda.max_memory_reserved(device)
    return report


def predict_memory(setup: Callable[[], Workload], steps: int = 1) -> MemoryReport:
    """Build the workload with setup() under FakeTensorMode and count its memory: tensors have
    shapes and dtypes but no data, so nothing is allocated and no arithmetic runs."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    if not callable(setup):
        raise TypeError("predict_memory needs a function that builds the workload (model, optimizer, "
                        "inputs, step) so it can be built again with fake tensors")
    with FakeTensorMode():
        work = setup()
        return measure_memory(work, steps, _predicted=True)
