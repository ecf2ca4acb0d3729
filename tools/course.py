"""What the tools know about the course's files, written once.

Standard library only (IPython is imported where magics are handled), so the Makefile can ask
`python -m tools.course cpu-env` before any virtual environment exists.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = {"pytorch": "PyTorch", "jax": "JAX"}
NEUTRAL = "common"  # solutions/common/: framework-neutral exercises
START = "notebooks/00_start_here.ipynb"  # the start page: markdown only, not a lesson
# Where each kind of notebook lives: <folder>/<framework or common>/<name>.ipynb
FOLDERS = {"lessons": "notebooks", "solutions": "solutions", "exercises": "exercises"}

# nbgrader's solution markers and the stubs make_exercises puts in their place
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
CODE_STUB = ["# YOUR CODE HERE", "raise NotImplementedError()"]
MARKDOWN_STUB = ["YOUR ANSWER HERE"]

# The CPU reference: strict nbval compares outputs recorded on a CPU at the cpu size profile, so tests
# and `make outputs` hide any GPU and fix the profile.
CPU_ENV = {"CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu", "COURSE_PROFILE": "cpu", "PYTHONHASHSEED": "0"}
SANITIZE = "tests/nbval_sanitize.cfg"
NBVAL_FLAGS = ["--nbval", "--nbval-current-env", "--nbval-sanitize-with", SANITIZE, "--nbval-cell-timeout=600"]

HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
# `make lab` roots JupyterLab at the repository (--ServerApp.root_dir=.), so a notebook's address in
# it is its repository path under lab/tree/.
LAB_URL = "http://localhost:8888/lab/tree/"


def hidden(path: Path, root: Path) -> bool:
    """Whether a path lies in a hidden folder (or is hidden) below root, as JupyterLab's
    .ipynb_checkpoints/NAME-checkpoint.ipynb copies do."""
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def notebooks_in(folder: Path) -> list[Path]:
    """Every notebook under folder, sorted, none in a hidden folder."""
    return sorted(p for p in folder.rglob("*.ipynb") if not hidden(p, folder))


def notebooks(*kinds: str, root: Path = ROOT) -> list[Path]:
    """The course's notebooks of the given kinds ("lessons", "solutions", "exercises"; default lessons
    and solutions, what nbval and gpu_check run), each kind sorted, in the order asked; never one in a
    hidden folder, never the start page."""
    unknown = [k for k in kinds if k not in FOLDERS]
    if unknown:
        raise ValueError(f"unknown kind of notebook {unknown}; the kinds are {sorted(FOLDERS)}")
    found = []
    for kind in kinds or ("lessons", "solutions"):
        found += sorted(p for p in (root / FOLDERS[kind]).glob("*/*.ipynb") if not hidden(p, root))
    return found


def rel(path: Path, root: Path = ROOT) -> str:
    """A notebook's repository-relative path, with forward slashes."""
    return Path(path).resolve().relative_to(root.resolve()).as_posix()


def lab_url(rel_path: str) -> str:
    """A notebook's address in the JupyterLab that `make lab` starts (default port)."""
    return LAB_URL + rel_path


def source(cell: dict) -> str:
    """A cell's source as one string (nbformat stores it as a list of lines on disk)."""
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def python_source(code: str) -> str:
    """A code cell as plain Python, the way IPython itself transforms it (`%magic` and `!cmd` become
    get_ipython() calls)."""
    from IPython.core.inputtransformer2 import TransformerManager
    return TransformerManager().transform_cell(code)


def solution_regions(text: str) -> int:
    """How many `### BEGIN SOLUTION` marker lines a cell's source has."""
    return sum(line.strip() == BEGIN for line in text.split("\n"))


class AsideTracker:
    """Follows a notebook's headings in order and tells whether the text at hand is in an aside: a
    section whose heading (any level) begins with "Aside:", up to the next heading of the same or a
    higher level; a heading "Appendix" puts everything after it into asides."""

    def __init__(self) -> None:
        self.level: int | None = None  # level of the heading that opened the aside; 0: the appendix

    def heading(self, line: str) -> bool:
        """Take a heading line (`## ...`); True if the heading itself belongs to the main line."""
        m = HEADING.match(line)
        level, title = len(m.group(1)), m.group(2).strip().lower()
        if self.level not in (None, 0) and level <= self.level:
            self.level = None
        if self.level is None:
            if title.startswith("appendix"):
                self.level = 0
                return True  # the Appendix heading is shared; what follows it is not
            if title.startswith("aside:"):
                self.level = level
        return self.level is None

    @property
    def inside(self) -> bool:
        return self.level is not None


def main_line_headings(cells: list[dict]) -> list[str]:
    """The headings of the main line, in order: every heading except those of asides and after Appendix."""
    tracker, out = AsideTracker(), []
    for cell in cells:
        if cell["cell_type"] == "markdown":
            for line in source(cell).splitlines():
                if HEADING.match(line) and tracker.heading(line):
                    out.append(line.strip())
    return out


def cpu_environ(base: dict | None = None) -> dict:
    """An environment for running notebooks as the committed outputs were recorded."""
    return {**(os.environ if base is None else base), **CPU_ENV}


def main(argv: list[str]) -> int:
    """`cpu-env`: the CPU environment as shell assignments; `nbval-flags`: pytest's nbval options;
    `list [KIND ...]`: the notebooks."""
    what = argv[0] if argv else ""
    if what == "cpu-env":
        print(" ".join(f"{k}={shlex.quote(v)}" for k, v in CPU_ENV.items()))
    elif what == "nbval-flags":
        print(" ".join(NBVAL_FLAGS))
    elif what == "list":
        print("\n".join(rel(p) for p in notebooks(*argv[1:])))
    else:
        print("usage: python -m tools.course cpu-env | nbval-flags | list [lessons|solutions|exercises ...]",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
