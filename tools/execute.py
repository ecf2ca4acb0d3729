"""The one executor: every notebook runs in a fresh kernel of the interpreter that runs this code.

    python -m tools.execute NOTEBOOK ...        # make outputs: execute in place at the cpu profile
    python -m tools.execute --out DIR [--profile gpu] [--timeout S] [NOTEBOOK|FOLDER ...]
        # make gpu-check (-cpu): every lesson and solution by default, executed copies under DIR, and
        # DIR/summary.md (a line per notebook: result, time, checks, first error) and DIR/environment.txt
        # (torch.utils.collect_env's and jax.print_environment_info()'s reports); exit 1 if one failed

A kernelspec found by name (`python3`) depends on jupyter_core's search order, so it may start another
interpreter; here every kernel is ipykernel's own for sys.executable. The cpu profile runs with the GPU
hidden (layout.CPU_ENV), as the committed outputs were recorded; the gpu profile with COURSE_PROFILE=gpu.
A cell that runs past --timeout is stopped, a kernel that dies is reported, and the next notebook runs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from ipykernel import kernelspec as ipykernel_spec
from jupyter_client import AsyncKernelManager
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
from traitlets import default

from tools import layout

ENVIRONMENT_REPORTS = ["import torch.utils.collect_env as c; c.main()", "import jax; jax.print_environment_info()"]


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


def run(path: Path, target: Path, timeout: float, *, keep_failed: bool = True) -> dict:
    """Execute the notebook at `path` (in its folder), write the executed notebook to `target` (the
    cells after a failure left without outputs; with keep_failed=False, only if it ran through), and
    return what happened."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata["kernelspec"] = dict(layout.KERNELSPEC)  # what JupyterLab writes for this kernel
    current = []
    start = time.perf_counter()
    error = None
    try:
        client(nb, path.parent.resolve(), timeout=timeout,
               on_cell_execute=lambda cell, cell_index: current.append(cell_index)).execute()
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as e:
        kind = {CellTimeoutError: "timed out", DeadKernelError: "kernel died"}.get(type(e), "failed")
        message = f"{e.ename}: {e.evalue}" if isinstance(e, CellExecutionError) else str(e).strip().splitlines()[0]
        error = (kind, current[-1] if current else None, message)
    seconds = time.perf_counter() - start
    if error is None or keep_failed:
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    return {"path": path, "seconds": seconds, "error": error,
            "checks": (text.count("check passed:"), text.count("check skipped:"))}


def summary_line(r: dict) -> str:
    passed, skipped = r["checks"]
    result = "passed" if r["error"] is None else f"{r['error'][0]} at cell {r['error'][1]}: {r['error'][2]}"
    return f"| {r['shown']} | {r['seconds']:.1f} s | {passed} passed, {skipped} skipped | {' '.join(result.split())[:300]} |"


def environment_reports() -> list[subprocess.Popen]:
    """torch's and JAX's own reports of the machine, drivers and versions, started in the background."""
    return [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for code in ENVIRONMENT_REPORTS]


def report(paths: list[Path], out: Path, profile: str, timeout: float) -> int:
    out.mkdir(parents=True, exist_ok=True)
    reports = environment_reports()
    head = [f"# Notebooks at the {profile} profile", "", f"{len(paths)} notebooks, a fresh kernel each, "
            f"{timeout:g} s per cell at most; the machine: environment.txt.", "",
            "| notebook | time | checks | result |", "| --- | --- | --- | --- |"]
    rows, failed = [], 0
    for i, path in enumerate(paths, 1):
        shown = layout.rel(path) if path.resolve().is_relative_to(layout.ROOT) else path.name
        r = run(path, out / shown, timeout) | {"shown": shown}
        failed += r["error"] is not None
        rows.append(summary_line(r))
        print(f"[{i}/{len(paths)}] {rows[-1]}", flush=True)
        (out / "summary.md").write_text("\n".join(head + rows + ["", f"{i - failed} of {i} passed."]) + "\n")
    (out / "environment.txt").write_text("\n".join(f"$ python -c '{code}'\n{p.communicate(timeout=600)[0]}"
                                                   for code, p in zip(ENVIRONMENT_REPORTS, reports)))
    print(f"execute: {len(paths) - failed} of {len(paths)} notebooks passed; {out / 'summary.md'}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.execute", description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks or folders")
    parser.add_argument("--out", type=Path, help="write executed copies and a summary here instead of in place")
    parser.add_argument("--profile", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds a cell may run (default 1800)")
    args = parser.parse_args(argv)
    os.environ.update(layout.CPU_ENV if args.profile == "cpu" else {"COURSE_PROFILE": "gpu"})
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(layout.ROOT), os.environ.get("PYTHONPATH")]))
    paths = [q for p in args.notebooks for q in (layout.notebooks_in(p) if p.is_dir() else [p])]
    if args.out:
        return report(paths or layout.notebooks(), args.out, args.profile, args.timeout)
    if not paths:
        parser.error("name the notebooks to execute in place (or --out DIR for a report)")
    for p in paths:
        r = run(p, p, args.timeout, keep_failed=False)
        print(f"{p}: {r['seconds']:.1f} s" + (f"; {r['error'][0]} at cell {r['error'][1]}: {r['error'][2]}; "
                                             "not saved" if r["error"] else ""), flush=True)
        if r["error"]:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
