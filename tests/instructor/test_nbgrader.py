"""The solutions as an nbgrader course, with real nbgrader and a real sqlite gradebook.

One course is built in a temporary folder from course/nbgrader_config.py and copies of the solution
notebooks with their committed metadata, then nbgrader's own command line runs in it, as an
instructor would run it: generate_assignment (every release must be, byte for byte, the notebook
`make exercises` writes); three students hand in the solution, the
released notebook unchanged, and the released notebook with only its first part solved; autograde
gives full marks, 0 without a crash, and partial marks, with the hidden tests of the check cells
(absent from the release) back in the graded notebooks; generate_feedback writes their HTML.

By default three short assignments are graded (one common/, one pytorch/, one jax/):
NBGRADER_ASSIGNMENTS=all grades all of them, NBGRADER_ASSIGNMENTS=ex08,ex02-jax a selection. The
module shares one course, so run it in one process (pytest-xdist's loadscope does). Its tests carry
the marker `instructor`: `make nbgrader-test` runs them, `make test` leaves them out. nbgrader comes
with the `test` extra; the feedback's offline MathJax with the `instructor` extra, which `make
nbgrader-test` installs: without it the feedback test fails (it does not skip).
"""

import json
import re
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from tools import make_exercises as mx
from tools import nbgrader_metadata as nm

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "course"

SOLUTIONS = nm.notebooks([ROOT / "solutions"])
TWINS = nm.twin_exercises(SOLUTIONS)
ASSIGNMENTS = {nm.assignment_of(p, TWINS): p for p in SOLUTIONS}
pytestmark = pytest.mark.instructor
REPRESENTATIVE = ["ex03", "ex08", "ex11"]  # common/, pytorch/, jax/: short ones


def _selected() -> list[str]:
    wanted = os.environ.get("NBGRADER_ASSIGNMENTS", "")
    if wanted == "all":
        return sorted(ASSIGNMENTS)
    names = [a.strip() for a in wanted.split(",") if a.strip()] or REPRESENTATIVE
    unknown = sorted(set(names) - set(ASSIGNMENTS))
    assert not unknown, f"NBGRADER_ASSIGNMENTS names unknown assignments {unknown}; known: {sorted(ASSIGNMENTS)}"
    return names


def _has_metadata(path: Path) -> bool:
    return any("nbgrader" in c.get("metadata", {}) for c in json.loads(path.read_text())["cells"])


def _nbgrader(course: Path, *args: str) -> str:
    """Run the nbgrader command line in the course folder, as an instructor would; return its log."""
    env = dict(os.environ)
    # nbgrader runs `alembic` (installed next to it) when it creates the gradebook
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    cmd = [sys.executable, "-m", "nbgrader", *args]
    done = subprocess.run(cmd, cwd=course, env=env, capture_output=True, text=True, timeout=1800)
    log = done.stdout + done.stderr
    # from the first traceback or error line on (nbgrader logs a failing notebook's traceback long
    # before its summary line), then the end
    first = min([i for i in (log.find("Traceback"), log.find("| ERROR]"), log.find("[ERROR]")) if i >= 0] or [len(log)])
    shown = log[max(0, first - 1500):first + 4500] + ("\n[...]\n" + log[-1500:] if first + 4500 < len(log) - 1500 else "")
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{shown}"
    assert "[ERROR]" not in log and "| ERROR]" not in log, f"nbgrader {' '.join(args)} logged errors:\n{shown}"
    return log


def build_course(tmp_path: Path, *assignments: str) -> tuple[Path, list[Path]]:
    """A course folder with the config of course/ and copies of the assignments' solution notebooks,
    whose committed nbgrader metadata must be current."""
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy(COURSE / "nbgrader_config.py", course)
    shutil.copytree(COURSE / "templates", course / "templates")
    sources = []
    for assignment in assignments:
        solution = ASSIGNMENTS[assignment]
        source = course / "source" / assignment / solution.name
        source.parent.mkdir(parents=True)
        shutil.copy(solution, source)
        assert nm.run([source], check=True) == ([], []), f"run: python -m tools.nbgrader_metadata {solution}"
        sources.append(source)
    return course, sources


