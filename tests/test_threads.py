"""Threads: one core count, one thread pool, and BLAS limited to one thread wherever tasks
are the parallelism — so a fit never runs more threads than its share of the cores."""

from __future__ import annotations

import threading
import time

import dask
import dask.array as da
import dask.system
import numpy as np
import pytest

import fsdask
from fsdask.base import FitOutput, Selector
from fsdask.linalg import threads
from fsdask.linalg.threads import cores, one_blas_thread, parallel_map

threadpoolctl = pytest.importorskip("threadpoolctl")


def blas_threads() -> int:
    """The most threads any loaded BLAS library may use, read where it is called.

    The most, not the fewest: a library that always runs one thread (cvxpy's SCS loads its
    own single-threaded OpenBLAS) would otherwise hide NumPy's, and a limit must hold every
    library to one."""
    return max(d["num_threads"] for d in threadpoolctl.threadpool_info() if d["user_api"] == "blas")


#: BLAS's thread count when nothing limits it (a limit held by the test itself with
#: threadpoolctl would take precedence over fsdask's, by threadpoolctl's design)
BLAS = blas_threads()


@pytest.fixture
def blas():
    if BLAS < 2:
        pytest.skip("BLAS runs one thread here: there is nothing to limit")
    yield
    assert blas_threads() == BLAS  # every limit of fsdask restored


def test_cores_is_dasks_cpu_count(monkeypatch):
    assert cores() == dask.system.CPU_COUNT
    monkeypatch.setattr(dask.system, "CPU_COUNT", 3)  # e.g. a pod's quota of 3 CPUs
    assert cores() == 3


class _Gauge:
    """Counts the tasks running at once."""

    def __init__(self):
        self.lock, self.now, self.most = threading.Lock(), 0, 0

    def __call__(self, item):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.01)
        with self.lock:
            self.now -= 1
        return item * item


@pytest.mark.parametrize("n_cores", [1, 2, 3])
def test_pool_never_runs_more_than_cores_tasks(monkeypatch, n_cores):
    monkeypatch.setattr(dask.system, "CPU_COUNT", n_cores)
    gauge = _Gauge()
    results: list = []
    callers = [  # two callers at once share the one pool
        threading.Thread(target=lambda: results.append(parallel_map(gauge, range(12))))
        for _ in range(2)
    ]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert results == [[i * i for i in range(12)]] * 2  # in order
    assert 1 <= gauge.most <= n_cores


def test_a_pool_task_maps_in_its_own_thread():
    """A nested call would wait for threads its caller holds: it runs inline instead."""

    def outer(i):
        me = threading.get_ident()
        inner = parallel_map(lambda j: (j, threading.get_ident()), range(3))
        assert {t for _, t in inner} == {me}
        return [j for j, _ in inner]

    assert parallel_map(outer, range(4)) == [[0, 1, 2]] * 4


def test_one_blas_thread_inside_pool_tasks(blas):
    assert parallel_map(lambda _: blas_threads(), range(4)) == [1] * 4
    assert parallel_map(lambda _: blas_threads(), range(1)) == [BLAS]  # one item: inline
    with pytest.raises(ZeroDivisionError):  # the limit is lifted after a failing task too
        parallel_map(lambda i: 1 / (i - 2), range(4))


def test_limits_from_several_threads_restore_blas(blas):
    """BLAS's thread count is one per process: limits opened and closed in overlapping
    threads, in any order, keep it at one while any is open and restore it after."""
    gate, seen = threading.Barrier(3), []

    def call(pause):
        gate.wait()
        seen.append(parallel_map(lambda _: time.sleep(pause) or blas_threads(), range(4)))

    def hold(pause):
        with one_blas_thread():
            gate.wait()
            time.sleep(pause)
            seen.append([blas_threads()])

    threads_ = [threading.Thread(target=call, args=(0.0,))]
    threads_ += [threading.Thread(target=hold, args=(0.05,))]
    threads_ += [threading.Thread(target=call, args=(0.02,))]
    for t in threads_:
        t.start()
    for t in threads_:
        t.join()
    assert len(seen) == 3 and {v for s in seen for v in s} == {1}


class _Probe(Selector):
    """Records the BLAS threads on the client and inside the tasks of a compute."""

    method_name = "probe"

    def _fit(self, X, y, ctx):
        inside = da.map_blocks(
            lambda xb: np.full((1, 1), blas_threads()), X[:1], chunks=(1, 1), dtype=int
        )
        self.tasks_ = set(ctx.execution.compute(inside)[0].ravel().tolist())
        self.client_ = blas_threads()
        return FitOutput(scores=np.ones(X.shape[1]))


@pytest.fixture
def threaded():
    with dask.config.set(scheduler="threads", num_workers=2):
        yield


def test_a_small_fit_runs_its_blas_with_one_thread(blas, threaded):
    X = da.from_array(np.random.default_rng(0).normal(size=(60, 125)), chunks=(60, 25))
    est = _Probe().fit(X)
    assert est.client_ == 1 and est.tasks_ == {1}


def test_a_large_fit_keeps_its_blas_threads_between_computes(blas, threaded, monkeypatch):
    monkeypatch.setattr(threads, "SMALL_FIT_ELEMENTS", 0)
    X = da.from_array(np.random.default_rng(0).normal(size=(60, 125)), chunks=(60, 25))
    est = _Probe().fit(X)
    assert est.tasks_ == {1}  # several blocks at once on the threaded scheduler
    assert est.client_ == BLAS  # the client's dense algebra keeps its threads
    one_block = _Probe().fit(X.rechunk({1: -1}))
    assert one_block.tasks_ == {BLAS}  # one task at a time: BLAS is the parallelism


def test_cpfs_path_outside_a_fit_runs_a_small_x_with_one_blas_thread(blas, monkeypatch):
    """cpfs_path called on its own enters the door a fit enters (fit_threads): on a small X
    OpenBLAS's spinning threads cost more than they give, most of all on a busy machine."""
    from fsdask.methods.cpfs import path as cpfs_path_module

    seen = []
    prepare = cpfs_path_module.prepare_problem

    def probe(*args, **kwargs):
        seen.append(blas_threads())
        return prepare(*args, **kwargs)

    monkeypatch.setattr(cpfs_path_module, "prepare_problem", probe)
    X = np.random.default_rng(0).normal(size=(40, 30))
    fsdask.cpfs_path(X, n_lambdas=3)
    assert seen == [1]
    monkeypatch.setattr(threads, "SMALL_FIT_ELEMENTS", 0)  # a large X keeps its threads
    fsdask.cpfs_path(X, n_lambdas=3)
    assert seen == [1, BLAS]
