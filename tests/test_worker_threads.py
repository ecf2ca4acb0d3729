"""tools.layout.worker_threads: the OpenMP threads the root conftest gives each pytest-xdist worker's kernels."""

from tools.layout import worker_threads


def test_two_workers_on_two_cores_get_one_thread_each():
    assert worker_threads({"PYTEST_XDIST_WORKER_COUNT": "2"}, cores=2) == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def test_workers_share_the_cores_and_never_get_zero():
    assert worker_threads({"PYTEST_XDIST_WORKER_COUNT": "2"}, cores=16)["OMP_NUM_THREADS"] == "8"
    assert worker_threads({"PYTEST_XDIST_WORKER_COUNT": "4"}, cores=2)["OMP_NUM_THREADS"] == "1"


def test_nothing_outside_xdist_or_with_one_worker():
    assert worker_threads({}, cores=2) == {}
    assert worker_threads({"PYTEST_XDIST_WORKER_COUNT": "1"}, cores=2) == {}


def test_a_count_the_caller_set_is_kept():
    assert worker_threads({"PYTEST_XDIST_WORKER_COUNT": "2", "OMP_NUM_THREADS": "4"}, cores=2) == {"MKL_NUM_THREADS": "1"}
