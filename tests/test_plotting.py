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


def test_figure_titles_say_how_the_data_were_obtained():
    assert hp.measured_on("plan", verb="planned").startswith("plan\nplanned on ")
    import pytest

    with pytest.raises(ValueError, match="verb is empty"):
        hp.measured_on("plan", verb=" ")


def test_bars2_draws_the_spread_of_the_left_values_as_error_bars_with_room_for_the_legend():
    ref = hp.Reference("source 000, GPU", left=[1.3, 1.0])
    a, b = hp.bars2(["fp32", "tf32"], [0.7, 1.0], [3.0, 4.0], "time / tf32's", "MB", reference=ref,
                    spread=[(0.4, 1.9), (1.0, 1.0)])
    segments = a.collections[0].get_segments()
    assert [tuple(s[:, 1]) for s in segments] == [(0.4, 1.9), (1.0, 1.0)]
    assert a.get_ylim()[1] == 2 * 1.9 and not b.collections
    assert a.get_legend_handles_labels()[1] == ["this run", "source 000, GPU", "range of this run's rounds"]
    plt.close("all")


def test_bars2_refuses_a_spread_that_misses_its_value():
    import pytest

    with pytest.raises(ValueError, match="around the left value"):
        hp.bars2(["fp32", "bf16"], [2.0, 1.0], [3.0, 4.0], "ms", "MB", spread=[(1.0, 3.0), (1.5, 2.0)])
    plt.close("all")
