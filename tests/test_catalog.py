"""catalog.toml agrees with the notebooks (every notebook in it once, titles, twins, points), the
tables generated from it are current and carry the times the notebooks state, and the listing of
notebooks (tools/layout.py) knows its kinds and the JupyterLab addresses."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess

import pytest

from tools import catalog, layout, nbgrader_metadata

ROOT = layout.ROOT
DATA = catalog.load()
NOTEBOOKS = catalog.notebooks(DATA)


def first_heading(path: str) -> str:
    return layout.source(json.loads((ROOT / path).read_text())["cells"][0]).splitlines()[0]


def test_every_lesson_and_solution_is_in_the_catalog_once():
    listed = [path for path, _, _ in NOTEBOOKS]
    assert len(listed) == len(set(listed))
    assert sorted(listed) == sorted(layout.rel(p) for p in layout.notebooks("lessons", "solutions"))
    assert sorted(e["order"] for e in DATA["lesson"]) == list(range(1, len(DATA["lesson"]) + 1))
    assert sorted(e["order"] for e in DATA["exercise"]) == list(range(1, len(DATA["exercise"]) + 1))
    assert sorted(e["number"] for e in DATA["exercise"]) == list(range(1, len(DATA["exercise"]) + 1))
    assert {e["after_lesson"] for e in DATA["exercise"]} <= {e["order"] for e in DATA["lesson"]}


@pytest.mark.parametrize("path, kind, entry", NOTEBOOKS, ids=[path for path, _, _ in NOTEBOOKS])
def test_title_is_the_notebooks_first_heading(path, kind, entry):
    prefix = f"# {entry['id'][:2]} · " if kind == "lesson" else f"# Exercise {entry['number']} · "
    assert first_heading(path) == prefix + entry["title"]


def test_counterparts_are_each_others_in_the_other_framework():
    numbers = {e["number"]: e for e in DATA["exercise"]}
    for e in DATA["exercise"]:
        if "counterpart" in e:
            other = numbers[e["counterpart"]]
            assert other.get("counterpart") == e["number"] and set(other["points"]).isdisjoint(e["points"])


def test_points_are_what_nbgrader_metadata_counts():
    for path, kind, e in NOTEBOOKS:
        if kind == "exercise":
            cells = json.loads((ROOT / path).read_text())["cells"]
            counted = sum(a + m for a, m in nbgrader_metadata.points_by_part(
                nbgrader_metadata.roles(cells, e["id"][:4])).values())
            folder = path.split("/")[1]
            assert e["points"][folder] == counted, f"{path}: catalog.toml says {e['points'][folder]} points, its cells {counted}"


def test_every_notebook_states_its_time():
    for kind in ("lesson", "exercise"):
        for e in DATA[kind]:
            assert None not in catalog.stated_minutes(kind, e).values(), f"{e['id']} states no time in its first cell"


def test_generated_tables_are_current():
    assert catalog.stale() == [], "run: python -m tools.catalog write"


def test_the_start_page_gives_working_times_and_totals_and_no_run_times():
    start = "\n".join(layout.source(c) for c in json.loads((ROOT / layout.START).read_text())["cells"])
    ex01 = next(e for e in DATA["exercise"] if e["number"] == 1)
    minutes = catalog.stated_minutes("exercise", ex01)["common"]
    assert f"ex01_where_the_peak_lands.ipynb) (about {minutes} min)" in start
    totals = catalog.route_totals(DATA, ROOT)
    assert f"PyTorch about {catalog.hours(totals['pytorch'][1])}" in start
    assert f"JAX {catalog.hours(totals['jax'][0])}" in start
    assert " s)" not in start and "run time" not in start.lower()


def test_a_stated_time_changes_the_tables_until_written(tmp_path):
    for name in ("README.md", layout.START, "notebooks/pytorch", "notebooks/jax", "solutions"):
        src, dst = ROOT / name, tmp_path / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copyfile)(src, dst)
    ex = tmp_path / "solutions/common/ex03_checkpoint_placement.ipynb"
    nb = json.loads(ex.read_text())
    nb["cells"][0]["source"] = [line.replace("*About 45 minutes", "*About 50 minutes") for line in nb["cells"][0]["source"]]
    ex.write_text(json.dumps(nb))
    assert catalog.stale(tmp_path) == ["README.md", layout.START]
    tables = catalog.generated(DATA, tmp_path)
    assert "| 3 | Checkpoint placement |" in tables[tmp_path / "README.md"]
    assert "ex03_checkpoint_placement.ipynb) (about 50 min)" in tables[tmp_path / layout.START]


def test_a_start_page_opened_in_jupyterlab_is_not_stale(tmp_path):
    for name in ("README.md", layout.START, "notebooks/pytorch", "notebooks/jax", "solutions"):
        src, dst = ROOT / name, tmp_path / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copyfile)(src, dst)
    start = json.loads((tmp_path / layout.START).read_text())
    start["metadata"]["kernelspec"]["display_name"] = "Python 3 (something else)"
    (tmp_path / layout.START).write_text(json.dumps(start, indent=2))
    assert catalog.stale(tmp_path) == []


def test_unknown_fields_and_tables_are_refused(tmp_path):
    (tmp_path / "c.toml").write_text('[[lesson]]\nid = "x"\nruntime = 3\n')
    with pytest.raises(ValueError, match="unknown fields \\['runtime'\\]"):
        catalog.load(tmp_path / "c.toml")
    (tmp_path / "c.toml").write_text('[make_test]\nx = 1\n')
    with pytest.raises(ValueError, match="unknown tables \\['make_test'\\]"):
        catalog.load(tmp_path / "c.toml")


def test_the_jupyterlab_addresses_resolve_against_make_labs_root():
    dry_run = subprocess.run(["make", "-n", "-s", "lab"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    lab = shlex.split(next(line for line in dry_run.splitlines() if "jupyter" in line))
    root = ROOT / next(a.split("=", 1)[1] for a in lab if a.startswith("--ServerApp.root_dir="))
    for kind in layout.FOLDERS:
        for path in layout.notebooks(kind):
            url = layout.lab_url(layout.rel(path))
            assert (root / url.removeprefix(layout.LAB_URL)).resolve() == path.resolve(), url


def test_listing_knows_its_kinds():
    exercises = layout.notebooks("exercises")
    assert [p.relative_to(ROOT / "exercises") for p in exercises] == \
        [p.relative_to(ROOT / "solutions") for p in layout.notebooks("solutions")]
    assert layout.START not in [layout.rel(p) for p in layout.notebooks("lessons")]
    with pytest.raises(ValueError, match="unknown kind of notebook \\['lesson'\\]"):
        layout.notebooks("lesson")
