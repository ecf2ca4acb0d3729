"""hp.measuring_tools: one list per framework of what an exercise's watch covers.

Each list names only public helpers and real framework attributes; every helper the package exports is either in a
list or classified here as not measuring (a helper added later fails until it is classified); a watched call of a
framework tool fails assert_helpers_unused, and what a given cell runs a step with (checkpoint, jax.grad, jit and
compile) does not.
"""

import importlib
import importlib.util
import sys

import pytest

import helpers as hp
from helpers import checks, watches

# Exported helpers that measure, trace, count or plan nothing of what a step keeps, dispatches, computes or allocates,
# each with why. A new export goes here or into helpers/watches.py's lists.
NOT_MEASURING = {
    # the checks and the watch themselves
    "ClaimFailed": "an exception", "WrongAnswer": "an exception", "answer_digest": "a check's digest",
    "count_try": "a check's count of tries", "assert_helpers_unused": "the watch's check", "cannot_check": "a check",
    "check": "a check",
    "check_answer": "a check", "watch_helpers": "the watch", "watched_calls": "the watch's record",
    "without_helpers": "the check's wrapper", "measuring_tools": "this list", "watch_measuring": "the watch on it",
    # the device, sizes and formats
    "describe": "names the device", "profile": "names the size profile", "sized": "picks a size",
    "torch_device": "picks a device", "FORMATS": "number formats' facts", "float_format": "a number format's facts",
    "fmt_bytes": "formats a number", "fmt_ratio": "formats a number", "fmt_timed": "formats a number",
    # models, steps and configs: what a step runs, not what it keeps
    "GPTConfig": "a config", "GPTBlock": "a model", "MiniGPT": "a model", "make_step": "builds a step",
    "Workload": "holds a step", "gpt_param_count": "counts parameters, which every exercise gives",
    "transformer_param_count": "counts parameters, which every exercise gives", "synthetic_tokens": "makes data",
    "minigpt_init": "a model", "minigpt_logits": "a model", "minigpt_loss": "a model",
    "transformer_init": "a model", "transformer_logits": "a model", "transformer_loss": "a model",
    "make_transformer_step": "builds a step", "shape_from_hf": "reads a config", "load_config": "reads a config",
    "shapes_of": "the shapes of a tree, no bytes", "StepBytes": "a record the caller fills", "launch": "starts ranks",
    # the memory tracker is watched through its __enter__ (measuring_tools' methods)
    "MemoryTracker": "watched as MemoryTracker.__enter__",
    # time: given cells time steps; an exercise whose answer is a time adds these as extras
    "Benchmark": "times a step", "Timings": "a record of times", "time_together": "times steps",
    "synchronize": "waits for the device",
    # a search over a function the caller gives (exercise 2 adds it as an extra)
    "first_below": "a search",
    # figures
    "Reference": "a figure's reference", "bars2": "a figure", "measured_on": "a figure's title",
    "memory_timeline": "a figure", "plot": "a figure", "plot_ratios": "a figure", "stacked": "a figure",
    "stacked_bars": "a figure",
}


def _exported() -> set[str]:
    return {n for n in dir(hp) if not n.startswith("_") and n not in ("annotations",)
            and not isinstance(getattr(hp, n), type(importlib))}


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_a_list_names_public_helpers_and_real_framework_attributes(framework):
    names, methods = hp.measuring_tools(framework)
    assert len(set(names)) == len(names), f"{framework}: a helper is listed twice"
    for name in names:
        assert not name.startswith("_") and name in dir(hp), f"{framework}: hp.{name} is not a public helper"
        assert callable(getattr(hp, name)), f"{framework}: hp.{name} is not a function or a class"
    labels = [watches._label(m) for m in methods]
    assert len(set(labels)) == len(labels), f"{framework}: two methods share a label, which the watch keys by"
    for method in methods:
        owner, attr = method[0], method[1]
        assert callable(getattr(owner, attr, None)), f"{framework}: {watches._label(method)} does not exist"
        assert len(method) == 2 or callable(method[2]), f"{framework}: {watches._label(method)}'s filter is no function"


def test_every_exported_helper_is_measuring_or_classified_as_not():
    listed = set(hp.measuring_tools("torch")[0]) | set(hp.measuring_tools("jax")[0])
    unclassified = sorted(_exported() - listed - set(NOT_MEASURING))
    assert not unclassified, (f"helpers exports {unclassified}, in neither list of helpers/watches.py nor NOT_MEASURING "
                              "here: a helper that measures, traces, counts or plans what a step keeps goes into the "
                              "list of its framework (every watched exercise then watches it), any other into "
                              "NOT_MEASURING with why")
    stale = sorted((set(NOT_MEASURING) - _exported()) | (set(NOT_MEASURING) & listed))
    assert not stale, f"NOT_MEASURING names {stale}, which helpers does not export or which a list holds"


def test_extra_and_leave_out():
    names, methods = hp.measuring_tools("torch", extra=["first_below"], leave_out=["FlopCounterMode.__enter__",
                                                                                  "op_seconds"])
    assert "first_below" in names and "op_seconds" not in names
    assert "FlopCounterMode.__enter__" not in {watches._label(m) for m in methods}
    with pytest.raises(ValueError, match="does not hold"):
        hp.measuring_tools("torch", leave_out=["no_such_helper"])
    with pytest.raises(ValueError):
        hp.measuring_tools("numpy")
    with pytest.raises(ValueError):
        hp.measuring_tools(("torch", "numpy"))


def test_both_lists_at_once():
    """("torch", "jax"): the watch of a notebook of neither framework (exercise 3), both lists, each name once."""
    torch_names, torch_methods = hp.measuring_tools("torch")
    jax_names, jax_methods = hp.measuring_tools("jax")
    names, methods = hp.measuring_tools(("torch", "jax"))
    assert set(names) == set(torch_names) | set(jax_names) and len(set(names)) == len(names)
    labels = [watches._label(m) for m in methods]
    memory = [watches._label(m) for m in watches._memory_methods()]   # in both lists, once, last
    assert labels == [watches._label(m) for m in torch_methods + jax_methods if watches._label(m) not in memory] + memory
    assert len(set(labels)) == len(labels)


def _fails_the_check(framework, run, leave_out=()) -> bool:
    checks._forget_calls()  # a fresh kernel's counts: a formula helper another test called counts in the first watch
    hp.watch_measuring(framework, leave_out=leave_out)
    try:
        run()
    finally:
        try:
            hp.assert_helpers_unused(part="test", hint="none")
            caught = False
        except hp.WrongAnswer:
            caught = True
            checks._forget_calls()
            hp.assert_helpers_unused(part="test", hint="none")
    return caught


