"""without_helpers(returns=...): the check's converter runs on the function's result while the helpers are still
refused, so a result that defers its work past the wrapper (trial t24ex18 F1: a generator, an int whose __eq__ calls
the helper) is refused, or fails the converter's own requirement, instead of passing."""

import pytest

import helpers as hp
from helpers import checks


@pytest.fixture(autouse=True)
def _calls_noted_here_stay_here(monkeypatch):  # a helper call before any watch would count in a later test's watch
    monkeypatch.setattr(checks, "_BEFORE_WATCH", None if checks._BEFORE_WATCH is None else set())


def _lazy(p):  # a generator: hp.zero_bytes runs only when the result is iterated
    yield hp.zero_bytes(p, 2, 1).total


class _LazyInt(int):  # an int whose == asks the helper
    def __eq__(self, other):
        return other == hp.zero_bytes(int(self), 2, 1).total

    __hash__ = int.__hash__


def test_returns_runs_under_the_refusal():
    refused = hp.without_helpers(_lazy, "zero_bytes", part="t", hint="h", returns=tuple)
    with pytest.raises(hp.WrongAnswer, match="your code calls hp.zero_bytes"):
        refused(10)
    equal = hp.without_helpers(_LazyInt, "zero_bytes", part="t", hint="h", returns=lambda r: r == 30)
    with pytest.raises(hp.WrongAnswer, match="your code calls hp.zero_bytes"):
        equal(10)


def test_without_returns_a_lazy_result_escapes_the_wrapper():  # why returns= exists
    assert tuple(hp.without_helpers(_lazy, "zero_bytes", part="t", hint="h")(10)) == (hp.zero_bytes(10, 2, 1).total,)


def test_returns_gives_what_the_converter_returns_and_its_failure():
    def plain_int(r):
        assert type(r) is int, "t: a plain int"
        return r

    wrapped = hp.without_helpers(lambda p: 3 * p, "zero_bytes", part="t", hint="h", returns=plain_int)
    assert wrapped(5) == 15 and type(wrapped(5)) is int
    lazy = hp.without_helpers(_LazyInt, "zero_bytes", part="t", hint="h", returns=plain_int)
    with pytest.raises(AssertionError, match="t: a plain int"):
        lazy(10)
    assert hp.without_helpers(lambda p: [p], "zero_bytes", part="t", hint="h", returns=tuple)(4) == (4,)
