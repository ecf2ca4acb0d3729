"""What a watch covers: one list per framework of the course helpers and framework tools that measure, trace,
count or plan what a step keeps, dispatches, computes or allocates (hp.measuring_tools), and the watch over all
of them (hp.watch_measuring). Every exercise that watches starts its watch from this list, so a route closed in one
exercise is closed in all: a helper or tool added here is watched everywhere at once. Either list also holds a read of
the process's memory use (its /proc files, C's allocator statistics, resource.getrusage) and gc.get_objects, which
measure what a step keeps with no framework tool at all.

A framework tool is watched only where it READS a plan or a trace, not where a step merely runs: a given cell in a
watched window may jit, lower, compile, checkpoint or run a step. So JAX's Lowered.compile and jax.jit are not
here, Compiled.memory_analysis and Lowered.as_text are, and so is a compile that writes XLA's or jax's dump (the
compiled program, its buffer assignment and memory report: the plan, in files) or XLA's verbose log, whatever route
asked for it; torch's saved_tensors_hooks and TorchDispatchMode count
only when the class itself or a class of one's own is used (torch.utils.checkpoint and FakeTensorMode enter
subclasses of them to run a step, and those do not count), and so do TorchFunctionMode and a Tensor subclass of one's
own (its __torch_function__ sees every operator as a mode does). torch's graph tracers are the exception: no given cell
compiles or traces a torch step, and every public route to a step's backward graph (make_fx, functorch.compile's
aot_function and aot_module, torch.compile with any backend) ends in make_fx, called from outside torch or from
torch's AOT autograd, so each of them counts; a given cell that compiles a step in a watched window leaves out
torch.compile and make_fx by name.

Importing this module imports neither torch nor jax: measuring_tools imports the framework it is asked for.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
from typing import Callable, Iterable

from .checks import watch_helpers

# helpers that need no framework and plan what a step keeps, from formulas: out of reach in either framework
# (each notes its calls made before the kernel's first watch, which counts them: checks._note_call)
_FORMULAS = ("bytes_per_param", "persistent_bytes", "linear_stack_activation_bytes", "gpt_activation_bytes",
             "zero_bytes", "sharded_bytes", "communication_bytes", "smallest_fit", "choose_interventions")

_HELPERS = {
    "torch": ("predict_memory", "measure_memory", "predict_peak", "measure_peak", "saved_for_backward", "held_bytes",
              "bytes_by_kind", "copies_made", "count_torch_ops", "op_dtypes", "op_seconds", "trace_step", "build_ledger",
              "fit_per_sequence", "block_row", "plan_from_traces", "rank_memory", *_FORMULAS),
    "jax": ("xla_memory_plan", "saved_residuals", "tree_bytes", "live_bytes_by", "device_memory", "eager_step_samples",
            "count_ops", "dot_operand_dtypes", "hlo_schedule", "collective_bytes", "plan_step", "plan_per_sequence",
            "plan_per_layer", *_FORMULAS),
}


def _own_use(base: type) -> Callable[..., bool]:
    """Whether a call of one of base's methods is a use of base itself or of a class of one's own built on it, not
    of a subclass the framework or the course defines to run a step (torch.utils.checkpoint's hooks, FakeTensorMode,
    the course helpers' trackers, which are watched by their own names)."""
    own_packages = {base.__module__.partition(".")[0], __name__.partition(".")[0]}

    def counts(self: object, *args: object, **kwargs: object) -> bool:
        cls = type(self)
        return cls is base or cls.__module__.partition(".")[0] not in own_packages
    counts.__qualname__ = f"own use of {base.__qualname__}"
    return counts


def _own_hooks(base: type) -> Callable[..., bool]:
    """_own_use(base) for saved_tensors_hooks' __enter__, which also counts a subclass torch defines (save_on_cpu, say)
    whose pack or unpack hook was replaced by a function of one's own: it runs that function on every saved tensor."""
    own = _own_use(base)
    own_packages = {base.__module__.partition(".")[0], __name__.partition(".")[0]}

    def counts(self: object, *args: object, **kwargs: object) -> bool:
        hooks = [getattr(self, attr, None) for attr in ("pack_hook", "unpack_hook")]
        return own(self) or any(hook is not None and (getattr(hook, "__module__", None) or "").partition(".")[0]
                                not in own_packages for hook in hooks)
    counts.__qualname__ = f"own use of {base.__qualname__} or of its hooks"
    return counts


def _other_than(cls: type) -> Callable[..., bool]:
    """Whether a call of a method is made on an instance of another class than `cls` (a helper's own tracker, which
    the helper's name watches)."""
    def counts(self: object, *args: object, **kwargs: object) -> bool:
        return type(self) is not cls
    counts.__qualname__ = f"a call not on a {cls.__qualname__}"
    return counts


def _outside_call(*packages: str, but: tuple[str, ...] = (), named: str | None = None) -> Callable[..., bool]:
    """Whether a call comes from outside `packages` and the course's helpers: a call of one's own, not one that
    jax.grad makes of jax.vjp, or jit of a lowering's text, to run a step (the helpers that call such a tool to
    measure are watched by their own names). A call from the modules `but` names (and theirs), inside `packages`,
    counts too: the public routes that reach the tool through them (make_fx through torch's AOT autograd). With
    `named`, so does a call from inside whose code does not name the tool (`named` not among the names it reads):
    the framework's machinery calling a function it was handed (jax.eval_shape or jit of
    functools.partial(jax.vjp, f), jax.tree.map(jax.vjp, ...)), not jax.grad's own call of vjp (trial t26ex02j F1)."""
    from . import checks
    own_packages = {*packages, __name__.partition(".")[0]}
    # decided by the caller's code file, not by the __name__ its globals hold, which exec(code, {"__name__": ...})
    # sets to any module's name (trial t25ex11 F6)
    own = tuple(folder + os.sep for package in own_packages for folder in _folders(package))
    through = tuple(path for module in but for path in _module_paths(module))

    def counts(*args: object, **kwargs: object) -> bool:
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename == checks.__file__:  # the watch's own stub and wrapper
            frame = frame.f_back
        filename = frame.f_code.co_filename if frame is not None else ""
        return (not filename.startswith(own) or (bool(through) and filename.startswith(through))
                or (named is not None and named not in frame.f_code.co_names))
    counts.__qualname__ = (f"a call from outside {', '.join(sorted(own_packages))}"
                           + (f" or from {', '.join(but)}" if but else "")
                           + (f" or from code there that does not name {named}" if named else ""))
    return counts


def _folders(package: str) -> list[str]:
    """The folders of an installed top-level package (its __path__, or where it would be imported from), without
    importing one that is not imported yet."""
    module = sys.modules.get(package)
    if module is not None:
        path = getattr(module, "__path__", None)
        file = getattr(module, "__file__", None)
        return list(path) if path is not None else [os.path.dirname(file)] if file else []
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    return list(spec.submodule_search_locations or ([os.path.dirname(spec.origin)] if spec.origin else []))


def _module_paths(module: str) -> list[str]:
    """What a module's code files start with: its folder (a package) or its file (a module), inside its package."""
    package, _, rest = module.partition(".")
    path = [os.path.join(folder, *rest.split(".")) if rest else folder for folder in _folders(package)]
    return [p + ending for p in path for ending in (os.sep, ".py")]


def _own_class(*packages: str) -> Callable[..., bool]:
    """Whether a class method is called for a class of one's own: its first argument (cls) defined outside `packages`
    and the course's helpers (a Tensor subclass of one's own, not torch's Parameter or FakeTensor)."""
    own_packages = {*packages, __name__.partition(".")[0]}

    def counts(cls: object = None, *args: object, **kwargs: object) -> bool:
        return (getattr(cls, "__module__", None) or "").partition(".")[0] not in own_packages
    counts.__qualname__ = f"a class of one's own, not of {', '.join(sorted(own_packages))}"
    return counts


def _class_methods(cls: type, *names: str) -> type:
    """A stand-in owner of the functions under cls's class methods `names`, for a watch's (owner, name) pair, as
    _getters' is for properties: the watch swaps each function's code, so every call counts, through cls, a
    subclass or super(); cls keeps its class methods; the label stays cls's ("Tensor.__torch_function__")."""
    import inspect

    functions = {name: inspect.getattr_static(cls, name).__func__ for name in names}
    holder = type(cls.__name__, (), {**functions, "__module__": cls.__module__})
    holder.__qualname__ = cls.__qualname__
    return holder


def _getters(cls: type, *names: str) -> type:
    """A stand-in owner of the getters of cls's properties `names`, for a watch's (owner, name) pair: a watch on cls
    itself would put a function where the property was. The watch swaps each getter's code instead, so every read
    of the property counts, as the pair's filter says; the label stays cls's ("Traced.jaxpr")."""
    import inspect

    getters = {name: inspect.getattr_static(cls, name).fget for name in names}
    holder = type(cls.__name__, (), {**getters, "__module__": cls.__module__})
    holder.__qualname__ = cls.__qualname__
    return holder


def _torch_methods() -> list[tuple]:
    import torch
    import torch.compiler
    import torch.profiler
    from torch.fx.experimental import proxy_tensor
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    helpers = sys.modules[__name__.rpartition(".")[0]]
    memory_torch = importlib.import_module(f"{helpers.__name__}.memory_torch")
    hooks = torch.autograd.graph.saved_tensors_hooks
    outside = _outside_call("torch")
    return [
        (helpers.MemoryTracker, "__enter__", _other_than(memory_torch._PeakTracker)),  # measure_peak's: by its name
        (importlib.import_module(f"{helpers.__name__}.ops_torch"), "_dispatched_ops"),  # count_torch_ops, op_dtypes
        (hooks, "__init__", _own_use(hooks)), (hooks, "__enter__", _own_hooks(hooks)),  # what autograd saves
        (TorchDispatchMode, "__enter__", _own_use(TorchDispatchMode)),                # a dispatch mode of one's own
        # and a function mode of one's own, or a Tensor subclass of one's own, whose __torch_function__ is handed each
        # operator and its output (weak references to them, alive after the forward, are what autograd kept: trial
        # t26ex20 F1, F2): the mode's start; the subclass's default __torch_function__ (super()), and the public and
        # private ways to make an instance or take one apart, from outside torch (the constructor, Sub(x), is C's)
        (TorchFunctionMode, "__enter__", _own_use(TorchFunctionMode)),
        (_class_methods(torch.Tensor, "__torch_function__"), "__torch_function__", _own_class("torch")),
        *((torch.Tensor, name, outside) for name in ("as_subclass", "_make_subclass", "_make_wrapper_subclass")
          if hasattr(torch.Tensor, name)),
        # the storage under a tensor, or its address, from outside torch: weak references to the storages of a step's
        # tensors (a selective-checkpoint policy's arguments, or the operators of a printed formula typed again on
        # real tensors), alive after the forward pass, are what autograd or a checkpoint's cache kept, with no other
        # tool (trials t28ex10 F1, t28ex20 F1); a weak reference to the tensor itself dies with it, whatever shares
        # its storage. torch's own calls (printing, saving, copying a tensor) and the helpers' do not count
        *((torch.Tensor, name, outside) for name in ("untyped_storage", "storage", "_typed_storage", "data_ptr")
          if hasattr(torch.Tensor, name)),
        (FlopCounterMode, "__enter__"),
        (torch.profiler.profile, "__enter__"), (torch.profiler.profile, "start"),  # what `with` calls, and a start()
        # the autograd profilers that torch.profiler is built on, public too (profile_memory=True lists every
        # allocation): where each of their starts ends, whether entered, started, or reached from torch.profiler
        (torch.autograd.profiler, "_enable_profiler"),
        *([(torch.autograd.profiler_legacy, "_enable_profiler_legacy")]
          if hasattr(getattr(torch.autograd, "profiler_legacy", None), "_enable_profiler_legacy") else []),
        # the graph tracers, which print a step's forward and backward graphs, with what each backward op reads:
        # torch.compile by each of its public names (a backend of one's own is handed the graphs), and make_fx,
        # where every route to a backward graph ends: a call of one's own, or one from torch's AOT autograd, which
        # functorch.compile's aot_function and aot_module and torch.compile's backends run (importing
        # functorch.compile to watch those by name would load torch._dynamo, seconds, in every watch)
        (torch, "compile", outside), (torch.compiler, "compile", outside), (torch.nn.Module, "compile", outside),
        (proxy_tensor, "make_fx", _outside_call("torch", but=("torch._functorch",))),
        *_torch_hooks(),
        *_torch_rebinding(),
    ]


@functools.cache
def _torch_hooks() -> tuple[tuple, ...]:
    """A public route to what a backward pass reruns with no measuring tool (trial t26ex15 F1): a module's forward
    hooks and pre-hooks, on one module or on all, which fire at every rerun of a checkpointed module (each Linear's,
    say). Only a call from outside torch, IPython and the course's helpers counts (torch registers hooks of its own:
    spectral_norm's). A given cell that registers a probe while a watch runs pauses the watch for it (exercise 15)."""
    import torch
    from torch.nn.modules import module

    outside = _outside_call("torch", "IPython")   # built once (cached): every given line that starts a watch asks
    return (*((torch.nn.Module, name, outside) for name in ("register_forward_hook", "register_forward_pre_hook")),
            *((module, name, outside) for name in ("register_module_forward_hook", "register_module_forward_pre_hook")))


@functools.cache
def _torch_rebinding() -> tuple[tuple, ...]:
    """A public torch function bound again (trial t28ex15 F1): torch.nn.functional.linear replaced by a counter of one's
    own is called at every rerun of a checkpointed Linear, as a forward hook is, whatever the counter then puts back.
    torch's and torch.nn.functional's module class becomes one of its own (a types.ModuleType whose __setattr__ sets, as
    a module's does; reading a name is unchanged), and the watch swaps that __setattr__'s code, so that binding again
    one of their public callables counts, by `F.linear = ...` or setattr, from outside torch, IPython and the course's
    helpers. A class's method bound again (nn.Linear.forward) is not seen: CONTRIBUTING's stated limits."""
    import types

    import torch
    import torch.nn.functional
    from . import checks
    own = tuple(folder + os.sep for package in ("torch", "IPython", __name__.partition(".")[0])
                for folder in _folders(package))

    def rebinds(module: object, name: str, value: object, *args: object, **kwargs: object) -> bool:
        held = vars(module).get(name) if isinstance(name, str) and not name.startswith("_") else None
        if not callable(held) or held is value:
            return False
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename == checks.__file__:  # the watch's own stub
            frame = frame.f_back
        return not (frame.f_code.co_filename if frame is not None else "").startswith(own)
    rebinds.__qualname__ = "a public callable of the module bound again from outside torch"

    methods = []
    for module in (torch, torch.nn.functional):
        if type(module) is types.ModuleType:
            def __setattr__(self: types.ModuleType, name: str, value: object) -> None:
                types.ModuleType.__setattr__(self, name, value)
            module.__class__ = type("module", (types.ModuleType,), {"__setattr__": __setattr__,
                                                                     "__module__": __name__})
        setter = vars(type(module)).get("__setattr__")
        if isinstance(setter, types.FunctionType):   # the stand-in owner names the module: "torch.nn.functional"
            holder = type(module.__name__, (), {"__setattr__": setter, "__module__": "torch"})
            holder.__qualname__ = module.__name__
            methods.append((holder, "__setattr__", rebinds))
    return tuple(methods)


def _jax_methods() -> list[tuple]:
    import jax
    import jax.ad_checkpoint
    import jax.export
    import jax.interpreters.ad
    import jax.interpreters.partial_eval
    import jax.stages
    from jax._src import ad_checkpoint
    from jax._src.lib import xla_client

    traced = _getters(jax.stages.Traced, "jaxpr", "lojax")  # jit(f).trace(...).jaxpr, as make_jaxpr(f)(...)
    methods = [
        (jax.stages.Compiled, "memory_analysis"), (jax.stages.Compiled, "cost_analysis"),
        (jax.stages.Compiled, "as_text"), (jax.stages.Compiled, "runtime_executable"),
        (xla_client.LoadedExecutable, "get_compiled_memory_stats"),  # where every route to a compiled plan ends
        (jax.stages.Lowered, "as_text"), (jax.stages.Lowered, "compiler_ir"), (jax.stages.Lowered, "cost_analysis"),
        (jax, "make_jaxpr"), (jax, "vjp"), (jax, "linearize"),
        # a jaxpr traced through jax's public interpreter modules, as make_jaxpr traces it (trial t29ex13j F1); jax's own
        # code calls the jax._src functions these names alias, not them
        (jax.interpreters.partial_eval, "trace_to_jaxpr_dynamic"), (jax.interpreters.partial_eval, "trace_to_jaxpr_nounits"),
        (jax.interpreters.ad, "linearize"),
        (traced, "jaxpr"), (traced, "lojax"), (jax.export, "export"),  # an Exported's mlir_module, as Lowered.as_text
        (jax.ad_checkpoint, "print_saved_residuals"), (ad_checkpoint, "saved_residuals"),
        (ad_checkpoint, "_saved_residuals"),
        # the arrays alive now, read from inside a step (a custom_vjp's backward during an eager jax.grad): the new
        # ones of a block's shape are what it kept (trial t26ex13j F1). jax.live_arrays, and the backend client's
        # own methods (public through jax.extend.backend.get_backend()) that it calls; Device.live_buffers, which
        # jaxlib deprecated to an empty list, while a version still has it
        (jax, "live_arrays"),
        *((owner, attr) for owner, attr in ((xla_client.Client, "live_arrays"), (xla_client.Client, "live_buffers"),
                                            (jax.Device, "live_buffers")) if hasattr(owner, attr)),
    ]
    methods += _jax_serialized()
    # jax.grad calls jax.vjp, and jit's own machinery may read what it lowered: only a call from outside jax counts,
    # or one from jax's code that does not name the tool (jax.eval_shape or jit of a partial of jax.vjp,
    # jax.tree.map(jax.stages.Compiled.memory_analysis, ...): jax calling a function it was handed)
    return [(owner, attr, _outside_call("jax", "jaxlib", named=attr)) for owner, attr in methods] + _jax_dumps()


def _jax_serialized() -> list[tuple]:
    """XLA's serialized executable, which holds the compiled plan's buffer assignment (trial t28ex11 F2):
    jax.experimental.serialize_executable.serialize of a Compiled, and where it ends, the backend client's
    serialize_executable and an executable's own serialize (reached through Compiled.runtime_executable, watched too).
    Pickling a Compiled does not reach them: it raises TypeError ("cannot pickle 'LoadedExecutable' object")."""
    from jax.experimental import serialize_executable
    from jax._src.lib import xla_client

    return [(serialize_executable, "serialize"),
            *((owner, attr) for owner, attr in ((xla_client.Client, "serialize_executable"),
                                                (xla_client.LoadedExecutable, "serialize"),
                                                (getattr(xla_client, "Executable", None), "serialize"))
              if hasattr(owner, attr))]


# XLA_FLAGS as the kernel had it when the helpers were imported (the setup cell, after `import jax`): XLA reads it once,
# when jax first starts its backend, so a dump flag set then writes every compile's dump even if it is taken out later
_XLA_FLAGS_AT_IMPORT = os.environ.get("XLA_FLAGS", "")
# and XLA's verbose log (TF_CPP_VMODULE=buffer_assignment=2 prints each compile's buffer assignment to the kernel's
# stderr, which Jupyter shows), read as early
_VLOG = ("TF_CPP_VMODULE", "TF_CPP_MAX_VLOG_LEVEL")
_VLOG_AT_IMPORT = {name: os.environ.get(name, "") for name in _VLOG}


def _verbose_log(env: dict) -> bool:
    """Whether TF_CPP_VMODULE names a module or TF_CPP_MAX_VLOG_LEVEL is above 0 in `env`."""
    level = env.get("TF_CPP_MAX_VLOG_LEVEL", "").strip()
    return bool(env.get("TF_CPP_VMODULE", "").strip()) or (level.lstrip("-").isdigit() and int(level) > 0)


def _dumping_flags(flags: str) -> bool:
    """Whether XLA_FLAGS holds a flag of XLA's dump (--xla_dump_to, ...), itself or in a --flagfile it names."""
    if "xla_dump" in flags:
        return True
    for word in flags.split():
        if word.lstrip("-").startswith("flagfile="):
            try:
                with open(word.partition("=")[2]) as f:
                    if "xla_dump" in f.read():
                        return True
            except OSError:
                pass
    return False


def _jax_dumps() -> list[tuple]:
    """The dumps that write a compiled plan to files (trial t25ex11 F1), each where every route to it ends, with its
    own label. XLA's dump: a compile whose compiler options hold an xla_dump* key (jit's compiler_options, pjit's,
    Lowered.compile's: all reach compiler.get_compile_options), or any compile while XLA_FLAGS holds one (now, or
    when the helpers were imported). XLA's verbose log, which prints the buffer assignment: any compile while
    TF_CPP_VMODULE or TF_CPP_MAX_VLOG_LEVEL asks for it. jax's own dump, jax_dump_ir_to (set by jax.config.update
    or JAX_DUMP_IR_TO): any module or jaxpr it would write. The code of each function is swapped (as _getters'
    getters are), so every call counts, whoever makes it, as the filter says; the stand-in owner names the route."""
    from jax._src import compiler, jaxpr_util
    from jax._src import config as jax_config
    from jax._src.interpreters import mlir

    def xla_dump(*args: object, **kwargs: object) -> bool:
        return (any(isinstance(a, dict) and any(str(k).startswith("xla_dump") for k in a)
                    for a in (*args, *kwargs.values()))
                or _dumping_flags(os.environ.get("XLA_FLAGS", "")) or _dumping_flags(_XLA_FLAGS_AT_IMPORT))
    xla_dump.__qualname__ = "a compile with an xla_dump compiler option, or while XLA_FLAGS holds one"

    flag = jax_config.jax_dump_ir_to

    def jax_dump(*args: object, **kwargs: object) -> bool:
        return bool(flag.value)
    jax_dump.__qualname__ = "a module or jaxpr written while jax_dump_ir_to is set"

    def vlog(*args: object, **kwargs: object) -> bool:
        return _verbose_log(os.environ) or _verbose_log(_VLOG_AT_IMPORT)
    vlog.__qualname__ = "a compile while TF_CPP_VMODULE or TF_CPP_MAX_VLOG_LEVEL asks for XLA's verbose log"

    xla = type("XLA", (), {"xla_dump": compiler.get_compile_options, "vlog": compiler.compile_or_get_cached,
                           "__module__": "jax"})
    config = type("config", (), {"jax_dump_ir_to": mlir.dump_module_to_file,
                                 "jax_dump_ir_modes": jaxpr_util.maybe_dump_jaxpr_to_file, "__module__": "jax"})
    config.__qualname__ = "jax.config"
    return [(xla, "xla_dump", xla_dump), (xla, "vlog", vlog), (config, "jax_dump_ir_to", jax_dump),
            (config, "jax_dump_ir_modes", jax_dump)]


def _memory_methods() -> list[tuple]:
    """Reading the process's memory use, in either framework: the resident size before and after `del out` is what a
    step keeps (trial t25ex20 F1). checks.ProcessMemory.read is what the audit hook calls for a read of the process's
    /proc memory files (psutil's too) or of C's allocator statistics; resource.getrusage (ru_maxrss) raises no audit
    event and is watched by name, but for IPython's own calls (%time reads the CPU times). And gc.get_objects, the
    objects the process holds: read inside a step's backward, its new arrays or tensors are what the step kept, as
    jax.live_arrays' are (found beside trial t26ex13j F1), but for the kernel's and the frameworks' own calls; and
    gc.get_referrers alike (the objects that refer to one: trial t26ex15 F2 found a step's tensors through gc)."""
    import gc

    from . import checks
    # the packages that may call it are looked for where imported only (a search for the others would slow each watch)
    own = _outside_call(*(p for p in ("IPython", "ipykernel", "debugpy", "torch", "jax", "jaxlib") if p in sys.modules))
    objects = [(gc, "get_objects", own), (gc, "get_referrers", own)]
    try:
        import resource
    except ImportError:  # not on Windows
        return [(checks.ProcessMemory, "read"), *objects]
    return [(checks.ProcessMemory, "read"), (resource, "getrusage", _outside_call("IPython")), *objects]


def _label(method: tuple) -> str:
    owner, attr = method[0], method[1]
    return f"{getattr(owner, '__qualname__', None) or owner.__name__}.{attr}"


def measuring_tools(framework: str | tuple[str, ...], *, extra: Iterable[str | tuple] = (),
                    leave_out: Iterable[str] = ()) -> tuple[tuple[str, ...], list[tuple]]:
    """The course helpers (names, as hp.<name>) and framework methods ((class or module, attribute) pairs, some
    with a third item that says which calls count) that measure, trace, count or plan what a step keeps,
    dispatches, computes or allocates in `framework` ("torch" or "jax", or both, ("torch", "jax"), for a notebook
    of neither framework whose answer either could measure), and in either a read of the process's memory use
    (resource.getrusage; ProcessMemory.read, which stands for its /proc files and C's allocator statistics): what
    watch_helpers(*names, methods=methods) watches in every exercise. It imports the frameworks named. `extra` adds a part's own (a helper's name, or a method
    pair); `leave_out` drops what a given cell of the part needs, by the helper's name or the method's label
    ("FlopCounterMode.__enter__"): a name that is in neither list is an error, not a silent no-op."""
    frameworks = (framework,) if isinstance(framework, str) else tuple(framework)
    if not frameworks or any(f not in _HELPERS for f in frameworks):
        raise ValueError(f"framework is 'torch', 'jax' or a tuple of them, not {framework!r}")
    names = [name for f in frameworks for name in _HELPERS[f]]
    methods = [m for f in dict.fromkeys(frameworks) for m in (_torch_methods() if f == "torch" else _jax_methods())]
    methods += _memory_methods()  # once, whatever the frameworks
    for item in extra:
        if isinstance(item, str):
            names.append(item)
        else:
            methods.append(tuple(item))
    leave_out = set(leave_out)
    unknown = leave_out - set(names) - {_label(m) for m in methods}
    if unknown:
        raise ValueError(f"leave_out names {sorted(unknown)}, which the {framework} list does not hold")
    names = tuple(dict.fromkeys(n for n in names if n not in leave_out))
    methods = [m for m in methods if _label(m) not in leave_out]
    return names, methods


def watch_measuring(framework: str | tuple[str, ...], *extra: str | tuple, leave_out: Iterable[str] = (), record: Iterable[str] = (),
                    keep: bool = True) -> None:
    """watch_helpers over measuring_tools(framework, extra=extra, leave_out=leave_out): the given first line of a
    part's cells. Called again with the same arguments, it goes on counting (see watch_helpers)."""
    names, methods = measuring_tools(framework, extra=extra, leave_out=leave_out)
    watch_helpers(*names, methods=methods, record=record, keep=keep)
