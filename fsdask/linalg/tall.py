"""Tall matrices with few columns (m × c, m features, c small), in memory or chunked by rows.

A method's derived matrix of this shape — SparseHSIC's A = X H Δᵀ — is a NumPy array when
it fits the memory budget, else a persisted dask array chunked by rows (all columns in each
chunk).  The operations an algorithm needs on it have one implementation per kind of array
(:func:`functools.singledispatch`, as scanpy dispatches on array types), so the algorithm
never tests which kind it holds; another kind of array registers its own implementations.
Each implementation keeps the order of operations of its kind, so results are the same bits
whichever caller asks.
"""

from __future__ import annotations

import functools
from typing import Any

import dask.array as da
import numpy as np

from fsdask._blocks import compute_blocks

__all__ = ["held_in_memory", "aligned", "row_norm2", "take_rows", "scaled_rows", "downdate"]


def _unknown(a: Any) -> TypeError:
    return TypeError(
        f"no fsdask tall-matrix implementation for {type(a).__name__}; use a NumPy or dask array"
    )


# --------------------------------------------------------------------------- where it lives
@functools.singledispatch
def held_in_memory(a: Any) -> bool:
    """Whether ``a`` is held in memory, where a subset of its rows is a copy and no pass.

    Parameters
    ----------
    a : ndarray or dask array, m × c

    Returns
    -------
    bool
    """
    raise _unknown(a)


@held_in_memory.register
def _(a: np.ndarray) -> bool:
    return True


@held_in_memory.register
def _(a: da.Array) -> bool:
    return False


# --------------------------------------------------------------------------- row vectors
@functools.singledispatch
def aligned(a: Any, w: np.ndarray) -> Any:
    """The length-m vector ``w`` as an operand of products with ``a``: ``w`` itself for a
    NumPy ``a``, a dask vector chunked like ``a``'s rows for a dask ``a``.

    Parameters
    ----------
    a : ndarray or dask array, m × c
    w : ndarray (m,)

    Returns
    -------
    ndarray or dask array (m,).  Memory: none beyond ``w``.
    """
    raise _unknown(a)


@aligned.register
def _(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    return w


@aligned.register
def _(a: da.Array, w: np.ndarray) -> da.Array:
    return da.from_array(w, chunks=(a.chunks[0],))


@functools.singledispatch
def row_norm2(a: Any) -> np.ndarray:
    """‖a_i‖² for every row i, in memory (one pass over a dask ``a``).

    For a NumPy ``a`` with fewer than 8 columns the squares are added column by column: the
    same sum, in the same order, as ``(a * a).sum(axis=1)`` (a sequential sum below 8
    terms), without an m × c temporary or NumPy's slow reduction over a short inner axis.

    Parameters
    ----------
    a : ndarray or dask array, m × c

    Returns
    -------
    ndarray (m,), float64.  Memory: O(m) (and m × c for a NumPy ``a`` of ≥ 8 columns).
    """
    raise _unknown(a)


@row_norm2.register
def _(a: np.ndarray) -> np.ndarray:
    if a.shape[1] >= 8 or a.shape[1] == 0:
        return np.asarray((a * a).sum(axis=1))
    norm2 = a[:, 0] * a[:, 0]
    for j in range(1, a.shape[1]):
        norm2 += a[:, j] * a[:, j]
    return norm2


@row_norm2.register
def _(a: da.Array) -> np.ndarray:
    (norm2,) = compute_blocks((a * a).sum(axis=1))
    return np.asarray(norm2)


# --------------------------------------------------------------------------- row subsets
@functools.singledispatch
def take_rows(a: Any, rows: np.ndarray, *, hold: bool) -> Any:
    """The rows ``rows`` (sorted indices) of ``a``: in memory when ``hold`` (one compute of a
    dask ``a``), else of ``a``'s kind, a dask selection rechunked to ``a``'s rows per chunk.

    Parameters
    ----------
    a : ndarray or dask array, m × c
    rows : int ndarray, the rows kept (all m: ``a`` itself)
    hold : bool, bring a dask selection into memory (the caller checked the budget)

    Returns
    -------
    ndarray or dask array, |rows| × c.  Memory: |rows|·c·8 bytes when in memory.
    """
    raise _unknown(a)


@take_rows.register
def _(a: np.ndarray, rows: np.ndarray, *, hold: bool) -> np.ndarray:
    return a[rows] if rows.size < a.shape[0] else a


@take_rows.register
def _(a: da.Array, rows: np.ndarray, *, hold: bool) -> Any:
    sub = a[rows] if rows.size < a.shape[0] else a
    if hold:
        (sub,) = compute_blocks(sub)
    elif rows.size < a.shape[0]:
        sub = sub.rechunk({0: a.chunks[0][0]})
    return sub


# --------------------------------------------------------------------------- new matrices
@functools.singledispatch
def scaled_rows(a: Any, factor: np.ndarray | None, rows_per_chunk: int) -> Any:
    """``a`` (m × c) with row i multiplied by ``factor[i]`` (None: unscaled), laid out for
    row-wise sweeps: a C-ordered NumPy array written in one sweep, or a dask array of
    ``rows_per_chunk`` rows (all columns) per chunk, persisted.

    Parameters
    ----------
    a : ndarray or dask array, m × c (any layout, e.g. a transposed c × m result)
    factor : ndarray (m,) or None
    rows_per_chunk : int, rows per chunk of a dask result

    Returns
    -------
    ndarray or persisted dask array, m × c.  Memory: one m × c copy.
    """
    raise _unknown(a)


@scaled_rows.register
def _(a: np.ndarray, factor: np.ndarray | None, rows_per_chunk: int) -> np.ndarray:
    if factor is None:
        return np.ascontiguousarray(a)
    return np.multiply(a, factor[:, None], out=np.empty(a.shape))


@scaled_rows.register
def _(a: da.Array, factor: np.ndarray | None, rows_per_chunk: int) -> da.Array:
    a = a.rechunk({0: rows_per_chunk, 1: -1})
    if factor is not None:
        a = a * da.from_array(factor[:, None], chunks=(a.chunks[0], 1))
    return a.persist()


@functools.singledispatch
def downdate(
    a: Any, sigma: float, u: np.ndarray, v: np.ndarray, rows: np.ndarray, cols: np.ndarray
) -> Any:
    """``a − σ u vᵀ`` for ``u`` zero outside the mask ``rows`` and ``v`` zero outside ``cols``;
    ``a`` is not modified.

    A NumPy ``a`` is copied and only its block ``rows × cols`` changed (σ·(u_i v_j)); a dask
    ``a`` gets the whole product ((σ u_i) v_j, zero outside the block) and is persisted.

    Parameters
    ----------
    a : ndarray or dask array, m × c
    sigma : float
    u : ndarray (m,); v : ndarray (c,)
    rows : bool ndarray (m,); cols : bool ndarray (c,)

    Returns
    -------
    ndarray or persisted dask array, m × c.  Memory: one m × c copy.
    """
    raise _unknown(a)


@downdate.register
def _(a: np.ndarray, sigma, u, v, rows, cols) -> np.ndarray:
    a = a.copy()
    a[np.ix_(rows, cols)] -= sigma * np.outer(u[rows], v[cols])
    return a


@downdate.register
def _(a: da.Array, sigma, u, v, rows, cols) -> da.Array:
    uu = aligned(a, u)
    return (a - sigma * uu[:, None] * v[None, :]).persist()
