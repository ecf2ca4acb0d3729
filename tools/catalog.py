"""catalog.toml: the course's facts per lesson and exercise, and the tables generated from them.

One entry per lesson (a PyTorch and a JAX notebook with the same name) and per exercise (a notebook in
each folder of solutions/ that its `points` name: common, pytorch, jax). The README's two tables and
the start page's two lists are generated from it, with the times the notebooks state (a lesson's
reading time, an exercise's working time), never run times; tests/test_catalog.py fails while one is
stale or an entry disagrees with its notebook. Nothing writes catalog.toml: edit it by hand.

    python -m tools.catalog write   # regenerate the tables of README.md and the start page
    python -m tools.catalog check   # exit 1 if one is stale
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

from tools import layout

CATALOG = layout.ROOT / "catalog.toml"
FIELDS = {"lesson": ("id", "order", "title", "summary"),
          "exercise": ("id", "number", "order", "after_lesson", "title", "asks", "counterpart", "points")}
BEGIN_MARK, END_MARK = "<!-- generated from catalog.toml: {} -->", "<!-- end of generated {} -->"
WORKING_TIME = re.compile(r"\*About (\d+) minutes")


def load(path: Path = CATALOG) -> dict:
    data = tomllib.loads(path.read_text())
    for kind, fields in FIELDS.items():
        for entry in data.get(kind, []):
            extra = set(entry) - set(fields)
            if extra:
                raise ValueError(f"{path.name}: {kind} {entry.get('id')}: unknown fields {sorted(extra)} "
                                 f"(the fields are {', '.join(fields)})")
    unknown = set(data) - set(FIELDS)
    if unknown:
        raise ValueError(f"{path.name}: unknown tables {sorted(unknown)} (the tables are {', '.join(FIELDS)})")
    return data


def folders_of(kind: str, entry: dict) -> list[str]:
    return list(layout.FRAMEWORKS) if kind == "lesson" else list(entry["points"])


def notebooks(data: dict | None = None) -> list[tuple[str, str, dict]]:
    """(repository path, kind, entry) of every notebook of the catalog (the solution, for an exercise)."""
    data = load() if data is None else data
    return [(f"{base}/{folder}/{e['id']}.ipynb", kind, e) for kind, base in (("lesson", "notebooks"),
            ("exercise", "solutions")) for e in data.get(kind, []) for folder in folders_of(kind, e)]


def stated_minutes(kind: str, e: dict, root: Path = layout.ROOT) -> dict[str, int | None]:
    """The minutes each notebook of an entry states at its top, by folder: a lesson's reading time
    (tools/lesson_stats.py), an exercise's working time (`*About N minutes · ...*`)."""
    from tools import lesson_stats
    out = {}
    for f in folders_of(kind, e):
        if kind == "lesson":
            out[f] = lesson_stats.stats(root / "notebooks" / f / f"{e['id']}.ipynb").stated_minutes
        else:
            first = json.loads((root / "solutions" / f / f"{e['id']}.ipynb").read_text())["cells"][0]
            m = WORKING_TIME.search(layout.source(first))
            out[f] = int(m[1]) if m else None
    return out


def minutes(values: dict) -> str:
    """'40 min', or '75 / 70 min' where the folders differ."""
    return " / ".join(dict.fromkeys(str(v) for v in values.values())) + " min"


def hours(total: int) -> str:
    h, m = divmod(total, 60)
    return f"{h} h" + (f" {m:02d} min" if m else "") if h else f"{m} min"


def route_totals(data: dict, root: Path) -> dict[str, tuple[int, int]]:
    """Per framework, (reading minutes of its lessons, working minutes of its exercises and the
    framework-neutral ones): what one route through the course asks."""
    read = {fw: 0 for fw in layout.FRAMEWORKS}
    work = {fw: 0 for fw in layout.FRAMEWORKS}
    for e in data["lesson"]:
        for fw, m in stated_minutes("lesson", e, root).items():
            read[fw] += m or 0
    for e in data["exercise"]:
        for folder, m in stated_minutes("exercise", e, root).items():
            for fw in (layout.FRAMEWORKS if folder == layout.NEUTRAL else [folder]):
                work[fw] += m or 0
    return {fw: (read[fw], work[fw]) for fw in layout.FRAMEWORKS}


