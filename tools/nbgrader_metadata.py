"""Give the solution notebooks the nbgrader cell metadata (schema 3, nbgrader 0.9) that makes them the
source of an nbgrader course (course/) and of exercises/ (tools/make_exercises.py).

Every cell gets a role from its place and its source alone:
- **solution**: a code cell with a `### BEGIN SOLUTION` region (autograded by the checks after it);
- **answer**: a markdown cell with a region, graded by hand (nbgrader scores an unanswered one 0);
- **check**: a code cell whose first line is `# Checks for part N ...`, or that comes after a region,
  asserts (`assert`, `hp.check_answer`) and reads a name a region defines, directly or through the
  cells between; cells that only `hp.check` a measurement are the lesson's claims, not graded. The
  asserts of a check that would give the answer away sit between `### BEGIN HIDDEN TESTS` and
  `### END HIDDEN TESTS`: the exercise leaves them out, autograding puts them back; they count in the
  cell's points like the others;
- **text** / **code**: everything else, read-only, so that a grade depends on the solution cells only.
Points: what a cell states (a check's comment line `# 3 points`, an answer's first line `**Answer.**
(4 points)`), else by rule: a check 1 point for up to 2 assertions, 2 for 3 to 5, 3 for more; an
answer MANUAL_POINTS. grade_id: `<exercise>-<part>-<role>[-<qualifier>][-<n>]` (`ex08-part2-check`),
the part from the last `## Part N` heading or a `# Checks for part N` comment.

The tool writes only cells' `metadata.nbgrader`, in nbformat's layout, so a diff shows nothing else;
it checks what a student reads: each graded part's item `N. ...` in the first cell ends with its points,
`(5 points)`, the first cell carries `*About 40 minutes · 12 points (8 autograded, 4 graded by hand)*`
as counted, and every assert of a check has a message.

    python -m tools.nbgrader_metadata [NOTEBOOK_OR_FOLDER ...]   # annotate (default: solutions/)
    python -m tools.nbgrader_metadata --check                    # exit 1 if missing or stale
    python -m tools.nbgrader_metadata --table                    # the points of every assignment
    python -m tools.nbgrader_metadata --links [--check]          # course/source/ symlinks to solutions/
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from tools import layout

ROOT = layout.ROOT
SCHEMA_VERSION = 3
MANUAL_POINTS = 2
CHECK_MARKER = re.compile(r"#\s*Checks?\s+for\s+part\s+(\d+)\b\s*(?:[(,:]\s*(.*?)\)?\s*)?$", re.I)
PART_HEADING = re.compile(r"##\s+Part\s+(\d+)\b", re.I)
QUESTION_ITEM = re.compile(r"^(\d+)\.\s(.*?)(?=^\d+\.\s|^\s*$|\Z)", re.M | re.S)
POINTS = re.compile(r"\((\d+) points?\)")
SUMMARY = re.compile(r"\*About (\d+) minutes · (\d+) points? \((\d+) autograded, (\d+) graded by hand\)\*")
TEST_CALLS = ("check", "check_answer")
STATED_CHECK = re.compile(r"^[ \t]*#\s*(\d+)\s+points?\s*$", re.M)           # in a check cell: `# 3 points`
STATED_ANSWER = re.compile(r"^\*\*Answer\.\*\*\s*\((\d+)\s+points?\)")  # an answer's first line
HEADING = re.compile(r"##\s+(.*)")
ROLES = {  # role: (solution, grade, locked)
    "solution": (True, False, False),
    "answer": (True, True, False),
    "check": (False, True, True),
    "text": (False, False, True),
    "code": (False, False, True),
}


def slug(text: str, limit: int = 32) -> str:
    """A lower-case, dash-separated id fragment of at most `limit` characters, cut at a word."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    out = ""
    for w in words:
        if len(out) + len(w) + (1 if out else 0) > limit:
            break
        out = f"{out}-{w}" if out else w
    return out or "section"


def exercise_id(path: Path) -> str:
    """`ex08` for ex08_optimizer_step_memory.ipynb; the file's stem slugged otherwise."""
    m = re.match(r"(ex\d+)", path.stem)
    return m[1] if m else slug(path.stem)


source_of = layout.source


def has_region(source: str) -> bool:
    """Whether the source has a solution region (as nbgrader reads the markers; unbalanced: see validate)."""
    try:
        return bool(layout.solution_regions(source))
    except ValueError:
        return any(layout.DELIMITERS[0] in line for line in source.split("\n"))


