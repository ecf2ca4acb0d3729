"""The device to run on and the size profile that picks experiment sizes for it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import TypeVar

_T = TypeVar("_T")
_PROFILES = ("cpu", "gpu")


def profile() -> str:
    """The size profile: $COURSE_PROFILE if set, else 'gpu' when a GPU is visible, else 'cpu'."""
    chosen = os.environ.get("COURSE_PROFILE", "").strip().lower()
    if chosen:
        if chosen not in _PROFILES:
            raise ValueError(
                f"COURSE_PROFILE={os.environ['COURSE_PROFILE']!r} is not a size profile; "
                f"set it to one of {', '.join(_PROFILES)} or unset it to choose from the device"
            )
        return chosen
    return "gpu" if _has_gpu() else "cpu"


def _has_gpu() -> bool:
    """Whether the framework already imported (torch first, then jax) sees a GPU; before either is
    imported, whether the NVIDIA driver lists a GPU that CUDA_VISIBLE_DEVICES leaves visible (so a
    cell that picks sizes before importing a framework gets the same answer as one after)."""
    if "torch" in sys.modules:
        import torch

        return torch.cuda.is_available()
    if "jax" in sys.modules:
        import jax

        return jax.default_backend() == "gpu"
    return _driver_lists_gpu()


def _driver_lists_gpu() -> bool:
    """Whether the NVIDIA driver reports a GPU that CUDA_VISIBLE_DEVICES does not hide."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    gpus = "/proc/driver/nvidia/gpus"
    if os.path.isdir(gpus):
        return bool(os.listdir(gpus))
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return listed.returncode == 0 and "GPU" in listed.stdout


def sized(*, cpu: _T, gpu: _T) -> _T:
    """Pick the experiment size for the current profile, e.g. sized(cpu=2048, gpu=16384)."""
    return cpu if profile() == "cpu" else gpu


def torch_device():
    """The torch device to use: CUDA when available, else the CPU."""
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def describe() -> str:
    """One line saying which device and profile this run uses (printed by every notebook)."""
    where = []
    if "torch" in sys.modules:
        dev = torch_device()
        if dev.type == "cuda":
            import torch

            where.append(f"torch on {torch.cuda.get_device_name(dev)}")
        else:
            where.append("torch on cpu")
    if "jax" in sys.modules:
        import jax

        where.append(f"jax on {jax.default_backend()}")
    return f"{', '.join(where) or 'no framework imported'}; size profile {profile()!r}"


def _device_label() -> str:
    """A short name for the device this run measures on, for figure titles: the GPU's name, or
    'CPU, N cores, ISA' with the vector ISA the kernels may use (ATEN_CPU_CAPABILITY and
    XLA_FLAGS=--xla_cpu_max_isa caps included)."""
    if "torch" in sys.modules and torch_device().type == "cuda":
        import torch

        return torch.cuda.get_device_name(torch_device())
    if "jax" in sys.modules:
        import jax

        if jax.default_backend() == "gpu":
            return jax.devices()[0].device_kind
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"CPU, {cores} core{'s' if cores != 1 else ''}{_cpu_isa()}"


def _cpu_info() -> tuple[str, frozenset[str]]:
    """The CPU's model name and instruction-set flags, from /proc/cpuinfo (Linux); elsewhere the
    platform's processor name and no flags, for describe()."""
    import platform
    model, flags = "", frozenset()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and not model:
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = frozenset(value.split())
                if model and flags:
                    break
    except OSError:
        pass
    return model or platform.processor() or platform.machine(), flags


def _cpu_isa() -> str:
    """', AVX-512' / ', AVX2' / '' : the widest x86 vector ISA the CPU has and no cap forbids."""
    flags = _cpu_info()[1]
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else ""
    caps = os.environ.get("ATEN_CPU_CAPABILITY", "") + " " + os.environ.get("XLA_FLAGS", "")
    if isa == "AVX-512" and "avx2" in caps.lower() and "avx512" not in caps.lower():
        isa = "AVX2"
    return f", {isa}" if isa else ""
