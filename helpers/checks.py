"""Assert the lessons: every claim a notebook makes in prose is checked where it is made; and check an
exercise's answer without showing it (check_answer compares a salted hash)."""

from __future__ import annotations

import _thread
import functools
import hashlib
import inspect
import os
import sys
import threading
import types
from collections.abc import Callable, Iterable


class ClaimFailed(AssertionError):
    """A claim of the course does not hold on this device."""


def _truth(name: str, condition: object) -> bool:
    """The Python bool of a bool, a numpy bool, or a 0-d boolean numpy/torch/JAX array; else TypeError."""
    if isinstance(condition, bool):
        return condition
    # Only look at frameworks the caller already imported: checking a claim never imports torch or JAX.
    np, torch, jax = (sys.modules.get(m) for m in ("numpy", "torch", "jax"))
    if np is not None and isinstance(condition, np.bool_):  # numpy 2 names this type `bool`
        return bool(condition)
    if np is not None and isinstance(condition, np.ndarray):
        is_bool, shape = condition.dtype == np.bool_, condition.shape
    elif torch is not None and isinstance(condition, torch.Tensor):
        is_bool, shape = condition.dtype == torch.bool, tuple(condition.shape)
    elif jax is not None and isinstance(condition, jax.Array):
        is_bool, shape = condition.dtype == bool, condition.shape
    else:
        is_bool, shape = False, None
    if is_bool and shape == ():
        return bool(condition)
    what = type(condition).__name__
    if shape is not None:
        what += f" of dtype {condition.dtype} and shape {shape}"  # type: ignore[attr-defined]
    raise TypeError(
        f"check({name!r}) needs a bool condition, got {what}; "
        "compare explicitly (e.g. `a < b`) instead of passing a number or tensor"
        + (", and reduce an array to one bool first (e.g. `(a < b).all()`)" if shape not in (None, ()) else "")
    )


def check(name: str, condition: bool, detail: str = "") -> None:
    """Raise ClaimFailed(name: detail) if condition is false, else print one 'check passed' line."""
    if not _truth(name, condition):
        raise ClaimFailed(f"claim does not hold on this device: {name}" + (f" ({detail})" if detail else ""))
    print(f"check passed: {name}" + (f" ({detail})" if detail else ""))


def cannot_check(name: str, why: str) -> None:
    """Say that a claim cannot be checked on this device, and why (never silently): prints
    'check skipped: name (why)'."""
    if not why:
        raise ValueError(f"cannot_check({name!r}) needs a reason: say why the claim cannot be checked here")
    print(f"check skipped: {name} ({why})")


class WrongAnswer(AssertionError):
    """An exercise's answer is not the expected one (yet)."""


def _canonical(value: object) -> str:
    """A text form of an answer that does not depend on its type's details: 2048 and 2048.0 read the
    same, other floats keep 6 significant digits, lists and tuples read alike, sets and dicts sorted."""
    if getattr(value, "shape", None) == () and hasattr(value, "item"):
        value = value.item()  # a 0-d numpy, torch or JAX value
    if value is None or isinstance(value, (bool, str)):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 2**53 else format(value, ".6g")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_canonical(v) for v in value) + "]"
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(_canonical(v) for v in value)) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(sorted(f"{_canonical(k)}: {_canonical(v)}" for k, v in value.items())) + "}"
    raise TypeError(f"an answer must be a number, bool, string or None, or a list, tuple, set or dict of "
                    f"them; got {type(value).__name__}: convert it first (e.g. int(x), x.item(), list(x))")


def _digest(name: str, value: object) -> str:
    return hashlib.sha256(f"memory-course|{name}|{_canonical(value)}".encode()).hexdigest()[:16]


# A check is not a search: per answer name, the digests of the distinct values asked about in this kernel that
# are not a digest a check expects (_EXPECTED), and the names refused until the kernel restarts (_REFUSED).
# 6: more different answers than an honest student tries for one answer before working it out again (the
# trials t19ex16 and t19ex19 tried at most 3), and few enough that a loop over a domain of more than 7 values
# (a bit width, a step's index) is refused before it has covered it.
_ANSWER_TRIES = 6
_TRIED: dict[str, set[str]] = {}
_EXPECTED: dict[str, set[str]] = {}
_REFUSED: set[str] = set()


def _salted(name: str) -> bool:
    """A name salted afresh in each kernel (secrets.token_hex(8) first), as a check that keeps a measured figure's
    digest in a closure makes: no source shows its digest, and the check may compare several values under it
    (exercise 2's tolerance), so it is not counted."""
    return len(name) >= 16 and name[16:17] in ("", " ") and all(c in "0123456789abcdef" for c in name[:16])


def _tried(name: str, digest: str, author: bool = False) -> None:
    """Count the value whose digest is `digest` against `name` (the first value asked about a new name by
    answer_digest is the author's: free); raise WrongAnswer once past _ANSWER_TRIES."""
    if _salted(name):
        return
    if author and name not in _TRIED and name not in _EXPECTED:
        _EXPECTED[name] = {digest}
    if name not in _REFUSED and digest not in _EXPECTED.get(name, ()):
        _TRIED.setdefault(name, set()).add(digest)
        if len(_TRIED[name]) > _ANSWER_TRIES:
            _REFUSED.add(name)
    if name in _REFUSED:
        # no count in the message: a count could read as an answer (ex19's 7 micro-batches did)
        raise WrongAnswer(f"{name}: too many different answers were tried in this kernel: a check is "
                          "not a search; restart the kernel, work the answer out, then run the check")


def _forget_answers() -> None:
    """What a kernel restart does to the answers check_answer and answer_digest counted: for the wrong answers'
    test harness (tests/wrong_answers/plugin.py), as _forget_calls is. Never called by a notebook."""
    _TRIED.clear()
    _EXPECTED.clear()
    _REFUSED.clear()


def answer_digest(name: str, value: object, expected: str | None = None) -> str:
    """The salted hash of an answer that check_answer(name, ...) compares with (for writing a check: one
    digest per name). Like check_answer, it refuses a name for which more than _ANSWER_TRIES different
    values, none a check's expected one, were asked about in this kernel.

    A check that compares the digest itself, to word its own message, passes the digest it expects as
    `expected`: it is registered as check_answer registers its own, so only a value other than the answer
    counts (without it, the first value asked about a new name is taken for the author's and is free, and the
    right answer, asked about later, counts as a try)."""
    digest = _digest(name, value)
    if expected:
        _EXPECTED.setdefault(name, set()).add(expected)
    _tried(name, digest, author=True)
    return digest


