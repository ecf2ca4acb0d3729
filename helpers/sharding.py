"""Sharding arithmetic: the per-device bytes of each ZeRO stage, the bytes each stage's algorithm
communicates per step, and the smallest number of devices (and the lowest stage) at which a training
step's model states and activations fit.

Stage 0 is plain data parallelism (every device holds a full replica); stage 1 shards the optimizer
state over the N devices, stage 2 the gradients too, stage 3 (FSDP) the parameters too (Rajbhandari
et al. 2020). Shards are counted exactly: a tensor of n elements split over N devices puts
ceil(n / N) elements on the largest shard, so pass sizes (or leave the default even split) as the
framework splits them. These are model states only: a step's working buffers (activations' scratch,
the optimizer's temporaries, stage 3's gathered layer) come on top. No framework is imported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._validate import positive
from .checks import _note_call
from .units import fmt_bytes

STAGES = (0, 1, 2, 3)
# bytes per parameter of (weights the passes read, gradients, optimizer state) with Adam:
# fp32: 4 + 4 + 8 = 16P. mixed: the course's autocast convention (lesson 02), 18P: a bf16 copy of the
# weights for the passes, fp32 gradients, and fp32 master weights + two moments as optimizer state.
# mixed16: the ZeRO paper's convention, 16P: 16-bit weights and gradients, 12 bytes of fp32 state.
PRECISIONS = {"fp32": (4, 4, 8), "mixed": (2, 4, 12), "mixed16": (2, 2, 12)}


@dataclass(frozen=True)
class DeviceBytes:
    """Per-device bytes of the persistent training state under one ZeRO stage."""

    parameters: int
    gradients: int
    optimizer: int

    @property
    def total(self) -> int:
        """Parameters + gradients + optimizer state on one device."""
        return self.parameters + self.gradients + self.optimizer

    def __str__(self) -> str:
        return (f"{fmt_bytes(self.total)} = {fmt_bytes(self.parameters)} params + "
                f"{fmt_bytes(self.gradients)} grads + {fmt_bytes(self.optimizer)} optimizer state")


def _check(n_params: int, n_devices: int, stage: int, precision: str) -> None:
    positive("n_params", n_params, "pass the model's parameter count", whole=True)
    positive("n_devices", n_devices, "pass the number of devices the step is sharded over", whole=True)
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES} (0: data parallel, 1: optimizer state sharded, "
                         f"2: and gradients, 3: and parameters), got {stage!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; use one of {', '.join(PRECISIONS)}")


def _shard(n: int, n_devices: int) -> int:
    return -(-n // n_devices)  # the largest shard: ceil(n / N) elements


def zero_bytes(n_params: int, n_devices: int, stage: int, precision: str = "fp32") -> DeviceBytes:
    """Per-device bytes of parameters, gradients and Adam state at a ZeRO stage (0 to 3) on
    `n_devices`, with the bytes per parameter of `precision` (PRECISIONS); the largest shard when
    the devices do not divide the parameters evenly."""
    _note_call("zero_bytes")  # a call before any watch counts in the first
    _check(n_params, n_devices, stage, precision)
    w, g, s = PRECISIONS[precision]
    shard = _shard(int(n_params), int(n_devices))
    return DeviceBytes(w * (shard if stage >= 3 else n_params), g * (shard if stage >= 2 else n_params),
                       s * (shard if stage >= 1 else n_params))


def sharded_bytes(sizes: list[int], n_devices: int, stage: int, precision: str = "fp32") -> DeviceBytes:
    """zero_bytes for a model given as its tensors' element counts, each tensor split on its own
    (as NamedSharding and FSDP2 split every parameter along its first axis)."""
    _note_call("sharded_bytes")  # a call before any watch counts in the first
    if not sizes:
        raise ValueError("sizes is empty: pass the element count of every parameter tensor")
    parts = [zero_bytes(int(n), n_devices, stage, precision) for n in sizes]
    return DeviceBytes(*(sum(getattr(p, f) for p in parts) for f in ("parameters", "gradients", "optimizer")))


def communication_bytes(n_params: int, n_devices: int, stage: int, dtype_bytes: int = 4) -> int:
    """Bytes one device sends per step under the ZeRO paper's algorithm with ring collectives, in
    rounds of (N-1)/N of the gradients: 2 at stage 0 (an all-reduce: a reduce-scatter, then an
    all-gather), 2 at stages 1 and 2 (a reduce-scatter of the gradients, then an all-gather of the
    updated parameters), 3 at stage 3 (the parameters are gathered again for backward). An engine
    may send more (PyTorch's ZeroRedundancyOptimizer keeps DDP's all-reduce and adds a broadcast)."""
    _note_call("communication_bytes")  # a call before any watch counts in the first
    _check(n_params, n_devices, stage, "fp32")
    positive("dtype_bytes", dtype_bytes, "pass the bytes of one communicated element (4 for fp32)", whole=True)
    rounds = 3 if stage == 3 else 2
    return rounds * (int(n_devices) - 1) * _shard(int(n_params), int(n_devices)) * int(dtype_bytes)


@dataclass(frozen=True)
class ShardingFit:
    """The fewest devices and the lowest stage at which a step's estimate (the stage's model states plus
    the step's other bytes as given: a closed form leaves working buffers out, a trace keeps them) fits one device."""

    n_devices: int
    stage: int
    estimate: int
    device_bytes: int

    @property
    def fits(self) -> bool:
        """Whether the estimate fits the device."""
        return self.estimate <= self.device_bytes

    def __str__(self) -> str:
        if not self.fits:
            return f"does not fit {fmt_bytes(self.device_bytes)} even on {self.n_devices} devices at stage 3"
        return (f"{self.n_devices} device{'s' if self.n_devices > 1 else ''} at ZeRO stage {self.stage}: "
                f"estimated {fmt_bytes(self.estimate)} per device of {fmt_bytes(self.device_bytes)}")


