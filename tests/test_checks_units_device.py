import functools
import inspect
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import helpers as hp


def test_check_prints_one_line_when_true(capsys):
    hp.check("two is bigger", 2 > 1, "2 vs 1")
    assert capsys.readouterr().out == "check passed: two is bigger (2 vs 1)\n"


def test_check_raises_with_detail_when_false():
    with pytest.raises(hp.ClaimFailed, match=r"peak exceeds 16P \(400 vs 403\)"):
        hp.check("peak exceeds 16P", 400 > 403, "400 vs 403")


def test_check_refuses_non_bool_conditions():
    with pytest.raises(TypeError, match="compare explicitly"):
        hp.check("a number is not a claim", 3)  # type: ignore[arg-type]


def _bool_conditions():
    import jax.numpy as jnp
    import numpy as np
    import torch

    return {
        "python bool": 2 > 1,
        "numpy bool from a numpy float comparison": np.float64(2) > 1,
        "numpy bool_": np.bool_(True),
        "0-d numpy bool array": np.array(True),
        "0-d torch bool tensor": torch.tensor(2.0) > 1,
        "0-d JAX bool array": jnp.array(2.0) > 1,
    }


@pytest.mark.parametrize("kind", list(_bool_conditions()))
def test_check_accepts_every_kind_of_bool(kind, capsys):
    condition = _bool_conditions()[kind]
    hp.check(kind, condition)
    assert capsys.readouterr().out == f"check passed: {kind}\n"
    with pytest.raises(hp.ClaimFailed, match=kind):
        hp.check(kind, ~condition if not isinstance(condition, bool) else not condition)


def _non_bool_conditions():
    import jax.numpy as jnp
    import numpy as np
    import torch

    return {
        "int": 3,
        "float": 1.0,
        "None": None,
        "numpy float": np.float64(2.0),
        "0-d numpy float array": np.array(2.0),
        "numpy bool array": np.array([True, True]),
        "0-d torch float tensor": torch.tensor(2.0),
        "torch bool tensor of shape (2,)": torch.tensor([True, True]),
        "0-d JAX float array": jnp.array(2.0),
        "JAX bool array of shape (2,)": jnp.array([True, True]),
    }


@pytest.mark.parametrize("kind", list(_non_bool_conditions()))
def test_check_rejects_numbers_and_non_scalar_or_non_bool_arrays(kind):
    with pytest.raises(TypeError, match="needs a bool condition.*compare explicitly"):
        hp.check(kind, _non_bool_conditions()[kind])  # type: ignore[arg-type]


def test_check_asks_to_reduce_an_array_of_bools():
    import numpy as np

    with pytest.raises(TypeError, match=r"shape \(2,\).*reduce an array to one bool"):
        hp.check("elementwise", np.array([1, 2]) < 3)  # type: ignore[arg-type]


def test_checks_module_imports_no_framework():

    # Load checks.py on its own (not through the package) so only its own imports count.
    code = ("import sys, importlib.util as u; s = u.spec_from_file_location('c', 'helpers/checks.py'); "
            "c = u.module_from_spec(s); s.loader.exec_module(c); c.check('plain', True); "
            "print(sorted(m for m in ('torch', 'jax', 'numpy') if m in sys.modules))")
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=root).stdout
    assert out.splitlines()[-1] == "[]"


def test_skip_says_why_and_needs_a_reason(capsys):
    hp.cannot_check("bf16 speedup", "no GPU here")
    assert "check skipped: bf16 speedup (no GPU here)" in capsys.readouterr().out
    with pytest.raises(ValueError, match="needs a reason"):
        hp.cannot_check("bf16 speedup", "")


def test_check_answer_passes_the_answer_whatever_its_type(capsys):
    import numpy as np
    import torch

    digest = hp.answer_digest("part 2: switch batch", 2048)
    for value in (2048, 2048.0, np.int64(2048), np.float32(2048), torch.tensor(2048)):
        hp.check_answer("part 2: switch batch", value, digest)
    assert capsys.readouterr().out == "check passed: part 2: switch batch\n" * 5


def test_check_answer_names_the_part_and_gives_the_hint_but_not_the_answer():
    digest = hp.answer_digest("part 2: (a, w)", (2_097_152, 16_777_216))
    with pytest.raises(hp.WrongAnswer, match=r"^part 2: \(a, w\): \[2097152, 4\] is not the expected answer "
                       r"yet\. Hint: w is one weight matrix$") as err:
        hp.check_answer("part 2: (a, w)", (2_097_152, 4), digest, hint="w is one weight matrix")
    assert isinstance(err.value, AssertionError) and "16777216" not in str(err.value)


def test_check_answer_without_the_value_names_the_answer_and_gives_the_hint_only():
    digest = hp.answer_digest("part 1: c", 4)
    with pytest.raises(hp.WrongAnswer, match=r"^part 1: c is not what the question asks for\. Hint: count them$") as err:
        hp.check_answer("part 1: c", 3, digest, hint="count them", show_value=False)
    assert "3" not in str(err.value) and "yet" not in str(err.value)
    hp.check_answer("part 1: c", 4, digest, show_value=False)


def test_answer_digests_are_salted_with_the_name_and_ignore_container_details():
    assert hp.answer_digest("part 1", 3) != hp.answer_digest("part 2", 3)
    assert hp.answer_digest("p", (1, 2)) == hp.answer_digest("p", [1, 2])
    assert hp.answer_digest("p", {"b": 2, "a": {3, 1}}) == hp.answer_digest("p", {"a": {1, 3}, "b": 2})
    assert hp.answer_digest("p", 1 / 3) == hp.answer_digest("p", 0.3333333) != hp.answer_digest("p", 0.3333)
    assert hp.answer_digest("p", True) != hp.answer_digest("p", 1) and hp.answer_digest("p", "1") != hp.answer_digest("p", 1)


