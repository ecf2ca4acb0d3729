"""The other half of the wrong-answer runs (tests/test_wrong_answers.py says why they are split)."""

import pytest

from test_wrong_answers import FILES, check_wrong_answers, in_second


@pytest.mark.parametrize("spec", [f for f in FILES if in_second(f)], ids=lambda p: p.stem)
def test_wrong_answers_fail_their_part_with_a_hint(spec):
    check_wrong_answers(spec)


def test_the_two_halves_cover_every_wrong_answer_file():
    assert any(in_second(f) for f in FILES) and not all(in_second(f) for f in FILES)
