"""Tests of the format figures (helpers.formats), saved tensors and cast copies (helpers.saved_torch),
op dtypes and times (helpers.ops_torch), the crossover search (helpers.search) and HLO dots (helpers.program_text)."""

import time

import pytest
import torch
from torch import nn

from helpers.formats import FORMATS, float_format
from helpers.ops_torch import op_dtypes, op_seconds
from helpers.program_text import dot_operand_dtypes, hlo_schedule, _while_carries
from helpers.saved_torch import bytes_by_kind, copies_made, saved_for_backward
from helpers.search import first_below


@pytest.mark.parametrize("name, dtype", [("fp32", torch.float32), ("bf16", torch.bfloat16),
                                         ("fp16", torch.float16)])
def test_formats_match_torch_finfo(name, dtype):
    f, fi = float_format(name), torch.finfo(dtype)
    assert f.smallest_normal == fi.smallest_normal
    assert f.max == fi.max
    assert f.eps == fi.eps
    assert f.smallest_subnormal == float(torch.tensor(fi.smallest_normal * f.eps, dtype=dtype))
    assert f.bits == fi.bits


def test_tf32_has_fp32_range_and_fp16_precision():
    tf32 = FORMATS["tf32"]
    assert tf32.smallest_normal == FORMATS["fp32"].smallest_normal
    assert tf32.eps == FORMATS["fp16"].eps == 2.0 ** -10
    assert tf32.bits == 19
    assert "tf32" in str(tf32)


def test_unknown_format_is_an_error():
    with pytest.raises(ValueError, match="fp32, tf32, bf16, fp16"):
        float_format("fp8")


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def test_saved_tensors_in_fp32_reuse_parameters_and_input():
    net, x = _mlp(), torch.randn(5, 8)
    saved = saved_for_backward(lambda: net(x).sum(), net.parameters(), (x,))
    kinds = {s.kind for s in saved}
    assert "input" in kinds and "parameter" in kinds
    assert bytes_by_kind(saved) == {"weight copy": 0, "input copy": 0, "activation": 5 * 16 * 4}


def test_saved_tensors_under_autocast_include_bf16_copies():
    net, x = _mlp(), torch.randn(5, 8)

    def fwd():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return net(x).float().sum()

    by_kind = bytes_by_kind(saved_for_backward(fwd, net.parameters(), (x,)))
    # the input and the second weight are kept as bf16 copies; the first weight is not needed
    assert by_kind == {"weight copy": 16 * 4 * 2, "input copy": 5 * 8 * 2, "activation": 5 * 16 * 2}


