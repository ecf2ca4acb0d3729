"""The one executor: a notebook runs in a fresh kernel of the interpreter that runs this code.

A kernelspec found by name (`python3`) depends on jupyter_core's search order (JUPYTER_PREFER_ENV_PATH,
user-level kernelspecs), so it may start another interpreter; here every kernel name maps to
ipykernel's own spec for sys.executable. `make outputs` is this module's command line:

    python -m tools.execute NOTEBOOK.ipynb ...   # execute in place, print and record the run times
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from ipykernel import kernelspec as ipykernel_spec
from jupyter_client import AsyncKernelManager
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient
from traitlets import default

from tools import course


class ThisInterpreter(KernelSpecManager):
    """Kernel specs that always start `sys.executable -m ipykernel_launcher` (what nbval's
    --nbval-current-env does), whatever kernelspec a user or system folder installs."""

    def get_kernel_spec(self, kernel_name):
        return self.kernel_spec_class(resource_dir=ipykernel_spec.RESOURCES, **ipykernel_spec.get_kernel_dict())


class ThisInterpreterKernel(AsyncKernelManager):
    """The kernel manager nbclient creates (and so shuts down): one that knows only ThisInterpreter."""

    @default("kernel_spec_manager")
    def _this_interpreter(self):
        return ThisInterpreter(parent=self)


def client(nb: nbformat.NotebookNode, cwd: Path, *, timeout: float | None = 900, **options) -> NotebookClient:
    """An nbclient NotebookClient for `nb` that runs in `cwd` on a fresh kernel of this interpreter."""
    return NotebookClient(nb, kernel_manager_class=ThisInterpreterKernel, kernel_name="python3", timeout=timeout,
                          record_timing=False, resources={"metadata": {"path": str(cwd)}}, **options)


def execute(path: Path) -> float:
    """Run every cell of the notebook at `path` in a fresh kernel, save it, return seconds."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    client(nb, path.parent).execute()
    seconds = time.perf_counter() - start
    nbformat.write(nb, path)
    return seconds


def main(paths: list[str]) -> int:
    if not paths:
        print("usage: python -m tools.execute NOTEBOOK.ipynb ...", file=sys.stderr)
        return 2
    from tools import catalog
    for p in paths:
        seconds = execute(Path(p))
        print(f"{p}: {seconds:.1f} s", flush=True)
        catalog.record_cpu_time(course.rel(Path(p)), seconds)  # one at a time: an interrupted run keeps its times
    catalog.write_tables()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