def lesson_table(data: dict, root: Path, start_page: bool) -> str:
    """The lessons in order with their reading times; on the start page, linked, with the totals."""
    rows = [f"| lesson | what it {'teaches' if start_page else 'shows'} | reading time, PyTorch / JAX |",
            "| --- | --- | --- |"]
    for e in sorted(data["lesson"], key=lambda e: e["order"]):
        links = ", ".join(f"[{name}]({fw}/{e['id']}.ipynb)" for fw, name in layout.FRAMEWORKS.items())
        name = f"{e['id'][:2]} · {e['title']} ({links})" if start_page else f"`{e['id']}`"
        rows.append(f"| {name} | {e['summary']} | {minutes(stated_minutes('lesson', e, root))} |")
    if start_page:
        totals = route_totals(data, root)
        rows.append("\nIn all: " + ", ".join(f"{name} {hours(totals[fw][0])}"
                                             for fw, name in layout.FRAMEWORKS.items()) + " of reading.")
    return "\n".join(rows)


def readme_exercises(data: dict, root: Path) -> str:
    rows = ["| # | exercise | folders | what it asks | points | working time |",
            "| --- | --- | --- | --- | --- | --- |"]
    for e in sorted(data["exercise"], key=lambda e: e["number"]):
        rows.append(f"| {e['number']} | {e['title']} | {', '.join(f'`{f}/`' for f in e['points'])} | {e['asks']} | "
                    f"{' / '.join(map(str, e['points'].values()))} | {minutes(stated_minutes('exercise', e, root))} |")
    return "\n".join(rows)


def start_exercises(data: dict, root: Path) -> str:
    """The exercises after each lesson, in the start page's order, with their working times and totals."""
    blocks = []
    for order, lesson in sorted((e["order"], e) for e in data["lesson"]):
        items = [f"**After lesson {order:02d} ({lesson['title']})**\n"]
        for e in sorted((e for e in data["exercise"] if e["after_lesson"] == order), key=lambda e: e["order"]):
            fws = [f for f in e["points"] if f in layout.FRAMEWORKS]
            only = f" ({layout.FRAMEWORKS[fws[0]]})" if len(fws) == 1 else ""
            links = ", ".join(f"[{layout.FRAMEWORKS.get(f, 'both tracks')}](../exercises/{f}/{e['id']}.ipynb)"
                              for f in e["points"])
            items.append(f"- Exercise {e['number']}: {e['title']}{only}: {links} "
                         f"(about {minutes(stated_minutes('exercise', e, root))})")
        blocks.append("\n".join(items))
    totals = route_totals(data, root)
    return "\n\n".join(blocks) + "\n\nIn all, the exercises of one framework with the ones both tracks share: " + \
        ", ".join(f"{name} about {hours(totals[fw][1])}" for fw, name in layout.FRAMEWORKS.items()) + " of work."


def _replace(text: str, name: str, table: str, where: str) -> str:
    begin, end = BEGIN_MARK.format(name), END_MARK.format(name)
    if text.count(begin) != 1 or text.count(end) != 1:
        raise ValueError(f"{where}: needs the markers '{begin}' and '{end}' once each around the generated {name}")
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    return f"{head}{begin}\n{table}\n{end}{tail}"


def generated(data: dict | None = None, root: Path = layout.ROOT) -> dict[Path, str]:
    """The files that hold generated tables, as they should be."""
    data = load() if data is None else data
    readme = root / "README.md"
    text = _replace(readme.read_text(), "lessons", lesson_table(data, root, False), "README.md")
    text = _replace(text, "exercises", readme_exercises(data, root), "README.md")
    start = root / layout.START
    nb = json.loads(start.read_text())
    tables = {"lessons": lesson_table(data, root, True), "exercises": start_exercises(data, root)}
    for cell in nb["cells"]:
        src = layout.source(cell)
        for name, table in tables.items():
            if BEGIN_MARK.format(name) in src:
                src = _replace(src, name, table, layout.START)
        cell["source"] = src.splitlines(True)
    return {readme: text, start: json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"}


def differs(path: Path, text: str) -> bool:
    """Whether a file's content differs from `text`; for a notebook, whether its cells do (opening it in
    JupyterLab may rewrite its metadata)."""
    if path.suffix == ".ipynb":
        return layout.cells(json.loads(path.read_text())) != layout.cells(json.loads(text))
    return path.read_text() != text


def stale(root: Path = layout.ROOT) -> list[str]:
    return [layout.rel(p, root) for p, text in generated(root=root).items() if differs(p, text)]


def main(argv: list[str]) -> int:
    if argv == ["write"]:
        for p, text in generated().items():
            if differs(p, text):
                p.write_text(text)
                print(f"catalog: rewrote the generated tables of {layout.rel(p)}")
    elif argv == ["check"]:
        found = stale()
        for p in found:
            print(f"{p}: its tables differ from catalog.toml (run: python -m tools.catalog write)", file=sys.stderr)
        return 1 if found else 0
    else:
        print(__doc__.split("\n\n")[-1], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
