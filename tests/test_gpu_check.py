"""tools/gpu_check.py (make gpu-check): runs notebooks in fresh kernels of its own interpreter under a
wall-clock limit, reports the first failing cell, survives crashes and hangs, and writes a summary.

The runs start together, once per module (they take most of this file's time): two short real
solutions at the cpu profile with the failing fixture, and synthetic notebooks that hang, crash or
report the interpreter they run under, with a broken `python3` kernelspec first on Jupyter's path."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tools import catalog, course
from tools import gpu_check as gc

ROOT = course.ROOT
FAILING = "tests/fixtures/failing.ipynb"
TORCH_NB = "solutions/pytorch/ex08_optimizer_step_memory.ipynb"
JAX_NB = "solutions/jax/ex11_optimizer_step_memory.ipynb"


def notebook(*sources: str) -> dict:
    """A minimal nbformat-4 notebook of code cells, never run."""
    return {"cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
                       "source": s} for i, s in enumerate(sources)],
            "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
            "nbformat": 4, "nbformat_minor": 5}


SYNTHETIC = {
    "hang.ipynb": notebook('import time\nprint("before sleeping", flush=True)', "time.sleep(600)", 'print("late")'),
    "crash.ipynb": notebook('print("before the crash")', "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"),
    "interpreter.ipynb": notebook("import sys\nprint(sys.executable)\nprint('check passed: ran')"),
}


def _start(args: list, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tools.gpu_check", *map(str, args)], cwd=ROOT,
                            env=course.cpu_environ(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Start both runs at once (they overlap on the cores), then wait for them."""
    tmp = tmp_path_factory.mktemp("gpu_check")
    for name, nb in SYNTHETIC.items():
        (tmp / name).write_text(json.dumps(nb))
    # A user-level `python3` kernelspec that is not this interpreter (it cannot even start), found first.
    spec = tmp / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({"argv": ["/bin/false", "{connection_file}"],
                                                  "display_name": "another Python", "language": "python"}))
    other_kernel = dict(os.environ, JUPYTER_PATH=str(tmp / "jupyter"), JUPYTER_PREFER_ENV_PATH="0")
    started = {
        "real": _start(["--out", tmp / "real", TORCH_NB, JAX_NB, FAILING]),
        "synthetic": _start(["--no-probe", "--timeout", "20", "--out", tmp / "synthetic",
                             *(tmp / n for n in SYNTHETIC)], other_kernel),
    }
    done = {}
    for name, process in started.items():
        text, _ = process.communicate(timeout=600)
        out = tmp / name
        summary = json.loads((out / "summary.json").read_text())
        done[name] = {"rc": process.returncode, "stdout": text, "out": out, "summary": summary,
                      "records": {Path(r["path"]).name: r for r in summary["notebooks"]},
                      "md": (out / "summary.md").read_text()}
    return done


def _executed(run: dict, name: str) -> dict:
    return nbformat.read(run["out"] / run["records"][name]["executed"], as_version=4)


def test_failing_notebook_names_its_cell_and_error_and_exits_nonzero(runs):
    run = runs["real"]
    assert run["rc"] == 1, run["stdout"]
    record = run["records"]["failing.ipynb"]
    assert record["status"] == "failed"
    failure = record["failure"]
    assert failure["kind"] == "error" and failure["cell"] == 4 and failure["cell_index"] == 5
    assert failure["first_line"] == 'hp.check("x is two", x == 2, f"x is {x}")'
    assert failure["ename"] == "ClaimFailed"
    assert failure["evalue"] == "claim does not hold on this device: x is two (x is 1)"
    assert any("ClaimFailed" in line for line in failure["traceback_tail"])
    assert (record["checks_passed"], record["checks_skipped"]) == (1, 1)
    assert re.search(r"FAIL  tests/fixtures/failing\.ipynb .*\n\s+cell 4 .*ClaimFailed", run["stdout"])
    assert "| [tests/fixtures/failing.ipynb](tests/fixtures/failing.ipynb) | failed |" in run["md"]
    assert "ClaimFailed: claim does not hold on this device: x is two (x is 1)" in run["md"]
    # the executed copy stops at the failing cell: the cell after it was not run and shows nothing
    code = [c for c in _executed(run, "failing.ipynb")["cells"] if c["cell_type"] == "code"]
    assert code[4]["outputs"][-1]["output_type"] == "error" and code[4]["outputs"][-1]["ename"] == "ClaimFailed"
    assert code[5]["outputs"] == [] and code[5]["execution_count"] is None
    assert code[3]["outputs"][0]["output_type"] == "display_data" and "image/png" in code[3]["outputs"][0]["data"]


@pytest.mark.parametrize("path", [TORCH_NB, JAX_NB])
def test_short_notebooks_pass_with_their_check_counts(runs, path):
    run = runs["real"]
    record = run["records"][Path(path).name]
    assert record["status"] == "passed", record["failure"]
    assert record["failure"] is None and record["cells_run"] == record["code_cells"]
    executed = [c for c in _executed(run, Path(path).name)["cells"] if c["cell_type"] == "code"]
    committed = [c for c in nbformat.read(ROOT / path, as_version=4).cells if c.cell_type == "code"]
    counts = (record["checks_passed"], record["checks_skipped"])
    assert counts == gc.count_checks(executed) == gc.count_checks(committed)  # the same claims checked
    assert record["checks_passed"] >= 1
    assert re.search(rf"PASS  {re.escape(path)}  .* checks {record['checks_passed']} passed", run["stdout"])