def _rounded(value: object, tolerance: float) -> object:
    """value with each number in it (in lists, tuples, sets, dict values) as a count of `tolerance`s, rounded."""
    if getattr(value, "shape", None) == () and hasattr(value, "item"):
        value = value.item()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return round(value / tolerance)
    if isinstance(value, (list, tuple)):
        return [_rounded(v, tolerance) for v in value]
    if isinstance(value, (set, frozenset)):
        return {_rounded(v, tolerance) for v in value}
    if isinstance(value, dict):
        return {k: _rounded(v, tolerance) for k, v in value.items()}
    return value


# A check's own measurements, by a digest of what each measures: measured once per kernel (a restart forgets them).
_MEASURED: dict[str, object] = {}


def _measured_once(what: str, key: object, measure: Callable[[], object]) -> object:
    """What measure() returns, measured once per kernel for `what` and `key` (the repr of everything the
    measurement depends on: the configuration, the switches, the batch's bytes, the device): a measurement that
    wrong answers, re-runs and the harness's restores run again and again is made once (exercise 17: its given
    measurements, and the steps its part 2's check measures). Private, as what a check measures is its own: out of
    the notebook's globals and of any closure the notebook holds. The caller copies what it may change."""
    digest = hashlib.sha256(f"{what}|{key!r}".encode()).hexdigest()
    if digest not in _MEASURED:
        _MEASURED[digest] = measure()
    return _MEASURED[digest]


def count_try(name: str, value: object, tolerance: float | None = None, *, passed: bool = False) -> None:
    """Count a missed answer of a check that compares with a tolerance (not a digest) as check_answer counts its
    wrong values: past _ANSWER_TRIES different missed values for `name` in a kernel it raises WrongAnswer and
    refuses `name` until the kernel restarts, passed or not. A passed value (passed=True) is never counted.
    With `tolerance`, values are told apart by each number's count of tolerances, rounded: a value nudged by
    less than the tolerance is the same try, as it is the same answer to the check; without it, by their
    canonical form (as check_answer's values)."""
    if passed and name not in _REFUSED:
        return
    _tried(name, _digest(name, value if tolerance is None else _rounded(value, tolerance)))


def check_answer(name: str, value: object, digest: str | tuple[str, ...], hint: str = "",
                 show_value: bool = True) -> None:
    """Raise WrongAnswer(name, hint) unless answer_digest(name, value) is digest, else print one line.

    The expected answer appears only as its hash salted with `name`, so a student can check an answer
    without reading it. Round a float to the precision the question asks for before passing it. A question
    with two defensible answers passes a tuple of their digests: either passes, and neither counts as a try.
    show_value=False for an answer from a few small values (a count from 1 to 6), which a student could
    find by trying them in turn: the message then repeats neither the value tried nor "not ... yet", and
    the hint should say what to count. Past _ANSWER_TRIES different wrong values for one name in a kernel it
    refuses that name until the kernel restarts (a loop over the values is not the work)."""
    digests = (digest,) if isinstance(digest, str) else tuple(digest)
    if not name or not digests or not all(digests):
        raise ValueError("check_answer needs the answer's name and its digest: "
                         "digest = hp.answer_digest(name, expected_value)")
    _EXPECTED.setdefault(name, set()).update(digests)
    yours = _digest(name, value)
    _tried(name, yours)
    if yours not in digests:
        if not show_value:
            raise WrongAnswer(f"{name} is not what the question asks for" + (f". Hint: {hint}" if hint else ""))
        shown = _canonical(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise WrongAnswer(f"{name}: {shown} is not the expected answer yet" + (f". Hint: {hint}" if hint else ""))
    print(f"check passed: {name}")


def _code_names(code: object) -> set[str]:
    """The global names a code object and the code nested in it (lambdas, inner functions) read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _code_names(const)
    return names


def _built_on(obj: object, classes: dict[type, str]) -> str | None:
    """The name of a blocked helper class that `obj` is built on (a subclass of it) or is an instance of."""
    for cls, name in classes.items():
        try:
            if (isinstance(obj, type) and issubclass(obj, cls)) or isinstance(obj, cls):
                return name
        except Exception:  # an object whose __class__ cannot be read holds no helper
            pass
    return None


def _holds(obj: object, blocked: dict[int, str], seen: set[int], depth: int = 0,
           classes: dict[type, str] | None = None) -> str | None:
    """The name of a blocked helper that `obj` is or keeps out of the modules' namespaces: a partial's
    function, a wrapper's __wrapped__ (functools.lru_cache, functools.wraps), a container's item, a
    subclass or an instance of a blocked class, or, for a function of one's own, its defaults, closure
    cells and the globals it reads (recursively); else None. Modules are left out: run() patches their
    namespaces."""
    if id(obj) in blocked:
        return blocked[id(obj)]
    built_on = _built_on(obj, classes or {})
    if built_on:
        return built_on
    if depth > 6 or id(obj) in seen or isinstance(obj, (type(sys), type, str, bytes, int, float)):
        return None
    seen.add(id(obj))
    inner: list[object] = []
    if isinstance(obj, functools.partial):
        inner = [obj.func, *obj.args, *obj.keywords.values()]
    elif isinstance(obj, (list, tuple, set, frozenset)):
        inner = list(obj)
    elif isinstance(obj, dict):
        inner = list(obj.values())
    elif hasattr(obj, "__func__"):  # a bound method
        inner = [obj.__func__, obj.__self__]
    elif hasattr(obj, "__code__") and not (getattr(obj, "__module__", None) or "").startswith(  # None: made by exec
            __name__.rpartition(".")[0]):
        space = getattr(obj, "__globals__", {})
        inner = [*(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values(),
                 *_cells(obj),
                 *(space[n] for n in _code_names(obj.__code__) if n in space)]
    try:  # a cache keeps the helper's results: a call it answers from them never reaches the helper
        wrapped = vars(obj).get("__wrapped__") if hasattr(obj, "__dict__") else None
    except TypeError:
        wrapped = None
    if wrapped is not None:
        inner.append(wrapped)
    for item in inner:
        found = _holds(item, blocked, seen, depth + 1, classes)
        if found:
            return found
    return None


def _cells(fn: object) -> list[object]:
    """The contents of a function's closure cells, leaving out a cell still empty."""
    out = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:
            pass
    return out


# While a check runs a student's function, each blocked helper that is a plain function runs this code in
# place of its own (its __code__ is swapped), so a call reaches the refusal however the student kept the
# function: a class attribute, a ufunc (np.frompyfunc), a cache on a miss, anything that calls it. It has no
# free variables, so it fits any function without a closure, and it finds its refusal by the helper's name.
_REFUSALS: dict[str, Callable] = {}
_REFUSED_CODE = compile(f"def refused(*args, **kwargs):\n"
                        f"    return __import__('sys').modules[{__name__!r}]._REFUSALS[__import__('sys')._getframe()"
                        f".f_code.co_name](*args, **kwargs)\n", __file__, "exec").co_consts[0]


# While a check runs a student's function, starting a program is refused too: a helper run in another interpreter
# is out of reach of the patches above. Python's audit events see each route that starts one (a reference to
# os.system kept from before included); multiprocessing's spawn and forkserver methods start theirs with no event,
# so Process.start itself is refused. The hook cannot be removed: it is added on the first check or watch, and refuses
# only while _NO_PROGRAMS holds the (part, hint, refusals fired) of a check in progress (the innermost last). While a
# watch runs (watch_helpers), a program started counts as a watched call instead (_STARTED), for the same reason.
_PROGRAM_EVENTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
                   "os.startfile")
