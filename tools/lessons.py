"""One source per lesson: lessons/NN_topic.md generates notebooks/pytorch/NN_topic.ipynb and
notebooks/jax/NN_topic.ipynb.

A source is a MyST Markdown notebook as jupytext reads it (`md:myst`). A cell without metadata is
shared: it goes into both notebooks. A cell with `framework: pytorch` or `framework: jax` (a code
cell's `:framework: jax` option, a markdown cell's `+++ {"framework": "jax"}` line) goes into that
framework's notebook only; the key itself is not written into the notebook.

Generating keeps, for every code cell whose source is unchanged, its committed outputs and execution
count (and every unchanged cell's id), so a prose edit needs no re-execution; a new or changed code
cell comes out unexecuted, and the tool names the notebooks that then need `make outputs NB=...`.
lessons/.generated.json records the cell sources each notebook had when this tool last wrote it: a
notebook whose cells were edited since (by hand, in JupyterLab) is never overwritten unless --force.

    python -m tools.lessons [NN ...]         # generate the twins (all lessons by default)
    python -m tools.lessons --check          # write nothing; exit 1 if a notebook is out of date
    python -m tools.lessons stats [NN ...]   # tools.lesson_stats's figures per twin, and the shared share
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import re
import sys
from pathlib import Path

import jupytext
import nbformat

from tools import layout
from tools.layout import FRAMEWORKS

ROOT = layout.ROOT
SOURCES = "lessons"
MANIFEST = ".generated.json"
KEY = "framework"


class SourceError(Exception):
    """A lesson source (or the request) that cannot be turned into notebooks."""


def source_path(lesson: str, root: Path = ROOT) -> Path:
    """lessons/NN_topic.md from 'NN', 'NN_topic', or a path to a lesson's notebook or source."""
    stem = Path(lesson).stem
    found = sorted((root / SOURCES).glob(f"{stem}*.md")) or sorted((root / "notebooks" / "pytorch").glob(f"{stem}*.ipynb"))
    if len(found) != 1:
        raise SourceError(f"{lesson!r} names {len(found)} lessons; give a lesson's number or name, "
                          f"e.g. 01 or 01_memory_anatomy (the sources are {SOURCES}/NN_topic.md)")
    return root / SOURCES / f"{found[0].stem}.md"


def read_source(path: Path) -> nbformat.NotebookNode:
    nb = jupytext.read(path, fmt="md:myst")
    for k, cell in enumerate(nb.cells):
        if cell.metadata.get(KEY, next(iter(FRAMEWORKS))) not in FRAMEWORKS:
            raise SourceError(f"{layout.rel(path, path.parents[1])}, cell {k}: {KEY}: "
                              f"{cell.metadata[KEY]!r}; use one of {', '.join(FRAMEWORKS)}, or none for a shared cell")
    return nb


def cells_for(source: nbformat.NotebookNode, fw: str) -> list[tuple[int, dict]]:
    """(index in the source, cell without the framework key) of every cell of fw's notebook."""
    return [(k, {"cell_type": c.cell_type, "source": c.source, "metadata": {m: v for m, v in c.metadata.items() if m != KEY}})
            for k, c in enumerate(source.cells) if c.metadata.get(KEY, fw) == fw]


def new_cell(cell_type: str, source: str, metadata: dict) -> nbformat.NotebookNode:
    return (nbformat.v4.new_code_cell if cell_type == "code" else nbformat.v4.new_markdown_cell)(source, metadata=metadata)


def keys(cells) -> list[tuple[str, str]]:
    return [(c["cell_type"], layout.source(c)) for c in cells]


def digest(cells) -> str:
    return hashlib.sha256(json.dumps(keys(cells)).encode()).hexdigest()


def generate(source: nbformat.NotebookNode, fw: str, old: nbformat.NotebookNode | None) -> tuple[nbformat.NotebookNode, int]:
    """fw's notebook from the source, with old's ids and outputs where a cell is unchanged; also the
    number of code cells that come out unexecuted."""
    new = [c for _, c in cells_for(source, fw)]
    olds = old.cells if old is not None else []
    same = {}
    for a, b, n in difflib.SequenceMatcher(None, keys(new), keys(olds), autojunk=False).get_matching_blocks():
        same.update({a + i: olds[b + i] for i in range(n)})
    cells, unexecuted = [], 0
    for k, c in enumerate(new):
        cell = new_cell(c["cell_type"], c["source"], c["metadata"])
        if k in same:
            cell.id = same[k].id
            if c["cell_type"] == "code":
                cell.outputs, cell.execution_count = same[k].outputs, same[k].execution_count
        elif c["cell_type"] == "code":
            unexecuted += 1
        cells.append(cell)
    meta = dict(old.metadata) if old is not None else {}
    meta["kernelspec"] = dict(layout.KERNELSPEC)  # what JupyterLab writes on opening it
    return nbformat.v4.new_notebook(cells=cells, metadata=meta), unexecuted


