"""The memory ladder planner: which interventions a step needs to fit a device."""

import pytest

import helpers as hp

MB = 1_000_000


def test_a_step_that_fits_needs_nothing():
    plan = hp.choose_interventions(1_000_000, 64, 100_000, 100 * MB)
    assert plan.rungs == () and plan.accumulation == 1 and plan.micro_batch == 64
    assert plan.estimate == 16 * MB + 64 * 100_000 and plan.fits
    assert str(plan).startswith("nothing to change: micro-batch 64 x 1")


def test_bf16_alone_when_activations_dominate():
    # 16 MB state + 100 MB activations does not fit 80 MB; 18 MB + 50 MB does.
    plan = hp.choose_interventions(1_000_000, 100, 1 * MB, 80 * MB)
    assert plan.rungs == ("bf16",) and plan.estimate == 68 * MB and plan.fits


def test_bf16_skipped_when_the_state_dominates():
    # bf16 would add 2 MB of copies and save only 1 MB of activations: accumulate instead.
    plan = hp.choose_interventions(1_000_000, 4, 500_000, 17 * MB)
    assert plan.rungs == ("accumulate",) and plan.accumulation == 2 and plan.micro_batch == 2
    assert plan.estimate == 17 * MB


def test_checkpoint_then_accumulate_in_ladder_order():
    plan = hp.choose_interventions(1_000_000, 64, 1 * MB, 30 * MB, checkpoint_activation_factor=0.5)
    # bf16: 18 + 32 MB; checkpoint: 18 + 16 MB; accumulate 2: 18 + 8 MB.
    assert plan.rungs == ("bf16", "checkpoint", "accumulate")
    assert plan.accumulation == 2 and plan.micro_batch == 32 and plan.estimate == 26 * MB


def test_add_devices_when_the_state_alone_is_too_big():
    plan = hp.choose_interventions(1_300_000_000, 8, 1 * MB, 20 * 10**9)   # 16P = 20.8 GB > 20 GB
    assert plan.rungs[-1] == "add devices" and not plan.fits
    assert plan.accumulation == 8 and "does not fit one device" in str(plan)


def test_gpt2_small_on_a_24_gb_card():
    # GPT-2 small (124.4M parameters, T = 1024), fused attention: 809 MB per sequence in fp32.
    a = hp.gpt_activation_bytes(d=768, n_layers=12, n_heads=12, seq=1024, vocab=50257).total
    b = hp.gpt_activation_bytes(d=768, n_layers=12, n_heads=12, seq=1024, vocab=50257, value_bytes=2).total
    plan = hp.choose_interventions(124_400_000, 64, a, 24 * 10**9, optimizer="adamw", bf16_activation_factor=b / a)
    assert plan.rungs == ("bf16", "accumulate") and plan.accumulation == 2 and plan.fits


def test_a_rung_that_does_not_help_is_skipped():
    # Measured factors above 1 (bf16 that grows the activations, checkpointing that saves nothing).
    plan = hp.choose_interventions(1_000_000, 8, 1 * MB, 20 * MB, bf16_activation_factor=1.1, checkpoint_activation_factor=1.0)
    assert plan.rungs == ("accumulate",) and plan.accumulation == 2 and plan.estimate == 20 * MB


def test_fixed_bytes_stay_whatever_the_ladder_does():
    # 16 + 10 + 8 MB; bf16: 18 + 10 + 4 = 32 MB; accumulate 2: 18 + 10 + 2 = 30 MB, the fixed 10 MB kept.
    plan = hp.choose_interventions(1_000_000, 8, 1 * MB, 30 * MB, fixed_bytes=10 * MB)
    assert plan.rungs == ("bf16", "accumulate") and plan.accumulation == 2 and plan.estimate == 30 * MB


def test_headroom_keeps_part_of_the_device_free():
    plan = hp.choose_interventions(1_000_000, 8, 1 * MB, 30 * MB, fixed_bytes=10 * MB, headroom=0.1,
                       bf16_activation_factor=1.0)   # bf16 halves nothing here, so the ladder skips it
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
])
def test_bad_arguments_are_refused_with_a_reason(kwargs):
    with pytest.raises(ValueError, match="must"):
        hp.choose_interventions(**kwargs)
