"""Small plotting helpers in the d2l spirit. Every helper draws into a fresh figure (or the axes
given) and returns the axes; the notebook cell ends with plt.show(), so no object repr leaks."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Sequence

import matplotlib.pyplot as plt
from matplotlib.ticker import NullLocator

from .timing import Timings

_COLORS = {"parameters": "#4c72b0", "gradients": "#dd8452", "optimizer state": "#55a868",
           "inputs": "#222222", "cast copies": "#64b5cd", "activations": "#c44e52",
           "recomputed": "#da8bc3", "temporaries": "#8172b3", "new params and state": "#937860"}
_PHASE_COLORS = {"forward": "#f0c05a", "backward": "#6aaed6", "update": "#9e9e9e"}
# A timeline stacks what persists across steps at the bottom, so what comes and goes sits on top.
_TIMELINE_ORDER = ("parameters", "optimizer state", "inputs", "gradients", "cast copies", "activations",
                   "recomputed", "temporaries")


def plot(x: Sequence[float], ys: Sequence[Sequence[float]], xlabel: str = "", ylabel: str = "",
         legend: Sequence[str] | None = None, *, logx: bool = False, logy: bool = False,
         fmts: Sequence[str] = ("-", "m--", "g-.", "r:"), figsize: tuple[float, float] = (5.0, 3.0),
         xticks: Sequence[float] | None = None, ax: plt.Axes | None = None) -> plt.Axes:
    """Plot one or more series against x, with labels, optional legend, log axes and x ticks."""
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    for i, y in enumerate(ys):
        ax.plot(x, y, fmts[i % len(fmts)])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    if xticks is not None:
        _ticks_at(ax, xticks)
    if legend:
        ax.legend(list(legend))
    ax.grid(True, alpha=0.3)
    return ax


def _ticks_at(ax: plt.Axes, xticks: Sequence[float]) -> None:
    """Ticks at exactly these x values, labelled plainly ('4', not '4x10^0'), no minor ticks."""
    ax.set_xticks(list(xticks), [f"{t:g}" for t in xticks])
    ax.xaxis.set_minor_locator(NullLocator())


def plot_ratios(x: Sequence[float], timings: Timings, names: Sequence[str], base: str, xlabel: str, *,
                logx: bool = True, figsize: tuple[float, float] = (5.0, 3.0),
                ax: plt.Axes | None = None, quartiles: bool = False) -> plt.Axes:
    """Each name's time over base's against x: a marker at the ratio Timings.compare prints, a bar
    over the range of the per-round ratios, a line at 1 (no change), and a y axis from 0. With
    `quartiles`, the statistic of a quartile verdict instead: a marker at the median of the
    per-round ratios, a thick bar over their middle half (first to third quartile, as
    statistics.quantiles(n=4) gives them) and a thin one over their range."""
    if len(x) != len(names):
        raise ValueError(f"{len(x)} x values for {len(names)} names; give one x per timed name")
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    lo, hi = zip(*(timings.spread(n, base) for n in names))
    if quartiles:
        per_round = [[a / b for a, b in zip(timings.rounds[n], timings.rounds[base])] for n in names]
        mid = [statistics.median(r) for r in per_round]
        q1, q3 = zip(*((q[0], q[2]) for q in (statistics.quantiles(r, n=4) if len(r) > 1 else [r[0]] * 3
                                               for r in per_round)))
        ax.errorbar(list(x), mid, yerr=[[m - a for m, a in zip(mid, lo)], [b - m for m, b in zip(mid, hi)]],
                    fmt="o", capsize=4, elinewidth=1, label="per-round ratios: median, range")
        ax.vlines(list(x), q1, q3, lw=6, color="C0", alpha=0.45, zorder=1.5,
                  label="middle half (quartiles 1 to 3)")
    else:
        mid = [timings.ratio(n, base) for n in names]
        ax.errorbar(list(x), mid, yerr=[[m - a for m, a in zip(mid, lo)], [b - m for m, b in zip(mid, hi)]],
                    fmt="o", capsize=4, label="median; bar: range over the rounds")
    ax.axhline(1.0, color="k", lw=0.8, ls=":", label="no change")
    ax.set_ylim(0, 1.45 * max(max(hi), 1.0))   # room above the highest bar for the legend
    if logx:
        ax.set_xscale("log")
    _ticks_at(ax, x)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"time / time of {base}")
    ax.legend(fontsize=8, loc="upper left", ncol=1 if quartiles else 2)
    ax.grid(True, axis="y", alpha=0.3)
    return ax


@dataclass(frozen=True)
class Reference:
    """Figures quoted from elsewhere (a source text's GPU run), drawn hatched beside this run's bars.
    `left`/`right` hold one value per label of the panel, or None where the source gives none."""

    source: str
    left: Sequence[float | None] | None = None
    right: Sequence[float | None] | None = None


def measured_on(title: str, verb: str = "measured") -> str:
    """A figure title that names the device the figure was measured (or `verb`, e.g. planned) on
    (figures get copied without the prose around them)."""
    from .device import _device_label

    if not verb.strip():
        raise ValueError("verb is empty: say how the figure's data were obtained, e.g. 'measured' or 'planned'")
    return f"{title}\n{verb} on {_device_label()}"


def bars2(labels: Sequence[str], left: Sequence[float], right: Sequence[float],
          left_label: str, right_label: str, title: str = "",
          figsize: tuple[float, float] = (9.0, 3.2), *,
          reference: Reference | None = None,
          spread: Sequence[tuple[float, float]] | None = None,
          right_range: Sequence[tuple[float, float]] | None = None) -> tuple[plt.Axes, plt.Axes]:
    """Two bar panels side by side over the same labels (e.g. peak memory and step time); with a
    `reference`, its quoted figures are drawn hatched beside this run's bars and labelled; with a
    `spread`, one (low, high) per label, this run's left bars get that range as an error bar (e.g. the
    range of timing rounds), with room above the bars for the legend; with `right_range`, one (low,
    high) per label, a line over each right bar spans that range."""
    if spread is not None and (len(spread) != len(labels)
                               or not all(lo <= v <= hi for (lo, hi), v in zip(spread, left))):
        raise ValueError("spread needs one (low, high) per label, around the left value: "
                         "pass e.g. Timings.spread(name, baseline) for each label")
    if right_range is not None and len(right_range) != len(labels):
        raise ValueError(f"right_range has {len(right_range)} ranges for {len(labels)} labels; "
                         "give one (low, high) per label")
    fig, (a, b) = plt.subplots(1, 2, figsize=figsize)
    refs = (reference.left, reference.right) if reference else (None, None)
    xs = list(range(len(labels)))
    for ax, vals, ref, lab, color in ((a, left, refs[0], left_label, "#4c72b0"),
                                      (b, right, refs[1], right_label, "#dd8452")):
        if ref is not None and len(ref) != len(labels):
            raise ValueError(f"reference for {lab!r} has {len(ref)} values for {len(labels)} labels; "
                             "give one per label, None where the source has none")
        width = 0.4 if ref is not None else 0.8
        shift = width / 2 if ref is not None else 0.0
        ax.bar([x - shift for x in xs], list(vals), width=width, color=color, label="this run")
        if ax is b and right_range is not None:
            ax.vlines([x - shift for x in xs], [lo for lo, _ in right_range], [hi for _, hi in right_range],
                      color="black", lw=1.5, label="range over the rounds")
        if ref is not None:
            pairs = [(x + shift, v) for x, v in zip(xs, ref) if v is not None]
            ax.bar([x for x, _ in pairs], [v for _, v in pairs], width=width, color="white",
                   edgecolor=color, hatch="//", label=reference.source)
        if spread is not None and ax is a:
            ax.errorbar([x - shift for x in xs], list(vals), fmt="none", ecolor="k", capsize=3, lw=1,
                        yerr=[[v - lo for v, (lo, _) in zip(vals, spread)],
                              [hi - v for v, (_, hi) in zip(vals, spread)]], label="range of this run's rounds")
            top = max([hi for _, hi in spread] + [v for v in (ref or []) if v is not None])
            ax.set_ylim(0, 2 * top)  # the bars in the lower half, the legend above them
            ax.legend(fontsize=7, loc="upper left")
        elif ref is not None:
            highs = [hi for _, hi in right_range] if ax is b and right_range is not None else []
            ax.set_ylim(0, 1.3 * max([*vals, *(v for _, v in pairs), *highs]))   # the legend above the bars
            ax.legend(fontsize=7, loc="upper right", ncol=2)
        ax.set_xticks(xs, list(labels))
        ax.set_ylabel(lab)
        ax.tick_params(axis="x", rotation=20)
        ax.grid(True, axis="y", alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return a, b


def stacked(x: Sequence[float], series: dict[str, Sequence[float]], xlabel: str, ylabel: str,
            *, scale: float = 1e6, marks: Sequence[tuple[float, str]] = (),
            phases: Sequence[tuple[float, float, str]] = (),
            figsize: tuple[float, float] = (8.0, 3.2), ax: plt.Axes | None = None) -> plt.Axes:
    """A stacked area chart of memory by category (values divided by `scale`, the first series at the
    bottom), with dotted vertical `marks` (position, label), a ribbon of `phases` (start, end, name) along
    the top, and the legend inside the axes, below the ribbon, with the y limit raised to clear it."""
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    names = list(series)
    ax.stackplot(list(x), *[[v / scale for v in series[n]] for n in names], labels=names,
                 colors=[_COLORS.get(n, None) for n in names], step="post")
    named: list[str] = []
    for start, end, name in phases:  # a ribbon along the top of the axes
        ax.axvspan(start, end, ymin=0.94, ymax=1.0, color=_PHASE_COLORS.get(name, "#bbbbbb"), lw=0,
                   label=None if name in named else f"{name} (top band)")
        named += [] if name in named else [name]
    for pos, label in marks:  # labelled inside the ribbon, or at the top without one
        ax.axvline(pos, color="k", lw=0.6, ls=":")
        ax.text(pos, 0.97 if phases else 0.98, f" {label}", va="center" if phases else "top", fontsize=7,
                transform=ax.get_xaxis_transform())
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.margins(x=0)
    renderer = ax.figure.canvas.get_renderer()
    for ncols in range(min(4, len(names) + len(named)), 0, -1):  # as many columns as fit the width
        legend = ax.legend(loc="upper left", bbox_to_anchor=(0.0, 0.93 if phases else 0.9), fontsize=7,
                           ncols=ncols, framealpha=0.9, borderaxespad=0.2)
        box = legend.get_window_extent(renderer).transformed(ax.transAxes.inverted())
        if box.x1 <= 1.0:
            break
    # raise the y limit (never lower it: axes may share y) so the highest total sits below the legend
    top = max((sum(vals) for vals in zip(*series.values())), default=0) / scale
    ax.set_ylim(0, max(ax.get_ylim()[1], top / max(box.y0 - 0.05, 0.3)))
    return ax


def stacked_bars(labels: Sequence[str], series: dict[str, Sequence[float]], ylabel: str, *,
                 scale: float = 1e6, ax: plt.Axes | None = None,
                 figsize: tuple[float, float] = (6.0, 3.2),
                 colors: dict[str, str] | None = None) -> plt.Axes:
    """One stacked bar per label, one segment per category of `series` (values divided by scale),
    coloured by the course's category colours, or by `colors` where it names the category."""
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    bottom = [0.0] * len(labels)
    for name, values in series.items():
        if len(values) != len(labels):
            raise ValueError(f"series {name!r} has {len(values)} values for {len(labels)} labels")
        vals = [v / scale for v in values]
        ax.bar(range(len(labels)), vals, bottom=bottom, label=name, color=(colors or {}).get(name, _COLORS.get(name)))
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(range(len(labels)), list(labels), rotation=60, ha="right", fontsize=7)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=0.3)
    return ax