@dataclass(frozen=True)
class StepBytes:
    """A step's peak in one setting as constant + micro-batch x per_sequence bytes, from a trace, a plan or
    a measurement (helpers.estimate.Fit has the same two fields and serves as well)."""

    constant: int       # bytes that do not grow with the micro-batch: model states, cast copies, the rest
    per_sequence: int   # bytes each sequence (example) of the micro-batch adds to the peak

    def __post_init__(self) -> None:
        if self.constant < 0 or self.per_sequence <= 0:
            raise ValueError(f"StepBytes needs constant >= 0 and per_sequence > 0, got {self.constant!r} and "
                             f"{self.per_sequence!r}: pass a step's bytes that do not grow with the micro-batch "
                             "and those one sequence adds")

    def predict(self, micro_batch: int) -> int:
        """The peak at a micro-batch of micro_batch sequences."""
        return int(self.constant + micro_batch * self.per_sequence)

    @classmethod
    def through(cls, first: tuple[int, int], second: tuple[int, int]) -> StepBytes:
        """The line through two (micro-batch, peak) pairs, each peak measured, traced or planned; the
        per-sequence bytes rounded down to whole bytes."""
        (b1, p1), (b2, p2) = sorted((first, second))
        if b1 == b2 or b1 <= 0:
            raise ValueError(f"StepBytes.through needs two different positive micro-batches, got {b1} and {b2}")
        per = (p2 - p1) // (b2 - b1)
        return cls(int(p1 - b1 * per), int(per))