def _python(source: str) -> ast.Module | None:
    """The cell's code parsed, IPython magics and shell escapes as IPython turns them into calls; None if
    it does not parse."""
    try:
        return ast.parse(layout.python_source(source))
    except SyntaxError:
        return None


def _names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(names the cell binds in the notebook's global scope, names it reads anywhere)."""
    bound, read = set(), set()
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
              ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)

    def visit(node: ast.AST, top: bool) -> None:
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                read.add(node.id)
            elif top:
                bound.add(node.id)
        elif top and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif top and isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif top and isinstance(node, ast.Global):
            bound.update(node.names)
        inner = top and not isinstance(node, scopes)
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, True)
    return bound, read


def _calls(node: ast.AST, names: tuple[str, ...]) -> bool:
    """Whether node calls a function of one of these names (hp.check_answer, check_answer, ...)."""
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Attribute) and node.func.attr in names)
        or (isinstance(node.func, ast.Name) and node.func.id in names))


def count_assertions(source: str) -> int:
    """`assert` statements plus calls of `check` and `check_answer` (hp.check, hp.check_answer)."""
    tree = _python(source)
    if tree is None:
        return 0
    return sum(isinstance(n, ast.Assert) or _calls(n, TEST_CALLS) for n in ast.walk(tree))


def points_for(n_assertions: int) -> int:
    return 1 if n_assertions <= 2 else 2 if n_assertions <= 5 else 3


def stated_points(source: str, role: str) -> int | None:
    """The points a check or answer cell states for itself (see the module docstring), else None."""
    m = (STATED_CHECK.search(source) if role == "check"
         else STATED_ANSWER.match(source.lstrip()) if role == "answer" else None)
    return int(m[1]) if m and int(m[1]) > 0 else None


@dataclass(frozen=True)
class Role:
    role: str
    grade_id: str
    points: int | None = None

    def metadata(self) -> dict:
        solution, grade, locked = ROLES[self.role]
        meta = {"grade": grade, "grade_id": self.grade_id, "locked": locked,
                "schema_version": SCHEMA_VERSION, "solution": solution, "task": False}
        if grade:
            meta["points"] = self.points
        return meta


def roles(cells: list[dict], exercise: str) -> list[Role]:
    """The role, grade_id and points of every cell (see the module docstring)."""
    part, tainted, seen_solution = "intro", set(), False
    counts: dict[tuple[str, str], int] = {}
    out = []
    for cell in cells:
        src, kind = source_of(cell), cell.get("cell_type")
        first = src.lstrip().splitlines()[0].strip() if src.strip() else ""
        qualifier = ""
        if kind == "markdown" and (m := HEADING.match(first)):
            p = PART_HEADING.match(first)
            part = f"part{p[1]}" if p else slug(m[1])
        region = has_region(src)
        tree = _python(src) if kind == "code" else None
        bound, read = _names(tree) if tree is not None else (set(), set())
        if region:
            role = "solution" if kind == "code" else "answer"
            seen_solution = True
            tainted |= bound
        elif kind == "code" and (m := CHECK_MARKER.match(first)):
            role, part = "check", f"part{m[1]}"
            qualifier = slug(m[2]) if m[2] else ""
        elif (kind == "code" and seen_solution and tree is not None and read & tainted
              and any(isinstance(n, ast.Assert) or _calls(n, ("check_answer",)) for n in ast.walk(tree))):
            role = "check"
        else:
            role = "code" if kind == "code" else "text"
        if kind == "code" and not region and read & tainted:
            tainted |= bound
        name = f"{role}-{qualifier}" if qualifier else role
        n = counts[part, name] = counts.get((part, name), 0) + 1
        grade_id = f"{exercise}-{part}-{name}" + (f"-{n}" if n > 1 else "")
        points = (stated_points(src, role) or points_for(count_assertions(src)) if role == "check"
                  else stated_points(src, role) or MANUAL_POINTS if role == "answer" else None)
        out.append(Role(role, grade_id, points))
    return out