def _phase_runs(trace) -> list[tuple[int, int, str]]:
    """(start, end, phase) runs of a MemoryTrace's events: an allocation is in the phase that made it
    (the optimizer's is called 'update'); a free is in the phase of the allocation before it in its
    step, or of the next one when it opens a step; the tracker's setup records are in none."""
    marks = sorted({pos for pos, _ in trace.marks})
    segments = zip([0] + marks, marks + [len(trace)])
    runs: list[tuple[int, int, str]] = []
    for start, end in segments:
        known = [rec.phase if sign > 0 else None for sign, rec in trace.events[start:end]]
        following = next((p for p in known if p is not None), None)
        current = None
        for i, p in enumerate(known):
            current = p or current or following
            name = {"optimizer": "update"}.get(current, current)
            if name in (None, "setup"):
                continue
            if runs and runs[-1][2] == name and runs[-1][1] == start + i:
                runs[-1] = (runs[-1][0], start + i + 1, name)
            else:
                runs.append((start + i, start + i + 1, name))
    return runs


def memory_timeline(trace, *, ax: plt.Axes | None = None, figsize: tuple[float, float] = (8.0, 3.2)) -> plt.Axes:
    """The stacked timeline of a MemoryTrace (PyTorch): live MB per category after each allocation or
    free, what persists at the bottom, empty categories left out, step marks and a ribbon of phases."""
    by = trace.by_category()
    series = {c: by[c] for c in _TIMELINE_ORDER if any(by[c])}
    return stacked(range(len(trace)), series, "allocations and frees, in order (not time)",
                   "live tensor memory (MB)", marks=trace.marks, phases=_phase_runs(trace), ax=ax,
                   figsize=figsize)
