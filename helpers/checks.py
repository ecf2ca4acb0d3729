"""Assert the lessons: every claim a notebook makes in prose is checked where it is made."""

from __future__ import annotations

import sys


class ClaimFailed(AssertionError):
    """A claim of the course does not hold on this device."""


def _truth(name: str, condition: object) -> bool:
    """The Python bool of a bool, a numpy bool, or a 0-d boolean numpy/torch/JAX array; else TypeError."""
    if isinstance(condition, bool):
        return condition
    # Only look at frameworks the caller already imported: checking a claim never imports torch or JAX.
    np, torch, jax = (sys.modules.get(m) for m in ("numpy", "torch", "jax"))
    if np is not None and isinstance(condition, np.bool_):  # numpy 2 names this type `bool`
        return bool(condition)
    if np is not None and isinstance(condition, np.ndarray):
        is_bool, shape = condition.dtype == np.bool_, condition.shape
    elif torch is not None and isinstance(condition, torch.Tensor):
        is_bool, shape = condition.dtype == torch.bool, tuple(condition.shape)
    elif jax is not None and isinstance(condition, jax.Array):
        is_bool, shape = condition.dtype == bool, condition.shape
    else:
        is_bool, shape = False, None
    if is_bool and shape == ():
        return bool(condition)
    what = type(condition).__name__
    if shape is not None:
        what += f" of dtype {condition.dtype} and shape {shape}"  # type: ignore[attr-defined]
    raise TypeError(
        f"check({name!r}) needs a bool condition, got {what}; "
        "compare explicitly (e.g. `a < b`) instead of passing a number or tensor"
        + (", and reduce an array to one bool first (e.g. `(a < b).all()`)" if shape not in (None, ()) else "")
    )


def check(name: str, condition: bool, detail: str = "") -> None:
    """Raise ClaimFailed(name: detail) if condition is false, else print one 'check passed' line."""
    if not _truth(name, condition):
        raise ClaimFailed(f"claim does not hold on this device: {name}" + (f" ({detail})" if detail else ""))
    print(f"check passed: {name}" + (f" ({detail})" if detail else ""))


def skip(name: str, why: str) -> None:
    """Say that a claim cannot be checked on this device, and why (never silently)."""
    if not why:
        raise ValueError(f"skip({name!r}) needs a reason: say why the claim cannot be checked here")
    print(f"check skipped: {name} ({why})")
