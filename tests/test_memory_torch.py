import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import helpers as hp


def test_known_allocations_give_the_exact_peak():
    tracker = hp.MemoryTracker()
    with tracker:
        a = torch.empty(1000)                      # 4000 B
        b = torch.empty(500, dtype=torch.float64)  # 4000 B -> 8000 live
        view = b[:10]                              # a view shares b's storage: nothing new
        del a                                      # 4000 live
        c = torch.empty(3000, dtype=torch.int8)    # 7000 live
    assert tracker.trace.totals() == [4000, 8000, 4000, 7000]
    assert max(tracker.trace.totals()) == 8000 and tracker.trace.peak_index() == 1
    del b, view, c


def test_each_record_says_what_made_it():
    lin = nn.Linear(8, 4)
    x = torch.ones(3, 8)
    tracker = hp.MemoryTracker(lin, inputs=x)
    with tracker:
        y = lin(x).relu()
        half = y.to(torch.bfloat16)
    made = [(rec.category, rec.made_by) for sign, rec in tracker.trace.events if sign > 0]
    assert made[:3] == [("parameters", None)] * 2 + [("inputs", None)]  # there before tracking: made by nothing
    assert made[3:] == [("activations", ("addmm.default", torch.float32, (3, 4))),
                        ("activations", ("relu.default", torch.float32, (3, 4))),
                        ("activations", ("_to_copy.default", torch.bfloat16, (3, 4)))]
    del y, half


def test_views_of_untracked_tensors_allocate_nothing():
    outside = torch.ones(1000)  # made before tracking, not passed to the tracker
    tracker = hp.MemoryTracker()
    with tracker:
        parts = outside.chunk(2)          # views of the untracked storage
        outside.mul_(2)                   # in place: no new storage
        copy = parts[0].clone()           # a real allocation: 500 floats
    assert tracker.trace.totals() == [2000]
    del parts, copy


def test_frees_after_tracking_are_not_recorded():
    tracker = hp.MemoryTracker()
    with tracker:
        a = torch.empty(10)
    del a
    assert tracker.trace.totals() == [40]


def _sgd_workload():
    torch.manual_seed(0)
    net = nn.Linear(1000, 1000, bias=False)
    X = torch.randn(100, 1000)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def step():
        opt.zero_grad(set_to_none=True)
        net(X).sum().backward()
        opt.step()

    return hp.Workload(step, net, opt, (X,))


def test_small_training_step_matches_the_hand_count():
    report = hp.measure_memory(_sgd_workload(), steps=2)
    # By hand: the weight (4 MB), its gradient (4 MB) and the input kept for backward (0.4 MB).
    by_hand = 1000 * 1000 * 4 + 1000 * 1000 * 4 + 100 * 1000 * 4
    assert abs(report.peak - by_hand) / by_hand < 0.01
    assert report.peak_breakdown["parameters"] == 4_000_000
    assert report.peak_breakdown["gradients"] == 4_000_000
    assert report.peak_breakdown["optimizer state"] == 0
    assert report.peak_breakdown["inputs"] == 400_000


def test_adam_state_is_labelled_and_is_two_copies_of_the_weights():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))
    X = torch.randn(32, 64)
    opt = torch.optim.Adam(net.parameters())
    P = sum(p.numel() for p in net.parameters())

    def step():
        opt.zero_grad(set_to_none=True)
        net(X).square().mean().backward()
        opt.step()

    report = hp.measure_memory(hp.Workload(step, net, opt, (X,)), steps=2)
    series = report.trace.by_category()
    # Adam keeps exp_avg and exp_avg_sq (8 bytes per parameter) plus one 4-byte step per tensor.
    assert series["optimizer state"][-1] == 8 * P + 4 * len(list(net.parameters()))
    assert series["parameters"][-1] == 4 * P
    assert report.peak >= 16 * P
    assert [label for _, label in report.trace.marks] == ["step 1", "step 2"]


def test_peak_lands_in_backward_when_activations_dominate():
    torch.manual_seed(0)
    net = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(32, 32), nn.ReLU())])
    X = torch.randn(4096, 32)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def step():
        opt.zero_grad(set_to_none=True)
        net(X).sum().backward()
        opt.step()

    report = hp.measure_memory(hp.Workload(step, net, opt, (X,)), steps=2)
    assert report.peak_phase == "backward"
    i = report.trace.peak_index()
    assert report.trace.step_of(i) in ("step 1", "step 2")
    most = max(report.trace.by_category()["activations"])
    assert report.peak_breakdown["activations"] > 0.5 * most  # early: most activations still held
    assert report.peak_breakdown["inputs"] == X.nbytes  # the batch is an input, not an activation
    assert report.peak_breakdown["activations"] + X.nbytes > 0.5 * report.peak


