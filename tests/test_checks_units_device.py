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


def test_skip_says_why_and_needs_a_reason(capsys):
    hp.skip("bf16 speedup", "no GPU here")
    assert "check skipped: bf16 speedup (no GPU here)" in capsys.readouterr().out
    with pytest.raises(ValueError, match="needs a reason"):
        hp.skip("bf16 speedup", "")


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
