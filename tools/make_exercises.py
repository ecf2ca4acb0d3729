"""Generate the student notebooks in exercises/ from the solution notebooks in solutions/, with
nbgrader's own preprocessors, as `nbgrader generate_assignment` releases them: LockCells,
ClearSolutions (each `### BEGIN SOLUTION` ... `### END SOLUTION` region becomes `# YOUR CODE HERE` +
`raise NotImplementedError()`, or `YOUR ANSWER HERE` in markdown), ClearOutput, ClearHiddenTests (the
lines from `### BEGIN HIDDEN TESTS` to `### END HIDDEN TESTS` of a check cell go, markers included),
ComputeChecksums. generate_assignment also computes checksums before ClearHiddenTests, for the gradebook
(SaveCells): `nbgrader autograde` sees a check cell's checksum differ from the gradebook's and puts the
whole cell, hidden tests included, back (OverwriteCells). The release keeps only the checksums computed
after ClearHiddenTests, which is why it comes before ComputeChecksums here.

A student works in exercises/. exercises/.generated.json records a digest of the cells of every
notebook written here: one whose cells no longer match it holds someone's work and is never
overwritten unless --force is given. Opening or running a notebook changes outputs and metadata, not
cells, so it counts as no edit. --check writes nothing and exits 1 if exercises/ is not what
solutions/ generates (a student's work is reported as such).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import sys
from pathlib import Path

import nbformat
from nbgrader.preprocessors import ClearHiddenTests, ClearOutput, ClearSolutions, ComputeChecksums, LockCells

from tools import layout

MANIFEST = ".generated.json"
CURRENT, STALE, EDITED, MISSING, ORPHAN = "current", "stale", "edited", "missing", "orphan"


def exercise_of(solution: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """The student version of a solution notebook, as nbgrader's preprocessors make it."""
    nb, resources = copy.deepcopy(solution), {}
    if not any(layout.solution_regions(layout.source(c)) for c in nb.cells):
        raise ValueError(f"{name} has no '{layout.BEGIN}' region: nothing for a student to do")
    try:
        for step in (LockCells(), ClearSolutions(), ClearOutput(), ClearHiddenTests(), ComputeChecksums()):
            nb, resources = step.preprocess(nb, resources)
    except (RuntimeError, KeyError) as e:
        raise ValueError(f"{name}: nbgrader cannot release it: {e} (python -m tools.nbgrader_metadata "
                         "says which cell)") from e
    return nb


def digest(nb: dict) -> str:
    return hashlib.sha256(json.dumps(layout.cells(nb), sort_keys=True).encode()).hexdigest()


def compare(solutions: Path, exercises: Path) -> dict[str, tuple[str, str | None]]:
    """rel path -> (state, the generated text or None): current, stale (what this tool wrote, but
    solutions/ has changed since), edited (its cells changed since this tool wrote them: someone's work),
    missing, or orphan (no solution behind it)."""
    manifest_path = exercises / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    states = {}
    for src in layout.notebooks_in(solutions):
        rel = src.relative_to(solutions).as_posix()
        text = nbformat.writes(exercise_of(nbformat.read(src, as_version=4), f"solutions/{rel}")) + "\n"
        dst = exercises / rel
        if not dst.exists():
            states[rel] = (MISSING, text)
            continue
        current = json.loads(dst.read_text())
        if layout.cells(current) == layout.cells(json.loads(text)):
            states[rel] = (CURRENT, text)
        else:
            states[rel] = (STALE if manifest.get(rel) == digest(current) else EDITED, text)
    for p in layout.notebooks_in(exercises):
        states.setdefault(p.relative_to(exercises).as_posix(), (ORPHAN, None))
    return states


def message(rel: str, state: str) -> str:
    return {STALE: f"exercises/{rel} is out of date with solutions/{rel} (run: make exercises)",
            EDITED: f"exercises/{rel} holds your own work (its cells changed since `make exercises` wrote it); "
                    "kept as it is (make exercises FORCE=1 replaces it with a fresh copy)",
            MISSING: f"exercises/{rel} is missing (run: make exercises)",
            ORPHAN: f"exercises/{rel} has no solution notebook behind it; delete it or add solutions/{rel}"}[state]


def generate(solutions: Path, exercises: Path, *, force: bool = False, check: bool = False) -> list[str]:
    """Write (or with check=True, compare) every exercise; return the problems found."""
    manifest_path = exercises / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    problems = []
    for rel, (state, text) in compare(solutions, exercises).items():
        if state == CURRENT:
            manifest[rel] = digest(json.loads(text))
        if state == CURRENT or (state == EDITED and not force) or state == ORPHAN or check:
            if state != CURRENT:
                problems.append(message(rel, state))
            continue
        (exercises / rel).parent.mkdir(parents=True, exist_ok=True)
        (exercises / rel).write_text(text)
        manifest[rel] = digest(json.loads(text))
    if not check:
        manifest = {rel: d for rel, d in manifest.items() if (solutions / rel).exists()}
        manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="overwrite exercise notebooks edited since generated")
    parser.add_argument("--check", action="store_true", help="write nothing; fail if exercises/ is stale")
    parser.add_argument("--solutions", type=Path, default=layout.ROOT / "solutions")
    parser.add_argument("--exercises", type=Path, default=layout.ROOT / "exercises")
    args = parser.parse_args(argv)
    problems = generate(args.solutions, args.exercises, force=args.force, check=args.check)
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
