"""The memory ladder planner: which interventions a step needs to fit a device."""

import pytest

import helpers as hp

MB = 1_000_000


def test_a_step_that_fits_needs_nothing():
    plan = hp.choose_interventions(1_000_000, 64, 100_000, 100 * MB)
    assert plan.rungs == () and plan.accumulation == 1 and plan.micro_batch == 64
    assert plan.estimate == 16 * MB + 64 * 100_000 and plan.fits
    assert str(plan).startswith("nothing to change: micro-batch 64 x 1")


def test_accumulation_is_the_first_rung():
    # 16 MB state + 100 MB activations does not fit 80 MB; accumulation (same FLOPs, same gradient)
    # comes before bf16: k = 2 gives 16 + 50 MB.
    plan = hp.choose_interventions(1_000_000, 100, 1 * MB, 80 * MB)
    assert plan.rungs == ("accumulate",) and plan.accumulation == 2 and plan.micro_batch == 50
    assert plan.estimate == 66 * MB and plan.fits


def test_accumulation_comes_before_checkpointing_while_the_micro_batch_is_large_enough():
    # 16 MB + 64 MB of activations in 30 MB: k = 8 (16 + 8 MB) fits without recomputing anything.
    plan = hp.choose_interventions(1_000_000, 64, 1 * MB, 30 * MB, checkpoint_activation_factor=0.5)
    assert plan.rungs == ("accumulate",) and plan.accumulation == 8 and plan.estimate == 24 * MB


def test_checkpointing_when_a_smaller_micro_batch_would_be_too_small_for_the_hardware():
    # The same step with micro-batches of at least 16: k = 4 alone gives 16 + 16 = 32 MB > 30 MB; with
    # checkpointing (half the activations) k = 2 gives 16 + 16 MB, still over; k = 4, 16 + 8 MB, fits.
    plan = hp.choose_interventions(1_000_000, 64, 1 * MB, 30 * MB, checkpoint_activation_factor=0.5,
                                   min_micro_batch=16)
    assert plan.rungs == ("accumulate", "checkpoint")
    assert plan.accumulation == 4 and plan.micro_batch == 16 and plan.estimate == 24 * MB


def test_checkpointing_alone_when_accumulation_is_not_allowed():
    plan = hp.choose_interventions(1_000_000, 64, 1 * MB, 50 * MB, checkpoint_activation_factor=0.5,
                                   min_micro_batch=64)
    assert plan.rungs == ("checkpoint",) and plan.accumulation == 1 and plan.estimate == 48 * MB


def test_bf16_is_the_rung_after_checkpointing_and_only_where_it_lowers_the_estimate():
    # Micro-batches of at least 32 rows: k = 2 with checkpointing gives 16 + 16 MB > 30 MB; bf16 then
    # gives 18 + 8 MB at k = 2 (its 2 MB of weight copies cost less than the 8 MB it saves).
    plan = hp.choose_interventions(1_000_000, 64, 1 * MB, 30 * MB, checkpoint_activation_factor=0.5,
                                   min_micro_batch=32)
    assert plan.rungs == ("accumulate", "checkpoint", "bf16") and plan.accumulation == 2
    assert plan.estimate == 26 * MB and plan.fits


def test_bf16_skipped_when_the_state_dominates():
    # bf16 would add 2 MB of copies and save only 1 MB of activations: it is never taken.
    plan = hp.choose_interventions(1_000_000, 4, 500_000, 17 * MB, min_micro_batch=4)
    assert "bf16" not in plan.rungs and plan.rungs == ("add devices",) and not plan.fits
    assert plan.estimate == 18 * MB


def test_add_devices_when_the_state_alone_is_too_big():
    plan = hp.choose_interventions(1_300_000_000, 8, 1 * MB, 20 * 10**9)   # 16P = 20.8 GB > 20 GB
    assert plan.rungs == ("accumulate", "add devices") and not plan.fits
    assert plan.accumulation == 8 and "does not fit one device" in str(plan)