def test_op_dtypes_sees_autocast_casts():
    net, x = _mlp(), torch.randn(5, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ops = op_dtypes(lambda: net(x))
    assert ("addmm", ("bfloat16", "bfloat16", "bfloat16"), "bfloat16") in ops
    assert ("_to_copy", ("float32",), "bfloat16") in ops
    assert op_dtypes(lambda: net(x))[-1][2] == "float32"


def test_op_seconds_times_every_operator_call_backward_included():
    net, x = _mlp(), torch.randn(5, 8, requires_grad=True)
    start = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        times = op_seconds(lambda: net(x).float().sum().backward())
    wall = time.perf_counter() - start
    assert len(times["addmm"]) == 2 and len(times["mm"]) >= 2  # two layers forward; their weights' gradients
    assert len(times["_to_copy"]) >= 4  # autocast's casts of both weights and the input
    assert all(t > 0 for ts in times.values() for t in ts)
    assert sum(map(sum, times.values())) < wall  # each call timed once, nested calls not again


@pytest.mark.parametrize("cross", [2, 3, 17, 500, 999, 1000])
def test_first_below_finds_the_crossing(cross):
    calls = []

    def diff(b):
        calls.append(b)
        return cross - 0.5 - b if b < 300 else (cross - 0.5 - b) * 3

    assert first_below(diff, 1, 1000) == cross
    assert len(calls) < 40


def test_first_below_needs_a_sign_change():
    with pytest.raises(ValueError, match="diff must be"):
        first_below(lambda b: 1, 1, 10)


def test_copies_made_counts_every_cast_weight_and_the_input():
    net, x = _mlp(), torch.randn(5, 8)

    def fwd():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return net(x)

    n_params = sum(p.numel() for p in net.parameters())
    assert copies_made(fwd, net.parameters(), (x,)) == {"weight copy": 2 * n_params,
                                                        "input copy": 5 * 8 * 2}
    assert copies_made(lambda: net(x), net.parameters(), (x,)) == {"weight copy": 0, "input copy": 0}


def test_first_below_is_quick_when_diff_is_linear_near_the_crossing():
    calls = []

    def diff(b):
        calls.append(b)
        return 1000.0 - 3 * b

    assert first_below(diff, 0, 10_000) == 334
    assert len(calls) <= 4


def test_dot_operand_dtypes_reads_both_hlo_spellings():
    before = ("  a.1 = bf16[4,8]{1,0} parameter(0)\n  b.2 = bf16[8,2]{1,0} parameter(1)\n"
              "  dot.3 = bf16[4,2]{1,0} dot(a.1, b.2), lhs_contracting_dims={1}\n")
    after = ("  %p0 = f32[4,8]{1,0} parameter(0)\n  %p1 = f32[8,2]{1,0} parameter(1)\n"
             "  ROOT %d = f32[4,2]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}\n")
    assert dot_operand_dtypes(before) == {("bf16", "bf16"): 1}
    assert dot_operand_dtypes(after) == {("f32", "f32"): 1}
    assert dot_operand_dtypes("no dots here") == {}


def test_while_carries_lists_each_loops_state_without_layouts():
    text = ("  %t = (s32[], f32[4]{0}) tuple(%a, %b)\n"
            "  %while.4 = (s32[], f32[4,8]{1,0}, bf16[12,4,8]{2,1,0}) while(%t), condition=%c, body=%b, "
            'metadata={op_name="jit(step)/jvp()/while" stack_frame_id=5}\n'
            "  %while.6 = (s32[], pred[]) while(%u), condition=%c2, body=%b2\n")
    assert _while_carries(text) == [("jit(step)/jvp()/while", ("s32[]", "f32[4,8]", "bf16[12,4,8]")),
                                   ("", ("s32[]", "pred[]"))]
    assert _while_carries("no loops here") == []


def test_hlo_schedule_lists_entry_instructions_in_order():
    text = ("HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[4]{0})->(f32[4]{0}, f32[])}\n\n"
            "%inner (x: f32[4]) -> f32[4] {\n  %x = f32[4]{0} parameter(0)\n  ROOT %n = f32[4]{0} negate(%x)\n}\n\n"
            "ENTRY %main.2 (p.1: f32[4]) -> (f32[4], f32[]) {\n"
            "  %p.1 = f32[4]{0} parameter(0), metadata={op_name=\"p\"}\n"
            "  %c = f32[] constant(0)\n"
            "  %fusion.3 = f32[4]{0} fusion(%p.1, %c), kind=kLoop, calls=%inner\n"
            "  ROOT %tuple = (f32[4]{0}, /*index=1*/f32[]) tuple(%fusion.3, %c)\n}\n")
    ops = hlo_schedule(text)
    assert [op.name for op in ops] == ["p.1", "c", "fusion.3", "tuple"]  # the entry only, in order
    assert [op.opcode for op in ops] == ["parameter", "constant", "fusion", "tuple"]
    assert ops[2].shape == "f32[4]" and ops[2].operands == ("p.1", "c")  # layout and attributes dropped
    assert ops[3].shape == "(f32[4], /*index=1*/f32[])" and ops[3].operands == ("fusion.3", "c")
    with pytest.raises(ValueError, match="no schedule"):
        hlo_schedule(text.replace("is_scheduled=true", "is_scheduled=false"))


def _until_an_address_is_reused(attempt, tries=500):
    """Call attempt() -> (freed address, later address, result) until the later allocation lands
    where the freed one was (the allocator decides; small same-size blocks come back quickly)."""
    for _ in range(tries):
        freed, later, result = attempt()
        if freed == later:
            return result
    pytest.skip(f"this allocator never reused a freed address in {tries} tries")


def test_an_activation_at_a_freed_copys_address_is_an_activation():
    torch.manual_seed(0)
    x, w = torch.randn(1024), nn.Parameter(torch.randn(512))

    def attempt():
        addresses = []

        def forward():
            copy = x.to(torch.bfloat16)  # an input copy (2 KiB) that nothing keeps ...
            addresses.append(copy.data_ptr())
            del copy
            h = torch.exp(w)             # ... then a 2 KiB activation (exp saves its output)
            addresses.append(h.data_ptr())
            return h

        saved = saved_for_backward(forward, [w], [x])
        return *addresses, saved

    saved = _until_an_address_is_reused(attempt)
    assert [(s.kind, s.nbytes) for s in saved] == [("activation", 2048)]


def test_copies_made_counts_a_copy_made_where_a_freed_one_was():
    torch.manual_seed(0)
    x = torch.randn(1024)

    def attempt():
        addresses = []

        def forward():
            for _ in range(2):
                copy = x.to(torch.bfloat16)  # two 2 KiB input copies, one after the other
                addresses.append(copy.data_ptr())
                del copy

        made = copies_made(forward, [], [x])
        return *addresses, made

    assert _until_an_address_is_reused(attempt) == {"weight copy": 0, "input copy": 2 * 2048}


def test_saved_tensors_take_a_batch_given_as_a_dict_or_a_tensor():
    net, x = _mlp(), torch.randn(5, 8)
    by_tuple = bytes_by_kind(saved_for_backward(lambda: net(x).sum(), net.parameters(), (x,)))
    assert bytes_by_kind(saved_for_backward(lambda: net(x).sum(), net.parameters(), {"x": x})) == by_tuple
    assert bytes_by_kind(saved_for_backward(lambda: net(x).sum(), net.parameters(), x)) == by_tuple
    assert {s.kind for s in saved_for_backward(lambda: net(x).sum(), net.parameters(), {"x": x})} >= {"input"}