def test_check_answer_refuses_what_it_cannot_compare():
    import numpy as np

    with pytest.raises(TypeError, match=r"got ndarray: convert it first"):
        hp.answer_digest("p", np.array([1, 2]))
    with pytest.raises(ValueError, match="needs the answer's name and its digest"):
        hp.check_answer("p", 1, "")


@pytest.fixture(autouse=True)
def fresh_answers():
    """What a kernel restart does to the answers check_answer and answer_digest counted (before and after)."""
    from helpers import checks
    checks._forget_answers()
    yield checks
    checks._forget_answers()


_REFUSAL = r"^part 3: k_top: too many different answers were tried in this kernel: a check is not a search; restart the kernel"


def _search_by_check(name, digest, values):
    for value in values:
        try:
            hp.check_answer(name, value, digest, hint="round down")
            return value
        except hp.WrongAnswer as err:
            last = err
    raise last


def test_a_loop_over_answer_digest_is_refused_before_it_finds_the_answer():
    digest = hp.answer_digest("part 3: k_top", 22)   # the author's digest, computed once: free
    with pytest.raises(hp.WrongAnswer, match=_REFUSAL):
        next(k for k in range(-64, 1) if hp.answer_digest("part 3: k_top", k) == digest)


def test_a_loop_over_answer_digest_in_a_fresh_kernel_is_refused_too():
    with pytest.raises(hp.WrongAnswer, match=_REFUSAL):
        next(k for k in range(-64, 1) if hp.answer_digest("part 3: k_top", k) == "1558fe5ab61afbbb")


def test_a_loop_over_check_answer_is_refused_and_never_passes():
    digest = hp.answer_digest("part 3: k_top", 22)
    with pytest.raises(hp.WrongAnswer, match=_REFUSAL):
        _search_by_check("part 3: k_top", digest, range(-42, 23))   # 65 values, the answer last


def test_the_refusal_sticks_for_the_right_value_and_answer_digest_until_the_reset(fresh_answers, capsys):
    digest = hp.answer_digest("part 3: k_top", 22)
    with pytest.raises(hp.WrongAnswer):
        _search_by_check("part 3: k_top", digest, range(7))
    with pytest.raises(hp.WrongAnswer, match=_REFUSAL):
        hp.check_answer("part 3: k_top", 22, digest)
    with pytest.raises(hp.WrongAnswer, match=_REFUSAL):
        hp.answer_digest("part 3: k_top", 22)
    fresh_answers._forget_answers()   # a kernel restart
    hp.check_answer("part 3: k_top", 22, digest)
    assert capsys.readouterr().out == "check passed: part 3: k_top\n"


def test_a_student_who_tries_a_few_wrong_values_and_repeats_them_passes(capsys):
    digest = hp.answer_digest("part 3: k_top", 22)
    for value in (23, 21, 17, 23, 23.0, 21, 17, 23):   # 3 different wrong values, each tried again
        with pytest.raises(hp.WrongAnswer, match="is not the expected answer yet"):
            hp.check_answer("part 3: k_top", value, digest, hint="round down")
    hp.check_answer("part 3: k_top", 22, digest)
    hp.check_answer("part 3: k_top", 22, digest)   # the right value again, as a check run twice
    assert capsys.readouterr().out == "check passed: part 3: k_top\n" * 2


def test_the_count_is_per_name_and_the_right_value_never_counts(capsys):
    top, first = hp.answer_digest("part 3: k_top", 22), hp.answer_digest("part 3: first_update", 2)
    for value in range(6):   # six different wrong values: the limit, not past it
        with pytest.raises(hp.WrongAnswer, match="is not the expected answer yet"):
            hp.check_answer("part 3: k_top", value, top)
        hp.check_answer("part 3: k_top", 22, top)
    with pytest.raises(hp.WrongAnswer, match=_REFUSAL):
        hp.check_answer("part 3: k_top", 6, top)
    hp.check_answer("part 3: first_update", 2, first)   # another name: not refused
    with pytest.raises(hp.WrongAnswer, match="is not the expected answer yet"):
        hp.check_answer("part 3: first_update", 3, first)


def test_check_answer_with_two_defensible_answers_passes_either_and_counts_neither(fresh_answers, capsys):
    both = (fresh_answers._digest("part 3: reads", {"gelu": {"h1", "pieces"}}),
            fresh_answers._digest("part 3: reads", {"gelu": {"pieces"}}))   # the literals a check cell holds
    for value in range(6):   # six different wrong values: the limit, not past it
        with pytest.raises(hp.WrongAnswer, match=r"^part 3: reads is not what the question asks for"):
            hp.check_answer("part 3: reads", {"gelu": {f"v{value}"}}, both, show_value=False)
        hp.check_answer("part 3: reads", {"gelu": {"h1", "pieces"}}, both, show_value=False)
        hp.check_answer("part 3: reads", {"gelu": {"pieces"}}, both, show_value=False)
    assert capsys.readouterr().out == "check passed: part 3: reads\n" * 12
    with pytest.raises(hp.WrongAnswer, match=r"^part 3: reads: too many different answers"):
        hp.check_answer("part 3: reads", {"gelu": {"h1"}}, both, show_value=False)
    with pytest.raises(ValueError, match="needs the answer's name and its digest"):
        hp.check_answer("part 3: other", 1, ())


def test_a_check_that_compares_the_digest_itself_counts_only_the_values_other_than_its_expected_one(fresh_answers):
    expected = fresh_answers._digest("part 2: w", 4_194_304)   # the literal the check cell holds

    def check(value):   # a check that words its own message, with hints for known wrong answers (exercise 1's w)
        return hp.answer_digest("part 2: w", value, expected=expected) == expected

    for value in (1_048_576, 2_097_152, 25_165_824, 6_291_456, 3, 4):   # six different wrong values, the first too
        assert not check(value)
        assert check(4_194_304) and check(4_194_304.0)   # the right value, between the tries, never counts
    with pytest.raises(hp.WrongAnswer, match=r"^part 2: w: too many different answers"):
        check(5)
    assert fresh_answers._EXPECTED["part 2: w"] == {expected}


def test_without_expected_the_first_value_is_taken_for_the_authors_and_the_right_one_counts(fresh_answers):
    expected = fresh_answers._digest("part 2: w", 4_194_304)
    assert hp.answer_digest("part 2: w", 1_048_576) != expected   # a student's wrong value, first: free
    assert hp.answer_digest("part 2: w", 4_194_304) == expected   # the right one: counted
    assert fresh_answers._TRIED["part 2: w"] == {expected}


def _tolerance_check(name, extra, measured={"fp32": 783_684, "bf16+accum4": 0}, tolerance=68_198):
    """A check that compares with a tolerance, as exercise 17's part 2 does (its CPU figures): it names the variants
    that missed, and counts the whole answer as one try when one does."""
    missed = [k for k in measured if not abs(extra[k] - measured[k]) <= tolerance]
    hp.count_try(name, extra, tolerance, passed=not missed)
    if missed:
        raise AssertionError(f"{name} ({', '.join(missed)}): not within the tolerance; hint: work it out")


_PART2 = r"^part 2: extra_if_kept: too many different answers were tried in this kernel: a check is not a search"


def test_a_grid_of_guesses_against_a_tolerance_check_is_refused_before_it_passes():
    step, found, last = 136_397, {}, None   # 0.1 x 4P, twice the tolerance: 11 guesses cover 0 .. 4P
    for k in range(11):
        try:
            _tolerance_check("part 2: extra_if_kept", {"fp32": k * step, "bf16+accum4": k * step})
        except AssertionError as err:   # a student keeps, per variant, the guess its message did not name
            last = err
            named = re.match(r"part 2: extra_if_kept \((.*)\)", str(err))
            found.update({v: k * step for v in ("fp32", "bf16+accum4") if named and v not in named.group(1)})
    assert isinstance(last, hp.WrongAnswer) and re.match(_PART2, str(last))
    assert found == {"bf16+accum4": 0}   # fp32's guess (the 7th) came after the refusal
    with pytest.raises(hp.WrongAnswer, match=_PART2):   # and the refusal holds for the right answer
        _tolerance_check("part 2: extra_if_kept", {"fp32": 783_684, "bf16+accum4": 0})


def test_a_few_misses_at_a_tolerance_then_the_right_value_pass_and_nudges_are_one_try():
    wrong = [1_363_968, 686_952, 907_984, 686_953, 686_952.4, 1_363_968]   # 3 different answers, nudged or again
    wrong += [2_000_000, 2_500_000, 3_000_000]   # a 4th, 5th and 6th: the limit, not past it
    for value in wrong:
        with pytest.raises(AssertionError, match="not within the tolerance"):
            _tolerance_check("part 2: extra_if_kept", {"fp32": value, "bf16+accum4": 0})
    _tolerance_check("part 2: extra_if_kept", {"fp32": 752_488, "bf16+accum4": 0})   # passed: never counted
    _tolerance_check("part 2: extra_if_kept", {"fp32": 790_000, "bf16+accum4": 0.0})


def test_count_try_refuses_until_the_reset_and_tells_values_apart_by_the_tolerance(fresh_answers):
    for k in range(7):
        hp.count_try("part 2: x", k * 10, 1) if k < 6 else None
    with pytest.raises(hp.WrongAnswer, match="^part 2: x: too many different answers"):
        hp.count_try("part 2: x", 70, 1)
    with pytest.raises(hp.WrongAnswer, match="^part 2: x: too many different answers"):
        hp.count_try("part 2: x", 3, 1, passed=True)
    fresh_answers._forget_answers()   # a kernel restart
    hp.count_try("part 2: x", 3, 1, passed=True)
    for value in (1.0, 1.2, 0.9, 1):   # one try: the same count of tolerances
        hp.count_try("part 2: y", {"fp32": value, "bf16": 2}, 0.5)
    for value in range(10, 16):   # without a tolerance: by the canonical form, 10 and 10.0 alike
        hp.count_try("part 2: z", float(value) if value % 2 else value)
    from helpers import checks
    assert len(checks._TRIED["part 2: y"]) == 1 and len(checks._TRIED["part 2: z"]) == 6


def test_a_name_salted_in_the_kernel_is_not_counted():
    import secrets

    salt = secrets.token_hex(8)   # a check's closure: its digest is in no source, and it may compare many values
    digest = hp.answer_digest(salt, 300)
    assert [b for b in range(290, 311) if hp.answer_digest(salt, b) == digest] == [300]
    assert hp.answer_digest(f"{salt} peak", 1) != hp.answer_digest(f"{salt} peak", 2)


def test_formatters():
    assert hp.fmt_bytes(402_849_792) == "402.8 MB"
    assert hp.fmt_bytes(27_935_700_000) == "27.94 GB"
    assert hp.fmt_ratio(1.0887) == "1.09x"
    assert hp.fmt_timed(12.345, "ms") == "~12.3 ms"
    assert hp.fmt_timed(1.5, "x") == "~1.5 x"
    assert hp.fmt_timed(1012.6, "ms") == "~1013 ms" and hp.fmt_timed(2.5e-5) == "~2.5e-05"


def test_profile_from_environment(monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "gpu")
    assert hp.profile() == "gpu" and hp.sized(cpu=1, gpu=2) == 2
    monkeypatch.setenv("COURSE_PROFILE", "CPU")
    assert hp.profile() == "cpu" and hp.sized(cpu=1, gpu=2) == 1


def test_unknown_profile_lists_the_valid_ones(monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "tpu")
    with pytest.raises(ValueError, match=r"'tpu' is not a size profile; set it to one of cpu, gpu"):
        hp.profile()


def test_profile_follows_the_device_when_unset(monkeypatch):
    import torch

    monkeypatch.delenv("COURSE_PROFILE", raising=False)
    assert hp.profile() == ("gpu" if torch.cuda.is_available() else "cpu")


def test_describe_names_framework_and_profile():
    import torch  # noqa: F401

    assert "torch on cpu" in hp.describe() and "size profile 'cpu'" in hp.describe()


def test_importing_helpers_leaves_xla_preallocation_alone():
    """Turning off XLA's GPU preallocation is the JAX notebooks' setup cell's job, named there."""
    code = ("import os; os.environ.pop('XLA_PYTHON_CLIENT_PREALLOCATE', None); import helpers; "
            "print(os.environ.get('XLA_PYTHON_CLIENT_PREALLOCATE'))")
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    assert out.stdout.strip() == "None"


def test_profile_before_any_framework_asks_the_driver(monkeypatch):
    """Before torch or jax is imported, the profile follows the NVIDIA driver's GPU list, so a GPU
    machine is not taken for a CPU; CUDA_VISIBLE_DEVICES='' hides the GPUs as it does for torch."""
    from helpers import device

    monkeypatch.delenv("COURSE_PROFILE", raising=False)
    monkeypatch.setattr(device.sys, "modules", {k: v for k, v in sys.modules.items()
                                                if k.split(".")[0] not in ("torch", "jax")})
    monkeypatch.setattr(device.os.path, "isdir", lambda p: p == "/proc/driver/nvidia/gpus")
    monkeypatch.setattr(device.os, "listdir", lambda p: ["0000:01:00.0"])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert hp.profile() == "gpu"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert hp.profile() == "cpu"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setattr(device.os, "listdir", lambda p: [])
    assert hp.profile() == "cpu"


def test_cpu_info_reads_model_and_flags(monkeypatch, tmp_path):
    import builtins

    from helpers import device
    fake = tmp_path / "cpuinfo"
    fake.write_text("processor\t: 0\nmodel name\t: Test CPU 9000\nflags\t\t: fpu sse avx2 fma\n\n"
                    "processor\t: 1\nmodel name\t: Test CPU 9000\nflags\t\t: fpu sse avx2 fma\n")
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda f, *a, **k: real_open(fake if f == "/proc/cpuinfo" else f, *a, **k))
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert device._cpu_info() == ("Test CPU 9000", frozenset({"fpu", "sse", "avx2", "fma"}))
    assert device._cpu_isa() == ", AVX2"


# without_helpers: a check runs the student's function with the helper that answers the part out of reach
from helpers.sharding import smallest_fit as _own_name  # noqa: E402  (a helper imported under a name of one's own)


def _writes_it(p):
    return 16 * p


def _calls_hp(p):
    return hp.zero_bytes(p, 2, 1).total


def _calls_module(p):
    import helpers.sharding as sharding
    return sharding.zero_bytes(p, 2, 1).total


def test_without_helpers_runs_the_students_own_code():
    assert hp.without_helpers(_writes_it, "zero_bytes", part="part 1", hint="h")(3) == 48


@pytest.mark.parametrize("fn", [_calls_hp, _calls_module])
def test_without_helpers_refuses_a_helper_and_restores_it(fn):
    with pytest.raises(hp.WrongAnswer, match=r"^part 1: your code calls hp\.zero_bytes.*Hint: write the sum"):
        hp.without_helpers(fn, "zero_bytes", part="part 1", hint="write the sum")(10)
    assert fn(10) == 16 * 10 - 4 * 10  # the helper works again once the check is over


def test_without_helpers_reaches_a_name_of_ones_own():
    with pytest.raises(hp.WrongAnswer):
        hp.without_helpers(lambda: _own_name(10, 10**9), "smallest_fit", part="p", hint="h")()
    assert _own_name is hp.smallest_fit


def test_without_helpers_blocks_a_lazily_loaded_helper():
    with pytest.raises(hp.WrongAnswer):
        hp.without_helpers(lambda: hp.saved_for_backward(None, [], ()), "saved_for_backward", part="p", hint="h")()
    assert "saved_for_backward" not in vars(hp) and callable(hp.saved_for_backward)


def test_without_helpers_names_a_helper_that_does_not_exist():
    with pytest.raises(AttributeError, match="no_such_helper"):
        hp.without_helpers(_writes_it, "no_such_helper", part="p", hint="h")


# what a namespace patch does not reach: a helper kept in a default, a closure, a partial or a container
def _in_a_default(p, _f=hp.zero_bytes):
    return _f(p, 2, 1).total


def _in_a_kwdefault(p, *, _f=hp.zero_bytes):
    return _f(p, 2, 1).total


def _in_a_closure():
    f = hp.zero_bytes
    return lambda p: f(p, 2, 1).total


_KEPT = [hp.zero_bytes]


def _in_a_container(p):
    return _KEPT[0](p, 2, 1).total


def _through_a_function_of_ones_own(p):
    return _in_a_default(p)


@pytest.mark.parametrize("fn", [_in_a_default, _in_a_kwdefault, _in_a_closure(),
                                functools.partial(hp.zero_bytes, n_devices=2), _in_a_container,
                                _through_a_function_of_ones_own],
                         ids=["default", "kwdefault", "closure", "partial", "container", "nested"])
def test_without_helpers_refuses_a_helper_kept_out_of_the_namespaces(fn):
    with pytest.raises(hp.WrongAnswer, match=r"^part 1: your code keeps hp\.zero_bytes.*Hint: write the sum"):
        hp.without_helpers(fn, "zero_bytes", part="part 1", hint="write the sum")(10)
    assert _in_a_default(10) == 16 * 10 - 4 * 10 and _KEPT[0] is hp.zero_bytes  # nothing was changed


