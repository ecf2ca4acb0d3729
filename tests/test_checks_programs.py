"""without_helpers refuses a program: a helper run in another interpreter is out of reach of its patches, so while
a check runs the student's function, starting a program fails the check, and so does a program started before it
that still runs beside the kernel (trial t19ex19 M2: a fewest that asked hp.smallest_fit in a subprocess passed)."""

import multiprocessing
import os
import subprocess
import sys

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


def _starts_one_and_catches_the_refusal(p):
    try:
        subprocess.run(_ASK, capture_output=True, text=True, check=True)
    except AssertionError:
        pass
    return 16 * p


def test_without_helpers_fails_a_program_refusal_the_function_caught():
    with pytest.raises(hp.WrongAnswer, match=r"^part 1: your code starts another program \(subprocess\.Popen\)"):
        hp.without_helpers(_starts_one_and_catches_the_refusal, "zero_bytes", part="part 1", hint="h")(10)
