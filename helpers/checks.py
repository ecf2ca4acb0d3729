"""Assert the lessons: every claim a notebook makes in prose is checked where it is made."""

from __future__ import annotations


class ClaimFailed(AssertionError):
    """A claim of the course does not hold on this device."""


def check(name: str, condition: bool, detail: str = "") -> None:
    """Raise ClaimFailed(name: detail) if condition is false, else print one 'check passed' line."""
    if not isinstance(condition, bool) and type(condition).__name__ != "bool_":
        raise TypeError(
            f"check({name!r}) needs a bool condition, got {type(condition).__name__}; "
            "compare explicitly (e.g. `a < b`) instead of passing a number or tensor"
        )
    if not condition:
        raise ClaimFailed(f"claim does not hold on this device: {name}" + (f" ({detail})" if detail else ""))
    print(f"check passed: {name}" + (f" ({detail})" if detail else ""))


def skip(name: str, why: str) -> None:
    """Say that a claim cannot be checked on this device, and why (never silently)."""
    if not why:
        raise ValueError(f"skip({name!r}) needs a reason: say why the claim cannot be checked here")
    print(f"check skipped: {name} ({why})")
