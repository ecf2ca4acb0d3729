"""Build the course website (`make site`): the committed notebooks, rendered, never re-executed.

The lessons, exercises and solutions are turned into MyST pages under build/site/src, which Sphinx
(myst-parser, sphinx-design, sphinx-book-theme; configuration in site/conf.py) renders into
build/site/html with warnings as errors.

A lesson is one page, rendered from its source lessons/NN_topic.md (tools/lessons.py), whose twins
have the same main-line headings (tests/test_pairing.py; the headings of asides may differ and become
bold lines in their section). The page follows those headings: a cell the source shares is shown
once, each run of framework-specific cells as a pair of tabs, PyTorch and JAX, with the outputs of
the executed notebooks. All tab sets belong to one sync group, so one click switches every section of
every page (the choice is remembered by the browser; `?framework=jax` in a URL picks JAX). Exercises
and solutions get one page each, with the same tabs where a notebook has a twin.

Titles, twins and run times come from catalog.toml (tools/catalog.py); every "In JupyterLab" link
points into the JupyterLab that `make lab` starts, rooted at the repository. The build ends by checking
that no page loads anything from another host (scripts, styles, fonts, images): the site works offline.

    python -m tools.build_site             # generate, build, check
    python -m tools.build_site --no-build  # only generate build/site/src
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time
from itertools import groupby
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin

from tools import catalog, lessons
from tools import layout as course  # renamed from tools/course.py (nbgrader's course/ has that name)
from tools.layout import BEGIN, END, FRAMEWORKS, HEADING, NEUTRAL, AsideTracker

ROOT = course.ROOT
CONF_DIR = ROOT / "site"
BUILD = ROOT / "build" / "site"
SRC, HTML = BUILD / "src", BUILD / "html"
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
MD = MarkdownIt("commonmark").enable("table").use(dollarmath_plugin)


class SiteError(Exception):
    """Something in the course's files that the site cannot render faithfully."""


# --------------------------------------------------------------------------------------- README

@dataclass
class Readme:
    """What the site takes from README.md: its title, introduction and text (the about page)."""

    title: str
    intro: str
    text: str


def read_readme(path: Path = ROOT / "README.md") -> Readme:
    text = path.read_text()
    lines = text.splitlines()
    if not lines or not lines[0].startswith("# "):
        raise SiteError("README.md must start with a '# ' title")
    intro = "\n".join(lines[1:next(k for k, l in enumerate(lines) if l.startswith("## "))]).strip()
    return Readme(title=lines[0][2:].strip(), intro=intro, text=text)


# ------------------------------------------------------------------------------ notebook -> MyST

def fence(content: str, info: str, options: str = "") -> str:
    """A backtick fence long enough for `content`, with a directive or language `info`."""
    ticks = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", content)), default=0))
    return f"{ticks}{info}\n{options}{content.rstrip()}\n{ticks}\n"


def colon_block(directive: str, argument: str, options: dict[str, str], body: str, colons: int) -> str:
    opts = "".join(f":{k}: {v}\n" for k, v in options.items())
    return f"{':' * colons}{{{directive}}} {argument}\n{opts}\n{body.rstrip()}\n{':' * colons}\n"


@dataclass
class Section:
    heading: str | None  # the heading's source line, None for what comes before the first one
    parts: list[tuple[int | None, str]] = field(default_factory=list)  # (shared source cell or None, MyST)


def offer_raw(rel: str) -> str:
    """Copy a repository file into the sources, for a download link; returns the link's target."""
    dest = SRC / "_raw" / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / rel, dest)
    return f"/_raw/{rel}"