def memory_reads() -> dict:
    """Each public route to the process's memory use, which gives what a step keeps with no framework tool: the
    resident size before and after `del out` (trial t25ex20 F1 read /proc/self/statm); psutil reads the same files. And
    gc.get_objects, whose new arrays or tensors, read inside a step's backward, are what it kept (beside t26ex13j F1)."""
    import ctypes
    import gc
    import os
    import pathlib
    import resource

    def opened(path):
        def run():
            with open(path) as f:
                f.read()
        return run

    found = {"/proc/self/statm": opened("/proc/self/statm"), "/proc/<pid>/status": opened(f"/proc/{os.getpid()}/status"),
             "/proc/thread-self/smaps_rollup": opened("/proc/thread-self/smaps_rollup"),
             "/proc/self/stat through pathlib": lambda: pathlib.Path("/proc/self/stat").read_bytes(),
             "/proc/self/smaps through os.open": lambda: os.close(os.open(b"/proc/self/smaps", os.O_RDONLY)),
             "/proc/self/task/../statm": opened("/proc/self/task/../statm"),
             "/proc/self as a dir_fd": lambda: os.close(os.open("/proc/self", os.O_RDONLY)),
             "/proc/meminfo": opened("/proc/meminfo"),
             "resource.getrusage": lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
             "mallinfo2 through ctypes": lambda: ctypes.CDLL(None).mallinfo2,
             "gc.get_objects (the arrays or tensors among them)": lambda: len(gc.get_objects())}
    try:
        import psutil
    except ImportError:
        return found
    found["psutil's memory_info"] = lambda: psutil.Process().memory_info().rss
    return found


def test_a_read_of_the_process_s_memory_fails_the_check_and_other_reads_do_not():
    """Trial t25ex20 F1: the process's resident size, read before and after `del out`, measured both parts of
    exercise 20 with no course helper; each route counts in either framework's watch. Other files of /proc and
    the kernel's own reads do not: ipykernel answers a front end's usage_request with psutil, IPython's %time
    calls resource.getrusage, the course's helpers read /proc for the device and the programs still running."""
    import os
    import resource

    from IPython.utils.timing import clock

    def os_file():
        with open(os.devnull) as f:
            f.read()

    def kernel_s_own():
        kernel = {"__name__": "ipykernel.kernelbase"}   # a function of ipykernel's, as its usage_request is
        exec("def statm():\n    with open('/proc/self/statm') as f:\n        return f.read()", kernel)
        kernel["statm"]()

    others = {"/proc/cpuinfo": lambda: open("/proc/cpuinfo").read(), "os.devnull": os_file,
              "the helpers' programs": checks._programs_running, "IPython's clock (%time)": clock,
              "the kernel's own read": kernel_s_own}
    for framework in ("torch", "jax", ("torch", "jax")):
        pytest.importorskip(framework if isinstance(framework, str) else "jax")
        for name, run in memory_reads().items():
            assert _fails_the_check(framework, run), f"{name} under a {framework} watch should fail the check"
        for name, run in others.items():
            assert not _fails_the_check(framework, run), f"{name} under a {framework} watch should not fail the check"
    assert resource.getrusage.__module__ == "resource"   # the watch gave it back
    open("/proc/self/statm").read()   # and with no watch, nothing counts
    assert not checks._WATCHED


def profilers(x) -> dict:
    """Each public profiler of torch that lists a step's allocations (profile_memory=True), entered with `with` or
    started by hand: torch.profiler's and the autograd profilers it is built on (trial t22ex17 measured with the
    autograd one, which no watch covered)."""
    import warnings

    import torch

    def step():
        (x @ x).sum().backward()

    def entered(make):
        def run():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")   # the legacy profiler is deprecated
                with make(profile_memory=True):
                    step()
        return run

    def started(make):
        def run():
            prof = make(profile_memory=True)
            prof.start()
            step()
            prof.stop()
        return run

    found = {"torch.profiler.profile": entered(torch.profiler.profile),
             "torch.profiler.profile, started": started(torch.profiler.profile),
             "torch.autograd.profiler.profile": entered(torch.autograd.profiler.profile)}
    if hasattr(torch.autograd, "profiler_legacy"):
        found["torch.autograd.profiler_legacy.profile"] = entered(torch.autograd.profiler_legacy.profile)
    return found