_PROGRAM_EVENT_SET = frozenset(_PROGRAM_EVENTS)
_NO_PROGRAMS: list[tuple[str, str, list]] = []
_HOOKED: list[bool] = []
# how each program started while a watch ran, no check having passed since (assert_helpers_unused reports it)
_STARTED: list[str] = []


def _program_refused(how: str) -> WrongAnswer:
    part, hint, fired = _NO_PROGRAMS[-1]
    fired.append(WrongAnswer(f"{part}: your code starts another program ({how}) while the check runs it: the function "
                             f"must compute its answer itself, not start a program to compute it. Hint: {hint}"))
    return fired[-1]


def _refuse_programs(event: str, args: tuple) -> None:  # the audit hook, called on every audit event
    if event in _PROGRAM_EVENT_SET:
        if _NO_PROGRAMS:
            raise _program_refused(event)
        if _WATCHED and not _own_program():
            _STARTED.append(event)
    elif _WATCHED and event in _MEMORY_EVENTS:
        what = _memory_read(event, args)
        if what is not None and not _kernel_s_own_read():
            ProcessMemory.read(what)


# Reading the process's memory use measures what a step keeps as well as a tracer does, with no tool of the watch:
# the resident size before and after `del out` (trial t25ex20 F1, /proc/self/statm; psutil reads the same files). The
# audit hook above sees every such read, whatever opens the file (open, os.open, pathlib, psutil) or reaches C's
# allocator statistics (ctypes), and hands it to ProcessMemory.read, which hp.measuring_tools lists in either
# framework: a watch counts it as a call of a measuring tool. resource.getrusage, which raises no audit event, is
# watched by name there.
_MEMORY_EVENTS = frozenset(("open", "ctypes.dlsym"))
_MEMORY_FILES = frozenset(("status", "statm", "stat", "smaps", "smaps_rollup", "maps", "numa_maps", "pagemap"))
_MEMORY_SYMBOLS = frozenset(("mallinfo", "mallinfo2", "malloc_stats", "malloc_info", "getrusage", "sysinfo"))


class ProcessMemory:
    """A read of this process's memory use, as a watch counts it: an open of the process's own /proc folder or of
    its memory files (status, statm, stat, smaps, smaps_rollup, maps, numa_maps, pagemap; a thread's too), of
    /proc/meminfo or of a cgroup's memory.* files, or C's allocator statistics or getrusage reached through ctypes,
    by code other than the kernel's and the course's own. Python's audit hook calls read for each while a watch
    runs; hp.measuring_tools lists it, so the watch counts the call."""

    def read(what: str) -> None:  # called on the class, by the audit hook: no instance
        """One read of the process's memory use, through `what` (the file, or the C function)."""


def _memory_read(event: str, args: tuple) -> str | None:
    """The file or C function through which an audit event reads this process's memory use, else None."""
    if event == "ctypes.dlsym":
        return args[1] if len(args) > 1 and args[1] in _MEMORY_SYMBOLS else None
    path = args[0] if args else None
    if not isinstance(path, (str, bytes)):
        try:
            path = os.fspath(path)  # a pathlib.Path; an int is a file already open
        except TypeError:
            return None
    path = os.fsdecode(path)
    if not path.startswith("/"):
        path = os.path.join(os.getcwd(), path)  # the working folder as the system resolved it: no link in it
    if not path.startswith(("/proc", "/sys/fs/cgroup")):
        return None  # an import's, a data file's: the common case, decided at once
    real = os.path.realpath(path)  # /proc/self and /proc/thread-self, "..", a relative path (os.chdir("/proc/self"))
    if real.startswith("/sys/fs/cgroup/"):
        return real if real.rpartition("/")[2].startswith("memory.") else None
    own = f"/proc/{os.getpid()}"
    if real in ("/proc", "/proc/meminfo"):  # the folder: os.open(name, dir_fd=...) reads a file with no path of its own
        return real
    if real != own and not real.startswith(own + "/"):
        return None
    rest = real[len(own) + 1:].split("/") if real != own else []
    if rest[:1] == ["task"]:
        rest = rest[2:]  # a thread's own folder holds the same files
    return real if not rest or (len(rest) == 1 and rest[0] in _MEMORY_FILES) else None


def _kernel_s_own_read() -> bool:
    """Whether a read of the process's memory comes from the kernel itself (ipykernel answers a front end's
    usage_request with psutil) or from the course's helpers, not from a notebook's code: the innermost frame of
    the notebook (__main__), the kernel or the helpers decides."""
    own = ("ipykernel.", __name__.rpartition(".")[0] + ".")
    frame = sys._getframe(2)  # past this function and the hook: the code that opened the file
    while frame is not None:
        name = frame.f_globals.get("__name__") or ""
        if name == "__main__":
            return False
        if name.startswith(own):
            return True
        frame = frame.f_back
    return False


def _own_program() -> bool:
    """Whether the program about to start is the course's own look for a GPU (helpers.device runs nvidia-smi where
    the driver's /proc folder is missing): hp.sized and hp.profile, which given cells call during a watch."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_globals.get("__name__") == f"{__name__.rpartition('.')[0]}.device":
            return True
        frame = frame.f_back
    return False


def _hook_programs() -> None:
    if not _HOOKED:
        sys.addaudithook(_refuse_programs)
        _HOOKED.append(True)


def _noted_start(self: object) -> None:  # multiprocessing's BaseProcess.start while a watch runs
    _STARTED.append("multiprocessing's Process.start")
    return _PROCESS_START[0](self)


# multiprocessing's own BaseProcess.start while a watch has put _noted_start in its place (empty otherwise)
_PROCESS_START: list[Callable] = []


def _refused_start(self: object) -> None:  # multiprocessing's BaseProcess.start while a check runs
    raise _program_refused("multiprocessing's Process.start")


def _programs_running() -> list[str]:
    """This process's children that still run (not zombies), as 'pid (name)': a program started before a check,
    which the student's function could ask for the answer, but for multiprocessing's resource tracker, which
    starts with the first spawned process and stays. Linux's /proc, else psutil where installed."""
    tracker = getattr(getattr(sys.modules.get("multiprocessing.resource_tracker"), "_resource_tracker", None),
                      "_pid", None)
    return [c for c in _children() if c.partition(" ")[0] != str(tracker)]


