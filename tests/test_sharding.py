"""helpers.sharding: the ZeRO per-device bytes, communication bytes, the smallest fit, and the HLO
collective counter."""

import pytest

import helpers as hp

P = 1_000_000


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_fp32_stages_follow_the_formulas(n):
    got = [hp.zero_bytes(P, n, s).total for s in range(4)]
    assert got == [16 * P, 8 * P + 8 * P // n, 4 * P + 12 * P // n, 16 * P // n]


def test_the_papers_mixed_precision_forms_and_the_courses_18p():
    n = 4
    assert [hp.zero_bytes(P, n, s, "mixed16").total for s in range(4)] == [16 * P, 4 * P + 12 * P // n,
                                                                           2 * P + 14 * P // n, 16 * P // n]
    assert hp.zero_bytes(P, 1, 0, "mixed").total == hp.persistent_bytes(P, precision="mixed") == 18 * P
    assert hp.zero_bytes(P, n, 3, "mixed").total == 18 * P // n


def test_uneven_shards_count_the_largest_shard():
    b = hp.zero_bytes(10, 4, 3)      # ceil(10 / 4) = 3 elements on the largest shard
    assert (b.parameters, b.gradients, b.optimizer) == (12, 12, 24)
    assert hp.sharded_bytes([8, 2], 4, 3).total == 16 * 2 + 16 * 1


def test_bad_arguments_say_what_to_pass():
    with pytest.raises(ValueError, match="stage must be one of"):
        hp.zero_bytes(P, 2, 4)
    with pytest.raises(ValueError, match="unknown precision"):
        hp.zero_bytes(P, 2, 1, "fp8")
    with pytest.raises(ValueError, match="n_devices"):
        hp.zero_bytes(P, 0, 1)
    with pytest.raises(ValueError, match="sizes is empty"):
        hp.sharded_bytes([], 2, 1)


def test_the_papers_example_per_device():
    # Rajbhandari et al. 2020, figure 1: 7.5B parameters, 16P mixed precision, 64 devices
    got = [hp.zero_bytes(7_500_000_000, 64, s, "mixed16").total / 1e9 for s in range(4)]
    assert [abs(g - paper) <= 0.05 for g, paper in zip(got, (120, 31.4, 16.6, 1.9))] == [True] * 4
    assert hp.zero_bytes(7_500_000_000, 64, 1, "mixed").total == 46_406_250_000   # the course's 18P: 6P + 12P/N


def test_communication_rounds_per_stage_are_the_papers():
    n = 4
    one = (n - 1) * (P // n) * 4     # one round: (N-1)/N of the fp32 gradients
    # stages 1 and 2 send what data parallelism sends; stage 3 1.5 times as much
    assert [hp.communication_bytes(P, n, s) for s in range(4)] == [2 * one, 2 * one, 2 * one, 3 * one]
    assert hp.communication_bytes(P, 1, 0) == 0
    assert hp.communication_bytes(P, 2, 0, dtype_bytes=2) == 2 * P // 2 * 2


def test_smallest_fit_picks_the_fewest_devices_then_the_lowest_stage():
    assert hp.smallest_fit(P, 16 * P).n_devices == 1
    fit = hp.smallest_fit(P, 13 * P)
    assert (fit.n_devices, fit.stage, fit.estimate, fit.fits) == (2, 1, 12 * P, True)
    assert (hp.smallest_fit(P, 11 * P).stage, hp.smallest_fit(P, 9 * P).stage) == (2, 3)
    fit = hp.smallest_fit(P, 13 * P, hp.StepBytes(16 * P, P), 4)   # the batch, so its bytes, is divided by N
    assert (fit.n_devices, fit.stage) == (2, 2) and fit.estimate == 10 * P + 2 * P
    assert "2 devices at ZeRO stage 2: estimated" in str(fit)
    # the constant beyond the unsharded model states (a trace's working buffers) stays on every device
    fit = hp.smallest_fit(P, 13 * P, hp.StepBytes(17 * P, P), 4)
    assert (fit.n_devices, fit.stage, fit.estimate) == (2, 2, 10 * P + P + 2 * P)
    # an odd batch: a device takes ceil(batch / N) sequences, not the bytes split evenly
    assert hp.smallest_fit(P, 100 * P, hp.StepBytes(16 * P, 10), 3).estimate == 16 * P + 30
    assert hp.smallest_fit(P, 13 * P, hp.StepBytes(16 * P, 10), 3).estimate == 12 * P + 20
    never = hp.smallest_fit(P, P, max_devices=4)
    assert not never.fits and "does not fit" in str(never)
    with pytest.raises(ValueError, match="per_sequence > 0"):
        hp.StepBytes(P, -1)


HLO = """
  %all-reduce.8 = (f32[256]{0}, f32[256,256]{1,0}, /*index=2*/bf16[16]{0}) all-reduce(%a, %b, %c), channel_id=1
  %all-gather.1 = f32[64,256]{1,0} all-gather(%p), channel_id=2, dimensions={0}
  %all-to-all.2 = (f32[16,1,64]{2,1,0}, f32[16,1,64]{2,1,0}) all-to-all(%x, %y), channel_id=3
  %reduce-scatter = f32[8]{0} reduce-scatter(%g), channel_id=4
  %ags = ((f32[2]{0}), (f32[4]{0})) all-gather-start(%q), channel_id=5
  %not = f32[4]{0} add(%all-reduce.8, %z)
"""


def test_collective_bytes_counts_kinds_payloads_and_ring_bytes():
    c = hp.collective_bytes(HLO, 4)
    assert c["all-reduce"].count == 1 and c["all-reduce"].payload == (256 + 65536) * 4 + 32
    assert c["all-reduce"].sent == round(c["all-reduce"].payload * 1.5)
    assert (c["all-gather"].count, c["all-gather"].payload) == (2, 64 * 256 * 4 + 16)  # async: results only
    assert c["all-to-all"].payload == 2 * 1024 * 4 and c["all-to-all"].sent == 3 * 1024 * 2
    assert c["reduce-scatter"].sent == 3 * 32
    assert c["collective-permute"].count == 0
    with pytest.raises(ValueError, match="unknown element type"):
        hp.collective_bytes("%a = c64[2]{0} all-reduce(%b)", 2)


def test_the_planners_add_devices_rung_names_the_devices_and_stage():
    # 16P alone exceeds the card: no single-device rung can help, the sharding formulas decide
    step = {"fp32": hp.StepBytes(16 * P, 1000)}
    plan = hp.choose_interventions(step, 8, 13 * P, n_params=P, max_accumulation=8)
    assert plan.rungs[-1] == "add devices" and not plan.fits and plan.micro_batch == 1
    fit = hp.smallest_fit(P, 13 * P, step["fp32"], 1)
    assert (plan.devices, plan.zero_stage) == (fit.n_devices, fit.stage) == (2, 1)
    assert hp.choose_interventions(step, 8, 100 * P, n_params=P).zero_stage is None   # fits one device
