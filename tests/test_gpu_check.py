"""tools/gpu_check.py (make gpu-check): runs notebooks in fresh processes, reports the first failing
cell, survives crashes and hangs, and with --compare fails what strict nbval fails.

The runs are started together, once per module (they take most of this file's time): two short real
notebooks at the cpu profile (the PyTorch one on the plain engine, the JAX one on nbclient), the
fixtures in tests/fixtures (one fails on purpose, one has a wrong committed output), strict nbval on
those fixtures, and a few synthetic notebooks that hang, crash or exercise the plain engine."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "gpu_check.py"
FIXTURES = "tests/fixtures"
FAILING, MISMATCH = f"{FIXTURES}/failing.ipynb", f"{FIXTURES}/mismatch.ipynb"
TORCH_NB = "solutions/pytorch/ex08_optimizer_step_memory.ipynb"
JAX_NB = "solutions/jax/ex11_optimizer_step_memory.ipynb"
CPU_ENV = {"CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu", "COURSE_PROFILE": "cpu", "PYTHONHASHSEED": "0"}
HAS_NBCLIENT = all(importlib.util.find_spec(m) for m in ("nbclient", "nbformat", "ipykernel"))

_spec = importlib.util.spec_from_file_location("gpu_check", TOOL)
gc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gc)


def notebook(*sources: str) -> dict:
    """A minimal nbformat-4 notebook of code cells, never run."""
    return {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                       "source": s} for s in sources],
            "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
            "nbformat": 4, "nbformat_minor": 5}


SYNTHETIC = {
    "hang.ipynb": notebook('import time\nprint("before sleeping", flush=True)', "time.sleep(600)", 'print("late")'),
    "crash.ipynb": notebook('print("before the crash")', "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"),
    "display.ipynb": notebook(
        "%matplotlib inline\n!echo shell\n1 + 1",
        "x = 3;",
        "import os, sys\nprint('out')\nprint('err', file=sys.stderr)\nos.write(1, b'fd level\\n')\nNone",
        "display('shown')\nprint('check passed: displayed')",
        "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\nprint('after show')",
        "plt.figure(figsize=(2, 1))\nplt.plot([0, 1]);",
    ),
}


def _start(args: list, cwd=ROOT) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *map(str, args)], cwd=cwd, env=dict(os.environ, **CPU_ENV),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Start every run at once (they overlap on the cores), then wait for all of them."""
    tmp = tmp_path_factory.mktemp("gpu_check")
    committed = {path: _committed_checks(path) for path in (TORCH_NB, JAX_NB)}  # before the runs read them
    for name, nb in SYNTHETIC.items():
        (tmp / name).write_text(json.dumps(nb))
    started = {
        "plain": (tmp / "plain", _start([TOOL, "--engine", "plain", "--compare", "--no-probe", "--out", tmp / "plain",
                                         TORCH_NB, FAILING, MISMATCH])),
        "synthetic": (tmp / "synthetic", _start([TOOL, "--engine", "plain", "--no-probe", "--timeout", "20",
                                                 "--out", tmp / "synthetic", *(tmp / n for n in SYNTHETIC)])),
        "nbval": (None, _start(["-m", "pytest", "-p", "no:cacheprovider", "-q", "-rf", "--nbval",
                                "--nbval-current-env", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg",
                                FAILING, MISMATCH])),
    }
    if HAS_NBCLIENT:
        started["nbclient"] = (tmp / "nbclient", _start([TOOL, "--engine", "nbclient", "--compare", "--out",
                                                         tmp / "nbclient", JAX_NB, FAILING]))
    done = {}
    for name, (out, process) in started.items():
        text, _ = process.communicate(timeout=600)
        summary = json.loads((out / "summary.json").read_text()) if out else None
        done[name] = {"rc": process.returncode, "stdout": text, "out": out, "summary": summary,
                      "records": {r["path"]: r for r in summary["notebooks"]} if summary else {},
                      "md": (out / "summary.md").read_text() if out else ""}
    done["tmp"], done["committed_checks"] = tmp, committed
    return done


