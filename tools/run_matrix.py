"""Run strict nbval over the notebooks and solutions in several machine configurations and print a
table: configuration, cells passed / failed, wall time. `make matrix` runs all of them; pick some
with `--config NAME ...` and some notebooks with `--paths ...`.

The configurations are what instructors' machines differ in: the instruction set (AVX-512 or only
AVX2), the number of cores, and the number of threads PyTorch and XLA use. The script only sets
environment variables and CPU affinity (taskset); it writes a JUnit file per configuration under
--out and the table to --out/matrix.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from tools import catalog, course

ROOT = course.ROOT
AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "XLA_FLAGS": "--xla_cpu_max_isa=AVX2"}
XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


@dataclass
class Config:
    name: str
    what: str
    env: dict[str, str] = field(default_factory=dict)
    cores: str | None = None  # taskset CPU list; None: every core
    workers: int = 1  # pytest-xdist workers (notebooks stay whole: --dist loadscope)


CONFIGS = [
    Config("ci", "as CI runs it: all cores, default kernels and threads, 2 xdist workers", workers=2),
    Config("avx2-1core", "one core, AVX2-only kernels (a laptop without AVX-512)", AVX2, cores="0"),
    Config("threads-1", "all cores, 2 xdist workers; PyTorch and XLA held to 1 thread each",
           {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "XLA_FLAGS": XLA_ONE_THREAD}, workers=2),
    # XLA sizes its pool to the cores it may run on and has no flag to ask for more; PyTorch does.
    Config("threads-4", "all cores, 2 xdist workers; PyTorch asked for 4 threads each (oversubscribed), XLA its default",
           {"OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "4"}, workers=2),
]


def default_paths() -> list[str]:
    """Every lesson and solution, slowest first (catalog.toml), as `make nbval` runs them."""
    return catalog.order()


def command(cfg: Config, paths: list[str], junit: Path) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *course.NBVAL_FLAGS,
           f"--junitxml={junit}", *paths]
    if cfg.workers > 1:
        cmd[5:5] = ["-n", str(cfg.workers), "--dist", "loadscope", "--no-loadscope-reorder"]
    if cfg.cores is not None:
        if not shutil.which("taskset"):
            raise SystemExit(f"run_matrix: configuration {cfg.name!r} needs `taskset` (util-linux); install it "
                             "or leave the configuration out with --config")
        cmd = ["taskset", "-c", cfg.cores, *cmd]
    return cmd


def counts(junit: Path) -> tuple[int, int, int, list[str]]:
    """Passed, failed (failures + errors), skipped, and the failing test ids from a JUnit file."""
    if not junit.exists():
        return 0, 0, 0, ["(no JUnit report: pytest did not run)"]
    passed = failed = skipped = 0
    failing = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
            failing.append(f"{case.get('classname')}::{case.get('name')}")
        elif case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped, failing


def machine() -> str:
    """One line: CPU model, logical cores, and whether it has AVX-512 (Linux; elsewhere what platform knows)."""
    import platform
    from helpers.device import _cpu_info
    model, flags = _cpu_info()
    isa = "AVX-512" if "avx512f" in flags else "AVX2, no AVX-512" if "avx2" in flags else "instruction set not read"
    return f"{model}, {os.cpu_count()} logical cores, {isa}; Python {platform.python_version()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    names = [c.name for c in CONFIGS]
    parser.add_argument("--config", nargs="+", choices=names, default=names, help="configurations to run")
    parser.add_argument("--paths", nargs="+", help="notebooks to run (default: notebooks/ and solutions/)")
    parser.add_argument("--out", default="build/matrix", help="folder for the JUnit files and matrix.md")
    args = parser.parse_args()

    out = ROOT / args.out
    out.mkdir(parents=True, exist_ok=True)
    paths = args.paths or default_paths()
    rows = ["| configuration | what it is | cells passed | failed | wall time |", "| --- | --- | --- | --- | --- |"]
    all_green = True
    for cfg in (c for c in CONFIGS if c.name in args.config):
        junit = out / f"{cfg.name}.xml"
        junit.unlink(missing_ok=True)
        env = {**course.cpu_environ(), **cfg.env}
        print(f"== {cfg.name}: {cfg.what}", flush=True)
        start = time.perf_counter()
        subprocess.run(command(cfg, paths, junit), cwd=ROOT, env=env)
        wall = time.perf_counter() - start
        passed, failed, skipped, failing = counts(junit)
        all_green &= failed == 0 and passed > 0
        rows.append(f"| `{cfg.name}` | {cfg.what} | {passed} | {failed} | {wall / 60:.1f} min |")
        for test_id in failing:
            print(f"   failed: {test_id}")
    table = f"Machine: {machine()}\n\n" + "\n".join(rows)
    (out / "matrix.md").write_text(table + "\n")
    print(f"\n{len(paths)} notebooks, strict nbval\n{table}")
    return 0 if all_green else 1


if __name__ == "__main__":
    sys.exit(main())
