"""Matrix-free symmetric eigensolvers whose mat-vec is one pass over a dask array."""

from __future__ import annotations

from typing import Callable, Literal

import numpy as np
import scipy.sparse.linalg as sla


def dask_operator(matvec: Callable[[np.ndarray], np.ndarray], n: int, dtype=np.float64) -> sla.LinearOperator:
    """A scipy ``LinearOperator`` (symmetric) whose ``matvec`` may run a dask graph.

    ``matvec`` receives a numpy vector of length n and must return a numpy vector
    (call ``.compute()`` inside: one pass over the big matrix per product).
    """
    def mv(v):
        return np.asarray(matvec(np.asarray(v).ravel()), dtype=dtype).ravel()

    def mm(V):
        return np.column_stack([mv(V[:, j]) for j in range(V.shape[1])])

    return sla.LinearOperator((n, n), matvec=mv, rmatvec=mv, matmat=mm, dtype=dtype)


def leading_eigh(
    matvec: Callable[[np.ndarray], np.ndarray],
    n: int,
    k: int = 1,
    *,
    which: Literal["LA", "LM", "SA"] = "LA",
    v0: np.ndarray | None = None,
    tol: float = 1e-10,
    maxiter: int | None = None,
    ncv: int | None = None,
    matmat: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Leading ``k`` eigenpairs of a symmetric operator given only by its mat-vec.

    Uses ARPACK's Lanczos (``scipy.sparse.linalg.eigsh``); for tiny n (≤ 64 or k ≥ n − 1)
    it builds the matrix column by column and uses dense ``eigh``.  ``which="LA"`` is the
    largest *algebraic* eigenvalue (what indefinite operators need), ``"LM"`` largest
    magnitude.  Eigenvalues are returned in descending order of the chosen criterion.
    ``matmat`` (optional, n × r → n × r) lets the tiny-n path build the matrix in one call
    (one pass) instead of n mat-vecs.
    """
    if n <= 64 or k >= n - 1:
        A = matmat(np.eye(n)) if matmat is not None else np.column_stack([matvec(e) for e in np.eye(n)])
        A = (A + A.T) / 2
        w, V = np.linalg.eigh(A)
        key = {"LA": -w, "SA": w, "LM": -np.abs(w)}[which]
        order = np.argsort(key, kind="stable")[:k]
        return w[order], V[:, order]
    op = dask_operator(matvec, n)
    w, V = sla.eigsh(op, k=k, which=which, v0=v0, tol=tol, maxiter=maxiter, ncv=ncv)
    key = {"LA": -w, "SA": w, "LM": -np.abs(w)}[which]
    order = np.argsort(key, kind="stable")
    return w[order], V[:, order]
