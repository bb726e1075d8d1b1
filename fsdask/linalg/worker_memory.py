"""Worker memory: whether one task of a fit fits in the workers of the cluster it runs on.

A ``distributed`` worker is paused when its process passes ``distributed.worker.memory.pause``
(80 %) of its memory limit and killed at ``terminate`` (95 %).  A task too big for that room
does not fail cleanly: the nanny kills and restarts the worker, the scheduler retries the task
elsewhere, and the run ends in a ``KilledWorker`` minutes later.  Before a fit computes,
:func:`admit` compares the largest task of X (:func:`task_memory`) with the room one task has
in a worker (:class:`WorkerMemory`) and stops with one line naming the block size, the limit
and the remedy when it does not fit.

A task reads one dask block of X.  For an fsdask store that is one stored chunk, compressed:
the read holds the compressed bytes and the decoded chunk, and the method's kernel a float64
working copy and a few float64 rows of per-feature results.  A Zarr v3 store with sharding is
already read in its inner chunks (zarr reads only the byte ranges of the inner chunks a task
asks for), so its tasks are inner-chunk sized whatever the shard size.

The limits come from :func:`fsdask.cluster.current_workers` (the workers the running
``distributed`` client sees, or a jobqueue cluster file's ``memory`` before its jobs start);
the decision is made once per fit, by :meth:`fsdask.fitting.FitContext.admit`.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import dask
import numpy as np
from dask.utils import format_bytes

from fsdask.errors import ClusterError

log = logging.getLogger("fsdask")

#: a worker process's own memory once it has imported fsdask's stack and compiled its kernels
#: (Python, dask, pandas, scipy, numba's LLVM), before it holds any data
WORKER_FIXED_COST = 290 * 2**20
#: float64 rows of per-feature results a task returns with its block (statistics, partial sums)
RESULT_ROWS = 8
#: the block sizes (MiB) suggested as a remedy, largest first: ``fsdask ingest --chunk-mb``
REMEDY_CHUNK_MB = (64, 32, 16, 8, 4, 2, 1)


@dataclasses.dataclass(frozen=True)
class TaskMemory:
    """The memory of one task reading a block of X (rows × cols of ``itemsize`` bytes).

    Attributes
    ----------
    rows, cols : int
        The largest block's shape (samples × features).
    itemsize : int
        Bytes per stored value.
    dtype : str
        The stored dtype's name, for messages.
    """

    rows: int
    cols: int
    itemsize: int
    dtype: str = "float32"

    @property
    def stored(self) -> int:
        """The block decoded, in the stored dtype."""
        return self.rows * self.cols * self.itemsize

    @property
    def read(self) -> int:
        """Reading the block: its compressed bytes (at most its decoded size: noise-like
        floats barely compress) and the decoded block."""
        return 2 * self.stored

    def working(self, cols: int | None = None) -> int:
        """The float64 working copy and per-feature results of ``cols`` features (all)."""
        cols = self.cols if cols is None else cols
        return self.rows * cols * 8 + RESULT_ROWS * cols * 8

    @property
    def nbytes(self) -> int:
        """The task's peak: the block read and the kernel's working copy and results."""
        return self.read + self.working()

    def in_pieces(self, room: int) -> int | None:
        """The widest piece (features) such that the block, read whole and held while its
        pieces are worked on one at a time, fits ``room``; None when even the read does not."""
        if self.read > room:
            return None
        cols = self.cols
        while cols > 1 and self.stored + self.working(cols) > room:
            cols = (cols + 1) // 2
        return cols if self.stored + self.working(cols) <= room else None

    def describe(self) -> str:
        """``64 MiB blocks (100 × 167772 float32)``."""
        return f"{format_bytes(self.stored)} blocks ({self.rows} × {self.cols} {self.dtype})"

    def with_block_bytes(self, nbytes: int) -> TaskMemory:
        """The same rows with feature blocks of about ``nbytes`` stored bytes."""
        cols = max(1, int(nbytes // max(self.rows * self.itemsize, 1)))
        return dataclasses.replace(self, cols=cols)


@dataclasses.dataclass(frozen=True)
class WorkerMemory:
    """The memory of the workers a fit runs on.

    Parameters
    ----------
    limit : int
        Bytes per worker process (the smallest worker's ``memory_limit``).
    threads : int
        Tasks a worker runs at once (its ``nthreads``; the largest over workers).
    source : str
        Where the limit comes from, for messages (``"the workers of tcp://…"``).
    remedy : str
        How to give the workers more memory, for messages; ``{limit}`` is replaced by the
        limit the tasks need (``"raise it (--memory-limit {limit} or more)"``).
    """

    limit: int
    threads: int = 1
    source: str = "the workers"
    remedy: str = "give each worker a memory_limit of {limit} or more"

    @property
    def usable(self) -> int:
        """Bytes a worker may reach before distributed pauses it (else terminates it)."""
        return int(self.limit * _threshold())

    @property
    def room(self) -> int:
        """Bytes one task may use: the usable memory less the worker's own, per thread."""
        return max(0, self.usable - WORKER_FIXED_COST) // max(1, self.threads)

    def limit_for(self, task: TaskMemory) -> int:
        """The per-worker limit under which ``threads`` such tasks fit."""
        return int((WORKER_FIXED_COST + self.threads * task.nbytes) / _threshold())


#: distributed's defaults of its thresholds (its config is registered when it is imported)
THRESHOLDS = {"pause": 0.8, "terminate": 0.95}


def _threshold() -> float:
    """The fraction of the limit a worker may use: distributed's pause threshold, else its
    terminate threshold, else all of it."""
    for key, default in THRESHOLDS.items():
        value = dask.config.get(f"distributed.worker.memory.{key}", default)
        if value:
            return float(value)
    return 1.0


def task_memory(X: Any) -> TaskMemory | None:
    """The memory of the largest task reading X, or None when X is not a dense dask array.

    Parameters
    ----------
    X : dask array (n, p); blocks of NumPy values (sparse blocks are not estimated)

    Returns
    -------
    TaskMemory or None.  Memory: none (only X's chunk sizes are read).
    """
    chunks = getattr(X, "chunks", None)
    meta = getattr(X, "_meta", None)
    if chunks is None or len(chunks) != 2 or not isinstance(meta, np.ndarray):
        return None
    dtype = np.dtype(X.dtype)
    rows, cols = max(chunks[0], default=0), max(chunks[1], default=0)
    return TaskMemory(int(rows), int(cols), dtype.itemsize, dtype.name)


def _chunk_remedy(task: TaskMemory, room: int) -> str:
    """``re-ingest with smaller blocks (fsdask ingest --chunk-mb 16)`` or ''."""
    for mb in REMEDY_CHUNK_MB:
        smaller = task.with_block_bytes(mb * 2**20)
        if smaller.stored < task.stored and smaller.nbytes <= room:
            return f"re-ingest with smaller blocks (`fsdask ingest --chunk-mb {mb}`)"
    return ""


def tidy_size(nbytes: float) -> str:
    """A size rounded up for a person to type: ``700MiB`` (100 MiB steps), ``12GiB``."""
    mib = nbytes / 2**20
    if mib <= 10 * 1024:
        return f"{int(-(-mib // 100) * 100)}MiB"
    return f"{int(-(-mib // 1024))}GiB"


def refusal(task: TaskMemory, workers: WorkerMemory) -> str:
    """The one line that stops a fit whose tasks do not fit the workers."""
    per = f" per thread ({workers.threads} threads each)" if workers.threads > 1 else " per task"
    remedies = [r for r in (_chunk_remedy(task, workers.room),) if r]
    remedies.append(workers.remedy.format(limit=tidy_size(workers.limit_for(task))))
    return (
        f"X's {task.describe()} need about {format_bytes(task.nbytes)} per task (the block "
        f"read, compressed and decoded, and its float64 copy), but {workers.source} have "
        f"{format_bytes(workers.limit)} each, which leaves about {format_bytes(workers.room)}"
        f"{per} after a worker's own ~{format_bytes(WORKER_FIXED_COST)}: {' or '.join(remedies)}"
    )


def split_blocks(X: Any, cols: int) -> Any:
    """X with each feature block split into equal pieces of at most ``cols`` features (a
    piece never spans two blocks: a task holds one block)."""
    out = []
    for w in X.chunks[1]:
        k = -(-w // cols)
        out += [w // k + (1 if i < w % k else 0) for i in range(k)]
    return X.rechunk((X.chunks[0], tuple(out)))


def admit(X: Any, workers: WorkerMemory | None) -> Any:
    """X as the fit's tasks read it, when its largest task fits the workers' memory.

    When the whole task does not fit but the read of a block does, each block is read whole
    once and the method works on pieces of it (:func:`split_blocks`): the float64 copy and
    results are then a piece's, not the block's.

    Parameters
    ----------
    X : ndarray or dask array (n, p)
    workers : WorkerMemory or None
        The workers of the distributed cluster the fit runs on (None: the threaded or
        synchronous scheduler, or workers without a memory limit — nothing to check).

    Returns
    -------
    X, or X in pieces of its blocks.  Memory: none.

    Raises
    ------
    ClusterError
        One line: the block size, the workers' limit and the remedies.
    """
    task = task_memory(X)
    if workers is None or task is None or task.nbytes <= workers.room:
        return X
    cols = task.in_pieces(workers.room)
    if cols is None:
        raise ClusterError(refusal(task, workers))
    log.info(
        "X's %s do not fit the %s room of a task on %s: each is read whole and worked on "
        "in pieces of %d features",
        task.describe(),
        format_bytes(workers.room),
        workers.source,
        cols,
    )
    return split_blocks(X, cols)
