"""Walk the ladder of memory interventions and say which ones a training step needs to fit a device,
from the analytic estimates of helpers.anatomy.

The ladder's order (a fixed one: lesson 04 measures the rungs on one MLP and finds no order that
holds for every model):

1. accumulate: the same FLOPs and, with the loss scaled by 1/k, the same gradient; it divides the
   activations by k, down to the smallest micro-batch the hardware still runs well (min_micro_batch);
2. checkpoint: most activations, for at most one extra forward pass;
3. bf16: only if it lowers the estimate (it adds a 16-bit weight copy, 2P, and shrinks activations
   by a factor that a CPU backend may not deliver: pass the measured one). Which of rungs 2 and 3
   cuts more depends on the bytes the forward pass keeps for backward and on the scratch the
   backward pass holds at the peak (lesson 04: on its MLP checkpointing's recomputed layer and fp32
   activation gradients left bf16 lower in PyTorch; in XLA:CPU's plan checkpointing kept far fewer
   bytes and came out lower); this planner takes them in this fixed order, the exact rung before
   the rounding one;
4. add devices: the persistent state itself, when nothing on one device is enough: the fewest
   devices and the lowest ZeRO stage at which the step fits (helpers.sharding, lesson 06).

The estimate of a step's peak is persistent state + activations: persistent_bytes() for the
parameters, gradients and optimizer state, and the activations of one micro-batch. Compiling is left
out: it buys time, not a predictable number of bytes; bf16 on tensor cores is taken for speed, which
is not this ladder's question.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ._validate import positive
from .anatomy import persistent_bytes
from .sharding import smallest_fit
from .units import fmt_bytes

RUNGS = ("accumulate", "checkpoint", "bf16", "add devices")


@dataclass(frozen=True)
class InterventionPlan:
    """What the ladder chose: the interventions in ladder order, the micro-batch and the estimated peak."""

    rungs: tuple[str, ...]
    micro_batch: int
    accumulation: int
    estimate: int
    device_bytes: int
    usable_bytes: int
    devices: int = 1              # the "add devices" rung: how many (helpers.sharding.smallest_fit) ...
    zero_stage: int | None = None  # ... and the lowest ZeRO stage at which the step then fits

    @property
    def fits(self) -> bool:
        """Whether the estimated peak fits the usable part of one device."""
        return self.estimate <= self.usable_bytes

    def __str__(self) -> str:
        steps = " -> ".join(self.rungs) if self.rungs else "nothing to change"
        usable = "" if self.usable_bytes == self.device_bytes else f" ({fmt_bytes(self.usable_bytes)} usable)"
        return (f"{steps}: micro-batch {self.micro_batch} x {self.accumulation}, estimated peak "
                f"{fmt_bytes(self.estimate)} of {fmt_bytes(self.device_bytes)}{usable}"
                + ("" if self.fits else " (does not fit one device)"))


def _check_factor(name: str, value: float | None) -> None:
    if value is not None:
        positive(name, value, "it is the activation bytes after the intervention divided by those "
                 "before (a measured factor may exceed 1)")


def _add_devices(best: InterventionPlan, n_params: int, acts: float, optimizer: str,
                 fixed_bytes: float) -> InterventionPlan:
    """The last rung: one device is not enough. The fewest devices, then the lowest ZeRO stage, at
    which the persistent state plus the activations of a micro-batch divided over the devices fit
    (helpers.sharding.smallest_fit, lesson 06); Adam-family optimizers only, else the rung is named
    without a count."""
    named = replace(best, rungs=best.rungs + ("add devices",))
    if optimizer not in ("adam", "adamw"):
        return named
    fit = smallest_fit(n_params, best.usable_bytes, int(acts / best.accumulation), fixed_bytes=int(fixed_bytes),
                       precision="mixed" if "bf16" in best.rungs else "fp32")
    return replace(named, devices=fit.n_devices, zero_stage=fit.stage) if fit.fits else named


def choose_interventions(n_params: int, batch: int, activation_bytes_per_example: float, device_bytes: int, *,
             optimizer: str = "adam", bf16_activation_factor: float = 0.5,
             checkpoint_activation_factor: float | None = None, max_accumulation: int = 64,
             min_micro_batch: int = 1, fixed_bytes: int = 0, headroom: float = 0.0) -> InterventionPlan:
    """Climb the ladder until the estimated peak fits device_bytes: accumulation (the smallest
    power-of-two k that divides the batch and leaves at least min_micro_batch examples), then
    checkpointing (if a factor below 1 is given), then bf16 (only if it lowers the estimate), each
    with the smallest k that then fits, and finally 'add devices'.
    fixed_bytes stay resident whatever the ladder does (e.g. a full data batch kept on device);
    headroom is the share of device_bytes kept free for what the estimate leaves out (scratch of the
    backward pass, allocator rounding)."""
    positive("n_params", n_params, "pass the model's parameter count")
    positive("batch", batch, "pass the number of examples per optimizer step", whole=True)
    positive("activation_bytes_per_example", activation_bytes_per_example,
             "pass the activation bytes one example keeps for backward (e.g. from hp.gpt_activation_bytes)")
    positive("device_bytes", device_bytes, "pass the memory of one device in bytes")
    positive("max_accumulation", max_accumulation, "pass the most micro-batches per step to consider",
             whole=True)
    positive("min_micro_batch", min_micro_batch, "pass the fewest examples per micro-batch that the "
             "hardware still runs well (1 allows any)", whole=True)
    batch, max_accumulation, min_micro_batch = int(batch), int(max_accumulation), int(min_micro_batch)
    if not 0 <= headroom < 1:
        raise ValueError(f"headroom must lie in [0, 1), got {headroom!r}: it is the share of memory kept free")
    if fixed_bytes < 0:
        raise ValueError(f"fixed_bytes must not be negative, got {fixed_bytes!r}")
    _check_factor("bf16_activation_factor", bf16_activation_factor)
    _check_factor("checkpoint_activation_factor", checkpoint_activation_factor)
    # the accumulation counts allowed: powers of two that divide the batch, within both limits
    ks = [k for k in (2 ** i for i in range(max_accumulation.bit_length()))
          if k <= max_accumulation and batch % k == 0 and batch // k >= min(min_micro_batch, batch)]

    def plan(extras: tuple[str, ...], state: float, acts: float, k: int) -> InterventionPlan:
        rungs = (("accumulate",) if k > 1 else ()) + extras
        return InterventionPlan(rungs, batch // k, k, int(state + acts / k), int(device_bytes),
                       int(device_bytes * (1 - headroom)))

    state = persistent_bytes(n_params, optimizer, "fp32") + fixed_bytes
    acts = batch * activation_bytes_per_example
    levels = [((), state, acts)]                                   # rung 1: accumulation alone
    if checkpoint_activation_factor is not None and checkpoint_activation_factor < 1:
        acts *= checkpoint_activation_factor                       # rung 2: + checkpointing
        levels.append((("checkpoint",), state, acts))
    mixed_state = persistent_bytes(n_params, optimizer, "mixed") + fixed_bytes
    if mixed_state + acts * bf16_activation_factor / ks[-1] < state + acts / ks[-1]:
        levels.append((levels[-1][0] + ("bf16",), mixed_state, acts * bf16_activation_factor))   # rung 3
    for extras, s, a in levels:
        for k in ks:
            if plan(extras, s, a, k).fits:
                return plan(extras, s, a, k)
    extras, s, a = levels[-1]
    return _add_devices(plan(extras, s, a, ks[-1]), n_params, a, optimizer, fixed_bytes)  # rung 4
