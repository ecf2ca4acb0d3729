"""Each lesson pair is generated from one source, lessons/NN_topic.md (tools/lessons.py): the committed
notebooks are what their source generates, regeneration keeps outputs of unchanged code cells, and a
notebook edited by hand is never overwritten silently."""

import shutil

import nbformat
import pytest

from tools import course
from tools import lessons as L
from tools.course import FRAMEWORKS

ROOT = course.ROOT
SOURCES = L.sources()


def test_every_lesson_has_a_source():
    stems = sorted({p.stem for p in course.notebooks("lessons")})
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
            f"{course.rel(path)} differs from what {course.rel(src)} generates: edit {course.rel(src)} "
            f"(not the notebook), then run `python -m tools.lessons {src.stem[:2]}` and `make outputs NB={course.rel(path)}`")
        assert nbformat.writes(generated) + "\n" == path.read_text(), \
            f"{course.rel(path)}: metadata or ids differ from what `python -m tools.lessons {src.stem[:2]}` writes"
        assert unexecuted == 0


def copy(tmp_path, stem):
    for fw in FRAMEWORKS:
        (tmp_path / "notebooks" / fw).mkdir(parents=True)
        shutil.copy(ROOT / "notebooks" / fw / f"{stem}.ipynb", tmp_path / "notebooks" / fw)
    return tmp_path


def test_import_then_generate_reproduces_the_twins_byte_for_byte(tmp_path):
    stem = SOURCES[0].stem
    root = copy(tmp_path, stem)
    before = {fw: (root / "notebooks" / fw / f"{stem}.ipynb").read_text() for fw in FRAMEWORKS}
    path, shared, specific = L.import_pair(stem[:2], root)
    assert path == root / "lessons" / f"{stem}.md" and shared + specific == len(L.read_source(path).cells)
    for fw in FRAMEWORKS:
        (root / "notebooks" / fw / f"{stem}.ipynb").unlink()  # generated from the source alone ...
    assert L.write_notebooks([path], force=True) == []
    for fw in FRAMEWORKS:
        nb = nbformat.read(root / "notebooks" / fw / f"{stem}.ipynb", as_version=4)
        old = nbformat.reads(before[fw], as_version=4)
        assert L.keys(nb.cells) == L.keys(old.cells)  # ... the same cells, outputs gone
        assert all(c.outputs == [] for c in nb.cells if c.cell_type == "code")


def test_a_prose_edit_keeps_outputs_and_a_code_edit_drops_them(tmp_path, capsys):
    stem = SOURCES[0].stem
    root = copy(tmp_path, stem)
    path, _, _ = L.import_pair(stem[:2], root)
    assert L.write_notebooks([path]) == []
    text = path.read_text()
    code = text.index("```{code-cell}")
    text = text.replace("Reading time:", "Reading time, roughly:", 1)  # PyTorch's first markdown cell
    path.write_text(text[:code] + text[code:].replace("import ", "import  ", 1))
    assert L.write_notebooks([path]) == []
    assert "make outputs NB=" in capsys.readouterr().err
    old = nbformat.read(ROOT / "notebooks" / "pytorch" / f"{stem}.ipynb", as_version=4)
    new = nbformat.read(root / "notebooks" / "pytorch" / f"{stem}.ipynb", as_version=4)
    changed = [k for k, (a, b) in enumerate(zip(old.cells, new.cells)) if a.source != b.source]
    assert len(changed) == 2 and new.cells[changed[-1]].outputs == [] and new.cells[changed[-1]].execution_count is None
    kept = [k for k, c in enumerate(new.cells) if c.cell_type == "code" and k not in changed]
    assert kept and all(new.cells[k].outputs == old.cells[k].outputs and new.cells[k].id == old.cells[k].id for k in kept)


def test_a_notebook_edited_by_hand_is_not_overwritten_without_force(tmp_path):
    stem = SOURCES[0].stem
    root = copy(tmp_path, stem)
    path, _, _ = L.import_pair(stem[:2], root)
    assert L.write_notebooks([path]) == []
    nb_path = root / "notebooks" / "jax" / f"{stem}.ipynb"
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
    assert L.main(["import", "99"]) == 1
