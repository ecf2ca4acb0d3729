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
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass
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


def _storages(t: torch.Tensor) -> list[torch.UntypedStorage]:
    """The storage that holds a tensor's data. A wrapper subclass (a DTensor of FSDP2, ...) owns none
    of its own (its untyped_storage() would stand for the whole, global tensor): what it holds is
    its inner tensors' storage, e.g. this rank's shard of a DTensor."""
    if is_traceable_wrapper_subclass(t):
        names, _ = t.__tensor_flatten__()
        inner = [getattr(t, name) for name in names]
        return [st for x in inner if isinstance(x, torch.Tensor) for st in _storages(x)]
    return [t.untyped_storage()]


# Operators that never make a storage: the device of a tensor (the autograd engine asks it thousands of
# times a step) and a tensor's value as a Python number.
_ALLOCATES_NOTHING = frozenset({torch.ops.prim.device.default, torch.ops.aten._local_scalar_dense.default})


def _batch_tensors(inputs: Any, what: str = "inputs") -> tuple[torch.Tensor, ...]:
    """The tensors of a batch given as one tensor, a dict of tensors (keyword inputs, as a Hugging
    Face model takes them), or a tuple or list of tensors (nested ones too); a TypeError naming
    what was given otherwise."""
    if isinstance(inputs, torch.Tensor):
        return (inputs,)
    if isinstance(inputs, Mapping):
        items = [(f"[{k!r}]", v) for k, v in inputs.items()]
    elif isinstance(inputs, (tuple, list)):
        items = [(f"[{i}]", v) for i, v in enumerate(inputs)]
    else:
        raise TypeError(f"{what} must be the batch's tensors: a tensor, a dict of tensors (keyword "
                        f"inputs) or a tuple of tensors; got {type(inputs).__name__}")
    out: list[torch.Tensor] = []
    for key, v in items:
        if not isinstance(v, (torch.Tensor, Mapping, tuple, list)):
            raise TypeError(f"{what}{key} is a {type(v).__name__}, not a tensor: pass only the batch's "
                            "tensors (a tensor, a dict of tensors or a tuple of tensors)")
        out += _batch_tensors(v, f"{what}{key}")
    return tuple(out)


class _Record:
    """One tracked storage: its size, what it holds, the phase that allocated it, and what made it:
    (operator, dtype, shape) of the tensor whose output allocated it, None for what existed before
    tracking (the model, the optimizer's state, the inputs)."""

    __slots__ = ("nbytes", "category", "phase", "made_by")

    def __init__(self, nbytes: int, category: str, phase: str,
                 made_by: tuple[str, torch.dtype, tuple[int, ...]] | None = None) -> None:
        self.nbytes, self.category, self.phase, self.made_by = nbytes, category, phase, made_by


