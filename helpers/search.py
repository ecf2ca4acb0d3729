"""A search for where a measured difference changes sign (e.g. the batch size at which bf16's peak
drops below fp32's), in few evaluations of an expensive function."""

from __future__ import annotations

from typing import Callable


def first_below(diff: Callable[[int], float], lo: int, hi: int) -> int:
    """The smallest integer b in (lo, hi] with diff(b) < 0, given diff(lo) >= 0 > diff(hi) and
    diff changing sign once (e.g. bf16 peak minus fp32 peak against the batch size). Each round
    evaluates diff at a pair of neighbours b, b+1 and steps to where the local slope reaches
    zero (Newton), so a piecewise-linear diff is solved in a few rounds; after three rounds
    that do not halve the interval, or a step outside it, comes a bisection."""
    dlo, dhi = diff(lo), diff(hi)
    if not (dlo >= 0 > dhi):
        raise ValueError(f"diff must be >= 0 at lo={lo} and < 0 at hi={hi}, got {dlo} and {dhi}")
    g = lo + int((hi - lo) * dlo / (dlo - dhi))  # where the secant crosses zero
    slow = 0  # rounds in a row that did not halve the interval
    while True:
        width = hi - lo
        g = min(max(g, lo), hi - 1)
        d0 = dlo if g == lo else diff(g)
        d1 = dhi if g + 1 == hi else diff(g + 1)
        if d0 >= 0 > d1:
            return g + 1
        if d1 >= 0:
            lo, dlo = g + 1, d1
        else:
            hi, dhi = g, d0
        slow = slow + 1 if 2 * (hi - lo) > width else 0
        slope = d1 - d0
        step = g - d0 / slope if slope < 0 else None
        if step is None or not lo <= step < hi or slow >= 3:
            g, slow = (lo + hi) // 2, 0
        else:
            g = int(step)
