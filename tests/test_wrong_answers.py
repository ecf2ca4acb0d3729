"""The wrong-answer runs (tests/wrong_answers/plugin.py, beside their data): their data names real cells,
their logic reports a wrong answer that passes, fails in the wrong place, names no part or shows the
expected value; and the plugin, in a real nbval run, fails a check cell that does not give the same
result when run again or that rebinds another cell's name."""

from __future__ import annotations

import nbformat
import pytest

from tests.wrong_answers import plugin as wa


def test_substitute_keeps_the_given_code_and_the_indent():
    src = "def f():\n    ### BEGIN SOLUTION\n    return 2\n    ### END SOLUTION\n\nprint(f())"
    assert wa.substitute(src, "x = 1\nreturn x") == "def f():\n    x = 1\n    return x\n\nprint(f())"
    with pytest.raises(ValueError, match="1 solution region"):
        wa.substitute(src, "return 3", region=2)


@pytest.mark.parametrize("spec", wa.files(), ids=lambda p: p.stem)
def test_each_file_names_one_solution_and_cells_with_checks_after_them(spec):
    solution = wa.solution_of(spec)
    assert wa.spec_of(solution) == spec
    cells = nbformat.read(solution, as_version=4).cells
    planned = wa.plan(spec, cells)  # raises on a grade_id that is not there or a part without a check
    assert planned and all(cells[check].metadata.nbgrader["grade"] for check in planned)


# A two-part exercise in a plain namespace: try_part's logic without a kernel.
def _cell(source, grade_id=None):
    cell = nbformat.v4.new_code_cell(source)
    if grade_id:
        cell.metadata["nbgrader"] = {"grade_id": grade_id, "grade": "check" in grade_id}
    return cell


CELLS = [
    _cell("def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION", "ex99-part1-solution"),
    _cell("y = double(21)"),
    _cell("assert y == 42, 'Part 1: double(21) is not right yet; a hint: twice the input, not the input plus 2'",
          "ex99-part1-check"),
]


def _runner(cells=CELLS, namespace=None):
    """A plain namespace that has run `cells`, and the run(code) of try_part for it."""
    namespace = {} if namespace is None else namespace

    def run(code):
        try:
            exec(code, namespace)
        except Exception as err:  # noqa: BLE001 - what a kernel reports
            return type(err).__name__, str(err)
        return None
    for cell in cells:
        assert run(cell.source) is None
    return run, namespace


def _try(code, secrets=()):
    run, namespace = _runner()
    entry = {"what": "a mistake", "code": code}
    problems = wa.try_part(CELLS, 2, [(0, entry, "ex99-part1", list(secrets))], run)
    return problems, namespace


def test_a_wrong_answer_that_fails_its_check_with_a_hint_is_no_problem_and_the_state_is_restored():
    problems, namespace = _try("return x + 2")
    assert problems == [] and namespace["y"] == 42


@pytest.mark.parametrize("code, secrets, problem", [
    ("return x + x", (), "passed every check"),
    ("return undefined_name", (), "not in a check of ex99-part1"),
    ("return x + 2", ("21",), "shows the expected ['21']"),
])
def test_wrong_answers_that_pass_fail_elsewhere_or_leak_are_reported(code, secrets, problem):
    problems, namespace = _try(code, secrets)
    assert any(problem in p for p in problems) and all("'a mistake'" in p for p in problems)
    assert namespace["y"] == 42


def test_a_check_message_without_the_part_or_a_hint_is_reported():
    found = wa.judge("w", "ex99-part1", "ex99-part1-check", "AssertionError", "wrong", [])
    assert any("does not name the part" in p for p in found) and any("gives no hint" in p for p in found)


# A part whose function has a quick check before a costly given cell, and a second solution cell after it.
QUICK = [
    _cell("def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION", "ex99-part1-solution"),
    _cell("assert double(1) == 2, 'part 1: double(1) is not 2; a hint: twice the input, not the input plus 2'",
          "ex99-part1-check-quick"),
    _cell("runs = runs + 1\ntable = [double(k) for k in range(3)]"),   # the costly measurement, counted
    _cell("### BEGIN SOLUTION\ntotal = sum(table)\n### END SOLUTION", "ex99-part1-solution-2"),
    _cell("assert total == 6 and table == [0, 2, 4], 'part 1: total is not the sum of the table; a hint: add "
          "every entry of table'", "ex99-part1-check"),
]


