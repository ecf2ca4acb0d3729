"""Strict nbval in the machine configurations instructors' machines differ in (instruction set, cores,
threads): one pytest run per configuration, with pytest's own summary line for each.

    python -m tools.run_matrix [--config NAME ...] [--paths NOTEBOOK ...]   # make matrix ARGS=...
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from tools import layout

AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "XLA_FLAGS": "--xla_cpu_max_isa=AVX2"}
XDIST = ["-n", "2", "--dist", "loadscope", "--no-loadscope-reorder"]
# name: (what it is, environment, command prefix, pytest-xdist options)
CONFIGS = {
    "ci": ("as CI runs it: all cores, default kernels, each xdist worker its share of the threads", {}, [], XDIST),
    "avx2-1core": ("one core, AVX2-only kernels (a laptop without AVX-512)", AVX2, ["taskset", "-c", "0"], []),
    "threads-1": ("PyTorch and XLA held to 1 thread each",
                  {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                   "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}, [], XDIST),
    # XLA sizes its pool to the cores it may run on and has no flag to ask for more; PyTorch does.
    "threads-4": ("PyTorch asked for 4 threads each (oversubscribed), XLA its default",
                  {"OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "4"}, [], XDIST),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--paths", nargs="+", default=["notebooks", "solutions"], help="notebooks or folders")
    args = parser.parse_args(argv)
    failed = []
    for name in args.config:
        what, env, prefix, xdist = CONFIGS[name]
        print(f"== {name}: {what}", flush=True)
        done = subprocess.run([*prefix, sys.executable, "-m", "pytest", "-q", *xdist, "--nbval", *args.paths],
                              cwd=layout.ROOT, env={**layout.cpu_environ(), **env})
        if done.returncode:
            failed.append(name)
    print(f"run_matrix: {len(args.config) - len(failed)} of {len(args.config)} configurations passed"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