# what neither reaches (trial t12ex18): a helper kept as a class attribute, behind a cache or in a ufunc; while
# the check runs, the blocked function's own code refuses, and _holds follows a cache's __wrapped__
class _Keeps:
    zero = staticmethod(hp.zero_bytes)


_CACHED = functools.lru_cache(None)(hp.zero_bytes)


def _in_a_class_attribute(p):
    return _Keeps().zero(p, 2, 1).total


def _through_a_cache(p):
    return _CACHED(p, 2, 1).total


def _in_a_ufunc(p):
    np = pytest.importorskip("numpy")
    return np.frompyfunc(hp.zero_bytes, 3, 1)(p, 2, 1).total


@pytest.mark.parametrize("fn, how", [(_in_a_class_attribute, "calls"), (_through_a_cache, "keeps"),
                                     (_in_a_ufunc, "calls")], ids=["class attribute", "lru_cache", "frompyfunc"])
def test_without_helpers_refuses_a_helper_however_it_is_called(fn, how):
    assert _through_a_cache(10) == 16 * 10 - 4 * 10  # a result the cache holds, before the check
    with pytest.raises(hp.WrongAnswer, match=rf"^part 1: your code {how} hp\.zero_bytes.*Hint: write the sum"):
        hp.without_helpers(fn, "zero_bytes", "sharded_bytes", part="part 1", hint="write the sum")(10)
    # the helper's own code is back, and works through every such reference
    assert fn(10) == hp.zero_bytes(10, 2, 1).total == hp.sharded_bytes([10], 2, 1).total == 16 * 10 - 4 * 10
    assert hp.zero_bytes.__code__.co_name == "zero_bytes" and not hp.checks._REFUSALS


def test_without_helpers_nested_restores_each_helper():
    inner = hp.without_helpers(_writes_it, "zero_bytes", part="inner", hint="h")
    outer = hp.without_helpers(lambda p: inner(p) + _in_a_class_attribute(p), "zero_bytes", part="outer", hint="h")
    with pytest.raises(hp.WrongAnswer, match=r"^outer: your code calls hp\.zero_bytes"):
        outer(10)
    assert _in_a_class_attribute(10) == 16 * 10 - 4 * 10 and not hp.checks._REFUSALS


# a blocked class: a class of one's own built on it is refused too (trial t5ex08: a subclass of hp.MemoryTracker
# defined at the top level measured inside part 2's function and passed)
class _OwnTracker(hp.MemoryTracker):
    pass


_BOX = types.SimpleNamespace(cls=_OwnTracker)  # an attribute: neither the globals' scan nor _holds looks inside


def _subclass_at_top_level():
    return _OwnTracker(None, None, [])


def _subclass_inside():
    class Mine(hp.MemoryTracker):
        pass
    return Mine(None, None, [])


def _subclass_out_of_the_namespaces():
    return _BOX.cls(None, None, [])


_AN_INSTANCE = hp.MemoryTracker(None, None, [])


def _an_instance_kept():
    return _AN_INSTANCE


@pytest.mark.parametrize("fn", [_subclass_at_top_level, _subclass_inside, _an_instance_kept,
                                hp.MemoryTracker],
                         ids=["top-level subclass", "subclass inside", "instance", "the class itself"])
def test_without_helpers_refuses_a_class_built_on_a_blocked_one(fn):
    with pytest.raises(hp.WrongAnswer, match=r"^part 2: your code .*hp\.MemoryTracker.*Hint: predict it"):
        args = [None, None, []] if fn is hp.MemoryTracker else []
        hp.without_helpers(fn, "MemoryTracker", part="part 2", hint="predict it")(*args)
    # everything works again once the check is over
    assert type(_OwnTracker(None, None, [])) is _OwnTracker and _AN_INSTANCE is not None
    assert hp.MemoryTracker.__name__ == "MemoryTracker" and _OwnTracker.__bases__ == (hp.MemoryTracker,)


def test_without_helpers_refuses_a_subclass_reached_past_the_namespaces():
    # only the blocked class's own __init__, refused while the check runs, sees this one
    with pytest.raises(hp.WrongAnswer, match=r"^part 2: your code makes a _OwnTracker, built on hp\.MemoryTracker"):
        hp.without_helpers(_subclass_out_of_the_namespaces, "MemoryTracker", part="part 2", hint="predict it")()
    assert type(_subclass_out_of_the_namespaces()) is _OwnTracker  # its __init__ is back


# watch_helpers: a part whose answer is a value; its solution cell counts the helper's calls, its check asks
@pytest.fixture
def fresh_kernel():
    """What a kernel restart does to the watch: no watch, no counted call (after the test as well)."""
    from helpers import checks
    checks._unwatch()
    checks._forget_calls()   # and no formula helper called since the import (the tests before this one called some)
    yield checks
    checks._unwatch()
    checks._forget_calls()


def test_watch_helpers_fails_a_check_after_a_call_until_the_kernel_restarts(fresh_kernel):
    hp.watch_helpers("zero_bytes")
    hp.zero_bytes(10, 2, 1)  # the student's cell reads the answer off the helper
    message = (r"^part 2: hp\.zero_bytes works out what this part asks, and it was called before this check passed "
               r"\(by your code, a scratch cell, or a given cell.*restart the kernel and run the notebook from the "
               r"top, answering without hp\.zero_bytes\. Hint: count it")
    with pytest.raises(hp.WrongAnswer, match=message):
        hp.assert_helpers_unused(part="part 2", hint="count it")
    with pytest.raises(hp.WrongAnswer, match=message):  # the check run again: the call is not forgotten
        hp.assert_helpers_unused(part="part 2", hint="count it")
    hp.watch_helpers("zero_bytes")  # the cell run again, without the call: the count goes on
    with pytest.raises(hp.WrongAnswer, match=message):
        hp.assert_helpers_unused(part="part 2", hint="count it")
    fresh_kernel._forget_calls()  # a kernel restart (the wrong answers' harness does this)
    hp.watch_helpers("zero_bytes")  # the cell run again, without the call
    hp.assert_helpers_unused(part="part 2", hint="count it")
    hp.zero_bytes(10, 2, 1)  # after the check the helper is free again, and the check passes when run twice
    hp.assert_helpers_unused(part="part 2", hint="count it")
    assert "zero_bytes" in vars(hp) and hp.zero_bytes is _zero_bytes_itself


