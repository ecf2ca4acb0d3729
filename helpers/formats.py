"""Floating-point formats from their bit layout.

The figures are derived from the exponent and mantissa widths alone, so a notebook can compare
them with torch.finfo / jnp.finfo and extend them to tf32, which is a compute mode and has no
dtype. No framework is imported.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FloatFormat:
    """An IEEE-style binary format: 1 sign bit, `exponent_bits`, `mantissa_bits` (stored)."""

    name: str
    exponent_bits: int
    mantissa_bits: int

    @property
    def bits(self) -> int:
        """Bits that carry information (tf32 uses 19 of the 32 it is stored in)."""
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def bias(self) -> int:
        return 2 ** (self.exponent_bits - 1) - 1

    @property
    def smallest_normal(self) -> float:
        return 2.0 ** (1 - self.bias)

    @property
    def smallest_subnormal(self) -> float:
        return 2.0 ** (1 - self.bias - self.mantissa_bits)

    @property
    def max(self) -> float:
        return (2.0 - 2.0 ** -self.mantissa_bits) * 2.0 ** self.bias

    @property
    def eps(self) -> float:
        """Gap between 1 and the next representable number (relative spacing near 1)."""
        return 2.0 ** -self.mantissa_bits

    def __str__(self) -> str:
        return (f"{self.name:<5} 1+{self.exponent_bits}+{self.mantissa_bits:<2} bits  "
                f"normal >= {self.smallest_normal:.3g}  max {self.max:.4g}  eps {self.eps:.3g}")


FORMATS = {f.name: f for f in (FloatFormat("fp32", 8, 23), FloatFormat("tf32", 8, 10),
                               FloatFormat("bf16", 8, 7), FloatFormat("fp16", 5, 10))}


def float_format(name: str) -> FloatFormat:
    """The FloatFormat called `name` (fp32, tf32, bf16 or fp16)."""
    if name not in FORMATS:
        raise ValueError(f"unknown format {name!r}; use one of {', '.join(FORMATS)}")
    return FORMATS[name]
