"""helpers: the small, tested toolbox behind the course notebooks (import helpers as hp).

Framework modules are imported lazily, so a JAX notebook never pays for importing torch and the
other way round: hp.measure_memory loads helpers.memory_torch, hp.plan_memory helpers.memory_jax.
"""

from __future__ import annotations

import importlib
import os

# Must be set before JAX creates its GPU client, or XLA grabs 75% of the card up front and the
# device's memory counters say nothing about the program.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

from .anatomy import (GPTActivations, ParamBytes, bytes_per_param, gpt_activation_bytes,  # noqa: E402
                      linear_stack_activation_bytes, persistent_bytes)
from .checks import ClaimFailed, WrongAnswer, answer_digest, check, check_answer, skip  # noqa: E402
from .device import describe, has_gpu, jax_backend, profile, sized, torch_device  # noqa: E402
from .timing import Benchmark, Timings, synchronize, time_together  # noqa: E402
from .units import fmt_bytes, fmt_ratio, fmt_timed  # noqa: E402

_LAZY = {
    "checkpointing": ("best_segment", "count_ops", "count_torch_ops", "held_bytes",
                      "saved_residuals", "segment_peak"),
    "planner": ("FitPlan", "RUNGS", "plan_fit"),
    "memory_torch": ("CATEGORIES", "MemoryReport", "MemoryTrace", "MemoryTracker", "Workload",
                     "measure_memory", "predict_memory"),
    "memory_jax": ("MemoryPlan", "device_memory", "live_bytes_by", "plan_memory", "plan_of",
                   "shapes_of", "tree_bytes"),
    "plotting": ("bars2", "memory_timeline", "plot", "stacked", "stacked_bars"),
    "precision": ("FORMATS", "FloatFormat", "SavedTensor", "bytes_by_kind", "copies_made",
                  "dispatched_ops", "dot_operand_dtypes", "first_below", "float_format", "op_dtypes",
                  "saved_for_backward"),
    "gpt": ("GPTConfig", "gpt_param_count", "synthetic_tokens"),
    "gpt_torch": ("Block", "MiniGPT", "make_step"),
    "gpt_jax": ("minigpt_init", "minigpt_logits", "minigpt_loss"),
}
_WHERE = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module 'helpers' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_WHERE))
