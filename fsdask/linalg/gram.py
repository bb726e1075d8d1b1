"""The p × p Gram of X as a sum over its sample blocks.

``Σ_i (x_i − K)(x_i − K)ᵀ`` over the rows of one block is a partial sum that merges across
sample blocks (:meth:`fsdask.linalg.execution.Execution.sum_blocks`); with the shifted
column sums ``Σ_i (x_i − K)`` it gives the Gram of the centred X.  The shift K is X's first
row (:meth:`~fsdask.linalg.execution.Execution.first_row`, as the shifted moments of
:mod:`fsdask.linalg.colstats`): ``|K − x̄|`` is of the order of a feature's spread, so the
centring loses no more digits than centring first would.

One implementation per kind of block (:func:`functools.singledispatch`): a CSR block is
never densified — its Gram is the sparse product ``X_bᵀ X_b`` corrected by rank-one terms.
The kernel needs all p features in each block, so a sample-blocked X has its column chunks
merged first (:func:`whole_rows`); a dense feature-blocked X is not swept this way (its
Gram is taken tile by tile over feature blocks, :func:`fsdask.linalg.tsqr.gram_factor`).
"""

from __future__ import annotations

import functools
from typing import Any

import dask.array as da
import numpy as np
import scipy.sparse

__all__ = ["shifted_gram_block", "whole_rows"]


def _unknown(xb: Any) -> TypeError:
    return TypeError(
        f"no fsdask Gram kernel for {type(xb).__name__}; use NumPy or scipy.sparse CSR blocks"
    )


def _reference(xb: Any, shift: np.ndarray | None) -> np.ndarray:
    """K on the block's features: ``shift``, or the block's own first row (None: the block
    holds X's first row)."""
    if shift is not None:
        return np.asarray(shift, dtype=np.float64).reshape(-1)
    row = xb[:1]
    row = row.toarray() if scipy.sparse.issparse(row) else np.asarray(row)
    return np.asarray(row, dtype=np.float64).reshape(-1)


@functools.singledispatch
def shifted_gram_block(xb: Any, shift: np.ndarray | None = None) -> np.ndarray:
    """The Gram and the column sums of one block's rows about the shift K.

    Parameters
    ----------
    xb : ndarray or scipy.sparse CSR matrix (b, p), a block holding all p features
    shift : ndarray (p,) or None, K; None: the block's first row (right when the block
        holds X's first row)

    Returns
    -------
    ndarray (p + 1, p), float64: rows ``(X_b − 1Kᵀ)ᵀ (X_b − 1Kᵀ)`` (p rows), then
    ``Σ_i (x_i − K)``.  Memory: dense, one float64 copy of the block; CSR, the sparse
    product ``X_bᵀ X_b`` (at most p² entries) and the p² output.
    """
    raise _unknown(xb)


@shifted_gram_block.register
def _(xb: np.ndarray, shift: np.ndarray | None = None) -> np.ndarray:
    K = _reference(xb, shift)
    d = np.subtract(xb, K, dtype=np.float64)
    out = np.empty((xb.shape[1] + 1, xb.shape[1]))
    np.matmul(d.T, d, out=out[:-1])
    out[-1] = d.sum(axis=0)
    return out


def _csr_gram(xb: Any, shift: np.ndarray | None = None) -> np.ndarray:
    # (X − 1Kᵀ)ᵀ(X − 1Kᵀ) = XᵀX − K sᵀ − s Kᵀ + b K Kᵀ with s the column sums: X stays sparse
    K = _reference(xb, shift)
    xb = scipy.sparse.csr_matrix(xb, dtype=np.float64)
    if not xb.has_canonical_format:
        xb = xb.copy()
        xb.sum_duplicates()  # as densifying would
    b, p = xb.shape
    out = np.empty((p + 1, p))
    G = out[:-1]
    G[...] = (xb.T @ xb).toarray()
    s = np.asarray(xb.sum(axis=0), dtype=np.float64).reshape(-1)
    G -= np.outer(K, s)
    G -= np.outer(s, K)
    G += b * np.outer(K, K)
    out[-1] = s - b * K
    return out


for _kind in (scipy.sparse.csr_matrix, scipy.sparse.csr_array):
    shifted_gram_block.register(_kind, _csr_gram)


def whole_rows(X: da.Array) -> da.Array:
    """X with all its features in every block: the column chunks of each row block merged.

    A dense X gets fewer rows per block in proportion, so a block holds no more bytes than
    its largest chunk did (dask splits the stored chunks in the graph: each is still read
    once); CSR blocks keep their rows (their size is in their non-zeros, and a CSR source
    has one column chunk already).

    Parameters
    ----------
    X : dask array (n, p), sample-blocked

    Returns
    -------
    dask array (n, p), one column chunk, lazy.  Memory per task: about one stored chunk
    (dense), one row block of all p features (CSR).
    """
    rows, cols = X.chunks
    if len(cols) == 1:
        return X
    if scipy.sparse.issparse(X._meta):
        return X.rechunk({1: -1})
    per_row = X.shape[1] * X.dtype.itemsize
    fit = max(1, (max(rows) * max(cols) * X.dtype.itemsize) // per_row)
    return X.rechunk({0: min(fit, max(rows)), 1: -1})
