"""The one positive-number check behind every helper's argument errors (helpers/_validate.py)."""

import math

import numpy as np
import pytest

import helpers as hp
from helpers._validate import positive


@pytest.mark.parametrize("value", [1, 2.5, 1e-9, np.int64(3), np.float32(0.5)])
def test_positive_numbers_pass(value):
    positive("x", value, "hint")


@pytest.mark.parametrize("value", [1, 7, np.int32(4)])
def test_positive_whole_numbers_pass(value):
    positive("x", value, "hint", whole=True)


@pytest.mark.parametrize("value, whole", [(0, False), (-1, False), (math.nan, False), (True, False),
                                          ("3", False), (None, False), (2.5, True), (4.0, True)])
def test_anything_else_is_refused_saying_what_and_what_to_do(value, whole):
    kind = "whole number" if whole else "number"
    with pytest.raises(ValueError, match=rf"^n must be a positive {kind}, got .+: pass the count$"):
        positive("n", value, "pass the count", whole=whole)


@pytest.mark.parametrize("call, message", [
    (lambda: hp.persistent_bytes(0), r"n_params must be a positive number, got 0: pass the model's"),
    (lambda: hp.linear_stack_activation_bytes(8, [4, -1]), r"every width must be a positive number"),
    (lambda: hp.gpt_activation_bytes(d=64, n_layers=2, n_heads=0, seq=8, vocab=10), r"n_heads must be"),
    (lambda: hp.GPTConfig(vocab=0), r"GPTConfig.vocab must be a positive whole number, got 0: pass a count "
                                    r"such as the default 2048"),
    (lambda: hp.GPTConfig(seq=8.0), r"GPTConfig.seq must be a positive whole number, got 8.0"),
    (lambda: hp.synthetic_tokens(hp.GPTConfig(), 0), r"rows must be a positive whole number, got 0"),
    (lambda: hp.choose_interventions({"fp32": hp.StepBytes(1, 1)}, 2.5, 1), r"batch must be a positive whole number, got 2.5"),
    (lambda: hp.choose_interventions({"fp32": hp.StepBytes(1, 1)}, 8, 0), r"device_bytes must be a positive number, got 0"),
])
def test_every_helper_reports_its_own_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_make_step_and_measure_memory_check_their_counts():
    import torch

    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match=r"accum must be a positive whole number, got 0: pass the number"):
        hp.make_step(model, opt, False, 0)
    with pytest.raises(ValueError, match=r"steps must be a positive whole number, got 1.5"):
        hp.measure_memory(hp.Workload(lambda: None, model), steps=1.5)


def test_choose_interventions_takes_numpy_counts():
    plan = hp.choose_interventions({"fp32": hp.StepBytes(16_000, 10**6)}, np.int64(64), 10**9, max_accumulation=np.int64(8))
    assert type(plan.micro_batch) is int and plan.micro_batch * plan.accumulation == 64
