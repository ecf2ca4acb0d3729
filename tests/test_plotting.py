import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

import helpers as hp  # noqa: E402
from helpers.memory_torch import CATEGORIES  # noqa: E402


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
    assert len(ax.collections) == len(CATEGORIES)
    assert ax.get_ylabel() == "live tensor memory (MB)"
    plt.close("all")
    del x, y


def test_stacked_bars_stack_each_category():
    ax = hp.stacked_bars(["a", "b"], {"parameters": [1e6, 2e6], "gradients": [3e6, 0]}, "MB")
    heights = [p.get_height() for p in ax.patches]
    assert heights == [1.0, 2.0, 3.0, 0.0]
    assert ax.patches[2].get_y() == 1.0  # gradients sit on top of parameters
    plt.close("all")


def test_stacked_bars_reject_mismatched_lengths():
    import pytest

    with pytest.raises(ValueError, match="has 1 values for 2 labels"):
        hp.stacked_bars(["a", "b"], {"parameters": [1.0]}, "MB")
    plt.close("all")


def test_bars2_draws_a_reference_hatched_beside_this_run_where_it_has_values():
    ref = hp.Reference("source 002, A100 GPU", right=[None, 1.5])
    a, b = hp.bars2(["fp32", "bf16"], [2.0, 1.0], [3.0, 4.0], "MB", "ms", reference=ref)
    assert len(a.patches) == 2 and len(b.patches) == 3
    assert b.get_legend_handles_labels()[1] == ["this run", "source 002, A100 GPU"]
    assert b.patches[2].get_hatch() == "//"
    plt.close("all")


def test_bars2_refuses_a_reference_of_the_wrong_length():
    import pytest

    with pytest.raises(ValueError, match="one per label"):
        hp.bars2(["fp32", "bf16"], [2.0, 1.0], [3.0, 4.0], "MB", "ms",
                 reference=hp.Reference("src", left=[1.0]))
    plt.close("all")


def test_figure_titles_name_the_device(monkeypatch):
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    title = hp.measured_on("step time")
    assert title.startswith("step time\nmeasured on ")
    assert "CPU" in title or "GPU" in title or "NVIDIA" in title
    assert "AVX-512" not in title


def test_plot_puts_plain_ticks_at_the_given_x_on_a_log_axis():
    ax = hp.plot([1, 2, 4, 8], [[3, 2, 1, 1]], "k", "MB", logx=True, xticks=[1, 2, 4, 8])
    assert list(ax.get_xticks()) == [1, 2, 4, 8]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4", "8"]
    assert len(ax.xaxis.get_minorticklocs()) == 0  # no '3x10^0' labels between them
    plt.close("all")


def test_plot_ratios_draws_the_printed_ratio_with_the_rounds_range_from_zero():
    t = hp.Timings({"k = 1": [1.0, 2.0, 1.0], "k = 2": [1.5, 1.0, 2.0], "k = 4": [3.0, 5.0, 2.5]})
    ax = hp.plot_ratios([1, 2, 4], t, ["k = 1", "k = 2", "k = 4"], "k = 1", "k")
    markers = ax.lines[0]
    assert list(markers.get_ydata()) == [t.ratio(n, "k = 1") for n in t]    # the ratio compare() prints
    (bars,) = ax.collections
    spans = [tuple(seg[:, 1]) for seg in bars.get_segments()]
    assert spans == [t.spread(n, "k = 1") for n in t]                          # the per-round range
    assert spans[1] == (0.5, 2.0) and spans[2] == (2.5, 3.0)
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] >= 3.0
    assert any(list(line.get_ydata()) == [1.0, 1.0] for line in ax.lines)     # the no-change line
    assert [tk.get_text() for tk in ax.get_xticklabels()] == ["1", "2", "4"]
    plt.close("all")


def test_plot_ratios_refuses_mismatched_x():
    import pytest

    t = hp.Timings({"a": [1.0], "b": [2.0]})
    with pytest.raises(ValueError, match="one x per timed name"):
        hp.plot_ratios([1], t, ["a", "b"], "a", "k")
    plt.close("all")


def test_bars2_leaves_room_above_the_bars_for_a_reference_legend():
    a, _ = hp.bars2(["fp32", "bf16"], [1.0, 0.8], [1.0, 1.0], "MB", "ms",
                    reference=hp.Reference("src", left=[1.0, 0.6]))
    assert a.get_ylim() == (0.0, 1.3)
    plt.close("all")