def test_a_torch_tool_fails_the_check_and_a_step_does_not():
    torch = pytest.importorskip("torch")
    import torch.utils.checkpoint as cp
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.randn(4, 4, requires_grad=True)

    def flops():
        with FlopCounterMode(display=False):
            (x @ x).sum().backward()

    def hooks():
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            (x @ x).sum().backward()

    class Mine(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    def own_mode():
        with Mine():
            (x @ x).sum()

    def steps():  # what given cells run: checkpoints (saved-tensor hooks and dispatch modes of torch's own), fakes
        cp.checkpoint(lambda a: a.sin().sum(), x, use_reentrant=False).backward()
        policy = lambda ctx, op, *args, **kwargs: cp.CheckpointPolicy.MUST_SAVE
        cp.checkpoint(lambda a: a.sin().sum(), x, use_reentrant=False,
                      context_fn=lambda: cp.create_selective_checkpoint_contexts(policy)).backward()
        with FakeTensorMode():
            torch.ones(2) + 1

    assert _fails_the_check("torch", flops), "FlopCounterMode under a watch should fail the check"
    assert _fails_the_check("torch", hooks), "saved_tensors_hooks under a watch should fail the check"
    assert _fails_the_check(("torch", "jax"), hooks), "saved_tensors_hooks under a watch of both lists should fail"
    assert _fails_the_check("torch", own_mode), "a dispatch mode of one's own under a watch should fail the check"
    for name, profiler in profilers(x).items():
        assert _fails_the_check("torch", profiler), f"{name} under a watch should fail the check"
    assert not _fails_the_check("torch", steps), "checkpointing and fake tensors should not fail the check"
    assert torch.utils._python_dispatch.TorchDispatchMode.__enter__.__code__.co_name == "__enter__"


def operator_spies(torch) -> dict:
    """Each public route by which code of one's own is handed every operator and its output without a dispatch mode
    (trial t26ex20 F1, F2): weak references to the outputs, alive after the forward pass, are what autograd kept. A
    TorchFunctionMode of one's own; a Tensor subclass of one's own, made with as_subclass, _make_subclass or its
    constructor, whose __torch_function__ calls the default one (super(), as torch's docs recommend) or takes its
    arguments apart with as_subclass."""
    import gc
    import weakref

    from torch.overrides import TorchFunctionMode

    x = torch.randn(4, 8, requires_grad=True)

    def act(t):   # gelu_fast, as transformers writes it
        return 0.5 * t * (1.0 + torch.tanh(t * 0.7978845608 * (1.0 + 0.044715 * t * t)))

    alive = []

    def keep(out):
        if isinstance(out, torch.Tensor):
            alive.append(weakref.ref(out.untyped_storage()))
        return out

    class Recorder(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return keep(func(*args, **(kwargs or {})))

    class Watched(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return keep(super().__torch_function__(func, types, args, kwargs))

    class Unwrapping(torch.Tensor):   # no super(): its arguments taken apart with as_subclass
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            plain = [a.as_subclass(torch.Tensor) if isinstance(a, Unwrapping) else a for a in args]
            return keep(func(*plain, **(kwargs or {})))

    def mode():
        with Recorder():
            out = act(x)
        gc.collect()
        assert out is not None and any(ref() is not None for ref in alive)

    return {"a TorchFunctionMode of one's own": mode,
            "a Tensor subclass made by as_subclass": lambda: act(x.as_subclass(Watched)),
            "a Tensor subclass made by its constructor, calling super().__torch_function__": lambda: act(Watched(x)),
            "a Tensor subclass made by its constructor, unwrapping with as_subclass": lambda: act(Unwrapping(x)),
            "a Tensor subclass made by _make_subclass": lambda: torch.Tensor._make_subclass(Watched, x.detach(), True)}


def test_a_function_mode_or_a_tensor_subclass_of_one_s_own_fails_the_check_and_torch_s_own_do_not():
    torch = pytest.importorskip("torch")
    from torch._subclasses.fake_tensor import FakeTensorMode

    def steps():   # what given cells run: parameters made, a device's context (a function mode of torch's), fakes
        with torch.device("cpu"):
            net = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.LayerNorm(3))
        net(torch.ones(1, 3)).sum().backward()
        torch.nn.Parameter(torch.ones(2))
        with FakeTensorMode():
            torch.nn.Linear(3, 3)(torch.ones(1, 3)).sum().backward()

    for name, run in operator_spies(torch).items():
        assert _fails_the_check("torch", run), f"{name} under a watch should fail the check"
        if importlib.util.find_spec("jax") is not None:
            assert _fails_the_check(("torch", "jax"), run), f"{name} under a watch of both lists should fail the check"
    assert not _fails_the_check("torch", steps), "parameters, torch.device and fake tensors should not fail the check"
    # the watch gave every method back: the class method's own code, the inherited methods
    assert torch.Tensor.__torch_function__.__func__.__code__.co_name == "__torch_function__"
    assert not {"as_subclass", "_make_subclass", "_make_wrapper_subclass"} & set(vars(torch.Tensor))
    assert type(torch.ones(2).as_subclass(torch.nn.Parameter)) is torch.nn.Parameter


def storage_spies(torch) -> dict:
    """Each public route to the storage under a tensor, or its address, from code of one's own (trials t28ex10 F1,
    t28ex20 F1): weak references to the storages of a step's tensors, alive after the forward pass, are what autograd
    or a selective checkpoint's cache kept, with no measuring tool. The trials' two: a selective-checkpoint policy of
    one's own that keeps a weak reference to the storage of each argument it is asked about, and a printed formula
    typed again on real tensors, each result's storage kept weakly; then the storage's other public names, and its
    address."""
    import weakref

    import torch.utils.checkpoint as cp

    x = torch.randn(4, 8, requires_grad=True)
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 8))

    def policy_spy():
        seen = []

        def policy(ctx, op, *args, **kwargs):
            seen.extend(weakref.ref(a.untyped_storage()) for a in args if isinstance(a, torch.Tensor))
            return cp.CheckpointPolicy.MUST_SAVE if op is torch.ops.aten.addmm.default \
                else cp.CheckpointPolicy.PREFER_RECOMPUTE
        out = cp.checkpoint(net, x, use_reentrant=False, context_fn=lambda: cp.create_selective_checkpoint_contexts(policy))
        assert out is not None and any(ref() is not None for ref in seen)

    def formula_spy():   # gelu_fast's line, split into single operators
        refs = []

        def w(t):
            refs.append(weakref.ref(t.untyped_storage()))
            return t
        h = w(x * 1.0)
        out = w(0.5 * h) * w(1.0 + w(torch.tanh(w(h * 0.7978845608) * w(1.0 + w(w(0.044715 * h) * h)))))
        del h
        assert out is not None and sum(ref() is not None for ref in refs) > 1

    return {"a selective-checkpoint policy of one's own, weak references to its arguments' storages": policy_spy,
            "a formula typed again, weak references to its results' storages": formula_spy,
            "Tensor.storage": lambda: weakref.ref(x.storage()._untyped_storage),
            "Tensor._typed_storage": lambda: x._typed_storage(),
            "Tensor.data_ptr": lambda: x.data_ptr(),
            "a parameter's storage": lambda: net[0].weight.untyped_storage()}


def test_a_read_of_a_tensor_s_storage_of_one_s_own_fails_the_check_and_torch_s_and_the_helpers_do_not():
    torch = pytest.importorskip("torch")
    import copy
    import io

    import torch.utils.checkpoint as cp

    x = torch.randn(4, 8, requires_grad=True)
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 8))

    def steps():   # what given cells run: a selective checkpoint, a tensor printed, copied and saved (torch's own reads)
        policy = lambda ctx, op, *args, **kwargs: cp.CheckpointPolicy.MUST_SAVE
        cp.checkpoint(net, x, use_reentrant=False,
                      context_fn=lambda: cp.create_selective_checkpoint_contexts(policy)).sum().backward()
        repr(x), copy.deepcopy(net), torch.save(net.state_dict(), io.BytesIO())

    def measured():   # a helper that reads storages (its MemoryTracker), left out of the watch as exercise 7 does
        hp.measure_peak(hp.Workload(lambda: net(x).sum().backward(), net, None, (x,)))

    for name, run in storage_spies(torch).items():
        assert _fails_the_check("torch", run), f"{name} under a watch should fail the check"
    assert not _fails_the_check("torch", steps), "torch's own reads of a tensor's storage should not fail the check"
    assert not _fails_the_check("torch", measured, leave_out=["measure_peak"]), (
        "the helpers' own reads of a tensor's storage should not fail the check")
    # the watch gave each back: the C methods inherited again, the Python ones their own code
    assert not {"untyped_storage", "data_ptr"} & set(vars(torch.Tensor))
    assert torch.Tensor.storage.__code__.co_name == "storage" and x.untyped_storage().nbytes() == 4 * x.numel()


