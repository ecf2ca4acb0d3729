"""The re-run test of the exercises' check cells, inside strict nbval's own run of solutions/.

nbval already runs every solution in one kernel (`make test`); this plugin adds, for each code cell of
a solution, what a student's Restart-and-Run-All or second Shift-Enter would do, at the cost of the
check cells alone instead of a second run of every notebook:

- around every code cell it records which global names the cell binds or rebinds (by object identity);
- after a check cell (nbgrader `grade: true`, not a solution cell) it fails if the check rebound a
  name that a cell of the student's or a given cell binds (ex03's `n`, ex13's `kept`): a later
  re-run of a cell that reads it then gives another result;
- it fails if a solution cell (the student's, whose given code runs again with every attempt) and
  another cell bind the same name to values of different types (ex13's `kept`, a list in the answer cell's loop, a dict of the
  measurement cell's): re-running the student's cell after a failed check breaks the next check;
- then it runs the check cell twice more in the same kernel, each time through nbval's own comparison
  with the committed outputs: a check that does not give the same result when run again fails;
- after a part's last check cell, it runs the part's plausible wrong answers (tests/wrong_answers/,
  tools/wrong_answers.py says how), which must fail that part's checks with a hint that names the part
  and shows no expected value, and then the solution's own cells again, so that nbval goes on from the
  solution's state. In this kernel they cost only their own cells, not a second run of the notebook.
"""

from __future__ import annotations

import copy
import json

import pytest

from tools import wrong_answers

_SNAPSHOT = "__rerun_ids = {k: id(v) for k, v in globals().items() if not k.startswith('_')}"
_CHANGED = ("import json as __rerun_json\n"
            "print(__rerun_json.dumps({k: type(v).__name__ for k, v in globals().items() "
            "if not k.startswith('_') and __rerun_ids.get(k) != id(v)}))")


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


def _run(kernel, code: str) -> str:
    """A probe of the re-run test: its stdout (raise on error)."""
    out, error = _execute(kernel, code, timeout=60)
    if error:
        raise RuntimeError(f"the re-run test's probe failed: {error[1]}")
    return out


def _is_check(cell) -> bool:
    meta = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "code" and meta.get("grade", False) and not meta.get("solution", False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    cell = getattr(item, "cell", None)
    kernel = getattr(getattr(item, "parent", None), "kernel", None)
    if cell is None or kernel is None or cell.cell_type != "code" or not kernel.is_alive():
        return (yield)
    _run(kernel, _SNAPSHOT)
    recorded = copy.deepcopy(cell.outputs)  # nbval coalesces the recorded streams in place
    result = yield  # nbval runs the cell and compares its outputs; a failure ends here
    changed = json.loads(_run(kernel, _CHANGED).strip().splitlines()[-1])
    owners = item.parent.__dict__.setdefault("_rerun_owners", {})  # name -> the non-check cell binding it
    solution_names = item.parent.__dict__.setdefault("_rerun_solution", {})  # name -> the solution cell
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
    for _ in range(2):  # run again, twice: nbval compares each run's outputs with the committed ones
        cell.outputs = copy.deepcopy(recorded)
        item.runtest()
    _try_wrong_answers(item, kernel)
    return result


def _try_wrong_answers(item, kernel) -> None:
    """If `item` is a part's last check cell and the part has wrong answers, run them (module docstring)."""
    nb = item.parent.nb
    if "_wrong_answers" not in item.parent.__dict__:
        spec = wrong_answers.spec_of(item.path)
        item.parent._wrong_answers = wrong_answers.plan(spec, nb.cells) if spec else {}
    index = next(i for i, c in enumerate(nb.cells) if c is item.cell)
    wrong = item.parent._wrong_answers.get(index)
    if wrong:
        problems = wrong_answers.try_part(nb.cells, index, wrong, lambda code: _execute(kernel, code)[1])
        assert not problems, f"{item.path.name}:\n" + "\n".join(problems)
