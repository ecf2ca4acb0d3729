"""Every PyTorch notebook has a JAX twin with the same file name and the same main-line headings in order
(asides, headed "Aside: ...", and what follows a final "Appendix" heading may differ between the twins).
A lesson's twins are generated from one source (lessons/NN_topic.md, tools/lessons.py), whose
framework-specific cells may still hold headings: the headings the source gives each framework must
agree, and the committed twins are checked too (tests/test_lesson_sources.py checks they are what the
source generates)."""

import re
from pathlib import Path

import nbformat
import pytest

from tools import layout
from tools import lessons as L

ROOT = layout.ROOT
LESSONS, SOLUTION_NBS = layout.notebooks("lessons"), layout.notebooks("solutions")
TORCH, JAX = ROOT / "notebooks" / "pytorch", ROOT / "notebooks" / "jax"


def names(notebooks: list[Path], folder: str) -> list[str]:
    return [p.name for p in notebooks if p.parent.name == folder]


def headings(path: Path) -> list[str]:
    """The main-line markdown heading lines (#, ##, ...) of a notebook, in order."""
    return layout.main_line_headings(nbformat.read(path, as_version=4).cells)


@pytest.mark.parametrize("cells, expected", [
    (["# T\n## 1. A", "### Aside: threads\n#### detail", "### B", "## 2. C"], ["# T", "## 1. A", "### B", "## 2. C"]),
    (["# T", "## Aside: internals", "### still aside", "## Back"], ["# T", "## Back"]),
    (["# T", "## Appendix", "### Aside: one", "## Anything after"], ["# T", "## Appendix"]),
])
def test_asides_and_the_appendix_are_left_out_of_the_pairing(cells, expected):
    assert layout.main_line_headings([{"cell_type": "markdown", "source": c} for c in cells]) == expected


def test_every_notebook_has_a_twin():
    torch_names, jax_names = names(LESSONS, "pytorch"), names(LESSONS, "jax")
    assert torch_names, "no notebooks found in notebooks/pytorch"
    assert torch_names == jax_names


@pytest.mark.parametrize("name", names(LESSONS, "pytorch"))
def test_twins_share_their_headings(name):
    ours, theirs = headings(TORCH / name), headings(JAX / name)
    assert len(ours) >= 3, f"{name} has too few headings to pair"
    assert ours == theirs


@pytest.mark.parametrize("src", L.sources(), ids=[p.stem for p in L.sources()])
def test_the_source_gives_both_frameworks_the_same_headings(src):
    source = L.read_source(src)
    ours, theirs = ([c for _, c in L.cells_for(source, fw)] for fw in ("pytorch", "jax"))
    ours, theirs = layout.main_line_headings(ours), layout.main_line_headings(theirs)
    assert len(ours) >= 3 and ours == theirs, (
        f"{layout.rel(src)}: the headings of its PyTorch cells and its JAX cells differ; a heading both "
        f"twins have can be one shared cell (no framework key)")


def test_notebook_names_are_numbered_lessons():
    for p in LESSONS:
        assert re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", p.name), p.name


SOLUTIONS = ROOT / "solutions"
SOLUTION_TWINS = sorted(set(names(SOLUTION_NBS, "pytorch")) & set(names(SOLUTION_NBS, "jax")))


def test_solution_twins_exist():
    # the [code] exercises of the source get one notebook per framework, under the same name
    assert {"ex02_second_copy_of_the_weights.ipynb", "ex04_recomputation_overhead.ipynb",
            "ex06_cost_of_accumulation.ipynb"} <= set(SOLUTION_TWINS)


@pytest.mark.parametrize("name", SOLUTION_TWINS)
def test_solution_twins_share_their_headings(name):
    ours, theirs = headings(SOLUTIONS / "pytorch" / name), headings(SOLUTIONS / "jax" / name)
    assert ours == theirs


def test_solution_names_are_numbered_exercises():
    for p in SOLUTION_NBS:
        assert re.fullmatch(r"ex\d\d_[a-z0-9_]+\.ipynb", p.name), p.name