@pytest.mark.parametrize("keep", [True, False])
def test_watch_helpers_with_the_same_helpers_goes_on_counting_whatever_keep_says(fresh_kernel, keep):
    hp.watch_helpers("zero_bytes")  # a given cell at the top of the part
    hp.zero_bytes(10, 2, 1)  # a scratch cell run before the solution cell
    hp.watch_helpers("zero_bytes", keep=keep)  # the solution cell's first line, or the given cell run again
    with pytest.raises(hp.WrongAnswer, match=r"^part 1: hp\.zero_bytes works out"):
        hp.assert_helpers_unused(part="part 1", hint="h")
    hp.watch_helpers("zero_bytes", keep=keep)  # run again after the report: still counted
    with pytest.raises(hp.WrongAnswer, match=r"^part 1: hp\.zero_bytes works out"):
        hp.assert_helpers_unused(part="part 1", hint="h")
    assert hp.zero_bytes is not _zero_bytes_itself  # still watched
    fresh_kernel._forget_calls()
    hp.watch_helpers("zero_bytes", keep=keep)
    hp.assert_helpers_unused(part="part 1", hint="h")  # nothing called since the restart: it passes, stops watching
    assert hp.zero_bytes is _zero_bytes_itself


def test_watch_helpers_with_other_helpers_keeps_an_earlier_call_for_a_later_watch_of_its_helper(fresh_kernel):
    hp.watch_helpers("zero_bytes")
    hp.zero_bytes(10, 2, 1)
    hp.watch_helpers("sharded_bytes")  # another part's watch: zero_bytes is not watched in it
    hp.zero_bytes(10, 2, 1)
    hp.assert_helpers_unused(part="part 2", hint="h")  # sharded_bytes was not called: it passes
    hp.watch_helpers("zero_bytes", keep=True)  # part 1's solution cell run again: the earlier call counts
    with pytest.raises(hp.WrongAnswer, match=r"^part 1: hp\.zero_bytes works out"):
        hp.assert_helpers_unused(part="part 1", hint="h")
    hp.watch_helpers("zero_bytes", "sharded_bytes")  # a watch of more helpers: still counted
    with pytest.raises(hp.WrongAnswer, match=r"^part 1: hp\.zero_bytes works out"):
        hp.assert_helpers_unused(part="part 1", hint="h")
    fresh_kernel._forget_calls()
    hp.watch_helpers("zero_bytes")
    hp.assert_helpers_unused(part="part 1", hint="h")
    assert hp.zero_bytes is _zero_bytes_itself


class _Compiled:
    def plan(self, k):
        return 8 * k


class _Child(_Compiled):
    pass


def test_watch_helpers_counts_a_method_of_a_class_and_restores_it(fresh_kernel):
    own, inherited = _Compiled.__dict__["plan"], "plan" not in _Child.__dict__
    hp.watch_helpers("zero_bytes", methods=[(_Compiled, "plan"), (_Child, "plan")])
    assert _Child().plan(2) == 16  # the answer read off the method, as off compile().memory_analysis()
    with pytest.raises(hp.WrongAnswer, match=r"^part 1: \S*_Child\.plan works out what this part asks.*Hint: h"):
        hp.assert_helpers_unused(part="part 1", hint="h")
    fresh_kernel._forget_calls()  # a kernel restart
    hp.watch_helpers("zero_bytes", methods=[(_Compiled, "plan"), (_Child, "plan")])  # the cell run again, without it
    hp.assert_helpers_unused(part="part 1", hint="h")
    assert _Compiled.__dict__["plan"] is own and inherited and "plan" not in _Child.__dict__ and _Child().plan(1) == 8


def test_watch_helpers_records_the_calls_it_is_asked_to_and_forgets_them_when_it_stops(fresh_kernel):
    hp.watch_helpers("zero_bytes", record=["first_below"])
    assert hp.watched_calls("first_below") == [] and hp.watched_calls("zero_bytes") == []  # zero_bytes: counted only
    found = hp.first_below(lambda b: 10 - b, 0, hi=20)
    hp.first_below(lambda b: 5 - b, 0, 9)
    (first, result), (second, _) = hp.watched_calls("first_below")
    assert (first["lo"], first["hi"], result, found) == (0, 20, 11, 11) and (second["lo"], second["hi"]) == (0, 9)
    with pytest.raises(hp.WrongAnswer, match=r"^p: hp\.first_below works out"):  # a recorded helper is watched too
        hp.assert_helpers_unused(part="p", hint="h")
    hp.watch_helpers("zero_bytes", record=["first_below"])  # the cell run again: a new record, the count goes on
    assert hp.watched_calls("first_below") == []
    with pytest.raises(hp.WrongAnswer, match=r"^p: hp\.first_below works out"):
        hp.assert_helpers_unused(part="p", hint="h")
    fresh_kernel._forget_calls()  # a kernel restart
    hp.assert_helpers_unused(part="p", hint="h")  # stops watching: nothing is recorded any more
    hp.first_below(lambda b: 10 - b, 0, 20)
    assert hp.watched_calls("first_below") == [] and hp.first_below.__module__ == "helpers.search"


def test_watch_helpers_restores_a_lazily_loaded_helper(fresh_kernel):
    hp.watch_helpers("saved_for_backward")
    assert "saved_for_backward" in vars(hp)
    hp.assert_helpers_unused(part="p", hint="h")
    assert "saved_for_backward" not in vars(hp) and callable(hp.saved_for_backward)


