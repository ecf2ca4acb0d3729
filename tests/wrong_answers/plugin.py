"""The exercises' own tests, inside strict nbval's run of every solution (loaded by the root conftest.py
for every nbval run; it acts on notebooks whose cells carry nbgrader metadata, i.e. solutions/).

nbval runs each solution in one kernel. Around each of its code cells this plugin adds what a student's
Restart-and-Run-All, second Shift-Enter or wrong answer would do, at the cost of those cells alone:

- it records which global names each cell binds (by object identity) and fails when a check cell
  (nbgrader `grade: true`, not a solution) rebinds a name another cell binds, or when a solution cell
  and another cell bind one name to values of different types: re-running the student's cell after
  a failed check would then break the next check;
- it runs every check cell once more, through nbval's own comparison with the committed outputs: a
  check that gives another result when run again fails;
- after a part's last check cell it runs the part's plausible wrong answers, the data beside this file
  (<solution stem>.toml, or <stem>.<folder>.toml where the exercise has a notebook per framework):
  each entry names the solution cell by its grade_id and gives the code that replaces one of its
  solution regions (a mistake that spans two answer cells of the part adds `[[wrong.also]]` tables, each
  with another cell's `part`, `code` and `region`). The first cell it changes and the following ones
  run up to the part's last check, which must fail
  with a message that names the part, gives a hint and shows none of the part's [secrets]; then the
  solution's cells run again, so that nbval goes on from the solution's state (a call of a helper that
  hp.watch_helpers watches counts until a kernel restarts: the counts are set back to 0 first, as a
  restart would; so are the different values check_answer and answer_digest counted per answer name, past a
  few of which they refuse the name, since the harness tries many wrong answers in one kernel). An entry with
  `scratch` (code) runs that code right after its solution cell, as a student's scratch cell would (a helper
  called there, say, that the part's watch counts); with `scratch_after` (a grade_id of an earlier cell) it runs
  right after that cell instead, and the wrong answer's run starts there (a scratch cell above the part). An entry with
  `visible = true` must fail the released exercise's checks: its cells run with their hidden tests left
  out, as `make exercises` leaves them out (a student's check cell runs only the visible part). `try_part` holds that
  logic; it takes the function that runs code, so tests/test_wrong_answers.py tries it without a kernel.

A wrong answer usually defines the part's function as the solution does, or leaves it as it was, so a
JAX check compiles the same program again for each one. The exercise's kernel therefore starts with
JAX's persistent compilation cache on, in a folder of its own that goes with the run: the same program
is loaded instead of compiled again (a deserialized executable is the same program, with the same
memory analysis; nbval still compares every output with the committed one).
"""

from __future__ import annotations

import copy
import json
import re
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from tools import layout

FOLDER = Path(__file__).resolve().parent
FAILURES = {"AssertionError", "WrongAnswer", "ClaimFailed"}
# run(code) -> None when the code ran, or (exception name, its message) when it raised
Runner = Callable[[str], "tuple[str, str] | None"]
_SNAPSHOT = "__rerun_ids = {k: id(v) for k, v in globals().items() if not k.startswith('_')}"
# run in an exercise's kernel before its first cell, so that JAX reads it when the notebook imports it
_JAX_CACHE = ("import os as __os\n__os.environ.update(JAX_COMPILATION_CACHE_DIR={!r}, "
              "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS='0', JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES='0')")
# run after each wrong answer, before the solution's cells run again: what a student's kernel restart does to
# hp.watch_helpers' counts (a call of a watched helper counts until the check passes or the kernel restarts, and
# a wrong answer may have made one), and to the different answers check_answer and answer_digest counted; the watch
# goes on. Nothing where the notebook never imported helpers.
_RESTART_WATCH = ("import sys as __wa_sys\n"
                  "if 'helpers.checks' in __wa_sys.modules:\n"
                  "    __wa_sys.modules['helpers.checks']._forget_calls()\n"
                  "    __wa_sys.modules['helpers.checks']._forget_answers()")
