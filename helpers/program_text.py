"""Reading a compiled program's text: how often an operation is applied, and what a dot multiplies
(a jaxpr, lowered.as_text() or compiled.as_text() in JAX; HLO in general). No framework is imported."""

from __future__ import annotations

import re


def count_ops(text: str, op: str) -> int:
    """How many times the operation `op` (e.g. 'stablehlo.dot_general', 'opt-barrier',
    'dot_general') is applied in a program's text: a jaxpr, lowered.as_text() or
    compiled.as_text()."""
    if not op:
        raise ValueError("op is empty: name the operation to count")
    # An application is the name followed by '(' (HLO), '[' (jaxpr) or a space (StableHLO).
    return len(re.findall(rf"(?<![\w.%-]){re.escape(op)}(?=[\s(\[])", text))


def dot_operand_dtypes(hlo_text: str) -> dict[tuple[str, ...], int]:
    """Count the dot instructions of an HLO module's text by their operand types, e.g.
    {('bf16', 'bf16'): 3}: what the compiler really multiplies (JAX: lowered.as_text('hlo')
    before optimization, compiled.as_text() after)."""
    types = dict(re.findall(r"%?([\w.\-]+) = (\w+)\[", hlo_text))
    counts: dict[tuple[str, ...], int] = {}
    for args in re.findall(r" dot\(([^)]*)\)", hlo_text):
        key = tuple(types.get(a.strip().lstrip("%"), "?") for a in args.split(","))
        counts[key] = counts.get(key, 0) + 1
    return counts
