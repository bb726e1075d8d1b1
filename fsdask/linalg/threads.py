"""How many BLAS threads a block task may use.

The threaded scheduler runs one task per core at once; if each task's BLAS call also
starts one thread per core, 2 cores carry 4 busy threads and OpenBLAS's spinning threads
steal time from each other.  The limit holds only *while a graph runs* (a dask callback
sets it when a compute starts and restores it when it finishes): the small dense algebra
a method does on the client between computes (eigensolves, CPFS's KKT scans) keeps every
BLAS thread.
``distributed`` workers already start with ``OPENBLAS_NUM_THREADS=1``.
"""

from __future__ import annotations

import contextlib
from typing import Any, ContextManager

import dask
import dask.array as da
import dask.threaded
from dask.callbacks import Callback


def _threaded_workers() -> int:
    """Worker threads of the threaded scheduler if it is the one in use, else 0."""
    if dask.base.get_scheduler() not in (None, dask.threaded.get):  # None: arrays' default, threads
        return 0
    return int(dask.config.get("num_workers", None) or dask.system.CPU_COUNT)


class _OneBlasThreadWhileComputing(Callback):
    """A dask callback: BLAS limited to one thread from the start to the end of each compute."""

    def __init__(self) -> None:
        super().__init__()
        from threadpoolctl import ThreadpoolController

        self._controller = ThreadpoolController()
        self._limits: list[Any] = []

    def _start(self, dsk: Any) -> None:
        self._limits.append(
            self._controller.limit(limits=1, user_api="blas") if _threaded_workers() >= 2 else None
        )

    def _finish(self, dsk: Any, state: Any, errored: bool) -> None:
        lim = self._limits.pop() if self._limits else None
        if lim is not None:
            lim.restore_original_limits()


def blas_threads_for(X: da.Array) -> ContextManager:
    """One BLAS thread per task while several feature blocks of X run in parallel threads.

    A single-block array (one task at a time) keeps the BLAS threads: its products are then
    the only parallelism.  Used by :meth:`fsdask.base.Selector.fit` around a fit.
    """
    if X.numblocks[-1] < 2:
        return contextlib.nullcontext()
    try:
        return _OneBlasThreadWhileComputing()
    except ImportError:  # pragma: no cover - threadpoolctl is a declared dependency
        return contextlib.nullcontext()
