"""without_helpers refuses a program: a helper run in another interpreter is out of reach of its patches, so while
a check runs the student's function, starting a program fails the check, and so does a program started before it
that still runs beside the kernel (trial t19ex19 M2: a fewest that asked hp.smallest_fit in a subprocess passed).
Likewise a thread that the student's code starts (trial t26ex08 F1): see the tests of threads below."""

import _thread
import multiprocessing
import os
import queue
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import helpers as hp

_ASK = [sys.executable, "-c", "import helpers as hp; print(hp.zero_bytes(10, 2, 1).total)"]
_keep_system = os.system  # a reference kept from before the check: the audit hook sees the call all the same


def _in_a_subprocess(p):
    return int(subprocess.run(_ASK, capture_output=True, text=True, check=True).stdout)


def _through_os_system(p):
    return _keep_system("true")


def _through_os_fork(p):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return 0


def _nothing():
    pass


def _through_multiprocessing(method):
    def fn(p):
        process = multiprocessing.get_context(method).Process(target=_nothing)
        process.start()
        process.join()
        return 0
    return fn


@pytest.mark.parametrize("fn, how", [
    (_in_a_subprocess, "subprocess.Popen"), (_through_os_system, "os.system"), (_through_os_fork, "os.fork"),
    (_through_multiprocessing("fork"), "multiprocessing's Process.start"),
    (_through_multiprocessing("spawn"), "multiprocessing's Process.start")])
def test_without_helpers_refuses_starting_a_program(fn, how):
    with pytest.raises(hp.WrongAnswer, match=rf"^part 1: your code starts another program \({how}\) while the check "
                                             r"runs it: the function must compute its answer itself, not start a "
                                             r"program to compute it\. Hint: write the sum$"):
        hp.without_helpers(fn, "zero_bytes", part="part 1", hint="write the sum")(10)
    fn(10)  # once the check is over, programs start again


def test_without_helpers_refuses_while_a_program_started_before_runs():
    worker = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    checked = hp.without_helpers(lambda p: 16 * p, "zero_bytes", part="part 1", hint="write the sum")
    try:
        with pytest.raises(hp.WrongAnswer, match=rf"^part 1: another program runs beside this kernel \(process "
                                                 rf"{worker.pid} \(python.*\)\), started by your code: the function "
                                                 r"must compute its answer itself, not ask another program\."):
            checked(10)
    finally:
        worker.communicate(b"")
    assert checked(10) == 160  # the program has ended (its zombie reaped or not): the check runs
    zombie = subprocess.Popen(["true"])
    os.waitid(os.P_PID, zombie.pid, os.WEXITED | os.WNOWAIT)  # ended, not reaped: a zombie computes nothing
    assert checked(10) == 160
    zombie.wait()




# A thread (trial t26ex08 F1): a check's guard that holds per thread (exercise 8's part 2 calls predicted_extra under a
# dispatch mode that refuses every tensor operation) sees nothing another thread runs; a predicted_extra that measured
# an Adam step in a thread of its own passed. So without_helpers refuses a thread started while the function runs, and
# a run beside a thread that the student's code started (a worker, an idle pool) or that runs the student's code. The
# threads of the kernel, jupyter, torch and jax do not count: only who asked for the thread, or what it runs now.
def _through_a_thread(p):
    box = []
    thread = threading.Thread(target=lambda: box.append(16 * p))
    thread.start()
    thread.join()
    return box[0]


def _through_start_new_thread(p):
    box, done = [], threading.Event()
    _thread.start_new_thread(lambda: (box.append(16 * p), done.set()), ())
    done.wait(10)
    return box[0]


def _through_a_pool(p):
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: 16 * p).result()


@pytest.mark.parametrize("fn, how", [(_through_a_thread, "threading.Thread.start"),
                                     (_through_start_new_thread, "_thread.start_new_thread"),
                                     (_through_a_pool, "threading.Thread.start")])
def test_without_helpers_refuses_starting_a_thread(fn, how):
    with pytest.raises(hp.WrongAnswer, match=rf"^part 1: your code starts a thread \({how}\) while the check runs it: "
                                             r"the function must compute its answer itself, in the check's own thread"
                                             r".*Hint: write the sum$"):
        hp.without_helpers(fn, "zero_bytes", part="part 1", hint="write the sum")(10)
    assert fn(10) == 160  # once the check is over, threads start again


def _catching_the_refusal(start):
    """A function that starts a program or a thread, and catches the refusal."""
    def fn(p):
        try:
            start()
        except AssertionError:
            pass
        return 16 * p
    return fn


@pytest.mark.parametrize("start, what", [
    (lambda: subprocess.run(_ASK, capture_output=True, text=True, check=True), r"another program \(subprocess\.Popen\)"),
    (lambda: _through_a_thread(1), r"a thread \(threading\.Thread\.start\)")], ids=["program", "thread"])
