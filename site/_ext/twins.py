"""The course's own part of the website: a lesson's two notebooks on one page, in synced tabs.

myst-nb renders every page from the committed, executed notebooks (nothing is re-executed). This
extension changes what it is given, in Sphinx's `source-read` event, and adds one transform:

- A lesson's page (`lessons/NN_topic`, read from notebooks/pytorch/ through the link site/lessons)
  becomes one notebook made of both twins. Its source, lessons/NN_topic.md, says which cells the
  twins share: a shared cell comes once (a shared code cell with its outputs once if the twins'
  outputs are equal, else its outputs per framework); a heading both twins have becomes a shared
  heading; everything else is tagged with its framework. The transform `FrameworkTabs` then puts
  every run of tagged cells into a PyTorch and a JAX tab, all in one sync group: one click switches
  every section of every page, and `?framework=jax` in a URL picks JAX.
- Every notebook page gets a line that links its notebook files for download, a caption and alt
  text for each figure (the cell's `mystnb` metadata if it sets them, else the titles its code gives
  the plot), and, in solutions, a frame instead of nbgrader's markers around a written answer.
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import re
from pathlib import Path

import jupytext
import nbformat
from docutils import nodes
from markdown_it import MarkdownIt
from sphinx.errors import ExtensionError
from sphinx.transforms import SphinxTransform
from sphinx_design.shared import create_component

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = {"pytorch": "PyTorch", "jax": "JAX"}
KEY = "framework"  # a lesson source's cell metadata: which twin a cell belongs to (none: both)
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
HEADINGS = MarkdownIt("commonmark")


def boxed(text: str, css_class: str) -> str:
    """text in a MyST container of the class, fenced with more colons than any fence inside it."""
    inner = max((len(m) for m in re.findall(r"^ *(:{3,})", text, re.M)), default=2)
    colons = ":" * (inner + 1)
    return f"{colons}{{container}} {css_class}\n{text.strip()}\n{colons}"


def split_at_headings(text: str) -> list[tuple[bool, str]]:
    """A markdown cell's text as (is_heading, text) pieces, cut before and after every heading."""
    lines, out, start = text.splitlines(), [], 0
    for token in HEADINGS.parse(text):
        if token.type == "heading_open" and token.level == 0:
            h0, h1 = token.map
            out += [(False, "\n".join(lines[start:h0])), (True, "#" * int(token.tag[1]) + " " + lines[h0].lstrip("# ").strip())]
            start = h1
    out.append((False, "\n".join(lines[start:])))
    return [(h, t) for h, t in out if t.strip()]


def lesson_notebook(name: str, root: Path = ROOT) -> nbformat.NotebookNode:
    """Both twins of a lesson as one notebook: shared cells once, framework cells tagged."""
    source = jupytext.read(root / "lessons" / f"{name}.md", fmt="md:myst")
    items = {}  # framework: [(sync key or None, cell)]
    for fw in FRAMEWORKS:
        path = root / "notebooks" / fw / f"{name}.ipynb"
        nb = nbformat.read(path, as_version=4)
        mine = [(k, c) for k, c in enumerate(source.cells) if c.metadata.get(KEY, fw) == fw]
        if [(c.cell_type, c.source) for _, c in mine] != [(c.cell_type, c.source) for c in nb.cells]:
            raise ExtensionError(f"{path.relative_to(root)} is not what lessons/{name}.md generates: "
                                 "regenerate the twins from the source (CONTRIBUTING.md, 'Files and pairing')")
        items[fw] = []
        for (k, src), cell in zip(mine, nb.cells):
            if KEY not in src.metadata:
                items[fw].append((("cell", k), cell))
            elif cell.cell_type == "markdown":
                for is_heading, text in split_at_headings(cell.source):
                    items[fw].append((("heading", text) if is_heading else None, nbformat.v4.new_markdown_cell(text)))
            else:
                items[fw].append((None, cell))
    # the sync points: the shared cells, and the headings both twins have at the same place
    keys = {fw: [key or object() for key, _ in its] for fw, its in items.items()}
    a, b = keys.values()
    blocks = difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()
    pairs = [(i + n, j + n) for i, j, size in blocks for n in range(size)]
    if {k for k in a if isinstance(k, tuple) and k[0] == "cell"} != {a[i] for i, _ in pairs if a[i][0] == "cell"}:
        raise ExtensionError(f"lessons/{name}.md: the twins' shared cells and headings do not pair up")
    cells, carry = [], {fw: [] for fw in FRAMEWORKS}
    start = dict.fromkeys(FRAMEWORKS, 0)
    for i, j in pairs + [(len(a), len(b))]:
        for fw, end in zip(FRAMEWORKS, (i, j)):  # each twin's own cells before this sync point
            cells += carry[fw] + [own(cell, fw) for _, cell in items[fw][start[fw]:end]]
            carry[fw], start[fw] = [], end + 1
        if i == len(a):
            break
        (key, first), (_, second) = items["pytorch"][i], items["jax"][j]
        if key[0] == "heading":
            cells.append(nbformat.v4.new_markdown_cell(key[1]))
        elif first.cell_type == "code" and plain(first.outputs) != plain(second.outputs):
            cells.append(nbformat.v4.new_code_cell(first.source, metadata=dict(first.metadata)))
            for fw, cell in zip(FRAMEWORKS, (first, second)):  # its outputs per framework, in the tabs
                copy = nbformat.from_dict(json.loads(json.dumps(cell)))
                copy.metadata["tags"] = [*copy.metadata.get("tags", []), f"fw-{fw}", "remove-input"]
                carry[fw].append(copy)
        else:
            cells.append(first)
    for n, cell in enumerate(cells):  # the twins' cells may share ids
        cell.id = f"cell-{n}"
    return nbformat.v4.new_notebook(cells=cells, metadata=nbformat.read(
        root / "notebooks" / "pytorch" / f"{name}.ipynb", as_version=4).metadata)


