"""Small plotting helpers in the d2l spirit. Every helper draws into a fresh figure (or the axes
given) and returns the axes; the notebook cell ends with plt.show(), so no object repr leaks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import matplotlib.pyplot as plt
from matplotlib.ticker import NullLocator

from .timing import Timings

_COLORS = {"parameters": "#4c72b0", "gradients": "#dd8452", "optimizer state": "#55a868",
           "inputs": "#222222", "cast copies": "#64b5cd", "activations": "#c44e52",
           "recomputed": "#da8bc3", "temporaries": "#8172b3", "new params and state": "#937860"}


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
                ax: plt.Axes | None = None) -> plt.Axes:
    """Each name's time over base's against x: a marker at the ratio Timings.compare prints, a bar
    over the range of the per-round ratios, a line at 1 (no change), and a y axis from 0."""
    if len(x) != len(names):
        raise ValueError(f"{len(x)} x values for {len(names)} names; give one x per timed name")
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    mid = [timings.ratio(n, base) for n in names]
    lo, hi = zip(*(timings.spread(n, base) for n in names))
    ax.errorbar(list(x), mid, yerr=[[m - a for m, a in zip(mid, lo)], [b - m for m, b in zip(mid, hi)]],
                fmt="o", capsize=4, label="median; bar: range over the rounds")
    ax.axhline(1.0, color="k", lw=0.8, ls=":", label="no change")
    ax.set_ylim(0, 1.45 * max(max(hi), 1.0))   # room above the highest bar for the legend
    if logx:
        ax.set_xscale("log")
    _ticks_at(ax, x)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"time / time of {base}")
    ax.legend(fontsize=8, loc="upper left", ncol=2)
    ax.grid(True, axis="y", alpha=0.3)
    return ax


@dataclass(frozen=True)
class Reference:
    """Figures quoted from elsewhere (a source text's GPU run), drawn hatched beside this run's bars.
    `left`/`right` hold one value per label of the panel, or None where the source gives none."""

    source: str
    left: Sequence[float | None] | None = None
    right: Sequence[float | None] | None = None


def measured_on(title: str) -> str:
    """A figure title that names the device the figure was measured on (figures get copied without
    the prose around them)."""
    from .device import _device_label

    return f"{title}\nmeasured on {_device_label()}"


def bars2(labels: Sequence[str], left: Sequence[float], right: Sequence[float],
          left_label: str, right_label: str, title: str = "",
          figsize: tuple[float, float] = (9.0, 3.2), *,
          reference: Reference | None = None) -> tuple[plt.Axes, plt.Axes]:
    """Two bar panels side by side over the same labels (e.g. peak memory and step time); with a
    `reference`, its quoted figures are drawn hatched beside this run's bars and labelled."""
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
        if ref is not None:
            pairs = [(x + shift, v) for x, v in zip(xs, ref) if v is not None]
            ax.bar([x for x, _ in pairs], [v for _, v in pairs], width=width, color="white",
                   edgecolor=color, hatch="//", label=reference.source)
            ax.set_ylim(0, 1.3 * max([*vals, *(v for _, v in pairs)]))   # the legend sits above the bars
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
            figsize: tuple[float, float] = (8.0, 3.2), ax: plt.Axes | None = None) -> plt.Axes:
    """A stacked area chart of memory by category (values divided by `scale`), with optional
    vertical marks such as step boundaries."""
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    names = list(series)
    ax.stackplot(list(x), *[[v / scale for v in series[n]] for n in names], labels=names,
                 colors=[_COLORS.get(n, None) for n in names], step="post")
    for pos, label in marks:
        ax.axvline(pos, color="k", lw=0.6, ls=":")
        ax.text(pos, ax.get_ylim()[1] * 0.98, f" {label}", va="top", fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.margins(x=0)
    return ax


def stacked_bars(labels: Sequence[str], series: dict[str, Sequence[float]], ylabel: str, *,
                 scale: float = 1e6, ax: plt.Axes | None = None,
                 figsize: tuple[float, float] = (6.0, 3.2)) -> plt.Axes:
    """One stacked bar per label, one segment per category of `series` (values divided by scale)."""
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    bottom = [0.0] * len(labels)
    for name, values in series.items():
        if len(values) != len(labels):
            raise ValueError(f"series {name!r} has {len(values)} values for {len(labels)} labels")
        vals = [v / scale for v in values]
        ax.bar(range(len(labels)), vals, bottom=bottom, label=name, color=_COLORS.get(name))
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(range(len(labels)), list(labels), rotation=60, ha="right", fontsize=7)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=0.3)
    return ax


def memory_timeline(trace, *, ax: plt.Axes | None = None, figsize: tuple[float, float] = (8.0, 3.2)) -> plt.Axes:
    """The stacked timeline of a MemoryTrace (PyTorch): live MB per category after each event."""
    series = trace.by_category()
    x = range(len(trace))
    return stacked(x, series, "allocation event", "live tensor memory (MB)",
                   marks=trace.marks, ax=ax, figsize=figsize)
