"""catalog.toml agrees with the notebooks (every notebook in it once, titles, twins, points), the
tables generated from it are current, run times are written into it, and the tools' shared knowledge
(tools/course.py) holds: the notebook listing, the Makefile's copy of it, the JupyterLab addresses."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tools import catalog, course, nbgrader_metadata

ROOT = course.ROOT
DATA = catalog.load()
NOTEBOOKS = catalog.notebooks(DATA)


def first_heading(path: str) -> str:
    return course.source(json.loads((ROOT / path).read_text())["cells"][0]).splitlines()[0]


def test_every_lesson_and_solution_is_in_the_catalog_once():
    listed = [n.path for n in NOTEBOOKS]
    assert len(listed) == len(set(listed))
    assert sorted(listed) == sorted(course.rel(p) for p in course.notebooks("lessons", "solutions"))
    assert sorted(e["order"] for e in DATA["lesson"]) == list(range(1, len(DATA["lesson"]) + 1))
    assert sorted(e["order"] for e in DATA["exercise"]) == list(range(1, len(DATA["exercise"]) + 1))
    assert {e["after_lesson"] for e in DATA["exercise"]} <= {e["order"] for e in DATA["lesson"]}


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda n: n.path)
def test_title_is_the_notebooks_first_heading(nb):
    prefix = f"# {nb.id[:2]} · " if nb.kind == "lesson" else f"# Exercise {int(nb.id[2:4])} · "
    assert first_heading(nb.path) == prefix + nb.title


def test_twins_and_counterparts_exist_in_the_other_framework():
    for nb in NOTEBOOKS:
        if nb.twin:
            twin = next(n for n in NOTEBOOKS if n.path == nb.twin)
            assert twin.twin == nb.path and twin.folder != nb.folder and twin.id == nb.id
    numbers = {e["number"]: e for e in DATA["exercise"]}
    for e in DATA["exercise"]:
        if "counterpart" in e:
            other = numbers[e["counterpart"]]
            assert other.get("counterpart") == e["number"] and set(other["cpu_s"]).isdisjoint(e["cpu_s"])


def test_points_are_what_nbgrader_metadata_counts():
    rows = nbgrader_metadata.table([ROOT / "solutions"]).splitlines()[2:-1]
    counted = {f"solutions/{r.split('|')[2].strip().strip('`')}": int(r.split("|")[-2]) for r in rows}
    assert {n.path: n.points for n in NOTEBOOKS if n.kind == "exercise"} == counted


def test_every_notebook_has_a_cpu_time_and_no_gpu_time_is_invented():
    assert all(n.cpu_s and n.cpu_s > 0 for n in NOTEBOOKS)
    # none has run on a GPU yet (README, GPU_BUDGET.md): a gpu_s appears only from gpu_check --record
    assert all(n.gpu_s is None for n in NOTEBOOKS)


def test_generated_tables_are_current():
    assert catalog.stale() == [], "run: python -m tools.catalog write"


def test_a_changed_run_time_makes_the_tables_stale_until_written(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "cpu")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    for name in ("README.md", course.START, "catalog.toml", "notebooks/pytorch", "notebooks/jax"):
        src, dst = ROOT / name, tmp_path / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copyfile)(src, dst)
    path = "notebooks/jax/02_mixed_precision.ipynb"
    catalog.record_cpu_time(path, 98.6, tmp_path / "catalog.toml")
    data = catalog.load(tmp_path / "catalog.toml")
    assert next(n.cpu_s for n in catalog.notebooks(data) if n.path == path) == 99
    assert catalog.dump(data, tmp_path / "again.toml") is None
    assert (tmp_path / "again.toml").read_text() == (tmp_path / "catalog.toml").read_text()  # one layout
    readme = catalog.generated(data, root=tmp_path)[tmp_path / "README.md"]
    assert "| `02_mixed_precision` |" in readme and readme != (tmp_path / "README.md").read_text()
    assert re.search(r"\| `02_mixed_precision` \|.*\| \d+ s / 99 s \|", readme)
    monkeypatch.setenv("COURSE_PROFILE", "gpu")  # a time at another profile is not a CPU run time
    catalog.record_cpu_time(path, 5.0, tmp_path / "catalog.toml")
    assert (tmp_path / "again.toml").read_text() == (tmp_path / "catalog.toml").read_text()


def test_unknown_fields_are_refused(tmp_path):
    (tmp_path / "c.toml").write_text('[[lesson]]\nid = "x"\nruntime = 3\n')
    with pytest.raises(ValueError, match="unknown fields \\['runtime'\\]"):
        catalog.load(tmp_path / "c.toml")


def test_the_order_is_slowest_first_and_complete():
    order = catalog.order(DATA)
    seconds = {n.path: n.cpu_s for n in NOTEBOOKS} | DATA["make_test"].get("nbval_s", {})
    assert sorted(order) == sorted(seconds)
    assert [seconds[p] for p in order] == sorted(seconds.values(), reverse=True)
    with_tests = catalog.order(DATA, with_tests=True)
    tests = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").glob("test_*.py"))
    assert sorted(with_tests) == sorted(order + tests)
    assert set(DATA["make_test"]["slow_tests"]) <= set(tests)
    assert set(DATA["make_test"].get("nbval_s", {})) <= {n.path for n in NOTEBOOKS}


def test_test_times_are_read_from_a_junit_report(tmp_path):
    report = tmp_path / "report.xml"
    cases = [(n.path.removesuffix(".ipynb").replace("/", ".") + ".ipynb", "Cell 0", 2.0) for n in NOTEBOOKS]
    cases += [("solutions.pytorch.ex09_fp16_gradient_window.ipynb", "Cell 1", 40.0),
              ("tests.test_catalog", "test_a", 3.0), ("tests.test_gpt", "test_b", 4.0), ("tests.test_gpt", "test_c", 2.5)]
    report.write_text("<testsuites><testsuite>" + "".join(
        f'<testcase classname="{c}" name="{n}" time="{t}" />' for c, n, t in cases) + "</testsuite></testsuites>")
    copy = tmp_path / "catalog.toml"
    copy.write_text(catalog.CATALOG.read_text())
    catalog.record_test_times(report, copy)
    data = catalog.load(copy)
    assert data["make_test"]["nbval_s"]["solutions/pytorch/ex09_fp16_gradient_window.ipynb"] == 42
    assert data["make_test"]["slow_tests"] == {"tests/test_gpt.py": 6}   # 3 s is not slow
    assert catalog.order(data)[0] == "solutions/pytorch/ex09_fp16_gradient_window.ipynb"
    report.write_text('<testsuites><testsuite><testcase classname="tests.test_gpt" name="x" time="9" />'
                      "</testsuite></testsuites>")
    with pytest.raises(ValueError, match="whole"):
        catalog.record_test_times(report, copy)


def make_dry_run(target: str) -> str:
    return subprocess.run(["make", "-n", "-s", target], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def test_the_makefile_asks_tools_course_and_the_catalog():
    command = shlex.split(next(l for l in make_dry_run("test").splitlines() if "pytest" in l))
    env = dict(arg.split("=", 1) for arg in command if re.fullmatch(r"[A-Z_]+=.*", arg))
    assert env == course.CPU_ENV
    pytest_args = command[command.index("pytest") + 1:]
    assert pytest_args[:6] == ["-n", "2", "--dist", "loadscope", "--no-loadscope-reorder", *course.NBVAL_FLAGS[:1]]
    assert pytest_args[5:5 + len(course.NBVAL_FLAGS)] == course.NBVAL_FLAGS
    assert pytest_args[5 + len(course.NBVAL_FLAGS):] == catalog.order(with_tests=True)


def test_the_jupyterlab_addresses_resolve_against_make_labs_root():
    lab = shlex.split(next(l for l in make_dry_run("lab").splitlines() if "jupyter" in l))
    root = ROOT / next(a.split("=", 1)[1] for a in lab if a.startswith("--ServerApp.root_dir="))
    for kind in course.FOLDERS:
        for path in course.notebooks(kind):
            url = course.lab_url(course.rel(path))
            assert url.startswith("http://localhost:8888/lab/tree/")
            assert (root / url.removeprefix(course.LAB_URL)).resolve() == path.resolve(), url


def test_listing_knows_its_kinds():
    assert [p.parent.parent.name for p in course.notebooks("exercises")] == ["exercises"] * 22
    assert course.START not in [course.rel(p) for p in course.notebooks("lessons")]
    with pytest.raises(ValueError, match="unknown kind of notebook \\['lesson'\\]"):
        course.notebooks("lesson")