def graph_tracers(torch) -> dict:
    """Each public route to a step's backward graph, with what each backward op reads (trial t23ex03 F1, F2): make_fx
    of a function that takes the gradients; functorch.compile's aot_function and aot_module, whose compilers are
    handed the forward and the backward graph; torch.compile by each of its names, with a backend that hands them
    on (torch._dynamo's aot_autograd, as torch's custom backend notes show it). Each asserts it saw a backward, but
    Module.compile, which only compiles here (its call is the route)."""
    F = torch.nn.functional
    args = [torch.randn(4, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)]

    def block(x, w):
        return x + F.gelu(F.linear(F.layer_norm(x, (8,)), w))

    def shown():
        graphs = []

        def compiler(gm, example_inputs):
            graphs.append(gm.code)
            return gm
        return graphs, compiler

    def traced():
        from torch.fx.experimental.proxy_tensor import make_fx
        code = make_fx(lambda x, w: torch.autograd.grad(block(x, w).sum(), (x, w)))(*args).code
        assert "gelu_backward" in code

    def aot_function():
        from functorch.compile import aot_function
        graphs, compiler = shown()
        aot_function(block, fw_compiler=compiler, bw_compiler=compiler)(*args).sum().backward()
        assert len(graphs) == 2

    def aot_module():
        from functorch.compile import aot_module
        graphs, compiler = shown()
        model = torch.nn.Sequential(torch.nn.LayerNorm(8), torch.nn.Linear(8, 8), torch.nn.GELU())
        aot_module(model, fw_compiler=compiler, bw_compiler=compiler)(args[0]).sum().backward()
        assert len(graphs) == 2

    def compiled(compile):
        def run():
            from torch._dynamo.backends.common import aot_autograd
            torch._dynamo.reset()   # compiled afresh, not from an earlier test's cache
            graphs, compiler = shown()
            compile(block, backend=aot_autograd(fw_compiler=compiler, bw_compiler=compiler))(*args).sum().backward()
            assert len(graphs) == 2
        return run

    def module_compile():
        from torch._dynamo.backends.common import aot_autograd
        graphs, compiler = shown()
        torch.nn.Linear(8, 8).compile(backend=aot_autograd(fw_compiler=compiler, bw_compiler=compiler))

    return {"make_fx": traced, "aot_function": aot_function, "aot_module": aot_module,
            "torch.compile": compiled(torch.compile), "torch.compiler.compile": compiled(torch.compiler.compile),
            "Module.compile": module_compile}


def test_a_torch_graph_tracer_fails_the_check():
    """make_fx counts a call of one's own and one from torch's AOT autograd, which every route to a backward graph
    runs: aot_function and aot_module by that alone (no watch names them, as importing functorch.compile would load
    torch._dynamo), torch.compile by its names and, with those left out, by make_fx all the same."""
    torch = pytest.importorskip("torch")
    import warnings
    compile_names = ["torch.compile", "torch.compiler.compile", "Module.compile"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # AOT autograd's notes on what it traced
        for name, run in graph_tracers(torch).items():
            assert _fails_the_check("torch", run), f"{name} under a watch should fail the check"
            assert _fails_the_check(("torch", "jax"), run), f"{name} under a watch of both lists should fail the check"
        assert _fails_the_check("torch", graph_tracers(torch)["torch.compile"], leave_out=compile_names), (
            "torch.compile's AOT backend should reach make_fx, watched, with torch.compile's names left out")
        assert not _fails_the_check("torch", graph_tracers(torch)["torch.compile"],
                                    leave_out=[*compile_names, "torch.fx.experimental.proxy_tensor.make_fx"]), (
            "with the graph tracers left out, a compiled step should not fail the check")


def test_a_jax_tool_fails_the_check_and_a_step_does_not():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    step = jax.jit(jax.grad(lambda x: jax.checkpoint(jnp.sin)(x).sum()))

    def given():  # what given cells run: jit, grad (which calls jax.vjp), trace, lower, compile
        step(jnp.ones(3))
        step.lower(jnp.ones(3)).compile()(jnp.ones(3))
        traced = step.trace(jnp.ones(3))   # its jaxpr read inside jax only
        traced.lower().compile()
        assert traced.out_info.shape == (3,)

    compiled = step.lower(jnp.ones(3)).compile()
    assert _fails_the_check("jax", lambda: jax.vjp(jnp.sin, jnp.ones(3))), "jax.vjp should fail the check"
    assert _fails_the_check("jax", compiled.cost_analysis), "Compiled.cost_analysis should fail the check"
    assert _fails_the_check("jax", lambda: jax.make_jaxpr(jnp.sin)(1.0)), "jax.make_jaxpr should fail the check"
    # jit's own route to the same jaxpr, and its exported program's text (trial t23ex03 F7)
    assert _fails_the_check("jax", lambda: step.trace(jnp.ones(3)).jaxpr), "Traced.jaxpr should fail the check"
    assert _fails_the_check("jax", lambda: step.trace(jnp.ones(3)).lojax), "Traced.lojax should fail the check"
    assert _fails_the_check("jax", lambda: jax.export.export(step)(jnp.ones(3)).mlir_module()), (
        "jax.export.export should fail the check")
    assert isinstance(jax.stages.Traced.jaxpr, property), "the watch should leave Traced.jaxpr a property"
    assert not _fails_the_check("jax", given), "jit, grad, lower and compile should not fail the check"
    assert _fails_the_check(("torch", "jax"), lambda: jax.ad_checkpoint.print_saved_residuals(jnp.sin, 1.0)), (
        "print_saved_residuals under a watch of both lists should fail the check")
    assert jax.vjp.__name__ == "vjp" and "vjp" not in checks._WATCHED


def test_a_read_of_the_live_arrays_fails_the_check_and_the_helpers_own_do_not():
    """Trial t26ex13j F1: jax.live_arrays, read inside a custom_vjp's backward during an eager jax.grad, lists what the
    step kept (the new arrays of a block's shape), with no plan or tracer. It counts, and so do the backend client's
    own methods it calls (jax.extend.backend.get_backend() is public) and Device.live_buffers, called from outside jax;
    jax.live_arrays' own call of the client's method, and the helpers' calls (hp.live_bytes_by, watched by its name,
    left out here) do not. gc.get_objects lists the same arrays: it counts too, in either framework's watch."""
    jax = pytest.importorskip("jax")
    import warnings
    import jax.extend
    jnp = jax.numpy
    x = jnp.ones((4, 4))

    def kept_by_a_step(listed=lambda: jax.live_arrays()):   # the trial's route, in small
        def run():
            found = []

            @jax.custom_vjp
            def probe(y):
                return y
            probe.defvjp(lambda y: (y, None), lambda _, g: (found.append(len(listed())), (g,))[1])
            jax.grad(lambda a: probe(jnp.sin(a) * 2.0).sum())(x)
            assert found and found[0] > 0
        return run

    backend = jax.extend.backend.get_backend()
    assert _fails_the_check("jax", kept_by_a_step()), "jax.live_arrays in a backward pass should fail the check"
    import gc
    # the same arrays, among the objects gc lists (the trial's filter, isinstance(o, jax.Array), left out here: a
    # dead weak proxy that an earlier test left raises in isinstance)
    assert _fails_the_check("jax", kept_by_a_step(lambda: gc.get_objects())), (
        "gc.get_objects in a backward pass should fail the check")
    assert _fails_the_check("jax", jax.live_arrays), "jax.live_arrays should fail the check"
    assert _fails_the_check("jax", lambda: backend.live_arrays()), "the backend client's live_arrays should fail the check"
    assert _fails_the_check(("torch", "jax"), jax.live_arrays), "a watch of both lists should count jax.live_arrays"
    labels = {watches._label(m) for m in hp.measuring_tools("jax")[1]}
    assert {"jax.live_arrays", "Client.live_arrays"} <= labels
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)   # jaxlib's note that it lists nothing now
        for label, run in (("Client.live_buffers", lambda: backend.live_buffers()),
                           ("Device.live_buffers", lambda: jax.devices()[0].live_buffers())):
            if label in labels:
                assert _fails_the_check("jax", run), f"{label} should fail the check"
    assert not _fails_the_check("jax", lambda: hp.live_bytes_by({"x": x}), leave_out=["live_bytes_by"]), (
        "the helpers' own call of jax.live_arrays should count only by the helper's name")
    assert _fails_the_check("jax", lambda: hp.live_bytes_by({"x": x})), "hp.live_bytes_by should fail the check"
    assert jax.live_arrays.__code__.co_name == "live_arrays" and not checks._WATCHED