class Renderer:
    """Turns notebooks into sections of MyST for the page `page` (a docname)."""

    def __init__(self, pages: dict[Path, str]):
        self.pages = pages  # absolute notebook path -> docname of the page that renders it

    # links in markdown cells: other notebooks become their pages; other repository files downloads
    def rewrite_links(self, text: str, notebook: Path, doc: str) -> str:
        def fix(m: re.Match) -> str:
            target = m.group(2)
            parts = urlsplit(target)
            if parts.scheme or target.startswith(("#", "mailto:")):
                return m.group(0)
            path = (notebook.parent / parts.path).resolve()
            if path in self.pages:
                rel = os.path.relpath(SRC / (self.pages[path] + ".md"), (SRC / doc).parent)
                return f"{m.group(1)}({rel}{'#' + parts.fragment if parts.fragment else ''})"
            if path.is_file() and ROOT in path.parents:
                rel = offer_raw(path.relative_to(ROOT).as_posix())
                return f"{{download}}`{m.group(1)[1:-1]} <{rel}>`"
            raise SiteError(f"{notebook.relative_to(ROOT)}: link to missing file {target}")

        return re.sub(r"(\[[^\]]*\])\(([^)\s]+)\)", fix, text)

    def markdown(self, source: str, notebook: Path, doc: str) -> list[tuple[str, str]]:
        """A markdown cell as ('heading', line) and ('md', text) items, split at its headings."""
        lines = source.splitlines()
        # nbgrader's markers: the solution region of a markdown answer gets a frame, markers go
        if BEGIN in (l.strip() for l in lines) and END in (l.strip() for l in lines):
            b = next(k for k, l in enumerate(lines) if l.strip() == BEGIN)
            e = next(k for k, l in enumerate(lines) if l.strip() == END)
            region = "\n".join(lines[b + 1:e])
            lines = lines[:b] + [colon_block("container", "nb-solution", {}, region, 4)] + lines[e + 1:]
            lines = "\n".join(lines).splitlines()
        lines = [l for l in lines if l.strip() not in (BEGIN, END)]
        text = "\n".join(lines)
        items, start = [], 0
        for tok in MD.parse(text):
            if tok.type == "heading_open" and tok.level == 0:
                h0, h1 = tok.map
                if h0 > start:
                    items.append(("md", "\n".join(lines[start:h0])))
                heading = "\n".join(lines[h0:h1]).strip()
                if not heading.startswith("#"):  # a setext heading: make it an ATX one
                    heading = "#" * int(tok.tag[1]) + " " + lines[h0].strip()
                items.append(("heading", heading))
                start = h1
        if start < len(lines):
            items.append(("md", "\n".join(lines[start:])))
        return [(kind, self.rewrite_links(t, notebook, doc) if kind == "md" else t)
                for kind, t in items if kind == "heading" or t.strip()]

    def outputs(self, cell: dict, figures: Path, stem: str) -> list[str]:
        parts = []
        for k, out in enumerate(cell.get("outputs", [])):
            kind = out["output_type"]
            if kind == "stream":
                text = ANSI.sub("", "".join(out["text"]))
                cls = "cell-output" + (" cell-stderr" if out.get("name") == "stderr" else "")
                parts.append(fence(text, "{code-block} none", f":class: {cls}\n\n"))
            elif kind == "error":
                text = ANSI.sub("", "\n".join(out.get("traceback", [])))
                parts.append(fence(text, "{code-block} none", ":class: cell-output cell-error\n\n"))
            elif kind in ("display_data", "execute_result"):
                data = out.get("data", {})
                plain = "".join(data.get("text/plain", ""))
                if "image/png" in data or "image/jpeg" in data:
                    mime = "image/png" if "image/png" in data else "image/jpeg"
                    figures.mkdir(parents=True, exist_ok=True)
                    name = f"{stem}-o{k}.{mime.split('/')[1].replace('jpeg', 'jpg')}"
                    (figures / name).write_bytes(base64.b64decode("".join(data[mime])))
                    alt = plain.replace("\n", " ").strip() or "figure"
                    parts.append(f"```{{image}} {figures.name}/{name}\n:alt: {alt}\n:class: cell-output-image\n```\n")
                elif "image/svg+xml" in data:
                    parts.append(fence("".join(data["image/svg+xml"]), "{raw} html"))
                elif "text/html" in data:
                    parts.append(fence("".join(data["text/html"]), "{raw} html", ""))
                elif "text/latex" in data:
                    latex = "".join(data["text/latex"]).strip().strip("$")
                    parts.append(fence(latex, "{math}"))
                elif plain:
                    parts.append(fence(ANSI.sub("", plain), "{code-block} none", ":class: cell-output\n\n"))
        return parts

    def sections(self, notebook: Path, doc: str, fw: str, shared: list | None = None) -> list[Section]:
        """The notebook as a list of sections, each starting at one of its headings; a cell's parts
        carry shared[n], the index of the source cell both twins share (None: this framework's own)."""
        nb = json.loads(notebook.read_text())
        shared = shared or [None] * len(nb["cells"])
        lexer = "ipython3" if nb.get("metadata", {}).get("kernelspec", {}).get("language", "python") == "python" else "none"
        figures = (SRC / doc).parent / "figures"
        prefix = f"{Path(doc).name}-{fw}"
        out, asides = [Section(None)], AsideTracker()
        for n, cell in enumerate(nb["cells"]):
            source = "".join(cell["source"])
            if cell["cell_type"] == "markdown":
                for kind, text in self.markdown(source, notebook, doc):
                    if kind == "heading" and asides.heading(text):
                        out.append(Section(text))
                    elif kind == "heading":  # an aside's heading: a line in the section, which may differ per twin
                        out[-1].parts.append((shared[n], f"**{HEADING.match(text).group(2).strip()}**\n"))
                    else:
                        out[-1].parts.append((shared[n], text + "\n"))
            elif cell["cell_type"] == "code":
                if source.strip():
                    out[-1].parts.append((shared[n], fence(source, f"{{code-block}} {lexer}", ":class: cell-input\n\n")))
                out[-1].parts += [(None, o) for o in self.outputs(cell, figures, f"{prefix}-c{n:02d}")]  # each its own
            else:  # raw cells are not shown
                continue
        if out[0].heading is None and not out[0].parts:
            out.pop(0)
        return out