def validate(nb: dict, where: str = "notebook") -> list[str]:
    """What would make nbgrader or a student read the notebook wrong (its metadata being what roles()
    gives is --check's question): unbalanced solution or hidden-tests markers, hidden tests outside a
    check cell, grade_ids used twice, no check cell,
    points or time not stated in the first cell as the metadata count them, asserts without a message."""
    problems, ids = [], {}
    cells = nb["cells"]
    expected = roles(cells, "x")
    for i, (cell, role) in enumerate(zip(cells, expected)):
        for regions in (layout.solution_regions, layout.hidden_test_regions):
            try:
                found = regions(source_of(cell))
            except ValueError as e:
                problems.append(f"{where}, cell {i}: {e}")
                continue
            if regions is layout.hidden_test_regions and found and role.role != "check":
                problems.append(f"{where}, cell {i}: '{layout.HIDDEN_BEGIN}' in a cell that is not a check "
                                "(nbgrader keeps hidden tests only in graded check cells); start the cell with "
                                "'# Checks for part N' or move the region into the part's check cell")
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid in ids:
            problems.append(f"{where}, cell {i}: grade_id {gid!r} is also the id of cell {ids[gid]}")
        ids.setdefault(gid, i)
    if not any(r.role == "check" for r in expected):
        problems.append(f"{where}: no check cell, so nothing is graded automatically")
    return problems + _student_text_problems(cells, expected, where)


def points_by_part(rs: list[Role]) -> dict[str, tuple[int, int]]:
    """{part: (autograded points, points graded by hand)} of the graded cells."""
    out: dict[str, tuple[int, int]] = {}
    for r in rs:
        if r.role in ("check", "answer"):
            part = r.grade_id.split("-")[1]
            auto, manual = out.get(part, (0, 0))
            out[part] = (auto + r.points, manual) if r.role == "check" else (auto, manual + r.points)
    return out


def _points(n: int) -> str:
    return f"{n} point" if n == 1 else f"{n} points"


def summary_line(rs: list[Role], minutes: int | str = "N") -> str:
    """The line the first cell of an exercise carries: its time and points, as the metadata count them."""
    parts = points_by_part(rs).values()
    auto, manual = sum(a for a, _ in parts), sum(m for _, m in parts)
    return f"*About {minutes} minutes · {_points(auto + manual)} ({auto} autograded, {manual} graded by hand)*"


def _student_text_problems(cells: list[dict], rs: list[Role], where: str) -> list[str]:
    """What a student would read wrong: points not stated (or stated wrong), asserts without a message."""
    problems = []
    points = points_by_part(rs)
    question = source_of(cells[0]) if cells else ""
    stated = {f"part{m[1]}": [int(n) for n in POINTS.findall(m[2])] for m in QUESTION_ITEM.finditer(question)}
    for i, (cell, r) in enumerate(zip(cells, rs)):
        src = source_of(cell)
        if r.role == "check" and (tree := _python(src)) is not None:
            problems += [f"{where}, cell {i}: line {n.lineno} is an assert without a message; say which part "
                         "is wrong and give a hint: assert condition, \"part N: ... (hint)\""
                         for n in ast.walk(tree) if isinstance(n, ast.Assert) and n.msg is None]
    for part, (auto, manual) in sorted(points.items()):
        want = auto + manual
        if part not in stated:
            problems.append(f"{where}, cell 0: part '{part}' is graded ({want} points) but the question has no "
                            f"item '{part[4:]}. ...' for it")
        elif stated[part] != [want]:
            problems.append(f"{where}, cell 0: item {part[4:]} of the question should end with '({_points(want)})'"
                            + "".join(f", not '({_points(n)})'" for n in stated[part]) + " (the metadata's count)")
    m = SUMMARY.search(source_of(cells[0])) if cells else None
    want = summary_line(rs, m[1] if m else "N")
    if not m or m[0] != want:
        problems.append(f"{where}, cell 0: the first cell should carry the line '{want}' (with the "
                        "minutes a student needs)" + (f", not '{m[0]}'" if m else ""))
    return problems


