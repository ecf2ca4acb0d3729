"""Plausible wrong answers must fail their part's checks, with a message that names the part, gives a
hint and never shows the expected value.

The wrong answers are data, one file per exercise in tests/wrong_answers/<solution stem>.toml (or
<stem>.<folder>.toml where the exercise has a notebook in more than one folder of solutions/), not test
code: a reviewer reads the mistakes a part guards against as a list, and adding one is a few lines. Each
entry names the solution cell by its nbgrader grade_id (written by tools.nbgrader_metadata, stable when
cells move) and gives the code that replaces one solution region of that cell (the given code around it
stays, as in the student's copy). A file's [secrets] lists, per part, the expected figures that no
failure message may contain.

They run inside strict nbval's run of solutions/ (solutions/conftest.py), in the kernel that has just
run the solution up to the part's last check cell, so that they cost only their own cells: each wrong
answer replaces the region, and that cell and the following ones run up to the part's last check cell,
which must fail; after the part's wrong answers the solution's own cells run again, restoring the state,
and nbval goes on. `try_part` holds that logic; it takes the function that runs code in the kernel, so
that tests/test_wrong_answers.py can try it on a plain namespace.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path

from tools import course

FOLDER = course.ROOT / "tests" / "wrong_answers"
FAILURES = {"AssertionError", "WrongAnswer", "ClaimFailed"}
REGION = re.compile(r"^([ \t]*)### BEGIN SOLUTION\n(.*?)^[ \t]*### END SOLUTION\n?", re.M | re.S)

# run(code) -> None when the code ran, or (exception name, its message) when it raised
Runner = Callable[[str], "tuple[str, str] | None"]


def files() -> list[Path]:
    return sorted(FOLDER.glob("*.toml"))


def solution_of(spec: Path) -> Path:
    """The solution notebook a file of wrong answers is for."""
    stem, _, folder = spec.stem.partition(".")
    found = [p for p in course.notebooks("solutions") if p.stem == stem and folder in ("", p.parent.name)]
    if len(found) != 1:
        raise ValueError(f"{spec.name}: no single solution notebook named {stem}.ipynb"
                         + (f" in solutions/{folder}/" if folder else " (name the folder: <stem>.<folder>.toml)"))
    return found[0]


def spec_of(solution: Path) -> Path | None:
    """The file of wrong answers for a solution notebook, if it has one."""
    for name in (f"{solution.stem}.{solution.parent.name}.toml", f"{solution.stem}.toml"):
        if (FOLDER / name).exists():
            return FOLDER / name
    return None


def substitute(source: str, code: str, region: int = 1) -> str:
    """`source` with its `region`-th solution region (1-based) replaced by `code`, at the marker's indent."""
    matches = list(REGION.finditer(source))
    if not 1 <= region <= len(matches):
        raise ValueError(f"the cell has {len(matches)} solution region(s), not a region {region}")
    m = matches[region - 1]
    body = "".join(m.group(1) + line if line.strip() else line for line in code.strip("\n").splitlines(True))
    return source[:m.start()] + body + "\n" + source[m.end():]


def part_of(grade_id: str) -> str:
    m = re.match(r"(ex\d+-part\d+)-", grade_id)
    if not m:
        raise ValueError(f"{grade_id}: not the grade_id of a part's cell (exNN-partN-...)")
    return m.group(1)


def _grade_id(cell) -> str:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or ""


def plan(spec: Path, cells: list) -> dict[int, list[tuple[int, dict, str, list[str]]]]:
    """The wrong answers by the index of the cell after which they run (their part's last check cell):
    for each, the index of the solution cell it replaces, the entry, its part and the part's secrets."""
    data = tomllib.loads(spec.read_text())
    ids = [_grade_id(c) for c in cells]
    secrets = {part: [str(s) for s in values] for part, values in data.get("secrets", {}).items()}
    by_check: dict[int, list] = {}
    for entry in data["wrong"]:
        if entry["part"] not in ids:
            raise ValueError(f"{spec.name}: no cell with grade_id {entry['part']}")
        first, part = ids.index(entry["part"]), part_of(entry["part"])
        checks = [j for j, g in enumerate(ids) if j > first and g.startswith(part + "-check")]
        if not checks:
            raise ValueError(f"{spec.name}: {part} has no check cell after {entry['part']}")
        by_check.setdefault(checks[-1], []).append((first, entry, part, secrets.get(part, [])))
    return by_check


def judge(what: str, part: str, failed_in: str, ename: str, evalue: str, secrets: list[str]) -> list[str]:
    """The problems with how a wrong answer failed (none when it failed as it should)."""
    message = f"{ename}: {evalue}"
    found = []
    if ename not in FAILURES or not failed_in.startswith(part + "-check"):
        found.append(f"failed with {message} in {failed_in}, not in a check of {part}")
    if not re.search(rf"\bpart {part.split('part')[-1]}\b", evalue, re.I):
        found.append(f"its message does not name the part: {message}")
    if len(evalue.split()) < 8:
        found.append(f"its message gives no hint: {message}")
    # check_answer shows the student's own value, which may share figures with the expected one
    shown = evalue.split(". Hint: ", 1)[-1] if ename == "WrongAnswer" else evalue
    leaked = [s for s in secrets if re.search(rf"(?<![\w.]){re.escape(s)}(?![\w]|\.\d)", shown)]
    if leaked:
        found.append(f"its message shows the expected {leaked}: {message}")
    return [f"{part}, wrong answer '{what}': {p}" for p in found]


def try_part(cells: list, check: int, wrong: list[tuple[int, dict, str, list[str]]], run: Runner) -> list[str]:
    """Run each wrong answer from its solution cell to cell `check` (the part's last check); the problems
    found. The solution's cells must have run before. After each wrong answer they run again from its
    cell on, up to the furthest cell that any wrong answer of the part has reached so far (the cell
    where it failed; the cells after it never ran with a wrong answer and still hold the solution's
    results), but only up to the next wrong answer's cell, which runs them itself: every wrong answer
    meets the solution's state before its cell, and the run goes on from the solution's state. A quick
    check right after a solution cell therefore spares its wrong answers the given measurement that
    follows it, and the restore its re-run."""
    def from_to(start: int, stop: int, first_source: str | None = None) -> tuple[int, str, tuple[str, str]] | None:
        for j in range(start, stop):
            if cells[j]["cell_type"] == "code":
                error = run(first_source if j == start and first_source is not None else cells[j]["source"])
                if error:
                    return j, _grade_id(cells[j]) or f"cell {j}", error
        return None

    problems = []
    wrong = sorted(wrong, key=lambda w: w[0])
    dirty = 0   # the cells before this one may hold a wrong answer's results (the furthest any one reached)
    for n, (first, entry, part, secrets) in enumerate(wrong):
        failed = from_to(first, check + 1, substitute(cells[first]["source"], entry["code"], entry.get("region", 1)))
        if failed:
            at, where, (ename, evalue) = failed
            problems += judge(entry["what"], part, where, ename, evalue, secrets)
            dirty = max(dirty, at + 1)
        else:
            problems.append(f"{part}, wrong answer '{entry['what']}': passed every check of {part}")
            dirty = check + 1
        # the next wrong answer runs its own cells again: restore what lies before it, or all after the last
        restored = from_to(first, min(dirty, wrong[n + 1][0]) if n + 1 < len(wrong) else dirty)
        if restored:
            problems.append(f"the solution's {restored[1]}, run again after the wrong answers, failed with "
                            f"{restored[2][0]}: {restored[2][1]}")
            break
    return problems
