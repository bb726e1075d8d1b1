"""Convex principal feature selection (CPFS) — Masaeli, Yan, Cui, Fung & Dy, SDM 2010.

X is n samples × p features with centred columns (§3).  CPFS reconstructs X from a few of
its own columns, ``X̃ = XA``, and asks for whole rows of A to vanish (§4, eq. 4.2)::

    min_A  ‖X − XA‖²_F + λ Σ_i ‖a_i‖_∞          a_i = i-th row of A (p × p)

A zero row i means feature i is used to reconstruct nothing: it is not selected.  The
paper rewrites the ∞-norms with dummy variables s_i (eqs. 5.3–5.4) and solves the QP (5.5)
``min ‖X − XA‖² + λ Σ s_i  s.t. −s_i ≤ a_ij ≤ s_i`` with a projected L-BFGS.  We solve the
same convex problem (4.2) with independent first-order methods:

* ``solver="fista"``: accelerated proximal gradient (Beck & Teboulle 2009) with adaptive
  restart (O'Donoghue & Candès 2015), in the diagonal metric diag(G_SS).  The prox of
  ``τ‖·‖_∞`` is, by Moreau's identity, ``v − Π_{‖·‖₁ ≤ τ}(v)`` (projection onto the ℓ1
  ball, :mod:`fsdask.linalg.prox`), row by row.
* ``solver="qp"``: accelerated projected gradient on the paper's QP (5.5) in (A, s), with
  the exact projection onto ``{‖a_i‖_∞ ≤ s_i}``.
* ``solver="bcd"``: exact block-coordinate descent over the rows of A; each row problem
  ``min_a G_ii‖a‖² − 2a·c + λ‖a‖_∞`` is solved in closed form by the same prox.

Both stop on a **duality gap** (the certificate, reported in ``result_``).  The Fenchel dual
of (4.2) is ``max_Θ −⟨Θ, X⟩ − ‖Θ‖²/4  s.t.  max_i ‖(XᵀΘ)_i‖₁ ≤ λ`` (ℓ1 is the dual of
ℓ∞, max-over-rows the dual of sum-over-rows).  From any A we take the residual
``R = X − XA`` and ``Θ = −2cR`` with the largest feasible c ≤ the unconstrained optimum,
giving ``D = 2c⟨R, X⟩ − c²‖R‖²`` and ``gap = P(A) − D ≥ P(A) − P*``.

How the big matrix is swept (``fsdask.linalg``): X = U S Vᵀ, so ``‖X M‖ = ‖B M‖`` with
``B = S Vᵀ`` (r × p, r ≤ min(n, p)); B comes from the p × p Gram (small p) or the TSQR
of the tall-skinny Xᵀ (:func:`fsdask.linalg.gram_factor`).  Every product with
``G = XᵀX = BᵀB`` then costs O(p·r) per column; G itself is kept only when its p²·8 bytes fit
the memory budget (``fsdask.memory-budget``, :mod:`fsdask.linalg.execution`).  The solver works on the rows of A in an **active set** S: the
gradient rows ``∇_S f = 2(G_SS A_S − G_S:)`` cost O(|S|² p) per iteration, and after each
solve one KKT scan computes ``‖∇f_i‖₁`` for all p rows (O(p²·|S|) with G, O(p²·r)
without) and adds the rows with ``‖∇f_i‖₁ > λ`` (zero rows are optimal iff
``‖∇f_i‖₁ ≤ λ``).  Along the λ path, the sequential strong rule (Tibshirani et al. 2012)
seeds S.  The p² wall remains in the scan: see the README for the cost model.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
import warnings
from typing import Any, Literal, Sequence

import dask.array as da
import numpy as np
import xarray as xr
from sklearn.utils._param_validation import StrOptions

from fsdask import checkpoint
from fsdask._validation import Int, Real
from fsdask.base import FitOutput, Selector
from fsdask.errors import ConvergenceWarning, InputError, ParameterError
from fsdask.fitting import FitContext
from fsdask.linalg import (
    gram_factor,
    map_features,
    row_l1_bound,
    row_l1_norms,
    row_l1_norms_screened,
)
from fsdask.linalg.execution import fits
from fsdask.linalg.prox import (  # noqa: F401  (prox of λ‖·‖_∞, Moreau)
    project_l1_ball_rows,
    prox_linf_grad_step,
    prox_linf_rows,
)
from fsdask.linalg.reductions import compute_blocks

log = logging.getLogger("fsdask")

#: above this many features the estimator keeps only the nonzero rows of A in ``coef_``
DENSE_COEF_MAX_FEATURES = 2000
#: default path (glmnet's rule): λ_min/λ_max when n > p, and when n ≤ p
LAMBDA_MIN_RATIO_TALL, LAMBDA_MIN_RATIO_WIDE = 1e-4, 1e-2
#: default path: stop once this many rows are active (or min(n, p)): a FISTA step costs O(|S|²·p)
MAX_FEATURES_DEFAULT = 250
#: default path: stop once ‖X − XA‖² explains this share of ‖X‖² …
EXPLAINED_STOP = 0.999
#: … or the explained share grew by less than this from the previous λ
EXPLAINED_MIN_GAIN = 1e-5
#: the search for the λ that keeps q rows stops when its interval is this narrow (relative)
BISECT_RTOL = 1e-3
#: default ``max_scan_flops``: ~1 h per KKT scan at ~30 Gflop/s, and a path takes 10–20 scans
MAX_SCAN_FLOPS_DEFAULT = 1e14


# --------------------------------------------------------------------------- problem
class _Problem:
    """The data of (4.2) through the small factor B (r × p), with ``G = BᵀB = XᵀX``.

    ``allowed`` marks rows of A that may be nonzero (duplicate columns are kept as targets
    but their rows are fixed at zero).
    """

    def __init__(self, B: np.ndarray, allowed: np.ndarray, memory_budget: Any = None):
        self.B = np.ascontiguousarray(B, dtype=np.float64)
        self.r, self.p = self.B.shape
        self.allowed = allowed
        self.trG = float(np.sum(self.B * self.B))
        self.G = self.B.T @ self.B if fits(8.0 * self.p**2, memory_budget) else None
        self.n_scans = 0
        self.n_exact_rows = 0
        self._ref: tuple[np.ndarray, np.ndarray] | None = (
            None  # last scan: E, ‖Bᵀ E‖₁ (exact or bounds)
        )

    def rows(self, S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``G_SS`` (k × k) and ``G_S:`` (k × p)."""
        if self.G is not None:
            GS = self.G[S]
        else:
            GS = self.B[:, S].T @ self.B
        return GS[:, S].copy(), GS

    def grad_l1(self, S: np.ndarray, A: np.ndarray, lam: float | None = None) -> np.ndarray:
        """``‖∇f_i‖₁`` for all p rows, ``∇f = 2 G (A − I)`` with A nonzero only on rows S (the KKT scan).

        With G in memory: exact, O(p²·|S|).  From the factor, ``∇f = 2Bᵀ E`` with
        ``E = B_S A − B`` (r × p): rows whose upper bound is ≤ λ are certified without their
        p products and carry the bound (≥ the true value, so the KKT test and the dual scaling
        stay safe); ``lam=None`` makes the maximum exact.  The bound is the smaller of the SVD
        bound of E and the previous scan's value plus the SVD bound of the change
        ``E − E_ref`` (:func:`row_l1_bound`): successive scans along the path and between KKT
        rounds differ little, so most rows are certified from the last scan.
        """
        self.n_scans += 1
        if self.G is not None:
            if S.size == 0:
                return 2.0 * np.abs(self.G).sum(axis=1)
            return 2.0 * row_l1_norms(self.G[:, S], A, self.G)
        E = self.B[:, S] @ A - self.B if S.size else -self.B
        upper = None
        if self._ref is not None:
            E_ref, v_ref = self._ref
            upper = v_ref + row_l1_bound(self.B.T, E - E_ref)  # triangle inequality
        vals, exact = row_l1_norms_screened(
            self.B.T, E, None if lam is None else lam / 2.0, upper=upper
        )
        self._ref = (E, vals)
        self.n_exact_rows += int(exact.sum())
        return 2.0 * vals

    def losses(
        self, S: np.ndarray, A: np.ndarray, gram: tuple[np.ndarray, np.ndarray] | None = None
    ) -> tuple[float, float]:
        """``f = ‖X − XA‖²`` and ``⟨R, X⟩`` with ``R = X − XA``.

        With ``gram = (G_S:, G_SS A)`` in O(|S|·p): ``f = ‖X‖² − 2⟨A, G_S:⟩ + ⟨A, G_SS A⟩``,
        ``⟨R, X⟩ = ‖X‖² − ⟨A, G_S:⟩``; this cancels when f ≪ ‖X‖², so below
        ``f < 1e-4‖X‖²`` (and without ``gram``) the residual is formed on B (O(r·|S|·p)).
        """
        if gram is not None and S.size:
            GS, M = gram
            ax = float(np.vdot(A, GS))
            f = self.trG - 2.0 * ax + float(np.vdot(A, M))
            if f > 1e-4 * self.trG:
                return f, self.trG - ax
        XA = self.B[:, S] @ A if S.size else np.zeros_like(self.B)
        E = self.B - XA
        f = float(np.sum(E * E))
        return f, f + float(np.sum(E * XA))  # ⟨R, X⟩ = ‖R‖² + ⟨R, XA⟩

    def primal_dual(
        self,
        S: np.ndarray,
        A: np.ndarray,
        lam: float,
        gmax: float,
        fx: tuple[float, float] | None = None,
    ) -> tuple[float, float, float]:
        """Primal P(A), dual D (the scaled residual Θ = −2cR) and loss f = ‖X − XA‖².

        ``fx = (f, ⟨R, X⟩)`` if already known (:meth:`_Rows.losses`), else from :meth:`losses`.
        """
        f, rx = self.losses(S, A) if fx is None else fx
        pen = lam * float(row_abs_max(A).sum()) if S.size else 0.0
        P = f + pen
        c = 1.0 if f <= 0 else rx / f
        if gmax > 0:
            c = min(c, lam / gmax)
        c = max(c, 0.0)
        D = 2 * c * rx - c * c * f
        return P, D, f