def notebook_path(src: Path, fw: str) -> Path:
    return src.parents[1] / layout.FOLDERS["lessons"] / fw / f"{src.stem}.ipynb"


def write_notebooks(srcs: list[Path], *, force=False, check=False) -> list[str]:
    """Generate (or with check, compare) both twins of every source; return the problems."""
    root = srcs[0].parents[1] if srcs else ROOT
    manifest_path = root / SOURCES / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    problems, stale = [], []
    for src in srcs:
        source = read_source(src)
        for fw in FRAMEWORKS:
            path, rel = notebook_path(src, fw), layout.rel(notebook_path(src, fw), root)
            old = nbformat.read(path, as_version=4) if path.exists() else None
            nb, unexecuted = generate(source, fw, old)
            if old is not None and layout.cells(nb) == layout.cells(old):  # not its metadata: JupyterLab's
                manifest[rel] = digest(nb.cells)
                continue
            if check:
                problems.append(f"{rel}: its cells differ from what {layout.rel(src, root)} generates; edit "
                                f"{layout.rel(src, root)}, then run: python -m tools.lessons {src.stem[:2]}")
                continue
            if old is not None and not force and manifest.get(rel) != digest(old.cells):
                problems.append(f"{rel} was edited since tools.lessons wrote it; not overwritten (move the edit "
                                f"into {layout.rel(src, root)}, or rerun with --force to discard it)")
                continue
            path.write_text(nbformat.writes(nb) + "\n")
            manifest[rel] = digest(nb.cells)
            if unexecuted:
                stale.append(f"{rel} ({unexecuted} code cells without outputs)")
    if not check:
        manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    if stale:
        print("re-execute: make outputs NB='" + " ".join(s.split()[0] for s in stale) + "'\n  "
              + "\n  ".join(stale), file=sys.stderr)
    return problems


def sources(root: Path = ROOT) -> list[Path]:
    return sorted((root / SOURCES).glob("[0-9][0-9]_*.md"))


def shared_share(src: Path, fw: str) -> float:
    """The share of fw's markdown words (whole notebook) that are in shared cells of the source."""
    from tools.lesson_stats import words
    source = read_source(src)
    total = shared = 0
    for k, cell in cells_for(source, fw):
        if cell["cell_type"] == "markdown":
            n = words(cell["source"])
            total += n
            shared += n if KEY not in source.cells[k].metadata else 0
    return shared / max(1, total)


def print_stats(srcs: list[Path]) -> None:
    """tools/lesson_stats.py's figures for each generated twin, with the share of shared prose."""
    from tools import lesson_stats
    print(f"{'lesson':28} {'fw':8} {'words':>6} {'aside':>6} {'code':>5} {'stated':>6} {'rule':>5} {'shared':>6}")
    for src in srcs:
        for fw in layout.FRAMEWORKS:
            st = lesson_stats.stats(notebook_path(src, fw))
            print(f"{src.stem:28} {fw:8} {st.main_words:6} {st.aside_words:6} {st.main_code:5} "
                  f"{st.stated_minutes or '-':>6} {st.minutes:5} {shared_share(src, fw):6.0%}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["stats"]:
            print_stats([source_path(l) for l in argv[1:]] or sources())
            return 0
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("lesson", nargs="*", help="lesson numbers or names (default: every lesson)")
        parser.add_argument("--force", action="store_true", help="overwrite notebooks edited by hand")
        parser.add_argument("--check", action="store_true", help="write nothing; fail if a notebook is stale")
        args = parser.parse_args(argv)
        problems = write_notebooks([source_path(l) for l in args.lesson] or sources(), force=args.force,
                                   check=args.check)
    except SourceError as e:
        problems = [str(e)]
    for p in problems:
        print(f"tools.lessons: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
