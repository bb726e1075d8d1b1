"""The margins of Algorithm 1 (lines 3–4, eqs. 2–5, 20) and X as their sweeps see it.

* distances (line 3): ``d(x_n, x_i|w) = Σ_j w_j |x_nj − x_ij|``, the N × N weighted Manhattan
  distances, a tree-sum over feature blocks (:func:`distances`);
* probabilities (eqs. 4–5) from the kernel ``k(d) = exp(−d/σ)``; for more than two classes
  the misses are all samples of the other classes (eq. 20, made probabilistic as eqs. 3–5)
  (:func:`miss_hit_probabilities`);
* ``z̄_n = Σ_{i∈M_n} P(x_i=NM(x_n)|w) |x_n − x_i| − Σ_{i∈H_n} P(x_i=NH(x_n)|w) |x_n − x_i|``
  = ``Σ_i Π_ni |x_n − x_i|`` with ``Π = P_M − P_H`` (eq. 3), so that the margin of eq. 2 is
  ``ρ̄_n(w) = wᵀ z̄_n`` (:func:`zbar`).

How it is swept (DESIGN.md "Logo"): Z̄ (N × J) is computed block by block with the fused
kernel of :mod:`fsdask.linalg.absdiff`; :mod:`fsdask.linalg.execution` keeps it chunked like
X (persisted) while it is big, or holds it in memory when the active part fits the memory
budget (``fsdask.memory-budget``); when all of X fits, the algorithm reads X once
(:class:`Source`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fsdask.linalg.absdiff import (
    DROP_BELOW,
    SPARSE_DENSITY,
    pi_weighted_absdiff,
    weighted_absdiff_sum,
    weighted_manhattan,
)
from fsdask.linalg.colstats import column_std
from fsdask.linalg.execution import Execution, LinearOperator, backend_of

__all__ = ["Source", "distances", "miss_hit_probabilities", "unit_scale", "zbar"]


# --------------------------------------------------------------------------- eqs. 4–5, 20
def miss_hit_probabilities(D: np.ndarray, y: np.ndarray, sigma: float) -> np.ndarray:
    """``Π = P_M − P_H`` (N × N) from the distances D (eqs. 4–5; misses per eq. 20).

    Row n: ``P(x_i = NM(x_n)|w) = k(D_ni) / Σ_{j∈M_n} k(D_nj)`` over the misses
    ``M_n = {i: y_i ≠ y_n}`` (all other classes) and likewise over the hits
    ``H_n = {i: y_i = y_n, i ≠ n}``, with ``k(d) = exp(−d/σ)``.  The kernel is evaluated as
    ``exp(−(d − min_{M_n} d)/σ)``: the shift cancels in the ratio and keeps the values
    finite when d/σ is in the thousands (all features weighted 1 at the start).

    Parameters
    ----------
    D : ndarray (N, N)
        The weighted Manhattan distances.
    y : ndarray (N,)
        Class labels (any comparable values).
    sigma : float
        The kernel width σ.

    Returns
    -------
    ndarray (N, N), float64
        Π; each row sums to 0.  Memory: a few N × N arrays.
    """
    N = D.shape[0]
    same = y[:, None] == y[None, :]
    Pi = np.zeros((N, N))
    for mask, sign in ((~same, 1.0), (same & ~np.eye(N, dtype=bool), -1.0)):
        Dm = np.where(mask, D, np.inf)
        k = np.exp(-(Dm - Dm.min(axis=1, keepdims=True)) / sigma)
        Pi += sign * (k / k.sum(axis=1, keepdims=True))
    return Pi


# --------------------------------------------------------------------------- X, as swept
def unit_scale(X: Any, ex: Execution) -> Any:
    """X with every feature divided by its standard deviation (constant features, which
    get weight 0 anyway, are left as they are): in memory when X is, else one pass.

    Parameters
    ----------
    X : ndarray or dask array (N, J)
    ex : Execution
        The fit's execution (its thread pool for X in memory).

    Returns
    -------
    X scaled, of X's kind and dtype (lazy for dask).
    """
    sd = column_std(X, ex)
    return X / np.where(sd > 0, sd, 1.0).astype(X.dtype)


class Source:
    """X, standardised or not; held in memory when it fits the budget (then the whole fit,
    standardisation included, reads it once).

    Parameters
    ----------
    ex : Execution
        The fit's execution: the budget and the pass count.
    X : dask array (N, J)
    standardize : bool
        Divide every feature by its standard deviation (:func:`unit_scale`).
    """

    def __init__(self, ex: Execution, X: Any, standardize: bool):
        self.ex = ex
        self.X = ex.hold(X)
        if standardize:
            self.X = unit_scale(self.X, ex)
        self._cache: tuple[np.ndarray, Any] | None = None

    def columns(self, idx: np.ndarray, cache: bool = True):
        """The columns ``idx``: in memory when X is or when they fit the budget (one pass), else chunked."""
        idx = np.asarray(idx, dtype=np.int64)
        if self._cache is not None and np.array_equal(self._cache[0], idx):
            return self._cache[1]
        x = self.ex.hold(self.X, idx)
        if cache:
            self._cache = (idx, x)
        return x


# --------------------------------------------------------------------------- the fused sweeps
def distances(ex: Execution, x: Any, w: np.ndarray) -> np.ndarray:
    """N × N weighted Manhattan distances (Algorithm 1, line 3); columns with w_j = 0 add nothing.

    Parameters
    ----------
    ex : Execution
    x : ndarray or dask array (N, J_active)
    w : ndarray (J_active,)

    Returns
    -------
    ndarray (N, N), float64.  Memory: about ``TREE_SUM_COPIES`` N × N arrays while summed.
    """
    nz = np.flatnonzero(w > 0)
    if nz.size < w.size:  # rejoined features: w_j = 0
        x, w = backend_of(x).take_columns(x, nz), w[nz]
    return ex.sum_columns(weighted_manhattan, x, w, shape=(x.shape[0],) * 2)


def _gradient_block(s: np.ndarray, Pi: np.ndarray):
    """``x_b ↦ Σ_n s_n z̄_n(j)`` over a block, without forming z̄: ``Σ_n s_n Σ_i Π_ni |x_nj − x_ij|``."""
    C = s[:, None] * Pi
    return lambda xb: weighted_absdiff_sum(xb, C)


def zbar(ex: Execution, x: Any, Pi: np.ndarray) -> LinearOperator:
    """Z̄ (eq. 3) as an operator: in memory, persisted chunked like X, or — when Π is narrow
    (few non-zeros per row, e.g. the first iteration at 10⁶ features, where the nearest
    miss/hit dominates) — recomputed from X at every product, a cheap sparse sweep.

    Parameters
    ----------
    ex : Execution
    x : ndarray or dask array (N, J_active)
    Pi : ndarray (N, N)
        Π of :func:`miss_hit_probabilities`.

    Returns
    -------
    LinearOperator (N × J_active).  Memory: Z̄ itself when held (N·J_active values of
    x's dtype, at least float32), else nothing until a product.
    """
    narrow = np.count_nonzero(np.abs(Pi) > DROP_BELOW) < SPARSE_DENSITY * Pi.size
    return ex.operator(
        lambda xb: pi_weighted_absdiff(xb, Pi),
        x,
        dtype=np.result_type(x.dtype, np.float32),
        rblock=lambda s: _gradient_block(s, Pi),
        recompute=narrow,
    )