def _committed_checks(path: str) -> tuple | None:
    """(check passed, check skipped) lines in a notebook's committed outputs; None while some cell
    is unrun (someone is editing it: strict nbval does not compare unrun cells, nor does --compare)."""
    nb = json.loads((ROOT / path).read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    if any(c.get("execution_count") is None for c in code):
        return None
    return gc.count_checks({i: c.get("outputs", []) for i, c in enumerate(code)})


ENGINES = ["plain"] + (["nbclient"] if HAS_NBCLIENT else [])


@pytest.mark.parametrize("engine", ENGINES)
def test_failing_notebook_names_its_cell_and_error_and_exits_nonzero(runs, engine):
    run = runs[engine]
    assert run["rc"] == 1, run["stdout"]
    record = run["records"][FAILING]
    assert record["status"] == "failed" and record["engine"] == engine
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
    # the executed copy stops at the failing cell: the cell after it was not run
    executed = json.loads((run["out"] / record["executed"]).read_text())
    code = [c for c in executed["cells"] if c["cell_type"] == "code"]
    assert code[4]["outputs"][-1]["output_type"] == "error" and code[4]["outputs"][-1]["ename"] == "ClaimFailed"
    assert code[5]["outputs"] == [] and code[5]["execution_count"] is None
    figure = code[3]["outputs"][0]
    assert figure["output_type"] == "display_data" and "image/png" in figure["data"]


@pytest.mark.parametrize(("engine", "path"), [("plain", TORCH_NB)] + ([("nbclient", JAX_NB)] if HAS_NBCLIENT else []))
def test_short_notebooks_pass_with_their_check_counts(runs, engine, path):
    record = runs[engine]["records"][path]
    assert record["status"] == "passed", record["failure"]
    assert record["failure"] is None and record["cells_run"] == record["code_cells"]
    counts = (record["checks_passed"], record["checks_skipped"])
    executed = json.loads((runs[engine]["out"] / record["executed"]).read_text())
    assert counts == gc.count_checks({i: c.get("outputs", []) for i, c in enumerate(executed["cells"])})
    committed = runs["committed_checks"][path]
    if committed is not None and not record.get("source_changed"):  # (not being re-executed right now)
        assert counts == committed
    assert record["checks_passed"] >= 1
    assert re.search(rf"PASS  {re.escape(path)}  .* checks {record['checks_passed']} passed", runs[engine]["stdout"])


def test_compare_fails_what_strict_nbval_fails(runs):
    nbval = runs["nbval"]
    failed = dict(re.findall(r"^FAILED (\S+\.ipynb)::Cell (\d+)", nbval["stdout"], flags=re.MULTILINE))
    assert failed == {FAILING: "4", MISMATCH: "2"}, nbval["stdout"][-3000:]
    ours = {p: str(r["failure"]["cell"]) for p, r in runs["plain"]["records"].items() if r["status"] != "passed"}
    assert ours == failed
    mismatch = runs["plain"]["records"][MISMATCH]["failure"]
    assert mismatch["kind"] == "mismatch" and mismatch["key"] == "stdout"
    assert "-answer: 41" in mismatch["diff"] and "+answer: 42" in mismatch["diff"]
    assert runs["plain"]["records"][MISMATCH]["mismatched_cells"] == [2]  # the masked timing of cell 1 matched
    if HAS_NBCLIENT:
        assert runs["nbclient"]["records"][FAILING]["failure"]["cell"] == 4


def test_summary_header_reports_device_and_versions_against_the_pins(runs):
    run = runs["nbclient"] if HAS_NBCLIENT else runs["plain"]
    env = run["summary"]["environment"]
    pins = gc.read_pins()
    for name in ("torch", "jax", "jaxlib", "optax", "numpy", "matplotlib"):
        assert env["versions"][name]["pin"] == pins[name]
        assert env["versions"][name]["used"], name
        assert f"| {name} | {env['versions'][name]['used']} | {pins[name]} |" in run["md"]
    assert env["probe"]["python"] and env["probe"]["executable"] == sys.executable
    assert "GPU (nvidia-smi)" in run["md"] and "| Python |" in run["md"]
    assert run["summary"]["profile"] == "cpu" and run["summary"]["complete"]
    if HAS_NBCLIENT:
        assert env["probe"]["jax"]["backend"] == "cpu" and env["probe"]["profile"] == "cpu"
        assert "jax sees | backend cpu" in run["md"]
    assert re.search(r"wall time \d", run["stdout"])


def test_a_hang_and_a_crash_do_not_stop_the_other_notebooks(runs):
    run = runs["synthetic"]
    assert run["rc"] == 1
    records = {Path(p).name: r for p, r in run["records"].items()}
    assert list(records) == ["hang.ipynb", "crash.ipynb", "display.ipynb"]
    hang, crash = records["hang.ipynb"], records["crash.ipynb"]
    assert hang["status"] == "timed out" and hang["failure"]["cell"] == 1
    assert hang["failure"]["first_line"] == "time.sleep(600)" and "timed out after 20 s" in hang["failure"]["evalue"]
    assert crash["status"] == "crashed" and crash["failure"]["cell"] == 1
    assert "SIGKILL" in crash["failure"]["evalue"]
    executed = json.loads((run["out"] / hang["executed"]).read_text())
    assert executed["cells"][0]["outputs"][0]["text"] == ["before sleeping\n"]
    assert executed["cells"][1]["outputs"][-1]["ename"] == "Timeout"
    assert records["display.ipynb"]["status"] == "passed"
    assert re.search(r"\[1/3\] TIME .*hang\.ipynb.*\n.*\n\[2/3\] CRSH .*crash\.ipynb", run["stdout"])


def test_plain_engine_displays_like_a_kernel(runs):
    run = runs["synthetic"]
    record = next(r for p, r in run["records"].items() if p.endswith("display.ipynb"))
    cells = json.loads((run["out"] / record["executed"]).read_text())["cells"]
    outs = [[gc.normalize_output(o) for o in c["outputs"]] for c in cells]
    assert [o["data"]["text/plain"] for o in outs[0]] == ["2"]           # the last value is displayed
    assert outs[0][0]["output_type"] == "execute_result" and outs[0][0]["execution_count"] == 1
    assert outs[1] == []                                                   # a trailing ';' hides it
    assert {o["name"]: o["text"] for o in outs[2]} == {"stdout": "out\nfd level\n", "stderr": "err\n"}
    assert outs[3][0]["data"] == {"text/plain": "'shown'"} and record["checks_passed"] == 1
    assert [o["output_type"] for o in outs[4]] == ["display_data", "stream"]  # plt.show() shows in place
    assert outs[4][0]["data"]["text/plain"] == "<Figure size 640x480 with 1 Axes>"
    assert outs[5][0]["data"]["text/plain"] == "<Figure size 200x100 with 1 Axes>"  # open figures shown at the end
    assert any("stripped '!echo shell'" in n for n in record["notes"])


def test_list_shows_what_would_run_with_estimates_from_the_last_run(runs):
    out = runs["plain"]["out"]
    listed = subprocess.run([sys.executable, str(TOOL), "--list", "--out", str(out), TORCH_NB, JAX_NB],
                            cwd=ROOT, env=dict(os.environ, **CPU_ENV), capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert re.search(rf"{re.escape(TORCH_NB)}\s+~\d", listed.stdout)    # it ran in that folder: estimate
    assert re.search(rf"{re.escape(JAX_NB)}\s+no estimate", listed.stdout)
    assert "2 notebooks, profile cpu" in listed.stdout


def test_default_selection_is_every_notebook_and_solution_sorted():
    chosen = [gc.display_path(p) for p in gc.select_notebooks([], [])]
    expected = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("notebooks/*/*.ipynb"))
    expected += sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("solutions/*/*.ipynb"))
    assert chosen == expected
    assert [gc.display_path(p) for p in gc.select_notebooks([], ["*/jax/ex1*"])] == \
        sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("solutions/jax/ex1*.ipynb"))


