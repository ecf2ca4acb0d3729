"""Every committed notebook and solution prints its times and the ratios of those times by one rule.

hp.time_together prints one line per timed function, `NAME: ~T ms/call` (the median of its rounds),
and Timings.compare prints a ratio as `A / B: ~R x[, within the noise of this machine] (rounds ~LO x
to ~HI x)`: the ratio of the two medians and the range of the per-round ratios. This test reads the
committed outputs (the unmasked figures of the run that made them) and pairs them as follows:

- a time line is a whole output line `NAME: ~T ms/call`; it gives NAME its time from there on
  (a later time line for the same NAME, in the same cell or a later one, replaces it);
- a ratio line is an output line containing `(rounds ~LO x to ~HI x)`; its A and B are the pair of
  timed names for which `A / B: ~R x` occurs in the line (the longest such names); a ratio line may
  also carry its own times, `..., NAME ~T ms, ...` (a row of a table, e.g. `k =  4: measured ~33 ms,
  model ~21 ms, measured / model: ~1.57 x (rounds ...)`), which hold for that line only;
- for each ratio line: both names must have been timed at or before that line; R must equal T_A / T_B
  within the rounding of three printed significant figures (2%); LO <= R <= HI (same rounding); and
  the line says "within the noise of this machine" exactly when LO <= 1 <= HI.

A ratio line whose names were never timed fails too: a ratio is never printed without its times.
"""

import json
import re
from pathlib import Path

import pytest

from tools import layout

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = layout.notebooks("lessons", "solutions")  # never JupyterLab's .ipynb_checkpoints copies
TIME_LINE = re.compile(r"^(?P<name>.+): ~(?P<t>-?[0-9.e+-]+) ms/call$")
INLINE_TIME = re.compile(r"(?:^|[:,] )(?P<name>[A-Za-z][\w ]*?) ~(?P<t>[0-9.e+-]+) ms(?!/)")
RANGE = re.compile(r"\(rounds ~(?P<lo>[0-9.e+-]+) x to ~(?P<hi>[0-9.e+-]+) x\)")
NOISE = "within the noise of this machine"
ROUNDING = 0.02


def _output_lines(cell: dict) -> list[str]:
    text = ""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream" and out.get("name") == "stdout":
            text += "".join(out["text"])
    return text.splitlines()


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= ROUNDING * max(abs(a), abs(b))


def check_notebook(cells: list[dict]) -> list[str]:
    """The disagreements in one notebook's outputs, as readable lines (empty when all agree)."""
    times: dict[str, float] = {}
    problems: list[str] = []
    for index, cell in enumerate(cells):
        for line in _output_lines(cell):
            m = TIME_LINE.match(line)
            if m:
                times[m["name"]] = float(m["t"])
                continue
            spread = RANGE.search(line)
            if not spread:
                continue
            where = f"cell {index}: {line.strip()!r}"
            cpu = re.search(r" / .+, CPU time: ~(?P<r>[0-9.e+-]+) x", line)
            if cpu:   # Timings.compare(cpu=True): CPU times are not printed, so only its range is checked
                r, lo, hi = float(cpu["r"]), float(spread["lo"]), float(spread["hi"])
                if not (lo * (1 - ROUNDING) <= r <= hi * (1 + ROUNDING)):
                    problems.append(f"{where}: the ratio lies outside its rounds' range")
                if (NOISE in line) != (lo <= 1 <= hi):
                    problems.append(f"{where}: says {'' if NOISE in line else 'not '}'{NOISE}' "
                                    f"with rounds from {lo} to {hi}")
                continue
            line_times = times | {m["name"]: float(m["t"]) for m in INLINE_TIME.finditer(line)}
            pairs = [(a, b) for a in line_times for b in line_times if f"{a} / {b}: ~" in line]
            if not pairs:
                problems.append(f"{where}: a ratio printed without the times of its two variants")
                continue
            a, b = max(pairs, key=lambda p: len(p[0]) + len(p[1]))
            r = float(re.search(re.escape(f"{a} / {b}: ~") + r"([0-9.e+-]+) x", line)[1])
            lo, hi = float(spread["lo"]), float(spread["hi"])
            if not _close(r, line_times[a] / line_times[b]):
                problems.append(f"{where}: {a} {line_times[a]} ms / {b} {line_times[b]} ms is "
                                f"{line_times[a] / line_times[b]:.3g}, not {r}")
            if not (lo * (1 - ROUNDING) <= r <= hi * (1 + ROUNDING)):
                problems.append(f"{where}: the ratio lies outside its rounds' range")
            if (NOISE in line) != (lo <= 1 <= hi):
                problems.append(f"{where}: says {'' if NOISE in line else 'not '}'{NOISE}' "
                                f"with rounds from {lo} to {hi}")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_printed_ratios_agree_with_the_printed_times(path):
    problems = check_notebook(json.loads(path.read_text())["cells"])
    assert not problems, "\n".join(problems)


def _cell(*lines: str) -> dict:
    return {"outputs": [{"output_type": "stream", "name": "stdout", "text": "\n".join(lines) + "\n"}]}


def test_the_scan_catches_what_it_should():
    good = [_cell("store all: ~400 ms/call", "per block: ~434 ms/call"),
            _cell("per block / store all: ~1.09 x (rounds ~1.02 x to ~1.2 x)")]
    assert check_notebook(good) == []
    noise = [_cell("a: ~100 ms/call", "b: ~101 ms/call",
                   "    step time a / b: ~0.99 x, within the noise of this machine (rounds ~0.9 x to ~1.1 x)")]
    assert check_notebook(noise) == []
    contradicts = [_cell("store all: ~400 ms/call", "per block: ~434 ms/call",
                         "per block / store all: ~1.28 x (rounds ~1.1 x to ~1.4 x)")]
    assert "not 1.28" in check_notebook(contradicts)[0]
    direction_in_noise = [_cell("a: ~100 ms/call", "b: ~90 ms/call", "a / b: ~1.11 x (rounds ~0.95 x to ~1.2 x)")]
    assert NOISE in check_notebook(direction_in_noise)[0]
    untimed = [_cell("x / y: ~2 x (rounds ~1.9 x to ~2.1 x)")]
    assert "without the times" in check_notebook(untimed)[0]
    row = "k =  4: measured ~33 ms, model ~21 ms, measured / model: ~{} x (rounds ~1.2 x to ~2.7 x)"
    assert check_notebook([_cell(row.format("1.57"))]) == []
    assert "not 1.9" in check_notebook([_cell(row.format("1.9"))])[0]
    later = [_cell(row.format("1.57"), "measured / model: ~1.57 x (rounds ~1.2 x to ~2.7 x)")]
    assert "without the times" in check_notebook(later)[0]   # a row's times hold for its line only
    cpu_time = [_cell("a: ~100 ms/call", "b: ~50 ms/call", "a / b, CPU time: ~1.5 x (rounds ~1.4 x to ~1.6 x)")]
    assert check_notebook(cpu_time) == []   # CPU times are not the printed wall times
    assert NOISE in check_notebook([_cell("a / b, CPU time: ~1.5 x (rounds ~0.9 x to ~1.6 x)")])[0]
    assert "outside" in check_notebook([_cell("a / b, CPU time: ~1.9 x (rounds ~1.4 x to ~1.6 x)")])[0]


def test_strict_nbval_masks_the_noise_verdict():
    """Whether the rounds straddle 1 depends on the machine, so both verdicts must sanitize alike."""
    from test_notebook_hygiene import _sanitized

    from helpers.timing import Timings

    apart = Timings({"a": [2.0, 2.2, 2.1], "b": [1.0, 1.0, 1.0]}).compare("a", "b")
    noise = Timings({"a": [0.9, 1.2, 1.0], "b": [1.0, 1.0, 1.0]}).compare("a", "b")
    assert NOISE in noise and NOISE not in apart
    assert _sanitized(apart) == _sanitized(noise) == "a / b: ~<varies> x~<varies> x to ~<varies> x)"


def test_strict_nbval_masks_a_figure_printed_only_with_a_direction():
    """Lesson 03 prints its extra forward passes only when the rounds read a direction; both lines sanitize alike."""
    from test_notebook_hygiene import _sanitized

    from helpers.units import fmt_timed

    read = f"(per block - store all) / forward only, wall time: {fmt_timed(0.557)} (an observation)"
    unread = "(per block - store all) / forward only, wall time: not printed, no direction read"
    assert _sanitized(read) == _sanitized(unread) == "(per block - store all) / forward only, wall time: ~<varies> (an observation)"
    assert _sanitized("x: not printed") == "x: not printed"  # the rule needs its whole phrase
