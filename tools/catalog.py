"""catalog.toml: the per-notebook facts of the course, and every table generated from them.

One entry per lesson (a PyTorch and a JAX notebook with the same name) and per exercise (one
notebook per folder of solutions/: common, pytorch, jax). Run times are per notebook: `cpu_s`, written
by `make outputs` (tools/execute.py); `gpu_s`, written by `make gpu-check ARGS=--record` after a run
on a real GPU, absent until then. The README's two tables, the start page's two lists, the site and the
Makefile's slowest-first order come from here; tests/test_catalog.py fails while a generated table
is stale or an entry disagrees with its notebook.

    python -m tools.catalog write   # regenerate the tables in README.md and the start page
    python -m tools.catalog check   # exit 1 if one is stale
    python -m tools.catalog order   # every lesson and solution notebook, slowest first (the Makefile's)
    python -m tools.catalog order --with-tests   # the same with the test files among them (make test)
    python -m tools.catalog test-times REPORT.xml  # record make test's seconds per file from its JUnit report
"""

from __future__ import annotations

import json
import os
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tools import course

CATALOG = course.ROOT / "catalog.toml"
HEADER = """\
# The course's per-notebook facts, in one place (tools/catalog.py reads and writes this file).
# Generated from it: README.md's lesson and exercise tables, the lists of notebooks/00_start_here.ipynb
# (python -m tools.catalog write), the site's tables and run times, the Makefile's slowest-first order.
#
# lesson:   id (the notebooks' file name in notebooks/pytorch/ and notebooks/jax/), order, title (the
#           notebooks' first heading, without "NN · "), summary (what it shows)
# exercise: id (file name in solutions/<folder>/), number, order (on the start page), after_lesson,
#           title (the notebook's first heading, without "Exercise N · "), asks (what the exercise
#           asks, never what it finds: the README shows it before a student starts), counterpart
#           (the number of the same exercise for the other framework),
#           points (nbgrader's total per notebook, tools/nbgrader_metadata.py)
# cpu_s:    seconds per notebook of `make outputs` at the cpu profile, written by tools/execute.py
# gpu_s:    seconds per notebook of a real `make gpu-check` at the gpu profile (ARGS=--record);
#           absent until measured, never an estimate
# [make_test] slow_tests: seconds of the slowest test files in `make test`, so that tools/catalog.py
#           can start them among the longest notebooks; nbval_s: seconds of each notebook in `make test`
#           (its cells, the re-runs of its check cells and its wrong answers, often far more than
#           cpu_s), which order it. Both from a run's JUnit report, 2 workers:
#           pytest ... --junitxml=R.xml, then python -m tools.catalog test-times R.xml
"""
FIELDS = {"lesson": ("id", "order", "title", "summary", "cpu_s", "gpu_s"),
          "exercise": ("id", "number", "order", "after_lesson", "title", "asks", "counterpart", "points",
                       "cpu_s", "gpu_s")}
BEGIN_MARK, END_MARK = "<!-- generated from catalog.toml: {} -->", "<!-- end of generated {} -->"


@dataclass(frozen=True)
class Notebook:
    """One notebook's facts: `path` repository-relative (the solution's, for an exercise)."""

    path: str
    kind: str  # "lesson" or "exercise"
    id: str
    folder: str  # pytorch, jax or common
    title: str
    order: int
    twin: str | None  # the same lesson or exercise in the other framework
    points: int | None
    cpu_s: float | None
    gpu_s: float | None


def load(path: Path = CATALOG) -> dict:
    with open(path, "rb") as f:
        data = tomllib.load(f)
    for kind, fields in FIELDS.items():
        for entry in data.get(kind, []):
            extra = set(entry) - set(fields)
            if extra:
                raise ValueError(f"{path.name}: {kind} {entry.get('id')}: unknown fields {sorted(extra)} "
                                 f"(the fields are {', '.join(fields)})")
    return data


