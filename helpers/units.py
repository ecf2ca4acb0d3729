"""One place that formats every figure a notebook prints.

Byte counts are deterministic on a CPU and are printed plainly, so strict nbval compares them.
Figures that depend on the machine (timings, ratios of timings, losses after low-precision
training) are printed with a leading '~'; tests/nbval_sanitize.cfg masks exactly those.
"""

from __future__ import annotations

_MB = 1_000_000


def fmt_bytes(n: float) -> str:
    """Bytes in decimal units, e.g. '402.8 MB', or '27.94 GB' from 10 GB on (exact figures)."""
    if abs(n) >= 10_000 * _MB:
        return f"{n / (1000 * _MB):.2f} GB"
    return f"{n / _MB:.1f} MB"


def fmt_ratio(x: float) -> str:
    """A ratio of exact figures, e.g. '1.09x'."""
    return f"{x:.2f}x"


def fmt_timed(x: float, unit: str = "") -> str:
    """A machine-dependent figure, e.g. '~12.3 ms'; the '~' marks it for masking by nbval."""
    sep = " " if unit and unit[0].isalpha() else ""
    number = f"{x:.0f}" if 1000 <= abs(x) < 1e15 else f"{x:.3g}"  # 1234, not 1.23e+03
    return f"~{number}{sep}{unit}"
