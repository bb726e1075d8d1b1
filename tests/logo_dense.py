"""Dense NumPy Algorithm 1 of Sun, Todorovic & Goodison (TPAMI 2010): the reference.

Written as plainly as the paper (no blocks, no active set, no numba): used by the tests to
check that the Dask implementation gives the same weights.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize


def probabilities(D: np.ndarray, y: np.ndarray, sigma: float) -> np.ndarray:
    """Π = P_M − P_H from the distance matrix (eqs. 4–5, misses = all other classes, eq. 20)."""
    N = D.shape[0]
    same = y[:, None] == y[None, :]
    hit = same & ~np.eye(N, dtype=bool)
    miss = ~same
    Pi = np.zeros((N, N))
    for mask, sign in ((miss, 1.0), (hit, -1.0)):
        Dm = np.where(mask, D, np.inf)
        k = np.exp(-(Dm - Dm.min(axis=1, keepdims=True)) / sigma)  # k(d) = exp(−d/σ), shifted
        Pi += sign * k / k.sum(axis=1, keepdims=True)
    return Pi


def zbar(X: np.ndarray, Pi: np.ndarray) -> np.ndarray:
    """z̄_n = Σ_i Π_ni |x_n − x_i| (eq. 3)."""
    A = np.abs(X[:, None, :] - X[None, :, :])  # N × N × J (dense: fine for small tests)
    return np.einsum("ni,nij->nj", Pi, A)


def solve_lbfgs(Z: np.ndarray, lam: float, w0: np.ndarray) -> np.ndarray:
    """Eq. 7 with L-BFGS-B on w ≥ 0."""

    def fg(w):
        m = Z @ w
        f = np.logaddexp(0.0, -m).sum() + lam * w.sum()
        s = 0.5 * (1.0 - np.tanh(0.5 * m))  # σ(−m)
        return f, lam - Z.T @ s

    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        res = minimize(
            fg,
            w0,
            jac=True,
            method="L-BFGS-B",
            bounds=[(0, None)] * Z.shape[1],
            options={"maxiter": 10000, "ftol": 1e-15, "gtol": 1e-10, "maxcor": 20},
        )
    return res.x


def logo_dense(
    X: np.ndarray,
    y: np.ndarray,
    sigma: float = 2.0,
    lam: float = 1.0,
    theta: float = 0.01,
    max_iter: int = 30,
) -> tuple[np.ndarray, list[float]]:
    """Algorithm 1 without elimination; returns w and the trace ‖w(t) − w(t−1)‖."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    w = np.ones(X.shape[1])  # line 1
    trace = []
    for _ in range(max_iter):  # line 2
        D = (np.abs(X[:, None, :] - X[None, :, :]) * w).sum(axis=2)  # line 3
        Pi = probabilities(D, y, sigma)  # line 4
        w_new = solve_lbfgs(zbar(X, Pi), lam, w)  # lines 5–6
        trace.append(float(np.linalg.norm(w_new - w)))
        w = w_new
        if trace[-1] < theta:  # line 8
            break
    return w, trace