def test_add_devices_is_the_last_rung_and_names_devices_and_stage():
    # 1.3B parameters with Adam (16P = 20.8 GB) and 1 MB per example cannot fit a 16 GB card on one
    # device; the last rung names the fewest devices and the lowest ZeRO stage from helpers.sharding
    plan = hp.choose_interventions(1_300_000_000, 8, 1 * MB, 16 * 10**9)
    assert not plan.fits and plan.rungs[-1] == "add devices" == hp.planner.RUNGS[-1]
    fit = hp.smallest_fit(1_300_000_000, 16 * 10**9, int(8 * MB / plan.accumulation))
    assert (plan.devices, plan.zero_stage) == (fit.n_devices, fit.stage) and plan.devices > 1
    single = hp.choose_interventions(1_300_000_000, 8, 1 * MB, 21 * 10**9)
    assert single.fits and "add devices" not in single.rungs and (single.devices, single.zero_stage) == (1, None)


def test_gpt2_small_on_a_24_gb_card():
    # GPT-2 small (124.4M parameters, T = 1024), fused attention: 809 MB per sequence in fp32.
    # Accumulation alone fits: 4 micro-batches of 16 (1.99 GB + 16 x 809.8 MB).
    a = hp.gpt_activation_bytes(d=768, n_layers=12, n_heads=12, seq=1024, vocab=50257).total
    b = hp.gpt_activation_bytes(d=768, n_layers=12, n_heads=12, seq=1024, vocab=50257, value_bytes=2).total
    plan = hp.choose_interventions(124_400_000, 64, a, 24 * 10**9, optimizer="adamw", bf16_activation_factor=b / a)
    assert plan.rungs == ("accumulate",) and plan.accumulation == 4 and plan.fits
    # micro-batches of at least 32 sequences: bf16 is then what fits (2.24 GB + 32 x 507.8 MB at k = 2)
    plan = hp.choose_interventions(124_400_000, 64, a, 24 * 10**9, optimizer="adamw", bf16_activation_factor=b / a,
                                   min_micro_batch=32)
    assert plan.rungs == ("accumulate", "bf16") and plan.accumulation == 2 and plan.fits


def test_a_rung_that_does_not_help_is_skipped():
    # Measured factors above 1 (bf16 that grows the activations, checkpointing that saves nothing).
    plan = hp.choose_interventions(1_000_000, 8, 1 * MB, 20 * MB, bf16_activation_factor=1.1, checkpoint_activation_factor=1.0)
    assert plan.rungs == ("accumulate",) and plan.accumulation == 2 and plan.estimate == 20 * MB
    plan = hp.choose_interventions(1_000_000, 8, 1 * MB, 16_500_000, bf16_activation_factor=1.1, checkpoint_activation_factor=1.0)
    assert plan.rungs == ("accumulate", "add devices") and plan.accumulation == 8


def test_fixed_bytes_stay_whatever_the_ladder_does():
    # 16 + 10 + 8 MB; accumulate 2: 16 + 10 + 4 = 30 MB, the fixed 10 MB kept.
    plan = hp.choose_interventions(1_000_000, 8, 1 * MB, 30 * MB, fixed_bytes=10 * MB)
    assert plan.rungs == ("accumulate",) and plan.accumulation == 2 and plan.estimate == 30 * MB


def test_headroom_keeps_part_of_the_device_free():
    plan = hp.choose_interventions(1_000_000, 8, 1 * MB, 30 * MB, fixed_bytes=10 * MB, headroom=0.1)
    # 27 MB usable: k=2 (30 MB) no longer fits, k=4 (28 MB) neither, k=8 (27 MB) does.
    assert plan.accumulation == 8 and plan.usable_bytes == 27 * MB and plan.fits
    assert str(plan).endswith("of 30.0 MB (27.0 MB usable)")


@pytest.mark.parametrize("kwargs", [
    dict(n_params=1, batch=8, activation_bytes_per_example=1, device_bytes=1, headroom=1.0),
    dict(n_params=1, batch=8, activation_bytes_per_example=1, device_bytes=1, fixed_bytes=-1),
    dict(n_params=-1, batch=8, activation_bytes_per_example=1, device_bytes=1),
    dict(n_params=1, batch=0, activation_bytes_per_example=1, device_bytes=1),
    dict(n_params=1, batch=8, activation_bytes_per_example=1, device_bytes=1, bf16_activation_factor=0),
    dict(n_params=1, batch=8, activation_bytes_per_example=1, device_bytes=1, checkpoint_activation_factor=-1),
    dict(n_params=1, batch=8, activation_bytes_per_example=1, device_bytes=1, min_micro_batch=0),
])
def test_bad_arguments_are_refused_with_a_reason(kwargs):
    with pytest.raises(ValueError, match="must"):
        hp.choose_interventions(**kwargs)
