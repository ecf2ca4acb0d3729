"""Generate the student notebooks in exercises/ from the solution notebooks in solutions/.

Each region between `### BEGIN SOLUTION` and `### END SOLUTION` becomes nbgrader's stub
(`# YOUR CODE HERE` + `raise NotImplementedError()` in code, `YOUR ANSWER HERE` in markdown), all
outputs are cleared, and cells with nbgrader metadata get the lock flags and checksums that nbgrader's
generate_assignment adds (add_release_metadata), so an exercise notebook is byte for byte what
`nbgrader generate_assignment` releases from course/ (instructor_tests/test_nbgrader.py checks it).

exercises/.generated.json records a hash of every notebook this script wrote. An exercise notebook
whose content no longer matches that hash was edited by someone, and is never overwritten unless
--force is given. --check writes nothing and exits 1 if exercises/ is not what solutions/ generates.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

import nbformat

from tools import course
from tools.course import BEGIN, CODE_STUB, END, MARKDOWN_STUB, notebooks_in

ROOT = course.ROOT
MANIFEST = ".generated.json"


def strip_solutions(source: str, stub: list[str], where: str) -> str:
    """Replace every BEGIN/END SOLUTION region of a cell's source by the stub, keeping indentation."""
    out: list[str] = []
    inside = False
    for line in source.split("\n"):  # as nbgrader splits: a trailing newline survives
        if line.strip() == BEGIN:
            if inside:
                raise ValueError(f"{where}: '{BEGIN}' inside another solution region")
            inside = True
            indent = re.match(r"\s*", line).group(0)
            out += [indent + s for s in stub]
        elif line.strip() == END:
            if not inside:
                raise ValueError(f"{where}: '{END}' without a '{BEGIN}' before it")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{where}: '{BEGIN}' is never closed by '{END}'")
    return "\n".join(out)


def checksum(cell: nbformat.NotebookNode) -> str:
    """nbgrader 0.9's checksum of a cell (nbgrader.utils.compute_checksum): autograding compares it with
    the submitted cell to find edited tests and read-only cells."""
    meta = cell.metadata.nbgrader
    grade, solution = bool(meta.get("grade", False)), bool(meta.get("solution", False))
    locked = not solution and (grade or bool(meta.get("locked", False)))
    m = hashlib.md5()
    for part in (cell.source, cell.cell_type, str(grade), str(solution), str(locked), meta["grade_id"]):
        m.update(part.encode("utf-8"))
    if grade:
        m.update(str(float(meta["points"])).encode("utf-8"))
    return m.hexdigest()


def add_release_metadata(cell: nbformat.NotebookNode) -> None:
    """What nbgrader's LockCells and ComputeChecksums add to a released cell: solution cells cannot be
    deleted, tests and read-only cells can be neither deleted nor edited, and every nbgrader cell
    carries the checksum of its released source. Cells without nbgrader metadata are left alone."""
    meta = cell.metadata.get("nbgrader")
    if meta is None:
        return
    grade, solution = meta.get("grade", False), meta.get("solution", False)
    if solution:
        cell.metadata["deletable"] = False
    elif grade or meta.get("locked", False):
        cell.metadata["deletable"] = False
        cell.metadata["editable"] = False
    if grade or solution or meta.get("locked", False):
        meta["checksum"] = checksum(cell)
        meta["cell_type"] = cell.cell_type


def exercise_of(solution: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """The student version of a solution notebook: stubs instead of solutions, no outputs, and
    nbgrader's release metadata on the cells that have nbgrader metadata."""
    nb = nbformat.reads(nbformat.writes(solution), as_version=4)  # a deep copy
    regions = 0
    for i, cell in enumerate(nb.cells):
        regions += course.solution_regions(cell.source)
        stub = CODE_STUB if cell.cell_type == "code" else MARKDOWN_STUB
        cell.source = strip_solutions(cell.source, stub, f"{name}, cell {i}")
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            for key in ("execution", "collapsed", "scrolled"):
                cell.metadata.pop(key, None)
        add_release_metadata(cell)
    nb.metadata.pop("celltoolbar", None)  # as nbgrader's ClearSolutions does
    if regions == 0:
        raise ValueError(f"{name} has no '{BEGIN}' region: nothing for a student to do")
    return nb


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def generate(solutions: Path, exercises: Path, *, force: bool = False, check: bool = False) -> list[str]:
    """Write (or with check=True, compare) every exercise; return the problems found."""
    manifest_path = exercises / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    problems, written = [], {}
    wanted = {p.relative_to(solutions).as_posix(): p for p in notebooks_in(solutions)}
    for rel, src in wanted.items():
        text = nbformat.writes(exercise_of(nbformat.read(src, as_version=4), rel)) + "\n"
        dst = exercises / rel
        current = dst.read_text() if dst.exists() else None
        if check:
            if current != text:
                problems.append(f"exercises/{rel} differs from what solutions/{rel} generates")
            continue
        if current is not None and current != text and not force and manifest.get(rel) != digest(current):
            problems.append(f"exercises/{rel} was edited since it was generated; not overwritten "
                            "(move your changes to solutions/, or rerun with --force to discard them)")
            written[rel] = manifest.get(rel, digest(current))
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(text)
        written[rel] = digest(text)
    stale = [rel for rel in (p.relative_to(exercises).as_posix() for p in notebooks_in(exercises))
             if rel not in wanted]
    problems += [f"exercises/{rel} has no solution notebook behind it; delete it or add solutions/{rel}"
                 for rel in stale]
    if not check:
        manifest_path.write_text(json.dumps(written, indent=1, sort_keys=True) + "\n")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="overwrite exercise notebooks edited by hand")
    parser.add_argument("--check", action="store_true", help="write nothing; fail if exercises/ is stale")
    parser.add_argument("--solutions", type=Path, default=ROOT / "solutions")
    parser.add_argument("--exercises", type=Path, default=ROOT / "exercises")
    args = parser.parse_args(argv)
    problems = generate(args.solutions, args.exercises, force=args.force, check=args.check)
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