def test_watch_helpers_counts_a_call_through_the_helpers_own_module_and_a_modules_function(fresh_kernel):
    import types

    import helpers.sharding
    outside = types.ModuleType("outside")  # a module outside helpers, as jax.ad_checkpoint
    outside.answer = lambda: 42
    own = outside.answer
    hp.watch_helpers("zero_bytes", methods=[(outside, "answer")])
    helpers.sharding.zero_bytes(10, 2, 1)  # the submodule's name, not hp.zero_bytes
    with pytest.raises(hp.WrongAnswer, match=r"^p: hp\.zero_bytes works out"):
        hp.assert_helpers_unused(part="p", hint="h")
    fresh_kernel._forget_calls()  # a kernel restart
    hp.watch_helpers("zero_bytes", methods=[(outside, "answer")])
    assert outside.answer() == 42
    with pytest.raises(hp.WrongAnswer, match=r"^p: outside\.answer works out"):
        hp.assert_helpers_unused(part="p", hint="h")
    fresh_kernel._forget_calls()
    hp.watch_helpers("zero_bytes", methods=[(outside, "answer")])
    hp.assert_helpers_unused(part="p", hint="h")  # nothing called: it passes and stops watching
    assert helpers.sharding.zero_bytes is _zero_bytes_itself and hp.zero_bytes is _zero_bytes_itself
    assert outside.answer is own


class _Tracker:
    def __enter__(self):
        return 3


class _OwnTrackerBase(_Tracker):
    def __enter__(self):  # super() gives it a closure (__class__), as hp.MemoryTracker.__enter__ has
        return super().__enter__() + 1


def test_watch_helpers_counts_a_call_that_reaches_the_original_past_the_wrapper(fresh_kernel):
    # trial t14ex10 M1: hp.count_torch_ops.__wrapped__(...) and hp.MemoryTracker.__enter__.__wrapped__(tracker)
    kept_before = hp.zero_bytes  # a reference taken before the watch began
    answer, signature = hp.zero_bytes(10, 2, 1), inspect.signature(hp.zero_bytes)
    hp.watch_helpers("zero_bytes", methods=[(_OwnTrackerBase, "__enter__")])
    assert hp.zero_bytes.__wrapped__ is _zero_bytes_itself
    assert hp.zero_bytes.__wrapped__(10, 2, 1) == answer  # the original, past the wrapper: it answers, and counts
    with pytest.raises(hp.WrongAnswer, match=r"^p: hp\.zero_bytes works out"):
        hp.assert_helpers_unused(part="p", hint="h")
    fresh_kernel._forget_calls()  # a kernel restart
    hp.watch_helpers("zero_bytes", methods=[(_OwnTrackerBase, "__enter__")])
    kept_before(10, 2, 1)
    with pytest.raises(hp.WrongAnswer, match=r"^p: hp\.zero_bytes works out"):
        hp.assert_helpers_unused(part="p", hint="h")
    fresh_kernel._forget_calls()
    hp.watch_helpers("zero_bytes", methods=[(_OwnTrackerBase, "__enter__")])
    assert _OwnTrackerBase.__enter__.__wrapped__(_OwnTrackerBase()) == 4  # the method's own code, closure and all
    with pytest.raises(hp.WrongAnswer, match=r"^p: _OwnTrackerBase\.__enter__ works out"):
        hp.assert_helpers_unused(part="p", hint="h")
    fresh_kernel._forget_calls()
    hp.watch_helpers("zero_bytes", methods=[(_OwnTrackerBase, "__enter__")])
    assert inspect.signature(hp.zero_bytes) == signature  # the helper's own, not the counting stub's
    hp.assert_helpers_unused(part="p", hint="h")  # nothing called: it passes, and every function has its own code
    assert hp.zero_bytes is _zero_bytes_itself and _zero_bytes_itself.__code__.co_name == "zero_bytes"
    assert "refused" not in repr(_zero_bytes_itself.__code__) and _OwnTrackerBase().__enter__() == 4
    assert kept_before(10, 2, 1) == answer and inspect.signature(kept_before) == signature


def test_without_helpers_under_a_watch_names_the_helper_a_kept_reference_calls(fresh_kernel):
    # trial t19ex18's fix: each part of exercise 18 watches zero_bytes, sharded_bytes and smallest_fit while its
    # check runs the student's function without them; a reference kept as a class attribute then holds the watch's
    # wrapper (every one named `counted`), and its refusal must name the helper it wraps, not the last one blocked
    hp.watch_helpers("zero_bytes", "sharded_bytes", "smallest_fit")

    class Kept:
        zero = staticmethod(hp.zero_bytes)
    with pytest.raises(hp.WrongAnswer, match=r"^part 2: your code calls hp\.zero_bytes, .*Hint: h$"):
        hp.without_helpers(lambda p: Kept().zero(p, 2, 1).total, "zero_bytes", "sharded_bytes", "smallest_fit",
                           part="part 2", hint="h")(10)
    assert not hp.checks._REFUSALS and Kept().zero(10, 2, 1).total == 16 * 10 - 4 * 10  # its code is back
    with pytest.raises(hp.WrongAnswer, match=r"^part 2: hp\.zero_bytes works out"):  # and the call counted
        hp.assert_helpers_unused(part="part 2", hint="h")


# trial t22ex18 F1: exercise 18's check made its without_helpers wrapper while the part's watch ran, then ended the
# watch (assert_helpers_unused) and ran the student's function on drawn arguments: hp.zero_bytes, the helper itself
# again, was neither refused nor counted; and a refusal the student's code caught left no trace
def _calls_it_or_falls_back(p):
    try:
        return hp.zero_bytes(p, 2, 1).total
    except AssertionError:   # the refusal, caught: a table, or a guess, in its place
        return 12 * p