def test_a_dump_of_the_compiled_plan_fails_the_check(tmp_path, monkeypatch):
    """Trial t25ex11 F1: XLA's dump (the compiled program, its buffer assignment and memory report, in files) gives
    the plan with no watched tool: a compile with an xla_dump* compiler option (jit's, Lowered.compile's, pjit's), any
    compile while XLA_FLAGS holds one (now, or when the helpers were imported; in a --flagfile too) or XLA's verbose
    log is asked for (TF_CPP_VMODULE, TF_CPP_MAX_VLOG_LEVEL), and jax's own dump, jax_dump_ir_to, each count; a
    compile with other options, and one with none, do not."""
    jax = pytest.importorskip("jax")
    import warnings
    jnp = jax.numpy
    x = jnp.ones((8, 8))

    def compile_fresh(**jit_options):  # a function of its own each time: no cache answers it
        def run():
            jax.jit(lambda a: (a @ a).sum() + len(run.__qualname__), **jit_options)(x)
        return run

    def lowered_compile(options):
        return lambda: jax.jit(lambda a: (a * 2.0).sum()).lower(x).compile(compiler_options=options)

    dump = tmp_path / "dump"
    assert _fails_the_check("jax", compile_fresh(compiler_options={"xla_dump_to": str(dump)})), (
        "a jit with an xla_dump compiler option should fail the check")
    assert any(p.name.endswith("buffer-assignment.txt") for p in dump.iterdir()), "XLA should have written its dump"
    assert _fails_the_check("jax", lowered_compile({"xla_dump_to": str(tmp_path / "d2")})), (
        "Lowered.compile with an xla_dump compiler option should fail the check")
    assert _fails_the_check("jax", lowered_compile({"xla_dump_hlo_as_text": True})), "any xla_dump* key should count"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)   # pjit is deprecated, and public still
        from jax.experimental.pjit import pjit
        assert _fails_the_check("jax", lambda: pjit(lambda a: a.sum() - 1.0,
                                                    compiler_options={"xla_dump_to": str(tmp_path / "d3")})(x)), (
            "pjit with an xla_dump compiler option should fail the check")
    assert not _fails_the_check("jax", lowered_compile({"xla_backend_optimization_level": 0})), (
        "a compile with other compiler options (helpers.models_jax's PLAN_ONLY) should not fail the check")
    assert not _fails_the_check("jax", compile_fresh()), "a plain jit should not fail the check"

    # XLA reads XLA_FLAGS once, at the backend's start: here a flag set now stands for one set before the setup cell
    monkeypatch.setenv("XLA_FLAGS", f"--xla_cpu_multi_thread_eigen=false --xla_dump_to={tmp_path / 'd4'}")
    assert _fails_the_check("jax", compile_fresh()), "a compile while XLA_FLAGS holds xla_dump should fail the check"
    flagfile = tmp_path / "flags"
    flagfile.write_text(f"--xla_dump_to={tmp_path / 'd5'}\n")
    monkeypatch.setenv("XLA_FLAGS", f"--flagfile={flagfile}")
    assert _fails_the_check("jax", compile_fresh()), "an xla_dump flag in XLA_FLAGS' flagfile should fail the check"
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=1")
    assert not _fails_the_check("jax", compile_fresh()), "XLA_FLAGS without a dump flag should not fail the check"
    monkeypatch.delenv("XLA_FLAGS")
    monkeypatch.setattr(watches, "_XLA_FLAGS_AT_IMPORT", f"--xla_dump_to={tmp_path / 'd6'}")
    assert _fails_the_check("jax", compile_fresh()), (
        "a dump flag that XLA_FLAGS held when the helpers were imported, taken out since, should fail the check")
    monkeypatch.setattr(watches, "_XLA_FLAGS_AT_IMPORT", "")
    # XLA's verbose log prints each compile's buffer assignment to stderr, which Jupyter shows
    monkeypatch.setenv("TF_CPP_VMODULE", "buffer_assignment=2")
    assert _fails_the_check("jax", compile_fresh()), "a compile while TF_CPP_VMODULE is set should fail the check"
    monkeypatch.delenv("TF_CPP_VMODULE")
    monkeypatch.setattr(watches, "_VLOG_AT_IMPORT", {"TF_CPP_MAX_VLOG_LEVEL": "2"})
    assert _fails_the_check("jax", compile_fresh()), (
        "a verbose level that the environment held when the helpers were imported should fail the check")
    monkeypatch.setattr(watches, "_VLOG_AT_IMPORT", {"TF_CPP_MAX_VLOG_LEVEL": "0"})
    assert not _fails_the_check("jax", compile_fresh()), "TF_CPP_MAX_VLOG_LEVEL=0 should not fail the check"

    def jax_dump(modes):
        def run():
            before = jax.config.values["jax_dump_ir_modes"]
            jax.config.update("jax_dump_ir_to", str(tmp_path / f"ir-{modes}"))
            jax.config.update("jax_dump_ir_modes", modes)
            try:
                if modes == "jaxpr":   # written when jit lowers: no compile needed
                    jax.jit(lambda a: a.sum() * 3.0).lower(x)
                else:
                    compile_fresh()()
            finally:
                jax.config.update("jax_dump_ir_to", "")
                jax.config.update("jax_dump_ir_modes", before)
            assert any((tmp_path / f"ir-{modes}").iterdir()), "jax should have written its dump"
        return run

    assert _fails_the_check("jax", jax_dump("stablehlo")), "a compile while jax_dump_ir_to is set should fail the check"
    assert _fails_the_check("jax", jax_dump("jaxpr")), "a lowering that dumps its jaxpr should fail the check"
    assert jax.config.values["jax_dump_ir_to"] == ""
    assert _fails_the_check(("torch", "jax"), compile_fresh(compiler_options={"xla_dump_to": str(tmp_path / "d7")})), (
        "an XLA dump under a watch of both lists should fail the check")
    from jax._src import compiler
    assert compiler.get_compile_options.__code__.co_name == "get_compile_options" and not checks._WATCHED


