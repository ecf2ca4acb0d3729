"""The lessons read as lessons: a short main line, a stated reading time, exercises and references at
the end, links that resolve, and a start page that leads to every lesson and exercise."""

import json
import re
from pathlib import Path

import pytest

from tools import catalog, layout, lesson_stats

ROOT = layout.ROOT
LESSONS = layout.notebooks("lessons")
START = ROOT / layout.START
LINK = re.compile(r"\]\(([^)\s]+)\)")


def ids(paths):
    return [str(p.relative_to(ROOT)) for p in paths]


def markdown_cells(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown"]


@pytest.mark.parametrize("path", LESSONS, ids=ids(LESSONS))
def test_main_line_stays_within_the_word_limit(path):
    s = lesson_stats.stats(path)
    assert s.main_words <= lesson_stats.MAIN_LINE_LIMIT, (
        f"{s.path}: {s.main_words} main-line words; move internals into an 'Aside:' section or the Appendix")


@pytest.mark.parametrize("path", LESSONS, ids=ids(LESSONS))
def test_first_cell_states_the_reading_time_the_rule_gives(path):
    s = lesson_stats.stats(path)
    assert s.stated_minutes is not None, f"{s.path}: the first cell should say 'Reading time: about N minutes'"
    assert s.stated_minutes == s.minutes, (
        f"{s.path}: states {s.stated_minutes} min; {s.main_words} main-line words and {s.main_code} code lines "
        f"make {s.minutes} by the rule in tools/lesson_stats.py (python -m tools.lessons stats)")


@pytest.mark.parametrize("path", LESSONS, ids=ids(LESSONS))
def test_main_line_ends_with_exercises_then_references(path):
    heads = [h for h in lesson_stats.main_line_headings(json.loads(path.read_text())["cells"])
             if not h.lower().startswith("## appendix")]
    assert heads[-2:] == ["## Exercises for this lesson", "## References"], heads[-3:]


@pytest.mark.parametrize("path", LESSONS + [START], ids=ids(LESSONS + [START]))
def test_relative_links_resolve(path):
    for text in markdown_cells(path):
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            assert (path.parent / target.split("#")[0]).exists(), f"{path.name}: broken link {target}"


@pytest.mark.parametrize("path", LESSONS, ids=ids(LESSONS))
def test_exercises_section_links_exercise_notebooks(path):
    text = "\n".join(markdown_cells(path))
    section = text.split("## Exercises for this lesson", 1)[-1].split("## References", 1)[0]
    linked = {(path.parent / t).resolve() for t in LINK.findall(section) if t.startswith("../../exercises/")}
    assert linked, "no exercise linked"
    # every exercise the catalog places after this lesson, in this framework or framework-neutral
    order = next(e["order"] for e in catalog.load()["lesson"] if e["id"] == path.stem)
    wanted = {ROOT / "exercises" / f / f"{e['id']}.ipynb" for e in catalog.load()["exercise"]
              if e["after_lesson"] == order for f in e["points"] if f in (path.parent.name, layout.NEUTRAL)}
    assert wanted <= linked, f"not linked: {sorted(layout.rel(p) for p in wanted - linked)}"
    assert all(p.exists() for p in linked), f"missing: {sorted(str(p) for p in linked if not p.exists())}"


def test_start_page_leads_to_every_lesson_and_exercise():
    assert START.exists(), "notebooks/00_start_here.ipynb is the page `make lab` opens"
    cells = json.loads(START.read_text())["cells"]
    assert all(c["cell_type"] == "markdown" for c in cells), "the start page is prose only (nbval does not run it)"
    targets = {(START.parent / t.split("#")[0]).resolve() for t in LINK.findall("\n".join(markdown_cells(START)))}
    for nb in LESSONS + layout.notebooks("exercises"):
        assert nb.resolve() in targets, f"the start page does not link {nb.relative_to(ROOT)}"