# and what a restart does to the programs the kernel started (a wrong answer's worker, beside which
# hp.without_helpers refuses to run a check): they end. In a kernel only (tests/test_wrong_answers.py runs the
# code in pytest's own process, whose programs are its own).
_END_PROGRAMS = ("import sys as __wa_sys\n"
                 "if 'helpers.checks' in __wa_sys.modules and 'ipykernel.kernelapp' in __wa_sys.modules:\n"
                 "    import os as __wa_os, signal as __wa_signal\n"
                 "    for __wa_pid in [int(p.split()[0]) for p in __wa_sys.modules['helpers.checks']._programs_running()]:\n"
                 "        __wa_os.kill(__wa_pid, __wa_signal.SIGKILL)\n"
                 "        __wa_os.waitpid(__wa_pid, 0)")
# and to the threads its code started (a wrong answer's worker thread, beside which hp.without_helpers refuses to run
# a check, trial t26ex08): they end. Python stops no thread from outside; SystemExit raised in one ends it at its next
# line of Python (a wrong answer's worker waits with a timeout, so it gets there).
_END_THREADS = ("import sys as __wa_sys\n"
                "if 'helpers.checks' in __wa_sys.modules and 'ipykernel.kernelapp' in __wa_sys.modules:\n"
                "    import ctypes as __wa_ctypes, threading as __wa_threading\n"
                "    for __wa_t in [t for t in __wa_threading.enumerate()\n"
                "                   if t.ident in __wa_sys.modules['helpers.checks']._STUDENT_THREADS]:\n"
                "        __wa_ctypes.pythonapi.PyThreadState_SetAsyncExc(__wa_ctypes.c_ulong(__wa_t.ident),\n"
                "                                                        __wa_ctypes.py_object(SystemExit))\n"
                "        __wa_t.join(30)")
_CHANGED = ("import json as __rerun_json\n"
            "print(__rerun_json.dumps({k: type(v).__name__ for k, v in globals().items() "
            "if not k.startswith('_') and __rerun_ids.get(k) != id(v)}))")


# ------------------------------------------------------------------------------ the wrong answers' data

def files() -> list[Path]:
    return sorted(FOLDER.glob("*.toml"))


def solution_of(spec: Path) -> Path:
    """The solution notebook a file of wrong answers is for."""
    stem, _, folder = spec.stem.partition(".")
    found = [p for p in layout.notebooks("solutions") if p.stem == stem and folder in ("", p.parent.name)]
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
    regions = layout.solution_regions(source)
    if not 1 <= region <= len(regions):
        raise ValueError(f"the cell has {len(regions)} solution region(s), not a region {region}")
    lines = source.split("\n")
    begin, end = regions[region - 1]
    indent = re.match(r"\s*", lines[begin]).group(0)
    body = [indent + line if line.strip() else line for line in code.strip("\n").split("\n")]
    return "\n".join(lines[:begin] + body + lines[end + 1:])


def visible_part(source: str) -> str:
    """`source` without its hidden-tests regions, markers included: what the released exercise runs."""
    lines = source.split("\n")
    for begin, end in reversed(layout.hidden_test_regions(source)):
        del lines[begin:end + 1]
    return "\n".join(lines)


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
        changed = [entry["part"], *(also["part"] for also in entry.get("also", ()))]
        for grade_id in changed:
            if grade_id not in ids:
                raise ValueError(f"{spec.name}: no cell with grade_id {grade_id}")
            if part_of(grade_id) != part_of(entry["part"]):
                raise ValueError(f"{spec.name}: '{entry['what']}' changes {grade_id}, "
                                 f"not a cell of {part_of(entry['part'])}")
        first, part = min(ids.index(g) for g in changed), part_of(entry["part"])
        if "scratch_after" in entry:   # the scratch cell runs after that earlier cell, and the run starts there
            if entry["scratch_after"] not in ids[:first]:
                raise ValueError(f"{spec.name}: '{entry['what']}': scratch_after names no cell before {entry['part']}")
            first = ids.index(entry["scratch_after"])
        checks = [j for j, g in enumerate(ids) if j > first and g.startswith(part + "-check")]
        if not checks:
            raise ValueError(f"{spec.name}: {part} has no check cell after {entry['part']}")
        by_check.setdefault(checks[-1], []).append((first, entry, part, secrets.get(part, [])))
    return by_check


