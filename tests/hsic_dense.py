"""Dense NumPy reference of Zarkoob (2010) §3.3.1, written literally from the thesis.

Submatrices are indexed explicitly (A_{M,N}), the objective (3.4) is evaluated from its
Frobenius-norm definition, and nothing is shared with ``fsdask.methods.hsic``: the
streaming implementation is tested against this.
"""

from __future__ import annotations

import numpy as np


def objective(A, M, N, u, sigma, v, gamma, rho):
    """Eq. (3.4) from its definition; M, N index arrays, u/v full-length."""
    if len(M) == 0 or len(N) == 0:
        return 0.0
    AMN = A[np.ix_(M, N)]
    R = AMN - sigma * np.outer(u[M], v[N])
    return float(np.sum(AMN**2) - gamma * np.sum(R**2) - rho * len(M) * len(N))


def sparse_pm(A, gamma=1.1, rho=0.0, tol=1e-12, max_iter=200):
    """Algorithm SparsePM, steps 1–14; returns (M, N, u, sigma, v, trace) with the trace of
    (3.4) evaluated from its definition at the start and after each row and column step."""
    m, c = A.shape
    i0 = int(np.argmax(np.linalg.norm(A, axis=1)))  # 1
    N = np.arange(c)  # 2
    M = np.array([i0])  # 3
    sigma = np.linalg.norm(A[i0, :])  # 4
    v = A[i0, :] / sigma  # 5
    u = np.zeros(m)
    u[i0] = 1.0
    trace = [objective(A, M, N, u, sigma, v, gamma, rho)]
    for _ in range(max_iter):  # 6
        M_old, N_old, u_old, v_old, s_old = M, N, u.copy(), v.copy(), sigma
        u_bar = A[:, N] @ v[N]  # 7
        crit = np.array(
            [
                -(gamma - 1) * A[i, N] @ A[i, N] + gamma * (A[i, N] @ v[N]) ** 2 - rho * len(N)
                for i in range(m)
            ]
        )
        M = np.flatnonzero(crit > 0)  # 8
        if len(M) == 0:
            return M, np.array([], int), np.zeros(m), 0.0, np.zeros(c), trace + [0.0]
        u = np.zeros(m)
        u[M] = u_bar[M] / np.linalg.norm(u_bar[M])  # 9
        trace.append(objective(A, M, N, u, np.linalg.norm(u_bar[M]), v, gamma, rho))
        v_bar = A[M, :].T @ u[M]  # 10
        crit = np.array(
            [
                -(gamma - 1) * A[M, j] @ A[M, j] + gamma * (A[M, j] @ u[M]) ** 2 - rho * len(M)
                for j in range(c)
            ]
        )
        N = np.flatnonzero(crit > 0)  # 11
        if len(N) == 0:
            return np.array([], int), N, np.zeros(m), 0.0, np.zeros(c), trace + [0.0]
        sigma = np.linalg.norm(v_bar[N])  # 12
        v = np.zeros(c)
        v[N] = v_bar[N] / sigma  # 13
        trace.append(objective(A, M, N, u, sigma, v, gamma, rho))
        if (
            len(M) == len(M_old)
            and np.all(M == M_old)
            and len(N) == len(N_old)
            and np.all(N == N_old)
            and np.max(np.abs(u - u_old)) <= tol
            and np.max(np.abs(v - v_old)) <= tol
            and abs(sigma - s_old) <= tol * max(sigma, 1.0)
        ):  # 14
            break
    return M, N, u, sigma, v, trace


def hsic_A(X, delta):
    """A = X H Δᵀ / (n − 1) with X given as (sample, feature): Xᵀ H Δᵀ / (n − 1)."""
    n = X.shape[0]
    H = np.eye(n) - np.ones((n, n)) / n
    return X.T @ H @ delta.T / (n - 1)


def class_delta(y):
    classes, codes, counts = np.unique(y, return_inverse=True, return_counts=True)
    D = np.zeros((classes.size, y.size))
    for i, k in enumerate(codes):
        D[k, i] = 1.0 / counts[k]
    return D
