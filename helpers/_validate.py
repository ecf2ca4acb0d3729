"""Argument checks shared by the helpers (private: notebooks never call these)."""

from __future__ import annotations

import numbers


def positive(name: str, value: object, hint: str, *, whole: bool = False) -> None:
    """Raise ValueError unless value is a positive number (a positive integer if whole), saying
    what was passed and what to pass instead (hint)."""
    kind = numbers.Integral if whole else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind) or not value > 0:  # `not >` rejects NaN
        raise ValueError(f"{name} must be a positive {'whole number' if whole else 'number'}, "
                         f"got {value!r}: {hint}")
