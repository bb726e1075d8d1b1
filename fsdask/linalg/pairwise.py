"""Pairwise computations that never hold more than a block or a tile.

* Between **samples** (N × N, N small): ``D = Σ_b D(X_b)`` accumulated over feature blocks
  (weighted Manhattan, squared Euclidean, dot products), tree-summed.
* Between **features** (p × p, p huge): never stored.  ``V @ B`` for a kernel V between
  feature columns is computed tile by tile: ``(V B)_I = Σ_J k(X_I, X_J) B_J``.
"""

from __future__ import annotations

import warnings
from typing import Callable, Literal

import dask.array as da
import numba
import numpy as np

from fsdask.linalg.reductions import blockwise_whole, sum_over_blocks

Metric = Literal["manhattan", "sqeuclidean", "dot"]


@numba.njit(cache=True, parallel=False, fastmath=False)
def _weighted_manhattan(A: np.ndarray, B: np.ndarray, w: np.ndarray) -> np.ndarray:
    na, p = A.shape
    nb = B.shape[0]
    out = np.zeros((na, nb))
    for i in range(na):
        for k in range(nb):
            s = 0.0
            for j in range(p):
                s += w[j] * abs(A[i, j] - B[k, j])
            out[i, k] = s
    return out


def pairwise_block(
    A: np.ndarray, B: np.ndarray, metric: Metric = "sqeuclidean", weights: np.ndarray | None = None
) -> np.ndarray:
    """Partial pairwise matrix between the rows of A and B over one block of columns.

    ``(D)_{ik} = Σ_j w_j d(a_ij, b_kj)`` with d = |·| (manhattan), (·)² (sqeuclidean) or the
    product (dot).  Summing this over column blocks gives the full matrix, which is how
    :func:`sample_pairwise` uses it.

    Parameters
    ----------
    A : ndarray (n_a, p_b)
    B : ndarray (n_b, p_b)
    metric : {"manhattan", "sqeuclidean", "dot"}
    weights : ndarray (p_b,) or None (ones)

    Returns
    -------
    ndarray (n_a, n_b), float64.  Memory: the result plus a float64 copy of A and B.
    """
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    w = np.ones(A.shape[1]) if weights is None else np.asarray(weights, dtype=np.float64)
    if metric == "manhattan":
        return _weighted_manhattan(
            np.ascontiguousarray(A), np.ascontiguousarray(B), np.ascontiguousarray(w)
        )
    if metric == "sqeuclidean":
        Aw = A * w
        d = (Aw * A).sum(1)[:, None] + (B * B * w).sum(1)[None, :] - 2.0 * Aw @ B.T
        return d
    if metric == "dot":
        return (A * w) @ B.T
    raise ValueError(f"unknown metric {metric!r}; use 'manhattan', 'sqeuclidean' or 'dot'")


def sample_pairwise(
    X: da.Array,
    metric: Metric = "sqeuclidean",
    weights: da.Array | np.ndarray | None = None,
    split_every: int | None = 8,
) -> da.Array:
    """N × N matrix between samples, summed over feature blocks (one pass).

    ``weights`` (per feature) gives the weighted distances of Logo:
    ``D_ni = Σ_j w_j |x_nj − x_ij|``.

    Parameters
    ----------
    X : dask array (N, p), chunked (all samples, feature block)
    metric : {"manhattan", "sqeuclidean", "dot"}, see :func:`pairwise_block`
    weights : ndarray or dask array (p,), or None
    split_every : int, terms per tree-sum node

    Returns
    -------
    dask array (N, N), lazy, one chunk.  Memory: per task one block and up to
    ``split_every`` N × N partial sums.
    """
    n = X.shape[0]
    if weights is None:
        return sum_over_blocks(
            lambda xb: pairwise_block(xb, xb, metric), X, shape=(n, n), split_every=split_every
        )
    w = (
        weights
        if isinstance(weights, da.Array)
        else da.from_array(np.asarray(weights, dtype=np.float64), chunks=(X.chunks[1],))
    )
    return sum_over_blocks(
        lambda xb, wb: pairwise_block(xb, xb, metric, wb),
        X,
        w,
        shape=(n, n),
        split_every=split_every,
    )


KernelFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


def feature_kernel_matmul(
    X: da.Array,
    kernel: KernelFn,
    B: np.ndarray | da.Array,
    tile: int = 2048,
    split_every: int | None = 8,
) -> da.Array:
    """``V @ B`` where ``V[i, j] = kernel(X[:, i], X[:, j])`` — never storing V.

    Parameters
    ----------
    X : dask array (n, p), or an ndarray (then the result is an ndarray)
    kernel : callable
        ``kernel(XI, XJ)`` receives two (n × tile) column blocks and returns the
        (tile_I × tile_J) block of V.
    B : ndarray or dask array (p, r) or (p,)
    tile : int, features per tile
    split_every : int, terms per tree-sum node

    Returns
    -------
    dask array (p, r) (or (p,) for a vector B), lazy, chunked by ``tile``.

    Cost: O(p²·(n + r)) time per product; memory per task one tile of V (tile² · 8 bytes)
    plus two column blocks.
    """
    p = X.shape[1]
    squeeze = getattr(B, "ndim", 2) == 1
    B = B[:, None] if squeeze else B
    if B.shape[0] != p:
        raise ValueError(f"B has {B.shape[0]} rows but X has {p} features")
    if isinstance(X, np.ndarray):  # held in memory: the same tiles, summed in a loop
        out = _kernel_matmul_in_memory(X, kernel, np.asarray(B, dtype=np.float64), tile)
        return out[:, 0] if squeeze else out
    Xt = X.rechunk({0: -1, 1: tile})
    Bt = (B if isinstance(B, da.Array) else da.from_array(np.asarray(B))).rechunk({0: tile, 1: -1})

    def tile_fn(xi, xj, bj):
        return (_kernel_tile(kernel, xi, xj) @ bj)[:, None, :]

    with warnings.catch_warnings():  # (tiles × tiles) tasks is the point here
        warnings.simplefilter("ignore", da.PerformanceWarning)
        parts = blockwise_whole(
            tile_fn, "ijk", Xt, "si", Xt, "sj", Bt, "jk", adjust_chunks={"j": 1}, dtype=np.float64
        )
    out = parts.sum(axis=1, split_every=split_every)
    return out[:, 0] if squeeze else out


def _kernel_tile(kernel: KernelFn, xi: np.ndarray, xj: np.ndarray) -> np.ndarray:
    """The (tile_I × tile_J) block of V, its shape checked."""
    v = np.asarray(kernel(xi, xj))
    if v.shape != (xi.shape[1], xj.shape[1]):
        raise ValueError(
            f"kernel returned shape {v.shape}; expected ({xi.shape[1]}, {xj.shape[1]}) "
            "for two column blocks of (sample × features)"
        )
    return v


def _kernel_matmul_in_memory(X: np.ndarray, kernel: KernelFn, B: np.ndarray, tile: int):
    """``V @ B`` for an in-memory X, one (tile × tile) block of V at a time."""
    p = X.shape[1]
    out = np.zeros((p, B.shape[1]))
    for i0 in range(0, p, tile):
        xi = X[:, i0 : i0 + tile]
        for j0 in range(0, p, tile):
            out[i0 : i0 + tile] += (
                _kernel_tile(kernel, xi, X[:, j0 : j0 + tile]) @ B[j0 : j0 + tile]
            )
    return out
