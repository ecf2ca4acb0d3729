"""Execute notebooks in place from a clean kernel (what `make outputs` runs) and report times."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def execute(path: Path) -> float:
    """Run every cell of the notebook at `path` in a fresh kernel, save it, return seconds."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=900, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    nbformat.write(nb, path)
    return seconds


def main(paths: list[str]) -> None:
    if not paths:
        sys.exit("usage: execute_notebooks.py NOTEBOOK.ipynb ...")
    for p in paths:
        print(f"{p}: {execute(Path(p)):.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
