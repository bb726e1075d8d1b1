"""SparsePM (Zarkoob 2010, §3.3.1, eq. 3.4–3.6) and the plain PowerMethod it refines.

* eq. (3.4): f(M, N, u, σ, v) = ‖A_MN‖²_F − γ ‖A_MN − u_M σ v_Nᵀ‖²_F − ρ |M| |N|.
* eq. (3.5)/(3.6) and the column analogue: separable row/column contributions
  r_i = −(γ − 1)‖A_iN‖² + γ (A_iN v_N)² − ρ|N|,  c_j = −(γ − 1)‖A_Mj‖² + γ (A_Mjᵀ u_M)² − ρ|M|.
* Algorithms ``PowerMethod`` (:func:`power_method`) and ``SparsePM`` steps 1–14
  (:func:`sparse_pm`, :func:`sparse_pm_rows`).

A is NumPy or a dask array chunked by rows (:mod:`fsdask.linalg.tall`); the steps are
written with full-length masked vectors, which NumPy and dask evaluate alike, so each row or
column step over a dask A is one row-wise map-reduce.  Pure functions: no checkpoint.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from fsdask.fitting import FitContext
from fsdask.linalg import tall
from fsdask.linalg.execution import fits
from fsdask.linalg.reductions import compute_blocks
from fsdask.linalg.tall import aligned, take_rows

__all__ = ["SparsePMResult", "sparse_pm", "sparse_pm_rows", "scatter", "power_method"]


@dataclasses.dataclass
class SparsePMResult:
    """Output of :func:`sparse_pm`: row set M, column set N (boolean masks), u, σ, v and the
    trace of the objective (3.4): its value at the start and after every row and column step."""

    M: np.ndarray
    N: np.ndarray
    u: np.ndarray
    sigma: float
    v: np.ndarray
    objective: list[float]
    n_iter: int
    converged: bool


def _row_step(A, A2, v: np.ndarray, N: np.ndarray, gamma: float, rho: float):
    """Steps 7–9: ū = A_{:,N} v_N; r_i of (3.6); M = {i : r_i > 0}.  One row-wise map over A
    (``A2`` is A∘A, precomputed for a NumPy A, lazy for a dask A)."""
    vN = np.where(N, v, 0.0)
    u_bar = A @ vN
    norm2 = A2 @ N.astype(np.float64)
    u_bar, norm2 = compute_blocks(u_bar, norm2)
    r = -(gamma - 1) * norm2 + gamma * u_bar**2 - rho * N.sum()
    return u_bar, r


def _col_step(A, A2, u: np.ndarray, M: np.ndarray, gamma: float, rho: float):
    """Steps 10–11: v̄ = A_{M,:}ᵀ u_M; c_j; N = {j : c_j > 0}.  One reduction over A's rows."""
    v_bar = A.T @ aligned(A, u)
    norm2 = A2.T @ aligned(A, M.astype(np.float64))
    v_bar, norm2 = compute_blocks(v_bar, norm2)
    c = -(gamma - 1) * norm2 + gamma * v_bar**2 - rho * M.sum()
    return v_bar, c


def sparse_pm(
    A,
    gamma: float = 1.1,
    rho: float = 0.0,
    *,
    tol: float = 1e-12,
    max_iter: int = 200,
    memory_budget: Any = None,
    row_norm2: np.ndarray | None = None,
) -> SparsePMResult:
    """Algorithm ``[M, N, u, v, σ] = SparsePM(A)`` of §3.3.1, exactly as written.

    ``A`` is a NumPy array or a dask array chunked by rows (m × c).  Stagnation (step 14):
    M and N unchanged and u, v, σ each changed by at most ``tol`` (σ relatively).

    The objective (3.4) is separable, so its value after a row step is Σ_{i∈M} r_i and after
    a column step Σ_{j∈N} c_j; each step maximises it over its own variables with the others
    fixed, so the trace never decreases (tested).  If the largest row already has
    ‖A_i‖² ≤ ρ c the start has f ≤ 0 and no row is selected: M is returned empty.

    Exact pruning (not in the thesis, same result): since (A_iN v_N)² ≤ ‖A_iN‖² (v unit),
    r_i ≤ ‖A_iN‖² − ρ|N| ≤ ‖A_i‖² − ρ for every N ≠ ∅, so a row with ‖A_i‖² ≤ ρ never enters
    M, and rows outside M never touch the column step.  The iterations therefore run on the
    candidate rows only — one pass over A for the row norms, then (if the candidates fit
    ``memory_budget``, :func:`fsdask.linalg.execution.fits`; None: the dask config key
    ``fsdask.memory-budget``) in memory.  For the ρ of a small selection this is a tiny matrix.

    Parameters
    ----------
    A : ndarray or dask array chunked by rows, m × c
    gamma : float > 1, γ of (3.4)
    rho : float ≥ 0, ρ of (3.4)
    tol, max_iter : the stagnation tolerance of step 14 and the most iterations
    memory_budget : int, str or None, the bytes the candidate rows may take in memory
    row_norm2 : ndarray (m,), optional, the ‖A_i‖² if the caller has them

    Returns
    -------
    SparsePMResult on all m rows.  Memory: the candidate rows of A when they fit the budget,
    O(m) besides.
    """
    m, c = A.shape
    norm2 = tall.row_norm2(A) if row_norm2 is None else row_norm2
    cand = np.flatnonzero(norm2 > rho)
    if cand.size == 0:  # the start row has f = ‖A_i0‖² − ρc ≤ 0: step 8 selects nothing
        i0 = int(np.argmax(norm2))
        return SparsePMResult(
            np.zeros(m, bool),
            np.zeros(c, bool),
            np.zeros(m),
            0.0,
            np.zeros(c),
            [float(norm2[i0] - rho * c), 0.0],
            1,
            True,
        )
    Ac = take_rows(A, cand, hold=fits(cand.size * c * 8, memory_budget))
    res = sparse_pm_rows(Ac, norm2[cand], gamma, rho, tol, max_iter)
    return res if cand.size == m else scatter(res, cand, m)