def _children() -> list[str]:
    tasks = "/proc/self/task"
    if os.path.exists(f"{tasks}/{os.getpid()}/children"):
        found = []
        for tid in os.listdir(tasks):
            try:
                with open(f"{tasks}/{tid}/children") as f:
                    pids = f.read().split()
            except OSError:
                continue
            for pid in pids:
                try:
                    with open(f"/proc/{pid}/stat") as f:
                        stat = f.read()
                except OSError:
                    continue
                if stat[stat.rindex(")") + 2:][:1] not in ("Z", "X"):
                    found.append(f"{pid} ({stat[stat.index('(') + 1:stat.rindex(')')]})")
        return found
    try:
        import psutil
    except ImportError:
        return []
    return [f"{c.pid} ({c.name()})" for c in psutil.Process().children() if c.status() != psutil.STATUS_ZOMBIE]


# Threads. A check's own guard that holds per thread (exercise 8's part 2 runs the student's function under a
# dispatch mode that refuses every tensor operation) never sees what another thread runs (trial t26ex08 F1: a
# predicted_extra that measured an Adam step in a thread of its own passed). So while a check runs the student's
# function, its thread starts no thread, and the check refuses to run beside a thread that the student's code
# started (a worker started in an earlier cell, which the function could ask) or that runs the student's code now.
# The kernel, jupyter, torch and jax keep threads of their own; what counts is who asked for the thread. From the
# package's import on, each start (threading.Thread.start, _thread.start_new_thread) notes whether the code that
# asked for it, past the standard library's (threading, concurrent.futures, asyncio), is the student's: neither the
# standard library, nor an installed package, nor the course's helpers (a notebook's cells, a module of one's own),
# or whether the thread that asked is one of the student's. The cost falls on each start, not on a check. A thread that
# a library starts while a check runs the function (in the check's thread) is watched until the check ends: the
# student's code called there (a callback: torch.nn.parallel.parallel_apply, IPython's background jobs) fails it.
_STUDENT_THREADS: dict[int, str] = {}  # ident -> name, from the noted thread's start to its end
_CHECK_THREADS: list[int] = []  # the thread that runs the student's function, for each check in progress
_STDLIB = os.path.join(os.path.dirname(os.__file__), "")
_HELPERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "")
_CODE_KINDS: dict[str, str] = {}  # co_filename -> "stdlib", "library" or "student"


def _code_kind(filename: str) -> str:
    kind = _CODE_KINDS.get(filename)
    if kind is None:
        if filename.startswith("<frozen "):
            kind = "stdlib"
        elif f"{os.sep}site-packages{os.sep}" in filename or f"{os.sep}dist-packages{os.sep}" in filename:
            kind = "library"
        elif filename.startswith(_STDLIB):
            kind = "stdlib"
        elif filename.startswith(_HELPERS):
            kind = "library"
        else:
            kind = "student"  # a notebook's cell, a module of one's own, code compiled from a string
        _CODE_KINDS[filename] = kind
    return kind


def _asked_by_student(frame: types.FrameType | None) -> bool:
    """Whether the first frame outside the standard library, from `frame` outwards, is the student's code."""
    while frame is not None:
        kind = _code_kind(frame.f_code.co_filename)
        if kind != "stdlib":
            return kind == "student"
        frame = frame.f_back
    return False


def _outer_frames(frame: types.FrameType | None) -> Iterable[types.FrameType]:
    while frame is not None:
        yield frame
        frame = frame.f_back


def _runs_student_code(frame: types.FrameType | None) -> bool:
    while frame is not None:
        if _code_kind(frame.f_code.co_filename) == "student":
            return True
        frame = frame.f_back
    return False


def _thread_refused(what: str, check: tuple[str, str, list] | None = None) -> WrongAnswer:
    part, hint, fired = check or _NO_PROGRAMS[-1]
    fired.append(WrongAnswer(f"{part}: your code {what} while the check runs it: the function must compute its answer "
                             f"itself, in the check's own thread (what the check watches, it watches there), not in a "
                             f"thread of its own. Hint: {hint}"))
    return fired[-1]


def _watched_thread(function: Callable, what: str, check: tuple[str, str, list]) -> Callable:
    """function, run in a thread that a library started while `check` ran the student's function in the thread that
    asked (jax starts a timer as its backend starts; torch.nn.parallel.parallel_apply, IPython's background jobs run
    the student's code in a thread of their own): the student's code, called there while that check runs, fails it."""
    def run(*args: object, **kwargs: object) -> object:
        def profile(frame: types.FrameType, event: str, arg: object) -> None:
            if not any(c is check for c in _NO_PROGRAMS):  # the check is over: the thread runs on as before
                sys.setprofile(None)
            elif event == "call" and _code_kind(frame.f_code.co_filename) == "student":
                sys.setprofile(None)
                raise _thread_refused(what, check)
        sys.setprofile(profile)
        try:
            return function(*args, **kwargs)
        finally:
            sys.setprofile(None)
    return run


def _noted_thread(function: Callable, name: str, noted: threading.Event) -> Callable:
    def run(*args: object, **kwargs: object) -> object:
        ident = _thread.get_ident()
        _STUDENT_THREADS[ident] = name
        noted.set()
        try:
            return function(*args, **kwargs)
        finally:
            _STUDENT_THREADS.pop(ident, None)
    return run