def tabs(bodies: dict[str, str]) -> str:
    """One tab per framework, synced across the site; a body missing from a notebook says so."""
    items = []
    for fw, label in FRAMEWORKS.items():
        body = bodies.get(fw, "").strip() or f"*The {label} notebook has nothing here.*"
        items.append(colon_block("tab-item", label, {"sync": fw, "class-content": f"fw-{fw}"}, body, 5))
    return colon_block("tab-set", "", {"sync-group": "framework", "class": "framework-tabs"},
                       "\n".join(items), 6)


def paired(sections: dict[str, list[Section]], names: str) -> list[tuple[str | None, str]]:
    """Twin notebooks' sections (or one notebook's), zipped by heading: (heading, MyST), where a shared
    cell is shown once and each run of framework-specific cells between shared ones as tabs (once, if
    they are equal)."""
    headings = {fw: [s.heading for s in secs] for fw, secs in sections.items()}
    if len({tuple(h) for h in headings.values()}) > 1:
        raise SiteError(f"{names}: the twins' headings differ ({' vs '.join(map(str, headings.values()))}); "
                        "see tests/test_pairing.py")
    out = []
    for k, heading in enumerate(headings[next(iter(sections))]):
        runs, shared = {fw: [""] for fw in sections}, {fw: [] for fw in sections}
        for fw, secs in sections.items():  # runs[fw]: own text, shared cell, own text, shared cell, ...
            for key, group in groupby(secs[k].parts, key=lambda part: part[0]):
                text = "\n".join(t for _, t in group).strip()
                if key is None:
                    runs[fw][-1] = text
                else:
                    shared[fw].append(key)
                    runs[fw] += [text, ""]
        if len({tuple(keys) for keys in shared.values()}) > 1:
            raise SiteError(f"{names}, under {heading!r}: the twins share different cells")
        blocks = [t[0] if len(set(t)) == 1 else tabs(dict(zip(runs, t))) for t in zip(*runs.values())]
        out.append((heading, "\n".join(b for b in blocks if b)))
    return out


def assemble(blocks: list[tuple[str | None, str]], title: str | None, header: str) -> str:
    """A page: the title heading, the header (links, run times), then the sections."""
    out = []
    for k, (heading, body) in enumerate(blocks):
        if heading is not None:
            if k == 0 and title is not None:
                heading = title
            out.append(heading + "\n")
            if k == 0:
                out.append(header)
        if body:
            out.append(body + "\n")
    return "\n".join(out)


# -------------------------------------------------------------------------------------- the book

@dataclass
class Exercise:
    number: int
    stem: str  # file name without .ipynb (the same for twins)
    folders: dict[str, str]  # folder -> stem (ex08 and ex11 are different stems)
    title: str = ""


