"""Where the course's notebooks live and how the tools read them, written once.

Standard library only (IPython is imported where magics are handled): the root conftest.py imports it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = {"pytorch": "PyTorch", "jax": "JAX"}
NEUTRAL = "common"  # solutions/common/: framework-neutral exercises
START = "notebooks/00_start_here.ipynb"  # the start page: markdown only, not a lesson
# Where each kind of notebook lives: <folder>/<framework or common>/<name>.ipynb
FOLDERS = {"lessons": "notebooks", "solutions": "solutions", "exercises": "exercises"}
# What JupyterLab writes for a notebook of ipykernel's kernel (it rewrites any other display_name on
# opening), so the tools write it too.
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}

# nbgrader's solution markers, as the course writes them; nbgrader (ClearSolutions) takes any line that
# contains "BEGIN SOLUTION" or "END SOLUTION" for one, and so does solution_regions().
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
DELIMITERS = ("BEGIN SOLUTION", "END SOLUTION")
# The part of a check cell that the released exercise leaves out (nbgrader's ClearHiddenTests, which reads
# these markers the same way) and `nbgrader autograde` puts back from the gradebook (OverwriteCells).
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
HIDDEN_DELIMITERS = ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS")

# The CPU reference: strict nbval compares outputs recorded on a CPU at the cpu size profile, so the
# tests and `make outputs` hide any GPU and fix the profile (the root conftest.py, tools/execute.py).
CPU_ENV = {"CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu", "COURSE_PROFILE": "cpu", "PYTHONHASHSEED": "0"}

HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
# `make lab` roots JupyterLab at the repository, so a notebook's address in it is its path under lab/tree/.
LAB_URL = "http://localhost:8888/lab/tree/"


def hidden(path: Path, root: Path) -> bool:
    """Whether a path lies in a hidden folder below root (JupyterLab's .ipynb_checkpoints/ copies)."""
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def notebooks_in(folder: Path) -> list[Path]:
    """Every notebook under folder, sorted, none in a hidden folder."""
    return sorted(p for p in folder.rglob("*.ipynb") if not hidden(p, folder))


def notebooks(*kinds: str, root: Path = ROOT) -> list[Path]:
    """The notebooks of the given kinds ("lessons", "solutions", "exercises"; default lessons and
    solutions), each kind sorted, in the order asked; never a hidden copy, never the start page."""
    unknown = [k for k in kinds if k not in FOLDERS]
    if unknown:
        raise ValueError(f"unknown kind of notebook {unknown}; the kinds are {sorted(FOLDERS)}")
    found = []
    for kind in kinds or ("lessons", "solutions"):
        found += sorted(p for p in (root / FOLDERS[kind]).glob("*/*.ipynb") if not hidden(p, root))
    return found


def rel(path: Path, root: Path = ROOT) -> str:
    """A path relative to the repository, with forward slashes."""
    return Path(path).resolve().relative_to(root.resolve()).as_posix()


def lab_url(rel_path: str) -> str:
    """A notebook's address in the JupyterLab that `make lab` starts (default port)."""
    return LAB_URL + rel_path


def source(cell: dict) -> str:
    """A cell's source as one string (nbformat stores it as a list of lines on disk)."""
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


# Cell metadata that JupyterLab writes as a reader works (collapsing, scrolling, timing), not content.
VIEW_METADATA = {"collapsed", "scrolled", "jupyter", "execution", "trusted"}


def cells(nb: dict) -> list[tuple]:
    """What a comparison of notebooks looks at: each cell's type, source and metadata; not the
    outputs, ids, view state or notebook metadata that opening or running it in JupyterLab changes."""
    return [(c["cell_type"], source(c), {k: v for k, v in c.get("metadata", {}).items() if k not in VIEW_METADATA})
            for c in nb["cells"]]


def python_source(code: str) -> str:
    """A code cell as plain Python, as IPython transforms it (`%magic` and `!cmd` become calls)."""
    from IPython.core.inputtransformer2 import TransformerManager
    return TransformerManager().transform_cell(code)


def _regions(text: str, markers: tuple[str, str], shown: tuple[str, str], kind: str) -> list[tuple[int, int]]:
    regions, begin = [], None
    for i, line in enumerate(text.split("\n")):
        if markers[0] in line:
            if begin is not None:
                raise ValueError(f"line {i + 1}: '{shown[0]}' inside another {kind}")
            begin = i
        elif markers[1] in line:
            if begin is None:
                raise ValueError(f"line {i + 1}: '{shown[1]}' without a '{shown[0]}' before it")
            regions.append((begin, i))
            begin = None
    if begin is not None:
        raise ValueError(f"line {begin + 1}: '{shown[0]}' is never closed by '{shown[1]}'")
    return regions


def solution_regions(text: str) -> list[tuple[int, int]]:
    """(begin line, end line) of every solution region of a cell's source, lines counted from 0, read
    as nbgrader reads them (a marker anywhere in a line); ValueError on unbalanced markers."""
    return _regions(text, DELIMITERS, (BEGIN, END), "solution region")


def hidden_test_regions(text: str) -> list[tuple[int, int]]:
    """(begin line, end line) of every hidden-tests region of a cell's source, as solution_regions()."""
    return _regions(text, HIDDEN_DELIMITERS, (HIDDEN_BEGIN, HIDDEN_END), "hidden-tests region")


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


def worker_threads(environ: dict, cores: int) -> dict:
    """The OpenMP thread counts to add for a pytest-xdist worker: each worker's share of the cores (at least 1),
    where the caller has not set them; nothing outside xdist or with one worker."""
    workers = int(environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers <= 1:
        return {}
    return {name: str(max(1, cores // workers)) for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") if name not in environ}
