"""Rank workers for tests/test_sharding_torch.py: importable functions (spawned ranks import their
function by name), kept out of the helpers package because only the tests of launch() use them."""

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