def test_measurement_is_deterministic():
    a = hp.measure_memory(_sgd_workload(), steps=2)
    b = hp.measure_memory(_sgd_workload(), steps=2)
    assert a.trace.totals() == b.trace.totals()


def _small_setup():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256))
    X = torch.randn(128, 256)
    opt = torch.optim.AdamW(net.parameters())

    def step():
        opt.zero_grad(set_to_none=True)
        net(X).square().mean().backward()
        opt.step()

    return hp.Workload(step, net, opt, (X,))


def test_prediction_matches_measurement_on_a_small_model():
    setup = _small_setup

    measured = hp.measure_memory(setup(), steps=2)
    predicted = hp.predict_memory(setup, steps=2)
    assert predicted.predicted and not measured.predicted
    assert abs(predicted.peak - measured.peak) / measured.peak < 0.02


_BILLION_PARAMETER_PREDICTION = """
import json, resource, sys, time
import torch
from torch import nn
import torch._subclasses.fake_tensor  # imported before the baseline: predict_memory needs it
import helpers as hp

def peak_rss_bytes():  # the process's high-water mark; ru_maxrss is in KiB on Linux, bytes on macOS
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024

def setup():
    net = nn.Sequential(*[nn.Linear(8192, 8192) for _ in range(15)])
    X = torch.randn(8, 8192)
    opt = torch.optim.Adam(net.parameters())

    def step():
        opt.zero_grad(set_to_none=True)
        net(X).sum().backward()
        opt.step()

    return hp.Workload(step, net, opt, (X,))

before, start = peak_rss_bytes(), time.perf_counter()
report = hp.predict_memory(setup)
seconds, grown = time.perf_counter() - start, peak_rss_bytes() - before
print(json.dumps({"peak": report.peak, "grown": grown, "seconds": seconds}))
"""


def test_prediction_of_a_billion_parameter_step_is_fast_and_allocates_nothing():
    # A fresh process, so its peak resident size (stdlib resource: Linux and macOS alike) reflects
    # only the prediction: had it allocated the 16 GB it predicts, that high-water mark would show it.
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run([sys.executable, "-c", _BILLION_PARAMETER_PREDICTION], cwd=root,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.splitlines()[-1])
    P = 15 * (8192 * 8192 + 8192)
    assert P > 1_000_000_000
    assert result["peak"] >= 16 * P                # over 16 GB predicted ...
    assert result["grown"] < 0.02 * result["peak"]  # ... while the process's peak grew by almost nothing
    assert result["seconds"] < 30


_COLLECTED_OBJECTS = """
import gc, sys
import torch
import helpers as hp
loaded = "torch._dynamo" in sys.modules
from torch.utils.checkpoint import checkpoint
net = torch.nn.Linear(4, 4)
opt = torch.optim.Adam(net.parameters())
checkpoint(net, torch.randn(2, 4, requires_grad=True), use_reentrant=False).sum().backward()
opt.step()
opt.zero_grad()
print(loaded, len(gc.get_objects()))
"""