def test_a_call_is_jax_s_own_by_its_code_file_not_its_module_name():
    """Trial t25ex11 F6: code run with globals whose __name__ names a jax module is not jax's own code: the watch
    decides by the caller's code file (jax.grad's call of jax.vjp, from jax's own files, does not count)."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    compiled = jax.jit(jnp.sin).lower(jnp.ones(3)).compile()

    def disguised():
        space = {"__name__": "jax._spoof", "c": compiled}
        exec("m = c.memory_analysis()", space)

    assert _fails_the_check("jax", disguised), "a call from code that calls itself jax's should fail the check"
    assert not _fails_the_check("jax", lambda: jax.grad(lambda a: jnp.sin(a).sum())(jnp.ones(3))), (
        "jax.grad, which calls jax.vjp from jax's own files, should not fail the check")
    counts = watches._outside_call("torch", but=("torch._functorch",))
    assert counts.__qualname__.endswith("or from torch._functorch")


def test_a_jax_tool_handed_to_jax_s_own_machinery_counts():
    """Trial t26ex02j F1: jax.vjp (or jax.linearize, a plan's analysis, make_jaxpr) handed to jax.eval_shape, jit or
    jax.tree.map is called from jax's own files, yet it lists one's own function's residuals or plan: a call from
    jax's code counts unless that code names the tool, as jax.grad's call of vjp does (and checkpoint's, which does
    not count)."""
    import functools

    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    f = lambda w, x: jnp.maximum(x @ w, 0).sum()  # noqa: E731
    w, x = jax.ShapeDtypeStruct((4, 8), jnp.float32), jax.ShapeDtypeStruct((2, 4), jnp.float32)
    assert _fails_the_check("jax", lambda: jax.eval_shape(functools.partial(jax.vjp, f), w, x)), (
        "jax.eval_shape of a partial of jax.vjp should fail the check")
    assert _fails_the_check("jax", lambda: jax.jit(functools.partial(jax.linearize, f))(jnp.ones((4, 8)), jnp.ones((2, 4)))), (
        "jit of a partial of jax.linearize should fail the check")
    assert _fails_the_check("jax", lambda: jax.tree.map(functools.partial(jax.vjp, jnp.sin), [jnp.ones(3)])), (
        "jax.tree.map over a partial of jax.vjp should fail the check")
    compiled = jax.jit(jnp.sin).lower(jnp.ones(3)).compile()
    assert _fails_the_check("jax", lambda: jax.tree.map(jax.stages.Compiled.memory_analysis, [compiled])), (
        "jax.tree.map of Compiled.memory_analysis should fail the check")
    assert _fails_the_check("jax", lambda: jax.tree.map(jax.make_jaxpr, [jnp.sin])[0](1.0)), (
        "jax.tree.map of jax.make_jaxpr should fail the check")
    assert not _fails_the_check("jax", lambda: jax.jit(jax.grad(lambda a: jax.checkpoint(jnp.sin)(a).sum()))(jnp.ones(3))), (
        "jax.grad of a checkpointed function, which calls jax.vjp by name in jax's files, should not fail the check")


def test_torch_s_own_saved_tensor_hooks_count_once_their_hooks_are_ones_own():
    """Trial t22ex07 F11: save_on_cpu (a subclass torch defines, which a step may use) with its pack hook replaced by a
    function of one's own lists every tensor autograd saves; as torch made it, it does not count."""
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 4, requires_grad=True)

    def offloaded():  # what a step may run
        with torch.autograd.graph.save_on_cpu():
            (x @ x).sum().backward()

    def listed():
        seen = []
        hooks = torch.autograd.graph.save_on_cpu()
        own = hooks.pack_hook
        hooks.pack_hook = lambda t: (seen.append(tuple(t.shape)), own(t))[1]
        with hooks:
            (x @ x).sum().backward()
        assert seen

    assert not _fails_the_check("torch", offloaded), "torch's save_on_cpu as it is should not fail the check"
    assert _fails_the_check("torch", listed), "save_on_cpu with a pack hook of one's own should fail the check"


def test_the_peak_helpers_count_by_their_names_only():
    """hp.measure_peak and hp.predict_peak run a MemoryTracker of their own, which MemoryTracker.__enter__ does not
    count: a watch that leaves them out for its given cells (exercise 7) lets them run, and every other watch counts
    them by name; a MemoryTracker of one's own counts either way."""
    torch = pytest.importorskip("torch")

    def setup():
        net = torch.nn.Linear(8, 8)
        X = torch.randn(4, 8)
        return hp.Workload(lambda: net(X).sum().backward(), net, None, (X,))

    def peaks():
        hp.predict_peak(setup)
        hp.measure_peak(setup())

    def tracked():
        with hp.MemoryTracker():
            torch.ones(3)

    left_out = ["measure_peak", "predict_peak"]
    for run, counted in [(peaks, False), (tracked, True)]:
        checks._forget_calls()
        hp.watch_measuring("torch", leave_out=left_out)
        run()
        assert bool([label for label, (count, *_) in checks._WATCHED.items() if count[0]]) == counted
        checks._forget_calls()
        hp.assert_helpers_unused(part="test", hint="none")
    assert _fails_the_check("torch", peaks), "the peak helpers under a watch that keeps them should fail the check"