def _thread_starter(original: Callable, how: str) -> Callable:
    """`original` (a function of _thread that starts a thread), refused in the thread of a check in progress, and
    noting the thread it starts where the student's code asked for it."""
    def start(function: Callable, *args: object, **kwargs: object) -> object:
        me = _thread.get_ident()
        student = me in _STUDENT_THREADS or _asked_by_student(sys._getframe(1))
        if me in _CHECK_THREADS:
            if student:
                raise _thread_refused(f"starts a thread ({how})")
            # a library's thread: it may run the student's code (a callback), where the check sees nothing
            library = next((frame.f_globals.get("__name__") for frame in _outer_frames(sys._getframe(1))
                            if _code_kind(frame.f_code.co_filename) == "library"), None)
            return original(_watched_thread(function, f"runs in a thread that {library} started", _NO_PROGRAMS[-1]),
                            *args, **kwargs)
        if student:
            owner = getattr(function, "__self__", None)
            name = owner.name if isinstance(owner, threading.Thread) else getattr(function, "__qualname__", how)
            noted = threading.Event()
            started = original(_noted_thread(function, name, noted), *args, **kwargs)
            noted.wait()  # noted once the start returns (_thread's returns before the thread runs)
            return started
        return original(function, *args, **kwargs)
    start.__name__ = start.__qualname__ = getattr(original, "__name__", "start")
    start.__doc__ = original.__doc__
    start.__wrapped__ = original  # type: ignore[attr-defined]
    start._course_noted = True  # type: ignore[attr-defined]
    return start


def _note_thread_starts() -> None:
    """Put _thread_starter in the place of each function that starts a thread (threading's own reference, which
    Thread.start calls, and _thread's); once per process, the package's import (a reload replaces its own)."""
    for module, attr, how in ((threading, "_start_new_thread", "threading.Thread.start"),
                              (threading, "_start_joinable_thread", "threading.Thread.start"),
                              (_thread, "start_new_thread", "_thread.start_new_thread"),
                              (_thread, "start_new", "_thread.start_new"),
                              (_thread, "start_joinable_thread", "_thread.start_joinable_thread")):
        original = vars(module).get(attr)
        while getattr(original, "_course_noted", False):
            original = original.__wrapped__
        if original is not None:
            setattr(module, attr, _thread_starter(original, how))


_note_thread_starts()


def _threads_running() -> list[str]:
    """The threads beside this one that the student's code started and that still run, or that run the student's
    code now, whoever started them, by name."""
    me = _thread.get_ident()
    frames = sys._current_frames()
    try:
        found = [name for ident, name in list(_STUDENT_THREADS.items()) if ident != me and ident in frames]
        others = [ident for ident, frame in frames.items()
                  if ident != me and ident not in _STUDENT_THREADS and _runs_student_code(frame)]
    finally:
        del frames
    if others:
        names = {t.ident: t.name for t in threading.enumerate()}
        found += [names.get(ident, f"thread {ident}") for ident in others]
    return found


def without_helpers(fn: Callable, *names: str, part: str, hint: str,
                    returns: Callable[[object], object] | None = None) -> Callable:
    """fn wrapped so that, while it runs, calling any of the course helpers `names` (hp.<name>) raises
    WrongAnswer(part, hint): a check runs a student's function with the helper that answers the part
    out of reach, however the student reached it (hp.name, helpers.module.name, a name of their own, or a
    reference kept anywhere: while fn runs, a blocked function's own code refuses).
    A blocked class is out of reach with its subclasses and instances: a class of one's own built on it
    (at the top level or inside fn) fails the same way as the class itself.
    While fn runs, starting a program (subprocess, os.system, os.fork, os.exec*, multiprocessing's Process.start)
    raises WrongAnswer too, and so does a run while a program started before it still runs beside the kernel: the
    function must compute its answer, not ask a helper in another interpreter. So does starting a thread
    (threading.Thread.start, _thread.start_new_thread) in fn's thread while it runs, and a run beside a thread that
    the student's code started (not the kernel, a framework or the course) or that runs the student's code now: a
    check's own guard that holds per thread (a dispatch mode) sees nothing another thread runs; the student's code run
    in a thread that a library starts while fn runs fails the check too.
    A refusal that fired fails the check even where the function caught it and went on (try: hp.name(...) except:
    a fallback). The helpers are looked up again at each run, so a wrapper made while hp.watch_helpers watched them
    still refuses them once the watch has ended (and the other way round).
    returns, where given, runs on fn's result while the helpers are still refused, and the wrapper returns what it
    returns: a check makes the answer concrete there (requires plain ints, a plain tuple), so that a result that
    defers its work past the refusal (a generator, an int whose __eq__ calls the helper) fails instead of passing."""
    helpers = sys.modules[__name__.rpartition(".")[0]]
    for name in names:
        getattr(helpers, name)  # AttributeError names a wrong name
    found = _blocked(helpers, names)  # as the wrapper is made: a watch's wrapper, kept alive here, stays refused
    fired: list[WrongAnswer] = []  # the refusals raised while fn runs, caught by it or not

    def refuse(name: str) -> Callable:
        def refused(*args: object, **kwargs: object) -> None:
            fired.append(WrongAnswer(f"{part}: your code calls hp.{name}, the course's helper that answers this part. "
                                     f"Hint: {hint}"))
            raise fired[-1]
        blocked_class = next((cls for cls, n in found[1].items() if n == name), None)
        if blocked_class is None:
            return refused
        # in a blocked class's place (same metaclass): making one, or a class built on it, fails the same way
        return type(blocked_class)(blocked_class.__name__, (blocked_class,), {
            "__new__": lambda cls, *args, **kwargs: refused(),
            "__init_subclass__": classmethod(lambda cls, **kwargs: refused())})

    refusals = {name: refuse(name) for name in names}  # made once: a class stand-in is itself a class

    def refuse_init(name: str) -> Callable:  # a blocked class's __init__ while fn runs: reached by its subclasses
        def refused(self: object, *args: object, **kwargs: object) -> None:
            fired.append(WrongAnswer(f"{part}: your code makes a {type(self).__name__}, built on hp.{name}, the "
                                     f"course's helper that answers this part. Hint: {hint}"))
            raise fired[-1]
        return refused

    @functools.wraps(fn)
    def run(*args: object, **kwargs: object) -> object:
        now = _blocked(helpers, names)  # and as they are now: a watch started or ended since
        blocked, classes = {**found[0], **now[0]}, {**found[1], **now[1]}
        held = _holds(fn, blocked, set(), classes=classes)  # a helper kept where no namespace patch reaches it
        if held:
            raise WrongAnswer(f"{part}: your code keeps hp.{held} (in a global name of your own, a default "
                              f"argument, a closure, a container, a cache, a class built on it or an instance), the course's helper that answers this "
                              f"part. Hint: {hint}")
        running = _programs_running()
        if running:
            raise WrongAnswer(f"{part}: another program runs beside this kernel (process {running[0]}), started by "
                              f"your code: the function must compute its answer itself, not ask another program. Stop "
                              f"it (or restart the kernel) and run the cells again. Hint: {hint}")
        threads = _threads_running()
        if threads:
            raise WrongAnswer(f"{part}: a thread that your code started, or that runs your code, is still "
                              f"running ({threads[0]}): the function must compute its answer itself, in the check's "
                              f"thread, not ask another thread. Stop it (or restart the kernel) and run the cells "
                              f"again. Hint: {hint}")
        # every namespace the function could reach a helper through: its own globals and the helpers' modules
        spaces = [getattr(fn, "__globals__", {})] + [vars(m) for n, m in list(sys.modules.items())
                                                     if m is not None and (n == helpers.__name__
                                                                           or n.startswith(helpers.__name__ + "."))]
        saved = []
        for space in spaces:
            for key, value in list(space.items()):
                name = blocked.get(id(value)) or _built_on(value, classes)
                if name and not key.startswith("__"):
                    saved.append((space, key, value))
                    space[key] = refusals[name]
        lazy = [name for name in names if name not in vars(helpers)]  # a lazily loaded name: not bound yet
        for name in lazy:
            setattr(helpers, name, refusals[name])
        # a class's own __init__ only: deleting one assigned here would change how CPython checks arguments
        inits = [(cls, vars(cls)["__init__"]) for cls in classes if "__init__" in vars(cls)]
        for cls, init in inits:
            cls.__init__ = refuse_init(classes[cls])
        # a blocked function's own code: what a reference kept past every namespace (a class attribute, a ufunc) calls
        # (a plain function, not a closure's: its code needs its cells; one the namespaces held, so a check run
        # inside another check's finds them patched already and swaps nothing)
        functions = {id(value): value for value in [value for _, _, value in saved] + [*found[2](), *now[2]()]
                     if id(value) in blocked and isinstance(value, types.FunctionType)
                     and not value.__code__.co_freevars}
        # keyed by the blocked name, not the code's: while watch_helpers runs, every watched helper is a wrapper
        # whose code is named `counted`, and one key for all would make each refusal name the last one
        codes = [(helper, helper.__code__, blocked[id(helper)], _REFUSALS.get(blocked[id(helper)]))
                 for helper in functions.values()]
        for helper, code, key, _ in codes:
            _REFUSALS[key] = refusals[key]
            helper.__code__ = _REFUSED_CODE.replace(co_name=key)
        import multiprocessing.process as mp  # a plain module of the standard library: no process starts
        _hook_programs()
        start = vars(mp.BaseProcess)["start"]
        mp.BaseProcess.start = _refused_start
        _NO_PROGRAMS.append((part, hint, fired))
        _CHECK_THREADS.append(_thread.get_ident())
        first = len(fired)
        try:
            result = fn(*args, **kwargs)
            if returns is not None:  # still refused: what the check compares is made here
                result = returns(result)
        except BaseException:
            if len(fired) == first:
                raise
        finally:
            _NO_PROGRAMS.pop()
            _CHECK_THREADS.pop()
            mp.BaseProcess.start = start
            for helper, code, key, before in reversed(codes):
                helper.__code__ = code
                if before is None:
                    _REFUSALS.pop(key, None)
                else:
                    _REFUSALS[key] = before
            for cls, init in inits:
                cls.__init__ = init
            for space, key, value in saved:
                space[key] = value
            for name in lazy:
                vars(helpers).pop(name, None)
        if len(fired) > first:  # a refusal the function caught: it called the helper all the same
            refusal = fired[first]
            del fired[first:]
            raise refusal.with_traceback(None) from None
        return result
    return run


