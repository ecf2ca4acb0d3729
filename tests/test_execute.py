"""tools/execute.py, the one executor (`make outputs`, the exercise runs, gpu_check): a kernel of this
interpreter, never the `python3` kernelspec that jupyter_core's search order happens to find first."""

from __future__ import annotations

import json
import sys

import nbformat
from jupyter_client.kernelspec import KernelSpecManager

from tools import execute


def test_a_foreign_python3_kernelspec_first_on_the_path_is_not_used(tmp_path, monkeypatch):
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({"argv": ["/bin/false", "{connection_file}"],
                                                  "display_name": "another Python", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_PREFER_ENV_PATH", "0")  # a documented setting: user paths before the venv's
    assert KernelSpecManager().get_kernel_spec("python3").argv[0] == "/bin/false"  # what a lookup by name finds
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import sys, os\nprint(sys.executable)\nprint(os.getcwd())")])
    execute.client(nb, tmp_path, timeout=120).execute()
    assert nb.cells[0].outputs[0].text == f"{sys.executable}\n{tmp_path}\n"


def test_execute_saves_the_notebook_in_place_and_returns_its_time(tmp_path):
    path = tmp_path / "nb.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), path)
    seconds = execute.execute(path)
    cell = nbformat.read(path, as_version=4).cells[0]
    assert cell.execution_count == 1 and cell.outputs[0].data["text/plain"] == "2"
    assert 0 < seconds < 120