def _rel_gap(P: float, D: float, lam: float, trG: float) -> float:
    """``(P − D)/P``; at λ = 0 (P* = 0, A = I) relative to ``‖X‖²`` instead."""
    return max(P - D, 0.0) / (max(P, 1e-300) if lam > 0 else max(trG, 1e-300))


# --------------------------------------------------------------------------- inner solvers
class _Rows:
    """The rows S of (4.2) and the products the inner solvers need.

    ``G_SS`` (|S| × |S|), ``G_S:`` (|S| × p), and a linear map ``A ↦ Z`` through which every
    product with G_SS goes: when r < |S|/2, ``Z = B_S A`` (r × p, 2·|S|·r·p flops) and
    ``G_SS A − G_S: = B_Sᵀ(Z − B)``; else ``Z = G_SS A`` (|S|²·p) and ``G_SS A − G_S: = Z − G_S:``.
    Z is linear in A, so a momentum step carries it along without another product.
    """

    def __init__(self, prob: _Problem, S: np.ndarray):
        self.prob, self.S = prob, S
        self.Gss, self.GS = prob.rows(S)
        self.factored = 2 * prob.r < S.size
        self.BS = np.ascontiguousarray(prob.B[:, S]) if self.factored else None
        self._grad = np.empty((S.size, prob.p))  # |S| × p: reused, not faulted in every step

    def state(self, A: np.ndarray) -> np.ndarray:
        """Z of A: ``B_S A`` or ``G_SS A``."""
        return self.BS @ A if self.factored else self.Gss @ A

    def half_grad(self, Z: np.ndarray) -> np.ndarray:
        """``G_SS A − G_S:`` (half the gradient rows ``∇_S f = 2 G (A − I)``) from Z of A.

        Written into one buffer: the next call overwrites it (callers use it at once).
        """
        if self.factored:
            return np.matmul(self.BS.T, Z - self.prob.B, out=self._grad)
        return np.subtract(Z, self.GS, out=self._grad)

    def losses(self, A: np.ndarray, Z: np.ndarray) -> tuple[float, float]:
        """``f = ‖X − XA‖²`` and ``⟨R, X⟩`` from Z of A (:meth:`_Problem.losses`)."""
        if not self.factored:
            return self.prob.losses(self.S, A, gram=(self.GS, Z))
        E = self.prob.B - Z  # the residual on B: XA ↔ B_S A = Z
        f = float(np.sum(E * E))
        return f, f + float(np.sum(E * Z))

    def gap(self, A: np.ndarray, Z: np.ndarray, lam: float) -> float:
        """Relative duality gap with the rows S (the dual scaled by the max over S)."""
        H = self.half_grad(Z)
        gmax = 2.0 * float(np.abs(H, out=H).sum(axis=1).max())  # max_i ‖∇f_i‖₁ on S
        P, D, _ = self.prob.primal_dual(self.S, A, lam, gmax, self.losses(A, Z))
        return _rel_gap(P, D, lam, self.prob.trG)


