"""Opening a notebook in JupyterLab saves .ipynb_checkpoints/NAME-checkpoint.ipynb next to it (`make lab`
opens the start page, so notebooks/ gets one first). The tools and the tests that list notebooks must
see the same notebooks with such folders everywhere. Everything here runs on a temporary copy of the
tree: the real one is never written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools import course

ROOT = course.ROOT
COPIED = ("notebooks", "solutions", "exercises", "tools", "tests", "helpers", "catalog.toml", "README.md",
          "Makefile", "pyproject.toml")
# What each tool lists, printed as JSON by a child in the copy (so that the tools' module-level paths
# are the copy's).
LISTINGS = """
import json
from pathlib import Path
from tools import catalog, course, gpu_check, lesson_stats, make_exercises, nbgrader_metadata, run_matrix
root = course.ROOT
print(json.dumps({
    "course": [course.rel(p) for p in course.notebooks("lessons", "solutions", "exercises")],
    "gpu_check": [gpu_check.shown(p) for p in gpu_check.select_notebooks([], [])],
    "gpu_check folder": [gpu_check.shown(p) for p in gpu_check.select_notebooks(["notebooks", "solutions"], [])],
    "run_matrix": sorted(run_matrix.default_paths()),
    "catalog order": sorted(catalog.order(with_tests=True)),
    "lesson_stats": [course.rel(p) for p in lesson_stats.lessons()],
    "nbgrader_metadata": [course.rel(p) for p in nbgrader_metadata.notebooks([root / "solutions"])],
    "make_exercises": make_exercises.generate(root / "solutions", root / "exercises", check=True),
    "nbgrader check": nbgrader_metadata.run([root / "solutions"], check=True)[1],
    "catalog stale": catalog.stale(),
}))
"""
LISTING_TESTS = ["tests/test_pairing.py", "tests/test_catalog.py", "tests/test_lessons.py",
                 "tests/test_exercises.py::test_every_exercise_of_the_sources_has_a_solution",
                 "tests/test_gpu_check.py::test_default_selection_is_every_lesson_and_solution"]


def notebook_folders(root: Path) -> list[Path]:
    """notebooks/ itself (the start page's folder) and every folder below the three notebook folders."""
    return [root / "notebooks"] + sorted(p for kind in course.FOLDERS.values() for p in (root / kind).iterdir()
                                         if p.is_dir() and not p.name.startswith("."))


def with_checkpoints(root: Path) -> list[Path]:
    """A JupyterLab checkpoint copy of the first notebook of every notebook folder."""
    made = []
    for folder in dict.fromkeys(notebook_folders(root)):
        notebook = sorted(folder.glob("*.ipynb"))[0]
        copy = folder / ".ipynb_checkpoints" / f"{notebook.stem}-checkpoint.ipynb"
        copy.parent.mkdir()
        shutil.copyfile(notebook, copy)
        made.append(copy)
    return made


def in_copy(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = course.cpu_environ(dict(os.environ, PYTHONPATH=str(root)))
    return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    """Two copies of the tree, one of them with checkpoint folders everywhere; what the tools list in each."""
    out = {"real before": sorted(ROOT.rglob("*-checkpoint.ipynb"))}  # someone's own, if make lab ran here
    for name in ("clean", "opened"):
        root = tmp_path_factory.mktemp(name)
        for item in COPIED:
            (shutil.copytree if (ROOT / item).is_dir() else shutil.copyfile)(
                ROOT / item, root / item, **({"ignore": shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")}
                                              if (ROOT / item).is_dir() else {}))
        checkpoints = with_checkpoints(root) if name == "opened" else []
        listed = in_copy(root, "-c", LISTINGS)
        assert listed.returncode == 0, listed.stderr
        out[name] = {"root": root, "checkpoints": checkpoints, "listings": json.loads(listed.stdout)}
    yield out
    assert sorted(ROOT.rglob("*-checkpoint.ipynb")) == out["real before"], "the real tree was written"


def test_checkpoint_folders_are_made_in_every_notebook_folder(trees):
    opened = trees["opened"]
    folders = {p.parent.parent.relative_to(opened["root"]).as_posix() for p in opened["checkpoints"]}
    assert {"notebooks", "notebooks/pytorch", "notebooks/jax", "solutions/common", "solutions/pytorch",
            "solutions/jax", "exercises/common", "exercises/pytorch", "exercises/jax"} <= folders
    assert (opened["root"] / "notebooks/.ipynb_checkpoints/00_start_here-checkpoint.ipynb").exists()


def test_every_tool_lists_the_same_notebooks_with_checkpoints_present(trees):
    clean, opened = trees["clean"]["listings"], trees["opened"]["listings"]
    assert clean == opened
    assert not any(".ipynb_checkpoints" in p for listing in opened.values() for p in listing)
    from tools import catalog
    runnable = len(catalog.notebooks())  # lessons and solutions: what gpu_check runs
    exercises = len(course.notebooks("exercises"))
    assert len(clean["course"]) == runnable + exercises and clean["gpu_check"] == clean["course"][:runnable]
    assert clean["gpu_check folder"] == [course.START] + clean["course"][:runnable]  # a folder: all it holds
    assert clean["make_exercises"] == clean["nbgrader check"] == clean["catalog stale"] == []


def test_the_listing_tests_pass_with_checkpoints_present(trees):
    root = trees["opened"]["root"]
    result = in_copy(root, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *LISTING_TESTS)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout
