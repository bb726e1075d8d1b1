"""Cores, the one thread pool, and how many BLAS threads run where.

A fit never runs more threads than its share of the cores:

* :func:`cores` counts the cores this process may use (``dask.system.CPU_COUNT``: the CPU
  affinity and a cgroup quota — a pod's CPU limit — count; ``os.cpu_count()`` sees the
  whole machine);
* :func:`parallel_map` is the one thread pool (``cores()`` threads, shared by the process):
  in-memory column sweeps, the proximal step, p-values.  While its tasks run BLAS has one
  thread — the tasks are the parallelism;
* :func:`blas_threads_for` gives one BLAS thread per task while a graph of several (feature or sample)
  blocks runs on the threaded scheduler (a dask callback, from the start to the end of each
  compute); the client keeps its BLAS threads between computes;
* :func:`fit_threads` is the door :meth:`fsdask.base.Selector.fit` and a standalone
  :func:`fsdask.cpfs_path` enter: a fit on a small X (at most :data:`SMALL_FIT_ELEMENTS`
  values) runs with one BLAS thread throughout; a larger one keeps ``cores()`` BLAS
  threads for its dense algebra on the client.

OpenBLAS's threads spin and then wait for each other at the end of every call: when other
processes hold their cores, each threaded call waits for every one of them to be scheduled,
however small the call.  ``distributed`` workers start with ``OPENBLAS_NUM_THREADS=1``.
fsdask's numba kernels are serial (none is compiled with ``parallel=True``), so numba's
threading layer starts no threads of its own.
"""

from __future__ import annotations

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, Callable, ContextManager, Iterable, Iterator, TypeVar

import dask
import dask.array as da
import dask.system
import dask.threaded
from dask.callbacks import Callback

T = TypeVar("T")
R = TypeVar("R")

#: A fit on at most this many values of X runs all its BLAS calls with one thread.  Threads
#: can save at most (1 − 1/cores) of a call's time; on a busy machine a threaded call can
#: lose a scheduler time slice (milliseconds) waiting for its threads, whatever its size.
#: One BLAS sweep over 2²² float64 values (32 MiB, memory-bound) lasts about one time slice,
#: and the client-side algebra of a fit on a smaller X is made of calls shorter than that
#: (products with X or its r × p factors, r × r eigensolves): there the loss a busy machine
#: can inflict outweighs what the threads can gain.  It is also ``fsdask.hold-x-below``'s
#: default: the size up to which iterative methods hold X on the client.
SMALL_FIT_ELEMENTS = 1 << 22


def cores() -> int:
    """The cores this process may use.

    Returns
    -------
    int
        ``dask.system.CPU_COUNT``: the CPU affinity mask and a cgroup CPU quota (a pod's or a
        batch job's limit) are honoured, unlike ``os.cpu_count()``.  The size of fsdask's
        thread pool and of the threaded scheduler's default pool.  Memory: none.
    """
    return max(1, int(dask.system.CPU_COUNT))


# --------------------------------------------------------------------------- BLAS threads
_controller: Any = None


def _blas() -> Any:
    """threadpoolctl's controller of the loaded BLAS libraries, listed once (it takes
    milliseconds)."""
    global _controller
    if _controller is None:
        # scipy carries its own OpenBLAS (scipy.linalg and numba's np.dot use it): load it
        # before the libraries are listed
        import scipy.linalg  # noqa: F401
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController().select(user_api="blas")
    return _controller


class _OneBlasThread:
    """The process's one limit of BLAS to one thread, reference-counted.

    OpenBLAS's thread count is one per process, but its limits are taken from many threads
    (the fit's, a compute's, the pool's callers).  threadpoolctl lets one Python thread at a
    time change it and ignores the others, so limits opened and closed in different threads
    would restore each other's counts out of order — BLAS left at one thread for good.
    Here the first holder sets the limit and the last one restores the count it found,
    both from one dedicated thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._limit: Any = None
        self._setter: tuple[int, ThreadPoolExecutor] | None = None  # (pid, one thread)

    def _in_setter(self, fn: Callable[[], R]) -> R:
        if self._setter is None or self._setter[0] != os.getpid():
            self._setter = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="fsdask-blas"))
        return self._setter[1].submit(fn).result()

    def acquire(self) -> None:
        with self._lock:
            if self._holders == 0:
                self._limit = self._in_setter(lambda: _blas().limit(limits=1))
            self._holders += 1

    def release(self) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders == 0 and self._limit is not None:
                limit, self._limit = self._limit, None
                self._in_setter(limit.restore_original_limits)

    def after_fork(self) -> None:
        self._lock, self._holders, self._limit, self._setter = threading.Lock(), 0, None, None


_ONE_BLAS_THREAD = _OneBlasThread()


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS limited to one thread in the whole process while the context is open.

    Nested and concurrent uses, from any threads, share one limit: it holds while any is
    open, and the last to close restores the thread count it found.  A limit the program
    holds itself with threadpoolctl (``with threadpool_limits(...)``) takes precedence
    while it is open.  A BLAS whose count is per thread (MKL, OpenBLAS built on OpenMP)
    is not limited by it.

    Returns
    -------
    context manager.  Memory: none.
    """
    _ONE_BLAS_THREAD.acquire()
    try:
        yield
    finally:
        _ONE_BLAS_THREAD.release()


