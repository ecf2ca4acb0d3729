"""Walk the ladder of memory interventions (bf16, checkpoint, accumulate, add devices) and say
which ones a training step needs to fit a device, from the analytic estimates of helpers.anatomy.

The estimate of a step's peak is persistent state + activations: persistent_bytes() for the
parameters, gradients and optimizer state, and the activations of one (micro-)batch. bf16 changes
both terms (a bf16 weight copy and gradient join the state, activations shrink by a factor);
checkpointing and accumulation change only the activations. Compiling is left out: it buys time,
not a predictable number of bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ._validate import positive
from .anatomy import persistent_bytes
from .sharding import smallest_fit
from .units import fmt_bytes

RUNGS = ("bf16", "checkpoint", "accumulate", "add devices")


@dataclass(frozen=True)
class InterventionPlan:
    """What the ladder chose: the interventions in order, the micro-batch and the estimated peak."""

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


def choose_interventions(n_params: int, batch: int, activation_bytes_per_example: float, device_bytes: int, *,
             optimizer: str = "adam", bf16_activation_factor: float = 0.5,
             checkpoint_activation_factor: float | None = None, max_accumulation: int = 64,
             fixed_bytes: int = 0, headroom: float = 0.0) -> InterventionPlan:
    """Climb the ladder until the estimated peak fits device_bytes: bf16 (only if it lowers the
    estimate), checkpointing (if a factor is given), the smallest power-of-two accumulation that
    divides the batch, and finally 'add devices' when nothing on one device is enough.
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
    batch, max_accumulation = int(batch), int(max_accumulation)  # plain ints (numpy's lack bit_length)
    if not 0 <= headroom < 1:
        raise ValueError(f"headroom must lie in [0, 1), got {headroom!r}: it is the share of memory kept free")
    if fixed_bytes < 0:
        raise ValueError(f"fixed_bytes must not be negative, got {fixed_bytes!r}")
    _check_factor("bf16_activation_factor", bf16_activation_factor)
    _check_factor("checkpoint_activation_factor", checkpoint_activation_factor)
    rungs: list[str] = []
    state = persistent_bytes(n_params, optimizer, "fp32") + fixed_bytes
    acts = batch * activation_bytes_per_example

    def plan(k: int = 1) -> InterventionPlan:
        return InterventionPlan(tuple(rungs), batch // k, k, int(state + acts / k), int(device_bytes),
                       int(device_bytes * (1 - headroom)))

    if plan().fits:
        return plan()
    mixed_state = persistent_bytes(n_params, optimizer, "mixed") + fixed_bytes
    if mixed_state + acts * bf16_activation_factor < state + acts:
        rungs.append("bf16")
        state, acts = mixed_state, acts * bf16_activation_factor
        if plan().fits:
            return plan()
    if checkpoint_activation_factor is not None and checkpoint_activation_factor < 1:
        rungs.append("checkpoint")
        acts *= checkpoint_activation_factor
        if plan().fits:
            return plan()
    k = 2
    while k <= min(batch, max_accumulation):
        if batch % k == 0 and plan(k).fits:
            rungs.append("accumulate")
            return plan(k)
        k *= 2
    largest = max(k for k in (2 ** i for i in range(max_accumulation.bit_length()))
                  if k <= min(batch, max_accumulation) and batch % k == 0)
    if largest > 1:
        rungs.append("accumulate")
    rungs.append("add devices")
    # the rung made real: the fewest devices, then the lowest ZeRO stage, at which state + activations / N fit
    fit = smallest_fit(n_params, int(device_bytes * (1 - headroom)), int(acts / largest), fixed_bytes=int(fixed_bytes),
                       precision="mixed" if "bf16" in rungs else "fp32") if optimizer in ("adam", "adamw") else None
    return replace(plan(largest), devices=fit.n_devices if fit and fit.fits else 1,
                   zero_stage=fit.stage if fit and fit.fits else None)