def dumps(nb: dict) -> str:
    """nbformat's own layout (nbformat.writes + newline): indent 1, sorted keys, no ASCII escaping."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def annotated(text: str, path: Path) -> str:
    """The notebook's text with every cell's metadata.nbgrader set as the roles say; nothing else."""
    nb = json.loads(text)
    if dumps(nb) != text:
        raise ValueError(f"{path} is not in nbformat's JSON layout; save it with nbformat (or "
                         "Jupyter) first so that the metadata change is the only diff")
    for cell, role in zip(nb["cells"], roles(nb["cells"], exercise_id(path))):
        cell.setdefault("metadata", {})["nbgrader"] = role.metadata()
    return dumps(nb)


def notebooks(paths: list[Path]) -> list[Path]:
    """The notebooks given, and those under the folders given, except in hidden folders (JupyterLab's
    .ipynb_checkpoints copies); sorted."""
    out = []
    for p in paths:
        out += layout.notebooks_in(p) if p.is_dir() else [p]
    return out


def run(paths: list[Path], *, check: bool = False) -> tuple[list[Path], list[str]]:
    """Annotate (or with check=True, only compare) the notebooks; return (changed, problems)."""
    changed, problems = [], []
    for path in notebooks(paths):
        text = path.read_text(encoding="utf-8")
        new = annotated(text, path)
        problems += validate(json.loads(new), str(path))
        if new != text:
            changed.append(path)
            if check:
                problems.append(f"{path}: nbgrader metadata is missing or stale "
                                "(run: python -m tools.nbgrader_metadata)")
            else:
                path.write_text(new, encoding="utf-8")
    return changed, problems


def assignment_of(path: Path, twins: set[str]) -> str:
    """The nbgrader assignment of a solution notebook: `ex08`, or `ex02-pytorch` for a twin."""
    ex = exercise_id(path)
    return f"{ex}-{path.parent.name}" if ex in twins else ex


def twin_exercises(paths: list[Path]) -> set[str]:
    seen: dict[str, set[str]] = {}
    for p in paths:
        seen.setdefault(exercise_id(p), set()).add(p.parent.name)
    return {ex for ex, folders in seen.items() if len(folders) > 1}


def sync_course(course_dir: Path, solutions: Path, *, check: bool = False) -> list[str]:
    """Make course/source/<assignment>/<notebook> a relative symlink to each solution notebook and
    remove links to notebooks that are gone; with check=True, only report what differs."""
    nbs, source = notebooks([solutions]), course_dir / "source"
    twins = twin_exercises(nbs)
    wanted = {source / assignment_of(p, twins) / p.name: Path("../../..", p.resolve().relative_to(
        course_dir.resolve().parent)) for p in nbs}
    have = set(source.glob("*/*.ipynb")) if source.exists() else set()
    problems = [f"{link}: no solution notebook behind it" for link in sorted(have - set(wanted))]
    wrong = {link: t for link, t in wanted.items() if not (link.is_symlink() and link.readlink() == t)}
    problems += [f"{link}: should be a symlink to {t}" for link, t in sorted(wrong.items())]
    if not check:
        for link in (have - set(wanted)) | set(wrong):
            link.unlink(missing_ok=True)
        for link, target in wrong.items():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(target)
        for folder in (f for f in source.iterdir() if f.is_dir() and not any(f.iterdir())):
            folder.rmdir()
    return problems


def table(paths: list[Path]) -> str:
    """The points of every assignment as the roles (not the files) count them, as markdown."""
    nbs = notebooks(paths)
    twins, rows, total = twin_exercises(nbs), ["| assignment | notebook | autograded | by hand | total |",
                                               "| --- | --- | ---: | ---: | ---: |"], [0, 0]
    for path in nbs:
        parts = points_by_part(roles(json.loads(path.read_text())["cells"], exercise_id(path))).values()
        auto, manual = sum(a for a, _ in parts), sum(m for _, m in parts)
        total = [total[0] + auto, total[1] + manual]
        rows.append(f"| `{assignment_of(path, twins)}` | `{path.parent.name}/{path.name}` | {auto} | {manual} | {auto + manual} |")
    return "\n".join(rows + [f"| all | {len(nbs)} notebooks | {total[0]} | {total[1]} | {sum(total)} |"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, default=[ROOT / "solutions"],
                        help="notebooks or folders (default: solutions/)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if metadata is missing or stale")
    parser.add_argument("--table", action="store_true", help="print the points of every assignment (markdown)")
    parser.add_argument("--links", type=Path, metavar="COURSE", nargs="?", const=ROOT / "course",
                        help="instead of annotating: make COURSE/source/<assignment>/ symlinks to the "
                             "solution notebooks (default course/; with --check only compare)")
    args = parser.parse_args(argv)
    if args.links:
        problems = sync_course(args.links, ROOT / "solutions" if args.paths == [ROOT / "solutions"]
                               else args.paths[0], check=args.check)
        for p in problems:
            print(p if args.check else p.replace("should be", "now"), file=sys.stderr if args.check else sys.stdout)
        return 1 if problems and args.check else 0
    if args.table:
        print(table(args.paths))
        return 0
    changed, problems = run(args.paths, check=args.check)
    if not args.check:
        for path in changed:
            print(f"annotated {path}")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
