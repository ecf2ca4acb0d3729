"""Reading a compiled program's text: how often an operation is applied, what a dot multiplies, and
the order of a scheduled program's instructions (a jaxpr, lowered.as_text() or compiled.as_text() in
JAX; HLO in general). No framework is imported."""

from __future__ import annotations

import re
from dataclasses import dataclass


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


def _while_carries(hlo_text: str) -> list[tuple[str, tuple[str, ...]]]:
    """Each while loop of an HLO module's text (JAX: compiled.as_text()), in the text's order: its
    op_name (e.g. 'jit(step)/transpose(jvp())/while', a backward scan) and the array types its state
    carries from one iteration to the next, without layouts, e.g. ('s32[]', 'f32[12,4,1024,768]')."""
    loops = []
    for state, rest in re.findall(r"= \((.*?)\) while\((.*)", hlo_text):
        name = re.search(r'op_name="([^"]*)"', rest)
        loops.append((name.group(1) if name else "", tuple(re.findall(r"(\w+\[[\d,]*\])(?:\{[^}]*\})?", state))))
    return loops


@dataclass(frozen=True)
class HloInstruction:
    """One instruction of an HLO computation: its name, result shape (no layout), opcode and operands."""

    name: str
    shape: str
    opcode: str
    operands: tuple[str, ...]


def hlo_schedule(hlo_text: str) -> list[HloInstruction]:
    """The entry computation's instructions of a scheduled HLO module (JAX: compiled.as_text()), in
    the schedule's order: the sequence for which XLA planned its buffers."""
    if not re.search(r"^HloModule \S+, is_scheduled=true", hlo_text, re.M):
        raise ValueError("this HLO module has no schedule: pass a compiled program's text "
                         "(jax.jit(f).lower(...).compile().as_text()), not a lowered one")
    entry = re.search(r"^ENTRY [^\n]*\{\n(.*?)\n\}", hlo_text, re.S | re.M)
    if entry is None:
        raise ValueError("no ENTRY computation found in this HLO text")
    out = []
    for line in entry.group(1).splitlines():
        name, rest = re.match(r"\s*(?:ROOT )?%([\w.\-]+) = (.*)", line).groups()
        if rest.startswith("("):  # a tuple shape, which may hold spaces and comments: find its end
            depth = 0
            for end, ch in enumerate(rest):
                depth += {"(": 1, ")": -1}.get(ch, 0)
                if depth == 0:
                    break
            shape, rest = rest[:end + 1], rest[end + 2:]
        else:
            shape, rest = rest.split(" ", 1)
        opcode, args = re.match(r"([\w\-]+)\(([^)]*)\)", rest).groups()
        out.append(HloInstruction(name, re.sub(r"\{[^{}]*\}", "", shape), opcode,
                                  tuple(re.findall(r"%([\w.\-]+)", args))))
    return out
