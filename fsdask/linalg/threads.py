"""Cores, the one thread pool, and how many BLAS threads run where.

A fit never runs more threads than its share of the cores:

* :func:`cores` counts the cores this process may use (``dask.system.CPU_COUNT``: the CPU
  affinity and a cgroup quota — a pod's CPU limit — count; ``os.cpu_count()`` sees the
  whole machine);
* :func:`parallel_map` is the one thread pool (``cores()`` threads, shared by the process):
  in-memory column sweeps, the proximal step, p-values.  While its tasks run BLAS has one
  thread — the tasks are the parallelism;
* :func:`blas_threads_for` gives one BLAS thread per task while a graph of several feature
  blocks runs on the threaded scheduler (a dask callback, from the start to the end of each
  compute); the client keeps its BLAS threads between computes;
* :func:`fit_threads` is the door :meth:`fsdask.base.Selector.fit` enters: a fit on a small
  X (at most :data:`SMALL_FIT_ELEMENTS` values) runs with one BLAS thread throughout; a
  larger one keeps ``cores()`` BLAS threads for its dense algebra on the client.

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


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS limited to one thread while the context is open; the count found is restored.

    BLAS's thread count is one per process.  threadpoolctl lets one Python thread at a
    time change OpenBLAS's: a limit opened in another thread while one is held leaves the
    count to the thread that holds it (they never restore each other's values out of
    order).  fsdask opens its limits in the thread that calls the fit, the compute or the
    pool, so nested limits restore in order.  A BLAS whose count is per thread (MKL,
    OpenBLAS built on OpenMP) is limited in the calling thread only.

    Returns
    -------
    context manager.  Memory: none.
    """
    limit = _blas().limit(limits=1)
    try:
        yield
    finally:
        limit.restore_original_limits()


def _threaded_workers() -> int:
    """Worker threads of the threaded scheduler if it is the one in use, else 0."""
    if dask.base.get_scheduler() not in (None, dask.threaded.get):  # None: arrays' default, threads
        return 0
    return int(dask.config.get("num_workers", None) or cores())


class _OneBlasThreadWhileComputing(Callback):
    """A dask callback: BLAS limited to one thread from the start to the end of each compute
    on the threaded scheduler with several workers (both hooks run in the calling thread)."""

    def __init__(self) -> None:
        super().__init__()
        self._limits: list[ContextManager | None] = []

    def _start(self, dsk: Any) -> None:
        limit = one_blas_thread() if _threaded_workers() >= 2 else None
        if limit is not None:
            limit.__enter__()
        self._limits.append(limit)

    def _finish(self, dsk: Any, state: Any, errored: bool) -> None:
        limit = self._limits.pop() if self._limits else None
        if limit is not None:
            limit.__exit__(None, None, None)


def blas_threads_for(X: da.Array) -> ContextManager:
    """One BLAS thread per task while several feature blocks of X run in parallel threads.

    A single-block array (one task at a time) keeps the BLAS threads: its products are then
    the only parallelism.  Between computes the client keeps its BLAS threads.

    Parameters
    ----------
    X : dask array, chunked (all samples, feature block)

    Returns
    -------
    context manager.  Memory: none.
    """
    if X.numblocks[-1] < 2:
        return contextlib.nullcontext()
    return _OneBlasThreadWhileComputing()


def fit_threads(X: da.Array) -> ContextManager:
    """The BLAS threads of a fit on X: the door :meth:`fsdask.base.Selector.fit` enters.

    Parameters
    ----------
    X : dask array (n, p), chunked (all samples, feature block)

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
