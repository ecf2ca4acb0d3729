import pytest

import helpers as hp


def test_sixteen_bytes_per_parameter_for_adam_in_fp32():
    b = hp.bytes_per_param("adam", "fp32")
    assert (b.parameters, b.gradients, b.optimizer, b.total) == (4, 4, 8, 16)
    assert str(b) == "16P = 4 params + 4 grads + 8 optimizer"


def test_mixed_precision_and_other_optimizers():
    assert hp.bytes_per_param("adamw", "mixed").total == 18  # lesson 02 and exercise 7 measure 2 bytes of copies
    assert str(hp.bytes_per_param("adam", "mixed")) == "18P = 4 params + 4 grads + 8 optimizer + 2 weight copy (16-bit)"
    assert hp.bytes_per_param("sgd").total == 8
    assert hp.bytes_per_param("momentum").total == 12


def test_persistent_bytes_of_the_six_layer_stack():
    P = 6 * (2048 * 2048 + 2048)
    assert P == 25_178_112
    assert hp.persistent_bytes(P) == 402_849_792  # the 403 MB of the text


def test_linear_stack_activations():
    assert hp.linear_stack_activation_bytes(256, [2048] * 6) == 12_582_912  # "about 13 MB"
    assert hp.linear_stack_activation_bytes(256, [2048] * 6, dtype_bytes=2) == 6_291_456


def test_gpt2_activation_count():
    a = hp.gpt_activation_bytes(d=768, n_layers=12, n_heads=12, seq=1024, vocab=50257, value_bytes=4)
    assert a.blocks == 16 * 768 * 1024 * 12 * 4
    assert a.logits == 50257 * 1024 * 4
    m = hp.gpt_activation_bytes(d=768, n_layers=12, n_heads=12, seq=1024, vocab=50257, value_bytes=2,
                                fused_attention=False)
    assert m.blocks == (16 * 768 + 12 * 1024) * 1024 * 12 * 2 and m.total == m.blocks + m.logits


@pytest.mark.parametrize("call", [
    lambda: hp.persistent_bytes(-5),
    lambda: hp.linear_stack_activation_bytes(-1, [8]),
    lambda: hp.linear_stack_activation_bytes(4, [8, 0]),
    lambda: hp.gpt_activation_bytes(d=-768, n_layers=1, n_heads=1, seq=1, vocab=1),
])
def test_negative_or_zero_sizes_say_what_to_pass(call):
    with pytest.raises(ValueError, match=r"must be a positive number, got .*: pass"):
        call()


def test_unknown_optimizer_or_precision_lists_choices():
    with pytest.raises(ValueError, match="use one of sgd, momentum, adam, adamw"):
        hp.bytes_per_param("lion")
    with pytest.raises(ValueError, match="use one of fp32, mixed"):
        hp.bytes_per_param("adam", "fp8")