def test_the_collections_around_a_measurement_walk_only_what_came_after_helpers():
    # hp.measure_memory and hp.held_bytes run full collections; helpers freezes what is alive when it is
    # imported out of their passes. torch loads its compiler's front end (torch._dynamo, some 120,000
    # objects) on the first optimizer step or checkpoint: helpers loads it first, so that a step and a
    # checkpoint leave only their own few objects for the collector (a fresh process: an import order of its own).
    run = subprocess.run([sys.executable, "-c", _COLLECTED_OBJECTS], cwd=Path(__file__).resolve().parents[1],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    loaded, tracked = run.stdout.split()[-2:]
    assert loaded == "True" and int(tracked) < 5_000, run.stdout


def test_bad_input_says_what_to_pass():
    with pytest.raises(TypeError, match="hp.Workload"):
        hp.measure_memory(lambda: None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="steps must be a positive whole number, got 0: pass how many"):
        hp.measure_memory(_sgd_workload(), steps=0)
    with pytest.raises(TypeError, match="builds the workload"):
        hp.predict_memory(_sgd_workload())  # type: ignore[arg-type]


def test_report_reads_like_a_table():
    text = str(hp.measure_memory(_sgd_workload()))
    assert text.splitlines()[0].startswith("measured peak (live tensor storage): 8.4 MB")
    assert "gradients" in text



def test_step_of_names_the_step_an_event_belongs_to():
    trace = hp.memory_torch.MemoryTrace()
    trace.marks += [(0, "step 1"), (2, "step 2")]
    trace.events += [(+1, hp.memory_torch._Record(10, "activations", "forward"))] * 3
    assert [trace.step_of(i) for i in range(3)] == ["step 1", "step 1", "step 2"]


def _hooked_adam_workload(width=256, batch=32, layers=3):
    """Adam fused into backward: one optimizer per parameter, stepped from a post-accumulate-grad hook."""
    torch.manual_seed(0)
    net = nn.Sequential(*[nn.Linear(width, width) for _ in range(layers)])
    X = torch.randn(batch, width)
    opts = {p: torch.optim.Adam([p], foreach=False) for p in net.parameters()}

    def update(p):
        opts[p].step()
        p.grad = None

    for p in net.parameters():
        p.register_post_accumulate_grad_hook(update)
    return hp.Workload(lambda: net(X).sum().backward(), net, list(opts.values()), (X,))


def test_a_list_of_optimizers_stepped_inside_backward_is_counted_and_labelled():
    work = _hooked_adam_workload()
    P = sum(p.numel() for p in work.model.parameters())
    tensors = len(list(work.model.parameters()))
    report = hp.measure_memory(work, steps=2)
    series = report.trace.by_category()
    w = 256 * 256 * 4
    # every optimizer's state is labelled: 8 bytes per parameter plus a 4-byte step per tensor
    assert series["optimizer state"][-1] == 8 * P + 4 * tensors
    # the gradients are labelled though the hook frees them, and never more than one layer's exist
    assert max(series["gradients"]) == w + 256 * 4
    assert report.peak_phase == "optimizer"  # the hooked steps are booked as the optimizer's phase
    assert 12 * P + w <= report.peak
    assert all(p.grad is None for p in work.model.parameters())


def test_hooked_optimizers_predict_what_they_measure():
    measured = hp.measure_memory(_hooked_adam_workload(), steps=2)
    predicted = hp.predict_memory(_hooked_adam_workload, steps=2)
    assert predicted.peak == measured.peak and predicted.peak_breakdown == measured.peak_breakdown


# -- a real step's ways: batches as dicts, lazy optimizer state, fake tensors, DTensors ----------------

def _adamw_workload(batch_as: str = "tuple", warm: bool = False):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))
    X, y = torch.randn(512, 64), torch.randn(512, 8)   # activations outweigh the weights: the peak is in backward
    opt = torch.optim.AdamW(net.parameters())
    batch = {"tensor": X, "dict": {"x": X, "target": y}, "tuple": (X, y)}[batch_as]

    def step():
        x, target = (batch, y) if batch_as == "tensor" else (batch["x"], batch["target"]) if batch_as == "dict" else batch
        opt.zero_grad(set_to_none=True)
        (net(x) - target).square().mean().backward()
        opt.step()

    if warm:
        step()
    return hp.Workload(step, net, opt, batch)


def test_a_batch_may_be_a_tensor_a_dict_of_tensors_or_a_tuple():
    reports = {b: hp.measure_memory(_adamw_workload(b, warm=True)) for b in ("tensor", "dict", "tuple")}
    assert reports["tensor"].peak_breakdown["inputs"] == 512 * 64 * 4
    assert reports["dict"].peak_breakdown["inputs"] == reports["tuple"].peak_breakdown["inputs"] == 512 * (64 + 8) * 4
    assert reports["dict"].trace.totals() == reports["tuple"].trace.totals()
    # the tracker takes the same batches (a dict's values, never its keys)
    with hp.MemoryTracker(inputs={"input_ids": torch.zeros(4, 8, dtype=torch.long)}) as tracker:
        pass
    assert tracker.trace.totals() == [4 * 8 * 8]


def test_a_batch_of_anything_else_is_refused_naming_what_it_got():
    step, X = (lambda: None), torch.zeros(2)
    with pytest.raises(TypeError, match=r"inputs must be the batch's tensors: a tensor, a dict of tensors .* got str"):
        hp.Workload(step, None, None, "input_ids")
    with pytest.raises(TypeError, match=r"Workload inputs\['mask'\] is a int, not a tensor"):
        hp.Workload(step, None, None, {"ids": X, "mask": 1})
    with pytest.raises(TypeError, match=r"Workload inputs\[1\] is a ndarray, not a tensor"):
        hp.Workload(step, None, None, (X, X.numpy()))
    with pytest.raises(TypeError, match="step must be a function"):
        hp.Workload(None, None, None, X)  # type: ignore[arg-type]


