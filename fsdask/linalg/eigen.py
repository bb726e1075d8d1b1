"""Matrix-free symmetric eigensolvers whose mat-vec is one pass over a dask array."""

from __future__ import annotations

from typing import Callable, Literal

import numpy as np
import scipy.sparse.linalg as sla


def dask_operator(
    matvec: Callable[[np.ndarray], np.ndarray], n: int, dtype=np.float64
) -> sla.LinearOperator:
    """A scipy ``LinearOperator`` (symmetric) whose ``matvec`` may run a dask graph.

    Parameters
    ----------
    matvec : callable
        Receives a NumPy vector of length n and returns a NumPy vector (call ``.compute()``
        inside: one pass over the big matrix per product).
    n : int, the operator's size
    dtype : dtype of the products

    Returns
    -------
    scipy.sparse.linalg.LinearOperator (n, n), with ``matmat`` as n mat-vecs.  Memory: the
    operator holds nothing; each product holds what ``matvec`` does plus two n-vectors.
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
    it builds the matrix column by column and uses dense ``eigh``.

    Parameters
    ----------
    matvec : callable, n-vector → n-vector (one pass over the big matrix if it is a dask graph)
    n : int, size of the operator
    k : int, number of eigenpairs
    which : {"LA", "LM", "SA"}
        Largest *algebraic* (what indefinite operators need), largest magnitude, smallest
        algebraic.
    v0 : ndarray (n,) or None, Lanczos start (warm start)
    tol, maxiter, ncv : passed to ``eigsh``
    matmat : callable (n × r → n × r) or None
        Lets the tiny-n path build the matrix in one call (one pass) instead of n mat-vecs.

    Returns
    -------
    w : ndarray (k,), eigenvalues in descending order of the ``which`` criterion
    V : ndarray (n, k), eigenvectors

    Memory: O(n·ncv) Lanczos vectors (n² for the tiny-n path); each mat-vec is one pass.
    """
    if n <= 64 or k >= n - 1:
        A = (
            matmat(np.eye(n))
            if matmat is not None
            else np.column_stack([matvec(e) for e in np.eye(n)])
        )
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
