"""Run a function on N local torch.distributed ranks from a notebook, and the per-rank workers of
lesson 06 (data parallelism, ZeRO-1, FSDP2) that count each rank's memory and communication.

launch() starts the ranks as fresh processes (multiprocessing's spawn start method: a notebook's
kernel cannot be forked safely), gives them a file of their own to meet at (torch.distributed's
FileStore in a fresh temporary folder: unlike a TCP port picked as free, no other launch on the machine
can take it between the pick and the bind), with gloo on a CPU and NCCL on GPUs, and collects one
result per rank. A rank that raises, dies or hangs past the timeout ends the
launch with RankFailed naming the rank and its error; the other ranks are terminated, and so are all
of them when the caller is interrupted (a notebook's stop button): no process outlives launch().
Workers must be importable functions (spawn pickles them by name), hence here and not in a notebook.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import queue
import signal
import shutil
import sys
import tempfile
import time
import traceback
from typing import Any, Callable

import torch
import torch.distributed as dist
from torch import nn


class RankFailed(RuntimeError):
    """A rank of a launch raised, died or timed out; the message names the rank and its error."""


def _entry(fn: Callable, rank: int, world: int, store: str, backend: str, args: tuple, results: Any) -> None:
    if sys.platform.startswith("linux"):  # should the launching kernel be killed outright, take the rank with it
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    try:
        torch.set_num_threads(1)   # N ranks share the machine's cores
        dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=world)
        out = fn(rank, world, *args)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises RankFailed
        # report first: leaving the process group could wait on ranks stuck in a collective
        results.put((rank, False, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
        return
    results.put((rank, True, out))
    dist.destroy_process_group()


def _stop(procs: list) -> None:
    procs = [p for p in procs if p.pid is not None]  # started ones only
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + 5
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()


def launch(fn: Callable, world: int, *args: Any, backend: str | None = None, timeout: float = 120.0) -> list:
    """Run fn(rank, world, *args) on `world` local ranks in fresh processes; return their results
    in rank order. Raises RankFailed (rank, exception, traceback) when a rank fails or times out,
    after stopping every rank; an interrupt also stops every rank before it propagates."""
    if not isinstance(world, int) or isinstance(world, bool) or world < 1:
        raise ValueError(f"world must be a whole number of ranks, 1 or more, got {world!r}")
    if getattr(fn, "__module__", "__main__") == "__main__" or "<locals>" in getattr(fn, "__qualname__", ""):
        raise ValueError(f"{getattr(fn, '__qualname__', fn)!r} is defined in the notebook (or inside a "
                         "function): spawned ranks import their function by name, so put it in a module")
    backend = backend or ("nccl" if torch.cuda.device_count() >= world else "gloo")
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    folder = tempfile.mkdtemp(prefix="ranks-")   # the ranks' FileStore; removed when the launch ends
    procs = [ctx.Process(target=_entry, args=(fn, r, world, os.path.join(folder, "store"), backend, args, results),
                         daemon=True) for r in range(world)]
    got: dict[int, Any] = {}
    failed: dict[int, str] = {}
    try:
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout
        grace = None  # after a first failure, a moment for the others' reports (to tell cause from echo)
        while len(got) + len(failed) < world:
            now = time.monotonic()
            if grace is not None and now > grace:
                break
            try:
                rank, ok, out = results.get(timeout=0.2)
                (got if ok else failed)[rank] = out
                if not ok and grace is None:
                    grace = time.monotonic() + 3
                continue
            except queue.Empty:
                pass
            silent = [r for r, p in enumerate(procs) if r not in got and r not in failed
                      and p.exitcode not in (None, 0)]
            if silent and grace is None:
                grace = now + 3
            if grace is None and now > deadline:
                missing = [r for r in range(world) if r not in got]
                raise RankFailed(f"rank {missing[0]} of {world} did not finish within {timeout:g} s "
                                 "(waiting in a collective that another rank never joined?)") from None
        for r, p in enumerate(procs):
            if r not in got and r not in failed and p.exitcode not in (None, 0):
                failed[r] = f"died with exit code {p.exitcode} before reporting"
        if failed:
            raise RankFailed(_failure_message(failed, world))
        for p in procs:
            p.join(10)
        return [got[r] for r in range(world)]
    finally:
        _stop(procs)
        shutil.rmtree(folder, ignore_errors=True)


def _failure_message(failed: dict[int, str], world: int) -> str:
    """Name the rank whose failure caused the others': a collective's error on one rank (gloo or
    NCCL saying its peer went away) is usually the echo of another rank's exception or death."""
    def echo(text: str) -> bool:
        return any(w in text for w in ("gloo", "NCCL", "Connection reset", "Connection closed", "DistBackendError"))
    order = sorted(failed, key=lambda r: (echo(failed[r]), r))
    first = order[0]
    msg = f"rank {first} of {world} failed: {failed[first]}"
    if len(order) > 1:
        msg += "\n(then " + "; ".join(f"rank {r}: {failed[r].splitlines()[0]}" for r in order[1:]) + ")"
    return msg