def fista_rows(
    rows: _Rows, lam: float, A0: np.ndarray, tol: float, max_iter: int, check_every: int = 10
) -> tuple[np.ndarray, int, float]:
    """FISTA with adaptive restart on the rows S of A; stops at relative duality gap ≤ tol (on S).

    Steps are taken in the diagonal metric ``D = diag(G_SS)`` (a Jacobi preconditioner:
    feature variances differ by orders of magnitude on count data): with
    ``L = 2 λ_max(D^{-½} G_SS D^{-½})``, row i moves by ``∇f_i / (L d_i)`` and its prox
    threshold is ``λ / (L d_i)`` (the penalty is row-separable, so the prox stays exact).
    The restart test ``⟨Y − A⁺, A⁺ − A⟩_D > 0`` is the gradient scheme of O'Donoghue &
    Candès in that metric.  Per iteration: one product ``G_SS Y`` (|S|² p, or 2|S| r p
    through the factor: :class:`_Rows`) and one fused prox-gradient pass over the rows
    (:func:`fsdask.linalg.prox.prox_linf_grad_step`).
    """
    if rows.S.size == 0:
        return A0, 0, 0.0
    Gss = rows.Gss
    d = np.diag(Gss).copy()
    d[d <= 0] = 1.0
    w = 1.0 / np.sqrt(d)
    L = 2.0 * float(np.linalg.eigvalsh(w[:, None] * Gss * w[None, :])[-1])
    if L <= 0:
        return np.zeros_like(A0), 0, 0.0
    step = 1.0 / (L * d)
    A = np.array(A0, dtype=np.float64)
    Y = A
    ZA = rows.state(A)  # Z of A, carried along (one product per step)
    ZY = ZA
    pool = [A] + [np.empty_like(A) for _ in range(3)]  # A (a copy), Y, A⁺, Y⁺ rotate
    t = 1.0
    gap = np.inf
    it = 0
    for it in range(1, max_iter + 1):
        H = rows.half_grad(ZY)  # ∇f = 2 G (A − I), rows S: 2(G_SS Y − G_S:)
        tn = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
        beta = (t - 1.0) / tn
        free = [b for b in pool if b is not A and b is not Y][:2]
        # prox step on λ Σ‖a_i‖_∞, and the momentum point Y⁺ = A⁺ + β(A⁺ − A) in the same pass
        An, dots, Yn = prox_linf_grad_step(Y, H, A, 2.0 * step, lam * step, beta=beta, out=free)
        ZAn = rows.state(An)
        if float(d @ dots) > 0:  # adaptive restart: ⟨Y − A⁺, A⁺ − A⟩_D > 0
            t, Y, ZY = 1.0, An, ZAn
        else:
            Y = Yn  # Z of Y by linearity, no second product
            ZY = ZAn + beta * (ZAn - ZA)
            t = tn
        A, ZA = An, ZAn
        if it % check_every == 0 or it == max_iter:
            gap = rows.gap(A, ZA, lam)
            if gap <= tol:
                break
    return A, it, gap


def bcd_rows(
    rows: _Rows, lam: float, A0: np.ndarray, tol: float, max_iter: int
) -> tuple[np.ndarray, int, float]:
    """Exact block-coordinate descent over rows; row i solves ``min G_ii‖a‖² − 2a·c + λ‖a‖_∞``.

    ``c = G_i: − Σ_{l≠i} G_il a_l``; the minimiser is ``prox_{λ/(2G_ii)‖·‖_∞}(c / G_ii)``.
    One sweep costs O(|S|² p); stops at relative duality gap ≤ tol (on S).
    """
    S, Gss, GS = rows.S, rows.Gss, rows.GS
    if S.size == 0:
        return A0, 0, 0.0
    A = A0.copy()
    M = Gss @ A
    d = np.diag(Gss).copy()
    gap = np.inf
    sweep = 0
    for sweep in range(1, max_iter + 1):  # noqa: B007  (the count is returned)
        for i in range(S.size):
            if d[i] <= 0:
                continue
            c = GS[i] - M[i] + d[i] * A[i]
            new = prox_linf_rows((c / d[i])[None, :], lam / (2.0 * d[i]))[0]
            delta = new - A[i]
            if np.any(delta):
                M += np.outer(Gss[:, i], delta)
                A[i] = new
        gap = rows.gap(A, rows.state(A), lam)
        if gap <= tol:
            break
    return A, sweep, gap


def project_linf_epigraph_rows(
    V: np.ndarray, s: np.ndarray, top: int = 64
) -> tuple[np.ndarray, np.ndarray]:
    """Project every (row v_i, s_i) onto the cone ``{(a, t): ‖a‖_∞ ≤ t}`` — the feasible set of (5.5).

    For fixed t the nearest a is ``clip(v, −t, t)``; t then solves
    ``t − s = Σ_j (|v_j| − t)_+``, i.e. ``t = (s + Σ_{j≤ρ} u_j)/(ρ + 1)`` over the sorted
    magnitudes u (ρ the largest index with ``u_ρ > t_ρ``), clipped at 0.
    """
    absV = np.abs(V)
    k, p = V.shape
    t = np.asarray(s, dtype=np.float64).copy()
    need = np.flatnonzero(absV.max(axis=1) > t)
    if need.size:
        W = absV[need]
        sn = t[need]
        th = np.zeros(need.size)
        m = min(p, top)
        todo = np.arange(need.size)
        while todo.size:
            Wt = W[todo]
            if m < p:
                top_m = -np.partition(-Wt, m - 1, axis=1)[:, :m]  # the m largest, unordered
                u = -np.sort(-top_m, axis=1)
            else:
                u = -np.sort(-Wt, axis=1)
            cand = (sn[todo, None] + np.cumsum(u, axis=1)) / np.arange(2, m + 2)
            cond = u > cand
            rho = m - np.argmax(cond[:, ::-1], axis=1)
            val = cand[np.arange(todo.size), rho - 1]
            done = (rho < m) | (m == p)
            th[todo[done]] = val[done]
            todo = todo[~done]
            m = min(p, 4 * m)
        t[need] = np.maximum(th, 0.0)
    return np.clip(V, -t[:, None], t[:, None]), t


def qp_rows(
    rows: _Rows, lam: float, A0: np.ndarray, tol: float, max_iter: int, check_every: int = 10
) -> tuple[np.ndarray, int, float]:
    """Accelerated projected gradient on the paper's QP (5.5), with adaptive restart.

    Variables (A_S, s): ``min ‖X − XA‖² + λ Σ s_i  s.t. −s_i ≤ a_ij ≤ s_i`` — a smooth
    objective (linear in s) over a polyhedral cone, projected exactly
    (:func:`project_linf_epigraph_rows`), step ``1/L`` with ``L = 2 λ_max(G_SS)``, Nesterov
    momentum on (A, s) restarted when ``⟨Y − Z⁺, Z⁺ − Z⟩ > 0`` (O'Donoghue & Candès 2015).
    It shares only the data with :func:`fista_rows` (which works on the non-smooth form 4.2
    through the prox of the ∞-norm).

    Until 2026-11 this was a spectral projected gradient (Barzilai–Borwein steps,
    non-monotone Armijo search; Birgin et al. 2000), the inner solver of the paper's
    projected quasi-Newton.  It stalled at small λ when p > n: G_SS is then singular
    (|S| > rank X), the QP is not strongly convex, and SPG converged only like O(1/k)
    (F − F* = 0.13, 0.068, 0.042, 0.027 after 2, 4, 6, 8 thousand steps on a 25 × 60 problem;
    BB1, BB2, alternating BB and monotone searches alike; no step-size pathology).  The
    accelerated scheme reaches a 1e-10 relative gap there in ~4·10⁴ steps.
    """
    if rows.S.size == 0:
        return A0, 0, 0.0
    L = 2.0 * float(np.linalg.eigvalsh(rows.Gss)[-1])
    if L <= 0:
        return np.zeros_like(A0), 0, 0.0
    A = A0.copy()
    s = row_abs_max(A)
    YA, Ys = A.copy(), s.copy()
    t = 1.0
    gap = np.inf
    it = 0
    for it in range(1, max_iter + 1):
        g = 2.0 * rows.half_grad(rows.state(YA))  # ∂/∂A of ‖X − XA‖²
        An, sn = project_linf_epigraph_rows(YA - g / L, Ys - lam / L)  # ∂/∂s of λΣs_i is λ
        if np.vdot(YA - An, An - A) + np.dot(Ys - sn, sn - s) > 0:  # adaptive restart
            t, YA, Ys = 1.0, An, sn
        else:
            tn = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
            beta = (t - 1.0) / tn
            YA, Ys = An + beta * (An - A), sn + beta * (sn - s)
            t = tn
        A, s = An, sn
        if it % check_every == 0 or it == max_iter:
            gap = rows.gap(A, rows.state(A), lam)
            if gap <= tol:
                break
    return A, it, gap


