"""Rank workers for tests/test_sharding_torch.py: importable functions (spawned ranks import their
function by name), kept out of the helpers package because only tests use them."""

import os
import time

import torch.distributed as dist


def fail_on(rank: int, world: int, bad_rank: int, how: str = "raise") -> int:
    """Worker for testing launch(): rank bad_rank raises ValueError (how='raise'), exits without a
    word ('exit') or hangs ('hang'); the others wait in a barrier for it."""
    if rank == bad_rank:
        if how == "raise":
            raise ValueError(f"rank {rank} was told to fail")
        if how == "exit":
            os._exit(3)
        time.sleep(3600)
    dist.barrier()
    return rank


def pid_of_rank(rank: int, world: int, seconds: float = 0.0) -> int:
    """Worker for testing launch(): sleep, then return this rank's process id."""
    time.sleep(seconds)
    return os.getpid()


def fsdp2_step_memory(rank: int, world: int, width: int, depth: int, batch: int) -> dict:
    """One FSDP2 Adam step of an MLP (every Linear sharded),
    its state made by a step before, measured by the course's tracker (hp.measure_memory) and by
    torch's FSDPMemTracker; returns both peaks' breakdowns and this rank's shard bytes."""
    import torch
    from torch import nn
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.fsdp import fully_shard

    import helpers as hp

    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.Tanh())])
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch // world, width, generator=torch.Generator().manual_seed(rank))

    def step() -> None:
        opt.zero_grad(set_to_none=False)
        model(x).pow(2).mean().backward()
        opt.step()

    step()  # Adam's state and the gradients exist before either measurement
    ours = hp.measure_memory(hp.Workload(step, model, opt, x))
    tracker = FSDPMemTracker(model, opt)
    tracker.track_inputs((x,))
    with tracker:
        step()
    (theirs,) = tracker.get_tracker_snapshot("peak").values()
    local = [p.to_local() for p in model.parameters()]
    return {"ours": ours.peak_breakdown, "ours_peak": ours.peak,
            "theirs": {getattr(k, "value", k): v for k, v in theirs.items()},
            "local_parameters": sum(t.untyped_storage().nbytes() for t in local),
            "global_parameters": sum(p.numel() * p.element_size() for p in model.parameters())}


def several(rank: int, world: int, stages: tuple[str, ...], width: int, depth: int, batch: int,
            fsdp2_depth: int, zero1_depth: int) -> dict:
    """Worker for the tests that share one launch (starting ranks is the slow part): this rank's number
    and process id, hp.rank_memory's results for `stages`, fsdp2_step_memory's for an MLP of
    `fsdp2_depth` layers, and hp.rank_memory's ZeRO-1 results for an MLP of `zero1_depth` layers
    (each builds its own model and measures only its own step)."""
    import helpers as hp

    return {"rank": rank, "pid": os.getpid(),
            "stages": hp.rank_memory(rank, world, stages, width, depth, batch),
            "fsdp2": fsdp2_step_memory(rank, world, width, fsdp2_depth, batch),
            "zero1_odd": hp.rank_memory(rank, world, ("zero1",), width, zero1_depth, batch)["zero1"]}
