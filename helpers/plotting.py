"""Small plotting helpers in the d2l spirit. Every helper draws into a fresh figure (or the axes
given) and returns the axes; the notebook cell ends with plt.show(), so no object repr leaks."""

from __future__ import annotations

from dataclasses import dataclass
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
          spread: Sequence[tuple[float, float]] | None = None) -> tuple[plt.Axes, plt.Axes]:
    """Two bar panels side by side over the same labels (e.g. peak memory and step time); with a
    `reference`, its quoted figures are drawn hatched beside this run's bars and labelled; with a
    `spread`, one (low, high) per label, this run's left bars get that range as an error bar (e.g. the
    range of timing rounds), with room above the bars for the legend."""
    if spread is not None and (len(spread) != len(labels)
                               or not all(lo <= v <= hi for (lo, hi), v in zip(spread, left))):
        raise ValueError("spread needs one (low, high) per label, around the left value: "
                         "pass e.g. Timings.spread(name, baseline) for each label")
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
        if spread is not None and ax is a:
            ax.errorbar([x - shift for x in xs], list(vals), fmt="none", ecolor="k", capsize=3, lw=1,
                        yerr=[[v - lo for v, (lo, _) in zip(vals, spread)],
                              [hi - v for v, (_, hi) in zip(vals, spread)]], label="range of this run's rounds")
            top = max([hi for _, hi in spread] + [v for v in (ref or []) if v is not None])
            ax.set_ylim(0, 2 * top)  # the bars in the lower half, the legend above them
            ax.legend(fontsize=7, loc="upper left")
        elif ref is not None:
            ax.legend(fontsize=7)
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