_SOLVERS = {"fista": fista_rows, "qp": qp_rows, "bcd": bcd_rows}


# --------------------------------------------------------------------------- one λ, active set
def solve_lambda(
    prob: _Problem,
    lam: float,
    S: np.ndarray,
    A: np.ndarray,
    *,
    solver: str = "fista",
    tol: float = 1e-6,
    max_iter: int = 5000,
    max_outer: int = 50,
    gl1_zero: np.ndarray | None = None,
) -> dict[str, Any]:
    """Solve (4.2) at one λ from the warm start (S, A_S); grow S until the KKT scan passes.

    Between rounds the working set keeps its nonzero rows, the rows that fail their KKT test,
    and the largest violators outside it; a zero row that passes leaves (on low-rank data the
    strong rule's candidates are often half zero rows, and every row costs a p-long pass of
    each FISTA step).

    Returns the rows S, A_S, the scan ``gl1 = ‖∇f_i‖₁`` (all rows), primal, dual, relative
    gap (global certificate: the dual point is scaled with the max over *all* p rows),
    iterations and the number of KKT rounds.  ``gl1_zero``: the scan at A = 0, if already
    known (the path's first scan); it stands in for the first scan when S starts empty.
    """
    inner = _SOLVERS[solver]
    p = prob.p
    total_it = 0
    inner_gap = 0.0
    for outer in range(1, max_outer + 1):  # noqa: B007  (reported as kkt_rounds)
        if S.size:
            rows = _Rows(prob, S)
            A, it, inner_gap = inner(rows, lam, A, tol, max_iter)
            total_it += it
        gl1 = gl1_zero if (S.size == 0 and gl1_zero is not None) else prob.grad_l1(S, A, lam)
        outside = prob.allowed.copy()
        outside[S] = False
        viol = np.flatnonzero(outside & (gl1 > lam * (1 + 1e-12)))
        if viol.size == 0:
            break
        # add violators (largest first, at most as many again as S holds + 10)
        viol = viol[np.argsort(-gl1[viol])][: max(10, S.size)]
        if S.size:  # zero rows that pass their KKT test leave: each costs p per FISTA step
            stay = (row_abs_max(A) > 0) | (gl1[S] > lam)  # (a later scan re-adds a violator)
            S, A = S[stay], A[stay]
        S_new = np.union1d(S, viol)
        A_new = np.zeros((S_new.size, p))
        if S.size:
            A_new[np.searchsorted(S_new, S)] = A
        S, A = S_new, A_new
    gmax = float(gl1[prob.allowed].max())
    fx = rows.losses(A, rows.state(A)) if S.size and viol.size == 0 else None  # rows is of this S
    P, D, f = prob.primal_dual(S, A, lam, gmax, fx)
    return {
        "S": S,
        "A": A,
        "gl1": gl1,
        "primal": P,
        "dual": D,
        "loss": f,
        "gap": _rel_gap(P, D, lam, prob.trG),
        "inner_gap": inner_gap,
        "n_iter": total_it,
        "kkt_rounds": outer,
        "kkt_ok": bool(np.all(gl1[prob.allowed & ~np.isin(np.arange(p), S)] <= lam * (1 + 1e-12))),
    }


def row_abs_max(A: np.ndarray) -> np.ndarray:
    """``‖a_i‖_∞`` of every row of A (k × p) without the k × p temporary ``np.abs(A)``: A's
    rows are p long, and the duality gap and the path's bookkeeping take this every few steps."""
    if A.shape[1] == 0:
        return np.zeros(A.shape[0])
    return np.maximum(A.max(axis=1), -A.min(axis=1))


def _row_norms(p: int, S: np.ndarray, A: np.ndarray) -> np.ndarray:
    out = np.zeros(p)
    if S.size:
        out[S] = row_abs_max(A)
    return out


def _diag(p: int, S: np.ndarray, A: np.ndarray) -> np.ndarray:
    out = np.zeros(p)
    if S.size:
        out[S] = A[np.arange(S.size), S]
    return out


