"""Plausible wrong answers fail their part's checks, with a message that names the part, gives a hint and
never shows the expected value.

The wrong answers are data, one file per exercise in tests/wrong_answers/<solution stem>.toml, not test
code: a reviewer reads the mistakes a part guards against as a list, and adding one is a few lines. Each
entry names the solution cell by its nbgrader grade_id (written by tools.nbgrader_metadata, stable when
cells move) and gives the code that replaces one solution region of that cell (the given code around it
stays, as in the student's copy). A file's [secrets] lists, per part, the expected figures that no
failure message may contain.

One kernel per exercise (tools.execute's): the solution runs cell by cell; at a part with wrong answers,
each wrong answer replaces the region, and that cell and the following ones run up to the part's last
check cell, which must fail; then the solution's own cells run again, restoring the state, and the run
goes on. It stops after the last part that has wrong answers.
"""

from __future__ import annotations

import copy
import re
import tomllib
from pathlib import Path

import nbformat
import pytest
from nbclient.exceptions import CellExecutionError

from tools import course, execute

ROOT = course.ROOT
WRONG = ROOT / "tests" / "wrong_answers"
FILES = sorted(WRONG.glob("*.toml"))
FAILURES = {"AssertionError", "WrongAnswer", "ClaimFailed"}
REGION = re.compile(r"^([ \t]*)### BEGIN SOLUTION\n(.*?)^[ \t]*### END SOLUTION\n?", re.M | re.S)


def _solution(spec: Path) -> Path:
    """The solution a file of wrong answers is for: <stem>.toml, or <stem>.<folder>.toml where the
    exercise has a notebook in more than one folder of solutions/ (ex02.pytorch, ex02.jax)."""
    stem, _, folder = spec.stem.partition(".")
    found = [p for p in course.notebooks("solutions") if p.stem == stem and folder in ("", p.parent.name)]
    assert len(found) == 1, f"{spec.name}: no single solution notebook named {stem}.ipynb" + (
        f" in solutions/{folder}/" if folder else " (name the folder: <stem>.<folder>.toml)")
    return found[0]


def substitute(source: str, code: str, region: int = 1) -> str:
    """`source` with its `region`-th solution region (1-based) replaced by `code`, at the marker's indent."""
    matches = list(REGION.finditer(source))
    assert 1 <= region <= len(matches), f"the cell has {len(matches)} solution region(s), not a region {region}"
    m = matches[region - 1]
    body = "".join(m.group(1) + line if line.strip() else line for line in code.strip("\n").splitlines(True))
    return source[:m.start()] + body + "\n" + source[m.end():]


def test_substitute_keeps_the_given_code_and_the_indent():
    src = "def f():\n    ### BEGIN SOLUTION\n    return 2\n    ### END SOLUTION\n\nprint(f())"
    assert substitute(src, "x = 1\nreturn x") == "def f():\n    x = 1\n    return x\n\nprint(f())"


def test_each_wrong_answer_file_names_one_solution():
    for spec in FILES:
        assert _solution(spec).stem == spec.stem.partition(".")[0]


def _part(grade_id: str) -> str:
    m = re.match(r"(ex\d+-part\d+)-", grade_id)
    assert m, f"{grade_id}: not the grade_id of a part's cell (exNN-partN-...)"
    return m.group(1)


# make test runs one test module per xdist worker (loadscope), and these runs take minutes: half of the
# exercises (by their measured run time, not their number) run from tests/test_wrong_answers_second.py,
# so that the two workers share them.
SECOND = ("ex02", "ex05", "ex09", "ex10", "ex12", "ex14", "ex16", "ex18", "ex19")


def in_second(spec: Path) -> bool:
    return spec.stem[:4] in SECOND


@pytest.mark.parametrize("spec", [f for f in FILES if not in_second(f)], ids=lambda p: p.stem)
def test_wrong_answers_fail_their_part_with_a_hint(spec):
    check_wrong_answers(spec)


def check_wrong_answers(spec: Path) -> None:
    """Run one exercise's wrong answers through its checks (the module docstring says how)."""
    data = tomllib.loads(spec.read_text())
    path = _solution(spec)
    nb = nbformat.read(path, as_version=4)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    wrong: dict[int, list[dict]] = {}
    for entry in data["wrong"]:
        assert entry["part"] in ids, f"{spec.name}: no cell with grade_id {entry['part']}"
        wrong.setdefault(ids.index(entry["part"]), []).append(entry)
    secrets = {part: [str(s) for s in values] for part, values in data.get("secrets", {}).items()}
    client = execute.client(nb, path.parent, timeout=600)
    problems = []
    with client.setup_kernel():
        for i, cell in enumerate(nb.cells[:max(wrong) + 1]):
            for entry in wrong.get(i, []):
                part = _part(entry["part"])
                checks = [j for j, g in enumerate(ids) if j > i and g and g.startswith(part + "-check")]
                assert checks, f"{spec.name}: {part} has no check cell after {entry['part']}"
                problems += _try(client, nb, i, checks[-1], entry, part, secrets.get(part, []))
            if cell.cell_type == "code":
                client.execute_cell(cell, i)
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


def _try(client, nb, first: int, last: int, entry: dict, part: str, secrets: list[str]) -> list[str]:
    """Run the wrong answer's cell and those after it up to `last`; the problems with how it failed."""
    saved = nb.cells[first:last + 1]
    try:
        return _fails(client, copy.deepcopy(saved), first, entry, part, secrets)
    finally:
        nb.cells[first:last + 1] = saved  # nbclient stores each cell it ran successfully into the notebook


def _fails(client, cells, first: int, entry: dict, part: str, secrets: list[str]) -> list[str]:
    what = f"{part}, wrong answer '{entry['what']}'"
    cells[0].source = substitute(cells[0].source, entry["code"], entry.get("region", 1))
    for j, cell in enumerate(cells, start=first):
        if cell.cell_type != "code":
            continue
        try:
            client.execute_cell(cell, j)
        except CellExecutionError as err:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            message = f"{err.ename}: {err.evalue}"
            found = []
            if err.ename not in FAILURES or not grade_id.startswith(part + "-check"):
                found.append(f"failed with {message} in {grade_id or f'cell {j}'}, not in a check of {part}")
            if not re.search(rf"\bpart {part.split('part')[-1]}\b", err.evalue, re.I):
                found.append(f"its message does not name the part: {message}")
            if len(err.evalue.split()) < 8:
                found.append(f"its message gives no hint: {message}")
            # check_answer shows the student's own value, which may share figures with the expected one
            shown = err.evalue.split(". Hint: ", 1)[-1] if err.ename == "WrongAnswer" else err.evalue
            leaked = [s for s in secrets if re.search(rf"(?<![\w.]){re.escape(s)}(?![\w]|\.\d)", shown)]
            if leaked:
                found.append(f"its message shows the expected {leaked}: {message}")
            return [f"{what}: {p}" for p in found]
    return [f"{what}: passed every check of {part}"]