def plain(outputs: list) -> list:
    """Outputs without their execution counts, to tell whether the twins printed the same."""
    return [{k: v for k, v in o.items() if k != "execution_count"} for o in outputs]


def own(cell: nbformat.NotebookNode, fw: str) -> nbformat.NotebookNode:
    """A cell of one framework's notebook, marked for FrameworkTabs (a heading in it becomes a bold line)."""
    if cell.cell_type == "code":
        cell = nbformat.from_dict(json.loads(json.dumps(cell)))
        cell.metadata["tags"] = [*cell.metadata.get("tags", []), f"fw-{fw}"]
        return cell
    text = "\n\n".join(f"**{t.lstrip('#').strip()}**" if h else t for h, t in split_at_headings(cell.source))
    return nbformat.v4.new_markdown_cell(boxed(text, f"fw-{fw}"))


# ------------------------------------------------------------------------------ every notebook page

def titles_in(code: str) -> list[str]:
    """The titles a plotting cell gives its figure, as its code writes them: the strings passed to
    `set_title`, `suptitle` or `title=` (an f-string's fields become '…'), and the strings of a list
    assigned to a name with 'title' in it; titles with fewer than three words of text are left out."""
    def text(node) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return "".join(v.value if isinstance(v, ast.Constant) else "…" for v in node.values)
        if isinstance(node, ast.Call) and node.args:  # hp.measured_on("...") and the like
            return text(node.args[0])
        return None

    code = "\n".join(l for l in code.splitlines() if not l.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            args = node.args[:1] if name in ("set_title", "suptitle", "title") else []
            found += map(text, args + [k.value for k in node.keywords if k.arg == "title"])
        elif isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Tuple)) and any(
                "title" in getattr(t, "id", "") for t in node.targets):
            found += map(text, node.value.elts)
    return list(dict.fromkeys(t for t in found if t and len(re.findall(r"\w+", t)) >= 3))


def describe_figures(nb: nbformat.NotebookNode) -> None:
    """A caption and alt text for every figure a cell draws, unless its `mystnb` metadata gives them."""
    section = ""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            section = next((l.lstrip("#").strip() for l in reversed(cell.source.splitlines()) if l.startswith("#")), section)
        if cell.cell_type != "code" or not any("image/png" in o.get("data", {}) for o in cell.get("outputs", [])):
            continue
        titles = titles_in(cell.source)
        what = "; ".join(titles) if titles else f"the figure of the section '{section}'"
        meta = cell.metadata.setdefault("mystnb", {})
        meta.setdefault("image", {}).setdefault("alt", f"Figure: {what}")
        meta.setdefault("figure", {}).setdefault("caption", what[0].upper() + what[1:])


def frame_answers(nb: nbformat.NotebookNode) -> None:
    """nbgrader's markers around a written answer (solutions/) become a frame."""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and BEGIN in cell.source:
            cell.source = re.sub(rf"^{BEGIN}\n(.*?)^{END}\n?",
                                 lambda m: boxed(m.group(1), "model-answer") + "\n",
                                 cell.source.replace("\r\n", "\n") + "\n", flags=re.S | re.M)


def relink(text: str, folder: str) -> str:
    """Relative links of a Markdown text written in the repository's `folder`, made to work on the
    site: a notebook or a page becomes a link to its page (a lesson notebook's to its lesson, the
    start page's to the home page), another repository file a download. Sphinx resolves a path through
    site/'s links to the folders outside it, so a page is named by its document name instead."""
    def fix(m: re.Match) -> str:
        target, _, anchor = m.group(2).partition("#")
        if not target or re.match(r"[a-z]+:", target):
            return m.group(0)
        path = (ROOT / folder / target).resolve()
        if not path.is_relative_to(ROOT) or not path.exists():
            return m.group(0)  # Sphinx says which link is broken
        rel = path.relative_to(ROOT).as_posix()
        rel = re.sub(r"^notebooks/(pytorch|jax)/", "lessons/", rel).replace("notebooks/00_start_here.ipynb", "index.md")
        text = re.sub(r"[`*]", "", m.group(1))  # a role's text is plain
        if path.suffix not in (".ipynb", ".md") or anchor:
            return f"{{download}}`{text} </{rel}>`"
        return f"{{doc}}`{text} </{rel.rsplit('.', 1)[0]}>`"

    return re.sub(r"(?<!!)\[([^\]]*)\]\(([^)\s]+)\)", fix, text)