# -- magic stripping (the plain engine) --------------------------------------------------------

@pytest.mark.parametrize(("source", "code"), [
    ("%matplotlib inline\nimport torch\n", "pass  # %matplotlib inline\nimport torch\n"),
    ("!pip install x\nx = 1", "pass  # !pip install x\nx = 1"),
    ("if True:\n    %load_ext foo\n    y = 2\n", "if True:\n    pass  # %load_ext foo\n    y = 2\n"),
    ("%time y = f()\n", "y = f()\n"),
    ("%timeit -n1 -r1 f()\n", "f()\n"),
    ("files = !ls\n", "files = None  # files = !ls\n"),
    ("z = (a\n     % b)\n", "z = (a\n     % b)\n"),                      # a modulo continuation stays
    ("s = '''\n%not a magic\n'''\n", "s = '''\n%not a magic\n'''\n"),    # so does a string's content
    ("t = 1 + \\\n    2\n%who\n", "t = 1 + \\\n    2\npass  # %who\n"),
    ("%%time\nx = 1\n", "x = 1\n"),
    ("x = '#'  # %s\n%env A=1\n", "x = '#'  # %s\npass  # %env A=1\n"),
])
def test_strip_magics_keeps_python_and_drops_ipython_syntax(source, code):
    stripped, notes = gc.strip_magics(source)
    assert stripped == code
    compile(stripped, "<cell>", "exec")
    assert bool(notes) == (source != code)