# -- lesson 06's workers -------------------------------------------------------------------------------

def _mlp(width: int, depth: int) -> nn.Sequential:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.Tanh()]
    return nn.Sequential(*layers)


def _nbytes(tensors) -> int:
    seen: dict[int, int] = {}
    for t in tensors:
        if hasattr(t, "to_local"):  # a DTensor (FSDP2): count this rank's shard
            t = t.to_local()
        st = t.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())


def _state_tensors(optimizer: torch.optim.Optimizer, counters: bool = False) -> list:
    """This rank's optimizer state tensors: Adam's moments, or (counters=True) its 0-dim step counters."""
    inner = getattr(optimizer, "optim", optimizer)  # ZeroRedundancyOptimizer keeps its shard's state in .optim
    return [v for s in inner.state.values() for v in s.values()
            if isinstance(v, torch.Tensor) and (v.dim() == 0) == counters]


def rank_memory(rank: int, world: int, stages: tuple[str, ...], width: int, depth: int, batch: int,
                steps: int = 2) -> dict:
    """Worker: the memory and traffic of each stage (see _stage_memory) in turn, in one launch (starting ranks is the slow part)."""
    return {stage: _stage_memory(stage, rank, world, width, depth, batch, steps) for stage in stages}


def _stage_memory(stage: str, rank: int, world: int, width: int, depth: int, batch: int, steps: int = 2) -> dict:
    """Worker: train the lesson's MLP for a few Adam steps under `stage` ('ddp', 'zero1' or 'fsdp2'),
    each step freeing the gradients first (torch's default zero_grad), counting the
    collectives this rank calls per step (calls, payload bytes, bytes sent: the mean over the first
    `steps` steps), then the peak of five more (_step_peak); return those, and this rank's bytes of
    parameters, gradients, optimizer state (Adam's moments), Adam's step counters and input after
    the last step, and of them the bytes zero_grad() leaves alive ('gradients_kept'); under DDP, its
    buckets, the gradients' distinct storages and whether all are the buckets'; under ZeRO-1, the elements of the whole tensors assigned to this rank ('owned')."""
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = _mlp(width, depth)
    buckets: dict[int, int] = {}   # DDP: bucket index -> its buffer's storage
    if stage in ("ddp", "zero1"):
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
        model = DDP(model, gradient_as_bucket_view=True)  # gradients live in DDP's buckets, no second copy

        # DDP's all-reduce, called from Python (so counted); unannotated, as DDP checks a hook's annotations
        def hook(group, bucket):
            buckets[bucket.index()] = bucket.buffer().untyped_storage().data_ptr()   # the latest, after a rebuild
            return allreduce_hook(group, bucket)
        model.register_comm_hook(None, hook)
        if stage == "ddp":
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        else:
            opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=1e-3)
    elif stage == "fsdp2":
        from torch.distributed.fsdp import fully_shard
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        fully_shard(model)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    else:
        raise ValueError(f"unknown stage {stage!r}; use 'ddp', 'zero1' or 'fsdp2'")
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(batch // world, width, generator=g)

    def forward() -> torch.Tensor:
        opt.zero_grad()   # torch's default (set_to_none=True): drops .grad; DDP's buckets keep their storage
        return model(x).pow(2).mean()

    def step() -> None:
        forward().backward()
        opt.step()

    with _CountedCollectives(rank, world) as comm:
        for _ in range(steps):
            step()
    peak = _step_peak(stage, step, forward, model, opt, x)   # steady steps: DDP rebuilds its buckets in step 2
    params = list(model.parameters())
    grads = [p.grad for p in params if p.grad is not None]
    extra: dict[str, Any] = {}
    if buckets:   # are the gradients views of DDP's buckets? (distinct storages, and how many are buckets')
        storages = {g.untyped_storage().data_ptr() for g in grads}
        extra = {"buckets": len(buckets), "grad_storages": len(storages),
                 "grads_in_buckets": storages <= set(buckets.values())}
    gradients = _nbytes(grads)
    del grads
    extra["gradients_kept"] = _kept_by_zero_grad(params, opt)
    if stage == "zero1":   # the elements of the whole tensors ZeroRedundancyOptimizer assigned to this rank
        extra["owned"] = sum(p.numel() for group in opt._partition_parameters()[rank] for p in group["params"])
    return {"parameters": _nbytes(params), "gradients": gradients, **extra,
            "optimizer": _nbytes(_state_tensors(opt)), "counters": _nbytes(_state_tensors(opt, counters=True)),
            "input": x.nbytes, **peak,
            "collectives": {k: [c // steps, b // steps, t // steps] for k, (c, b, t) in comm.counts.items() if c}}


def _kept_by_zero_grad(params: list, opt: torch.optim.Optimizer) -> int:
    """Bytes of the gradients' storages still alive after torch's default opt.zero_grad(), which sets every .grad to None."""
    from torch.multiprocessing.reductions import StorageWeakRef   # a weak reference: it keeps nothing alive
    local = [p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad for p in params if p.grad is not None]
    refs = {s.data_ptr(): (StorageWeakRef(s), s.nbytes()) for s in (t.untyped_storage() for t in local)}
    del local
    opt.zero_grad()
    if any(p.grad is not None for p in params):
        raise RuntimeError("zero_grad() left a gradient in place; expected torch's default, set_to_none=True")
    return sum(n for ref, n in refs.values() if not ref.expired())


def _step_peak(stage: str, step: Callable[[], None], forward: Callable[[], torch.Tensor], model: nn.Module,
               opt: torch.optim.Optimizer, x: torch.Tensor, steps: int = 5) -> dict[str, Any]:
    """The least and the greatest of `steps` steps' peaks of live tensor storage ('peak', 'peak_max'),
    the least step's phase ('peak_phase': forward, backward or optimizer) and what was live then, by
    kind ('at_peak'): the course's tracker (hp.measure_memory) for DDP and ZeRO-1, torch's
    FSDPMemTracker for FSDP2 (the course's tracker books FSDP2's DTensors at this rank's shard, but
    does not follow UntypedStorage.resize_, by which FSDP2 frees and regrows its gathered
    parameters, nor name FSDP2's buffers). Under DDP, also the peak of one more step by torch's MemTracker
    ('peak_memtracker'), to compare the two."""
    # Both, for every engine: gloo runs collectives on threads of its own, which may let go of a
    # finished collective's buffer a moment after the call returns, so on a loaded machine a step's
    # peak can read more than another's.
    if stage == "fsdp2":
        def one() -> dict[str, Any]:
            return _fsdp2_step_peak(forward, model, opt, x)
    else:
        from .memory_torch import Workload, measure_memory

        def one() -> dict[str, Any]:
            report = measure_memory(Workload(step, model, getattr(opt, "optim", opt), (x,)))  # ZeRO-1: the local Adam
            return {"peak": report.peak, "peak_phase": report.peak_phase,
                    "at_peak": {k: v for k, v in report.peak_breakdown.items() if v}}
    runs = [one() for _ in range(steps)]
    out = {**min(runs, key=lambda r: r["peak"]), "peak_max": max(r["peak"] for r in runs)}
    if stage == "ddp":
        from torch.distributed._tools.mem_tracker import MemTracker
        tracker = MemTracker()
        tracker.track_external(model, opt, x)
        with tracker:
            step()
        (snapshot,) = tracker.get_tracker_snapshot("peak").values()
        out["peak_memtracker"] = snapshot["Total"]
    return out


def _fsdp2_step_peak(forward: Callable[[], torch.Tensor], model: nn.Module, opt: torch.optim.Optimizer,
                     x: torch.Tensor) -> dict[str, Any]:
    """One FSDP2 step's peak under torch's FSDPMemTracker, what was live then, and the phase that reached it."""
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    tracker = FSDPMemTracker(model, opt)
    tracker.track_inputs((x,))

    def total() -> int:   # the peak so far; one device: this rank's CPU
        (snapshot,) = tracker.get_tracker_snapshot("peak").values()
        return snapshot["Total"]
    with tracker:          # the step in its three phases, the peak read after each
        loss = forward()
        after = [total()]
        loss.backward()
        after.append(total())
        opt.step()
        after.append(total())
    (snapshot,) = tracker.get_tracker_snapshot("peak").values()
    kinds = {getattr(k, "value", k).lower(): v for k, v in snapshot.items() if v and k != "Total"}
    phase = ("forward", "backward", "optimizer")[after.index(after[-1])]
    return {"peak": snapshot["Total"], "peak_phase": phase, "at_peak": kinds}


class _CountedCollectives:
    """Count the torch.distributed collectives called while active, by kind: calls, payload bytes,
    and the bytes this rank sends with ring algorithms (broadcast: a direct send from the source)."""

    _KINDS = {"all_reduce": "all-reduce", "broadcast": "broadcast", "all_gather_single": "all-gather",
              "all_gather_into_tensor": "all-gather", "reduce_scatter_single": "reduce-scatter",
              "reduce_scatter_tensor": "reduce-scatter"}

    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world, self.saved = rank, world, {}
        self.counts = {k: [0, 0, 0] for k in dict.fromkeys(self._KINDS.values())}

    def _wrap(self, name: str, real: Callable) -> Callable:
        kind, n = self._KINDS[name], self.world

        def counted(*args: Any, **kwargs: Any) -> Any:
            t = args[0] if args else kwargs.get("tensor", kwargs.get("output"))
            if kind == "reduce-scatter":
                t = args[1] if len(args) > 1 else kwargs["input"]
            size = t.numel() * t.element_size()
            if kind == "all-reduce":
                sent = 2 * (n - 1) * size // n
            elif kind == "broadcast":
                src = kwargs.get("src", args[1] if len(args) > 1 else None)
                sent = (n - 1) * size if src == self.rank else 0
            else:
                sent = (n - 1) * size // n
            c = self.counts[kind]
            c[0], c[1], c[2] = c[0] + 1, c[1] + size, c[2] + sent
            return real(*args, **kwargs)
        return counted

    def __enter__(self) -> "_CountedCollectives":
        for name in self._KINDS:
            self.saved[name] = getattr(dist, name)
            setattr(dist, name, self._wrap(name, self.saved[name]))
        return self

    def __exit__(self, *exc: Any) -> None:
        for name, real in self.saved.items():
            setattr(dist, name, real)