def repo_link(rel: str) -> str:
    """' · on GitHub' when the build knows the repository (SITE_REPO_URL, or GitHub Actions' variables)."""
    base = os.environ.get("SITE_REPO_URL") or (
        f"{os.environ['GITHUB_SERVER_URL']}/{os.environ['GITHUB_REPOSITORY']}" if os.environ.get("GITHUB_REPOSITORY") else "")
    return f" ([in the repository]({base.rstrip('/')}/blob/{os.environ.get('SITE_REPO_BRANCH', 'main')}/{rel}))" if base else ""


def header(files: dict[str, str]) -> nbformat.NotebookNode:
    """The line under a page's title: its notebook files, to download, and how to run them."""
    links = " · ".join(f"{{download}}`{label} </{rel}>`{repo_link(rel)}" for label, rel in files.items())
    where = " or ".join(f"`{rel}`" for rel in files.values())
    return nbformat.v4.new_markdown_cell(boxed(
        f"Notebook: {links}. To run it, clone the repository, start JupyterLab with `make lab` and open {where}.",
        "page-notebooks"))


def notebook_page(app, docname: str, source: list[str]) -> None:
    """source-read: what myst-nb renders for a lesson, exercise or solution page."""
    kind, _, rest = docname.partition("/")
    if kind == "lessons":
        nb = lesson_notebook(rest)
        folder = "notebooks/pytorch"
        files = {f"{label} notebook": f"notebooks/{fw}/{rest}.ipynb" for fw, label in FRAMEWORKS.items()}
    elif kind in ("exercises", "solutions") and "/" in rest:
        nb = nbformat.reads(source[0], as_version=4)
        folder, stem = rest.split("/")
        files = {f"{stem}.ipynb": f"{kind}/{rest}.ipynb"}
        label = FRAMEWORKS.get(folder, "plain Python")
        title = nb.cells[0]
        title.source = re.sub(r"^# (.*)", lambda m: f"# {'Solution: ' if kind == 'solutions' else ''}{m.group(1)} ({label})",
                              title.source, count=1)
        frame_answers(nb)
        folder = f"{kind}/{folder}"
    elif kind == "docs":
        source[0] = relink(source[0], "docs")
        return
    else:
        return
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = relink(cell.source, folder)
    describe_figures(nb)
    first = nb.cells[0]
    if first.cell_type == "markdown" and first.source.startswith("# ") and "\n" in first.source.strip():
        heading, body = first.source.split("\n", 1)  # the header goes right under the title
        nb.cells[0:1] = [nbformat.v4.new_markdown_cell(heading), header(files), nbformat.v4.new_markdown_cell(body)]
    else:
        nb.cells.insert(1, header(files))
    source[0] = nbformat.writes(nb)


# ------------------------------------------------------------------------------------------ the tabs

def framework_of(node: nodes.Node) -> str | None:
    if isinstance(node, nodes.container):
        for fw in FRAMEWORKS:
            if {f"fw-{fw}", f"tag_fw-{fw}"} & set(node["classes"]):
                return fw
    return None


def tab_set(run: list[nodes.Node]) -> nodes.Node:
    """One tab per framework (sphinx-design's components, synced in the group 'framework')."""
    items = []
    for fw, label in FRAMEWORKS.items():
        body = [n for n in run if framework_of(n) == fw] or [nodes.paragraph(text=f"The {label} notebook has nothing here.")]
        title = nodes.rubric(label, label, classes=["sd-tab-label"], sync_id=fw, sync_group="framework")
        content = create_component("tab-content", classes=["sd-tab-content", f"fw-{fw}"], children=body)
        items.append(create_component("tab-item", classes=["sd-tab-item"], children=[title, content]))
    return create_component("tab-set", classes=["sd-tab-set", "framework-tabs"], children=items)


class FrameworkTabs(SphinxTransform):
    """Every run of framework-tagged cells (between shared ones) becomes a PyTorch and a JAX tab."""

    default_priority = 500

    def apply(self, **kwargs) -> None:
        if not self.env.docname.startswith("lessons/"):
            return
        for parent in list(self.document.findall(nodes.Element)):
            if not any(framework_of(c) for c in parent.children):
                continue
            children, run = [], []
            for child in [*parent.children, None]:
                if child is not None and framework_of(child):
                    run.append(child)
                    continue
                if run:
                    children.append(tab_set(run))
                    run = []
                if child is not None:
                    children.append(child)
            parent.children = []
            parent.extend(children)


def setup(app):
    app.connect("source-read", notebook_page)
    app.add_transform(FrameworkTabs)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