def _blocked(helpers: types.ModuleType, names: tuple[str, ...]) -> tuple[dict[int, str], dict[type, str], Callable]:
    """What stands for each helper `names` now: hp.<name>, what it wraps (a watch's counting wrapper wraps the
    helper itself: functools.wraps' __wrapped__) and the name in the module that defines it, by id; the classes
    among them; and a function of this module that returns the objects themselves: it keeps them alive, so that
    no other object takes one of their ids, where _holds does not look (it would find the helpers there)."""
    blocked: dict[int, str] = {}
    objects: list = []
    for name in names:
        obj = getattr(helpers, name)
        try:
            inner = inspect.unwrap(obj)
        except ValueError:  # a cycle of __wrapped__
            inner = obj
        home = sys.modules.get(getattr(inner, "__module__", None) or "")
        own = vars(home).get(name) if home is not None and home.__name__.startswith(helpers.__name__ + ".") else None
        for item in (obj, inner, own):
            if item is not None and id(item) not in blocked:
                blocked[id(item)] = name
                objects.append(item)
    return blocked, {obj: blocked[id(obj)] for obj in objects if isinstance(obj, type)}, lambda: objects


# label -> (the number of its calls counted so far, and for each namespace or class patched: it, the attribute,
# what it held there before, or None when it held nothing of its own: a lazily loaded helper, an inherited method)
_WATCHED: dict[str, tuple[list[int], list[tuple[object, str, object]]]] = {}
# hp.<name> -> (its arguments by parameter name, its result) for each call since watch_helpers(record=...)
_RECORDED: dict[str, list[tuple[dict[str, object], object]]] = {}
# the labels of helpers called during a watch that watch_helpers then ended for other helpers, no check having
# passed: a later watch of one of them starts with that call counted
_PENDING: set[str] = set()
# The helpers that answer an exercise in a line (the formulas, which need no framework: hp.zero_bytes and the
# like) note each call here (_note_call) from the package's import until the kernel's first watch, which starts
# with them counted as calls made in an earlier watch: a value read off one in a cell above an exercise's setup
# cell counts as one read after it. None once a watch has started: a watch counts from then on.
_BEFORE_WATCH: set[str] | None = set()


def _note_call(name: str) -> None:
    """Note a call of hp.<name> made before the kernel's first watch (the first line of each formula helper)."""
    if _BEFORE_WATCH is not None:
        _BEFORE_WATCH.add(name)


# While a watch runs, each watched helper that is a plain function runs a counting stub in place of its own code
# (its __code__ is swapped, as without_helpers does), so a call that reaches the original function past the
# patched names (the wrapper's __wrapped__, a reference kept earlier) is counted too. id(stub code) -> (a copy of
# the function with its own code, the count, which calls count: None for all); and the functions swapped, with
# their own code, for _unwatch.
_COUNTED: dict[int, tuple[Callable, list[int], Callable[..., bool] | None]] = {}
_SWAPPED: list[tuple[types.FunctionType, types.CodeType]] = []


