"""Every PyTorch notebook has a JAX twin with the same file name and the same headings in order."""

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
TORCH, JAX = ROOT / "notebooks" / "pytorch", ROOT / "notebooks" / "jax"


def headings(path: Path) -> list[str]:
    """The markdown heading lines (#, ##, ...) of a notebook, in order."""
    nb = nbformat.read(path, as_version=4)
    return [line.strip() for cell in nb.cells if cell.cell_type == "markdown"
            for line in cell.source.splitlines() if re.match(r"#{1,6} ", line)]


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