@dataclass
class MemoryTrace:
    """Every allocation (+) and free (-) of tracked storage, in order, with marks between steps. Each
    event's record says its nbytes, category, phase and made_by (operator, dtype, shape, or None)."""

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

    Pass the model, optimizer and inputs (a tensor, a dict or a tuple of tensors) that exist before
    tracking starts so their storage is counted (and labelled); everything operators allocate inside
    is tracked automatically. A tensor subclass that wraps others (a DTensor: one rank's shard of a
    sharded tensor) is counted by the storage of what it wraps. The
    optimizer may be a list of optimizers, e.g. one per parameter stepped from a
    post-accumulate-grad hook inside backward (the optimizer fused into backward): each step is
    booked as the optimizer phase, and the gradients it reads are labelled just before it."""

    def __init__(self, model: torch.nn.Module | None = None,
                 optimizer: torch.optim.Optimizer | Iterable[torch.optim.Optimizer] | None = None,
                 inputs: Any = ()) -> None:
        super().__init__()
        self.model, self.optimizer, self.inputs = model, optimizer, _batch_tensors(inputs)
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
        for st in _storages(t):
            self._record_storage(st, category, phase)

    def _record_storage(self, st: torch.UntypedStorage, category: str | None, phase: str | None,
                        made_by: tuple[str, torch.dtype, tuple[int, ...]] | None = None) -> None:
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
        rec = _Record(st.nbytes(), category, phase, made_by)
        self._seen[st] = (rec, weakref.ref(st, lambda _ref, rec=rec: self._free(rec)))
        self._live += rec.nbytes
        self._event(+1, rec)

    def _free(self, rec: _Record) -> None:
        if self._active:
            self._live -= rec.nbytes
            self._event(-1, rec)

    def _event(self, sign: int, rec: _Record) -> None:
        """Book an allocation (+1) or a free (-1), self._live already updated: in the trace."""
        self.trace.events.append((sign, rec))

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
        # Each storage's weak reference calls back into the tracker (self._free): through them the tracker is in a
        # reference cycle, kept alive with its trace until a collection, where gc.get_objects() finds it. Dropped, the
        # tracker goes with the last reference to it (a tracker is used once; what it found is in self.trace).
        self._seen = WeakIdKeyDictionary()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: D105
        out = func(*args, **(kwargs or {}))
        if func.is_view or func in _ALLOCATES_NOTHING:   # a view of an input's storage, a device or a number:
            return out                                    # nothing new (most of the operators a backward asks for)
        # An output that shares storage with an input (a view, an in-place result) allocated nothing,
        # even when that storage was never tracked (a tensor made before tracking started).
        shared = {st._cdata for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor) for st in _storages(t)}

        # A dtype conversion of a parameter (autocast's weight copies, or .to()) is a cast copy.
        cast = None
        if func is torch.ops.aten._to_copy.default and isinstance(args[0], torch.Tensor):
            sources = [self._seen.get(st) for st in _storages(args[0])]
            if any(s is not None and s[0].category == "parameters" for s in sources):
                cast = "cast copies"

        def record_new(t: torch.Tensor) -> None:
            for st in _storages(t):
                if st._cdata not in shared:
                    self._record_storage(st, cast, None, (func.__name__, t.dtype, tuple(t.shape)))

        tree_map_only(torch.Tensor, record_new, out)
        return out


class _PeakTracker(MemoryTracker):
    """MemoryTracker that keeps only the running total, its highest value and the phase that reached it: no trace,
    so nothing of what the peak holds (hp.measure_peak, hp.predict_peak). Its trace stays empty."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._top, self._top_phase, self._at_first_mark = 0, "", None
        self._booked = False

    def _event(self, sign: int, rec: _Record) -> None:
        self._booked = True
        if sign > 0 and self._live > self._top:  # the first event at which the total is highest, as peak_index
            self._top, self._top_phase = self._live, rec.phase

    def mark(self, label: str) -> None:
        if self._at_first_mark is None:
            self._at_first_mark = self._live  # the workload's tracked bytes at the start of the steps


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
    # Bytes of optimizer state that the last measured step created and kept (Adam and AdamW make
    # their moments in their first step, after its forward and backward passes): no measured step
    # started with that state, so the peak may be below a steady step's. 0 when every measured step
    # ran with the state it keeps, e.g. with steps >= 2.
    new_optimizer_state: int = 0

    @property
    def warning(self) -> str | None:
        """What makes this peak lower than a steady step's, and what to do; None when nothing does."""
        if not self.new_optimizer_state:
            return None
        return (f"warning: the last measured step created {fmt_bytes(self.new_optimizer_state)} of optimizer "
                "state (as Adam does in its first step), so no measured step started with it and this peak "
                "may be below a steady step's: measure with steps >= 2")

    def __str__(self) -> str:
        kind = "predicted" if self.predicted else "measured"
        lines = [f"{kind} peak (live tensor storage): {fmt_bytes(self.peak)}, reached in {self.peak_phase}"]
        lines += [f"  {c:<16}{fmt_bytes(b):>12}" for c, b in self.peak_breakdown.items()]
        if self.cuda_allocated is not None:
            lines.append(f"torch.cuda peak: {fmt_bytes(self.cuda_allocated)} allocated, "
                         f"{fmt_bytes(self.cuda_reserved or 0)} reserved")
        if self.warning:
            lines.append(self.warning)
        return "\n".join(lines)


@dataclass
class Workload:
    """A training step and the objects whose memory it uses. `inputs` is the batch the step reads:
    a tensor, a dict of tensors (keyword inputs, e.g. a Hugging Face model's input_ids and labels)
    or a tuple of tensors."""

    step: Callable[[], Any]
    model: torch.nn.Module | None = None
    optimizer: torch.optim.Optimizer | list[torch.optim.Optimizer] | None = None  # a list: one per hook
    inputs: Any = ()

    def __post_init__(self) -> None:
        if not callable(self.step):
            raise TypeError(f"Workload's step must be a function that runs one training step, got "
                            f"{type(self.step).__name__}")
        if self.model is not None and not isinstance(self.model, torch.nn.Module):
            raise TypeError(f"Workload's model must be a torch.nn.Module (or None), got {type(self.model).__name__}")
        _batch_tensors(self.inputs, "Workload inputs")