def assert_release_is_the_exercise(course: Path, assignment: str, source: Path) -> None:
    """release/ and `make exercises` are the same student notebook: the same cells with the same
    sources, no outputs, the same lock flags and checksums; in the end the same file byte for byte."""
    released = (course / "release" / assignment / source.name).read_text()
    release = nbformat.reads(released, as_version=4)
    exercise = mx.exercise_of(nbformat.read(source, as_version=4), source.name)
    assert _cells_without_nbgrader(release) == _cells_without_nbgrader(exercise), assignment
    assert release.metadata == exercise.metadata, assignment
    assert nbformat.writes(exercise) + "\n" == released, assignment


def _cells_without_nbgrader(nb: nbformat.NotebookNode) -> list[dict]:
    """The cells with nbgrader's own metadata (roles, checksums, lock flags) taken out."""
    out = []
    for cell in nb.cells:
        cell = json.loads(json.dumps(cell))
        for key in ("nbgrader", "deletable", "editable"):
            cell["metadata"].pop(key, None)
        out.append(cell)
    return out


def _with_solutions(release: nbformat.NotebookNode, solution: nbformat.NotebookNode,
                    parts: set[str] | None = None) -> nbformat.NotebookNode:
    """The released notebook with the solution's source put back in its solution cells (all of them,
    or those of the given parts): what a student who solved them hands in."""
    nb = nbformat.reads(nbformat.writes(release), as_version=4)
    answers = {c.metadata.nbgrader.grade_id: c.source for c in solution.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers and (parts is None or gid.split("-")[1] in parts):
            cell.source = answers[gid]
    return nb


@dataclass
class Course:
    root: Path
    sources: dict[str, Path]       # assignment: its annotated solution notebook in source/
    logs: dict[str, str]           # nbgrader command: its log
    seconds: dict[str, float]      # nbgrader command: its wall time

    def grades(self, assignment: str, student: str) -> dict[str, dict]:
        from nbgrader.api import Gradebook

        db = "sqlite:///" + str(self.root / "gradebook.db")
        with Gradebook(db, course_id="memory-course") as gb:
            sub = gb.find_submission(assignment, student)
            return {g.name: {"auto": g.auto_score, "max": g.max_score, "manual": g.needs_manual_grade}
                    for nb in sub.notebooks for g in nb.grades}


STUDENTS = ("full", "zero", "partial")


def first_part(roles) -> str:
    return next(r.grade_id.split("-")[1] for r in roles if r.role in ("solution", "answer"))


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Course:
    """One course with every assignment released (generating executes nothing) and the selected ones
    submitted by three students and graded: three nbgrader commands in all, whatever the selection."""
    root, sources = build_course(tmp_path_factory.mktemp("nbgrader"), *ASSIGNMENTS)
    course = Course(root, dict(zip(ASSIGNMENTS, sources)), {}, {})

    def run(*args):
        start = time.perf_counter()
        course.logs[args[0]] = _nbgrader(root, *args, "--force")
        course.seconds[args[0]] = time.perf_counter() - start

    run("generate_assignment", "*")
    for assignment in _selected():
        source = course.sources[assignment]
        solution = nbformat.read(source, as_version=4)
        release = nbformat.read(root / "release" / assignment / source.name, as_version=4)
        roles = nm.roles(json.loads(source.read_text())["cells"], nm.exercise_id(source))
        submissions = {"full": _with_solutions(release, solution),
                       "zero": release,
                       "partial": _with_solutions(release, solution, {first_part(roles)})}
        for student, nb in submissions.items():
            path = root / "submitted" / student / assignment / source.name
            path.parent.mkdir(parents=True)
            nbformat.write(nb, path)
    run("autograde", "*")            # every submitted assignment of every student
    run("generate_feedback", "*")
    print(f"nbgrader on {len(_selected())} assignments: " +
          ", ".join(f"{cmd} {sec:.0f} s" for cmd, sec in course.seconds.items()))
    return course


@pytest.mark.parametrize("assignment", _selected())
def test_autograding_full_empty_and_partial_submissions(course, assignment):
    source = course.sources[assignment]
    roles = nm.roles(json.loads(source.read_text())["cells"], nm.exercise_id(source))
    checks = {r.grade_id: r.points for r in roles if r.role == "check"}
    answers = {r.grade_id: r.points for r in roles if r.role == "answer"}
    part = first_part(roles)
    assert checks, f"{assignment} has no autograded check"
    grades = {s: course.grades(assignment, s) for s in STUDENTS}
    for student, g in grades.items():
        assert set(g) == set(checks) | set(answers), student
        assert all(g[c]["max"] == p for c, p in checks.items()), student

    def code_score(student):
        return sum(grades[student][c]["auto"] or 0 for c in checks)

    full = grades["full"]
    assert [c for c in checks if full[c]["auto"] != checks[c]] == [], "checks the solution fails"
    assert all(full[a]["manual"] and full[a]["auto"] is None for a in answers), "answers wait for a grader"
    zero = grades["zero"]
    assert [c for c in checks if zero[c]["auto"] != 0] == [], "checks that pass without a solution"
    assert all(zero[a]["auto"] == 0 and not zero[a]["manual"] for a in answers), "an untouched answer is 0"
    partial = grades["partial"]
    assert all(partial[c]["auto"] == checks[c] for c in checks if c.split("-")[1] == part)
    assert 0 < code_score("partial") < code_score("full") == sum(checks.values())
    # The release leaves hidden tests out of its check cells; autograding ran every check as the
    # solution has it, hidden tests included (OverwriteCells took them from the gradebook).
    graded = nbformat.read(course.root / "autograded" / "full" / assignment / source.name, as_version=4)
    solution = {c.metadata.nbgrader.grade_id: c.source for c in nbformat.read(source, as_version=4).cells}
    assert {gid: solution[gid] for gid in checks} == {c.metadata.nbgrader.grade_id: c.source for c in graded.cells
                                                      if c.metadata.nbgrader.get("grade_id") in checks}
    assert {a for a in answers if partial[a]["manual"]} == {a for a in answers if a.split("-")[1] == part}
    for student in STUDENTS:
        html = course.root / "feedback" / student / assignment / (source.stem + ".html")
        assert html.exists() and html.stat().st_size > 0, html
        text = html.read_text()  # opened offline, the maths renders: MathJax is inside the file
        assert "window.MathJax" in text and "MathJax.version" in text, f"{html}: no inlined MathJax"
        assert not re.findall(r'<(?:script|link)[^>]+(?:src|href)="(?:https?:)?//', text), f"{html} loads from the web"
    print(f"{assignment}: full {code_score('full')}, zero {code_score('zero')}, partial "
          f"{code_score('partial')} of {sum(checks.values())} autograded points "
          f"(+{sum(answers.values())} graded by hand)")


@pytest.mark.parametrize("assignment", sorted(ASSIGNMENTS))
def test_release_is_the_exercise_notebook(course, assignment):
    assert_release_is_the_exercise(course.root, assignment, course.sources[assignment])


def test_course_source_links_every_solution_notebook():
    assert nm.sync_course(COURSE, ROOT / "solutions", check=True) == []
    for link in (COURSE / "source").glob("*/*.ipynb"):
        assert link.is_symlink() and not Path(os.readlink(link)).is_absolute() and link.resolve().exists()


def test_committed_metadata_is_current():
    assert all(_has_metadata(p) for p in SOLUTIONS), "run: python -m tools.nbgrader_metadata"
    assert nm.run([ROOT / "solutions"], check=True)[1] == []


# The tool itself, on copies of the solutions (fast: nothing is executed)


@pytest.fixture
def copies(tmp_path):
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions", ignore=shutil.ignore_patterns("*.md"))
    return tmp_path / "solutions"


def test_annotation_changes_metadata_only_and_is_idempotent(copies):
    # Take the metadata out of the copies: annotating them must restore the committed files exactly.
    before = {}
    for path in nm.notebooks([copies]):
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            cell["metadata"].pop("nbgrader", None)
        path.write_text(nm.dumps(nb))
        before[path] = nb
    changed, problems = nm.run([copies])
    assert problems == [] and sorted(changed) == sorted(before)
    assert nm.run([copies]) == ([], []) and nm.run([copies], check=True) == ([], [])
    for path, old in before.items():
        assert path.read_text() == (ROOT / "solutions" / path.relative_to(copies)).read_text()
        new = json.loads(path.read_text())
        for cell in new["cells"]:
            cell["metadata"].pop("nbgrader", None)
        assert new == old, f"{path.name}: something besides metadata.nbgrader changed"


def test_every_notebook_passes_the_validator_and_nbgraders_schema(copies):
    from nbgrader.nbgraderformat import MetadataValidator

    nm.run([copies])
    for path in nm.notebooks([copies]):
        nb = nbformat.read(path, as_version=4)
        MetadataValidator().validate_nb(nb)  # raises on anything nbgrader 0.9 would refuse
        assert nm.validate(json.loads(path.read_text()), path.name) == []
        ids = [c.metadata.nbgrader.grade_id for c in nb.cells]
        assert len(ids) == len(set(ids)) and all(i.startswith(nm.exercise_id(path) + "-") for i in ids)


def _tiny(cells: list[tuple[str, str]]) -> dict:
    nb = nbformat.v4.new_notebook()
    for kind, src in cells:
        nb.cells.append(nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src))
    return json.loads(nbformat.writes(nb))