def test_a_wrong_answer_that_fails_a_quick_check_does_not_rerun_the_measurement_after_it():
    run, namespace = _runner(QUICK, {"runs": 0})
    wrong = [(0, {"what": "plus two", "code": "return x + 2"}, "ex99-part1", []),
             (0, {"what": "off in the table only", "code": "return 2 * x if x < 2 else 5"}, "ex99-part1", []),
             (3, {"what": "the table's length", "code": "total = len(table)"}, "ex99-part1", [])]
    assert wa.try_part(QUICK, 4, wrong, run) == []
    # 'off in the table only' passed the quick check and ran the measurement with the wrong double; the
    # restore ran it again before the third wrong answer: 1 (the solution) + 1 + 1. 'plus two' failed the
    # quick check first and cost no run of the measurement at all.
    assert namespace["runs"] == 3
    assert namespace["table"] == [0, 2, 4] and namespace["total"] == 6 and namespace["double"](5) == 10


# scratch: a scratch cell run right after the solution cell (here it peeks; the check finds out)
PEEK = [
    _cell("peeked = False\n### BEGIN SOLUTION\nanswer = 7\n### END SOLUTION", "ex99-part1-solution"),
    _cell("assert answer == 7 and not peeked, 'part 1: a scratch cell peeked at the answer; a hint: count them "
          "yourself'", "ex99-part1-check"),
]


@pytest.mark.parametrize("scratch, problem", [
    ("peeked = True", None),                        # the check catches what the scratch cell did
    ("x = 1", "passed every check"),                # a harmless scratch cell: the right answer passes
    ("undefined_name", "not in a check of ex99-part1"),
])
def test_a_wrong_answer_with_a_scratch_cell_runs_it_right_after_the_solution_cell(scratch, problem):
    run, namespace = _runner(PEEK)
    entry = {"what": "a peek", "code": "answer = 7", "scratch": scratch}
    problems = wa.try_part(PEEK, 1, [(0, entry, "ex99-part1", [])], run)
    assert (problems == []) if problem is None else (problems and problem in problems[0])
    assert namespace["answer"] == 7 and namespace["peeked"] is False


# scratch_after: a scratch cell above the part (between the setup cell and the part's given cells, say): the run
# starts at that cell, so the cells between it and the solution cell run again after the scratch cell
ABOVE = [
    _cell("peeked = False", "ex99-intro-code"),
    _cell("seen = peeked"),
    *PEEK,
]
ABOVE[3] = _cell("assert answer == 7 and not seen, 'part 1: a scratch cell peeked at the answer; a hint: count them "
                 "yourself'", "ex99-part1-check")


@pytest.mark.parametrize("after, problem", [("ex99-intro-code", None), (None, "passed every check")])
def test_a_scratch_cell_after_an_earlier_cell_runs_there_and_the_run_starts_there(tmp_path, after, problem):
    spec = tmp_path / "ex99.toml"
    spec.write_text('[[wrong]]\npart = "ex99-part1-solution"\nwhat = "a peek above"\ncode = "answer = 7"\n'
                    'scratch = "peeked = True"\n' + (f'scratch_after = "{after}"\n' if after else ""))
    (check, wrong), = wa.plan(spec, ABOVE).items()
    assert check == 3 and wrong[0][0] == (0 if after else 2)
    run, namespace = _runner(ABOVE)
    problems = wa.try_part(ABOVE, check, wrong, run)
    assert (problems == []) if problem is None else (problems and problem in problems[0])
    assert namespace["answer"] == 7 and namespace["seen"] is False