@dataclass(frozen=True)
class PeakReport:
    """What hp.measure_peak (or hp.predict_peak) found: the peak and the phase of the step that reached it, and on
    CUDA the allocator's own peaks; none of what the peak holds (hp.measure_memory's report has that)."""

    device: str
    peak: int
    peak_phase: str
    cuda_allocated: int | None = None
    cuda_reserved: int | None = None
    predicted: bool = False

    def __str__(self) -> str:
        kind = "predicted" if self.predicted else "measured"
        line = f"{kind} peak (live tensor storage): {fmt_bytes(self.peak)}, reached in {self.peak_phase}"
        if self.cuda_allocated is not None:
            line += (f"\ntorch.cuda peak: {fmt_bytes(self.cuda_allocated)} allocated, "
                     f"{fmt_bytes(self.cuda_reserved or 0)} reserved")
        return line


def _device_of(work: Workload) -> torch.device:
    """The device of the workload's first parameter, else of its first input, else the CPU."""
    params = list(work.model.parameters()) if work.model is not None else []
    for t in params + list(_batch_tensors(work.inputs)):
        return t.device
    return torch.device("cpu")


def _new_optimizer_state(trace: MemoryTrace) -> int:
    """Bytes of optimizer state allocated during the last measured step and alive at its end."""
    start = trace.marks[-1][0] if trace.marks else 0
    kept: dict[int, int] = {}
    for sign, rec in trace.events[start:]:
        if rec.category == "optimizer state":
            if sign > 0:
                kept[id(rec)] = rec.nbytes
            else:
                kept.pop(id(rec), None)
    return sum(kept.values())


def measure_memory(work: Workload, steps: int = 1, *, tracker: type[MemoryTracker] | None = None,
                   _predicted: bool = False) -> MemoryReport:
    """Run work.step() `steps` times while counting memory; report the peak and the trace.

    On CUDA the report adds the caching allocator's peaks during these steps (the peak statistics
    are reset just before them): cuda_allocated is the workload's storage at the start plus the
    most the allocator's allocated bytes grew over their level at the start, so tensors that other
    code keeps alive are left out as they are from the tracked peak; cuda_reserved is the most the
    allocator held from the driver during the steps, for the whole process (a cache is not owned
    by one workload). tracker: a subclass of MemoryTracker to count with (one that also notes
    something, e.g. helpers.estimate's logits-sized tensors); MemoryTracker by default."""
    _valid(work, steps, "measure_memory")
    tracker = (tracker or MemoryTracker)(work.model, work.optimizer, work.inputs)
    device, cuda = _run_steps(work, steps, tracker, _predicted)
    trace = tracker.trace
    i = trace.peak_index()
    breakdown = {c: s[i] for c, s in trace.by_category().items()}
    report = MemoryReport(
        device=str(device), peak=trace.totals()[i],
        peak_breakdown=breakdown, peak_phase=trace.events[i][1].phase, trace=trace,
        predicted=_predicted, new_optimizer_state=_new_optimizer_state(trace))
    if cuda is not None:
        first = trace.marks[0][0]  # the events before it are the workload's storage at the start
        tracked_before = trace.totals()[first - 1] if first else 0
        allocated_before, allocated, report.cuda_reserved = cuda
        report.cuda_allocated = allocated - allocated_before + tracked_before
    return report


def _valid(work: Workload, steps: int, who: str) -> None:
    """TypeError or ValueError where `work` is no hp.Workload or `steps` no positive whole number."""
    if not isinstance(work, Workload):
        raise TypeError(f"{who} needs a hp.Workload, got {type(work).__name__}; "
                        "wrap your step as hp.Workload(step, model, optimizer, inputs)")
    positive("steps", steps, "pass how many training steps to run, 1 or more", whole=True)


def _run_steps(work: Workload, steps: int, tracker: MemoryTracker,
               predicted: bool) -> tuple[torch.device, tuple[int, int, int] | None]:
    """Run work.step() `steps` times under `tracker`, each step marked; the workload's device and, on CUDA (not for a
    prediction), the allocator's (allocated bytes before the steps, its allocated peak, its reserved peak) during
    them, its peak statistics reset just before them."""
    device = _device_of(work)
    on_cuda = device.type == "cuda" and not predicted
    if on_cuda:
        gc.collect()  # garbage freed during the steps would otherwise lower the level we measure from
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        allocated_before = torch.cuda.memory_allocated(device)
    with tracker:
        for i in range(steps):
            tracker.mark(f"step {i + 1}")
            work.step()
    if not on_cuda:
        return device, None
    torch.cuda.synchronize(device)
    return device, (allocated_before, torch.cuda.max_memory_allocated(device), torch.cuda.max_memory_reserved(device))


