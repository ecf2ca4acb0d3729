"""exercises/ is generated from solutions/ with nbgrader's own preprocessors: stubs replace solutions,
outputs go, nbgrader's lock flags and checksums come; a student's work there is never overwritten
silently and is told apart from a stale generation; and the solutions carry current nbgrader metadata.

Whether an exercise runs up to its first stub needs no run of its own: the cells before it are the
solution's (test_committed_exercises_match_the_solutions), which strict nbval runs."""

import json
import os
import shutil
from pathlib import Path

import nbformat
import pytest

from tools import layout
from tools import make_exercises as mx
from tools import nbgrader_metadata as nm

ROOT = layout.ROOT


def _solution(tmp_path: Path, answer: str = "2") -> Path:
    """A one-part solution with its nbgrader metadata, as tools.nbgrader_metadata writes it."""
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": dict(layout.KERNELSPEC)})
    nb.cells = [nbformat.v4.new_markdown_cell("# Exercise\n\n1. Give the answer. (1 point)\n\n"
                                              "*About 5 minutes · 1 point (1 autograded, 0 graded by hand)*"),
                nbformat.v4.new_code_cell(f"x = 1\n### BEGIN SOLUTION\nanswer = {answer}\n### END SOLUTION"),
                nbformat.v4.new_code_cell("assert answer == 2, 'part 1: the answer is not right yet; a hint: add one'")]
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="x")]
    for cell, role in zip(nb.cells, nm.roles(nb.cells, "ex")):
        cell.metadata["nbgrader"] = role.metadata()
    path = tmp_path / "solutions" / "common" / "ex.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)
    return path


def test_nbgrader_makes_the_stubs_locks_and_checksums(tmp_path):
    _solution(tmp_path)
    assert mx.generate(tmp_path / "solutions", tmp_path / "exercises") == []
    ex = nbformat.read(tmp_path / "exercises" / "common" / "ex.ipynb", as_version=4)
    assert ex.cells[1].source == "x = 1\n# YOUR CODE HERE\nraise NotImplementedError()" and ex.cells[1].outputs == []
    assert ex.cells[1].metadata["deletable"] is False and "editable" not in ex.cells[1].metadata
    assert ex.cells[2].metadata["editable"] is False and len(ex.cells[2].metadata.nbgrader["checksum"]) == 32
    assert mx.generate(tmp_path / "solutions", tmp_path / "exercises", check=True) == []


HIDDEN_CHECK = ("# Checks for part 1\n# 1 point\nassert isinstance(answer, int), 'part 1: the answer is a whole number'\n"
                "### BEGIN HIDDEN TESTS\nassert answer == 2, 'part 1: not the right count yet'\n### END HIDDEN TESTS\n"
                "assert answer > 0, 'part 1: the answer is positive'")


def test_hidden_tests_are_left_out_of_the_exercise_and_kept_in_the_solution(tmp_path):
    sol = _solution(tmp_path)
    nb = nbformat.read(sol, as_version=4)
    nb.cells[2].source = HIDDEN_CHECK
    for cell, role in zip(nb.cells, nm.roles(nb.cells, "ex")):
        cell.metadata["nbgrader"] = role.metadata()
    nbformat.write(nb, sol)
    assert nm.validate(json.loads(sol.read_text()), "ex") == []
    assert mx.generate(tmp_path / "solutions", tmp_path / "exercises") == []
    ex = nbformat.read(tmp_path / "exercises" / "common" / "ex.ipynb", as_version=4)
    assert ex.cells[2].source == ("# Checks for part 1\n# 1 point\nassert isinstance(answer, int), 'part 1: the answer is a "
                                  "whole number'\nassert answer > 0, 'part 1: the answer is positive'")
    assert "HIDDEN" not in nbformat.writes(ex) and "answer == 2" not in nbformat.writes(ex)
    assert nbformat.read(sol, as_version=4).cells[2].source == HIDDEN_CHECK   # the solution keeps them
    # the released checksum is that of the visible cell (what a student's unchanged cell hashes to);
    # the gradebook's, of the full cell, differs, so autograding restores the hidden tests (OverwriteCells)
    from nbgrader.utils import compute_checksum
    assert ex.cells[2].metadata.nbgrader["checksum"] == compute_checksum(ex.cells[2]) != compute_checksum(nb.cells[2])
    assert mx.generate(tmp_path / "solutions", tmp_path / "exercises", check=True) == []


def test_hidden_tests_outside_a_check_or_unbalanced_are_reported():
    cells = [_cell("markdown", "## Part 1"),
             _cell("code", "### BEGIN SOLUTION\nx = 2\n### END SOLUTION"),
             _cell("code", "y = x\n### BEGIN HIDDEN TESTS\nz = 1\n### END HIDDEN TESTS"),
             _cell("code", "# Checks for part 1\n### BEGIN HIDDEN TESTS\nassert x == 2, 'part 1: hint'")]
    problems = "\n".join(nm.validate({"cells": cells}, "nb"))
    assert "nb, cell 2: '### BEGIN HIDDEN TESTS' in a cell that is not a check" in problems
    assert "nb, cell 3: line 2: '### BEGIN HIDDEN TESTS' is never closed by '### END HIDDEN TESTS'" in problems