def repo_link(rel: str) -> str:
    """A link to the file on the code host, when the build knows where the repository is."""
    base = os.environ.get("SITE_REPO_URL") or (
        f"{os.environ['GITHUB_SERVER_URL']}/{os.environ['GITHUB_REPOSITORY']}"
        if os.environ.get("GITHUB_REPOSITORY") and os.environ.get("GITHUB_SERVER_URL") else "")
    if not base:
        return ""
    branch = os.environ.get("SITE_REPO_BRANCH", "main")
    return f" · [view it on GitHub]({base.rstrip('/')}/blob/{branch}/{rel})"


def open_lines(rel: str, run_time: str | None) -> str:
    """How to open one notebook: its path, the raw file, JupyterLab from a clone, its run time."""
    lines = [
        f"- **Notebook**: `{rel}` · {{download}}`raw .ipynb file </_raw/{rel}>`{repo_link(rel)}",
        f"- **In JupyterLab**, from a clone: `make lab`, then open <{course.lab_url(rel)}>",
    ]
    if run_time:
        lines.append(f"- **CPU run time**: {run_time} ([how it was measured](/runtimes.md))")
    return "\n".join(lines) + "\n"


def header_box(entries: dict[str, str], note: str = "") -> str:
    """The box under a page's title: per framework (synced tabs) or for one notebook."""
    if len(entries) == 1:
        (body,) = entries.values()
    else:
        items = [colon_block("tab-item", FRAMEWORKS[fw], {"sync": fw, "class-content": f"fw-{fw}"}, body, 5)
                 for fw, body in entries.items()]
        body = colon_block("tab-set", "", {"sync-group": "framework", "class": "framework-tabs"},
                           "\n".join(items), 6)
    return colon_block("container", "page-header", {}, (note + "\n\n" if note else "") + body, 7) + "\n"


