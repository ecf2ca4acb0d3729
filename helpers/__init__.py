"""helpers: the small, tested toolbox behind the course notebooks (import helpers as hp).

The framework-free modules are imported here. The others import torch or jax, so they load on
first use of one of their names (the map below): a JAX notebook never pays for importing torch,
nor a PyTorch one for jax. Importing helpers sets nothing: a notebook that reads GPU memory with
JAX sets XLA_PYTHON_CLIENT_PREALLOCATE itself, in its setup cell. It does one thing to the process:
the objects alive when it is imported (mostly the modules imported before it: torch's alone are some
200,000 objects, an IPython kernel's as many) are frozen out of the cycle collector's passes
(gc.freeze). hp.measure_memory and hp.held_bytes run a full collection around what they measure, so
that garbage awaiting the collector is not counted; frozen, these long-lived objects are not walked
again at each one (a third of a second each in a kernel, a few hundredths then), and reference
counting still frees them as before. Where torch is imported before it, torch's compiler front end
(torch._dynamo, which torch itself loads on the first optimizer step) is loaded first and frozen too.
hp.trace_step freezes again when modules were imported since (transformers and its model code), after a
full collection, so that its own collection per trace does not walk them.
It also notes, from then on, which threads a notebook's own code starts (threading.Thread.start and
_thread's starts pass through helpers.checks): hp.without_helpers refuses a check beside one.
"""

from __future__ import annotations

import gc
import importlib
import sys

from .anatomy import (bytes_per_param, gpt_activation_bytes, linear_stack_activation_bytes,
                      persistent_bytes)
from .checks import (ClaimFailed, WrongAnswer, answer_digest, assert_helpers_unused, cannot_check, check,
                     check_answer, count_try, watch_helpers, watched_calls, without_helpers)
from .device import describe, profile, sized, torch_device
from .formats import FORMATS, float_format
from .gpt import GPTConfig, gpt_param_count, synthetic_tokens
from .planner import choose_interventions
from .program_text import count_ops, dot_operand_dtypes, hlo_schedule
from .search import first_below
from .sharding import StepBytes, collective_bytes, communication_bytes, sharded_bytes, smallest_fit, zero_bytes
from .timing import Benchmark, Timings, synchronize, time_together
from .units import fmt_bytes, fmt_ratio, fmt_timed
from .watches import measuring_tools, watch_measuring

# name -> the module that defines it; each of these modules imports torch (…_torch, memory_torch)
# or jax (…_jax, memory_jax), or matplotlib (plotting); estimate imports torch and transformers.
_LAZY = {
    "memory_torch": ("MemoryTracker", "Workload", "measure_memory", "measure_peak", "predict_memory", "predict_peak"),
    "saved_torch": ("bytes_by_kind", "copies_made", "held_bytes", "saved_for_backward"),
    "ops_torch": ("count_torch_ops", "op_dtypes", "op_seconds"),
    "gpt_torch": ("GPTBlock", "MiniGPT", "make_step"),
    "memory_jax": ("device_memory", "eager_step_samples", "live_bytes_by", "saved_residuals",
                   "shapes_of", "tree_bytes", "xla_memory_plan"),
    "distributed_torch": ("launch", "rank_memory"),
    "estimate": ("block_row", "build_ledger", "fit_per_sequence", "load_config", "plan_from_traces", "trace_step"),
    "gpt_jax": ("minigpt_init", "minigpt_logits", "minigpt_loss"),
    "models_jax": ("make_transformer_step", "plan_per_layer", "plan_per_sequence", "plan_step", "shape_from_hf",
                   "transformer_init", "transformer_logits", "transformer_loss", "transformer_param_count"),
    "plotting": ("Reference", "bars2", "measured_on", "memory_timeline", "plot", "plot_ratios", "stacked",
                 "stacked_bars"),
}
_WHERE = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module 'helpers' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_WHERE))


if "torch" in sys.modules:
    # torch loads its compiler's front end (torch._dynamo, about 120,000 objects) on the first optimizer step
    # or checkpoint, after this freeze, and each full collection then walks them all (about 35 ms here).
    # Loaded now, they are frozen with the rest: a torch notebook loads it anyway.
    try:
        importlib.import_module("torch._dynamo")
    except Exception:  # noqa: BLE001 - a build without it: nothing more to freeze
        pass
gc.freeze()   # see the module's docstring
