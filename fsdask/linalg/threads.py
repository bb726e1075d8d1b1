"""How many BLAS threads a block task may use.

The threaded scheduler runs one task per core at once; if each task's BLAS call also
starts one thread per core, 2 cores carry 4 busy threads and OpenBLAS's spinning threads
steal time from each other (Q-α at 10⁶ features: 150 s → 100 s with one BLAS thread per
task).  ``distributed`` workers already start with ``OPENBLAS_NUM_THREADS=1``.
"""

from __future__ import annotations

import contextlib
from typing import ContextManager

import dask
import dask.array as da
import dask.threaded


def _threaded_workers() -> int:
    """Worker threads of the threaded scheduler if it is the one in use, else 0."""
    if dask.base.get_scheduler() not in (None, dask.threaded.get):  # None: arrays' default, threads
        return 0
    return int(dask.config.get("num_workers", None) or dask.system.CPU_COUNT)


def blas_threads_for(X: da.Array) -> ContextManager:
    """One BLAS thread per task while several feature blocks run in parallel threads.

    A single-block array (one task at a time) keeps the BLAS threads: its products are then
    the only parallelism.  Used by :meth:`fsdask.base.SelectorMixin.fit` around a fit.
    """
    if X.numblocks[-1] < 2 or _threaded_workers() < 2:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a declared dependency
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")