def _counting_code(code: types.CodeType) -> types.CodeType:
    """A stub with as many free variables as `code` (so it fits the function's closure) that counts the call and
    runs the function's own code, found in _COUNTED by the stub's identity."""
    free = [f"_free{i}" for i in range(len(code.co_freevars))]
    src = ("def _outer():\n" + "".join(f"    {v} = None\n" for v in free)
           + "    def counted(*args, **kwargs):\n" + (f"        ({', '.join(free)},)\n" if free else "")
           + f"        inner, count, only = __import__('sys').modules[{__name__!r}]._COUNTED[id(__import__('sys')"
           + "._getframe().f_code)]\n        if only is None or only(*args, **kwargs):\n            count[0] += 1\n"
           + "        return inner(*args, **kwargs)\n")
    outer = compile(src, __file__, "exec").co_consts[0]
    stub = next(c for c in outer.co_consts if isinstance(c, types.CodeType))
    return stub.replace(co_name=code.co_name, co_qualname=code.co_qualname)


def _unwatch() -> None:
    if _PROCESS_START:
        import multiprocessing.process as mp
        mp.BaseProcess.start = _PROCESS_START.pop()
    for fn, code in reversed(_SWAPPED):
        fn.__code__ = code
    _SWAPPED.clear()
    _COUNTED.clear()
    for count, patches in _WATCHED.values():
        for owner, attr, held in patches:
            if held is None:
                delattr(owner, attr)  # a lazily loaded name goes back to loading on use; a method to its base's
            else:
                setattr(owner, attr, held)
    _WATCHED.clear()
    _RECORDED.clear()


def _forget_calls() -> None:
    """What a kernel restart does to the counts, the watch left running: for the wrong answers' test harness
    (tests/wrong_answers/plugin.py), which runs the solution again in the same kernel after a wrong answer
    that called a watched helper. Never called by a notebook."""
    for count, *_ in _WATCHED.values():
        count[0] = 0
    _PENDING.clear()
    _ENDED_IN.clear()
    _STARTED.clear()
    if _BEFORE_WATCH is not None:
        _BEFORE_WATCH.clear()


def watch_helpers(*names: str, methods: Iterable[tuple[type, str]] = (), record: Iterable[str] = (),
                  keep: bool = True) -> None:
    """Count the calls of the course helpers `names` (hp.<name>), and of the `methods` given as (class,
    attribute) pairs (e.g. (jax.stages.Compiled, "memory_analysis"), what such a helper calls), from now
    on, until a check asks with assert_helpers_unused and passes. A helper is watched in the package
    (hp.<name>) and in the module that defines it (helpers.memory_jax.<name>, say); a `methods` pair may name
    a module too, e.g. (jax.ad_checkpoint, "print_saved_residuals"), and may carry a third item, a function of
    the call's arguments that says whether the call counts (hp.measuring_tools counts torch's own subclasses
    of saved_tensors_hooks out that way). The list every exercise starts from is hp.measuring_tools. For a part whose answer is a value (not
    a function that without_helpers can run): the given first line of its solution cell, and of the part's
    first given code cell where a given function measures the answer. The helpers named in `record`
    (watched as well) also keep each call's arguments and result, for a check that asks, with
    watched_calls, whether an answer came from them; each call of watch_helpers starts that record again.

    A counted call sticks until the check passes or the kernel restarts: a check that reports it does not
    forget it, and a call of watch_helpers with the same helpers as the watch that is running goes on
    counting (whatever `keep` says; it is kept for the cells that pass it), so neither running the check
    again nor running a cell that starts the watch again lets a call made in a scratch cell through. A
    call with other helpers ends the running watch and starts one of those, in which a helper that was
    called in an earlier watch, no check having passed since, starts with that call counted; so does a formula
    helper (_note_call) called before the kernel's first watch, from the package's import on. While the watch
    runs, a watched helper that is a plain function (or a method of the class named) runs counting code in place
    of its own, so a call that reaches it past the patched names (the wrapper's __wrapped__, a reference kept
    from before the watch) counts as well."""
    global _BEFORE_WATCH
    helpers = sys.modules[__name__.rpartition(".")[0]]
    if _BEFORE_WATCH is not None:  # the kernel's first watch: the calls noted since the import count as earlier ones
        _PENDING.update(f"hp.{name}" for name in _BEFORE_WATCH)
        _BEFORE_WATCH = None
    record = set(record)
    names = tuple(dict.fromkeys((*names, *sorted(record))))
    _WATCH_ARGS[:] = [(names, [tuple(m) for m in methods], sorted(record))]  # to start it again (_after_cell)
    targets = [(f"hp.{name}", helpers, name, getattr(helpers, name)) for name in names]  # AttributeError names a wrong name
    methods = [(m[0], m[1], m[2] if len(m) > 2 else None) for m in methods]
    only = {f"hp.{name}": None for name in names}
    only.update({f"{getattr(cls, '__qualname__', None) or cls.__name__}.{attr}": counts for cls, attr, counts in methods})
    targets += [(f"{getattr(cls, '__qualname__', None) or cls.__name__}.{attr}", cls, attr, getattr(cls, attr))
                for cls, attr, _ in methods]  # a class's method, or a module's function
    if sorted(_WATCHED) == sorted(label for label, *_ in targets):
        for calls in _RECORDED.values():
            calls.clear()  # a new record; the counts go on
        return
    _PENDING.update(label for label, (count, *_) in _WATCHED.items() if count[0])
    _unwatch()
    targets = [(label, owner, attr, getattr(owner, attr)) for label, owner, attr, _ in targets]  # unwatched now
    for label, owner, attr, fn in targets:
        count = [int(label in _PENDING)]
        calls = _RECORDED.setdefault(label, []) if owner is helpers and attr in record else None
        try:
            signature = inspect.signature(fn)  # read before its code is swapped
        except (TypeError, ValueError):
            signature = None
        swapped = (isinstance(fn, types.FunctionType) and all(f is not fn for f, _ in _SWAPPED)
                   and (not isinstance(owner, type) or vars(owner).get(attr) is fn))  # not a base class's method
        if swapped:
            inner = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
            inner.__kwdefaults__ = fn.__kwdefaults__
            stub = _counting_code(fn.__code__)
            _COUNTED[id(stub)] = (inner, count, only[label])
            _SWAPPED.append((fn, fn.__code__))
            fn.__code__ = stub  # which keeps the stub alive, and its id unique, until _unwatch

        # a method watched on its class and on a subclass: the subclass's wrapper runs the method's own code,
        # so that a call through it counts as the subclass's only
        run = fn if swapped or id(getattr(fn, "__code__", None)) not in _COUNTED else _COUNTED[id(fn.__code__)][0]

        @functools.wraps(fn)
        def counted(*args: object, _fn: Callable = run, _count: list[int] = count, _swapped: bool = swapped,
                    _calls: list | None = calls, _signature: inspect.Signature | None = signature,
                    _only: Callable[..., bool] | None = only[label], **kwargs: object) -> object:
            if not _swapped and (_only is None or _only(*args, **kwargs)):  # else the function's own stub counts it
                _count[0] += 1
            result = _fn(*args, **kwargs)
            if _calls is not None and _signature is not None:
                try:
                    bound = _signature.bind(*args, **kwargs)
                    bound.apply_defaults()
                    _calls.append((dict(bound.arguments), result))
                except TypeError:  # not the helper's signature: nothing to record
                    pass
            return result
        if signature is not None:
            counted.__signature__ = signature  # what help() and inspect show: the helper's, not the stub's
        owners = [owner]
        home = sys.modules.get(getattr(fn, "__module__", None) or "")  # the helper's own module: helpers.<module>.<name>
        if (owner is helpers and home is not None and home.__name__.startswith(helpers.__name__ + ".")
                and vars(home).get(attr) is fn):
            owners.append(home)
        _WATCHED[label] = (count, [(o, attr, vars(o).get(attr)) for o in owners])
        for o in owners:
            setattr(o, attr, counted)
    # a program started while the watch runs counts too: it may run a helper out of the patches' reach
    import multiprocessing.process as mp  # a plain module of the standard library: no process starts
    _hook_programs()
    _PROCESS_START.append(vars(mp.BaseProcess)["start"])
    mp.BaseProcess.start = _noted_start


