"""exercises/ is generated from solutions/: stubs replace solutions, edits are never overwritten
silently, the committed exercises are up to date (with nbgrader's release metadata, as nbgrader would
write it), each one runs until its first stub, and the solutions carry current nbgrader metadata."""

import json
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient.exceptions import CellExecutionError

from tools import course, execute
from tools import make_exercises as mx
from tools import nbgrader_metadata as nm

ROOT = course.ROOT


def test_code_regions_become_stubs_at_their_indentation():
    src = "x = 1\ndef f():\n    ### BEGIN SOLUTION\n    return 2\n    ### END SOLUTION\nprint(f())"
    assert mx.strip_solutions(src, mx.CODE_STUB, "t") == (
        "x = 1\ndef f():\n    # YOUR CODE HERE\n    raise NotImplementedError()\nprint(f())")


def test_a_trailing_newline_survives_as_nbgrader_keeps_it():
    src = "x = f()\n### BEGIN SOLUTION\ny = 1\n### END SOLUTION\n"
    assert mx.strip_solutions(src, mx.CODE_STUB, "t") == "x = f()\n# YOUR CODE HERE\nraise NotImplementedError()\n"


def _meta(grade_id: str, *, solution=False, grade=False, locked=False, points=None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution,
            "task": False}
    return {"nbgrader": meta | ({"points": points} if grade else {})}


def test_release_metadata_is_what_nbgrader_writes():
    # The checksums are nbgrader 0.9.6's own (nbgrader.utils.compute_checksum of the same cells).
    cells = [
        (nbformat.v4.new_code_cell("# YOUR CODE HERE\nraise NotImplementedError()",
                                   metadata=_meta("ex-part1-solution", solution=True)),
         {"deletable": False}, "628b0095adba456659994417dab1cedf"),
        (nbformat.v4.new_code_cell("assert answer == 2, 'part 1'",
                                   metadata=_meta("ex-part1-check", grade=True, locked=True, points=1)),
         {"deletable": False, "editable": False}, "32dc1dfd1f161ea1192f52b64011be7f"),
        (nbformat.v4.new_markdown_cell("**Answer.**\nYOUR ANSWER HERE",
                                       metadata=_meta("ex-part1-answer", solution=True, grade=True, points=2)),
         {"deletable": False}, "bf025d2fa50e1bb45d02f5b24bb42848"),
        (nbformat.v4.new_markdown_cell("# Exercise", metadata=_meta("ex-intro-text", locked=True)),
         {"deletable": False, "editable": False}, "abf897370ff5b2ad28073145b3b49545"),
    ]
    for cell, flags, checksum in cells:
        mx.add_release_metadata(cell)
        assert {k: cell.metadata[k] for k in ("deletable", "editable") if k in cell.metadata} == flags
        assert cell.metadata.nbgrader["checksum"] == checksum
        assert cell.metadata.nbgrader["cell_type"] == cell.cell_type
    plain = nbformat.v4.new_code_cell("x = 1")
    mx.add_release_metadata(plain)
    assert plain.metadata == {}


def test_solutions_carry_current_nbgrader_metadata():
    # What `python -m tools.nbgrader_metadata --check` says: every solution region in a solution cell,
    # every check cell graded, ids unique, points stated in the question, every assert with a message.
    changed, problems = nm.run([ROOT / "solutions"], check=True)
    assert changed == [] and problems == [], "\n".join(problems)


def test_markdown_regions_become_answer_prompts():
    src = "**Answer.**\n### BEGIN SOLUTION\nThe peak is at the start.\n### END SOLUTION"
    assert mx.strip_solutions(src, mx.MARKDOWN_STUB, "t") == "**Answer.**\nYOUR ANSWER HERE"


@pytest.mark.parametrize("src, message", [
    ("### BEGIN SOLUTION\nx", "never closed"),
    ("x\n### END SOLUTION", "without a"),
    ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION", "inside another"),
])
def test_broken_markers_are_reported_with_their_place(src, message):
    with pytest.raises(ValueError, match=message):
        mx.strip_solutions(src, mx.CODE_STUB, "nb.ipynb, cell 3")