def smallest_fit(n_params: int, device_bytes: int, step: StepBytes | None = None, batch: int = 1, *,
                 precision: str = "fp32", max_devices: int = 1024) -> ShardingFit:
    """The smallest N (then the lowest stage) at which a step fits device_bytes: the model states of
    its ZeRO stage (zero_bytes), the rest of step.constant (whatever in it is not the unsharded model
    states, taken as 0 if step.constant is smaller), and step.per_sequence x ceil(batch / N), since
    data parallelism divides the batch over the N devices. step is the model's own bytes per sequence
    in the setting of precision (a trace's or plan's, helpers.estimate.Fit, or a StepBytes); None
    counts the model states alone. Of the stages that fit one N, the lowest: stages 1 and 2 send the
    same bytes per step, but under accumulation stage 2, which keeps only a shard of the gradients,
    must reduce-scatter every micro-batch's."""
    _note_call("smallest_fit")  # a call before any watch counts in the first
    positive("device_bytes", device_bytes, "pass the memory of one device in bytes")
    positive("max_devices", max_devices, "pass the most devices to consider", whole=True)
    positive("batch", batch, "pass the sequences (examples) of the batch the devices divide", whole=True)
    per = 0 if step is None else int(step.per_sequence)
    if step is not None and (step.constant < 0 or per <= 0):
        raise ValueError("step must have constant >= 0 and per_sequence > 0: they are byte counts (hp.StepBytes)")
    other = 0 if step is None else max(0, int(step.constant) - zero_bytes(n_params, 1, 0, precision).total)

    def estimate(n: int, stage: int) -> int:
        return zero_bytes(n_params, n, stage, precision).total + other + per * _shard(int(batch), n)

    for n in range(1, int(max_devices) + 1):
        for stage in STAGES if n > 1 else (0,):
            if estimate(n, stage) <= device_bytes:
                return ShardingFit(n, stage, estimate(n, stage), int(device_bytes))
    n = int(max_devices)
    return ShardingFit(n, 3, estimate(n, 3), int(device_bytes))


_DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "f16": 2, "bf16": 2, "s16": 2, "u16": 2, "f32": 4, "s32": 4,
                "u32": 4, "f64": 8, "s64": 8, "u64": 8}
_KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
_COLLECTIVE = re.compile(r"=\s+(\((?:[^()]|\([^()]*\))*\)|\w+\[[\d,]*\](?:\{[^}]*\})?)\s+(" + "|".join(_KINDS) + r")(-start)?\(")


@dataclass(frozen=True)
class Collectives:
    """The collectives of one kind in a compiled program: how many, the bytes of their results
    (payload), and the bytes one device sends for them with ring algorithms."""

    count: int
    payload: int
    sent: int


def collective_bytes(hlo_text: str, n_devices: int) -> dict[str, Collectives]:
    """Count a compiled HLO module's collectives by kind (all-reduce, all-gather, reduce-scatter,
    all-to-all, collective-permute), with their payload bytes and the bytes one of n_devices sends
    with ring algorithms: 2(N-1)/N of an all-reduce, (N-1)/N of an all-gather's result or an
    all-to-all, (N-1) times a reduce-scatter's result shard."""
    positive("n_devices", n_devices, "pass the number of devices the program runs on", whole=True)
    n = int(n_devices)
    found = {k: [0, 0] for k in _KINDS}
    for shapes, kind, start in _COLLECTIVE.findall(hlo_text):
        sizes = []
        for dtype, dims in re.findall(r"(\w+)\[([\d,]*)\]", shapes):
            if dtype not in _DTYPE_BYTES:
                raise ValueError(f"unknown element type {dtype!r} in a {kind}: add it to _DTYPE_BYTES")
            count = 1
            for d in filter(None, dims.split(",")):
                count *= int(d)
            sizes.append(count * _DTYPE_BYTES[dtype])
        if start and kind == "all-gather":  # async form: (operands, results); keep the results
            sizes = sizes[len(sizes) // 2:]
        found[kind][0] += 1
        found[kind][1] += sum(sizes)
    share = {"all-reduce": 2 * (n - 1) / n, "all-gather": (n - 1) / n, "reduce-scatter": n - 1,
             "all-to-all": (n - 1) / n, "collective-permute": 1}
    return {k: Collectives(c, b, round(b * share[k])) for k, (c, b) in found.items()}
