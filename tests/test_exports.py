"""The lazy export map of helpers/__init__.py is kept by hand: these tests keep it complete and small.

Every `hp.name` the README and docs/helpers.md document must resolve; every public function of every helpers module
(no leading underscore, defined in that module rather than imported into it) must be exported by
`helpers`, eagerly or lazily, as that very object; and every exported name must be used by a
notebook, a solution or those docs, so the API stays as small as the course needs. Classes and
constants a module defines may stay unexported (records such as MemoryReport are reached through
the functions that return them). Modules whose name starts with an underscore export nothing.
"""

import ast
import importlib
import re
from pathlib import Path

import pytest

import helpers as hp
from tools import layout

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(p.stem for p in (ROOT / "helpers").glob("*.py") if not p.stem.startswith("_"))


def _defined_names(path: Path) -> list[str]:
    """Names a module binds at top level by def, class or assignment (not by import)."""
    names: list[str] = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return names


def _public_names(module: str) -> list[str]:
    return sorted({n for n in _defined_names(ROOT / "helpers" / f"{module}.py") if not n.startswith("_")})


def _public_functions(module: str) -> list[str]:
    tree = ast.parse((ROOT / "helpers" / f"{module}.py").read_text())
    return sorted(node.name for node in tree.body
                  if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"))


@pytest.mark.parametrize("doc", ["README.md", "docs/helpers.md"])
def test_the_docs_name_only_helpers_that_resolve(doc):
    documented = sorted(set(re.findall(r"\bhp\.([A-Za-z_]\w*)", (ROOT / doc).read_text())))
    assert documented or doc == "README.md", f"{doc} documents no hp.name: has its list moved?"
    missing = [name for name in documented if not hasattr(hp, name)]
    assert not missing, f"{doc} documents hp.{', hp.'.join(missing)}, which helpers does not export"


@pytest.mark.parametrize("module", MODULES)
def test_every_public_name_of_a_module_is_exported(module):
    mod = importlib.import_module(f"helpers.{module}")
    missing = [n for n in _public_functions(module) if n not in dir(hp)]
    assert not missing, (f"helpers.{module} defines {missing} but helpers does not export them: add them "
                         "to the imports or to _LAZY in helpers/__init__.py, or rename them with a "
                         "leading underscore if no notebook or solution uses them")
    for name in _public_names(module):
        if name in dir(hp):
            assert getattr(hp, name) is getattr(mod, name), f"hp.{name} is not helpers.{module}.{name}"


def test_every_export_is_used_by_a_notebook_a_solution_or_the_readme():
    texts = [p.read_text() for p in [ROOT / "README.md", ROOT / "docs/helpers.md", *layout.notebooks_in(ROOT / "notebooks"),
                                     *layout.notebooks_in(ROOT / "solutions")]]
    used = {name for text in texts for name in re.findall(r"\bhp\.([A-Za-z_]\w*)", text)}
    exported = {n for n in dir(hp) if not n.startswith("_") and n not in ("annotations", "importlib")
                and not isinstance(getattr(hp, n), type(importlib))}
    unused = sorted(exported - used - {"ClaimFailed", "WrongAnswer"})  # exceptions, named by tracebacks
    assert not unused, (f"helpers exports {unused}, which no notebook, solution, README or docs/helpers.md line uses: "
                        "remove them from helpers/__init__.py (or use them)")


def test_every_export_resolves_and_is_listed():
    for name in hp._WHERE:
        assert name in dir(hp)
        getattr(hp, name)  # AttributeError (or ImportError) if the map names something that is not there
    with pytest.raises(AttributeError, match="no attribute 'not_a_helper'"):
        hp.not_a_helper  # noqa: B018


def test_the_public_name_scan_sees_definitions_and_not_imports(tmp_path):
    source = ("from os import path\nimport sys\nA = 1\n_b = 2\nC: int = 3\nx, (y, _z) = 1, (2, 3)\n"
              "def f(): pass\nclass K: pass\ndef _g(): pass\n")
    (tmp_path / "m.py").write_text(source)
    assert sorted(n for n in _defined_names(tmp_path / "m.py") if not n.startswith("_")) == [
        "A", "C", "K", "f", "x", "y"]


def test_importing_helpers_imports_neither_torch_nor_jax():
    """What the lazy map is for: a JAX notebook never loads torch through helpers, nor the reverse."""
    import subprocess
    import sys

    code = "import sys, helpers; print(sorted(m for m in ('torch', 'jax', 'matplotlib') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