TINY = [("md", "# Exercise 9 · Tiny\n\n*About 5 minutes · 5 points (3 autograded, 2 graded by hand)*\n\n"
               "1. Say two. (3 points)\n2. Write a function\n   that returns three. (2 points)"),
        ("code", "import math"), ("md", "## Part 1"),
        ("code", "### BEGIN SOLUTION\nanswer = 2\n### END SOLUTION"), ("code", "assert answer == 2, 'part 1: two'"),
        ("md", "**Answer.**\n### BEGIN SOLUTION\nTwo.\n### END SOLUTION"),
        ("md", "## Part 2"), ("code", "def f():\n    ### BEGIN SOLUTION\n    return 3\n    ### END SOLUTION"),
        ("code", "x = f()"),
        ("code", "# Checks for part 2 (value)\nassert x == 3, 'part 2'\nassert x > 0, 'part 2'\nassert x < 4, 'part 2'"),
        ("code", "hp.check('a claim', math.pi > 3)")]


def test_roles_ids_and_points_of_a_small_notebook():
    got = [(r.role, r.grade_id, r.points) for r in nm.roles(_tiny(TINY)["cells"], "ex09")]
    assert got == [("text", "ex09-intro-text", None), ("code", "ex09-intro-code", None),
                   ("text", "ex09-part1-text", None), ("solution", "ex09-part1-solution", None),
                   ("check", "ex09-part1-check", 1), ("answer", "ex09-part1-answer", nm.MANUAL_POINTS),
                   ("text", "ex09-part2-text", None), ("solution", "ex09-part2-solution", None),
                   ("code", "ex09-part2-code", None), ("check", "ex09-part2-check-value", 2),
                   ("code", "ex09-part2-code-2", None)]