def test_without_helpers_fails_a_refusal_the_function_caught(start, what):
    with pytest.raises(hp.WrongAnswer, match=rf"^part 1: your code starts {what}"):
        hp.without_helpers(_catching_the_refusal(start), "zero_bytes", part="part 1", hint="h")(10)


def _beside(name):
    return (rf"^part 1: a thread that your code started, or that runs your code, is still running \({name}\): the "
            r"function must compute its answer itself, in the check's thread, not ask another thread\.")


def test_without_helpers_refuses_beside_a_thread_the_student_started():
    asks, answers, stop = queue.Queue(), queue.Queue(), threading.Event()

    def serve():   # a worker started in an earlier cell: it does what the function asks
        while not stop.is_set():
            try:
                p = asks.get(timeout=0.01)
            except queue.Empty:
                continue
            answers.put(16 * p)
    worker = threading.Thread(target=serve, name="worker")
    worker.start()
    try:
        with pytest.raises(hp.WrongAnswer, match=_beside("worker")):
            hp.without_helpers(lambda p: (asks.put(p), answers.get(timeout=10))[1], "zero_bytes", part="part 1",
                               hint="h")(10)
    finally:
        stop.set()
        worker.join()
    checked = hp.without_helpers(lambda p: 16 * p, "zero_bytes", part="part 1", hint="h")
    assert checked(10) == 160  # the worker has ended: the check runs
    pool = ThreadPoolExecutor(1, thread_name_prefix="pool")
    pool.submit(int).result()  # its thread waits, idle, in the standard library's code: the function could hand it work
    try:
        with pytest.raises(hp.WrongAnswer, match=_beside("pool_0")):
            checked(10)
    finally:
        pool.shutdown()
    assert checked(10) == 160


def _a_library() -> dict:
    """The namespace of a module of an installed package (its file in site-packages) whose start(target, name) starts a
    thread that runs target, as ipykernel, torch and jax start theirs (start_after: once an event is set)."""
    library = os.path.join(os.path.dirname(pytest.__file__), "_a_library_of_the_kernel.py")
    space: dict = {"__name__": "a_library"}
    exec(compile("import threading\n"
                 "def start(target, name):\n"
                 "    thread = threading.Thread(target=target, name=name)\n"
                 "    thread.start()\n"
                 "    return thread\n"
                 "def start_after(event, target, name):\n"
                 "    return start(lambda: (event.wait(10), target()), name)\n", library, "exec"), space)
    return space


def test_threads_of_the_kernel_and_the_frameworks_do_not_count():
    """A thread that an installed package starts (ipykernel's heartbeat and iopub, torch's and jax's pools) does not
    count, unless it runs the student's code now."""
    space = _a_library()
    checked = hp.without_helpers(lambda p: 16 * p, "zero_bytes", part="part 1", hint="h")
    stop = threading.Event()
    own = space["start"](stop.wait, "the library's own")  # it waits in the standard library's code
    try:
        assert checked(10) == 160
    finally:
        stop.set()
        own.join()

    inside = threading.Event()

    def students_code():   # a student's function that a library's thread runs (an API that takes a callback)
        inside.set()
        stop.wait()
    stop.clear()
    runs_it = space["start"](students_code, "runs the student's code")
    inside.wait(10)
    try:
        with pytest.raises(hp.WrongAnswer, match=_beside("runs the student's code")):
            checked(10)
    finally:
        stop.set()
        runs_it.join()
    assert checked(10) == 160


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the refusal, in that thread
def test_the_student_s_code_in_a_library_s_thread_started_during_the_check_fails_it():
    """A library's thread started while the check runs the function (jax starts a timer as its backend starts) is no
    refusal, but the student's code run there (a callback: torch.nn.parallel.parallel_apply, IPython's background
    jobs) fails the check; once the check is over, the thread runs it as before."""
    space = _a_library()
    stop = threading.Event()

    def library_s_own(p):
        space["start"](stop.wait, "timer")  # a library thread that waits in the standard library's code
        return 16 * p
    try:
        assert hp.without_helpers(library_s_own, "zero_bytes", part="part 1", hint="h")(10) == 160
    finally:
        stop.set()

    def via_a_callback(p):
        box = []
        space["start"](lambda: box.append(16 * p), "callback").join()
        return box[0] if box else 0
    with pytest.raises(hp.WrongAnswer, match=r"^part 1: your code runs in a thread that a_library started while the "
                                             r"check runs it: the function must compute its answer itself"):
        hp.without_helpers(via_a_callback, "zero_bytes", part="part 1", hint="h")(10)
    assert via_a_callback(10) == 160
    release, later = threading.Event(), []

    threads = []

    def outlives_the_check(p):   # the callback runs after the check has returned
        threads.append(space["start_after"](release, lambda: later.append(16 * p), "later"))
        return 16 * p
    assert hp.without_helpers(outlives_the_check, "zero_bytes", part="part 1", hint="h")(10) == 160
    release.set()
    threads[0].join()
    assert later == [160]