def _key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def _value(v) -> str:
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, float):
        return f"{v:g}"
    return json.dumps(v, ensure_ascii=False) if isinstance(v, str) else str(v)


def dump(data: dict, path: Path = CATALOG) -> None:
    """Write the catalog in its one layout (the header above, then every entry, fields in order)."""
    parts = [HEADER]
    for kind, fields in FIELDS.items():
        for entry in data.get(kind, []):
            lines = [f"[[{kind}]]"] + [f"{k} = {_value(entry[k])}" for k in fields if entry.get(k) not in (None, {})]
            parts.append("\n".join(lines) + "\n")
    if data.get("make_test"):
        parts.append("[make_test]\n" + "\n".join(f"{k} = {_value(v)}" for k, v in data["make_test"].items()) + "\n")
    path.write_text("\n".join(parts))


def folders_of(kind: str, entry: dict) -> list[str]:
    return list(course.FRAMEWORKS) if kind == "lesson" else list(entry["cpu_s"])


def notebooks(data: dict | None = None) -> list[Notebook]:
    """Every notebook of the catalog: lessons in order, then exercises by number."""
    data = load() if data is None else data
    out = []
    for kind, base in (("lesson", "notebooks"), ("exercise", "solutions")):
        for e in sorted(data.get(kind, []), key=lambda e: e.get("number", e["order"])):
            folders = folders_of(kind, e)
            for folder in folders:
                others = [f for f in folders if f != folder and f in course.FRAMEWORKS]
                twin = f"{base}/{others[0]}/{e['id']}.ipynb" if folder in course.FRAMEWORKS and others else None
                out.append(Notebook(f"{base}/{folder}/{e['id']}.ipynb", kind, e["id"], folder, e["title"],
                                    e["order"], twin, e.get("points", {}).get(folder),
                                    e.get("cpu_s", {}).get(folder), e.get("gpu_s", {}).get(folder)))
    return out


def _record(path: str, key: str, seconds: float, catalog: Path) -> bool:
    data = load(catalog)
    for kind, base in (("lesson", "notebooks"), ("exercise", "solutions")):
        for e in data.get(kind, []):
            for folder in folders_of(kind, e):
                if path == f"{base}/{folder}/{e['id']}.ipynb":
                    e.setdefault(key, {})[folder] = round(seconds) if seconds >= 1 else round(seconds, 1)
                    dump(data, catalog)
                    return True
    return False


def record_cpu_time(path: str, seconds: float, catalog: Path = CATALOG) -> None:
    """Write a `make outputs` run time (cpu profile, no GPU) into the catalog."""
    if any(os.environ.get(k) != v for k, v in course.CPU_ENV.items() if k in ("COURSE_PROFILE", "CUDA_VISIBLE_DEVICES")):
        print(f"catalog: {path}: not at the cpu profile with the GPU hidden; run time not recorded", file=sys.stderr)
    elif not _record(path, "cpu_s", seconds, catalog):
        print(f"catalog: {path} is not in catalog.toml; run time not recorded", file=sys.stderr)


def record_gpu_time(path: str, seconds: float, catalog: Path = CATALOG) -> bool:
    """Write a measured gpu-profile run time into the catalog; False if the notebook is not in it."""
    return _record(path, "gpu_s", seconds, catalog)


# ------------------------------------------------------------------------------ generated tables

def fmt_s(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds:g} s"


def times(e: dict, kind: str, key: str = "cpu_s") -> str:
    """'16 s / 13 s' in the folders' order (PyTorch / JAX for a lesson)."""
    return " / ".join(fmt_s(e.get(key, {}).get(f)) for f in folders_of(kind, e))


def readme_lessons(data: dict) -> str:
    rows = ["| lesson | what it shows | CPU run time, PyTorch / JAX |", "| --- | --- | --- |"]
    for e in sorted(data["lesson"], key=lambda e: e["order"]):
        rows.append(f"| `{e['id']}` | {e['summary']} | {times(e, 'lesson')} |")
    return "\n".join(rows)