def test_a_wrong_answer_that_spans_two_solution_cells_changes_both_and_the_restore_runs_from_the_first():
    # a wrong table function together with the total that agrees with it: only the check of the table's
    # values sees it; after it, both cells hold the solution's results again
    run, namespace = _runner(QUICK, {"runs": 0})
    entry = {"what": "a wrong double, the total made to agree", "part": "ex99-part1-solution-2",
             "code": "total = 9", "also": [{"part": "ex99-part1-solution", "code": "return 2 * x if x < 2 else 7"}]}
    assert wa.substitutions(QUICK, 0, entry) == {
        3: "total = 9", 0: "def double(x):\n    return 2 * x if x < 2 else 7"}
    assert wa.try_part(QUICK, 4, [(0, entry, "ex99-part1", [])], run) == []
    assert namespace["table"] == [0, 2, 4] and namespace["total"] == 6 and namespace["double"](5) == 10


# visible = true: the wrong answer must fail the checks a student runs, the hidden tests left out
HIDDEN = [
    _cell("### BEGIN SOLUTION\nanswer = 7\n### END SOLUTION", "ex99-part1-solution"),
    _cell("assert answer > 0, 'part 1: the answer is a positive count of things; a hint: count them'\n"
          "### BEGIN HIDDEN TESTS\nassert answer == 7, 'part 1: not the right count yet; a hint: count again'\n"
          "### END HIDDEN TESTS", "ex99-part1-check"),
]


@pytest.mark.parametrize("code, visible, problem", [
    ("answer = 8", False, None),                     # the hidden test catches it
    ("answer = 8", True, "passed every visible check"),  # the released exercise's check does not
    ("answer = -1", True, None),
])
def test_a_visible_wrong_answer_runs_the_check_without_its_hidden_tests(code, visible, problem):
    run, namespace = _runner(HIDDEN)
    entry = {"what": "a mistake", "code": code, "visible": visible}
    problems = wa.try_part(HIDDEN, 1, [(0, entry, "ex99-part1", [])], run)
    assert (problems == []) if problem is None else (len(problems) == 1 and problem in problems[0])
    assert namespace["answer"] == 7


def test_visible_part_leaves_out_the_hidden_tests_and_their_markers():
    assert wa.visible_part(HIDDEN[1].source) == "assert answer > 0, 'part 1: the answer is a positive count of things; a hint: count them'"


# The plugin in a real strict nbval run: three one-part exercises, with their recorded outputs.
def _exercise(check: str, printed: str) -> nbformat.NotebookNode:
    solution = nbformat.v4.new_code_cell("### BEGIN SOLUTION\nanswer = 2\n### END SOLUTION", execution_count=1)
    solution.metadata["nbgrader"] = {"grade_id": "ex99-part1-solution", "solution": True, "grade": False}
    test = nbformat.v4.new_code_cell(check, execution_count=2,
                                     outputs=[nbformat.v4.new_output("stream", name="stdout", text=printed)])
    test.metadata["nbgrader"] = {"grade_id": "ex99-part1-check", "solution": False, "grade": True, "points": 1}
    return nbformat.v4.new_notebook(cells=[solution, test])


def test_the_plugin_fails_a_check_that_differs_when_run_again_or_rebinds_a_name(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(wa.layout.ROOT))  # the plugin, imported by the pytest started below
    notebooks = {
        "rerunnable": _exercise("assert answer == 2, 'part 1: not yet; a hint: twice one'\nprint('ok')", "ok\n"),
        "counts_its_runs": _exercise("_runs = globals().get('_runs', 0) + 1\nprint(_runs)", "1\n"),
        "rebinds": _exercise("answer = float(answer)\nprint('ok')", "ok\n"),
    }
    for name, nb in notebooks.items():
        nbformat.write(nb, pytester.path / f"{name}.ipynb")
    result = pytester.runpytest_subprocess("-p", "tests.wrong_answers.plugin", "-p", "no:cacheprovider",
                                           "--nbval", "--nbval-current-env", "-rf")
    result.assert_outcomes(passed=4, failed=2)
    result.stdout.fnmatch_lines(["FAILED counts_its_runs.ipynb::Cell 1*", "FAILED rebinds.ipynb::Cell 1*"])
    assert "binds names that a solution cell binds too (or the other way round): answer" in result.stdout.str()