def test_a_step_that_creates_adams_state_is_flagged_as_a_low_first_step():
    first = hp.measure_memory(_adamw_workload())          # AdamW makes its moments in its first step
    work = _adamw_workload()
    P, tensors = sum(p.numel() for p in work.model.parameters()), len(list(work.model.parameters()))
    assert first.new_optimizer_state == 8 * P + 4 * tensors
    assert "steps >= 2" in first.warning and first.warning in str(first)
    # the first step peaks in backward, before the state exists; the second starts with it, and its
    # peak (at the same point) is higher by exactly that state
    two = hp.measure_memory(_adamw_workload(), steps=2)
    assert two.new_optimizer_state == 0 and two.warning is None and "warning" not in str(two)
    assert first.peak_phase == two.peak_phase == "backward" and first.peak_breakdown["optimizer state"] == 0
    assert two.peak - first.peak == two.peak_breakdown["optimizer state"] == 8 * P + 4 * tensors
    warm = hp.measure_memory(_adamw_workload(warm=True))   # a step before the measurement does as well
    assert warm.new_optimizer_state == 0 and warm.peak == two.peak
    predicted = hp.predict_memory(_adamw_workload)       # the prediction says so too
    assert predicted.new_optimizer_state == first.new_optimizer_state and predicted.peak == first.peak


def test_a_model_built_outside_setup_is_explained_in_one_line():
    work = _adamw_workload()
    with pytest.raises(RuntimeError, match=r"^predict_memory: the model's '0.weight' was made outside setup\(\), "
                                           r"with real data; build the model, optimizer and batch inside the setup"):
        hp.predict_memory(lambda: work)
    X = torch.randn(4, 64)   # a real tensor the step reads, though the workload names none
    with pytest.raises(RuntimeError, match=r"a tensor the step uses was made outside setup\(\)") as caught:
        hp.predict_memory(lambda: hp.Workload(lambda: (X * 2).sum()))
    assert "\n" not in str(caught.value)
    with pytest.raises(TypeError, match="setup must return a hp.Workload, got tuple"):
        hp.predict_memory(lambda: (work.step, work.model))


def test_a_tracker_goes_with_its_report_and_keeps_no_cycle():
    """Trial t22ex07 F2: a tracker was kept alive by its storages' weak-reference callbacks (a reference cycle), and
    gc.get_objects() found it, with its trace, after the given cell had deleted the report. Without a collection,
    the tracker now goes as measure_memory returns, and the trace with the report."""
    import gc
    import weakref

    made = []

    class Noted(hp.MemoryTracker):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(weakref.ref(self))

    enabled = gc.isenabled()
    gc.disable()
    try:
        for run in (lambda: hp.measure_memory(_small_setup(), tracker=Noted),
                    lambda: hp.predict_memory(_small_setup, tracker=Noted)):
            report = run()
            trace = weakref.ref(report.trace)
            assert made[-1]() is None, "the tracker outlived the measurement"
            del report
            assert trace() is None, "the trace outlived its report"
        with Noted() as tracker:
            kept = torch.ones(10)
        assert tracker.trace.totals() == [40]  # what it found stays in its trace after __exit__
        del tracker
        assert made[-1]() is None
        del kept
    finally:
        if enabled:
            gc.enable()


def test_measure_peak_and_predict_peak_give_the_reports_peak_and_phase_and_nothing_more():
    for steps in (1, 2):
        full, peak = hp.measure_memory(_small_setup(), steps=steps), hp.measure_peak(_small_setup(), steps=steps)
        assert (peak.peak, peak.peak_phase, peak.predicted) == (full.peak, full.peak_phase, False)
        full, peak = hp.predict_memory(_small_setup, steps=steps), hp.predict_peak(_small_setup, steps=steps)
        assert (peak.peak, peak.peak_phase, peak.predicted) == (full.peak, full.peak_phase, True)
    assert not hasattr(peak, "peak_breakdown") and not hasattr(peak, "trace")
    assert str(peak).startswith("predicted peak (live tensor storage): ") \
        and str(peak).endswith(f"in {peak.peak_phase}")
    work = _sgd_workload()
    assert hp.measure_peak(work).peak == hp.measure_memory(_sgd_workload()).peak
    with pytest.raises(TypeError, match="measure_peak needs a hp.Workload"):
        hp.measure_peak(lambda: None)
    with pytest.raises(RuntimeError, match=r"^predict_peak: the model's 'weight' was made outside setup\(\)"):
        hp.predict_peak(lambda: work)
    with pytest.raises(ValueError, match="the trace is empty"):
        hp.measure_peak(hp.Workload(lambda: None))


def test_the_tracker_of_measure_peak_keeps_no_trace_while_it_counts():
    """What a step of one's own could find with gc.get_objects() while hp.measure_peak counts it: a tracker whose
    trace is empty, so nothing of what the peak holds."""
    import gc

    found = []
    inner = _small_setup()

    def step():
        inner.step()
        found.extend(o for o in gc.get_objects() if isinstance(o, hp.MemoryTracker))

    hp.measure_peak(hp.Workload(step, inner.model, inner.optimizer, inner.inputs))
    assert found and all(not t.trace.events for t in found)
