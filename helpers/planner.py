"""Walk the ladder of memory interventions and say which ones a training step needs to fit a device,
from the model's own bytes in each setting.

The planner takes, per setting, the step's peak as constant + micro-batch x per-sequence bytes
(hp.StepBytes, or helpers.estimate.Fit from a trace): "fp32", "fp32+ckpt", "bf16", "bf16+ckpt". A
rung is judged on its own setting's bytes only, never on another's times a factor: bf16 halves
neither the fp32 logits nor the backward's logits-sized gradients, and checkpointing removes the
blocks' activations, not the logits, so only the model's own bytes say what a rung leaves. The
ladder's order (a fixed one: lesson 04 measures the rungs on one MLP and finds no order that holds for
every model):

1. accumulate ("fp32"): the same FLOPs and, with the loss scaled by 1/k, the same gradient; the
   smallest power-of-two k dividing the batch that fits, down to min_micro_batch;
2. checkpoint ("fp32+ckpt"): for at most one extra forward pass;
3. bf16 on top ("bf16+ckpt", or "bf16" where no checkpointed setting is given);
4. add devices: the fewest devices and the lowest ZeRO stage at which the last setting's step fits
   (helpers.sharding.smallest_fit, lesson 06), Adam-family optimizers only.

A setting not given is skipped. With peak (a function setting, micro-batch -> the traced or measured
peak), the line is only the first guess: a rung is called a fit only when the peak at its micro-batch
fits and the peak at the largest fitting micro-batch + 1 does not (helpers.estimate.plan_from_traces).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Mapping, Protocol

from ._validate import positive
from .checks import _note_call
from .sharding import StepBytes, smallest_fit
from .units import fmt_bytes

RUNGS = ("accumulate", "checkpoint", "bf16", "add devices")
SETTINGS = ("fp32", "fp32+ckpt", "bf16", "bf16+ckpt")


class PerSequence(Protocol):
    """What the planner reads of a setting: hp.StepBytes, or helpers.estimate.Fit."""

    constant: int
    per_sequence: int


@dataclass(frozen=True)
class InterventionPlan:
    """What the ladder chose: the interventions in ladder order, the setting, the micro-batch and the peak."""

    rungs: tuple[str, ...]
    micro_batch: int
    accumulation: int
    estimate: int                 # the peak at micro_batch: the setting's line, or the traced peak with peak=
    device_bytes: int
    usable_bytes: int
    setting: str = "fp32"
    largest: int = 0              # the largest micro-batch that fits in this setting ...
    next_estimate: int = 0        # ... and the peak at one more, which does not
    traced: bool = False          # whether estimate and next_estimate are peaks from peak=, not the line
    tried: tuple[str, ...] = ()   # the settings tried before, and why they did not do
    devices: int = 1              # the "add devices" rung: how many (helpers.sharding.smallest_fit) ...
    zero_stage: int | None = None  # ... and the lowest ZeRO stage at which the step then fits

    @property
    def fits(self) -> bool:
        """Whether the peak at micro_batch fits the usable part of one device."""
        return self.estimate <= self.usable_bytes

    def __str__(self) -> str:
        steps = " -> ".join(self.rungs) if self.rungs else "nothing to change"
        usable = "" if self.usable_bytes == self.device_bytes else f" ({fmt_bytes(self.usable_bytes)} usable)"
        what = "traced peak" if self.traced else "estimated peak"
        return (f"{steps} ({self.setting}): micro-batch {self.micro_batch} x {self.accumulation}, {what} "
                f"{fmt_bytes(self.estimate)} of {fmt_bytes(self.device_bytes)}{usable}"
                + ("" if self.fits else " (does not fit one device)"))


def _levels(steps: Mapping[str, PerSequence]) -> list[tuple[str, tuple[str, ...]]]:
    levels = [("fp32", ()), ("fp32+ckpt", ("checkpoint",))]
    levels.append(("bf16+ckpt", ("checkpoint", "bf16")) if "bf16+ckpt" in steps else ("bf16", ("bf16",)))
    return [(s, extras) for s, extras in levels if s in steps]


def choose_interventions(steps: Mapping[str, PerSequence], batch: int, device_bytes: int, *,
                         n_params: int | None = None, optimizer: str = "adam", max_accumulation: int = 64,
                         min_micro_batch: int = 1, headroom: float = 0.0,
                         peak: Callable[[str, int], int] | None = None) -> InterventionPlan:
    """Climb accumulate -> checkpoint -> bf16 -> add devices on each setting's own constant and
    per-sequence bytes (steps: setting name -> hp.StepBytes or helpers.estimate.Fit; the ladder climbs
    the settings given, its rungs named against an fp32 step),
    each rung with the smallest power-of-two k that divides the batch, leaves at least min_micro_batch
    sequences and fits. headroom is the share of device_bytes kept free for what the bytes given leave
    out; peak (optional) traces or measures a setting at a micro-batch, and then decides each fit."""
    _note_call("choose_interventions")  # a call before any watch counts in the first
    if not steps or set(steps) - set(SETTINGS):
        raise ValueError(f"steps must map one or more settings among {SETTINGS} to their bytes, got "
                         f"{sorted(steps)}: pass e.g. {{'fp32': hp.StepBytes(constant, per_sequence)}}")
    for name, s in steps.items():
        if s.per_sequence <= 0 or s.constant < 0:
            raise ValueError(f"steps[{name!r}] must have constant >= 0 and per_sequence > 0, got "
                             f"{s.constant!r} and {s.per_sequence!r}: a step that does not grow with the "
                             "micro-batch cannot be planned on")
    positive("batch", batch, "pass the number of sequences (examples) per optimizer step", whole=True)
    positive("device_bytes", device_bytes, "pass the memory of one device in bytes")
    positive("max_accumulation", max_accumulation, "pass the most micro-batches per step to consider", whole=True)
    positive("min_micro_batch", min_micro_batch, "pass the fewest examples per micro-batch that the "
             "hardware still runs well (1 allows any)", whole=True)
    if n_params is not None:
        positive("n_params", n_params, "pass the model's parameter count (for the add-devices rung)")
    if not 0 <= headroom < 1:
        raise ValueError(f"headroom must lie in [0, 1), got {headroom!r}: it is the share of memory kept free")
    batch, max_accumulation, min_micro_batch = int(batch), int(max_accumulation), int(min_micro_batch)
    usable = int(device_bytes * (1 - headroom))
    # the accumulation counts allowed: powers of two that divide the batch, within both limits
    ks = [k for k in (2 ** i for i in range(max_accumulation.bit_length()))
          if k <= max_accumulation and batch % k == 0 and batch // k >= min(min_micro_batch, batch)]
    tried: list[str] = []
    levels = _levels(steps)
    for setting, extras in levels:
        line = steps[setting]
        at = (lambda b, s=setting, line=line: peak(s, b)) if peak else (lambda b, line=line: int(line.constant + b * line.per_sequence))
        largest = max(0, (usable - int(line.constant)) // int(line.per_sequence))
        p_next = at(largest + 1)
        if peak:   # the line is a guess: step from it until the peaks decide
            while p_next <= usable:
                largest, p_next = largest + 1, at(largest + 2)
            p_at = at(largest) if largest >= 1 else usable + 1
            while largest >= 1 and p_at > usable:
                largest, p_next = largest - 1, p_at
                p_at = at(largest) if largest >= 1 else usable + 1
        k = next((k for k in ks if batch // k <= largest), None)
        if k is None:
            tried.append(f"{setting}: largest micro-batch {largest}, below the smallest allowed {batch // ks[-1]}")
            continue
        micro = batch // k
        rungs = (("accumulate",) if k > 1 else ()) + extras
        return InterventionPlan(rungs, micro, k, at(micro), int(device_bytes), usable, setting, largest, p_next,
                                peak is not None, tuple(tried))
    # rung 4: the lowest setting at the smallest micro-batch, on more devices
    setting, extras = min(levels, key=lambda lv: steps[lv[0]].constant + batch // ks[-1] * steps[lv[0]].per_sequence)
    line, micro = steps[setting], batch // ks[-1]
    plan = InterventionPlan((("accumulate",) if ks[-1] > 1 else ()) + extras + ("add devices",), micro, ks[-1],
                            int(line.constant + micro * line.per_sequence), int(device_bytes), usable, setting,
                            0, int(line.constant + line.per_sequence), False, tuple(tried))
    if n_params is None or optimizer not in ("adam", "adamw"):
        return plan
    fit = smallest_fit(n_params, usable, StepBytes(int(line.constant), int(line.per_sequence)), micro,
                       precision="mixed" if "bf16" in setting else "fp32")
    return replace(plan, devices=fit.n_devices, zero_stage=fit.stage) if fit.fits else plan