def _solution(tmp_path: Path, answer: str = "2") -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Exercise"),
                nbformat.v4.new_code_cell(f"### BEGIN SOLUTION\nanswer = {answer}\n### END SOLUTION"),
                nbformat.v4.new_code_cell("assert answer == 2")]
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="x")]
    path = tmp_path / "solutions" / "common" / "ex.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)
    return path


def test_generation_clears_outputs_and_records_what_it_wrote(tmp_path):
    _solution(tmp_path)
    assert mx.generate(tmp_path / "solutions", tmp_path / "exercises") == []
    ex = nbformat.read(tmp_path / "exercises" / "common" / "ex.ipynb", as_version=4)
    assert ex.cells[1].source == "# YOUR CODE HERE\nraise NotImplementedError()" and ex.cells[1].outputs == []
    manifest = json.loads((tmp_path / "exercises" / ".generated.json").read_text())
    assert list(manifest) == ["common/ex.ipynb"]
    assert mx.generate(tmp_path / "solutions", tmp_path / "exercises", check=True) == []


def test_an_edited_exercise_is_kept_unless_forced(tmp_path):
    sol = _solution(tmp_path)
    mx.generate(tmp_path / "solutions", tmp_path / "exercises")
    ex = tmp_path / "exercises" / "common" / "ex.ipynb"
    ex.write_text(ex.read_text().replace("YOUR CODE HERE", "my own attempt"))
    sol.write_text(sol.read_text().replace("answer = 2", "answer = 1 + 1"))
    problems = mx.generate(tmp_path / "solutions", tmp_path / "exercises")
    assert len(problems) == 1 and "was edited since it was generated" in problems[0]
    assert "my own attempt" in ex.read_text()
    assert mx.generate(tmp_path / "solutions", tmp_path / "exercises", force=True) == []
    assert "my own attempt" not in ex.read_text()


def test_check_mode_reports_stale_and_orphaned_exercises(tmp_path):
    sol = _solution(tmp_path)
    mx.generate(tmp_path / "solutions", tmp_path / "exercises")
    sol.write_text(sol.read_text().replace("# Exercise", "# Exercise, reworded"))
    (tmp_path / "exercises" / "common" / "orphan.ipynb").write_text("{}")
    problems = mx.generate(tmp_path / "solutions", tmp_path / "exercises", check=True)
    assert any("differs from what solutions/common/ex.ipynb generates" in p for p in problems)
    assert any("orphan.ipynb has no solution notebook" in p for p in problems)


def test_a_solution_without_regions_is_refused(tmp_path):
    sol = _solution(tmp_path)
    nb = nbformat.read(sol, as_version=4)
    nb.cells[1].source = "answer = 2"
    nbformat.write(nb, sol)
    with pytest.raises(ValueError, match="nothing for a student to do"):
        mx.generate(tmp_path / "solutions", tmp_path / "exercises")


def test_committed_exercises_match_the_solutions():
    assert mx.generate(ROOT / "solutions", ROOT / "exercises", check=True) == []


def _checkpoint_copy(notebook: Path, edit: str = "") -> Path:
    """Save a copy where JupyterLab would after opening the notebook (optionally with an edit)."""
    copy = notebook.parent / ".ipynb_checkpoints" / f"{notebook.stem}-checkpoint.ipynb"
    copy.parent.mkdir(exist_ok=True)
    copy.write_text(notebook.read_text().replace("YOUR CODE HERE", edit or "YOUR CODE HERE"))
    return copy


def test_checkpoint_folders_are_ignored(tmp_path):
    sol = _solution(tmp_path)
    solutions, exercises = tmp_path / "solutions", tmp_path / "exercises"
    assert mx.generate(solutions, exercises) == []
    _checkpoint_copy(sol)
    student = _checkpoint_copy(exercises / "common" / "ex.ipynb", edit="a half-done attempt")
    (exercises / ".hidden").mkdir()
    (exercises / ".hidden" / "ex.ipynb").write_text("{}")
    before = student.read_text()
    assert mx.notebooks_in(exercises) == [exercises / "common" / "ex.ipynb"]
    assert mx.generate(solutions, exercises, check=True) == []
    assert mx.generate(solutions, exercises) == []           # writes nothing for the copies ...
    assert student.read_text() == before                     # ... and leaves them alone
    assert sorted(p.relative_to(exercises).as_posix() for p in exercises.rglob("*.ipynb")) == [
        ".hidden/ex.ipynb", "common/.ipynb_checkpoints/ex-checkpoint.ipynb", "common/ex.ipynb"]
    assert list(json.loads((exercises / mx.MANIFEST).read_text())) == ["common/ex.ipynb"]


