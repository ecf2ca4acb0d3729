"""Each lesson pair is generated from one source, lessons/NN_topic.md (tools/lessons.py): the committed
notebooks are what their source generates, regeneration keeps outputs of unchanged code cells, and a
notebook edited by hand is never overwritten silently."""

import shutil
from pathlib import Path

import nbformat
import pytest

from tools import layout
from tools import lessons as L
from tools.layout import FRAMEWORKS

ROOT = layout.ROOT
SOURCES = L.sources()


def test_every_lesson_has_a_source():
    stems = sorted({p.stem for p in layout.notebooks("lessons")})
    assert stems and [p.stem for p in SOURCES] == stems, \
        f"lessons/ should hold one NN_topic.md per lesson pair in notebooks/: {stems}"


@pytest.mark.parametrize("src", SOURCES, ids=[p.stem for p in SOURCES])
def test_committed_notebooks_are_what_their_source_generates(src):
    source = L.read_source(src)
    for fw in FRAMEWORKS:
        path = L.notebook_path(src, fw)
        committed = nbformat.read(path, as_version=4)
        generated, unexecuted = L.generate(source, fw, committed)
        assert L.keys(committed.cells) == L.keys(generated.cells), (
            f"{layout.rel(path)} differs from what {layout.rel(src)} generates: edit {layout.rel(src)} "
            f"(not the notebook), then run `python -m tools.lessons {src.stem[:2]}` and `make outputs NB={layout.rel(path)}`")
        assert layout.cells(committed) == layout.cells(generated), \
            f"{layout.rel(path)}: cell metadata differs from what `python -m tools.lessons {src.stem[:2]}` writes"
        assert unexecuted == 0


def copy(tmp_path, stem):
    """A tree with one lesson's source and twins; the source's path."""
    for fw in FRAMEWORKS:
        (tmp_path / "notebooks" / fw).mkdir(parents=True)
        shutil.copy(ROOT / "notebooks" / fw / f"{stem}.ipynb", tmp_path / "notebooks" / fw)
    (tmp_path / "lessons").mkdir()
    return Path(shutil.copy(ROOT / "lessons" / f"{stem}.md", tmp_path / "lessons"))


def test_generating_from_the_source_alone_gives_the_twins_cells_without_outputs(tmp_path):
    stem = SOURCES[0].stem
    path = copy(tmp_path, stem)
    for fw in FRAMEWORKS:
        (tmp_path / "notebooks" / fw / f"{stem}.ipynb").unlink()
    assert L.write_notebooks([path]) == []
    for fw in FRAMEWORKS:
        nb = nbformat.read(tmp_path / "notebooks" / fw / f"{stem}.ipynb", as_version=4)
        old = nbformat.read(ROOT / "notebooks" / fw / f"{stem}.ipynb", as_version=4)
        assert L.keys(nb.cells) == L.keys(old.cells)
        assert all(c.outputs == [] for c in nb.cells if c.cell_type == "code")


def test_a_prose_edit_keeps_outputs_and_a_code_edit_drops_them(tmp_path, capsys):
    stem = SOURCES[0].stem
    path = copy(tmp_path, stem)
    text = path.read_text()
    code = text.index("```{code-cell}")
    text = text.replace("Reading time:", "Reading time, roughly:", 1)  # the first markdown cell
    path.write_text(text[:code] + text[code:].replace("import ", "import  ", 1))
    assert L.write_notebooks([path], force=True) == []
    assert "make outputs NB=" in capsys.readouterr().err
    old = nbformat.read(ROOT / "notebooks" / "pytorch" / f"{stem}.ipynb", as_version=4)
    new = nbformat.read(tmp_path / "notebooks" / "pytorch" / f"{stem}.ipynb", as_version=4)
    changed = [k for k, (a, b) in enumerate(zip(old.cells, new.cells)) if a.source != b.source]
    assert len(changed) == 2 and new.cells[changed[-1]].outputs == [] and new.cells[changed[-1]].execution_count is None
    kept = [k for k, c in enumerate(new.cells) if c.cell_type == "code" and k not in changed]
    assert kept and all(new.cells[k].outputs == old.cells[k].outputs and new.cells[k].id == old.cells[k].id for k in kept)


def test_a_notebook_edited_by_hand_is_not_overwritten_without_force(tmp_path):
    stem = SOURCES[0].stem
    path = copy(tmp_path, stem)
    assert L.write_notebooks([path], force=True) == []
    nb_path = tmp_path / "notebooks" / "jax" / f"{stem}.ipynb"
    nb = nbformat.read(nb_path, as_version=4)
    nb.cells[0].source += "\nEdited in JupyterLab."
    nbformat.write(nb, nb_path)
    problems = L.write_notebooks([path])
    assert len(problems) == 1 and "edited since" in problems[0] and "--force" in problems[0]
    assert "Edited in JupyterLab." in nb_path.read_text()
    assert "differ from what" in L.write_notebooks([path], check=True)[0]
    assert L.write_notebooks([path], force=True) == [] and "Edited in JupyterLab." not in nb_path.read_text()


def test_a_bad_framework_key_is_refused_with_what_to_write(tmp_path):
    bad = tmp_path / "lessons" / "09_bad.md"
    bad.parent.mkdir()
    bad.write_text('+++ {"framework": "torch"}\n\nText.\n')
    with pytest.raises(L.SourceError, match="use one of pytorch, jax"):
        L.read_source(bad)
    assert L.main(["99"]) == 1


def test_a_notebook_opened_in_jupyterlab_stays_in_sync(tmp_path):
    # JupyterLab rewrites a kernelspec's display_name on opening, and autosave writes it: that is no edit.
    stem = SOURCES[0].stem
    src = copy(tmp_path, stem)
    nb_path = tmp_path / "notebooks" / "jax" / f"{stem}.ipynb"
    nb = nbformat.read(nb_path, as_version=4)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python", "version": "3.12.0"}
    nbformat.write(nb, nb_path)
    before = nb_path.read_text()
    assert L.write_notebooks([src], check=True) == []
    assert L.write_notebooks([src]) == [] and nb_path.read_text() == before
    new = L.generate(L.read_source(src), "jax", None)[0]
    assert new.metadata.kernelspec == layout.KERNELSPEC   # a new notebook gets what JupyterLab writes
