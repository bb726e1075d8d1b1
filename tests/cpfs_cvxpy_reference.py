"""An independent reference for CPFS (Masaeli et al., SDM 2010): the paper's QP in cvxpy.

The paper states CPFS as (4.2), ``min_A ‖X − XA‖²_F + λ Σ_j ‖a_j‖_∞`` over A ∈ R^{p×p} on
zero-centred columns (§3), and solves it as the quadratic programme (5.5) with one dummy
variable per row (5.3–5.4)::

    min_{A, s}  ‖X − XA‖²_F + λ Σ_i s_i     s.t.  −s_i ≤ a_ij ≤ s_i  for all i, j.

:func:`solve_qp` writes (5.5) literally in cvxpy — no Gram, prox, active set or path; the
loss is ``‖R − RA‖²_F`` with R of NumPy's QR of X, which equals ``‖X − XA‖²_F`` (Q has
orthonormal columns) — and hands it to the interior-point solver Clarabel.  A feature
is selected when its row of A is nonzero (§4); an interior-point solution has no exact
zeros, so a row counts as nonzero above ``ZERO`` (A is unitless: X ≈ XA).
:func:`selection_at_q` finds the λ with exactly q nonzero rows by bisection in log λ on
these solutions alone.  Used by ``tests/test_cpfs_cvxpy.py`` and by
``examples/reproduce_cpfs_figures.py --cvxpy``.
"""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np

#: a row of A whose ∞-norm is at most this is zero (interior-point zeros were ≤ 1e-6 on
#: ionosphere and housing at tolerances 1e-10; the smallest selected rows ≥ 3e-5)
ZERO = 1e-6
#: Clarabel's stopping tolerances (its defaults are 1e-8)
SOLVER_OPTIONS = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}


class QP55:
    """The QP (5.5) of one X, with λ a cvxpy parameter (one compiled problem for every λ).

    Parameters
    ----------
    X : ndarray (n, p)
        Samples × features; its columns are centred here (§3), never scaled.
    """

    def __init__(self, X: np.ndarray):
        Xc = np.asarray(X, dtype=np.float64)
        Xc = Xc - Xc.mean(axis=0)
        p = Xc.shape[1]
        self.X = Xc
        # ‖X − XA‖_F = ‖R − RA‖_F for X = QR (Q's columns orthonormal): a p × p cone, not n × p
        R = np.linalg.qr(Xc, mode="r") if Xc.shape[0] > p else Xc
        self.A = cp.Variable((p, p))
        self.s = cp.Variable(p)
        self.lam = cp.Parameter(nonneg=True)
        S = cp.reshape(self.s, (p, 1), order="C") @ np.ones((1, p))  # s_i across row i
        objective = cp.sum_squares(R - R @ self.A) + self.lam * cp.sum(self.s)
        self.problem = cp.Problem(cp.Minimize(objective), [self.A <= S, -self.A <= S])

    @property
    def lambda_max(self) -> float:
        """``max_i 2‖(XᵀX)_i‖₁``: A = 0 is optimal iff λ ≥ this (the subgradient condition of
        (4.2) at A = 0, where the loss's gradient is −2XᵀX), the top of every bisection."""
        return float(2.0 * np.abs(self.X.T @ self.X).sum(axis=1).max())

    def solve(self, lam: float) -> tuple[np.ndarray, float]:
        """(A, objective) at λ."""
        self.lam.value = float(lam)
        self.problem.solve(solver=cp.CLARABEL, **SOLVER_OPTIONS)
        if self.problem.status != cp.OPTIMAL:
            raise RuntimeError(f"Clarabel: {self.problem.status} at λ = {lam:g}")
        return np.asarray(self.A.value), float(self.problem.value)

    def row_norms(self, lam: float) -> np.ndarray:
        """``‖a_i‖_∞`` of the solution at λ."""
        return np.abs(self.solve(lam)[0]).max(axis=1)


def solve_qp(X: np.ndarray, lam: float) -> tuple[np.ndarray, float]:
    """(A, objective) of (5.5) at λ; see :class:`QP55`."""
    return QP55(X).solve(lam)


def support(norms: np.ndarray) -> np.ndarray:
    """Indices of the nonzero rows (∞-norm above ``ZERO``), increasing."""
    return np.flatnonzero(norms > ZERO)


def selection_at_q(qp: QP55, q: int, hi: float | None = None, max_steps: int = 60) -> dict:
    """The rows of A that are nonzero at a λ where exactly q are, found on (5.5) alone.

    Bisection in log λ between ``hi`` (default λ_max, where no row is; a sweep over q passes
    the λ it found for q − 1) and λ_max·1e-3, keeping ``count(hi) < q ≤ count(lo)``; stops
    at the first λ with exactly q nonzero rows.  Returns ``selected``
    (indices), ``lambda``, ``margin`` (the q-th largest row norm over the (q+1)-th: how
    clearly the q rows stand out of the solver's zeros) and ``steps``; ``selected`` is None
    when the interval closed (relative width 1e-9) without exactly q rows (rows that enter
    at the same λ).
    """
    hi, lo = hi or qp.lambda_max, qp.lambda_max * 1e-3
    if int((qp.row_norms(lo) > ZERO).sum()) < q:
        raise ValueError(f"fewer than q = {q} nonzero rows at λ_max·1e-3")
    for step in range(1, max_steps + 1):
        mid = math.sqrt(hi * lo)
        norms = qp.row_norms(mid)
        count = int((norms > ZERO).sum())
        if count == q:
            top = np.sort(norms)[::-1]
            nxt = top[q] if q < top.size else 0.0
            return {
                "selected": support(norms),
                "lambda": mid,
                "margin": float(top[q - 1] / max(nxt, 1e-300)),
                "steps": step,
            }
        if count < q:
            hi = mid
        else:
            lo = mid
        if hi / lo - 1.0 < 1e-9:
            break
    return {"selected": None, "lambda": math.sqrt(hi * lo), "margin": 0.0, "steps": max_steps}