def test_header_reports_device_and_versions_against_the_pins(runs):
    run = runs["real"]
    env, pins = run["summary"]["environment"], gc.pins()
    for name in ("torch", "jax", "jaxlib", "optax", "numpy", "matplotlib", "nbclient", "ipykernel"):
        assert env["versions"][name]["pin"] == pins[name]
        assert env["versions"][name]["used"], name
        assert f"| {name} | {env['versions'][name]['used']} | {pins[name]} |" in run["md"]
    assert env["executable"] == sys.executable and f"python {env['python']} ({sys.executable})" in run["stdout"]
    assert "gpu_check: device " in run["stdout"] and "torch 2." in run["stdout"]
    assert "GPU (nvidia-smi)" in run["md"] and "| Python |" in run["md"]
    assert run["summary"]["profile"] == "cpu" and run["summary"]["complete"]
    assert env["probe"]["jax"]["backend"] == "cpu" and env["probe"]["profile"] == "cpu"
    assert "jax sees | backend cpu" in run["md"]
    assert re.search(r"wall time \d", run["stdout"])
    counts = run["summary"]["counts"]
    assert counts["notebooks"] == 3 and counts["passed"] == 2 and counts["failed"] == 1
    assert counts["checks_passed"] == sum(r["checks_passed"] for r in run["summary"]["notebooks"])


def test_kernels_run_this_interpreter_whatever_kernelspec_is_found_first(runs):
    run = runs["synthetic"]
    record = run["records"]["interpreter.ipynb"]
    assert record["status"] == "passed", record["failure"]
    assert _executed(run, "interpreter.ipynb")["cells"][0]["outputs"][0]["text"] == f"{sys.executable}\ncheck passed: ran\n"


def test_a_hang_and_a_crash_do_not_stop_the_other_notebooks(runs):
    run = runs["synthetic"]
    assert run["rc"] == 1
    assert list(run["records"]) == ["hang.ipynb", "crash.ipynb", "interpreter.ipynb"]
    hang, crash = run["records"]["hang.ipynb"], run["records"]["crash.ipynb"]
    assert hang["status"] == "timed out" and hang["failure"]["cell"] == 1
    assert hang["failure"]["first_line"] == "time.sleep(600)" and "timed out after 20 s" in hang["failure"]["evalue"]
    assert 20 <= hang["seconds"] < 60
    assert crash["status"] == "crashed" and crash["failure"]["cell"] == 1
    assert crash["failure"]["ename"] == "DeadKernelError"
    cells = _executed(run, "hang.ipynb")["cells"]
    assert cells[0]["outputs"][0]["text"] == "before sleeping\n"
    assert cells[1]["outputs"][-1]["ename"] == "Timeout" and cells[2]["execution_count"] is None
    assert re.search(r"\[1/3\] TIME .*hang\.ipynb.*\[2/3\] CRSH .*crash\.ipynb.*\[3/3\] PASS", run["stdout"], re.S)


def test_list_shows_the_catalog_times_of_the_profile():
    listed = subprocess.run([sys.executable, "-m", "tools.gpu_check", "--list", TORCH_NB, FAILING], cwd=ROOT,
                            env=course.cpu_environ(), capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    seconds = next(n.cpu_s for n in catalog.notebooks() if n.path == TORCH_NB)
    assert re.search(rf"{re.escape(TORCH_NB)}\s+~{re.escape(gc.fmt_seconds(seconds))}\n", listed.stdout)
    assert re.search(rf"{re.escape(FAILING)}\s+not measured", listed.stdout)
    assert "2 notebooks, profile cpu" in listed.stdout
    at_gpu = subprocess.run([sys.executable, "-m", "tools.gpu_check", "--list", TORCH_NB], cwd=ROOT,
                            env=dict(os.environ, COURSE_PROFILE="gpu"), capture_output=True, text=True, timeout=120)
    measured = next(n.gpu_s for n in catalog.notebooks() if n.path == TORCH_NB)
    assert ("not measured" in at_gpu.stdout) == (measured is None), at_gpu.stdout


def test_record_refuses_a_run_without_a_gpu(tmp_path, capsys):
    summary = {"profile": "cpu", "environment": {"device": {"gpus": []}}, "notebooks": []}
    gc.record_times(summary)
    assert "nothing recorded" in capsys.readouterr().err


def test_default_selection_is_every_lesson_and_solution():
    chosen = [gc.shown(p) for p in gc.select_notebooks([], [])]
    assert chosen == [course.rel(p) for p in course.notebooks("lessons", "solutions")]
    from tools import catalog
    assert chosen[0].startswith("notebooks/") and chosen[-1].startswith("solutions/")
    assert len(chosen) == len(catalog.notebooks()), "every notebook of catalog.toml, lessons and solutions"
    assert [gc.shown(p) for p in gc.select_notebooks([], ["*/jax/ex1*"])] == \
        [course.rel(p) for p in course.notebooks("solutions") if p.match("jax/ex1*.ipynb")]


def test_version_status_tolerates_local_builds_and_reports_differences():
    assert gc.version_status("2.13.0", "2.13.0") == "as pinned"
    assert gc.version_status("2.13.0+cpu", "2.13.0") == "as pinned (local build +cpu)"
    assert gc.version_status("2.5.1+cu121", "2.13.0") == "differs from the pin 2.13.0"
    assert gc.version_status(None, "0.2.8") == "not installed"
    assert {"torch", "jax", "jaxlib", "optax", "numpy", "nbclient", "ipykernel"} <= set(gc.pins())
