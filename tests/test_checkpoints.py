"""Opening a notebook in JupyterLab saves .ipynb_checkpoints/NAME-checkpoint.ipynb next to it (`make lab`
opens the start page, so notebooks/ gets one first). Every tool lists notebooks through tools/layout.py,
which must not see those copies; pytest (make test) skips hidden folders by itself (norecursedirs)."""

from __future__ import annotations

import shutil

from tools import layout, nbgrader_metadata

ROOT = layout.ROOT


def test_the_listing_ignores_jupyterlab_checkpoint_copies(tmp_path):
    for kind in layout.FOLDERS.values():
        shutil.copytree(ROOT / kind, tmp_path / kind, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    clean = {kind: layout.notebooks(kind, root=tmp_path) for kind in layout.FOLDERS}
    folders = [tmp_path / "notebooks"] + [p for kind in layout.FOLDERS.values() for p in (tmp_path / kind).iterdir()
                                          if p.is_dir()]
    for folder in folders:   # a checkpoint copy of the first notebook of every notebook folder
        first = sorted(folder.glob("*.ipynb"))[0]
        (folder / ".ipynb_checkpoints").mkdir()
        shutil.copyfile(first, folder / ".ipynb_checkpoints" / f"{first.stem}-checkpoint.ipynb")
    assert {kind: layout.notebooks(kind, root=tmp_path) for kind in layout.FOLDERS} == clean
    assert layout.notebooks_in(tmp_path / "solutions") == clean["solutions"]
    assert nbgrader_metadata.notebooks([tmp_path / "solutions"]) == clean["solutions"]