# A watch counts a program started while it runs as a watched call (trial t22ex07 F4: exercise 7's answer printed by
# hp.predict_memory in a subprocess during part 3's watch passed the check): the program may run the helper out of
# the watch's reach. Each route that without_helpers refuses counts.
@pytest.fixture
def fresh_kernel():
    """What a kernel restart does to the watch: no watch, no counted call (after the test as well)."""
    from helpers import checks
    checks._unwatch()
    checks._forget_calls()
    yield checks
    checks._unwatch()
    checks._forget_calls()


@pytest.mark.parametrize("fn, how", [
    (_in_a_subprocess, "subprocess.Popen"), (_through_os_system, "os.system"), (_through_os_fork, "os.fork"),
    (_through_multiprocessing("spawn"), "multiprocessing's Process.start")])
def test_a_program_started_during_a_watch_fails_the_check_until_the_kernel_restarts(fresh_kernel, fn, how):
    hp.watch_helpers("zero_bytes")
    fn(10)  # a scratch cell: the program may run the helper, out of the watch's reach
    message = (rf"^part 2: another program was started \({how}\) while the helpers that work out what this part asks "
               r"were watched: a program can run them out of the watch's reach\. It counts until this check passes: "
               r"restart the kernel.*Hint: count it$")
    with pytest.raises(hp.WrongAnswer, match=message):
        hp.assert_helpers_unused(part="part 2", hint="count it")
    hp.watch_helpers("zero_bytes")  # the cell that starts the watch run again: the program still counts
    with pytest.raises(hp.WrongAnswer, match=message):
        hp.assert_helpers_unused(part="part 2", hint="count it")
    hp.watch_helpers("sharded_bytes")  # a watch of other helpers, no check having passed: it counts there too
    with pytest.raises(hp.WrongAnswer, match=message):
        hp.assert_helpers_unused(part="part 2", hint="count it")
    fresh_kernel._forget_calls()  # a kernel restart
    hp.assert_helpers_unused(part="part 2", hint="count it")  # nothing since: it passes and ends the watch
    fn(10)  # no watch: a program counts for nothing
    hp.watch_helpers("zero_bytes")
    hp.assert_helpers_unused(part="part 2", hint="count it")
    assert multiprocessing.process.BaseProcess.start.__name__ == "start"  # multiprocessing's own, once the watch ends


def test_a_program_running_beside_the_kernel_fails_a_watched_check(fresh_kernel):
    worker = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:  # started before the watch (above the setup cell, say), asked for the answer during it
        hp.watch_helpers("zero_bytes")
        with pytest.raises(hp.WrongAnswer, match=rf"^part 2: another program runs beside this kernel \(process "
                                                 rf"{worker.pid} \(python.*\)\) while the helpers"):
            hp.assert_helpers_unused(part="part 2", hint="count it")
    finally:
        worker.communicate(b"")
    hp.assert_helpers_unused(part="part 2", hint="count it")  # it has ended: the check passes


def test_stop_false_checks_without_ending_the_watch(fresh_kernel):
    """The first line of a check (trial t22ex07 F6): a watched call fails it before anything confirms an answer,
    and without a call the watch goes on, so a call made before the check's last line still fails it."""
    hp.watch_helpers("zero_bytes")
    hp.assert_helpers_unused(part="part 3", hint="h", stop=False)
    assert "hp.zero_bytes" in fresh_kernel._WATCHED  # still watched
    hp.zero_bytes(10, 2, 1)
    with pytest.raises(hp.WrongAnswer, match=r"^part 3: hp\.zero_bytes works out"):
        hp.assert_helpers_unused(part="part 3", hint="h", stop=False)
    with pytest.raises(hp.WrongAnswer, match=r"^part 3: hp\.zero_bytes works out"):
        hp.assert_helpers_unused(part="part 3", hint="h")
    fresh_kernel._forget_calls()
    hp.assert_helpers_unused(part="part 3", hint="h", stop=False)
    hp.assert_helpers_unused(part="part 3", hint="h")
    assert not fresh_kernel._WATCHED


def test_the_course_s_own_look_for_a_gpu_does_not_count(fresh_kernel, monkeypatch):
    """hp.profile (hp.sized) before a framework is imported asks nvidia-smi where the driver's /proc folder is
    missing: a given cell may call it during a watch."""
    from helpers import device
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(device.os.path, "isdir", lambda path: False)
    monkeypatch.setattr(device.shutil, "which", lambda name: "/bin/true")
    hp.watch_helpers("zero_bytes")
    assert device._driver_lists_gpu() is False  # ran /bin/true -L
    hp.assert_helpers_unused(part="part 2", hint="h")