def test_a_region_outside_a_solution_cell_or_no_region_is_refused(tmp_path):
    sol = _solution(tmp_path)
    nb = nbformat.read(sol, as_version=4)
    nb.cells[1].metadata.pop("nbgrader")
    nbformat.write(nb, sol)
    with pytest.raises(ValueError, match="nbgrader cannot release it"):
        mx.generate(tmp_path / "solutions", tmp_path / "exercises")
    nb.cells[1].source = "answer = 2"
    nbformat.write(nb, sol)
    with pytest.raises(ValueError, match="nothing for a student to do"):
        mx.generate(tmp_path / "solutions", tmp_path / "exercises")


def test_a_students_work_is_kept_and_told_apart_from_a_stale_generation(tmp_path):
    sol = _solution(tmp_path)
    solutions, exercises = tmp_path / "solutions", tmp_path / "exercises"
    mx.generate(solutions, exercises)
    ex = exercises / "common" / "ex.ipynb"
    opened = json.loads(ex.read_text())   # opened and run in JupyterLab: metadata and outputs, not cells
    opened["metadata"]["kernelspec"]["display_name"] = "Python 3"
    opened["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "ran"}]
    ex.write_text(json.dumps(opened))
    assert mx.compare(solutions, exercises)["common/ex.ipynb"][0] == mx.CURRENT
    sol.write_text(sol.read_text().replace("x = 1", "x = 2"))
    assert mx.compare(solutions, exercises)["common/ex.ipynb"][0] == mx.STALE   # the maintainers' case
    assert mx.generate(solutions, exercises) == [] and "x = 2" in ex.read_text()
    ex.write_text(ex.read_text().replace("# YOUR CODE HERE", "answer = 3  # my attempt"))
    sol.write_text(sol.read_text().replace("x = 2", "x = 3"))
    problems = mx.generate(solutions, exercises)
    assert problems == [mx.message("common/ex.ipynb", mx.EDITED)] and "holds your own work" in problems[0]
    assert "my attempt" in ex.read_text()
    assert mx.generate(solutions, exercises, force=True) == [] and "my attempt" not in ex.read_text()


def test_checkpoint_copies_and_orphans(tmp_path):
    sol = _solution(tmp_path)
    solutions, exercises = tmp_path / "solutions", tmp_path / "exercises"
    mx.generate(solutions, exercises)
    for folder in (sol.parent, exercises / "common"):   # what JupyterLab saves on opening a notebook
        (folder / ".ipynb_checkpoints").mkdir()
        (folder / ".ipynb_checkpoints" / "ex-checkpoint.ipynb").write_text("{}")
    assert mx.generate(solutions, exercises, check=True) == []
    (exercises / "common" / "orphan.ipynb").write_text("{}")
    assert mx.generate(solutions, exercises, check=True) == [mx.message("common/orphan.ipynb", mx.ORPHAN)]


def test_solutions_carry_current_nbgrader_metadata():
    # What `python -m tools.nbgrader_metadata --check` says: metadata as the roles give it, markers
    # balanced, points and time stated in the question as counted, every assert with a message.
    changed, problems = nm.run([ROOT / "solutions"], check=True)
    assert changed == [] and problems == [], "\n".join(problems)


STATES = mx.compare(ROOT / "solutions", ROOT / "exercises")


@pytest.mark.parametrize("rel", sorted(STATES), ids=str)
def test_committed_exercises_match_the_solutions(rel):
    state, _ = STATES[rel]
    if state == mx.EDITED and not os.environ.get("CI"):
        pytest.skip(mx.message(rel, state))   # a student's work: say so in one line; CI's fresh clone has none
    assert state == mx.CURRENT, mx.message(rel, state)


def test_exercise_numbers_have_no_gaps():
    numbers = sorted({int(p.name[2:4]) for p in layout.notebooks("solutions")})
    assert numbers == list(range(1, len(numbers) + 1)), f"numbers: {numbers}"


def _cell(kind, source):
    return {"cell_type": kind, "metadata": {}, "source": source}


def test_points_follow_the_rule_unless_a_cell_states_its_own():
    cells = [_cell("markdown", "## Part 1"),
             _cell("code", "x = 1\n### BEGIN SOLUTION\nx = 2\n### END SOLUTION"),
             _cell("code", "# Checks for part 1\nassert x == 2, 'part 1: hint'"),
             _cell("code", "# Checks for part 1 (the hard case)\n# 4 points\nassert x > 1, 'part 1: hint'"),
             _cell("markdown", "**Answer.**\n### BEGIN SOLUTION\nBecause.\n### END SOLUTION"),
             _cell("markdown", "**Answer.** (3 points)\n### BEGIN SOLUTION\nBecause.\n### END SOLUTION")]
    points = [r.points for r in nm.roles(cells, "ex99")]
    assert points == [None, None, 1, 4, nm.MANUAL_POINTS, 3]


def test_unbalanced_markers_are_reported_with_their_place():
    nb = {"cells": [_cell("code", "### BEGIN SOLUTION\nx = 1"), _cell("code", "x\n### END SOLUTION")]}
    problems = nm.validate(nb, "nb")
    assert any("nb, cell 0: line 1: '### BEGIN SOLUTION' is never closed" in p for p in problems)
    assert any("nb, cell 1: line 2: '### END SOLUTION' without" in p for p in problems)