class Book:
    def __init__(self, readme: Readme, facts: dict | None = None):
        self.readme = readme
        self.facts = catalog.load() if facts is None else facts
        self.lesson_facts = {e["id"]: e for e in self.facts["lesson"]}
        self.exercise_facts = {e["number"]: e for e in self.facts["exercise"]}
        self.lessons = [p.stem for p in lessons.sources()]  # each generates its twins (checked in lesson())
        if set(self.lessons) != set(self.lesson_facts):
            raise SiteError(f"catalog.toml's lessons {sorted(self.lesson_facts)} are not lessons/'s {self.lessons}")
        self.exercises: dict[int, Exercise] = {}
        for path in course.notebooks("solutions"):
            number = int(re.match(r"ex(\d+)", path.stem).group(1))
            if number not in self.exercise_facts:
                raise SiteError(f"catalog.toml has no exercise {number} ({course.rel(path)})")
            ex = self.exercises.setdefault(number, Exercise(number, path.stem, {}))
            ex.folders[path.parent.name] = path.stem
            ex.title = f"Exercise {number} · {self.exercise_facts[number]['title']}"
            if not (ROOT / "exercises" / path.parent.name / path.name).exists():
                raise SiteError(f"exercises/{path.parent.name}/{path.name} is missing: run make exercises")
        pages: dict[Path, str] = {}
        for lesson in self.lessons:
            for fw in FRAMEWORKS:
                pages[(ROOT / "notebooks" / fw / f"{lesson}.ipynb").resolve()] = f"lessons/{lesson}"
        for ex in self.exercises.values():
            for folder, stem in ex.folders.items():
                for kind in ("exercises", "solutions"):
                    pages[(ROOT / kind / folder / f"{stem}.ipynb").resolve()] = f"{kind}/{ex.stem}"
        self.renderer = Renderer(pages)

    def write(self, doc: str, text: str) -> None:
        path = SRC / f"{doc}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    # a lesson: its source, section by section, the framework-specific cells in tabs
    def lesson(self, name: str) -> None:
        doc, src = f"lessons/{name}", ROOT / lessons.SOURCES / f"{name}.md"
        if problems := lessons.write_notebooks([src], check=True):
            raise SiteError("; ".join(problems))
        source = lessons.read_source(src)
        sections, entries = {}, {}
        for fw in FRAMEWORKS:
            rel = f"notebooks/{fw}/{name}.ipynb"
            offer_raw(rel)
            shared = [None if lessons.KEY in source.cells[k].metadata else k for k, _ in lessons.cells_for(source, fw)]
            sections[fw] = self.renderer.sections(ROOT / rel, doc, fw, shared)
            entries[fw] = open_lines(rel, catalog.fmt_s(self.lesson_facts[name]["cpu_s"].get(fw)) or None)
        note = ("A lesson is one text with two notebooks. Where they differ, the tabs switch between "
                "the PyTorch and the JAX notebook; the choice applies to every section and every page.")
        self.write(doc, assemble(paired(sections, name), None, header_box(entries, note)))

    # an exercise or a solution: tabs where the notebook has a twin, a label where it has none
    def exercise(self, ex: Exercise, kind: str) -> None:
        doc = f"{kind}/{ex.stem}"
        fws = [f for f in FRAMEWORKS if f in ex.folders]
        times = self.exercise_facts[ex.number]["cpu_s"]
        entries, sections = {}, {}
        for folder, stem in ex.folders.items():
            rel = f"{kind}/{folder}/{stem}.ipynb"
            offer_raw(rel)
            sections[folder] = self.renderer.sections(ROOT / rel, doc, folder)
            entries[folder] = open_lines(rel, catalog.fmt_s(times.get(folder)) or None)
        other = "solutions" if kind == "exercises" else "exercises"
        other_link = f"[{'the solution' if kind == 'exercises' else 'the exercise (student version)'}](/{other}/{ex.stem}.md)"
        if NEUTRAL in ex.folders:
            note = (f"{{bdg-secondary}}`framework-neutral` A derivation with a numeric check in plain "
                    f"Python (`{NEUTRAL}/`): the same for PyTorch and JAX. See also {other_link}.")
        elif len(fws) == 2:
            note = (f"{{bdg-primary}}`PyTorch` {{bdg-primary}}`JAX` This exercise has a notebook per "
                    f"framework: the tabs switch between them. See also {other_link}.")
        else:
            (fw,) = fws
            twin = self.counterpart(ex)
            alt = (f" The {FRAMEWORKS[twin[0]]} version of this exercise is "
                   f"[Exercise {twin[1].number}](/{kind}/{twin[1].stem}.md).") if twin else \
                  f" There is no {' or '.join(FRAMEWORKS[f] for f in FRAMEWORKS if f != fw)} version."
            note = f"{{bdg-primary}}`{FRAMEWORKS[fw]} only`{alt} See also {other_link}."
        blocks, title = paired(sections, ex.stem), None  # one notebook, or twins in tabs
        if kind == "solutions":
            first = blocks[0][0] or ""
            title = re.sub(r"^# Exercise\b", "# Solution", first) if first.startswith("# Exercise") else f"# Solution: {first.lstrip('# ')}"
        self.write(doc, assemble(blocks, title, header_box(entries, note)))

    def counterpart(self, ex: Exercise) -> tuple[str, Exercise] | None:
        """The other framework's version of a one-framework exercise (catalog.toml's counterpart)."""
        number = self.exercise_facts[ex.number].get("counterpart")
        if number is None:
            return None
        other = self.exercises[number]
        (fw,) = [f for f in other.folders if f in FRAMEWORKS]
        return fw, other

    def index(self) -> None:
        r = self.readme
        rows = ["| lesson | what it shows | CPU run time |", "| --- | --- | --- |"]
        for name in sorted(self.lessons, key=lambda n: self.lesson_facts[n]["order"]):
            e = self.lesson_facts[name]
            times = ", ".join(f"{FRAMEWORKS[fw]} {catalog.fmt_s(e['cpu_s'].get(fw))}" for fw in FRAMEWORKS)
            rows.append(f"| [{name[:2]} · {e['title']}](lessons/{name}.md) | {e['summary']} | {times} |")
        toc = lambda caption, docs: (f"```{{toctree}}\n:caption: {caption}\n:maxdepth: 1\n:hidden:\n\n"
                                     + "\n".join(docs) + "\n```\n")
        text = f"""# {r.title}

{r.intro}

## Lessons

Each lesson is one text with a PyTorch and a JAX notebook; its page shows the shared text once and
the framework-specific cells in tabs.

{chr(10).join(rows)}

## Exercises

Every exercise has a [student version](exercises/index.md) and a [solution](solutions/index.md):
derivations in plain Python, code exercises for PyTorch, for JAX, or for both.

## Opening the notebooks

This site shows the notebooks as they were committed: executed at the `cpu` size profile (see
[run times](runtimes.md) and [the README](about.md)). To run them, clone the repository and start
JupyterLab with `make lab`, which creates `.venv` on first use and opens `notebooks/`. Every page
links its notebooks' files and their address in a JupyterLab started that way.

{toc("Lessons", [f"lessons/{n}" for n in self.lessons])}
{toc("Exercises", ["exercises/index", "solutions/index"])}
{toc("About", ["runtimes", "about"])}
"""
        self.write("index", text)

    def exercise_index(self, kind: str) -> None:
        heading = "Exercises" if kind == "exercises" else "Solutions"
        what = ("The student versions: each solution region replaced by a stub (`# YOUR CODE HERE`, "
                "`YOUR ANSWER HERE`), outputs cleared. Run one in JupyterLab and its check cells pass "
                "once it is solved.") if kind == "exercises" else \
               ("The solutions, executed at the `cpu` profile, with their outputs. The solution regions "
                "of markdown answers are framed.")
        rows = ["| # | exercise | PyTorch | JAX | framework-neutral | CPU run time |",
                "| --- | --- | --- | --- | --- | --- |"]
        for ex in sorted(self.exercises.values(), key=lambda e: e.number):
            page = f"{ex.stem}.md"
            cells = []
            for folder in (*FRAMEWORKS, NEUTRAL):
                if folder in ex.folders:
                    query = f"?framework={folder}" if folder in FRAMEWORKS and len(
                        [f for f in ex.folders if f in FRAMEWORKS]) > 1 else ""
                    label = {"pytorch": "PyTorch", "jax": "JAX", NEUTRAL: "plain Python"}[folder]
                    cells.append(f"[{label}]({page}{query})" if not query else
                                 f"<a href=\"{ex.stem}.html{query}\">{label}</a>")
                else:
                    cells.append("")
            times = catalog.times(self.exercise_facts[ex.number], "exercise")
            rows.append(f"| {ex.number} | [{ex.title}]({page}) | {' | '.join(cells)} | {times} |")
        toc = "\n".join(f"{e.stem}" for e in sorted(self.exercises.values(), key=lambda e: e.number))
        self.write(f"{kind}/index", f"""# {heading}

{what} Pick an exercise and a framework; twins (an exercise with a PyTorch and a JAX notebook) show
both in tabs. {'[The solutions](../solutions/index.md)' if kind == 'exercises' else '[The exercises](../exercises/index.md)'}
have the same layout.

{chr(10).join(rows)}

```{{toctree}}
:hidden:
:maxdepth: 1

{toc}
```
""")

    def runtimes(self) -> None:
        def cell(e: dict, folder: str) -> str:
            """'16 s', or '16 s (GPU 2.1 s)' once a GPU run has measured the notebook."""
            cpu, gpu = e["cpu_s"].get(folder), e.get("gpu_s", {}).get(folder)
            return catalog.fmt_s(cpu) + (f" (GPU {catalog.fmt_s(gpu)})" if gpu is not None else "")

        rows = ["| lesson | PyTorch | JAX |", "| --- | --- | --- |"]
        for name in self.lessons:
            e = self.lesson_facts[name]
            rows.append(f"| [{name}](lessons/{name}.md) | {cell(e, 'pytorch')} | {cell(e, 'jax')} |")
        erows = ["| # | exercise | " + " | ".join(FRAMEWORKS.values()) + " | framework-neutral |",
                 "| --- | --- | --- | --- | --- |"]
        for ex in sorted(self.exercises.values(), key=lambda e: e.number):
            e = self.exercise_facts[ex.number]
            erows.append(f"| {ex.number} | [{ex.title}](solutions/{ex.stem}.md) | "
                         + " | ".join(cell(e, f) if f in e["cpu_s"] else "" for f in (*FRAMEWORKS, NEUTRAL)) + " |")
        measured = any(e.get("gpu_s") for e in (*self.facts["lesson"], *self.facts["exercise"]))
        self.write("runtimes", f"""# Run times

How long each notebook takes to execute on a CPU at the `cpu` size profile: `make outputs`, one
notebook at a time, as catalog.toml records it (tools/execute.py writes the times there; the README
says on which machine). A GPU time (`make gpu-check ARGS=--record` at the `gpu` profile) follows in
brackets where one was measured{'' if measured else '; none has been yet'}.

## Lessons

{chr(10).join(rows)}

## Exercises (solutions)

{chr(10).join(erows)}
""")

    def about(self) -> None:
        text = self.readme.text.split("\n", 1)[1]
        text = self.renderer.rewrite_links(text, ROOT / "README.md", "about")
        self.write("about", f"# About this course (README)\n{text}")

    def generate(self) -> None:
        if SRC.exists():
            shutil.rmtree(SRC)
        SRC.mkdir(parents=True)
        self.index()
        for name in self.lessons:
            self.lesson(name)
        for kind in ("exercises", "solutions"):
            self.exercise_index(kind)
            for ex in self.exercises.values():
                self.exercise(ex, kind)
        self.runtimes()
        self.about()