def watched_calls(name: str) -> list[tuple[dict[str, object], object]]:
    """The calls of hp.<name> since watch_helpers(record=[name]) began watching it, each as (its arguments by
    parameter name, its result), oldest first; empty when it is not recorded (never watched, or watching
    stopped)."""
    return list(_RECORDED.get(f"hp.{name}", ()))


def assert_helpers_unused(*, part: str, hint: str, stop: bool = True) -> None:
    """Raise WrongAnswer(part, hint) if what watch_helpers watches was called since the watch began, or a program
    was started while it ran (one can run a helper out of the watch's reach), or one started before still runs
    beside the kernel; else stop watching (a check run again, or a given cell after it, may call it). A reported
    call is not forgotten: the check fails again until the kernel restarts. The message does not say the student's
    code made the call: a given cell run ahead of the check may have. stop=False asks without ending the watch:
    the first line of a check, so that nothing it prints confirms an answer worked out with a helper; the check's
    last line, with the default, ends the watch once every comparison has passed. In IPython a watch ended here
    starts again if the cell that ended it raises (any exception, an interrupt included) and no other watch runs
    then: a check that ends it on its first line and then fails in any way leaves it running."""
    called = [label for label, (count, *_) in _WATCHED.items() if count[0]]
    if called:
        raise WrongAnswer(f"{part}: {called[0]} works out what this part asks, and it was called before this "
                          f"check passed (by your code, a scratch cell, or a given cell run ahead of this check). "
                          f"The call counts until this check passes, whatever cell runs again: restart the kernel "
                          f"and run the notebook from the top, answering without {called[0]}. Hint: {hint}")
    if _STARTED:
        raise WrongAnswer(f"{part}: another program was started ({_STARTED[0]}) while the helpers that work out what "
                          f"this part asks were watched: a program can run them out of the watch's reach. It counts "
                          f"until this check passes: restart the kernel and run the notebook from the top, starting no "
                          f"program (subprocess, os.system, multiprocessing, a shell command) before this check "
                          f"passes. Hint: {hint}")
    running = _programs_running() if _WATCHED else []
    if running:
        raise WrongAnswer(f"{part}: another program runs beside this kernel (process {running[0]}) while the helpers "
                          f"that work out what this part asks are watched: a program can run them out of the watch's "
                          f"reach. Stop it (or restart the kernel) and run the notebook from the top. Hint: {hint}")
    if stop:
        if _WATCHED:
            _watch_again_if_the_cell_fails()
        _unwatch()
        _STARTED.clear()


# A check ends the watch (assert_helpers_unused, stop=True) before it measures, so a check that then raises anything
# but its own failure (which starts the watch again itself): a NameError from an answer cell not run, a framework's
# error from a broken answer, count_try's refusal, an interrupt, would leave the helpers unwatched for the scratch
# cells that follow (trial t26ex10 F1). In IPython the watch ends for good only with the cell that ended it: when that
# cell ends with an exception and no watch runs, the one it ended starts again (IPython's post_run_cell event).
# _WATCH_ARGS: the arguments of the running watch; _ENDED_IN: for each watch a check ended, (the ExecutionResult of the
# cell that ended it, or None where no cell was running then, e.g. after a nested run_cell, the watch's arguments).
_WATCH_ARGS: list[tuple[tuple[str, ...], list[tuple], list[str]]] = []
_ENDED_IN: list[tuple[object, tuple]] = []


def _shell() -> object | None:
    ipython = sys.modules.get("IPython")  # never imported here: a notebook's kernel has it
    return ipython.get_ipython() if ipython is not None else None


def _watch_again_if_the_cell_fails() -> None:
    shell = _shell()
    if shell is None or not _WATCH_ARGS:
        return
    shell.events.register("post_run_cell", _after_cell)  # once: register skips a callback already there
    cell = getattr(shell.displayhook, "exec_result", None)  # the running cell's result, which IPython fills
    _ENDED_IN[:] = [*[(c, a) for c, a in _ENDED_IN if c is not cell][-7:], (cell, _WATCH_ARGS[0])]


def _after_cell(result: object = None) -> None:
    """IPython's post_run_cell callback: start again the watch a check ended in the cell that just ran when that cell
    did not complete (it raised, or was interrupted: ipykernel then passes None) and no watch runs. A nested cell's
    watch is settled when that cell ends; one ended in a silent cell (no event of its own), or when no cell's result
    was known, when the next cell ends, by its own outcome or that cell's."""
    def failed(r: object) -> bool:
        return r is None or not getattr(r, "success", False)
    again, kept = None, []
    for cell, args in _ENDED_IN:
        silent = getattr(getattr(cell, "info", None), "silent", False)
        if cell is result or cell is None or result is None or silent:
            if failed(result) or (cell is not None and failed(cell)):
                again = args
        else:
            kept.append((cell, args))
    _ENDED_IN[:] = kept
    if again is not None and not _WATCHED:
        names, methods, record = again
        watch_helpers(*names, methods=methods, record=record)