def test_ids_come_from_the_parts_not_the_cell_order():
    before = nm.roles(_tiny(TINY)["cells"], "ex09")
    inserted = TINY[:7] + [("md", "A new remark."), ("code", "y = 1")] + TINY[7:]
    after = nm.roles(_tiny(inserted)["cells"], "ex09")
    assert [r.grade_id for r in after[:7]] == [r.grade_id for r in before[:7]]
    assert {r.grade_id for r in after if r.role != "text" and r.role != "code"} == \
        {r.grade_id for r in before if r.role != "text" and r.role != "code"}


def test_the_validator_names_what_is_wrong(tmp_path):
    nb = _tiny(TINY)
    for cell, role in zip(nb["cells"], nm.roles(nb["cells"], "ex09")):
        cell["metadata"]["nbgrader"] = role.metadata()
    assert nm.validate(nb, "tiny") == []
    nb["cells"][9]["metadata"]["nbgrader"]["grade_id"] = "ex09-part1-check"   # a duplicate id
    nb["cells"][7]["source"] = "def f():\n    ### BEGIN SOLUTION\n    return 3"  # never closed
    # nbgrader reads a marker anywhere in a line, prose included: this line opens a region
    nb["cells"][6]["source"] = "## Part 2\nAnswer between `### BEGIN SOLUTION` and `### END SOLUTION`."
    problems = "\n".join(nm.validate(nb, "tiny"))
    for expected in ("tiny, cell 9: grade_id 'ex09-part1-check' is also the id of cell 4",
                     "tiny, cell 7: line 2: '### BEGIN SOLUTION' is never closed by '### END SOLUTION'",
                     "tiny, cell 6: line 2: '### BEGIN SOLUTION' is never closed by '### END SOLUTION'"):
        assert expected in problems
    # Metadata that contradicts a cell's role (a region outside a solution cell, a check that is not
    # graded) is what --check reports as stale: the roles, not the metadata, say what a cell is.
    nb = _tiny(TINY)
    for cell, role in zip(nb["cells"], nm.roles(nb["cells"], "ex09")):
        cell["metadata"]["nbgrader"] = role.metadata()
    path = tmp_path / "ex09_tiny.ipynb"
    path.write_text(nm.dumps(nb))
    assert nm.run([path], check=True) == ([], [])
    for index, change in ((3, {"solution": False}), (4, {"grade": False})):
        wrong = json.loads(json.dumps(nb))
        wrong["cells"][index]["metadata"]["nbgrader"].update(change)
        path.write_text(nm.dumps(wrong))
        changed, problems = nm.run([path], check=True)
        assert changed == [path] and problems == [f"{path}: nbgrader metadata is missing or stale "
                                                  "(run: python -m tools.nbgrader_metadata)"]