def readme_exercises(data: dict) -> str:
    rows = ["| # | exercise | folders | what it asks | points | CPU run time |",
            "| --- | --- | --- | --- | --- | --- |"]
    for e in sorted(data["exercise"], key=lambda e: e["number"]):
        folders = ", ".join(f"`{f}/`" for f in e["cpu_s"])
        points = " / ".join(str(e["points"][f]) for f in e["cpu_s"])
        rows.append(f"| {e['number']} | {e['title']} | {folders} | {e['asks']} | {points} | {times(e, 'exercise')} |")
    return "\n".join(rows)


def start_lessons(data: dict, reading: dict[str, int]) -> str:
    rows = ["| lesson | what it teaches | reading time, PyTorch / JAX | CPU run time, PyTorch / JAX |",
            "| --- | --- | --- | --- |"]
    for e in sorted(data["lesson"], key=lambda e: e["order"]):
        links = ", ".join(f"[{name}]({fw}/{e['id']}.ipynb)" for fw, name in course.FRAMEWORKS.items())
        rows.append(f"| {e['id'][:2]} · {e['title']} ({links}) | {e['summary']} | {reading[e['id']]} min | "
                    f"{times(e, 'lesson')} |")
    return "\n".join(rows)


def start_exercises(data: dict) -> str:
    lessons = {e["order"]: e for e in data["lesson"]}
    blocks = []
    for order, lesson in sorted(lessons.items()):
        items = []
        for e in sorted((e for e in data["exercise"] if e["after_lesson"] == order), key=lambda e: e["order"]):
            fws = [f for f in e["cpu_s"] if f in course.FRAMEWORKS]
            only = f" ({course.FRAMEWORKS[fws[0]]})" if len(fws) == 1 else ""
            links = ", ".join(f"[{course.FRAMEWORKS.get(f, 'framework-neutral')}](../exercises/{f}/{e['id']}.ipynb)"
                              for f in e["cpu_s"])
            items.append(f"- Exercise {e['number']}: {e['title']}{only}: {links} ({times(e, 'exercise')})")
        blocks.append(f"**After lesson {order:02d} ({lesson['title']})**\n\n" + "\n".join(items))
    return "\n\n".join(blocks)


def order(data: dict | None = None, *, with_tests: bool = False, root: Path = course.ROOT) -> list[str]:
    """Every lesson and solution notebook (and with_tests, every test file), slowest first by the
    catalog's seconds under pytest (nbval_s, else cpu_s), the others last by path: pytest-xdist workers
    take them in command-line order (with --no-loadscope-reorder), so the longest start first and the
    short ones fill the tail."""
    data = load() if data is None else data
    seconds = {n.path: n.cpu_s for n in notebooks(data)} | data.get("make_test", {}).get("nbval_s", {})
    paths = [course.rel(p, root) for p in course.notebooks(root=root)]
    if with_tests:
        seconds |= data.get("make_test", {}).get("slow_tests", {})
        paths += sorted(p.relative_to(root).as_posix() for p in (root / "tests").glob("test_*.py"))
    return sorted(paths, key=lambda p: (seconds.get(p) is None, -(seconds.get(p) or 0), p))


