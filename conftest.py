"""pytest's setup for the whole repository: `make test`, `make unit`, and a reader's own
`pytest --nbval notebooks/jax/03_activation_checkpointing.ipynb` alike.

- The CPU reference: the committed outputs were recorded on a CPU at the cpu size profile, so tests and
  notebooks run with any GPU hidden and that profile (tools/layout.py's CPU_ENV), unless the caller set
  COURSE_PROFILE=gpu (the GPU job's `pytest -m gpu tests`).
- The exercises' own tests in nbval's run of solutions/: the re-run test and the wrong answers
  (tests/wrong_answers/plugin.py, beside the wrong answers' data).
- Longest first: pytest-xdist's workers take whole files (--dist loadscope --no-loadscope-reorder) in
  collection order, so the files are ordered by their seconds in tests/durations.json, the longest
  first, and the short ones fill the tail. `--record-durations` updates that file from the run.
- Under pytest-xdist each worker's kernels get their share of the cores as OpenMP threads (see below).
- A kernel that dies while it starts is started again (twice at most; tools/kernel_start.py): jupyter_client picks its TCP
  ports by asking the OS for free ones and then letting them go, so two xdist workers starting kernels
  at once can pick the same port, and the kernel dies before its first reply (nbval's setup error
  "Kernel died before replying to kernel_info", seen once on a fresh clone's make test). nbval has no
  retry of its own.
"""

from __future__ import annotations

import json
import os

from tools import kernel_start, layout

pytest_plugins = ["tests.wrong_answers.plugin", "pytester"]
DURATIONS = layout.ROOT / "tests" / "durations.json"

if os.environ.get("COURSE_PROFILE") != "gpu":
    os.environ.update(layout.CPU_ENV)


# Under pytest-xdist each worker's kernels get their share of the cores as OpenMP threads (at least 1), unless the
# caller set them: two workers whose PyTorch kernels each ask OpenMP for every core oversubscribe the machine, and
# OpenMP's spinning barriers then stall (on a loaded 2-core machine, four PyTorch notebooks under -n 2 took 163 and 174 s with the
# default threads, 111 and 125 s with one each). Results do not depend on the thread count (make matrix runs the
# notebooks at 1 and 4 threads); only the times do.
os.environ.update(layout.worker_threads(os.environ, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                                        else os.cpu_count() or 1))


def _start_kernel_again_if_it_dies():
    try:
        import nbval.kernel
    except ImportError:   # nbval not installed: nothing to start
        return
    nbval.kernel.start_new_kernel = kernel_start.retrying(nbval.kernel.start_new_kernel)


_start_kernel_again_if_it_dies()


def pytest_addoption(parser):
    parser.addoption("--record-durations", action="store_true",
                     help=f"write each file's seconds in this run to {layout.rel(DURATIONS)} (for the order of make test)")


def _file(nodeid: str) -> str:
    return nodeid.split("::")[0]


def pytest_collection_modifyitems(session, config, items):
    seconds = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    items.sort(key=lambda item: -seconds.get(_file(item.nodeid), 0))  # stable: a file's items stay together


_seconds: dict[str, float] = {}  # file -> seconds of its items' setup, call and teardown in this run


def pytest_runtest_logreport(report):
    _seconds[_file(report.nodeid)] = _seconds.get(_file(report.nodeid), 0.0) + report.duration


def pytest_sessionfinish(session):
    config = session.config
    if config.getoption("record_durations") and not hasattr(config, "workerinput"):  # xdist's controller
        seconds = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
        seconds |= {f: round(s) for f, s in _seconds.items()}   # a run of some files updates theirs only
        seconds = {f: s for f, s in sorted(seconds.items(), key=lambda kv: -kv[1]) if s >= 1}
        DURATIONS.write_text(json.dumps(seconds, indent=1) + "\n")