def _threaded_workers() -> int:
    """Worker threads of the threaded scheduler if it is the one in use, else 0."""
    if dask.base.get_scheduler() not in (None, dask.threaded.get):  # None: arrays' default, threads
        return 0
    return int(dask.config.get("num_workers", None) or cores())


class _OneBlasThreadWhileComputing(Callback):
    """A dask callback: BLAS limited to one thread from the start to the end of each compute
    on the threaded scheduler with several workers."""

    def __init__(self) -> None:
        super().__init__()
        self._held: list[bool] = []

    def _start(self, dsk: Any) -> None:
        hold = _threaded_workers() >= 2
        if hold:
            _ONE_BLAS_THREAD.acquire()
        self._held.append(hold)

    def _finish(self, dsk: Any, state: Any, errored: bool) -> None:
        if self._held and self._held.pop():
            _ONE_BLAS_THREAD.release()


def blas_threads_for(X: da.Array) -> ContextManager:
    """One BLAS thread per task while several blocks of X run in parallel threads.

    The blocks may be feature blocks (all samples × feature block) or sample blocks (row
    blocks as a store chunked by samples is read): either way several tasks run at once.  A
    single-block array (one task at a time) keeps the BLAS threads: its products are then
    the only parallelism.  Between computes the client keeps its BLAS threads.

    Parameters
    ----------
    X : dask array (n, p), chunked by feature blocks, sample blocks or both

    Returns
    -------
    context manager.  Memory: none.
    """
    if X.npartitions < 2:
        return contextlib.nullcontext()
    return _OneBlasThreadWhileComputing()


def fit_threads(X: da.Array) -> ContextManager:
    """The BLAS threads of a fit on X: the door :meth:`fsdask.base.Selector.fit` enters.

    Parameters
    ----------
    X : dask array (n, p), chunked by feature blocks, sample blocks or both

    Returns
    -------
    context manager.  X of at most :data:`SMALL_FIT_ELEMENTS` values: one BLAS thread for
    the whole fit, computes and client-side algebra alike.  Larger X:
    :func:`blas_threads_for` (one BLAS thread per task inside parallel computes, ``cores()``
    threads on the client).  Memory: none.
    """
    if X.size <= SMALL_FIT_ELEMENTS:
        return one_blas_thread()
    return blas_threads_for(X)


# --------------------------------------------------------------------------- the pool
_pool_lock = threading.Lock()
_pool: tuple[int, int, ThreadPoolExecutor] | None = None  # (pid, threads, executor)
_in_pool = threading.local()


def _after_fork() -> None:
    """In a forked child: fresh locks (a parent's thread may have held one at the fork)."""
    global _pool_lock
    _pool_lock = threading.Lock()
    _ONE_BLAS_THREAD.after_fork()


os.register_at_fork(after_in_child=_after_fork)


def _executor() -> ThreadPoolExecutor:
    """The process's pool of ``cores()`` threads, made again after a fork (the child has
    none of the parent's threads) or when the core count changed."""
    global _pool
    size = cores()
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid() or _pool[1] != size:
            old = _pool
            _pool = (os.getpid(), size, ThreadPoolExecutor(size, thread_name_prefix="fsdask"))
            if old is not None and old[0] == os.getpid():
                old[2].shutdown(wait=False)  # its running tasks finish; it takes no more
        return _pool[2]


def _as_pool_task(fn: Callable[[T], R]) -> Callable[[T], R]:
    def task(item: T) -> R:
        _in_pool.active = True
        try:
            return fn(item)
        finally:
            _in_pool.active = False

    return task


def parallel_map(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[fn(item) for item in items]`` on fsdask's thread pool, in order.

    At most ``cores()`` tasks run at once in the whole process, whoever calls.  While they
    run BLAS has one thread (:func:`one_blas_thread`).  One item, or a call from inside a
    pool task (which would otherwise wait for threads its own caller holds), runs in the
    calling thread, BLAS untouched.  ``fn`` should release the GIL (NumPy, BLAS,
    ``nogil`` numba kernels, scipy's ufuncs) for the threads to gain anything; results do
    not depend on the number of threads.

    Parameters
    ----------
    fn : callable ``item -> result``
    items : iterable, consumed at once

    Returns
    -------
    list of the results, in the order of ``items``.  Memory: the results.
    """
    items = list(items)
    if len(items) <= 1 or getattr(_in_pool, "active", False):
        return [fn(item) for item in items]
    task, pool = _as_pool_task(fn), _executor()
    with one_blas_thread():  # until every task has ended, the failed ones' siblings too
        futures = [pool.submit(task, item) for item in items]
        wait(futures)
    return [f.result() for f in futures]