def test_strip_magics_skips_cells_that_are_not_python():
    code, notes = gc.strip_magics("%%bash\necho hi\n")
    assert code is None and notes == ["skipped: the cell magic %%bash is not Python"]


# -- the sanitize-compare (--compare) ---------------------------------------------------------

PATTERNS = gc.read_sanitize_patterns(ROOT / "tests" / "nbval_sanitize.cfg")


def stream(text, name="stdout"):
    return {"name": name, "output_type": "stream", "text": text}


def figure(size, png="iVBORw0KGgo="):
    return {"data": {"image/png": png, "text/plain": f"<Figure size {size} with 1 Axes>"},
            "metadata": {"needs_background": "light"}, "output_type": "display_data"}


def test_compare_masks_machine_dependent_figures_and_keeps_exact_ones():
    assert PATTERNS and all(replace == "~<varies>" for _, replace in PATTERNS)
    assert gc.compare_outputs([stream("step ~12.5 ms, ~3.1e-05 loss\n")], [stream("step ~9.75 ms, ~2e+01 loss\n")],
                              PATTERNS) is None
    diff = gc.compare_outputs([stream("peak 403.4 MB\n")], [stream("peak 403.5 MB\n")], PATTERNS)
    assert diff["key"] == "stdout" and diff["expected"] == "peak 403.5 MB\n" and diff["got"] == "peak 403.4 MB\n"


def test_compare_coalesces_streams_and_ignores_images_metadata_and_counts():
    ref = [stream(["a\n", "b\n"]), stream("c\n"), figure("640x480", png="AAAA\n"),
           {"data": {"text/plain": ["4", "2"]}, "execution_count": 7, "metadata": {}, "output_type": "execute_result"}]
    test = [stream("a\nb\nc\n"), figure("640x480", png="BBBB\n"),
            {"data": {"text/plain": "42"}, "execution_count": 1, "metadata": {"x": 1}, "output_type": "execute_result"}]
    assert gc.compare_outputs(test, ref, PATTERNS) is None
    assert gc.compare_outputs([stream("50%\r100%\n")], [stream("100%\n")], PATTERNS) is None  # \r as nbval
    # the relative order of different keys does not matter; of one key it does
    assert gc.compare_outputs([figure("1x1"), stream("x\n")], [stream("x\n"), figure("1x1")], PATTERNS) is None
    assert gc.compare_outputs([figure("1x1"), figure("2x2")], [figure("2x2"), figure("1x1")], PATTERNS)["key"] == "text/plain"


def test_compare_reports_missing_unexpected_and_miscounted_outputs():
    assert "missing" in gc.compare_outputs([], [stream("x\n")], PATTERNS)["message"]
    assert "unexpected" in gc.compare_outputs([stream("x\n", "stderr")], [], PATTERNS)["message"]
    assert "number of outputs" in gc.compare_outputs([figure("1x1")], [figure("1x1"), figure("1x1")], PATTERNS)["message"]
    assert gc.compare_outputs([figure("900x320")], [figure("900x300")], PATTERNS)["key"] == "text/plain"
    error = {"ename": "ValueError", "evalue": "bad ~1.5", "output_type": "error", "traceback": ["x"]}
    assert gc.compare_outputs([dict(error, evalue="bad ~2", traceback=["y"])], [error], PATTERNS) is None


def test_nbval_markers_are_read_from_comments_and_tags():
    assert gc.cell_options({"source": "# NBVAL_SKIP\nx"})["skip"]
    assert not gc.cell_options({"source": "#  NBVAL_IGNORE_OUTPUT\nx"})["check"]
    assert gc.cell_options({"source": "x", "metadata": {"tags": ["raises-exception"]}})["check_exception"]
    assert gc.cell_options({"source": "x", "metadata": {"tags": ["nbval-skip"]}})["skip"]
    assert gc.cell_options({"source": "x"}) == {"skip": False, "check": True, "check_exception": False}


def test_version_status_tolerates_local_builds_and_reports_differences():
    assert gc.version_status("2.13.0", "2.13.0") == "as pinned"
    assert gc.version_status("2.13.0+cpu", "2.13.0") == "as pinned (local build +cpu)"
    assert gc.version_status("2.5.1+cu121", "2.13.0") == "differs from the pin 2.13.0"
    assert gc.version_status(None, "0.2.8") == "not installed"
    assert {"torch", "jax", "jaxlib", "optax", "numpy"} <= set(gc.read_pins())
