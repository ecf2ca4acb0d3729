"""helpers.distributed_torch: ranks launched from Python report their results, a failing rank is
named with its exception, and no rank process outlives a launch (failure, timeout or interrupt); the
memory of the sharded steps in those ranks. Starting ranks is the slow part: the tests of what ranks
report share one launch (the fixture `ranks`)."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import helpers as hp
from helpers import distributed_torch as D

import rank_workers as W  # tests/rank_workers.py (pytest puts tests/ on sys.path)

ROOT = Path(__file__).resolve().parents[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _children() -> set[int]:
    me = os.getpid()
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(stat[1]) == me and stat[0] != "Z":
                out.add(int(d.name))
    return out


WIDTH, DEPTH, BATCH, N = 64, 4, 8, 2
ENGINES = ("ddp", "zero1", "fsdp2")
FSDP2_DEPTH = 2
ZERO1_DEPTH = 3   # 3 equal weights on 2 ranks: one rank gets two of them


@pytest.fixture(scope="module")
def ranks():
    """What each of N ranks of one launch reports (rank_workers.several), in the order launch returns it."""
    return hp.launch(W.several, N, ENGINES, WIDTH, DEPTH, BATCH, FSDP2_DEPTH, ZERO1_DEPTH, backend="gloo", timeout=300)


def test_ranks_report_in_rank_order(ranks):
    assert [r["rank"] for r in ranks] == list(range(N))
    pids = [r["pid"] for r in ranks]
    assert len(set(pids)) == N and os.getpid() not in pids
    assert not any(_alive(p) for p in pids)


def test_a_rank_that_raises_is_named_with_its_exception_and_nothing_is_left():
    before = _children()
    with pytest.raises(D.RankFailed, match=r"rank 1 of 2 failed: ValueError: rank 1 was told to fail"):
        hp.launch(W.fail_on, 2, 1, "raise", timeout=300)
    time.sleep(0.5)
    assert _children() - before <= {p for p in _children() if not _alive(p)}


def test_a_rank_that_dies_silently_is_named_with_its_exit_code():
    with pytest.raises(D.RankFailed, match=r"rank 0 of 2 failed: died with exit code 3"):
        hp.launch(W.fail_on, 2, 0, "exit", timeout=300)


def test_a_hanging_launch_times_out_and_stops_every_rank():
    before = _children()
    with pytest.raises(D.RankFailed, match=r"did not finish within"):
        hp.launch(W.fail_on, 2, 1, "hang", timeout=3)   # any limit: the rank never finishes
    time.sleep(0.5)
    assert not (_children() - before)


def test_an_interrupt_stops_every_rank():
    """A kernel's stop button is SIGINT to the kernel process: the ranks must go with the launch."""
    # A kernel handles SIGINT with Python's default handler; a process started from a background job (make test
    # run with &, nohup) inherits SIGINT ignored, so the child restores the default before it launches.
    code = textwrap.dedent("""
        import signal
        import sys
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.path.insert(0, "tests")
        import helpers as hp
        import rank_workers as W
        if __name__ == "__main__":
            hp.launch(W.fail_on, 2, 1, "hang", timeout=600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    ranks: list[int] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(ranks) < 2:   # wait until both ranks are running
        time.sleep(0.5)
        ranks = [int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit()
                 and _parent(int(d.name)) == proc.pid and b"multiprocessing" in _cmdline(int(d.name))
                 and b"resource_tracker" not in _cmdline(int(d.name))]
    assert len(ranks) == 2, "the two ranks did not start"
    time.sleep(2)   # the launch is waiting on them (they exist only once it started them)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=180)  # generous: on a loaded 2-core machine the ranks and torch take long to go
    assert "KeyboardInterrupt" in err
    time.sleep(0.5)
    assert not any(_alive(p) for p in ranks), "a rank outlived the interrupted launch"


def _parent(pid: int) -> int:
    try:
        return int((Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split())[1])
    except (FileNotFoundError, ProcessLookupError):
        return -1


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return b""


def test_a_function_defined_outside_a_module_is_refused():
    def local(rank, world):
        return rank
    with pytest.raises(ValueError, match="put it in a module"):
        hp.launch(local, 2)
    with pytest.raises(ValueError, match="whole number of ranks"):
        hp.launch(W.pid_of_rank, 0)


def test_rank_memory_matches_the_formulas(ranks):
    width, depth, n, engines = WIDTH, DEPTH, N, ENGINES
    sizes = [width * width, width] * depth
    P = sum(sizes)
    one_round = 4 * P * (n - 1) // n
    for r in (rank["stages"] for rank in ranks):
        for engine, stage in {"ddp": 0, "zero1": 1, "fsdp2": 3}.items():
            want = hp.sharded_bytes(sizes, n, stage)
            got = r[engine]
            assert (got["parameters"], got["gradients"], got["optimizer"]) == (want.parameters, want.gradients, want.optimizer)
            # Adam's 4-byte step counters, one per tensor this rank keeps state for (ZeRO-1: its half of them)
            assert got["counters"] == 4 * (len(sizes) // n if engine == "zero1" else len(sizes))
            # ZeroRedundancyOptimizer keeps DDP's all-reduce and adds a broadcast: a round over the algorithm
            extra = one_round if engine == "zero1" else 0
            assert sum(t for _, _, t in got["collectives"].values()) == hp.communication_bytes(P, n, stage) + extra
            # the step's peak: what was live then adds up to it, and it lies above the state at rest
            assert sum(got["at_peak"].values()) == got["peak"] > want.total + got["input"]
            # 'peak' is the least of five steps, 'peak_max' the greatest: never below it, and a whole number of bytes
            assert isinstance(got["peak_max"], int) and got["peak_max"] >= got["peak"]
            # DDP and ZeRO-1 peak in Adam's update, with the whole gradients; FSDP2 in the backward pass
            assert got["peak_phase"] == ("backward" if engine == "fsdp2" else "optimizer")
        # with gradient_as_bucket_view every gradient is a view of one of DDP's buckets: one copy, not two
        for engine in ("ddp", "zero1"):
            assert r[engine]["grads_in_buckets"] and r[engine]["grad_storages"] == r[engine]["buckets"] >= 1
        # torch's default zero_grad() drops every .grad, but DDP's buckets (DDP and ZeRO-1) keep the gradients'
        # storage, 4P, between steps; FSDP2's gradient shards are freed
        assert r["ddp"]["gradients_kept"] == r["zero1"]["gradients_kept"] == 4 * P and r["fsdp2"]["gradients_kept"] == 0
        # ZeroRedundancyOptimizer keeps Adam's two fp32 moments for the whole tensors it assigned this rank
        assert r["zero1"]["optimizer"] == 8 * r["zero1"]["owned"]
        assert "owned" not in r["ddp"] and "buckets" not in r["fsdp2"]
        # torch's own MemTracker sees DDP's step peak where the course's tracker does, to the byte
        assert r["ddp"]["peak_memtracker"] == r["ddp"]["peak"]
        assert all("peak_memtracker" not in r[e] for e in engines if e != "ddp")
        # FSDP2's backward peak: a layer gathered, one in the all-gather buffer, one in the reduce-scatter
        # buffer; the gradients freed by zero_grad (torch's default), so fewer than all shards are live
        one_layer = (width * width + width) * 4
        at = r["fsdp2"]["at_peak"]
        assert at["unsharded param"] == at["all gather"] == at["reduce scatter"] == one_layer
        assert at.get("sharded grad", 0) < r["fsdp2"]["gradients"]
    # the refusal is raised before any collective, so a call in this process shows it; that launch passes a
    # rank's exception on, by name and message, is test_a_rank_that_raises_is_named_with_its_exception_...
    with pytest.raises(ValueError, match="unknown stage 'zero2'"):
        hp.rank_memory(0, n, ("zero2",), width, depth, BATCH)


def test_fsdp2_dtensors_are_booked_at_their_local_shard(ranks):
    """A 2-rank FSDP2 Adam step (gloo, CPU): the parameters, gradients and Adam state FSDP2 keeps as
    DTensors are booked at this rank's shard, as torch's FSDPMemTracker books them and as
    hp.zero_bytes(P, 2, 3) counts them, not at their global size. The peaks' totals are not compared:
    the course's tracker does not follow UntypedStorage.resize_, by which FSDP2 frees and regrows its
    gathered parameters (FSDPMemTracker does), so its all-gather and reduce-scatter buffers differ, and with
    them the moment each tracker calls its peak."""
    width, depth, n = WIDTH, FSDP2_DEPTH, N
    P = depth * (width * width + width)
    want = hp.zero_bytes(P, n, 3)
    for r in (rank["fsdp2"] for rank in ranks):
        ours, theirs = r["ours"], r["theirs"]
        assert r["local_parameters"] == want.parameters == r["global_parameters"] // n
        assert ours["parameters"] == theirs["Sharded Param"] == want.parameters
        assert ours["gradients"] == theirs["Sharded Grad"] == want.gradients
        # Adam's moments, plus its 4-byte step counter per parameter tensor
        assert ours["optimizer state"] == theirs["OptState"] == want.optimizer + 4 * 2 * depth
        # Only what lives through the whole step is compared: the two trackers' peaks need not fall at
        # the same moment (gloo's collectives finish when they finish; under load the activations at
        # the two peaks once differed, 1,032 B against 8), so what is alive only for part of it may differ.
        assert ours["inputs"] == theirs["Inputs"]


def test_zero1_assigns_whole_tensors_so_an_odd_depth_breaks_the_per_tensor_cut(ranks):
    width, depth, n = WIDTH, ZERO1_DEPTH, N
    owned = [r["zero1_odd"]["owned"] for r in ranks]
    assert sum(owned) == depth * (width * width + width)
    assert [r["zero1_odd"]["optimizer"] for r in ranks] == [8 * o for o in owned]
    cut = hp.sharded_bytes([width * width, width] * depth, n, 1).optimizer
    assert max(8 * o for o in owned) > cut, (owned, cut)   # the per-tensor cut underestimates the fuller rank
