"""Small plotting helpers in the d2l spirit. Every helper draws into a fresh figure (or the axes
given) and returns the axes; the notebook cell ends with plt.show(), so no object repr leaks."""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt

_COLORS = {"parameters": "#4c72b0", "gradients": "#dd8452", "optimizer state": "#55a868",
           "inputs": "#222222", "cast copies": "#64b5cd", "activations": "#c44e52",
           "recomputed": "#da8bc3", "temporaries": "#8172b3", "new params and state": "#937860"}


def plot(x: Sequence[float], ys: Sequence[Sequence[float]], xlabel: str = "", ylabel: str = "",
         legend: Sequence[str] | None = None, *, logx: bool = False, logy: bool = False,
         fmts: Sequence[str] = ("-", "m--", "g-.", "r:"), figsize: tuple[float, float] = (5.0, 3.0),
         ax: plt.Axes | None = None) -> plt.Axes:
    """Plot one or more series against x, with labels, optional legend and log axes."""
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
    if legend:
        ax.legend(list(legend))
    ax.grid(True, alpha=0.3)
    return ax


def bars2(labels: Sequence[str], left: Sequence[float], right: Sequence[float],
          left_label: str, right_label: str, title: str = "",
          figsize: tuple[float, float] = (9.0, 3.2)) -> tuple[plt.Axes, plt.Axes]:
    """Two bar panels side by side over the same labels (e.g. peak memory and step time)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=figsize)
    for ax, vals, lab, color in ((a, left, left_label, "#4c72b0"), (b, right, right_label, "#dd8452")):
        ax.bar(list(labels), list(vals), color=color)
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
