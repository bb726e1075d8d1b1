"""The execution seam: where an array lives and how often the big matrix is swept.

Methods ask this module three questions instead of deciding them with dask themselves:

* **in memory or chunked?**  :meth:`Execution.fits`, :meth:`Execution.hold` and
  :meth:`Execution.local` (X itself, for iterative methods) compare a size with ONE memory
  budget, the dask config key ``fsdask.memory-budget`` (default
  ``1GiB``, registered by :mod:`fsdask._config` from ``fsdask/fsdask.yaml``); a call's
  ``memory_budget=`` overrides it, and so does ``dask.config.set`` around the call;
* **persist or recompute?**  :meth:`Execution.operator` wraps a matrix derived column by
  column from X (N × J) as a linear operator that is held in memory, persisted chunked
  like X, or recomputed from X at every product;
* **how many passes over X?**  every sweep of a dask graph that reads X goes through
  :meth:`Execution.compute`, :meth:`Execution.persist`, :meth:`Execution.hold`,
  :meth:`Execution.local`, :meth:`Execution.map_columns`, :meth:`Execution.sum_columns` or
  :meth:`Execution.map_and_sum_columns` and is counted in
  :attr:`Execution.passes` (sweeps over in-memory columns read no storage and are not);
* **in what precision are the large Gram products taken?**  :meth:`Execution.gram_dtype`
  follows the data (float32 stores: float32 BLAS) unless the dask config key
  ``fsdask.gram-precision`` is ``"float64"``.

The two places an array can live implement one small interface, :class:`ArrayBackend`
(the habit of xarray's ``ChunkManagerEntrypoint``: algorithms talk to the interface, not to
dask).  :class:`NumpyBackend` sweeps in-memory columns in fixed slices of ``SLICE``
columns on fsdask's one thread pool (:mod:`fsdask.linalg.threads`) — the numba kernels release the GIL, and fixed slices keep every
result independent of the number of threads; :class:`DaskBackend` maps and tree-sums over
feature blocks with :mod:`fsdask.linalg.reductions`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Iterator, Sequence

import dask
import dask.array as da
import numba
import numpy as np
import scipy.sparse
from dask.utils import parse_bytes

from fsdask._blocks import compute_each
from fsdask._config import (  # noqa: F401  (CONFIG_KEY re-exported)
    CONFIG_KEY,
    gram_precision,
    hold_x_below,
    memory_budget,
)
from fsdask.linalg.reductions import (
    compute_blocks,
    map_and_sum,
    map_features,
    sum_over_blocks,
    sum_over_row_blocks,
)
from fsdask.linalg.threads import cores, parallel_map
from fsdask.linalg.worker_memory import WorkerMemory
from fsdask.linalg.worker_memory import admit as admit_blocks

#: columns per task when in-memory columns are swept (fixed: results do not depend on threads)
SLICE = 2048
#: bytes of stored values per row slice when in-memory rows are swept (:meth:`Execution.sum_blocks`)
ROW_SLICE_BYTES = 16 * 2**20
#: row slices merged per node of the in-memory tree sum (as dask's ``split_every``)
ROW_SPLIT = 8
#: columns of an in-memory X's merged sums handed to one ``finish`` call of
#: :meth:`Execution.sum_blocks_each` (fixed: results do not depend on threads)
FINISH_SLICE = 65536
#: copies of a tree-summed k × k result alive at once — the ``split_every`` (8) partial sums
#: one tree node adds — what a Gram of that size costs, in units of k²·8 bytes
TREE_SUM_COPIES = 8


_budget_bytes = memory_budget


def fits(nbytes: float, budget: Any = None, copies: int = 1) -> bool:
    """Whether ``copies`` arrays of ``nbytes`` each fit the memory budget.

    Parameters
    ----------
    nbytes : float, the size of one array
    budget : int, str or None, a per-call budget (None: :func:`memory_budget`, the dask
        config key ``fsdask.memory-budget``)
    copies : int, how many such arrays are held at once

    Returns
    -------
    bool.  Memory: none; this is the test every in-memory-or-dask decision goes through.
    """
    return copies * float(nbytes) <= memory_budget(budget)


# --------------------------------------------------------------------------- backends
class ArrayBackend(ABC):
    """How one kind of array (N × J, samples × features) is swept column block by block.

    ``fn(x_b, *v_b)`` receives a block of columns and the matching slices of ``vectors``
    (arrays whose last axis is the feature axis, length J).
    """

    name: str

    @abstractmethod
    def owns(self, x: Any) -> bool:
        """Whether ``x`` is an array of this backend."""

    @abstractmethod
    def map_columns(
        self,
        fn: Callable[..., np.ndarray],
        x: Any,
        *vectors: np.ndarray,
        out_rows: int | None = None,
        dtype: Any = np.float64,
    ) -> np.ndarray:
        """``[fn(x_b, *v_b)]_b`` joined along the feature axis: (J,) or (out_rows, J), in memory."""

    @abstractmethod
    def sum_columns(
        self, fn: Callable[..., np.ndarray], x: Any, *vectors: np.ndarray, shape: Sequence[int]
    ) -> np.ndarray:
        """``Σ_b fn(x_b, *v_b)`` (float64 of ``shape``), in memory."""

    @abstractmethod
    def map_and_sum_columns(
        self,
        fn: Callable[..., tuple],
        x: Any,
        *vectors: np.ndarray,
        shapes: Sequence[Sequence[int]],
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """``fn(x_b, *v_b) -> (f_b, [s_1b, …])``: the f_b joined along the feature axis and
        each ``Σ_b s_ib`` (float64 of ``shapes[i]``), in memory, from one sweep."""

    @abstractmethod
    def sum_blocks(
        self,
        fn: Callable[..., np.ndarray],
        x: Any,
        *row_vectors: np.ndarray,
        shape: Sequence[int],
        maxima: int = 0,
        columns: Sequence[np.ndarray] = (),
    ) -> np.ndarray:
        """``Σ_i fn(x_ij, *v_i, *c_j)`` over row blocks i, joined over feature blocks j:
        float64 ``(*shape, J)``, in memory; see :meth:`Execution.sum_blocks`."""

    @abstractmethod
    def sum_blocks_each(
        self,
        fn: Callable[..., np.ndarray],
        x: Any,
        *row_vectors: np.ndarray,
        shape: Sequence[int],
        maxima: int,
        columns: Sequence[np.ndarray],
        finish: Callable[[Iterator[np.ndarray], int, int], Any],
        step: int,
    ) -> list:
        """``finish(pieces_j, start_j, width_j)`` of every feature block's merged sums (those of
        :meth:`sum_blocks`), where they were merged; see :meth:`Execution.sum_blocks_each`."""

    @abstractmethod
    def take_columns(self, x: Any, idx: np.ndarray) -> Any:
        """The columns ``idx`` of x, same backend (lazy for dask)."""

    @abstractmethod
    def gather(self, x: Any) -> np.ndarray:
        """x as a contiguous NumPy array."""


class NumpyBackend(ArrayBackend):
    """In-memory arrays: fixed column slices on fsdask's thread pool
    (:func:`~fsdask.linalg.threads.parallel_map`)."""

    name = "numpy"

    def owns(self, x: Any) -> bool:
        # scipy.sparse in memory: swept by row slices (sum_blocks) only
        return isinstance(x, np.ndarray) or scipy.sparse.issparse(x)

    @staticmethod
    def _slices(J: int) -> list[tuple[int, int]]:
        return [(j0, min(J, j0 + SLICE)) for j0 in range(0, J, SLICE)]

    def _run(
        self, fn: Callable[..., np.ndarray], x: np.ndarray, vectors: Sequence[np.ndarray]
    ) -> list:
        def one(j):
            j0, j1 = j
            return fn(x[:, j0:j1], *(v[..., j0:j1] for v in vectors))

        return parallel_map(one, self._slices(x.shape[1]))

    def map_columns(self, fn, x, *vectors, out_rows=None, dtype=np.float64):
        parts = self._run(fn, x, vectors)
        if not parts:
            return np.zeros((0,) if out_rows is None else (out_rows, 0), dtype=dtype)
        return np.concatenate(parts, axis=-1)

    def sum_columns(self, fn, x, *vectors, shape):
        parts = self._run(fn, x, vectors)
        total = np.zeros(tuple(shape))
        for p in parts:
            total += p
        return total

    def map_and_sum_columns(self, fn, x, *vectors, shapes):
        parts = self._run(fn, x, vectors)
        totals = [np.zeros(tuple(s)) for s in shapes]
        for _, sums in parts:
            for t, s in zip(totals, sums):
                t += s
        mapped = np.concatenate([np.asarray(f, dtype=np.float64) for f, _ in parts] or [[]])
        return mapped, totals

    def sum_blocks(self, fn, x, *row_vectors, shape, maxima=0, columns=()):
        if scipy.sparse.issparse(x):
            x = scipy.sparse.csr_matrix(x)  # a CSR matrix is sliced by rows without a copy
        bounds = _row_slices(x)

        def node(g: int) -> np.ndarray:
            # ROW_SPLIT consecutive slices summed in order: a fixed tree, whatever the threads
            acc = None
            for r0, r1 in bounds[g : g + ROW_SPLIT]:
                part = np.asarray(
                    fn(x[r0:r1], *(v[r0:r1] for v in row_vectors), *columns), dtype=np.float64
                )
                acc = part.copy() if acc is None else _merge(acc, part, maxima)
            return acc

        starts = list(range(0, len(bounds), ROW_SPLIT))
        total = None
        wave = max(1, cores())
        for w0 in range(0, len(starts), wave):  # at most `wave` node results alive at once
            for part in parallel_map(node, starts[w0 : w0 + wave]):
                total = part if total is None else _merge(total, part, maxima)
        if total is None:  # no rows
            return np.zeros((*tuple(shape), x.shape[1]))
        return total

    def sum_blocks_each(self, fn, x, *row_vectors, shape, maxima, columns, finish, step):
        total = self.sum_blocks(fn, x, *row_vectors, shape=shape, maxima=maxima, columns=columns)
        J = total.shape[-1]

        def one(j0: int) -> Any:
            part = total[..., j0 : j0 + FINISH_SLICE]
            return finish(_pieces(part, step), j0, part.shape[-1])

        return parallel_map(one, range(0, J, FINISH_SLICE) if J else [0])

    def take_columns(self, x, idx):
        return x if idx.size == x.shape[1] else np.ascontiguousarray(x[:, idx])

    def gather(self, x):
        return np.ascontiguousarray(x)


class DaskBackend(ArrayBackend):
    """Dask arrays chunked (all samples, feature block): per-block maps and tree sums."""

    name = "dask"

    def owns(self, x: Any) -> bool:
        return isinstance(x, da.Array)

    @staticmethod
    def _aligned(x: da.Array, vectors: Sequence[np.ndarray]) -> list[da.Array]:
        return [da.from_array(np.asarray(v), chunks=(*v.shape[:-1], x.chunks[1])) for v in vectors]

    def map_columns(self, fn, x, *vectors, out_rows=None, dtype=np.float64):
        return compute_blocks(
            map_features(  # joined on the client, not in one task
                fn, x, *self._aligned(x, vectors), out_rows=out_rows, dtype=dtype
            )
        )[0]

    def sum_columns(self, fn, x, *vectors, shape):
        return sum_over_blocks(fn, x, *self._aligned(x, vectors), shape=shape).compute()

    def map_and_sum_columns(self, fn, x, *vectors, shapes):
        mapped, sums = map_and_sum(fn, x, *self._aligned(x, vectors), shapes=shapes)
        mapped, *sums = compute_blocks(mapped, *sums)  # the map joined on the client
        return mapped, sums

    def sum_blocks(self, fn, x, *row_vectors, shape, maxima=0, columns=()):
        lazy = sum_over_row_blocks(fn, x, *row_vectors, columns=columns, shape=shape, maxima=maxima)
        return compute_blocks(lazy)[0]  # feature blocks joined on the client

    def sum_blocks_each(self, fn, x, *row_vectors, shape, maxima, columns, finish, step):
        starts = [int(j0) for j0 in np.cumsum((0, *x.chunks[1][:-1]))]
        if len(x.chunks[0]) == 1:  # every sample in the block: its sums made piece by piece
            blocks = x.to_delayed(optimize_graph=False).reshape(-1)
            task = dask.delayed(_block_pieces, pure=True)
            spans = zip(starts, np.cumsum(x.chunks[1]))
            cols = [tuple(c[..., j0:j1] for c in columns) for j0, j1 in spans]
            return compute_each(
                [
                    task(b, fn, row_vectors, c, step=step, finish=finish, start=j0)
                    for b, c, j0 in zip(blocks, cols, starts)
                ]
            )
        lazy = sum_over_row_blocks(fn, x, *row_vectors, columns=columns, shape=shape, maxima=maxima)
        # the sums and the maxima rows come as two chunks: joined, one block per feature block
        lazy = lazy.rechunk({i: -1 for i in range(lazy.ndim - 1)})
        blocks = lazy.to_delayed(optimize_graph=False).reshape(-1)
        task = dask.delayed(_merged_pieces, pure=True)
        return compute_each(
            [task(b, step=step, finish=finish, start=j0) for b, j0 in zip(blocks, starts)]
        )

    def take_columns(self, x, idx):
        # keep X's block width: a fancy-indexed selection would otherwise come as one block
        return x if idx.size == x.shape[1] else x[:, idx].rechunk({1: x.chunks[1][0]})

    def gather(self, x):
        return np.ascontiguousarray(compute_blocks(x)[0])


def _pieces(sums: np.ndarray, step: int) -> Iterator[np.ndarray]:
    """Consecutive slices of ``step`` columns of merged sums."""
    return (sums[..., a : a + step] for a in range(0, sums.shape[-1], step))


def _merged_pieces(sums: np.ndarray, *, step: int, finish: Callable, start: int) -> Any:
    """A feature block's ``finish`` over its merged sums (the task of a sample-chunked X)."""
    return finish(_pieces(sums, step), start, sums.shape[-1])