# The watch a check ends on its first line starts again when the check's cell raises anything else than its own
# failure (trial t26ex10 F1): a NameError from an answer cell not run, a framework's error from a broken answer (torch's
# ValueError for use_reentrant=True with a context_fn), count_try's refusal, an interrupt. An IPython shell in this
# process stands in for the kernel: its cells run as a notebook's do, with the same post_run_cell event.
@pytest.fixture
def shell():
    IPython = pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    was = InteractiveShell.initialized()
    ip = InteractiveShell.instance(config=config)
    assert IPython.get_ipython() is ip
    checks._unwatch()
    checks._forget_calls()
    ip.user_ns.update(hp=hp, checks=checks)
    yield ip
    checks._unwatch()
    checks._forget_calls()
    checks._forget_answers()
    if checks._after_cell in ip.events.callbacks["post_run_cell"]:
        ip.events.unregister("post_run_cell", checks._after_cell)
    if not was:
        InteractiveShell.clear_instance()


def _cell(ip, code: str):
    """Run `code` as a notebook cell: its exception, or None."""
    result = ip.run_cell(code, store_history=False)
    return result.error_before_exec or result.error_in_exec


_zero_bytes_itself = hp.zero_bytes   # read at import, before any watch


class _Planner:
    def plan(self, k):
        return 8 * k


_CHECK = "hp.assert_helpers_unused(part='part 1', hint='h')\n"   # the check's first line, which ends the watch
_WATCH = "hp.watch_helpers('zero_bytes', methods=[(Planner, 'plan')])"
_FAILURES = {
    "a NameError (the answer cell not run)": _CHECK + "selective(None)",
    "a framework's error (use_reentrant=True with a context_fn)": _CHECK + "raise ValueError('Passing context_fn or debug "
                                                                          "is only supported when use_reentrant=False.')",
    "count_try's refusal": _CHECK + "for _g in range(8):\n    hp.count_try('part 1: units', _g)",
    "an interrupt": _CHECK + "raise KeyboardInterrupt",
}


@pytest.mark.parametrize("failure", list(_FAILURES))
def test_a_check_that_ends_the_watch_and_then_raises_leaves_it_running(shell, failure):
    shell.user_ns["Planner"] = _Planner
    assert _cell(shell, _WATCH) is None
    assert _cell(shell, _FAILURES[failure]) is not None   # the check cell fails past its first line
    assert hp.zero_bytes is not _zero_bytes_itself and "plan" in vars(_Planner) and checks._WATCHED  # watched again
    assert _cell(shell, "hp.zero_bytes(10, 2, 1)\nPlanner().plan(2)") is None   # a scratch cell measures
    error = _cell(shell, _CHECK)   # the check run again, the answer fixed: the scratch cell's call fails it
    assert isinstance(error, hp.WrongAnswer) and "hp.zero_bytes works out what this part asks" in str(error)
    checks._forget_calls()   # a kernel restart: the watch goes on, nothing counted
    assert _cell(shell, "Planner().plan(2)") is None
    assert "_Planner.plan works out" in str(_cell(shell, _CHECK))   # the method is watched again too


def test_a_check_that_passes_ends_the_watch_and_a_later_failure_does_not_start_it(shell):
    assert _cell(shell, "hp.watch_helpers('zero_bytes')") is None
    assert _cell(shell, _CHECK + "print('part 1: visible checks passed')") is None
    assert hp.zero_bytes is _zero_bytes_itself and not checks._WATCHED
    assert isinstance(_cell(shell, "undefined_name"), NameError)   # a later cell fails: the watch stays ended
    assert hp.zero_bytes is _zero_bytes_itself and not checks._WATCHED and not checks._ENDED_IN


def test_a_watch_the_failing_check_started_itself_is_left_as_it_is(shell):
    """A check whose comparison fails starts the watch again before it raises (or starts another part's): that watch
    runs on, not the one its first line ended."""
    assert _cell(shell, "hp.watch_helpers('zero_bytes')") is None
    assert isinstance(_cell(shell, _CHECK + "hp.watch_helpers('sharded_bytes')\nraise AssertionError('part 1: no')"),
                      AssertionError)
    assert sorted(checks._WATCHED) == ["hp.sharded_bytes"]


def test_a_check_run_from_a_scratch_cell_that_fails_leaves_the_watch_running(shell):
    """The check's source run in a loop of a scratch cell (get_ipython().run_cell, as trial t26ex10 did): each run that
    fails starts the watch again as it ends, and the scratch cell's own call after it counts."""
    shell.user_ns["CHECK"] = _FAILURES["a NameError (the answer cell not run)"]
    assert _cell(shell, "hp.watch_helpers('zero_bytes')") is None
    assert _cell(shell, "for _ in range(2):\n    get_ipython().run_cell(CHECK)\nhp.zero_bytes(10, 2, 1)") is None
    assert isinstance(_cell(shell, _CHECK), hp.WrongAnswer)


def test_outside_ipython_a_check_ends_the_watch_as_before():
    """No shell (a script, these tests): nothing is registered, and the watch ends as the check says."""
    IPython = sys.modules.get("IPython")
    if IPython is not None and IPython.get_ipython() is not None:
        pytest.skip("an IPython shell runs in this process")
    checks._unwatch()
    checks._forget_calls()
    hp.watch_helpers("zero_bytes")
    hp.assert_helpers_unused(part="part 1", hint="h")
    assert not checks._WATCHED and not checks._ENDED_IN


