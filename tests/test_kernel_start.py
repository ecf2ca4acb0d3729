"""The root conftest starts again a notebook kernel that dies while it starts (tools/kernel_start.py)."""

import nbval.kernel
import pytest

from tools import kernel_start


def _starts(failures: int):
    calls = []

    def start(*args, **kwargs):
        calls.append(args)
        if len(calls) <= failures:
            raise RuntimeError("Kernel died before replying to kernel_info")
        return "km", "kc"
    return start, calls


def test_nbval_starts_its_kernels_through_the_retry():
    assert nbval.kernel.start_new_kernel.__qualname__.startswith("retrying.")


def test_a_kernel_that_dies_twice_while_it_starts_is_started_a_third_time():
    start, calls = _starts(failures=2)
    assert kernel_start.retrying(start)("python") == ("km", "kc")
    assert len(calls) == 3


def test_a_kernel_that_dies_three_times_fails_with_its_own_error():
    start, calls = _starts(failures=3)
    with pytest.raises(RuntimeError, match="Kernel died"):
        kernel_start.retrying(start)("python")
    assert len(calls) == 3
