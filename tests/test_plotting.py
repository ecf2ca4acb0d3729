import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

import helpers as hp  # noqa: E402


def test_plot_draws_each_series_with_labels():
    ax = hp.plot([1, 2, 3], [[1, 2, 3], [3, 2, 1]], "k", "ms", legend=["a", "b"], logy=True)
    assert len(ax.lines) == 2 and ax.get_xlabel() == "k" and ax.get_yscale() == "log"
    plt.close("all")


def test_bars2_makes_two_panels():
    a, b = hp.bars2(["fp32", "bf16"], [2.0, 1.0], [3.0, 4.0], "MB", "ms")
    assert len(a.patches) == 2 and len(b.patches) == 2 and b.get_ylabel() == "ms"
    plt.close("all")


def test_memory_timeline_stacks_every_category():
    tracker = hp.MemoryTracker()
    with tracker:
        tracker.mark("start")
        x = torch.ones(1000)
        y = x * 2
    ax = hp.memory_timeline(tracker.trace)
    assert len(ax.collections) == len(hp.CATEGORIES)
    assert ax.get_ylabel() == "live tensor memory (MB)"
    plt.close("all")
    del x, y