def test_the_validator_wants_points_in_the_question_and_messages_in_asserts():
    nb = _tiny(TINY)
    nb["cells"][0]["source"] = "# Exercise 9 · Tiny\n\n*About 5 minutes · 6 points (4 autograded, 2 graded by hand)*\n\n" \
                               "1. Say two. (2 points)\n2. Write a function."
    nb["cells"][9]["source"] = "# Checks for part 2 (value)\nassert x == 3\nassert x > 0, 'part 2'"
    problems = "\n".join(nm.validate(nb, "tiny"))
    for expected in ("cell 0: item 1 of the question should end with '(3 points)', not '(2 points)'",
                     "cell 0: item 2 of the question should end with '(1 point)' (the metadata's count)",
                     "the first cell should carry the line '*About 5 minutes · 4 points (2 autograded, 2 graded by "
                     "hand)*' (with the minutes a student needs), not '*About 5 minutes · 6 points",
                     "cell 9: line 2 is an assert without a message"):
        assert expected in problems
    assert "line 3" not in problems


def test_check_answer_calls_make_a_check_cell_and_count_as_assertions():
    cells = _tiny(TINY[:3] + [("code", "### BEGIN SOLUTION\nanswer = 2\n### END SOLUTION"),
                             ("code", "hp.check_answer('part 1: answer', answer, 'ab12')\nhp.check_answer('x', 1, 'cd34')\n"
                                      "assert answer > 0, 'part 1'")])["cells"]
    assert [(r.role, r.points) for r in nm.roles(cells, "ex09")][-1] == ("check", 2)


def test_check_mode_reports_missing_and_stale_metadata(tmp_path):
    path = tmp_path / "ex09_tiny.ipynb"
    path.write_text(nm.dumps(_tiny(TINY)))
    assert nm.main(["--check", str(path)]) == 1
    assert nm.main([str(path)]) == 0 and nm.main(["--check", str(path)]) == 0
    nb = json.loads(path.read_text())
    nb["cells"][9]["source"] = "# Checks for part 2 (value)\nassert x == 3"   # fewer asserts: 1 point now
    path.write_text(nm.dumps(nb))
    assert nm.main(["--check", str(path)]) == 1


def test_points_table_lists_every_assignment(capsys):
    assert nm.main(["--table"]) == 0
    out = capsys.readouterr().out
    assert all(f"| `{a}` |" in out for a in ASSIGNMENTS) and out.splitlines()[-1].startswith(f"| all | {len(ASSIGNMENTS)} notebooks")