def record_test_times(report: Path, catalog: Path = CATALOG, slow: float = 5) -> None:
    """Write the seconds per file of a `make test` run's JUnit report (pytest --junitxml) into the
    catalog: every notebook's into [make_test] nbval_s, the test files of at least `slow` seconds into
    slow_tests. A file's seconds are the sum of its items' (setup, call and teardown)."""
    import xml.etree.ElementTree as ET

    seconds: dict[str, float] = {}
    for case in ET.parse(report).iter("testcase"):
        name = case.get("classname", "")
        if name.endswith(".ipynb"):   # nbval: solutions.pytorch.ex09_fp16_gradient_window.ipynb
            path = name.removesuffix(".ipynb").replace(".", "/") + ".ipynb"
        elif name.startswith("tests."):   # tests.test_catalog (or tests.test_catalog.TestSomething)
            path = "/".join(name.split(".")[:2]) + ".py"
        else:
            continue
        seconds[path] = seconds.get(path, 0.0) + float(case.get("time", 0))
    data = load(catalog)
    known = {n.path for n in notebooks(data)}
    slowest = sorted(seconds.items(), key=lambda kv: -kv[1])
    nbval = {p: round(s) for p, s in slowest if p in known}
    if len(nbval) != len(known):
        raise ValueError(f"{report}: holds {len(nbval)} of the catalog's {len(known)} notebooks; record a whole "
                         "`make test` run")
    data.setdefault("make_test", {})["slow_tests"] = {p: round(s) for p, s in slowest
                                                      if p.startswith("tests/") and s >= slow}
    data["make_test"]["nbval_s"] = nbval
    dump(data, catalog)


def reading_times() -> dict[str, str]:
    """The reading time each lesson states at its top, 'N' or 'PyTorch / JAX' where the two views
    differ (tools/lesson_stats.py reads it)."""
    from tools import lesson_stats
    views: dict[str, dict[str, int | None]] = {}
    for p in course.notebooks("lessons"):
        views.setdefault(p.stem, {})[p.parent.name] = lesson_stats.stats(p).stated_minutes
    return {stem: " / ".join(dict.fromkeys(str(v.get(fw)) for fw in course.FRAMEWORKS))
            for stem, v in views.items()}


def _replace(text: str, name: str, table: str, where: str) -> str:
    begin, end = BEGIN_MARK.format(name), END_MARK.format(name)
    if text.count(begin) != 1 or text.count(end) != 1:
        raise ValueError(f"{where}: needs the markers '{begin}' and '{end}' once each around the generated {name}")
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    return f"{head}{begin}\n{table}\n{end}{tail}"


def generated(data: dict | None = None, root: Path = course.ROOT) -> dict[Path, str]:
    """The files that hold generated tables, as they should be."""
    data = load() if data is None else data
    readme = root / "README.md"
    text = readme.read_text()
    text = _replace(text, "lessons", readme_lessons(data), "README.md")
    text = _replace(text, "exercises", readme_exercises(data), "README.md")
    start = root / course.START
    nb = json.loads(start.read_text())
    tables = {"lessons": start_lessons(data, reading_times()), "exercises": start_exercises(data)}
    for cell in nb["cells"]:
        src = course.source(cell)
        for name, table in tables.items():
            if BEGIN_MARK.format(name) in src:
                src = _replace(src, name, table, course.START)
        cell["source"] = src.splitlines(True)
    return {readme: text, start: json.dumps(nb, indent=1, ensure_ascii=False) + "\n"}


def stale(root: Path = course.ROOT) -> list[str]:
    return [course.rel(p, root) for p, text in generated(root=root).items() if p.read_text() != text]


def write_tables(root: Path = course.ROOT) -> None:
    for p, text in generated(root=root).items():
        if p.read_text() != text:
            p.write_text(text)
            print(f"catalog: rewrote the generated tables of {course.rel(p, root)}")


def main(argv: list[str]) -> int:
    what = argv[0] if argv else ""
    if what == "write":
        write_tables()
    elif what == "check":
        found = stale()
        for p in found:
            print(f"{p}: its tables differ from catalog.toml (run: python -m tools.catalog write)", file=sys.stderr)
        return 1 if found else 0
    elif what == "order":
        print(" ".join(order(with_tests="--with-tests" in argv)))
    elif what == "test-times" and len(argv) == 2:
        record_test_times(Path(argv[1]))
    else:
        print(__doc__.split("\n\n")[-1], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
