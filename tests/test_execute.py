"""tools/execute.py, the one executor (make outputs, make gpu-check): a kernel of this interpreter,
never the `python3` kernelspec found first; in place for make outputs; for a report, each notebook in a
fresh kernel, a cell past the time limit stopped, a dead kernel reported, the next notebook run, and
a summary with the first failing cell and the frameworks' own environment reports.

The report runs once, on a fixture that fails on purpose and three tiny notebooks (no real lesson:
strict nbval runs those already)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager

from tools import execute, layout

ROOT = layout.ROOT
FAILING = "tests/fixtures/failing.ipynb"


def notebook(*sources: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources],
                                    metadata={"kernelspec": {"display_name": "Python 3", "language": "python",
                                                             "name": "python3"}})


def foreign_python3(tmp_path) -> dict:
    """An environment whose first `python3` kernelspec is not this interpreter (it cannot even start)."""
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({"argv": ["/bin/false", "{connection_file}"],
                                                  "display_name": "another Python", "language": "python"}))
    return {"JUPYTER_PATH": str(tmp_path / "jupyter"), "JUPYTER_PREFER_ENV_PATH": "0"}


def test_a_foreign_python3_kernelspec_first_on_the_path_is_not_used(tmp_path, monkeypatch):
    for k, v in foreign_python3(tmp_path).items():
        monkeypatch.setenv(k, v)
    assert KernelSpecManager().get_kernel_spec("python3").argv[0] == "/bin/false"  # what a lookup by name finds
    nb = notebook("import sys, os\nprint(sys.executable)\nprint(os.getcwd())")
    execute.client(nb, tmp_path, timeout=120).execute()
    assert nb.cells[0].outputs[0].text == f"{sys.executable}\n{tmp_path}\n"


def test_in_place_execution_writes_what_jupyterlab_would_and_never_a_failed_run(tmp_path):
    path = tmp_path / "nb.ipynb"
    nbformat.write(notebook("1 + 1"), path)
    assert execute.main([str(path)]) == 0
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].execution_count == 1 and nb.cells[0].outputs[0].data["text/plain"] == "2"
    assert nb.metadata.kernelspec == layout.KERNELSPEC
    failing = tmp_path / "failing.ipynb"
    nbformat.write(notebook("1 + 1", "1 / 0"), failing)
    before = failing.read_text()
    assert execute.main([str(path), str(failing)]) == 1 and failing.read_text() == before   # not saved half-run


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    notebooks = {"hang.ipynb": notebook('print("before sleeping", flush=True)', "import time\ntime.sleep(600)", 'print("late")'),
                 "crash.ipynb": notebook("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"),
                 "interpreter.ipynb": notebook("import os, sys\nprint(sys.executable, os.environ['COURSE_PROFILE'])")}
    for name, nb in notebooks.items():
        nbformat.write(nb, tmp / name)
    env = dict(os.environ, **foreign_python3(tmp))
    runs = [subprocess.Popen([sys.executable, "-m", "tools.execute", "--out", str(tmp / out), *args], cwd=ROOT,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for out, args in (("real", [FAILING, str(tmp / "interpreter.ipynb")]),   # together: they overlap
                              ("stopped", ["--timeout", "5", str(tmp / "hang.ipynb"), str(tmp / "crash.ipynb")]))]
    done = [(run.communicate(timeout=600)[0], run.returncode) for run in runs]
    summaries = "\n".join((tmp / out / "summary.md").read_text() for out in ("real", "stopped"))
    return done, tmp, summaries


def test_the_report_names_each_notebooks_result_and_first_failing_cell(report):
    done, _, summaries = report
    assert [rc for _, rc in done] == [1, 1], done
    lines = {line.split(" | ")[0].removeprefix("| "): line for line in summaries.splitlines()
             if line.startswith("| ") and ".ipynb" in line}
    assert list(lines) == [FAILING, "interpreter.ipynb", "hang.ipynb", "crash.ipynb"]
    assert "| 1 passed, 1 skipped | failed at cell 5: ClaimFailed: claim does not hold on this device: x is two" \
        in lines[FAILING]
    assert "timed out at cell 1" in lines["hang.ipynb"] and "kernel died at cell 0" in lines["crash.ipynb"]
    assert lines["interpreter.ipynb"].endswith("| 0 passed, 0 skipped | passed |")
    assert "1 of 2 passed." in summaries and "0 of 2 passed." in summaries


def test_the_executed_copies_stop_where_the_run_did(report):
    _, tmp, _ = report
    out = tmp / "real"
    failing = nbformat.read(out / FAILING, as_version=4).cells
    assert failing[5].outputs[-1].ename == "ClaimFailed" and failing[6].execution_count is None
    assert "image/png" in failing[4].outputs[0].data
    hang = nbformat.read(tmp / "stopped" / "hang.ipynb", as_version=4).cells
    assert hang[0].outputs[0].text == "before sleeping\n" and hang[2].execution_count is None
    ran = nbformat.read(out / "interpreter.ipynb", as_version=4).cells[0].outputs[0].text
    assert ran == f"{sys.executable} cpu\n"   # this interpreter, at the cpu profile


def test_the_environment_report_is_the_frameworks_own(report):
    _, tmp, _ = report
    text = (tmp / "real" / "environment.txt").read_text()
    assert "PyTorch version:" in text and "jax:" in text and "jaxlib:" in text