class _Path:
    """Warm-started λ path (decreasing λ) with the sequential strong rule (Tibshirani et al. 2012)."""

    def __init__(self, prob: _Problem, solver: str, tol: float, max_iter: int):
        self.prob, self.solver, self.tol, self.max_iter = prob, solver, tol, max_iter
        p = prob.p
        self.S = np.zeros(0, dtype=np.int64)
        self.A = np.zeros((0, p))
        self.gl1 = self.gl1_zero = prob.grad_l1(self.S, self.A)
        allowed_g = self.gl1[prob.allowed]
        self.lambda_max = float(allowed_g.max()) if allowed_g.size else 0.0
        self.lam_prev = self.lambda_max
        self.records: list[dict[str, Any]] = []
        self.min_cap = (
            0  # the working set may start this large (the number of rows the path aims at)
        )
        self.sols: dict[float, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def solve(
        self, lam: float, warm: tuple[np.ndarray, np.ndarray, np.ndarray, float] | None = None
    ) -> dict:
        t0 = time.perf_counter()
        S0, A0, gl1, lam_prev = (
            warm if warm is not None else (self.S, self.A, self.gl1, self.lam_prev)
        )
        nz = S0[row_abs_max(A0) > 0] if S0.size else S0
        strong = np.flatnonzero(self.prob.allowed & (gl1 >= 2 * lam - lam_prev))
        if lam >= self.lambda_max:  # A = 0 is optimal iff max_i ‖∇f_i(0)‖₁ ≤ λ: nothing to solve
            nz, strong = nz[:0], strong[:0]
        cap = max(
            2 * nz.size + 10, self.min_cap
        )  # working-set cap: exactly low-rank X ties thousands of rows at the rule's
        if (
            strong.size > cap
        ):  # threshold; the KKT rounds of solve_lambda still guarantee optimality
            strong = strong[np.argsort(-gl1[strong], kind="stable")[:cap]]
        S = np.union1d(nz, strong).astype(np.int64)
        A = np.zeros((S.size, self.prob.p))
        if nz.size:
            A[np.searchsorted(S, nz)] = A0[np.searchsorted(S0, nz)]
        res = solve_lambda(
            self.prob,
            lam,
            S,
            A,
            solver=self.solver,
            tol=self.tol,
            max_iter=self.max_iter,
            gl1_zero=self.gl1_zero,
        )
        keep = row_abs_max(res["A"]) > 0 if res["S"].size else np.zeros(0, bool)
        S, A = res["S"][keep], res["A"][keep]
        rec = {
            "lambda": lam,
            "row_norm": _row_norms(self.prob.p, S, A),
            "diag": _diag(self.prob.p, S, A),
            "n_active": int(S.size),
            "primal": res["primal"],
            "dual": res["dual"],
            "loss": res["loss"],
            "gap": res["gap"],
            "n_iter": res["n_iter"],
            "kkt_rounds": res["kkt_rounds"],
            "kkt_max_ratio": float(
                res["gl1"][self.prob.allowed & (_row_norms(self.prob.p, S, A) == 0)].max(
                    initial=0.0
                )
                / lam
            )
            if lam > 0
            else 0.0,
            "seconds": time.perf_counter() - t0,
        }
        self.records.append(rec)
        self.sols[lam] = (S, A, res["gl1"])
        self.S, self.A, self.gl1, self.lam_prev = S, A, res["gl1"], lam
        log.info(
            "cpfs λ=%.4g: %d active rows, rel. gap %.2e, %d iterations, %d KKT round(s), %.2fs",
            lam,
            S.size,
            res["gap"],
            res["n_iter"],
            res["kkt_rounds"],
            rec["seconds"],
        )
        return rec

    # ---- checkpoints: the records so far and the warm start of the next λ (never X)
    def state(self) -> dict[str, Any]:
        recs = [{k: v for k, v in r.items() if k not in ("row_norm", "diag")} for r in self.records]
        return {
            "rec_row_norm": np.array([r["row_norm"] for r in self.records]),
            "rec_diag": np.array([r["diag"] for r in self.records]),
            "records": recs,
            "S": self.S,
            "A": self.A,
            "gl1": self.gl1,
            "lam_prev": self.lam_prev,
            "n_scans": self.prob.n_scans,
            "n_exact_rows": self.prob.n_exact_rows,
        }

    def restore(self, saved: dict[str, Any]) -> None:
        self.records = [
            {**r, "row_norm": rn, "diag": d}
            for r, rn, d in zip(saved["records"], saved["rec_row_norm"], saved["rec_diag"])
        ]
        self.S, self.A, self.gl1 = saved["S"].astype(np.int64), saved["A"], saved["gl1"]
        self.lam_prev = float(saved["lam_prev"])
        self.sols[self.lam_prev] = (self.S, self.A, self.gl1)
        self.prob.n_scans, self.prob.n_exact_rows = (
            int(saved["n_scans"]),
            int(saved["n_exact_rows"]),
        )

    def warm_from(self, lam: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        S, A, gl1 = self.sols[lam]
        return S, A, gl1, lam

    def as_dataset(self, names: np.ndarray) -> xr.Dataset:
        recs = sorted(self.records, key=lambda r: -r["lambda"])
        lam = np.array([r["lambda"] for r in recs])
        data = {
            "path_row_norm": (("lambda", "feature"), np.array([r["row_norm"] for r in recs])),
            "path_diag": (("lambda", "feature"), np.array([r["diag"] for r in recs])),
        }
        for key in (
            "n_active",
            "primal",
            "dual",
            "loss",
            "gap",
            "n_iter",
            "kkt_rounds",
            "kkt_max_ratio",
            "seconds",
        ):
            data[f"path_{key}"] = ("lambda", np.array([r[key] for r in recs]))
        return xr.Dataset(data, coords={"lambda": lam, "feature": names})


def _toward_q(q: int, r1: dict, r2: dict, overshoot: bool = True) -> float | None:
    """The λ at which the count of nonzero rows, extrapolated linearly in log λ through two path
    points (λ₁ > λ₂, counts c₁ < c₂ < q), reaches ``q + ⌈q/20⌉`` — just past q, so that the
    next solve brackets q without the grid's long overshoot (each extra active row costs)."""
    (l1, c1), (l2, c2) = (r1["lambda"], r1["n_active"]), (r2["lambda"], r2["n_active"])
    if not (l1 > l2 > 0 and c2 > c1):
        return None
    slope = (c2 - c1) / math.log(l1 / l2)
    return l2 * math.exp(-(q + math.ceil(q / 20) * overshoot - c2) / slope)


def entry_lambda(path_row_norm: np.ndarray, lambdas: np.ndarray) -> np.ndarray:
    """Largest λ on the path at which each feature's row of A is nonzero (0 if never)."""
    order = np.argsort(-lambdas)
    nz = path_row_norm[order] > 0
    first = np.argmax(nz, axis=0)
    return np.where(nz.any(axis=0), lambdas[order][first], 0.0)


# --------------------------------------------------------------------------- estimator
class CPFS(Selector):
    """Convex principal feature selection (Masaeli et al., SDM 2010), solved to a certificate.

    ``min_A ‖X − XA‖²_F + λ Σ_i ‖a_i‖_∞`` (eq. 4.2) on centred columns; features whose row
    of A is nonzero are selected.  λ is reached along a warm-started path from
    ``λ_max = max_i 2‖(XᵀX)_i‖₁`` (where A = 0) downwards.

    Parameters
    ----------
    lam : float or None
        The λ of (4.2).  None: with ``n_features_to_select=q``, the λ that keeps q rows
        (path, then bisection in log λ); otherwise the end of the default path.
    n_features_to_select : int or None
        q.  Selected = the nonzero rows at the λ that keeps q (if the path passes a λ with
        exactly q nonzero rows), else the first q by ``ranking_``.
    n_lambdas : int
        Points of the geometric λ grid (from λ_max to ``lam`` or ``lambda_min_ratio·λ_max``).
        With ``n_features_to_select`` or ``max_features``, extra λ are inserted where the
        strong rule predicts the grid would overshoot that many rows.
    lambda_min_ratio : float or "auto"
        End of the default grid, relative to λ_max; "auto" (glmnet's rule): 1e-4 if n > p,
        else 1e-2.  With "auto" on the default path, the path also stops when the share of
        ‖X‖² reconstructed reaches 99.9 % or grows by less than 1e-5 from one λ to the next.
    lambdas : sequence of float, optional
        An explicit grid (used as given, sorted decreasing).
    max_features : int, "auto" or None
        Stop the path once this many rows are nonzero (the p² wall; see README); "auto":
        min(n, p, 250) on the default path (no ``lam``, ``lambdas``, ``n_features_to_select``),
        else no limit.  Where and why the path stopped: ``result_.attrs["path_stop"]`` and
        ``["path_stop_reason"]``.
    max_iter : int
        Inner iterations per λ and KKT round (FISTA steps or BCD sweeps).
    tol : float, default 1e-4
        Target relative duality gap ``(P − D)/P`` at every λ (the certificate).  The gap
        bounds how far P is from its optimum and often overstates it: at 1e-4 the primal
        was within 3e-8 (relative) of a 1e-8 solve on every λ of nips_words' default path,
        within 7e-7 on a rank-20 500 × 2·10⁴ X, within 1.4e-5 on a small noisy low-rank X.
        The selections matched a 1e-6 solve (nips: the same top 250 in the same order;
        500 × 10⁵ rank-20: 99 of the same 100) with 1.6× and 4.8× fewer FISTA steps.
        Lower it when the path's own values matter, not for the selection.
    solver : {"fista", "qp", "bcd"}
        Accelerated proximal gradient on (4.2); accelerated projected gradient on the paper's
        QP (5.5); or exact block-coordinate descent over rows (slow, a reference).
    scale : bool
        Divide centred columns by their standard deviation (the paper does not).
    energy_tol : float
        Singular directions of X with total energy ≤ ``energy_tol·‖X‖²`` are dropped from
        the factor B (numerical rank); reported as ``discarded_energy``.
    memory_budget : int, float, str or None
        Keep the p × p Gram in memory when it fits this budget (faster KKT scans); None
        reads dask config ``fsdask.memory-budget``.  Also chooses how X is factored
        (:func:`fsdask.linalg.gram_factor`).
    max_bisect : int
        Steps of the search in log λ (safeguarded interpolation on the count of nonzero
        rows) to hit exactly q nonzero rows; it also stops once the λ interval is narrower
        than ``BISECT_RTOL`` (1e-3) relative, where rows enter together.
    on_constant : {"drop", "error"}
        Constant columns carry no variance: weight 0, never selected (or raise).
    max_scan_flops : float or None
        Refuse, before X is read, a problem whose KKT scan from the factor would cost more
        than this many flops, ``2·p²·min(n, p)`` (the p² wall: at 100 × 10⁷ one scan is
        2·10¹⁶ flops, days); None lifts the limit.  Select candidates first (e.g. a
        ``Filter``) to bring p down.
    on_duplicate : {"drop", "keep", "error"}
        Exact duplicate columns: ``drop`` keeps the first copy's row free and fixes the
        others' rows at zero (they are still reconstructed; the optimum is unchanged, since
        merged rows never cost more penalty); ``keep`` leaves them free (the optimum is then
        not unique and copies may share the weight); ``error`` raises.

    Attributes
    ----------
    scores_ : row ∞-norms ``‖a_i‖_∞`` at the final λ.
    ranking_ : by entry λ (the largest λ at which the row is nonzero), then ``scores_``.
    coef_ : A (p × p) when p ≤ 2000, else its nonzero rows (``coef_rows_`` gives their indices).
    lambda_ : the final λ.  lambda_max_ : where A = 0.  duality_gap_ : relative gap at ``lambda_``.
    path_ : ``xarray.Dataset`` over ``lambda`` (row norms, diagonal of A, active counts, gaps).
    result_ : the path variables are also in the result (dims ``lambda``, ``feature``).
    """

    method_name = "cpfs"
    _parameter_constraints: dict = {
        "lam": [Real(0, None), None],
        "n_features_to_select": [Int(1), None],
        "n_lambdas": [Int(1)],
        "lambda_min_ratio": [Real(0, 1, closed="neither"), StrOptions({"auto"})],
        "lambdas": ["array-like", None],
        "max_features": [Int(1), StrOptions({"auto"}), None],
        "max_iter": [Int(1)],
        "tol": [Real(0, None, closed="neither")],
        "solver": [StrOptions(set(_SOLVERS))],
        "scale": ["boolean"],
        "energy_tol": [Real(0, None)],
        "memory_budget": [Real(0, None), str, None],
        "max_bisect": [Int(0)],
        "max_scan_flops": [Real(0, None, closed="neither"), None],
        "on_constant": [StrOptions({"drop", "error"})],
        "on_duplicate": [StrOptions({"drop", "keep", "error"})],
    }

    def __init__(
        self,
        lam: float | None = None,
        n_features_to_select: int | None = None,
        *,
        n_lambdas: int = 20,
        lambda_min_ratio: float | str = "auto",
        lambdas: Sequence[float] | None = None,
        max_features: int | str | None = "auto",
        max_iter: int = 5000,
        tol: float = 1e-4,
        solver: Literal["fista", "qp", "bcd"] = "fista",
        scale: bool = False,
        energy_tol: float = 1e-12,
        memory_budget: Any = None,
        max_bisect: int = 12,
        max_scan_flops: float | None = MAX_SCAN_FLOPS_DEFAULT,
        on_constant: Literal["drop", "error"] = "drop",
        on_duplicate: Literal["drop", "keep", "error"] = "drop",
    ):
        self.lam = lam
        self.n_features_to_select = n_features_to_select
        self.n_lambdas = n_lambdas
        self.lambda_min_ratio = lambda_min_ratio
        self.lambdas = lambdas
        self.max_features = max_features
        self.max_iter = max_iter
        self.tol = tol
        self.solver = solver
        self.scale = scale
        self.energy_tol = energy_tol
        self.memory_budget = memory_budget
        self.max_bisect = max_bisect
        self.max_scan_flops = max_scan_flops
        self.on_constant = on_constant
        self.on_duplicate = on_duplicate

    # ---- the fit
    def _check_shape(self, n: int, p: int) -> None:
        """Refuse before any pass over X when one KKT scan would exceed ``max_scan_flops``."""
        flops = 2.0 * p * p * min(n, p)
        if self.max_scan_flops is not None and flops > self.max_scan_flops:
            raise ParameterError(
                f"CPFS on {n} × {p}: one KKT scan costs up to 2·p²·min(n, p) = {flops:.1e} flops "
                f"(> max_scan_flops={self.max_scan_flops:.1e}, ~1 h each on 2 cores) and a path "
                "takes 10–20 scans; select fewer candidate features first (e.g. a Filter), or "
                "pass max_scan_flops=None to run anyway"
            )

    def _prepare(self, X: da.Array) -> tuple[_Problem, dict[str, Any]]:
        # §3: columns zero-centred — one float64 copy per block, centred in place (a chain of
        # dask ops would hold each of its float64 intermediates at once in the fused task)
        Xc = map_features(
            _centred_block, X, out_rows=X.shape[0], dtype=np.float64, scale=self.scale
        )
        dup = duplicate_columns(X)
        if dup.any() and self.on_duplicate == "error":
            raise InputError(
                f"X has {int(dup.sum())} column(s) that duplicate an earlier column "
                f"(first: #{int(np.flatnonzero(dup)[0])}); drop them or use on_duplicate='drop'"
            )
        allowed = ~dup if self.on_duplicate == "drop" else np.ones(X.shape[1], bool)
        B, s = gram_factor(Xc, energy_tol=self.energy_tol, memory_budget=self.memory_budget)
        total = float(np.sum(s**2))
        info = {
            "rank": int(B.shape[0]),
            "discarded_energy": float(np.sum(s[B.shape[0] :] ** 2) / total) if total else 0.0,
            "n_duplicate_columns": int(dup.sum()),
        }
        return _Problem(B, allowed, self.memory_budget), info

    def _defaults(self, n: int, p: int) -> tuple[float, int | None, bool]:
        """The resolved ``lambda_min_ratio``, ``max_features`` and whether the default-path stops
        apply (glmnet's choices: a ratio by n vs p; on the default path — no ``lam``, ``lambdas``
        or ``n_features_to_select`` — stop at min(n, p, 250) active rows or when the
        reconstruction stops improving)."""
        ratio = self.lambda_min_ratio
        if isinstance(ratio, str):
            ratio = LAMBDA_MIN_RATIO_TALL if n > p else LAMBDA_MIN_RATIO_WIDE
        default_path = (
            self.lam is None and self.lambdas is None and self.n_features_to_select is None
        )
        mf = self.max_features
        if isinstance(mf, str):
            mf = min(n, p, MAX_FEATURES_DEFAULT) if default_path else None
        return float(ratio), mf, default_path and isinstance(self.lambda_min_ratio, str)

    def _grid(self, lam_max: float) -> np.ndarray:
        if self.lambdas is not None:
            return np.sort(np.asarray(self.lambdas, dtype=float))[::-1]
        lo = self.lam if self.lam is not None else lam_max * self._ratio
        if self.lam is not None and self.lam >= lam_max:
            return np.array([float(self.lam)])
        if lo <= 0:
            grid = lam_max * np.geomspace(1.0, self._ratio, max(self.n_lambdas - 1, 1))
            return np.append(grid, 0.0)
        return (
            lam_max * np.geomspace(1.0, lo / lam_max, self.n_lambdas)
            if self.n_lambdas > 1
            else np.array([lo])
        )

    def _fit(self, X: da.Array, y: np.ndarray | None, ctx: FitContext) -> FitOutput:
        n, p = X.shape
        q = self.n_features_to_select
        if self.lambdas is not None:
            lams = np.asarray(self.lambdas, dtype=float)
            if (
                lams.ndim != 1
                or lams.size == 0
                or not np.all(np.isfinite(lams))
                or np.any(lams < 0)
            ):
                raise ParameterError("lambdas must be a non-empty list of finite numbers ≥ 0")
        prob, info = self._prepare(X)
        if q is not None and q > int(prob.allowed.sum()):
            raise ParameterError(
                f"n_features_to_select={q} but X has only {int(prob.allowed.sum())} usable "
                f"features ({p} non-constant, {info['n_duplicate_columns']} duplicate)"
            )
        path = _Path(prob, self.solver, float(self.tol), int(self.max_iter))
        lam_max = path.lambda_max
        self._ratio, max_features, watch_fit = self._defaults(n, p)
        grid = list(self._grid(lam_max))
        aim = (
            None
            if self.lam is not None or self.lambdas is not None
            else (q if q is not None else max_features)
        )
        final = None
        below = None  # (λ, n_active) with n_active < q
        stop = (
            ("lam", f"reached λ = {grid[-1]:.4g}")
            if self.lam is not None
            else ("grid_end", f"end of the grid, λ = {grid[-1]:.4g}")
        )
        explained_prev = None
        k = 0
        path.min_cap = aim or 0
        slot = checkpoint.for_fit(self, X).slot("cpfs/path")
        saved = slot.restore()  # a killed fit continues after the last λ it saved
        if saved is not None:
            grid, k, stop, explained_prev = (
                [float(v) for v in saved["grid"]],
                saved["k"],
                tuple(saved["stop"]),
                saved["explained_prev"],
            )
            path.restore(saved)
            final = path.records[-1]
            below = final if saved["below_is_last"] else None
        while k < len(grid):
            lam = grid[k]
            k += 1
            rec = path.solve(float(lam))
            final = rec
            if q is not None and rec["n_active"] >= q:
                stop = (
                    "n_features_to_select",
                    f"{rec['n_active']} active rows ≥ n_features_to_select={q}",
                )
                break
            if aim is not None:
                before, below = below, rec
                if before is not None and k < len(grid):
                    lam_next = _toward_q(aim, before, rec, overshoot=q is not None)
                    if lam_next is not None and lam_next > grid[k]:
                        grid.insert(
                            k, lam_next
                        )  # a shorter step than the grid's, aimed just past q
            if max_features is not None and rec["n_active"] >= max_features:
                stop = (
                    "max_features",
                    f"{rec['n_active']} active rows ≥ max_features={max_features}",
                )
                break
            explained = 1.0 - rec["loss"] / prob.trG if prob.trG > 0 else 1.0
            if watch_fit and rec["n_active"] > 0:
                if explained >= EXPLAINED_STOP:
                    stop = (
                        "reconstruction",
                        f"XA reconstructs {explained:.4%} ≥ {EXPLAINED_STOP:.1%} of ‖X‖²",
                    )
                    break
                if explained_prev is not None and explained - explained_prev < EXPLAINED_MIN_GAIN:
                    stop = (
                        "reconstruction",
                        f"explained share of ‖X‖² grew by {explained - explained_prev:.2e} "
                        f"< {EXPLAINED_MIN_GAIN:g} from the previous λ",
                    )
                    break
                explained_prev = explained
            slot.reached(
                len(path.records),
                lambda: {
                    **path.state(),
                    "grid": grid,
                    "k": k,
                    "stop": list(stop),
                    "explained_prev": explained_prev,
                    "below_is_last": below is rec,
                },
            )
        log.info(
            "cpfs: path stopped at λ=%.4g (%d active rows): %s",
            final["lambda"],
            final["n_active"],
            stop[1],
        )
        if q is not None and self.lam is None and final["n_active"] != q and below is not None:
            final = self._bisect(path, q, below, final)
        lam_final = final["lambda"]
        S, A, gl1 = path.sols[lam_final]
        pds = path.as_dataset(np.arange(p))
        entry = entry_lambda(pds["path_row_norm"].values, pds["lambda"].values)
        scores = _row_norms(p, S, A)
        converged = bool(np.all(pds["path_gap"].values <= self.tol * 1.0000001))
        if not converged:
            warnings.warn(
                f"CPFS: the duality gap did not reach tol={self.tol} at every λ "
                f"(worst {float(pds['path_gap'].max()):.2e}); raise max_iter",
                ConvergenceWarning,
                stacklevel=4,
            )
        # ranking: by entry λ, then ‖a_i‖_∞, then the KKT ratio; selected: the nonzero rows, or
        # the first q by that ranking when no λ keeps exactly q rows
        support = scores > 0
        if q is not None and int(support.sum()) != q:
            support = np.zeros(p, bool)
            support[np.lexsort((-gl1, -scores, -entry))[:q]] = True
        self._set_coef(S, A)
        self.lambda_ = lam_final
        self.lambda_max_ = lam_max
        self.duality_gap_ = final["gap"]
        attrs = {
            "lambda": lam_final,
            "lambda_max": lam_max,
            "duality_gap": final["gap"],
            "primal": final["primal"],
            "dual": final["dual"],
            "kkt_max_ratio_inactive": final["kkt_max_ratio"],
            "certificate": "relative duality gap (P - D)/P of eq. 4.2 on the rank-r factor B",
            "solver": self.solver,
            "n_kkt_scans": prob.n_scans,
            "kkt_exact_rows_per_scan": prob.n_exact_rows / max(prob.n_scans, 1)
            if prob.G is None
            else float(prob.p),
            "gram_in_memory": prob.G is not None,
            "path_stop": stop[0],
            "path_stop_reason": stop[1],
            "lambda_min_ratio": self._ratio,
            "max_features": -1 if max_features is None else int(max_features),
            **info,
        }
        path_vars = {v: pds[v].values for v in pds.data_vars}
        return FitOutput(
            scores=scores,
            support=support,
            support_is_final=True,
            rank_key=(entry, scores, gl1),
            n_iter=int(pds["path_n_iter"].sum()),
            converged=converged,
            objective=[float(v) for v in pds["path_primal"].values],
            extras={**path_vars, "entry_lambda": entry},
            extra_dims={v: pds[v].dims for v in pds.data_vars},
            coords={"lambda": pds["lambda"].values},
            attrs=attrs,
        )

    def _set_coef(self, S: np.ndarray, A: np.ndarray) -> None:
        """coef_ (p × p, or its nonzero rows above DENSE_COEF_MAX_FEATURES) over all features."""
        act = self.active_features_
        p = act.size
        idx = np.flatnonzero(act)
        rows = idx[S]
        if p <= DENSE_COEF_MAX_FEATURES:
            self.coef_ = np.zeros((p, p))
            self.coef_[np.ix_(rows, idx)] = A
        else:
            self.coef_ = np.zeros((rows.size, p))
            self.coef_[:, idx] = A
        self.coef_rows_ = rows

    def _bisect(self, path: _Path, q: int, below: dict, above: dict) -> dict:
        """Refine λ between ``below`` (fewer than q nonzero rows) and ``above`` (q or more).

        The new λ interpolates log λ linearly in the count of nonzero rows, kept within the
        middle 60% of the interval (so it shrinks by ≥ 20% a step, like a safeguarded
        regula falsi), and is warm-started from the nearer end.  Stops at exactly q rows, after ``max_bisect`` steps, or when the
        interval is narrower than ``BISECT_RTOL`` relative: rows that enter at the same λ
        (ties, e.g. in exactly low-rank data) cannot be split by λ, and the first q by
        ``ranking_`` are then selected from the solution with more than q rows.
        """
        hi, c_hi = below["lambda"], below["n_active"]  # count(hi) < q ≤ count(lo)
        lo, c_lo = above["lambda"], above["n_active"]
        best = above
        for _ in range(int(self.max_bisect)):
            if lo > 0 and hi / lo - 1.0 < BISECT_RTOL:
                break
            t = min(max((q - c_hi) / max(c_lo - c_hi, 1), 0.2), 0.8)
            mid = hi * (lo / hi) ** t if lo > 0 else hi / 2
            # warm start from the nearer end in log λ: from lo, the extra rows are zeroed by
            # the prox and the rows that stay need neither a KKT round nor many steps
            near = lo if lo > 0 and t > 0.5 else hi
            rec = path.solve(mid, warm=path.warm_from(near))
            if rec["n_active"] >= q:
                lo, c_lo, best = mid, rec["n_active"], rec
                if rec["n_active"] == q:
                    break
            else:
                hi, c_hi = mid, rec["n_active"]
        return best

    @property
    def path_(self) -> xr.Dataset:
        """The λ path over all features (``path_*`` variables and ``entry_lambda`` of ``result_``)."""
        ds = self.result_
        return ds[[v for v in ds.data_vars if v.startswith("path_")] + ["entry_lambda"]]

    @property
    def leave_order_(self) -> np.ndarray:
        """Indices of the features that were ever nonzero, in the order they leave as λ grows."""
        entry = self.result_["entry_lambda"].values
        order = np.argsort(self.ranking_)[::-1]
        return order[entry[order] > 0]


def _centred_block(xb: np.ndarray, scale: bool) -> np.ndarray:
    """The block's columns centred (and divided by their ddof-1 standard deviation), in one
    float64 copy: block memory ×1 in float64, never the ×3–4 of ``(x − x̄)/sd`` as dask ops."""
    out = xb.astype(np.float64)
    out -= out.mean(axis=0)
    if scale:
        out /= np.sqrt(np.einsum("ij,ij->j", out, out) / (out.shape[0] - 1))
    return out


def duplicate_columns(X: da.Array) -> np.ndarray:
    """Mask of columns that exactly equal an earlier column (one pass: per-column byte hashes)."""
    (h,) = compute_blocks(map_features(column_hashes, X, dtype=np.int64))  # joined on the client
    _, first = np.unique(h, return_index=True)
    dup = np.ones(h.size, bool)
    dup[first] = False
    return dup


def column_hashes(xb: np.ndarray) -> np.ndarray:
    """A 64-bit BLAKE2b digest of each column's bytes, the same in every process (Python's
    ``hash`` of bytes is salted per process: equal columns on two workers would differ)."""
    xb = np.ascontiguousarray(xb.T)
    return np.array(
        [
            int.from_bytes(
                hashlib.blake2b(row.tobytes(), digest_size=8).digest(), "little", signed=True
            )
            for row in xb
        ],
        dtype=np.int64,
    )


def cpfs_path(
    X: Any,
    n_lambdas: int = 20,
    *,
    lambda_min_ratio: float | str = "auto",
    lambdas: Sequence[float] | None = None,
    max_features: int | str | None = "auto",
    n_features_to_select: int | None = None,
    **params: Any,
) -> xr.Dataset:
    """The CPFS regularisation path (Fig. 1 of the paper) as an ``xarray.Dataset``.

    Variables over ``lambda`` (decreasing) and ``feature``: ``path_row_norm`` (‖a_i‖_∞),
    ``path_diag`` (a_ii), ``path_n_active``, ``path_primal``, ``path_dual``, ``path_gap``
    (relative duality gap, the certificate), ``path_loss``; and ``entry_lambda(feature)``
    (largest λ with a nonzero row; features leave in increasing order of it).  With
    ``n_features_to_select=q`` the path is refined by bisection until q rows are nonzero;
    the attribute ``lambda_q`` is that λ.  Defaults (glmnet's): the grid ends at
    ``lambda_min_ratio·λ_max`` with the ratio 1e-4 if n > p else 1e-2, and the path stops
    early at ``max_features`` = min(n, p, 250) active rows or when the share of ‖X‖²
    reconstructed reaches 99.9 % or grows by less than 1e-5 per λ; the attributes
    ``path_stop`` (max_features, reconstruction, grid_end, n_features_to_select, lam) and
    ``path_stop_reason`` say where and why it stopped.
    """
    est = CPFS(
        n_features_to_select=n_features_to_select,
        n_lambdas=n_lambdas,
        lambda_min_ratio=lambda_min_ratio,
        lambdas=lambdas,
        max_features=max_features,
        **params,
    ).fit(X)
    ds = est.path_.copy()
    ds.attrs = {
        k: est.result_.attrs[k]
        for k in (
            "lambda",
            "lambda_max",
            "duality_gap",
            "rank",
            "discarded_energy",
            "solver",
            "wall_time_s",
            "path_stop",
            "path_stop_reason",
            "lambda_min_ratio",
            "max_features",
        )
    }
    ds["rank"] = ("feature", est.ranking_)
    if n_features_to_select is not None:
        ds.attrs["lambda_q"] = est.lambda_
    return ds