def _block_pieces(
    xb: Any, fn: Callable, rows: tuple, columns: tuple, *, step: int, finish: Callable, start: int
) -> Any:
    """A feature block's ``finish`` over its sums, made ``step`` columns at a time while
    they are in the CPU's cache (the task of a feature-blocked X); a CSR block's sums are
    made whole (slicing its columns would scan every non-zero each time)."""
    if scipy.sparse.issparse(xb):
        whole = np.asarray(fn(xb, *rows, *columns), dtype=np.float64)
        return finish(_pieces(whole, step), start, whole.shape[-1])

    def piece(a: int) -> np.ndarray:
        cols = (c[..., a : a + step] for c in columns)
        return np.asarray(fn(xb[:, a : a + step], *rows, *cols), dtype=np.float64)

    return finish((piece(a) for a in range(0, xb.shape[1], step)), start, xb.shape[1])


def _row_slices(x: Any) -> list[tuple[int, int]]:
    """Fixed row slices of an in-memory X of about :data:`ROW_SLICE_BYTES` stored values each
    (for CSR: its non-zeros and their column indices)."""
    n, p = x.shape
    if scipy.sparse.issparse(x):
        row_bytes = (x.data.itemsize + x.indices.itemsize) * x.nnz / max(n, 1)
    else:
        row_bytes = p * x.dtype.itemsize
    step = max(1, int(ROW_SLICE_BYTES // max(row_bytes, 1.0)))
    return [(r0, min(n, r0 + step)) for r0 in range(0, n, step)]


def _dense_rows(xb: Any) -> np.ndarray:
    """A few rows of a block (NumPy or scipy.sparse) as a float64 NumPy array."""
    return np.asarray(xb.toarray() if scipy.sparse.issparse(xb) else xb, dtype=np.float64)


def _merge(acc: np.ndarray, part: np.ndarray, maxima: int) -> np.ndarray:
    """``acc`` merged with ``part`` in place: summed, the last ``maxima`` rows by maximum."""
    k = acc.shape[0] - maxima
    acc[:k] += part[:k]
    if maxima:
        np.maximum(acc[k:], part[k:], out=acc[k:])
    return acc


NUMPY = NumpyBackend()
DASK = DaskBackend()
_BACKENDS: tuple[ArrayBackend, ...] = (NUMPY, DASK)


def backend_of(x: Any) -> ArrayBackend:
    """The backend that owns ``x`` (NumPy or dask)."""
    for b in _BACKENDS:
        if b.owns(x):
            return b
    raise TypeError(f"no fsdask array backend for {type(x).__name__}; use a NumPy or dask array")


# --------------------------------------------------------------------------- operators
class LinearOperator(ABC):
    """An N × J matrix Z seen through its products; ``passes`` counts sweeps over Z."""

    passes: int

    @property
    @abstractmethod
    def shape(self) -> tuple[int, int]: ...

    @abstractmethod
    def matvec(self, w: np.ndarray) -> np.ndarray:
        """``Z w`` (N,)."""

    @abstractmethod
    def rmatvec(self, s: np.ndarray) -> np.ndarray:
        """``sᵀ Z`` (J,)."""

    @abstractmethod
    def columns(self, idx: np.ndarray) -> np.ndarray:
        """``Z[:, idx]`` as float64 NumPy (N × |idx|)."""


@numba.njit(nogil=True, cache=True)
def _vec_mat_widened(A, v):  # pragma: no cover - compiled
    # vᵀ A in float64 for a C-ordered float32 A, row by row (unit stride, no reduction)
    N, J = A.shape
    g = np.zeros(J)
    for n in range(N):
        vn = v[n]
        for j in range(J):
            g[j] += vn * np.float64(A[n, j])
    return g


@numba.njit(nogil=True, fastmath=True, cache=True)
def _mat_vec_widened(A, v):  # pragma: no cover - compiled
    # A v in float64 for a C-ordered float32 A: one dot product per row
    N, J = A.shape
    out = np.empty(N)
    for n in range(N):
        acc = 0.0
        for j in range(J):
            acc += np.float64(A[n, j]) * v[j]
        out[n] = acc
    return out


def _widened_product(Z: np.ndarray, v: np.ndarray, transpose: bool) -> np.ndarray | None:
    """``Z v`` (or ``vᵀ Z``) in float64 for a float32 Z, C- or F-ordered, without the float64
    copy of Z NumPy makes for mixed types; None for other arrays (NumPy/BLAS then)."""
    if Z.dtype != np.float32:
        return None
    v = np.ascontiguousarray(v, dtype=np.float64)
    if Z.flags.c_contiguous:
        return _vec_mat_widened(Z, v) if transpose else _mat_vec_widened(Z, v)
    if Z.flags.f_contiguous:  # Zᵀ is C-ordered: the roles swap
        return _mat_vec_widened(Z.T, v) if transpose else _vec_mat_widened(Z.T, v)
    return None


class InMemoryOperator(LinearOperator):
    """Z held in memory (NumPy); each product is one BLAS call (or, for a float32 Z, one
    fused loop: NumPy would cast Z to a float64 copy on every product)."""

    def __init__(self, Z: np.ndarray):
        self.Z = Z
        self.passes = 0

    @property
    def shape(self) -> tuple[int, int]:
        return self.Z.shape

    def matvec(self, w):
        self.passes += 1
        out = _widened_product(self.Z, w, transpose=False)
        return self.Z @ w if out is None else out

    def rmatvec(self, s):
        self.passes += 1
        out = _widened_product(self.Z, s, transpose=True)
        return s @ self.Z if out is None else out

    def columns(self, idx):
        return np.asarray(self.Z[:, idx], dtype=np.float64)


class PersistedOperator(LinearOperator):
    """Z persisted chunked like X (dask, N × J); each product is one sweep over its blocks."""

    def __init__(self, Z: da.Array):
        self.Z = Z
        self.passes = 0

    @property
    def shape(self) -> tuple[int, int]:
        return self.Z.shape

    def matvec(self, w):
        self.passes += 1
        return DASK.sum_columns(
            lambda zb, wb: zb @ wb,
            self.Z,
            np.asarray(w, dtype=np.float64),
            shape=(self.Z.shape[0],),
        )

    def rmatvec(self, s):
        self.passes += 1
        return DASK.map_columns(lambda zb: s @ zb, self.Z)

    def columns(self, idx):
        self.passes += 1
        if idx.size == 0:
            return np.zeros((self.Z.shape[0], 0))
        # |idx| may be most of J: joined on the client, X's block width per task
        return np.asarray(DASK.gather(DASK.take_columns(self.Z, idx)), dtype=np.float64)


class RecomputedOperator(LinearOperator):
    """Z never stored: each product recomputes the columns it needs from X (a pass over X).

    ``block(x_b)`` gives ``Z_b`` (float64) and ``rblock(s)`` a function ``x_b ↦ sᵀ Z_b`` that
    does not form ``Z_b`` — worth it when ``rblock`` is much cheaper than storing N × J values.
    """

    def __init__(self, ex: Execution, X: da.Array, block: Callable, rblock: Callable):
        self.ex, self.X, self.block, self.rblock = ex, X, block, rblock
        self.passes = 0

    @property
    def shape(self) -> tuple[int, int]:
        return self.X.shape

    def columns(self, idx):
        self.passes += 1
        if idx.size == 0:
            return np.zeros((self.X.shape[0], 0))
        return self.block(self.ex.hold(self.X, idx, force=True))

    def matvec(self, w):
        nz = np.flatnonzero(w)
        return self.columns(nz) @ w[nz]

    def rmatvec(self, s):
        self.passes += 1
        return self.ex.map_columns(self.rblock(s), self.X)


# --------------------------------------------------------------------------- the plan
class Execution:
    """The decisions of one fit: the budget, where arrays live, and the passes over X.

    Parameters
    ----------
    memory_budget : int, float, str or None
        Bytes a method may hold in memory; ``None`` reads ``fsdask.memory-budget``.
    workers : WorkerMemory, optional
        The memory of the ``distributed`` workers the fit's tasks run on (None: this
        process's threads, or workers without a limit).

    Attributes
    ----------
    budget : int
        The budget in bytes.
    workers : WorkerMemory or None
        As given.
    passes : int
        Sweeps so far of dask graphs that read X.
    """

    def __init__(self, memory_budget: Any = None, workers: WorkerMemory | None = None):
        self.budget = _budget_bytes(memory_budget)
        self.workers = workers
        self.passes = 0

    def admit(self, X: Any) -> Any:
        """X as the fit's tasks will read it, checked against the workers' memory before
        anything is computed (:func:`fsdask.linalg.worker_memory.admit`): unchanged, in
        pieces of its blocks, or a one-line :class:`~fsdask.errors.ClusterError`."""
        return admit_blocks(X, self.workers)

    def fits(self, nbytes: float, copies: int = 1) -> bool:
        """Whether ``copies`` arrays of ``nbytes`` each fit the budget."""
        return copies * float(nbytes) <= self.budget

    def gram_dtype(self, data_dtype: Any) -> np.dtype:
        """The dtype of the BLAS products of a large Gram over data of ``data_dtype``.

        float32 (or narrower) data give float32 products — a vector instruction does twice
        as many float32 multiply-adds, S takes half the memory, and the data carry no more
        digits — unless
        ``fsdask.gram-precision`` is ``"float64"``; every other dtype gives float64.  The
        caller sums each batch's product into float64, so rounding does not grow with the
        number of features (one batch's rank update has relative error ~1e-7).
        """
        dt = np.dtype(data_dtype)
        narrow = dt.kind == "f" and dt.itemsize <= 4
        return np.dtype(np.float32 if narrow and gram_precision() == "data" else np.float64)

    def rows_per_chunk(self, row_bytes: float) -> int:
        """Rows per chunk of a row-chunked array whose rows take ``row_bytes`` each: a chunk
        holds at most min(budget, dask's ``array.chunk-size``) bytes, and at least one row."""
        cap = min(self.budget, parse_bytes(dask.config.get("array.chunk-size")))
        return max(1, int(cap // max(float(row_bytes), 1.0)))

    def compute(self, *arrays: Any) -> tuple:
        """``dask.compute(*arrays)``, counted as one pass (the arrays share their reads of X);
        chunked results are joined on the client (:func:`~fsdask._blocks.compute_blocks`)."""
        self.passes += 1
        return compute_blocks(*arrays)

    def persist(self, *arrays: Any) -> tuple:
        """``dask.persist(*arrays)``, counted as one pass."""
        self.passes += 1
        return dask.persist(*arrays)

    def hold(
        self, X: Any, idx: np.ndarray | None = None, force: bool = False
    ) -> np.ndarray | da.Array:
        """X's columns ``idx`` (all if None): in memory when N·|idx|·8 bytes fit the budget
        (or ``force``) — one pass over X — else lazy, chunked like X.

        Parameters
        ----------
        X : ndarray or dask array, N × J
        idx : int array of column indices, or None
        force : gather even above the budget (a small selection the caller knows is small)

        Returns
        -------
        ndarray (N × |idx|, contiguous) or dask array (N × |idx|, X's block width)
        """
        b = backend_of(X)
        idx = np.arange(X.shape[1]) if idx is None else np.asarray(idx, dtype=np.int64)
        cols = b.take_columns(X, idx)
        if b is NUMPY:
            return cols
        if force or self.fits(X.shape[0] * idx.size * 8):
            self.passes += 1
            return b.gather(cols)
        return cols

    def local(self, X: Any) -> Any:
        """X itself in memory (one pass) when it is small, else X unchanged.

        Small means at most ``fsdask.hold-x-below`` bytes (default 32 MiB) and within the
        budget.  An iterative method sweeps X once per iteration; on a small X each sweep
        through a dask graph costs more in building and scheduling it than in arithmetic,
        and held in memory every later sweep reads no storage.

        Returns
        -------
        ndarray (N × J, X's dtype) or X.  Memory: X's size, at most ``hold-x-below``.
        """
        if backend_of(X) is NUMPY:
            return X
        nbytes = X.size * X.dtype.itemsize
        if nbytes > hold_x_below() or not self.fits(nbytes):
            return X
        self.passes += 1
        return DASK.gather(X)

    def map_columns(
        self,
        fn: Callable[..., np.ndarray],
        x: Any,
        *vectors: np.ndarray,
        out_rows: int | None = None,
        dtype: Any = np.float64,
    ) -> np.ndarray:
        """``[fn(x_b, *v_b)]_b`` joined along features, in memory; one pass if x is chunked.

        Parameters
        ----------
        fn : callable ``(x_b, *v_b) -> (J_b,) or (out_rows, J_b)``
        x : ndarray or dask array, N × J (dask: chunked as (all samples, feature block))
        vectors : ndarrays whose last axis has length J, sliced like x's columns

        Returns
        -------
        ndarray (J,) or (out_rows, J).  Memory: the output only (blocks are streamed).
        """
        b = backend_of(x)
        if b is not NUMPY:
            self.passes += 1
        return b.map_columns(fn, x, *vectors, out_rows=out_rows, dtype=dtype)

    def sum_columns(
        self, fn: Callable[..., np.ndarray], x: Any, *vectors: np.ndarray, shape: Sequence[int]
    ) -> np.ndarray:
        """``Σ_b fn(x_b, *v_b)`` in memory; one pass if x is chunked.

        Returns
        -------
        ndarray of ``shape``, float64.  Memory: about ``TREE_SUM_COPIES`` arrays of ``shape``
        (the tree-sum's partial results).
        """
        b = backend_of(x)
        if b is not NUMPY:
            self.passes += 1
        return b.sum_columns(fn, x, *vectors, shape=shape)

    def map_and_sum_columns(
        self,
        fn: Callable[..., tuple],
        x: Any,
        *vectors: np.ndarray,
        shapes: Sequence[Sequence[int]],
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """A per-feature map and block sums from one sweep; one pass if x is chunked.

        ``fn(x_b, *v_b)`` returns ``(f_b, [s_1b, s_2b, …])``, f_b of shape (J_b,).

        Returns
        -------
        (ndarray (J,), list of float64 ndarrays of ``shapes``).  Memory: the map and about
        ``TREE_SUM_COPIES`` copies of each summed term.
        """
        b = backend_of(x)
        if b is not NUMPY:
            self.passes += 1
        return b.map_and_sum_columns(fn, x, *vectors, shapes=shapes)

    def sum_blocks(
        self,
        fn: Callable[..., np.ndarray],
        X: Any,
        *row_vectors: np.ndarray,
        shape: Sequence[int],
        dtype: Any = np.float64,
        maxima: int = 0,
        columns: Sequence[np.ndarray] = (),
    ) -> np.ndarray:
        """Partial sums over the samples of every block of X, merged; one pass if X is chunked.

        For every block (i, j) — row block i, feature block j — ``fn(block, *[v[rows_i] for v
        in row_vectors], *[c[..., cols_j] for c in columns])`` returns ``(*shape, p_j)``
        partial sums over the block's rows; they are tree-summed over i in a fixed order
        (float64: the result does not depend on scheduling) and joined over j.  The block is
        a NumPy array (any real dtype) or a ``scipy.sparse.csr_matrix``, handed over as it
        is (never densified here); per-kind kernels are in :mod:`fsdask.linalg.colstats`.

        A feature-blocked X is the case of one row block, an in-memory X (ndarray or
        scipy.sparse) is swept in fixed row slices of about :data:`ROW_SLICE_BYTES` on
        fsdask's thread pool: callers never ask how X is laid out.

        Parameters
        ----------
        fn : callable ``(block, *row_slices, *column_slices) -> (*shape, p_j)``
        X : ndarray, scipy.sparse matrix or dask array (n, p), any chunking
        row_vectors : ndarrays (n, …), sliced like X's rows (class codes, a response, …)
        shape : tuple of int, the leading shape of every partial
        dtype : the partials' and the result's dtype (float64)
        maxima : int
            The last ``maxima`` rows (first axis) are merged by maximum, not summed: extremes
            (a minimum as the maximum of −x) ride in the same pass.
        columns : ndarrays (…, p), sliced like X's feature blocks (e.g. a per-feature shift)

        Returns
        -------
        ndarray ``(*shape, p)``, float64.  Memory: per task one block and at most 8
        partials of ``(*shape, p_j)``; on the client the result.

        Examples
        --------
        >>> import numpy as np
        >>> ex = Execution()
        >>> X = np.arange(6.0).reshape(3, 2)
        >>> ex.sum_blocks(lambda xb: xb.sum(axis=0)[None], X, shape=(1,))
        array([[6., 9.]])
        """
        if np.dtype(dtype) != np.float64:
            raise TypeError("sum_blocks: partial sums are float64")
        b = backend_of(X)
        if b is not NUMPY:
            self.passes += 1
        return b.sum_blocks(fn, X, *row_vectors, shape=shape, maxima=maxima, columns=columns)

    def sum_blocks_each(
        self,
        fn: Callable[..., np.ndarray],
        X: Any,
        *row_vectors: np.ndarray,
        shape: Sequence[int],
        maxima: int = 0,
        columns: Sequence[np.ndarray] = (),
        finish: Callable[[Iterator[np.ndarray], int, int], Any],
        step: int = FINISH_SLICE,
    ) -> list:
        """:meth:`sum_blocks`, each feature block's merged sums handed to ``finish`` where
        they were merged; one pass if X is chunked.

        For a selection that needs a few columns of large sums (a statistic's candidates,
        not every value): only ``finish``'s results reach the client.

        Parameters
        ----------
        fn, X, row_vectors, shape, maxima, columns : as for :meth:`sum_blocks`
        finish : callable ``(pieces, start_j, width_j) -> any``
            ``pieces`` yields the merged ``(*shape, ·)`` sums of the feature block of
            ``width_j`` columns that starts at column ``start_j``, ``step`` consecutive
            columns at a time.  The blocks are X's feature blocks (a chunked X) or fixed
            slices of :data:`FINISH_SLICE` columns (an in-memory X).  When a block holds
            every sample its sums are made a piece at a time, so they stay in the CPU's
            cache.
        step : int, columns per piece

        Returns
        -------
        list of ``finish``'s results, in feature order.  Memory: per task that of
        :meth:`sum_blocks` and ``finish``'s; on the client ``finish``'s results (and, for an
        in-memory X, the merged sums).
        """
        b = backend_of(X)
        if b is not NUMPY:
            self.passes += 1
        return b.sum_blocks_each(
            fn,
            X,
            *row_vectors,
            shape=shape,
            maxima=maxima,
            columns=columns,
            finish=finish,
            step=max(1, int(step)),
        )

    def first_row(self, X: Any) -> np.ndarray | None:
        """X's first row as float64 ``(p,)`` — the reference of shifted sums — or None when
        every block of X holds that row (one row block): a kernel then reads it from its
        block, and a feature-blocked store is not read twice.

        Returns
        -------
        ndarray (p,) or None.  Memory: one row; a chunked X reads its first row block only.
        """
        b = backend_of(X)
        if b is DASK and len(X.chunks[0]) == 1:
            return None
        if b is DASK:  # densified block by block (CSR blocks stay CSR until then)
            meta = np.empty((0, 0))
            (row,) = compute_blocks(X[:1].map_blocks(_dense_rows, dtype=np.float64, meta=meta))
        else:
            row = _dense_rows(X[:1])
        return np.asarray(row, dtype=np.float64).reshape(-1)

    def operator(
        self,
        block: Callable[[np.ndarray], np.ndarray],
        x: Any,
        *,
        dtype: Any = np.float64,
        rblock: Callable[[np.ndarray], Callable[[np.ndarray], np.ndarray]] | None = None,
        recompute: bool = False,
    ) -> LinearOperator:
        """The N × J matrix ``Z = [block(x_b)]_b`` as a :class:`LinearOperator`.

        In memory (one sweep over x) when x is in memory; else recomputed from x at every
        product when ``recompute`` and ``rblock`` are given (the caller knows a product is
        cheaper than storing Z); else persisted chunked like x (one pass over X, then every
        product sweeps Z only).  Z is stored in ``dtype``.
        """
        b = backend_of(x)
        if b is NUMPY:
            return InMemoryOperator(
                self.map_columns(
                    lambda xb: block(xb).astype(dtype, copy=False),
                    x,
                    out_rows=x.shape[0],
                    dtype=dtype,
                )
            )
        if recompute and rblock is not None:
            return RecomputedOperator(self, x, block, rblock)
        Z = map_features(
            lambda xb: block(xb).astype(dtype, copy=False), x, out_rows=x.shape[0], dtype=dtype
        )
        (Z,) = self.persist(Z)
        return PersistedOperator(Z)
