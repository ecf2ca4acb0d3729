"""Committed notebooks were executed in order from a clean kernel and show nothing machine-specific."""

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(ROOT.glob("notebooks/*/*.ipynb")) + sorted(ROOT.glob("solutions/*/*.ipynb"))
MACHINE_SPECIFIC = re.compile(r"(at 0x[0-9a-f]{6,}|/tmp/|/home/|/root/|/Users/|site-packages|ipykernel_\d+)")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_executed_in_order_without_errors(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), "re-run with `make outputs`"
    for c in code:
        for out in c.outputs:
            assert out.output_type != "error", f"cell {c.execution_count} raised {out.get('ename')}"
            assert not (out.output_type == "stream" and out.name == "stderr"), (
                f"cell {c.execution_count} wrote to stderr (a warning?): {out.text[:200]}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_outputs_show_nothing_machine_specific(path):
    nb = nbformat.read(path, as_version=4)
    for c in nb.cells:
        for out in c.get("outputs", []):
            text = out.get("text", "") + out.get("data", {}).get("text/plain", "")
            assert not MACHINE_SPECIFIC.search(text), f"cell {c.execution_count}: {text[:200]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_recorded_at_the_cpu_profile(path):
    nb = nbformat.read(path, as_version=4)
    text = "".join(out.get("text", "") for c in nb.cells for out in c.get("outputs", []))
    assert "size profile 'cpu'" in text, "the first output should say the run used the cpu profile"