def scatter(res: SparsePMResult, rows: np.ndarray, m: int) -> SparsePMResult:
    """A result on the rows ``rows`` of A, as a result on all m rows (u = 0, not in M elsewhere).

    Parameters
    ----------
    res : SparsePMResult on |rows| rows
    rows : int ndarray, the rows of A it is on
    m : int, the rows of A

    Returns
    -------
    SparsePMResult on m rows.
    """
    M = np.zeros(m, bool)
    M[rows] = res.M
    u = np.zeros(m)
    u[rows] = res.u
    return dataclasses.replace(res, M=M, u=u)


def sparse_pm_rows(
    A, row_norm2: np.ndarray, gamma: float, rho: float, tol: float, max_iter: int
) -> SparsePMResult:
    """SparsePM steps 1–14 on (candidate) rows A with their squared norms (no pruning).

    Parameters
    ----------
    A : ndarray or dask array chunked by rows, m × c
    row_norm2 : ndarray (m,), ‖A_i‖²
    gamma, rho, tol, max_iter : as for :func:`sparse_pm`

    Returns
    -------
    SparsePMResult.  Memory: A∘A (a NumPy A) and O(m) vectors.
    """
    m, c = A.shape
    A2 = A * A
    # steps 1–5: start from the row of largest norm
    i0 = int(np.argmax(row_norm2))
    (a0,) = compute_blocks(A[i0])
    a0 = np.asarray(a0, dtype=np.float64)
    N = np.ones(c, bool)
    M = np.zeros(m, bool)
    M[i0] = True
    sigma = float(np.sqrt(row_norm2[i0]))
    u = np.zeros(m)
    u[i0] = 1.0
    v = a0 / sigma if sigma > 0 else np.zeros(c)
    trace = [float(row_norm2[i0] - rho * c)]  # f at the start: the single row is exactly rank one
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        M_old, N_old, u_old, v_old, s_old = M, N, u, v, sigma
        # steps 7–9
        u_bar, r = _row_step(A, A2, v, N, gamma, rho)
        M = r > 0
        if not M.any():
            trace.append(0.0)
            return SparsePMResult(
                M, np.zeros(c, bool), np.zeros(m), 0.0, np.zeros(c), trace, it, True
            )
        u = np.zeros(m)
        u[M] = u_bar[M] / np.sqrt(np.sum(u_bar[M] ** 2))
        trace.append(float(r[M].sum()))
        # steps 10–13
        v_bar, cc = _col_step(A, A2, u, M, gamma, rho)
        N = cc > 0
        if not N.any():
            trace.append(0.0)
            return SparsePMResult(
                np.zeros(m, bool), N, np.zeros(m), 0.0, np.zeros(c), trace, it, True
            )
        sigma = float(np.sqrt(np.sum(v_bar[N] ** 2)))
        v = np.where(N, v_bar, 0.0) / sigma
        trace.append(float(cc[N].sum()))
        # step 14: stagnation
        if (
            np.array_equal(M, M_old)
            and np.array_equal(N, N_old)
            and np.max(np.abs(u - u_old)) <= tol
            and np.max(np.abs(v - v_old)) <= tol
            and abs(sigma - s_old) <= tol * max(sigma, 1.0)
        ):
            converged = True
            break
    return SparsePMResult(M, N, u, sigma, v, trace, it, converged)


def power_method(A: np.ndarray, *, seed: int = 0, tol: float = 1e-12, max_iter: int = 10_000):
    """Algorithm ``[u, σ, v] = PowerMethod(A)`` of §3.3.1 (dense; for comparison and tests).

    Parameters
    ----------
    A : ndarray, m × c
    seed : int, the seed of the random start ū (step 1)
    tol, max_iter : stop when u and σ change by at most ``tol`` (σ relatively), or after
        ``max_iter`` iterations

    Returns
    -------
    (ndarray (m,), float, ndarray (c,)): u, σ, v.
    """
    rng = np.random.default_rng(seed)
    u_bar = rng.standard_normal(A.shape[0])  # step 1
    sigma = np.linalg.norm(u_bar)  # step 2
    u = u_bar / sigma  # step 3
    v = np.zeros(A.shape[1])
    for _ in range(max_iter):  # steps 4–10
        u_old, s_old = u, sigma
        v_bar = A.T @ u
        v = v_bar / np.linalg.norm(v_bar)
        u_bar = A @ v
        sigma = np.linalg.norm(u_bar)
        u = u_bar / sigma
        if np.max(np.abs(u - u_old)) <= tol and abs(sigma - s_old) <= tol * sigma:
            break
    return u, sigma, v


def solver_options(ctx: FitContext | None, kw: dict[str, Any]) -> dict[str, Any]:
    """SparsePM's keywords ``kw``, with the fit's memory budget unless ``kw`` names one."""
    if ctx is None or "memory_budget" in kw:
        return kw
    return {**kw, "memory_budget": ctx.budget}