def test_without_helpers_made_under_a_watch_refuses_the_helper_after_the_watch_ended(fresh_kernel):
    hp.watch_helpers("zero_bytes", "sharded_bytes")
    kept = hp.zero_bytes  # the watch's wrapper, kept by the student's code while the watch ran
    checked = hp.without_helpers(_calls_hp, "zero_bytes", "sharded_bytes", part="part 1", hint="h")
    checked_kept = hp.without_helpers(lambda p: kept(p, 2, 1).total, "zero_bytes", part="part 1", hint="h")
    with pytest.raises(hp.WrongAnswer, match=r"^part 1: your code calls hp\.zero_bytes"):
        checked(10)
    hp.assert_helpers_unused(part="part 1", hint="h")  # nothing counted: the call was refused; the watch ends
    assert hp.zero_bytes is _zero_bytes_itself
    with pytest.raises(hp.WrongAnswer, match=r"^part 1: your code calls hp\.zero_bytes"):
        checked(10)
    with pytest.raises(hp.WrongAnswer, match=r"^part 1: your code (calls|keeps) hp\.zero_bytes"):
        checked_kept(10)
    assert _calls_hp(10) == kept(10, 2, 1).total == 16 * 10 - 4 * 10 and not hp.checks._REFUSALS  # all back


def test_without_helpers_made_before_a_watch_refuses_the_helper_while_it_runs(fresh_kernel):
    checked = hp.without_helpers(_calls_hp, "zero_bytes", part="part 1", hint="h")
    hp.watch_helpers("zero_bytes")
    with pytest.raises(hp.WrongAnswer, match=r"^part 1: your code calls hp\.zero_bytes"):
        checked(10)
    hp.assert_helpers_unused(part="part 1", hint="h")


def test_without_helpers_fails_a_refusal_the_function_caught(fresh_kernel):
    checked = hp.without_helpers(_calls_it_or_falls_back, "zero_bytes", part="part 1", hint="write the sum")
    with pytest.raises(hp.WrongAnswer, match=r"^part 1: your code calls hp\.zero_bytes.*Hint: write the sum$"):
        checked(10)

    def falls_back_to_a_table(p):
        try:
            return hp.zero_bytes(p, 2, 1).total
        except hp.WrongAnswer:
            return {1200: 14400}[p]   # no entry: the LookupError gives way to the refusal
    with pytest.raises(hp.WrongAnswer, match=r"^part 1: your code calls hp\.zero_bytes"):
        hp.without_helpers(falls_back_to_a_table, "zero_bytes", part="part 1", hint="h")(10)
    assert hp.without_helpers(_writes_it, "zero_bytes", part="part 1", hint="h")(3) == 48  # a clean run passes
    assert _calls_it_or_falls_back(10) == 120 and not hp.checks._REFUSALS


# trial t22ex18 F2: constants read off hp.zero_bytes in a cell above exercise 18's setup cell, before any watch, gave
# a right rule for any arguments; a formula helper's call from the package's import on counts in the first watch
def test_a_formula_helper_called_before_the_first_watch_counts_in_it(fresh_kernel):
    fresh_kernel._BEFORE_WATCH = set()  # the kernel just after `import helpers`
    hp.zero_bytes(1, 1, 0), hp.zero_bytes(2, 2, 0)  # a cell above the setup cell reads the bytes per parameter
    hp.watch_helpers("zero_bytes", "smallest_fit")  # the setup cell: the kernel's first watch
    assert fresh_kernel._BEFORE_WATCH is None
    with pytest.raises(hp.WrongAnswer, match=r"^part 1: hp\.zero_bytes works out"):
        hp.assert_helpers_unused(part="part 1", hint="h")
    fresh_kernel._forget_calls()  # a kernel restart: no call since
    hp.watch_helpers("zero_bytes", "smallest_fit")
    hp.assert_helpers_unused(part="part 1", hint="h")
    hp.zero_bytes(1, 1, 0)  # after the first watch, a call counts only while a watch runs
    hp.watch_helpers("zero_bytes")
    hp.assert_helpers_unused(part="part 1", hint="h")


def test_a_formula_helper_called_by_another_before_the_first_watch_counts_too(fresh_kernel):
    fresh_kernel._BEFORE_WATCH = set()
    hp.smallest_fit(10**9, 10**10)  # it calls zero_bytes, as a watch would count
    hp.watch_helpers("zero_bytes")
    with pytest.raises(hp.WrongAnswer, match=r"^p: hp\.zero_bytes works out"):
        hp.assert_helpers_unused(part="p", hint="h")


def test_every_formula_helper_notes_its_calls_before_the_first_watch():
    from helpers import watches
    for name in watches._FORMULAS:
        assert f'_note_call("{name}")' in inspect.getsource(getattr(hp, name)), (
            f"hp.{name} is in every watch's list (helpers/watches.py _FORMULAS) but does not note a call made before "
            "the first watch: add _note_call to its first line")


def test_watch_helpers_names_a_helper_that_does_not_exist():
    with pytest.raises(AttributeError, match="no_such_helper"):
        hp.watch_helpers("no_such_helper")


_zero_bytes_itself = hp.zero_bytes


def test_measured_once_measures_once_per_key(monkeypatch):
    """A check's measurement made once per kernel for what it measures (exercise 17), again for another key."""
    from helpers import checks as _checks
    monkeypatch.setattr(_checks, "_MEASURED", {})
    calls = []

    def measure():
        calls.append(1)
        return {"peak": len(calls)}

    first = _checks._measured_once("a step", ("cpu", b"\x01"), measure)
    assert _checks._measured_once("a step", ("cpu", b"\x01"), measure) is first and len(calls) == 1
    assert _checks._measured_once("a step", ("cpu", b"\x02"), measure) == {"peak": 2}
    assert _checks._measured_once("another step", ("cpu", b"\x01"), measure) == {"peak": 3}
