"""Every PyTorch notebook has a JAX twin with the same file name and the same main-line headings in order
(asides, headed "Aside: ...", and what follows a final "Appendix" heading may differ between the twins)."""

import importlib.util
import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
TORCH, JAX = ROOT / "notebooks" / "pytorch", ROOT / "notebooks" / "jax"


_spec = importlib.util.spec_from_file_location("lesson_stats", ROOT / "tools" / "lesson_stats.py")
lesson_stats = sys.modules.setdefault("lesson_stats", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(lesson_stats)  # registered first: its dataclass looks itself up there


def headings(path: Path) -> list[str]:
    """The main-line markdown heading lines (#, ##, ...) of a notebook, in order."""
    return lesson_stats.main_line_headings(nbformat.read(path, as_version=4).cells)


@pytest.mark.parametrize("cells, expected", [
    (["# T\n## 1. A", "### Aside: threads\n#### detail", "### B", "## 2. C"], ["# T", "## 1. A", "### B", "## 2. C"]),
    (["# T", "## Aside: internals", "### still aside", "## Back"], ["# T", "## Back"]),
    (["# T", "## Appendix", "### Aside: one", "## Anything after"], ["# T", "## Appendix"]),
])
def test_asides_and_the_appendix_are_left_out_of_the_pairing(cells, expected):
    assert lesson_stats.main_line_headings([{"cell_type": "markdown", "source": c} for c in cells]) == expected


def test_every_notebook_has_a_twin():
    torch_names = sorted(p.name for p in TORCH.glob("*.ipynb"))
    jax_names = sorted(p.name for p in JAX.glob("*.ipynb"))
    assert torch_names, "no notebooks found in notebooks/pytorch"
    assert torch_names == jax_names


@pytest.mark.parametrize("name", sorted(p.name for p in TORCH.glob("*.ipynb")))
def test_twins_share_their_headings(name):
    ours, theirs = headings(TORCH / name), headings(JAX / name)
    assert len(ours) >= 3, f"{name} has too few headings to pair"
    assert ours == theirs


def test_notebook_names_are_numbered_lessons():
    for p in list(TORCH.glob("*.ipynb")) + list(JAX.glob("*.ipynb")):
        assert re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", p.name), p.name


SOLUTIONS = ROOT / "solutions"
SOLUTION_TWINS = sorted({p.name for p in (SOLUTIONS / "pytorch").glob("*.ipynb")}
                        & {p.name for p in (SOLUTIONS / "jax").glob("*.ipynb")})


def test_solution_twins_exist():
    # the [code] exercises of the source get one notebook per framework, under the same name
    assert {"ex02_second_copy_of_the_weights.ipynb", "ex04_recomputation_overhead.ipynb",
            "ex06_cost_of_accumulation.ipynb"} <= set(SOLUTION_TWINS)


@pytest.mark.parametrize("name", SOLUTION_TWINS)
def test_solution_twins_share_their_headings(name):
    ours, theirs = headings(SOLUTIONS / "pytorch" / name), headings(SOLUTIONS / "jax" / name)
    assert ours == theirs


def test_solution_names_are_numbered_exercises():
    for p in SOLUTIONS.rglob("*.ipynb"):
        if not any(part.startswith(".") for part in p.relative_to(SOLUTIONS).parts):  # .ipynb_checkpoints
            assert re.fullmatch(r"ex\d\d_[a-z0-9_]+\.ipynb", p.name), p.name