# ------------------------------------------------------------------------------ judging a wrong answer

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


def substitutions(cells: list, first: int, entry: dict) -> dict[int, str]:
    """The sources a wrong answer runs instead of its cells', by cell index: its `part` (at `first` where
    the entry names none) and the cells of its `also` tables."""
    ids = [_grade_id(c) for c in cells]
    changes = [(ids.index(entry["part"]) if "part" in entry else first, entry),
               *((ids.index(also["part"]), also) for also in entry.get("also", ()))]
    return {j: substitute(cells[j]["source"], change["code"], change.get("region", 1)) for j, change in changes}


def try_part(cells: list, check: int, wrong: list[tuple[int, dict, str, list[str]]], run: Runner) -> list[str]:
    """Run each wrong answer from the first solution cell it changes to cell `check` (the part's last
    check); the problems found. The solution's cells must have run before. After each wrong answer they
    run again from that cell on, up to the furthest cell that any wrong answer of the part has reached so
    far (the cells after it never ran with a wrong answer and still hold the solution's results), but only
    up to the next wrong answer's first cell, which runs them itself. A quick check right after a solution
    cell therefore spares its wrong answers the given measurement that follows it, and the restore its re-run."""
    def from_to(start: int, stop: int, changed: dict[int, str] | None = None, visible: bool = False,
                scratch: str | None = None) -> tuple[int, str, tuple[str, str]] | None:
        for j in range(start, stop):
            if cells[j]["cell_type"] == "code":
                source = cells[j]["source"]
                error = run(changed[j] if changed and j in changed
                            else visible_part(source) if visible else source)
                if error:
                    return j, _grade_id(cells[j]) or f"cell {j}", error
                if j == start and scratch:   # a scratch cell the student runs right after the solution cell
                    error = run(scratch)
                    if error:
                        return j, "the scratch cell after " + (_grade_id(cells[j]) or f"cell {j}"), error
        return None

    problems = []
    wrong = sorted(wrong, key=lambda w: w[0])
    dirty = 0   # the cells before this one may hold a wrong answer's results (the furthest any one reached)
    for n, (first, entry, part, secrets) in enumerate(wrong):
        failed = from_to(first, check + 1, substitutions(cells, first, entry), visible=entry.get("visible", False),
                         scratch=entry.get("scratch"))
        if failed:
            at, where, (ename, evalue) = failed
            problems += judge(entry["what"], part, where, ename, evalue, secrets)
            dirty = max(dirty, at + 1)
        else:
            problems.append(f"{part}, wrong answer '{entry['what']}': passed every "
                            + ("visible " if entry.get("visible") else "") + f"check of {part}")
            dirty = check + 1
        run(_RESTART_WATCH)
        run(_END_PROGRAMS)
        run(_END_THREADS)
        restored = from_to(first, min(dirty, wrong[n + 1][0]) if n + 1 < len(wrong) else dirty)
        if restored:
            problems.append(f"the solution's {restored[1]}, run again after the wrong answers, failed with "
                            f"{restored[2][0]}: {restored[2][1]}")
            break
    return problems


# ------------------------------------------------------------------------------ the pytest hook