# ---------------------------------------------------------------------------------- offline check

class ResourceScan(HTMLParser):
    """Collects the URLs a page loads by itself (not the links a reader may follow)."""

    LOADS = {"script": "src", "img": "src", "iframe": "src", "source": "src", "audio": "src",
             "video": "src", "embed": "src", "object": "data", "track": "src", "input": "src"}

    def __init__(self):
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in self.LOADS and a.get(self.LOADS[tag]):
            self.urls.append(a[self.LOADS[tag]])
        if tag == "link" and a.get("href") and set((a.get("rel") or "").split()) - {"canonical", "alternate", "next", "prev", "search", "index", "author", "license", "help", "top", "up"}:
            self.urls.append(a["href"])
        for key in ("srcset", "poster"):
            if a.get(key):
                self.urls += [u.split()[0] for u in a[key].split(",")]
        if a.get("style"):
            self.urls += re.findall(r"url\(['\"]?([^'\")]+)", a["style"])

    def handle_data(self, data):
        if self.lasttag == "style":
            self.urls += re.findall(r"url\(['\"]?([^'\")]+)", data)
            self.urls += re.findall(r"@import\s+['\"]([^'\"]+)", data)


def external(url: str) -> bool:
    return url.startswith("//") or urlsplit(url).scheme in ("http", "https", "ftp", "ws", "wss")


