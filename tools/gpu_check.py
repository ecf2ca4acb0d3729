"""Run every notebook and solution at the gpu size profile, each in a fresh kernel, and summarize.

    python -m tools.gpu_check [NOTEBOOK|FOLDER ...] [--only GLOB ...] [--out DIR] [--timeout SECONDS]
                              [--list] [--no-probe] [--record]

What `make gpu-check` runs. It needs the interpreter it runs under with torch, jax, optax, numpy,
matplotlib, nbclient and ipykernel (a GPU image without the last two: see the README). Each notebook
runs in a fresh kernel process of this interpreter (tools/execute.py: never a kernelspec found by
name) under a wall-clock limit, so a crash, a hang or a full GPU in one notebook cannot spoil the next.

- COURSE_PROFILE defaults to `gpu`; set it to run another profile (`make gpu-check-cpu` uses `cpu`).
  Whether outputs match the committed ones is strict nbval's question (`make nbval`), not this tool's.
- Results: DIR/<notebook path> (the executed copies: cells after a failure are left unrun),
  DIR/summary.md and DIR/summary.json (rewritten after every notebook, so an interrupted run still
  leaves one): the device, driver and versions, and per notebook its status, time, checks passed and
  skipped, and the first failing cell with its error. Exit status 1 when any notebook failed.
- --record writes the times of the notebooks that passed into catalog.toml (`gpu_s`), only for a run
  at the gpu profile on a GPU that nvidia-smi names.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import fnmatch
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import tomllib
from importlib import metadata
from pathlib import Path

import nbformat
from nbclient.exceptions import CellExecutionError, DeadKernelError

from tools import catalog, course, execute

ROOT = course.ROOT
TOOL = "tools/gpu_check.py"
REPORTED = ("torch", "jax", "jaxlib", "optax", "numpy", "matplotlib", "nbclient", "ipykernel")
CUDA_PLUGINS = ("jax-cuda12-plugin", "jax-cuda12-pjrt", "jax-cuda13-plugin", "jax-cuda13-pjrt")
CHECK_PASSED, CHECK_SKIPPED = "check passed:", "check skipped:"
PASSED, FAILED, TIMED_OUT, CRASHED = "passed", "failed", "timed out", "crashed"
MARKS = {PASSED: "PASS", FAILED: "FAIL", TIMED_OUT: "TIME", CRASHED: "CRSH"}
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
PROBE = """if True:
    import json
    report = {}
    try:
        import torch
        ok = torch.cuda.is_available()
        report["torch"] = {"cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0) if ok else "cpu"}
    except Exception as e:
        report["torch"] = {"error": f"{type(e).__name__}: {e}"}
    try:
        import jax
        report["jax"] = {"backend": jax.default_backend(), "devices": [str(d) for d in jax.devices()]}
    except Exception as e:
        report["jax"] = {"error": f"{type(e).__name__}: {e}"}
    try:
        import helpers
        report["profile"] = helpers.profile()
    except Exception as e:
        report["profile"] = f"error: {type(e).__name__}: {e}"
    print(json.dumps(report))
"""


# ------------------------------------------------------------------------------- what to run

def select_notebooks(paths: list[str], only: list[str]) -> list[Path]:
    """Positional paths (files or folders) or every lesson and solution, filtered by --only globs."""
    chosen = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            chosen += course.notebooks_in(path)
        elif path.exists():
            chosen.append(path)
        else:
            raise SystemExit(f"gpu_check: no such notebook: {p}")
    chosen = list(dict.fromkeys(p.resolve() for p in chosen or course.notebooks()))
    globs = [g for item in only for g in item.split(",") if g]
    return [p for p in chosen if not globs or any(fnmatch.fnmatch(shown(p), g) or fnmatch.fnmatch(p.name, g)
                                                  for g in globs)]


def shown(path: Path) -> str:
    """The path shown in the summary and used under the output folder (repository-relative if possible)."""
    for base in (ROOT, Path.cwd()):
        try:
            return path.resolve().relative_to(base.resolve()).as_posix()
        except ValueError:
            continue
    return "external/" + path.name


# ------------------------------------------------------------------------------- one notebook

def count_checks(cells: list) -> tuple[int, int]:
    """(check passed, check skipped) lines that hp.check and hp.cannot_check printed in these cells' streams."""
    passed = skipped = 0
    for cell in cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                lines = course.source({"source": out.get("text", "")}).splitlines()
                passed += sum(line.startswith(CHECK_PASSED) for line in lines)
                skipped += sum(line.startswith(CHECK_SKIPPED) for line in lines)
    return passed, skipped


def first_line(source: str) -> str:
    return next((line.strip() for line in source.splitlines() if line.strip()), "")


async def _execute(client, timeout: float) -> None:
    """Run the notebook; past the wall-clock limit cancel it (nbclient's cleanup kills the kernel) and
    raise TimeoutError, whatever the cancelled run raised meanwhile (a kernel it saw die, say)."""
    task = asyncio.ensure_future(client.async_execute())
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if not done:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise TimeoutError
    task.result()


def run_notebook(path: Path, out_dir: Path, timeout: float) -> dict:
    """Execute one notebook in a fresh kernel; write its executed copy; return its record."""
    nb = nbformat.read(path, as_version=4)
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    for i in code:  # a cell the run does not reach shows no committed output
        nb.cells[i].outputs, nb.cells[i].execution_count = [], None
    running: list[int] = []
    client = execute.client(nb, path.parent.resolve(), timeout=None, shutdown_kernel="immediate",
                            on_cell_execute=lambda cell, cell_index: running.append(cell_index))
    status, error, started = PASSED, None, time.perf_counter()
    try:
        asyncio.run(_execute(client, timeout))
    except CellExecutionError as e:
        status, error = FAILED, (e.ename, e.evalue)
    except TimeoutError:
        status, error = TIMED_OUT, ("Timeout", f"timed out after {timeout:g} s (the per-notebook limit); kernel stopped")
    except DeadKernelError:
        status, error = CRASHED, ("DeadKernelError", "the kernel died while running this cell")
    seconds = time.perf_counter() - started
    ran = [nb.cells[i] for i in code if nb.cells[i].execution_count is not None or i in running]
    record = {"path": shown(path), "status": status, "seconds": round(seconds, 1), "failure": None,
              "code_cells": len(code), "cells_run": len(ran)}
    record["checks_passed"], record["checks_skipped"] = count_checks(ran)
    if error:
        index = running[-1] if running else None
        cell = nb.cells[index] if index is not None else None
        if cell is not None and status != FAILED:  # the error nbclient could not record, on the cell it stopped
            cell.outputs.append(nbformat.v4.new_output("error", ename=error[0], evalue=error[1], traceback=[]))
        tb = next((o.get("traceback", []) for o in (cell.outputs if cell else []) if o.output_type == "error"), [])
        record["failure"] = {"kind": {FAILED: "error", TIMED_OUT: "timeout", CRASHED: "crash"}[status],
                             "cell": code.index(index) if index is not None else None, "cell_index": index,
                             "first_line": first_line(cell.source) if cell else "", "ename": error[0],
                             "evalue": error[1], "traceback_tail": [l for l in ANSI.sub("", "\n".join(tb)).splitlines()
                                                                    if l.strip()][-8:]}
    target = out_dir / record["path"]
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    record["executed"] = record["path"]
    return record


# ------------------------------------------------------------------------------- the environment

def pins() -> dict[str, str]:
    """name -> pinned version, from every `name==version` requirement of pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text()).get("project", {})
    found = {}
    for req in project.get("dependencies", []) + [r for v in project.get("optional-dependencies", {}).values() for r in v]:
        m = re.match(r"\s*([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*==\s*([^;\s]+)", req)
        if m:
            found[m.group(1).lower()] = m.group(2)
    return found


def version_status(used: str | None, pin: str | None) -> str:
    if used is None:
        return "not installed"
    if pin is None:
        return "not pinned"
    if used == pin:
        return "as pinned"
    public, _, local = used.partition("+")
    return f"as pinned (local build +{local})" if public == pin else f"differs from the pin {pin}"


def installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def nvidia_smi() -> dict:
    """GPU name, driver and memory, and the CUDA version the driver supports, as nvidia-smi says."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {"gpus": [], "note": "nvidia-smi not found"}
    try:
        query = subprocess.run([exe, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=60)
        cuda = re.search(r"CUDA Version:\s*([\d.]+)", subprocess.run([exe], capture_output=True, text=True,
                                                                      timeout=60).stdout)
    except (OSError, subprocess.SubprocessError) as e:
        return {"gpus": [], "note": f"nvidia-smi failed: {e}"}
    gpus = [dict(zip(("name", "driver", "memory"), (x.strip() for x in line.split(","))))
            for line in query.stdout.splitlines() if line.strip()]
    return {"gpus": gpus, "cuda": cuda.group(1) if cuda else None,
            "note": "" if query.returncode == 0 else (query.stderr or query.stdout).strip()[:300]}


def cpu_name() -> str:
    from helpers.device import _cpu_info
    return _cpu_info()[0]


def describe_environment(probe_devices: bool) -> dict:
    """Device, interpreter and versions; with probe_devices, a child imports torch, jax and helpers (the
    notebooks' environment) and says which devices and profile they see."""
    probe = {"note": "devices not probed (--no-probe)"}
    if probe_devices:
        try:
            done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=600,
                                  cwd=ROOT, env=dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false"))
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            probe = json.loads(lines[-1]) if lines else {"error": (done.stderr or done.stdout).strip()[-500:]}
        except (OSError, subprocess.SubprocessError, ValueError) as e:
            probe = {"error": str(e)}
    pinned = pins()
    versions = {n: {"used": installed(n), "pin": pinned.get(n)} for n in REPORTED}
    versions |= {n: {"used": installed(n), "pin": None} for n in CUDA_PLUGINS if installed(n)}
    for v in versions.values():
        v["status"] = version_status(v["used"], v["pin"])
    return {"device": nvidia_smi(), "cpu": f"{cpu_name()} ({os.cpu_count()} logical cores)",
            "platform": platform.platform(), "python": platform.python_version(), "executable": sys.executable,
            "probe": probe, "versions": versions,
            "versions_differ": sorted(n for n, v in versions.items() if v["status"].startswith(("differs", "not inst")))}


def header(env: dict) -> str:
    """One line: the device, the driver, the interpreter and the versions that ran."""
    dev = env["device"]
    gpus = ", ".join(f"{g['name']} (driver {g.get('driver')})" for g in dev["gpus"]) or f"no NVIDIA GPU ({dev['note']})"
    cuda = f", CUDA {dev['cuda']}" if dev.get("cuda") else ""
    versions = ", ".join(f"{n} {v['used'] or '-'}" for n, v in env["versions"].items())
    return f"gpu_check: device {gpus}{cuda}; python {env['python']} ({env['executable']}); {versions}"


# ------------------------------------------------------------------------------- the summary

def fmt_seconds(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes} min {rest:02d} s"


def _cell(text) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def describe_failure(f: dict) -> str:
    where = f"cell {f['cell']} (`{f['first_line'][:60]}`)" if f["cell"] is not None else "before the first cell"
    return f"{where}: {f['ename']}: {f['evalue']}"


def console_line(position: str, r: dict) -> str:
    line = (f"{position} {MARKS[r['status']]}  {r['path']}  {fmt_seconds(r['seconds'])}  "
            f"checks {r['checks_passed']} passed, {r['checks_skipped']} skipped")
    return line + (f"\n        {_cell(describe_failure(r['failure']))[:300]}" if r["failure"] else "")


def summary_markdown(s: dict) -> str:
    env, c = s["environment"], s["counts"]
    state = "" if s["complete"] else " **(incomplete: the run was interrupted or is still going)**"
    lines = ["# gpu-check summary", "",
             f"Run {s['started']}, size profile `{s['profile']}`, timeout {s['timeout_s']:g} s per notebook.{state}", "",
             f"**{c['passed']} of {c['notebooks']} notebooks passed** ({c['failed']} failed); checks: "
             f"{c['checks_passed']} passed, {c['checks_skipped']} skipped; wall time {fmt_seconds(s['wall_seconds'])}.",
             "", "## Environment", "", "| | |", "|---|---|"]
    dev = env["device"]
    for g in dev["gpus"]:
        lines.append(f"| GPU (nvidia-smi) | {_cell(g['name'])}, {_cell(g.get('memory', ''))}, driver "
                     f"{_cell(g.get('driver'))}, CUDA {dev.get('cuda')} |")
    if not dev["gpus"]:
        lines.append(f"| GPU (nvidia-smi) | none ({_cell(dev['note'])}) |")
    probe = env["probe"]
    torch_, jax_ = probe.get("torch", {}), probe.get("jax", {})
    lines += [f"| CPU | {_cell(env['cpu'])} |"]
    if torch_:
        lines.append(f"| torch sees | {_cell(torch_.get('error') or torch_['device'])}"
                     f"{', built for CUDA ' + str(torch_['cuda']) if torch_.get('cuda') else ''} |")
    if jax_:
        lines.append(f"| jax sees | {_cell(jax_.get('error') or 'backend ' + jax_['backend'] + ': ' + ', '.join(jax_['devices']))} |")
    lines += [f"| {k} | {_cell(probe[k])} |" for k in ("profile", "note", "error") if probe.get(k)]
    lines += [f"| Python | {env['python']} ({_cell(env['executable'])}) |", f"| platform | {_cell(env['platform'])} |",
              "", "| package | version that ran | pinned in pyproject.toml | |", "|---|---|---|---|"]
    lines += [f"| {n} | {v['used'] or '-'} | {v['pin'] or '-'} | {v['status']} |" for n, v in env["versions"].items()]
    differ = env["versions_differ"]
    lines += ["", "Versions differ from the pins (or are not installed) for: " + ", ".join(differ) + "." if differ
              else "Every reported package ran at its pinned version.",
              "", "## Notebooks", "", "| notebook | result | time | checks passed | checks skipped | first failing cell | error |",
              "|---|---|---|---|---|---|---|"]
    for r in s["notebooks"]:
        f = r["failure"] or {}
        where = (f"{f['cell']}: `{_cell(f['first_line'])[:60]}`" if f.get("cell") is not None else "-") if f else ""
        error = _cell(f"{f['ename']}: {f['evalue']}")[:200] if f else ""
        lines.append(f"| [{r['path']}]({r['executed']}) | {r['status']} | {fmt_seconds(r['seconds'])} | "
                     f"{r['checks_passed']} | {r['checks_skipped']} | {where} | {error} |")
    failing = [r for r in s["notebooks"] if r["failure"]]
    lines += ["", "## Failures", ""] if failing else []
    for r in failing:
        lines += [f"### {r['path']}", "", f"{r['status']} at {describe_failure(r['failure'])}", ""]
        if r["failure"]["traceback_tail"]:
            lines += ["```", *r["failure"]["traceback_tail"], "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def write_summary(out_dir: Path, summary: dict) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    (out_dir / "summary.md").write_text(summary_markdown(summary), encoding="utf-8")


def clear_previous_run(out_dir: Path) -> None:
    """Remove what the last run in this folder wrote (listed in its summary.json), nothing else."""
    try:
        old = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if old.get("tool") != TOOL:
        return
    for r in old.get("notebooks", []):
        target = (out_dir / r.get("executed", "")).resolve()
        if out_dir.resolve() in target.parents and target.suffix == ".ipynb":
            target.unlink(missing_ok=True)
    for name in ("summary.json", "summary.md"):
        (out_dir / name).unlink(missing_ok=True)


# ------------------------------------------------------------------------------- main

def list_notebooks(notebooks: list[Path], profile: str) -> None:
    """What would run, with the run time catalog.toml has for this profile."""
    key = "gpu_s" if profile == "gpu" else "cpu_s"
    known = {n.path: getattr(n, key) for n in catalog.notebooks()}
    total = [known[shown(p)] for p in notebooks if known.get(shown(p)) is not None]
    for p in notebooks:
        t = known.get(shown(p))
        print(f"{shown(p):<60} {'~' + fmt_seconds(t) if t is not None else 'not measured'}")
    print(f"{len(notebooks)} notebooks, profile {profile}; ~{fmt_seconds(sum(total))} for the {len(total)} "
          f"with a measured time (catalog.toml, {key})")


def record_times(summary: dict) -> None:
    if summary["profile"] != "gpu" or not summary["environment"]["device"]["gpus"]:
        print("gpu_check: --record writes GPU run times only for a run at the gpu profile on a GPU; nothing recorded",
              file=sys.stderr)
        return
    for r in summary["notebooks"]:
        if r["status"] == PASSED and catalog.record_gpu_time(r["path"], r["seconds"]):
            print(f"gpu_check: recorded {r['path']}: {fmt_seconds(r['seconds'])} in catalog.toml")
    catalog.write_tables()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.gpu_check", description=__doc__.split("\n\n")[0],
                                     epilog="Example: make gpu-check PYTHON=python ARGS=\"--only 'notebooks/jax/*'\"")
    parser.add_argument("notebooks", nargs="*", help="notebooks or folders (default: every lesson and solution)")
    parser.add_argument("--only", action="append", default=[], metavar="GLOB",
                        help="keep notebooks whose repository path or file name matches (repeatable, comma-separated)")
    parser.add_argument("--out", default="gpu-check", help="output folder (default gpu-check/)")
    parser.add_argument("--timeout", type=float, default=1800, help="wall-clock seconds per notebook (default 1800)")
    parser.add_argument("--list", action="store_true", help="list what would run, with its measured times, and exit")
    parser.add_argument("--no-probe", action="store_true", help="don't import torch and jax in a child to report devices")
    parser.add_argument("--record", action="store_true", help="write the passed notebooks' times into catalog.toml (gpu_s)")
    args = parser.parse_args(argv)
    notebooks = select_notebooks(args.notebooks, args.only)
    if not notebooks:
        print("gpu_check: no notebook selected", file=sys.stderr)
        return 2
    os.environ["COURSE_PROFILE"] = profile = os.environ.get("COURSE_PROFILE") or "gpu"
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    if args.list:
        list_notebooks(notebooks, profile)
        return 0
    out_dir = Path(args.out)
    env = describe_environment(probe_devices=not args.no_probe)
    print(f"gpu_check: {len(notebooks)} notebooks, profile {profile}; results in {out_dir}/\n{header(env)}", flush=True)
    clear_previous_run(out_dir)
    started = time.perf_counter()
    summary = {"tool": TOOL, "format": 2, "complete": False, "profile": profile, "timeout_s": args.timeout,
               "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
               "environment": env, "wall_seconds": 0.0, "counts": {}, "notebooks": []}

    def update(complete: bool) -> None:
        rs = summary["notebooks"]
        summary.update(complete=complete, wall_seconds=round(time.perf_counter() - started, 1), counts={
            "notebooks": len(notebooks) if complete else len(rs), "passed": sum(r["status"] == PASSED for r in rs),
            "failed": sum(r["status"] != PASSED for r in rs), "checks_passed": sum(r["checks_passed"] for r in rs),
            "checks_skipped": sum(r["checks_skipped"] for r in rs)})
        write_summary(out_dir, summary)

    try:
        for i, path in enumerate(notebooks, 1):
            summary["notebooks"].append(run_notebook(path, out_dir, args.timeout))
            print(console_line(f"[{i:>{len(str(len(notebooks)))}}/{len(notebooks)}]", summary["notebooks"][-1]), flush=True)
            update(complete=False)
    except KeyboardInterrupt:
        update(complete=False)
        print("gpu_check: interrupted; the summary lists the notebooks that finished", file=sys.stderr)
        return 130
    update(complete=True)
    c = summary["counts"]
    print(f"gpu_check: {c['passed']} of {len(notebooks)} notebooks passed; checks {c['checks_passed']} passed, "
          f"{c['checks_skipped']} skipped; wall time {fmt_seconds(summary['wall_seconds'])}; "
          f"summary: {out_dir / 'summary.md'}", flush=True)
    if args.record:
        record_times(summary)
    return 0 if c["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