def _execute(kernel, code: str, timeout: float = 600) -> tuple[str, tuple[str, str] | None]:
    """Run `code` in the notebook's kernel without recording it: its stdout, and the exception's name and
    message if it raised."""
    msg_id = kernel.execute_cell_input(code, allow_stdin=False)
    kernel.await_reply(msg_id, timeout=timeout)
    out, error = [], None
    while True:
        msg = kernel.get_message(stream="iopub", timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            error = (msg["content"]["ename"], msg["content"]["evalue"])
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return "".join(out), error


def _probe(kernel, code: str) -> str:
    out, error = _execute(kernel, code, timeout=60)
    if error:
        raise RuntimeError(f"the re-run test's probe failed: {error[1]}")
    return out


def _is_check(cell) -> bool:
    meta = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "code" and meta.get("grade", False) and not meta.get("solution", False)


def _is_exercise(parent) -> bool:
    if "_is_exercise" not in parent.__dict__:
        parent._is_exercise = any("nbgrader" in c.metadata for c in parent.nb.cells)
    return parent._is_exercise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    cell, parent = getattr(item, "cell", None), getattr(item, "parent", None)
    kernel = getattr(parent, "kernel", None)
    if cell is None or kernel is None or cell.cell_type != "code" or not _is_exercise(parent) or not kernel.is_alive():
        return (yield)
    if "_jax_cache" not in parent.__dict__:
        parent._jax_cache = tempfile.TemporaryDirectory(prefix="jax-cache-")  # removed when the run ends
        _probe(kernel, _JAX_CACHE.format(parent._jax_cache.name))
    _probe(kernel, _SNAPSHOT)
    recorded = copy.deepcopy(cell.outputs)  # nbval coalesces the recorded streams in place
    result = yield  # nbval runs the cell and compares its outputs; a failure ends here
    changed = json.loads(_probe(kernel, _CHANGED).strip().splitlines()[-1])
    owners = parent.__dict__.setdefault("_rerun_owners", {})  # name -> the non-check cell binding it
    solution_names = parent.__dict__.setdefault("_rerun_solution", {})  # name -> the solution cell
    meta = cell.metadata.get("nbgrader", {})
    where = f"code cell {item.cell_num} ({meta.get('grade_id', 'no grade_id')})"
    # A given cell may reuse a solution cell's name for a value of the same kind (a loop variable that
    # every reader binds first); a check cell may not rebind it at all.
    clash = {name: other for name, kind in changed.items()
             for other, other_kind in [(solution_names if not meta.get("solution") else owners).get(name, (None, None))]
             if other not in (None, where) and (other_kind != kind or _is_check(cell))}
    assert not clash, (
        f"{where} binds names that a solution cell binds too (or the other way round): "
        + ", ".join(f"{name} ({other})" for name, other in clash.items())
        + "; a student who re-runs their cell after a failed check then breaks the next check. Rename one.")
    if meta.get("solution"):
        solution_names.update({name: (where, kind) for name, kind in changed.items()})
    if not _is_check(cell):
        owners.update({name: (where, kind) for name, kind in changed.items()})
        return result
    taken = {name: owners[name][0] for name in changed if name in owners}
    assert not taken, (
        f"the check {where} rebinds names that other cells bind: "
        + ", ".join(f"{name} ({owner})" for name, owner in taken.items())
        + "; a re-run of the cells that read them gives another result. Give the check its own names "
        "(e.g. a leading underscore, or a function's local variables).")
    cell.outputs = copy.deepcopy(recorded)
    item.runtest()  # once more: nbval compares the second run's outputs with the committed ones too
    _try_wrong_answers(item, kernel)
    return result


def _try_wrong_answers(item, kernel) -> None:
    """If `item` is a part's last check cell and the part has wrong answers, run them (module docstring)."""
    nb = item.parent.nb
    if "_wrong_answers" not in item.parent.__dict__:
        spec = spec_of(item.path)
        item.parent._wrong_answers = plan(spec, nb.cells) if spec else {}
    index = next(i for i, c in enumerate(nb.cells) if c is item.cell)
    wrong = item.parent._wrong_answers.get(index)
    if wrong:
        problems = try_part(nb.cells, index, wrong, lambda code: _execute(kernel, code)[1])
        assert not problems, f"{item.path.name}:\n" + "\n".join(problems)