def test_committed_exercises_match_with_jupyterlab_checkpoints_present(tmp_path):
    # A copy of the real tree in which JupyterLab has opened one exercise and one solution.
    # The checkpoints must add no problem (test_committed_exercises_match_the_solutions says
    # whether the tree itself is in sync).
    solutions, exercises = tmp_path / "solutions", tmp_path / "exercises"
    for name in ("solutions", "exercises"):
        shutil.copytree(ROOT / name, tmp_path / name)
    without = mx.generate(solutions, exercises, check=True)
    _checkpoint_copy(mx.notebooks_in(exercises)[0], edit="answer = 42")
    _checkpoint_copy(mx.notebooks_in(solutions)[0])
    assert mx.generate(solutions, exercises, check=True) == without
    assert mx.main(["--check", "--solutions", str(solutions), "--exercises", str(exercises)]) == (
        1 if without else 0)


EXERCISES = course.notebooks("exercises")  # not JupyterLab's .ipynb_checkpoints copies


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_exercise_runs_until_its_first_stub(path):
    nb = nbformat.read(path, as_version=4)
    first_stub = next(i for i, c in enumerate(nb.cells)
                      if c.cell_type == "code" and "raise NotImplementedError()" in c.source)
    client = execute.client(nb, path.parent, timeout=600)  # a kernel of this interpreter, as make outputs
    with pytest.raises(CellExecutionError) as err:
        client.execute()
    assert err.value.ename == "NotImplementedError"
    # Every cell before the first stub ran; the error came from the stub itself or from the first
    # cell that calls a stubbed function.
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    ran = [i for i in code if nb.cells[i].execution_count is not None]
    assert [i for i in code if i < first_stub] == [i for i in ran if i < first_stub]
    assert max(ran) >= first_stub


def test_every_exercise_of_the_sources_has_a_solution():
    # 13 exercises of the textbook section and 4 of the mini-GPT notebook, numbered 1-17; the course's
    # own exercises (lesson 06: 18, 19) follow them, numbered without gaps
    numbers = {int(p.name[2:4]) for p in course.notebooks("solutions") if p.name.startswith("ex")}
    assert set(range(1, 18)) <= numbers, f"missing: {sorted(set(range(1, 18)) - numbers)}"
    assert numbers == set(range(1, max(numbers) + 1)), f"gaps: {sorted(set(range(1, max(numbers) + 1)) - numbers)}"


def test_every_solution_has_its_check_cells_rerun_by_strict_nbval():
    # solutions/conftest.py re-runs every check cell twice and refuses checks that rebind a name of
    # another cell, inside strict nbval's run of solutions/. That covers every solution only if make test
    # hands every solution notebook to nbval, and the plugin is the one nbval loads for that folder.
    from tools import catalog
    handed = set(catalog.order(with_tests=True))
    solutions = {p.relative_to(ROOT).as_posix() for p in course.notebooks("solutions")}
    assert solutions <= handed, f"not run by make test's nbval: {sorted(solutions - handed)}"
    plugin = (ROOT / "solutions" / "conftest.py").read_text()
    assert "def pytest_runtest_call" in plugin and "for _ in range(2)" in plugin
    assert "_try_wrong_answers(item, kernel)" in plugin  # and runs the wrong answers of tests/wrong_answers/
    checks = {p.name: sum(1 for c in nbformat.read(p, as_version=4).cells
                          if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")
                          and not c.metadata["nbgrader"].get("solution"))
              for p in course.notebooks("solutions")}
    assert all(checks.values()), f"solutions without a check cell to re-run: {[n for n, c in checks.items() if not c]}"


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