def measure_peak(work: Workload, steps: int = 1) -> PeakReport:
    """The peak of work.step() run `steps` times, and the phase that reached it: hp.measure_memory's peak, peak_phase
    and (on CUDA) allocator peaks, to the byte, without what the peak holds. It keeps no trace: for a comparison of
    totals where the breakdown is what a question asks."""
    _valid(work, steps, "measure_peak")
    return _peak_of(work, steps, predicted=False)


def _peak_of(work: Workload, steps: int, predicted: bool) -> PeakReport:
    tracker = _PeakTracker(work.model, work.optimizer, work.inputs)
    device, cuda = _run_steps(work, steps, tracker, predicted)
    if not tracker._booked:
        raise ValueError("the trace is empty: nothing was allocated while tracking")
    report = PeakReport(device=str(device), peak=tracker._top, peak_phase=tracker._top_phase, predicted=predicted)
    if cuda is not None:
        allocated_before, allocated, reserved = cuda
        report = replace(report, cuda_allocated=allocated - allocated_before + tracker._at_first_mark,
                         cuda_reserved=reserved)
    return report


def predict_memory(setup: Callable[[], Workload], steps: int = 1, *,
                   tracker: type[MemoryTracker] | None = None) -> MemoryReport:
    """Build the workload with setup() under FakeTensorMode and count its memory: tensors have
    shapes and dtypes but no data, so nothing is allocated and no arithmetic runs (tracker: as for
    measure_memory)."""
    return _faked(setup, "predict_memory", lambda work: measure_memory(work, steps, tracker=tracker, _predicted=True))


def predict_peak(setup: Callable[[], Workload], steps: int = 1) -> PeakReport:
    """hp.measure_peak on the workload setup() builds under FakeTensorMode (as hp.predict_memory builds it): the
    predicted peak and its phase, to the byte of hp.predict_memory's, without what the peak holds."""
    def count(work: Workload) -> PeakReport:
        _valid(work, steps, "predict_peak")
        return _peak_of(work, steps, predicted=True)
    return _faked(setup, "predict_peak", count)


def _faked(setup: Callable[[], Workload], who: str, count: Callable[[Workload], Any]) -> Any:
    """count(work) of the workload setup() builds under FakeTensorMode, with a clear error where the workload or its
    step uses a real tensor."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    if not callable(setup):
        raise TypeError(f"{who} needs a function that builds the workload (model, optimizer, "
                        "inputs, step) so it can be built again with fake tensors")
    with FakeTensorMode():
        work = setup()
        if not isinstance(work, Workload):
            raise TypeError(f"{who}'s setup must return a hp.Workload, got {type(work).__name__}")
        real = _real_tensor(work)
        if real:
            raise RuntimeError(_BUILT_OUTSIDE.format(who=who, what=real))
        try:
            return count(work)
        except AssertionError as exc:  # FakeTensorMode's own words for a real tensor met in an operator
            if "convert all Tensors to FakeTensors" not in str(exc):
                raise
            raise RuntimeError(_BUILT_OUTSIDE.format(who=who, what="a tensor the step uses")) from exc


_BUILT_OUTSIDE = ("{who}: {what} was made outside setup(), with real data; build the model, "
                  "optimizer and batch inside the setup function you pass (e.g. "
                  "hp.{who}(lambda: make_workload())), so that they are made as fake tensors")


def _real_tensor(work: Workload) -> str | None:
    """A description of the first tensor of the workload that is not a fake tensor, or None."""
    from torch._subclasses.fake_tensor import FakeTensor

    def real(t: torch.Tensor) -> bool:
        if is_traceable_wrapper_subclass(t):
            names, _ = t.__tensor_flatten__()
            return any(real(x) for x in (getattr(t, n) for n in names) if isinstance(x, torch.Tensor))
        return not isinstance(t, FakeTensor)

    if work.model is not None:
        for name, t in [*work.model.named_parameters(), *work.model.named_buffers()]:
            if real(t):
                return f"the model's {name!r}"
    if any(real(t) for t in _batch_tensors(work.inputs)):
        return "the batch (inputs)"
    optimizers = (() if work.optimizer is None else (work.optimizer,)
                  if isinstance(work.optimizer, torch.optim.Optimizer) else tuple(work.optimizer))
    for opt in optimizers:
        if any(real(v) for state in opt.state.values() for v in state.values() if isinstance(v, torch.Tensor)):
            return "the optimizer's state"
    return None