def check_offline(html_dir: Path) -> list[str]:
    """Every resource a page, a style sheet or an inline style loads from another host."""
    problems = []
    for page in sorted(html_dir.rglob("*.html")):
        scan = ResourceScan()
        scan.feed(page.read_text(errors="replace"))
        problems += [f"{page.relative_to(html_dir)}: {u}" for u in scan.urls if external(u)]
    for css in sorted(html_dir.rglob("*.css")):
        for u in re.findall(r"url\(\s*['\"]?([^'\")\s]+)", css.read_text(errors="replace")) + \
                re.findall(r"@import\s+['\"]([^'\"]+)", css.read_text(errors="replace")):
            if external(u):
                problems.append(f"{css.relative_to(html_dir)}: {u}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-build", action="store_true", help="only generate the MyST sources")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    try:
        Book(read_readme()).generate()
    except SiteError as e:
        print(f"build_site: {e}", file=sys.stderr)
        return 1
    t1 = time.perf_counter()
    print(f"build_site: generated {len(list(SRC.rglob('*.md')))} pages in {SRC.relative_to(ROOT)} ({t1 - t0:.1f} s)")
    if args.no_build:
        return 0
    if HTML.exists():
        shutil.rmtree(HTML)
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-E", "-b", "html",
           "-j", "auto", "-c", str(CONF_DIR), str(SRC), str(HTML)]
    result = subprocess.run(cmd, cwd=ROOT)
    if result.returncode:
        print("build_site: sphinx-build failed (warnings count as errors)", file=sys.stderr)
        return result.returncode
    t2 = time.perf_counter()
    problems = check_offline(HTML)
    if problems:
        print("build_site: these pages load resources from other hosts:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    pages = [p for p in HTML.rglob("*.html") if "_static" not in p.parts]
    size = sum(p.stat().st_size for p in HTML.rglob("*") if p.is_file())
    print(f"build_site: {len(pages)} HTML pages in {HTML.relative_to(ROOT)} ({size / 1e6:.1f} MB); "
          f"sphinx {t2 - t1:.1f} s, total {time.perf_counter() - t0:.1f} s; no external resources")
    return 0


if __name__ == "__main__":
    sys.exit(main())
