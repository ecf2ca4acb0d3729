"""Opening a notebook in JupyterLab saves .ipynb_checkpoints/NAME-checkpoint.ipynb next to it.
Every test and tool that scans the notebook folders must ignore such hidden folders."""

import importlib.util
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("notebooks/pytorch", "notebooks/jax", "solutions/common", "solutions/pytorch", "exercises/pytorch")


def _load(path: Path):
    """A fresh copy of a module, so that lists it builds at import see the tree as it is now."""
    spec = importlib.util.spec_from_file_location(f"fresh_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def jupyterlab_checkpoints():
    """A checkpoint copy of the first notebook of each folder, removed afterwards (a checkpoint
    that was already there, someone's real one, is left as it is)."""
    made: list[tuple[Path, bool]] = []
    try:
        for folder in FOLDERS:
            notebook = sorted((ROOT / folder).glob("*.ipynb"))[0]
            hidden = notebook.parent / ".ipynb_checkpoints"
            new_folder = not hidden.exists()
            hidden.mkdir(exist_ok=True)
            copy = hidden / f"{notebook.stem}-checkpoint.ipynb"
            if not copy.exists():
                shutil.copyfile(notebook, copy)
                made.append((copy, new_folder))
        yield [copy for copy, _ in made]
    finally:
        for copy, new_folder in made:
            copy.unlink(missing_ok=True)
            if new_folder and not any(copy.parent.iterdir()):
                copy.parent.rmdir()


def _hidden(paths) -> list[str]:
    return [str(p) for p in paths if any(part.startswith(".") for part in Path(p).relative_to(ROOT).parts)]


@pytest.mark.usefixtures("jupyterlab_checkpoints")
def test_scans_of_the_notebook_folders_skip_checkpoints():
    assert not _hidden(_load(ROOT / "tests" / "test_notebook_hygiene.py").NOTEBOOKS)
    exercises = _load(ROOT / "tests" / "test_exercises.py")
    assert not _hidden(exercises.EXERCISES)
    exercises.test_every_exercise_of_the_sources_has_a_solution()
    pairing = _load(ROOT / "tests" / "test_pairing.py")
    pairing.test_every_notebook_has_a_twin()
    pairing.test_solution_names_are_numbered_exercises()
    assert not _hidden(pairing.SOLUTIONS / name for name in pairing.SOLUTION_TWINS)
    mx = _load(ROOT / "tools" / "make_exercises.py")
    problems = mx.generate(ROOT / "solutions", ROOT / "exercises", check=True)
    assert not [p for p in problems if ".ipynb_checkpoints" in p], problems
