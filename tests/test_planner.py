"""The memory ladder planner: which interventions a step needs to fit a device, from the model's own
bytes per setting (constant + micro-batch x per-sequence bytes), never from one setting times a factor."""

import pytest

import helpers as hp

MB = 1_000_000
S = hp.StepBytes


def test_a_step_that_fits_needs_nothing():
    plan = hp.choose_interventions({"fp32": S(16 * MB, 100_000)}, 64, 100 * MB)
    assert plan.rungs == () and plan.accumulation == 1 and plan.micro_batch == 64 and plan.setting == "fp32"
    assert plan.estimate == 16 * MB + 64 * 100_000 and plan.fits and not plan.traced
    assert str(plan).startswith("nothing to change (fp32): micro-batch 64 x 1")


def test_accumulation_is_the_first_rung_and_the_largest_micro_batch_is_named():
    # 16 MB + 100 x 1 MB does not fit 80 MB; k = 2 gives 16 + 50 MB. The largest that fits: 64 (80 MB).
    plan = hp.choose_interventions({"fp32": S(16 * MB, MB)}, 100, 80 * MB)
    assert plan.rungs == ("accumulate",) and plan.accumulation == 2 and plan.micro_batch == 50
    assert plan.estimate == 66 * MB and plan.fits and plan.largest == 64 and plan.next_estimate == 81 * MB


def test_accumulation_comes_before_checkpointing_while_the_micro_batch_is_large_enough():
    steps = {"fp32": S(16 * MB, MB), "fp32+ckpt": S(16 * MB, MB // 2)}
    plan = hp.choose_interventions(steps, 64, 30 * MB)
    assert plan.rungs == ("accumulate",) and plan.accumulation == 8 and plan.estimate == 24 * MB


def test_checkpointing_on_its_own_bytes_when_the_micro_batch_would_be_too_small():
    steps = {"fp32": S(16 * MB, MB), "fp32+ckpt": S(16 * MB, MB // 2)}
    plan = hp.choose_interventions(steps, 64, 30 * MB, min_micro_batch=16)
    assert plan.rungs == ("accumulate", "checkpoint") and plan.setting == "fp32+ckpt"
    assert plan.accumulation == 4 and plan.micro_batch == 16 and plan.estimate == 24 * MB
    assert plan.tried and plan.tried[0].startswith("fp32: largest micro-batch 14")


def test_bf16_is_judged_on_its_own_bytes_not_on_half_of_fp32s():
    # A GPT-like step: per sequence 1 MB of blocks and 1 MB of fp32 logits (and their gradients).
    # bf16 halves the blocks only: 0.5 + 1 MB per sequence. The old planner's single factor (half of
    # fp32's 2 MB) called 8 sequences a fit in 18 + 8 = 26 MB of 28; the model's own bytes say 30 MB.
    steps = {"fp32": S(16 * MB, 2 * MB), "bf16": S(18 * MB, 3 * MB // 2)}
    plan = hp.choose_interventions(steps, 16, 28 * MB, min_micro_batch=8)
    assert not plan.fits and plan.rungs == ("accumulate", "bf16", "add devices") and plan.setting == "bf16"
    assert plan.estimate == 18 * MB + 8 * 3 * MB // 2 == 30 * MB
    plan = hp.choose_interventions(steps, 16, 30 * MB, min_micro_batch=8)
    assert plan.fits and plan.rungs == ("accumulate", "bf16") and plan.micro_batch == 8


def test_checkpointing_keeps_the_logits_the_caller_gives():
    # checkpointing removes the blocks (1 MB), not the logits (1 MB): with 1 MB per sequence left,
    # 12 MB of room holds 12 sequences, not the 192 a 1/16 factor on all 2 MB would claim
    steps = {"fp32": S(16 * MB, 2 * MB), "fp32+ckpt": S(16 * MB, MB)}
    plan = hp.choose_interventions(steps, 64, 28 * MB, min_micro_batch=8)
    assert plan.setting == "fp32+ckpt" and plan.largest == 12 and plan.micro_batch == 8 and plan.accumulation == 8


def test_bf16_on_top_of_checkpointing_when_both_are_given():
    steps = {"fp32": S(16 * MB, 4 * MB), "fp32+ckpt": S(16 * MB, 2 * MB), "bf16+ckpt": S(18 * MB, MB)}
    plan = hp.choose_interventions(steps, 64, 30 * MB, min_micro_batch=8)
    assert plan.rungs == ("accumulate", "checkpoint", "bf16") and plan.setting == "bf16+ckpt"
    assert plan.micro_batch == 8 and plan.estimate == 26 * MB and len(plan.tried) == 2


def test_a_traced_peak_decides_the_fit_not_the_line():
    # the line says 10 sequences fit 26 MB; the "traced" step holds 2 MB more than the line from 9 on
    line = S(16 * MB, MB)
    traced = lambda setting, b: line.predict(b) + (2 * MB if b >= 9 else 0)  # noqa: E731
    plan = hp.choose_interventions({"fp32": line}, 64, 26 * MB, peak=traced)
    assert plan.traced and plan.largest == 8 and plan.micro_batch == 8 and plan.estimate == 24 * MB
    assert plan.next_estimate == 27 * MB and plan.fits
    low = lambda setting, b: line.predict(b) - 3 * MB  # noqa: E731   a line too high: the trace goes up
    assert hp.choose_interventions({"fp32": line}, 64, 26 * MB, peak=low).largest == 13


def test_add_devices_when_the_state_alone_is_too_big():
    P = 1_300_000_000
    plan = hp.choose_interventions({"fp32": S(16 * P, MB)}, 8, 20 * 10**9, n_params=P)  # 16P = 20.8 GB > 20 GB
    assert plan.rungs == ("accumulate", "add devices") and not plan.fits
    assert plan.accumulation == 8 and "does not fit one device" in str(plan)
    fit = hp.smallest_fit(P, 20 * 10**9, S(16 * P, MB), plan.micro_batch)
    assert (plan.devices, plan.zero_stage) == (fit.n_devices, fit.stage) and plan.devices > 1
    single = hp.choose_interventions({"fp32": S(16 * P, MB)}, 8, 21 * 10**9, n_params=P)
    assert single.fits and "add devices" not in single.rungs and (single.devices, single.zero_stage) == (1, None)
    assert hp.choose_interventions({"fp32": S(16 * P, MB)}, 8, 20 * 10**9).zero_stage is None   # no n_params: unnamed


def test_headroom_keeps_part_of_the_device_free():
    plan = hp.choose_interventions({"fp32": S(26 * MB, MB)}, 8, 30 * MB, headroom=0.1)
    # 27 MB usable: k=2 (30 MB) no longer fits, k=4 (28 MB) neither, k=8 (27 MB) does.
    assert plan.accumulation == 8 and plan.usable_bytes == 27 * MB and plan.fits
    assert str(plan).endswith("of 30.0 MB (27.0 MB usable)")


def test_step_bytes_through_two_peaks():
    s = S.through((4, 40 * MB), (2, 30 * MB))
    assert (s.constant, s.per_sequence) == (20 * MB, 5 * MB) and s.predict(8) == 60 * MB
    with pytest.raises(ValueError, match="two different positive micro-batches"):
        S.through((2, 1), (2, 3))
    with pytest.raises(ValueError, match="per_sequence > 0"):
        S.through((2, 30), (4, 30))


@pytest.mark.parametrize("kwargs, message", [
    (dict(steps={"fp32": S(1, 1)}, batch=8, device_bytes=1, headroom=1.0), "headroom must"),
    (dict(steps={}, batch=8, device_bytes=1), "one or more settings"),
    (dict(steps={"fp32": S(1, 1), "fp16": S(1, 1)}, batch=8, device_bytes=1), "settings among"),
    (dict(steps={"fp32": S(1, 1)}, batch=0, device_bytes=1), "batch must"),
    (dict(steps={"fp32": S(1, 1)}, batch=8, device_bytes=1, n_params=-1), "n_params must"),
    (dict(steps={"fp32": S(1, 1)}, batch=8, device_bytes=1, min_micro_batch=0), "min_micro_batch must"),
])
def test_bad_arguments_are_refused_with_a_reason(kwargs, message):
    with pytest.raises(ValueError, match=message):
        hp.choose_interventions(**kwargs)