def test_a_module_hook_or_gc_s_lists_fail_the_check_and_torch_s_and_ipython_s_do_not():
    """Trial t26ex15 F1, F2: forward hooks on every Linear counted, exactly, the addmm a checkpointed backward pass
    reruns, and gc.get_objects found the tensors it keeps (torch keeps the Python object of a tensor that C++ holds),
    with no measuring tool (gc.get_objects and gc.get_referrers are in either list, with the process's memory reads).
    Each counts from code of one's own, through a reference kept from before the watch too; torch's own hooks
    (spectral_norm registers a forward pre-hook) and IPython's gc calls (autoreload's referrers) do not."""
    import gc
    import os

    import IPython
    torch = pytest.importorskip("torch")
    from torch.nn.modules import module

    net = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.GELU(), torch.nn.Linear(3, 3))
    register = torch.nn.Module.register_forward_hook   # kept from before any watch
    routes = {
        "a forward hook": lambda: net[0].register_forward_hook(lambda *_: None).remove(),
        "a forward pre-hook": lambda: net[2].register_forward_pre_hook(lambda *_: None).remove(),
        "a forward hook on every module": lambda: module.register_module_forward_hook(lambda *_: None).remove(),
        "a forward pre-hook on every module": lambda: module.register_module_forward_pre_hook(lambda *_: None).remove(),
        "a forward hook through a reference kept from before the watch": lambda: register(net, lambda *_: None).remove(),
        "gc.get_objects": lambda: len(gc.get_objects()),
        "gc.get_referrers": lambda: gc.get_referrers(net[0].weight),
    }

    def torch_s_own():   # a step with a module whose hooks torch registers
        torch.nn.utils.spectral_norm(torch.nn.Linear(3, 3))(torch.ones(1, 3)).sum().backward()

    def ipython_s_own():   # code whose file lies in IPython's folder, as autoreload's does
        space = {"gc": gc, "w": net[0].weight}
        exec(compile("gc.get_referrers(w)", os.path.join(os.path.dirname(IPython.__file__), "autoreloaded.py"), "exec"),
             space)

    for name, run in routes.items():
        assert _fails_the_check("torch", run), f"{name} under a watch should fail the check"
    assert not _fails_the_check("torch", torch_s_own), "torch's own hooks should not fail the check"
    assert not _fails_the_check("torch", ipython_s_own), "IPython's own call of gc should not fail the check"
    # the watch gave each back
    assert gc.get_objects.__module__ == "gc" and gc.get_referrers.__module__ == "gc" and not checks._WATCHED
    assert torch.nn.Module.register_forward_hook is register and register.__code__.co_name == "register_forward_hook"
    assert module.register_module_forward_hook.__code__.co_name == "register_module_forward_hook"


def test_a_public_torch_function_bound_again_fails_the_check_and_torch_s_own_setattr_does_not():
    """Trial t28ex15 F1: torch.nn.functional.linear bound again to a counter of one's own, run during a checkpointed
    backward pass and put back before the cell ended, counted the addmm it reruns with no measuring tool. A public
    callable of torch or torch.nn.functional bound again from outside torch counts, by assignment or setattr, and
    whatever is put back; a new name, a private one, the same object again, or torch's own setattr does not."""
    import os

    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    linear, relu = F.linear, torch.relu

    def rebind_linear():
        F.linear = lambda *args, **kwargs: linear(*args, **kwargs)
        F.linear = linear

    def rebind_relu_by_setattr():
        setattr(torch, "relu", lambda x: relu(x))
        setattr(torch, "relu", relu)

    def harmless():
        F.my_own_name = 1          # a new name
        del F.my_own_name
        F.linear = linear          # the same object
        torch._my_private = 1     # a private name
        del torch._my_private

    def torch_s_own():   # a setattr whose code lies in torch's folder
        exec(compile("F.linear = lambda *a, **k: linear(*a, **k)\nF.linear = linear",
                     os.path.join(os.path.dirname(torch.__file__), "rebinding.py"), "exec"), {"F": F, "linear": linear})

    assert _fails_the_check("torch", rebind_linear), "F.linear bound again should fail the check"
    assert _fails_the_check("torch", rebind_relu_by_setattr), "torch.relu bound again by setattr should fail the check"
    assert not _fails_the_check("torch", harmless), "a new, private or unchanged name should not fail the check"
    assert not _fails_the_check("torch", torch_s_own), "torch's own setattr should not fail the check"
    assert F.linear is linear and torch.relu is relu and not checks._WATCHED
    assert isinstance(F, type(os)) and type(F).__setattr__.__code__.co_name == "__setattr__"   # given back


def test_a_jaxpr_traced_through_the_public_interpreter_modules_fails_the_check():
    """Trial t29ex13j F1: jax.interpreters.partial_eval.trace_to_jaxpr_dynamic of a gradient, wrapped with the public
    jax.extend.linear_util, gives the jaxpr make_jaxpr would: what a checkpoint policy keeps and reruns. It counts from
    outside jax; jax's own tracing (a jit, a grad) calls the jax._src function, which is not watched."""
    jax = pytest.importorskip("jax")
    from jax.extend import linear_util
    from jax.extend.core import DebugInfo
    from jax.interpreters import partial_eval

    def grad_jaxpr():
        wrapped = linear_util.wrap_init(lambda x: [jax.grad(lambda y: (y * y).sum())(x)],   # flat outputs, a list
                                        debug_info=DebugInfo("f", "x", None, None))
        return partial_eval.trace_to_jaxpr_dynamic(wrapped, [jax.core.ShapedArray((3,), jax.numpy.float32)])

    assert "mul" in str(grad_jaxpr()[0]), "the route should give the gradient's jaxpr when nothing watches"
    assert _fails_the_check("jax", grad_jaxpr), "trace_to_jaxpr_dynamic from outside jax should fail the check"
    assert not _fails_the_check("jax", lambda: jax.jit(jax.grad(lambda x: (x * x).sum()))(jax.numpy.ones(3))), (
        "jax's own tracing of a jit and a grad should not count")
    assert not checks._WATCHED and partial_eval.trace_to_jaxpr_dynamic.__module__.startswith("jax")


def test_a_serialized_executable_fails_the_check():
    """Trial t28ex11 F2: jax.experimental.serialize_executable.serialize(compiled) returns XLA's serialized executable,
    with the buffer assignment in it. It counts from outside jax, and so do the client's serialize_executable and an
    executable's serialize, where it ends; a Compiled does not pickle, so pickle reaches neither."""
    import pickle

    jax = pytest.importorskip("jax")
    from jax.experimental import serialize_executable

    compiled = jax.jit(lambda x: (2 * x).sum()).lower(jax.numpy.ones(3)).compile()
    executable = compiled.runtime_executable()   # before the watch: a reference kept
    assert _fails_the_check("jax", lambda: serialize_executable.serialize(compiled)), (
        "serialize_executable.serialize should fail the check")
    assert _fails_the_check("jax", lambda: executable.client.serialize_executable(executable)), (
        "Client.serialize_executable should fail the check")
    assert _fails_the_check("jax", lambda: executable.serialize()), "LoadedExecutable.serialize should fail the check"
    with pytest.raises(TypeError):
        pickle.dumps(compiled)
    assert not checks._WATCHED and serialize_executable.serialize.__module__ == "jax.experimental.serialize_executable"
