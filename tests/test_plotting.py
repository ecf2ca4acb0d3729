import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
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


def _two_adam_steps():
    """The trace of two Adam steps of a tiny linear model (its loop update allocates scratch every step)."""
    torch.manual_seed(0)
    net = torch.nn.Linear(8, 4)
    X = torch.randn(16, 8)
    opt = torch.optim.Adam(net.parameters(), foreach=False)

    def step():
        opt.zero_grad(set_to_none=True)
        net(X).sum().backward()
        opt.step()

    return hp.measure_memory(hp.Workload(step, net, opt, (X,)), steps=2).trace


def test_memory_timeline_stacks_what_persists_at_the_bottom_and_leaves_empty_categories_out():
    trace = _two_adam_steps()
    ax = hp.memory_timeline(trace)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    drawn = [name for name in labels if "top band" not in name]
    assert drawn[:3] == ["parameters", "optimizer state", "inputs"]  # the bottom of the stack
    assert drawn.index("gradients") > drawn.index("inputs")
    assert "cast copies" not in drawn and "recomputed" not in drawn  # nothing of theirs in this step
    assert len(ax.collections) == len(drawn) and set(drawn) <= set(CATEGORIES)
    assert ax.get_ylabel() == "live tensor memory (MB)" and "not time" in ax.get_xlabel()
    plt.close("all")


def test_phase_runs_follow_each_step_through_forward_backward_and_update():
    from helpers.plotting import _phase_runs

    trace = _two_adam_steps()
    runs = _phase_runs(trace)
    assert [name for _, _, name in runs] == ["forward", "backward", "update"] * 2
    assert all(a < b for a, b, _ in runs) and all(r[1] == s[0] for r, s in zip(runs, runs[1:]))
    assert runs[0][0] == trace.marks[0][0] and runs[-1][1] == len(trace)  # from the first step to the end
    assert runs[3][0] == trace.marks[1][0]  # the second step opens with its forward pass
    ax = hp.memory_timeline(trace)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert [name for name in labels if "top band" in name] == [f"{p} (top band)" for p in ("forward", "backward", "update")]
    plt.close("all")


def test_stacked_raises_a_shared_y_limit_and_never_lowers_it():
    _, (a, b) = plt.subplots(1, 2, sharey=True)
    hp.stacked([0, 1], {"parameters": [10e6, 10e6]}, "x", "MB", phases=[(0, 1, "forward")], ax=a)
    hp.stacked([0, 1], {"parameters": [2e6, 2e6]}, "x", "MB", phases=[(0, 1, "forward")], ax=b)
    assert a.get_ylim()[1] >= 12.0  # the taller panel keeps room for its ribbon above 10 MB
    plt.close("all")


def test_stacked_puts_its_legend_inside_the_axes_between_the_ribbon_and_the_data():
    fig, ax = plt.subplots(figsize=(6, 3))
    hp.stacked([0, 1, 2], {"parameters": [4e6] * 3, "gradients": [0, 4e6, 4e6]}, "x", "MB",
               phases=[(0, 1, "forward"), (1, 2, "backward")], marks=[(0, "step 1")], ax=ax)
    fig.canvas.draw()
    box = ax.get_legend().get_window_extent().transformed(ax.transAxes.inverted())
    top = 8 / ax.get_ylim()[1]  # the highest total, in axes coordinates
    assert 0 <= box.x0 and box.x1 <= 1 and box.y1 <= 0.94 and box.y0 > top
    plt.close("all")


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


def test_bars2_draws_a_range_over_each_right_bar():
    a, b = hp.bars2(["fp32", "bf16"], [2.0, 1.0], [1.0, 2.5], "MB", "x", right_range=[(1.0, 1.0), (2.0, 3.5)],
                    reference=hp.Reference("src", right=[1.0, 0.5]))
    (lines,) = b.collections
    segments = [seg.tolist() for seg in lines.get_segments()]
    assert segments == [[[-0.2, 1.0], [-0.2, 1.0]], [[0.8, 2.0], [0.8, 3.5]]]  # over this run's bars, not the hatched
    assert not a.collections and "range over the rounds" in b.get_legend_handles_labels()[1]
    with pytest.raises(ValueError, match="one \\(low, high\\) per label"):
        hp.bars2(["fp32", "bf16"], [2.0, 1.0], [1.0, 2.5], "MB", "x", right_range=[(1.0, 1.0)])
    plt.close("all")


def test_stacked_bars_take_a_colour_per_category():
    ax = hp.stacked_bars(["a"], {"parameters": [1e6], "mine": [2e6]}, "MB", colors={"mine": "#123456"})
    assert matplotlib.colors.to_hex(ax.patches[1].get_facecolor()) == "#123456"
    assert matplotlib.colors.to_hex(ax.patches[0].get_facecolor()) == "#4c72b0"  # the course's colour stays
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


def test_plot_ratios_with_quartiles_draws_the_median_of_the_per_round_ratios_and_their_middle_half():
    import statistics

    t = hp.Timings({"k = 1": [1.0, 1.0, 1.0, 1.0, 1.0], "k = 2": [0.5, 0.9, 1.0, 1.1, 2.0]})
    ax = hp.plot_ratios([1, 2], t, ["k = 1", "k = 2"], "k = 1", "k", quartiles=True)
    assert list(ax.lines[0].get_ydata()) == [1.0, 1.0]     # median of the ratios, not ratio of medians
    thin, thick = ax.collections
    assert [tuple(seg[:, 1]) for seg in thin.get_segments()] == [(1.0, 1.0), (0.5, 2.0)]   # the range
    q1, _, q3 = statistics.quantiles([0.5, 0.9, 1.0, 1.1, 2.0], n=4)
    assert [tuple(seg[:, 1]) for seg in thick.get_segments()] == [(1.0, 1.0), (q1, q3)]    # the middle half
    ax2 = hp.plot_ratios([1], hp.Timings({"a": [1.0, 3.0, 1.0], "b": [0.5, 3.75, 3.0]}), ["b"], "a", "k",
                         quartiles=True)
    assert list(ax2.lines[0].get_ydata()) == [1.25]           # ratios 0.5, 1.25, 3; the medians' ratio is 3
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
