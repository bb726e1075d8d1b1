"""Computing chunked dask arrays without one task that holds them whole.

Below the linalg layer so that every layer (io's ingestion, the input checks, the
algorithms) brings per-feature results to the client the same way.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable

import dask
import dask.array as da
import numpy as np
from dask.array.core import concatenate3


def compute_blocks(*arrays: Any) -> tuple:
    """``dask.compute(*arrays)``, with each dask array's chunks sent to the client one by one
    and placed there into the result as they arrive.

    ``dask.compute`` of a chunked array adds one finalize task that concatenates every chunk
    — on a worker, under distributed: its memory grows with the number of features p, not
    with the block size (100 × 5·10⁶ t-test: ~400 MB in one task, a 500 MB worker killed).
    Computing the chunks as separate keys (``to_delayed``) keeps every task one block's
    worth; the arrays still share their reads of X (one graph, one pass).  Under a
    distributed client finished chunks are fetched in batches and released on the workers
    (:func:`_gather_as_completed`), so the workers hold only the chunks not yet fetched
    instead of the whole result.  On the client each chunk is copied into the result as it
    arrives and then dropped (:class:`_Join`), so a result of S bytes peaks at about S plus
    the chunks in flight, not 2·S (every chunk, then their concatenation): the PCA
    baselines' and CPFS's factor B is the largest array a fit holds.  Non-dask arguments are
    passed through.

    Returns
    -------
    tuple, one NumPy array per dask array (as ``dask.compute`` gives it: the chunks' common
    dtype) and the other arguments as they are.  Memory: the results and the chunks in
    flight (a batch under distributed, one per thread otherwise).
    """
    # split without optimising: arrays that share X keep sharing its read tasks (optimised
    # one by one, each would fuse its own read of every block: one pass per array)
    grids = [
        a.to_delayed(optimize_graph=False) if isinstance(a, da.Array) else None for a in arrays
    ]
    joins = [None if g is None else _Join(a, g.shape) for a, g in zip(arrays, grids)]
    flat = [d for g in grids if g is not None for d in g.ravel()]
    slots = [(j, ix) for j, g in zip(joins, grids) if g is not None for ix in np.ndindex(g.shape)]

    def put(k: int, value: Any) -> None:
        join, ix = slots[k]
        join.put(ix, value)

    # nothing lazy (an in-memory loop, e.g. SparsePM on a NumPy A): no scheduler look-up
    client = _distributed_client() if flat else None
    if not flat:
        pass
    elif client is not None:
        _gather_as_completed(client, flat, put)
    elif _in_process():  # each chunk placed by the thread that made it, then released
        dask.compute(*[dask.delayed(put, pure=False)(k, d) for k, d in enumerate(flat)])
    else:  # a scheduler of other processes: the chunks come back together
        for k, value in enumerate(dask.compute(*flat)):
            put(k, value)
    return tuple(a if j is None else j.value() for a, j in zip(arrays, joins))


def _in_process() -> bool:
    """Whether ``dask.compute`` here runs its tasks in this process (threads or sync), where
    a task may write into an array the caller holds."""
    import dask.local
    import dask.threaded

    scheduler = dask.base.get_scheduler()
    return scheduler is None or scheduler in (dask.threaded.get, dask.local.get_sync)


class _Join:
    """The chunks of one dask array, placed into one NumPy array as they arrive.

    The array is allocated before anything runs, with the dask array's shape and dtype (so
    no task allocates it); a chunk that is a NumPy array of its place's shape and of that
    dtype is copied into place (and the caller drops it).  From the first chunk that is not
    (another dtype than declared, another type), the chunks are kept and joined at the end
    by dask's ``concatenate3``, which gives ``dask.compute``'s result (the common dtype).
    A single chunk, or chunks of unknown sizes, are joined that way from the start.  Chunks
    may arrive in any order, from several threads.

    Parameters
    ----------
    a : dask array
    grid : tuple of int, its number of chunks along each axis
    """

    def __init__(self, a: da.Array, grid: tuple):
        self.grid = grid
        self.out: np.ndarray | None = None
        self.placed: set = set()
        self.kept: dict = {}
        self.lock = threading.Lock()
        known = not any(np.isnan(c) for cs in a.chunks for c in cs)
        if known and int(np.prod(grid)) > 1 and a.dtype.kind in "biufc":
            self.starts = [np.concatenate([[0], np.cumsum(c)]).astype(int) for c in a.chunks]
            self.out = np.empty(a.shape, dtype=a.dtype)

    def region(self, ix: tuple) -> tuple:
        return tuple(slice(s[i], s[i + 1]) for s, i in zip(self.starts, ix))

    def put(self, ix: tuple, value: Any) -> None:
        """Chunk ``ix`` of the grid."""
        with self.lock:
            region = None if self.out is None or self.kept else self.region(ix)
            place = (
                region is not None
                and type(value) is np.ndarray
                and value.dtype == self.out.dtype
                and value.shape == tuple(r.stop - r.start for r in region)
            )
            if place:
                self.placed.add(ix)
            else:
                # the chunks placed so far become views of their places: joined with the rest
                for done in self.placed:
                    self.kept[done] = self.out[self.region(done)]
                self.placed.clear()
                self.kept[ix] = value
        if place:  # outside the lock: threads copy into disjoint places at once
            self.out[region] = value

    def value(self) -> np.ndarray:
        """The joined array, once every chunk was put."""
        if not self.kept:
            return self.out
        if int(np.prod(self.grid)) == 1:
            return np.asarray(next(iter(self.kept.values())))
        blocks = np.empty(self.grid, dtype=object)
        for ix in np.ndindex(self.grid):
            blocks[ix] = self.kept[ix]
        return concatenate3(blocks.tolist())


def compute_each(tasks: list) -> list:
    """The values of ``tasks`` (dask delayed objects of one graph), as
    :func:`compute_blocks` brings chunks: under a distributed client fetched in batches as
    they finish and released on the workers, else from one ``dask.compute``.

    Parameters
    ----------
    tasks : list of dask.delayed.Delayed

    Returns
    -------
    list, the values in the order of ``tasks``.
    """
    if not tasks:
        return []
    client = _distributed_client()
    if client is None:
        return list(dask.compute(*tasks))
    values: list = [None] * len(tasks)
    _gather_as_completed(client, list(tasks), values.__setitem__)
    return values


def _distributed_client() -> Any:
    """The ``distributed.Client`` that ``dask.compute`` would use here, else None."""
    if "distributed" not in sys.modules:  # no client can exist; do not import distributed
        return None
    from distributed import Client

    owner = getattr(dask.base.get_scheduler(), "__self__", None)
    return owner if isinstance(owner, Client) else None


def _gather_as_completed(client: Any, delayeds: list, sink: Callable[[int, Any], None]) -> None:
    """The values of ``delayeds`` (one graph: shared reads stay shared), fetched as their
    tasks finish, handed to ``sink(i, value)`` (i: the place in ``delayeds``) and released,
    so that neither the workers nor this function keep results the caller has.

    Each request fetches every result finished since the previous one
    (``as_completed(...).batches()``): while the client receives a large chunk the workers
    compute the next ones, and chunks that finish faster than the client fetches them are
    fetched together, one round trip for many.  A failed task raises its exception here, as
    ``dask.compute`` would.
    """
    from distributed import as_completed

    futures = client.compute(delayeds)
    slots: dict[Any, list[int]] = {}
    for i, f in enumerate(futures):
        slots.setdefault(f.key, []).append(i)
    try:
        for batch in as_completed(futures, loop=client.loop).batches():
            for fut, value in zip(batch, client.gather(batch)):
                for i in slots[fut.key]:
                    sink(i, value)
                fut.release()
    finally:
        client.cancel([f for f in futures if f.status == "pending"])
