"""The inner problem of Algorithm 1 (lines 5–6): eq. 7 and its solvers.

``min_{w≥0} Σ_n log(1 + exp(−wᵀ z̄_n)) + λ‖w‖₁`` (eq. 7) is solved either by the paper's
gradient descent on ``w = v²`` with a line search (eqs. 9–10, :func:`solve_v2_gradient`,
``solver="gd"``) or by L-BFGS-B on ``w ≥ 0`` (:func:`solve_lbfgs`, ``solver="lbfgs"``, the
default: same optimum, far fewer passes); for many columns :func:`solve_working_set` solves
it on a working set certified by one sweep.  Z̄ is seen only through its products (a
:class:`~fsdask.linalg.execution.LinearOperator`): every objective/gradient is one sweep
over Z̄ for the margins Z̄w plus one for the gradient Z̄ᵀs.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize, minimize_scalar

from fsdask.linalg.execution import InMemoryOperator
from fsdask.linalg.threads import one_blas_thread

__all__ = [
    "objective",
    "sigmoid_neg",
    "solve_lbfgs",
    "solve_logo_m",
    "solve_v2_gradient",
    "solve_working_set",
]


def sigmoid_neg(m: np.ndarray) -> np.ndarray:
    """σ(−m) = exp(−m)/(1 + exp(−m)), stable for any m.

    Parameters
    ----------
    m : ndarray
        The margins ``ρ̄_n``.

    Returns
    -------
    ndarray
        ``σ(−m)``, elementwise, the shape of m.
    """
    return 0.5 * (1.0 - np.tanh(0.5 * m))


def objective(m: np.ndarray, w: np.ndarray, lam: float) -> float:
    """Σ_n log(1 + exp(−ρ̄_n)) + λ Σ_j w_j (eq. 7; w ≥ 0 so ‖w‖₁ = Σ w).

    Parameters
    ----------
    m : ndarray (N,)
        The margins ``ρ̄_n = wᵀ z̄_n``.
    w : ndarray (J,)
        The weights, ≥ 0.
    lam : float
        λ of eq. 7.

    Returns
    -------
    float
        The objective of eq. 7.
    """
    return float(np.logaddexp(0.0, -m).sum() + lam * w.sum())


def solve_lbfgs(
    Z, lam: float, w0: np.ndarray, tol: float = 1e-10, max_iter: int = 2000
) -> tuple[np.ndarray, float, int]:
    """Eq. 7 by L-BFGS-B on w ≥ 0.

    Parameters
    ----------
    Z : LinearOperator
        Z̄ (N × J), seen through ``matvec``/``rmatvec`` (one sweep each).
    lam : float
        λ of eq. 7.
    w0 : ndarray (J,)
        The start (the previous outer iteration's w).
    tol, max_iter : float, int
        L-BFGS-B's projected-gradient tolerance and iteration cap (at most ``4·max_iter``
        evaluations).

    Returns
    -------
    (w, objective, nfev) : (ndarray (J,), float, int)
        The minimiser (clipped at 0), eq. 7 there, and the number of f/g evaluations.
    """
    nfev = 0

    def fg(w):
        nonlocal nfev
        nfev += 1
        m = Z.matvec(w)
        return objective(m, w, lam), lam - Z.rmatvec(sigmoid_neg(m))

    # L-BFGS-B makes many tiny BLAS calls: threaded BLAS makes them slower, more so on a busy machine
    with one_blas_thread():
        res = minimize(
            fg,
            np.asarray(w0, dtype=np.float64),
            jac=True,
            method="L-BFGS-B",
            bounds=[(0.0, None)] * len(w0),
            options={
                "maxiter": max_iter,
                "maxfun": 4 * max_iter,
                "ftol": 1e-15,
                "gtol": tol,
                "maxcor": 20,
            },
        )
    return np.maximum(res.x, 0.0), float(res.fun), nfev


def solve_v2_gradient(
    Z, lam: float, w0: np.ndarray, tol: float = 1e-10, max_iter: int = 20000, v_floor: float = 1e-2
) -> tuple[np.ndarray, float, int]:
    """Eq. 9 by the paper's update (10) ``v ← v − η (λ1 − Σ_n σ(−ρ̄_n) z̄_n) ⊗ v``, ``w = v²``.

    η comes from a backtracking (Armijo) line search started at the Barzilai–Borwein step.
    v starts at ``sqrt(w0)``; entries that are 0 start at ``v_floor`` since v_j = 0 is a
    fixed point of (10) (Theorem 1 needs a non-zero start).  The factor 2 of the true
    gradient of (9) is kept here (the paper folds it into η).  Stops when the relative
    decrease of the objective and the KKT residual ``max_j |w_j g_j|`` are below ``tol``.

    Parameters
    ----------
    Z : LinearOperator
        Z̄ (N × J).
    lam : float
        λ of eq. 7.
    w0 : ndarray (J,)
        The start.
    tol, max_iter : float, int
        The stopping tolerance and the cap on gradient steps.
    v_floor : float
        The start of v where w0 is 0.

    Returns
    -------
    (w, objective, nfev) : (ndarray (J,), float, int)
        The minimiser, eq. 7 there, and the number of objective evaluations.
    """
    v = np.sqrt(np.maximum(np.asarray(w0, dtype=np.float64), v_floor**2))
    w = v * v
    m = Z.matvec(w)
    F = objective(m, w, lam)
    nfev = 1
    eta = None
    prev_v = prev_gv = None
    for _ in range(max_iter):
        gw = lam - Z.rmatvec(sigmoid_neg(m))  # ∂(7)/∂w
        gv = 2.0 * gw * v  # ∂(9)/∂v  — the direction of eq. (10)
        if np.max(np.abs(w * gw)) <= tol * max(1.0, abs(F)):
            break
        if prev_v is not None:  # Barzilai–Borwein initial step
            dv, dg = v - prev_v, gv - prev_gv
            denom = float(dv @ dg)
            eta = float(dv @ dv) / denom if denom > 0 else 2.0 * eta
        elif eta is None:
            eta = 1.0 / max(1e-12, float(np.abs(gv).max()))
        gg = float(gv @ gv)
        while True:  # Armijo backtracking line search
            v_new = v - eta * gv
            w_new = v_new * v_new
            m_new = Z.matvec(w_new)
            nfev += 1
            F_new = objective(m_new, w_new, lam)
            if F_new <= F - 1e-4 * eta * gg or eta < 1e-300:
                break
            eta *= 0.5
        prev_v, prev_gv = v, gv
        done = (F - F_new) <= tol * max(1.0, abs(F))
        v, w, m, F = v_new, w_new, m_new, F_new
        if done and np.max(np.abs(w * (lam - Z.rmatvec(sigmoid_neg(m))))) <= 1e-6 * max(
            1.0, abs(F)
        ):
            break
    return w, F, nfev


def solve_logo_m(
    Z, lam: float, w0: np.ndarray, tol: float = 0.01, max_iter: int = 2000, step_tol: float = 0.02
) -> tuple[np.ndarray, float, int]:
    """Eq. 9 as the authors' ``Logo.m`` solves it: few steps, stopped at a 1 % cost change.

    From ``v = sqrt(w0)``, each step goes along ``d = v ⊗ (λ1 − Σ_n σ(−ρ̄_n) z̄_n)`` (update
    (10) with the factor 2 folded into the step) by the step ``α ∈ [0, 1]`` that minimises
    the objective on that segment (bounded Brent search to ``step_tol``, as ``fminbnd`` with
    ``TolX`` 0.02), and stops after the first step whose objective differs from the previous
    step's by at most ``tol`` times itself (so at least two steps).  The minimiser is reached
    only loosely: this is the inner problem as the authors ran it, not eq. 7's optimum.

    Parameters
    ----------
    Z : LinearOperator
        Z̄ (N × J).
    lam : float
        λ of eq. 7.
    w0 : ndarray (J,)
        The start (the previous outer iteration's w).
    tol : float, default 0.01
        The relative change of the objective between two steps that stops the loop.
    max_iter : int
        The cap on steps (``Logo.m`` has none).
    step_tol : float, default 0.02
        The line search's tolerance on α.

    Returns
    -------
    (w, objective, nfev) : (ndarray (J,), float, int)
        ``v²`` after the last step, eq. 7 there, and the number of objective evaluations.
    """
    v = np.sqrt(np.maximum(np.asarray(w0, dtype=np.float64), 0.0))
    m = Z.matvec(v * v)
    F_prev, nfev = np.inf, 1

    def along(d: np.ndarray):
        def f(a: float) -> float:
            nonlocal nfev
            nfev += 1
            u = v - a * d
            with np.errstate(over="ignore", invalid="ignore"):
                F = objective(Z.matvec(u * u), u * u, lam)
            # a step that overflows costs +inf, as in Logo.m's cost (so the search stays short)
            return F if np.isfinite(F) else np.inf

        return f

    for _ in range(max_iter):
        d = v * (lam - Z.rmatvec(sigmoid_neg(m)))  # Logo.m's "descent"
        res = minimize_scalar(
            along(d), bounds=(0.0, 1.0), method="bounded", options={"xatol": step_tol}
        )
        v = np.abs(v - res.x * d)  # the sign of v is immaterial (w = v²)
        w = v * v
        m = Z.matvec(w)
        F = objective(m, w, lam)
        nfev += 1
        done = abs(F - F_prev) <= tol * F  # Logo.m: while CostDiff > 0.01*Cost(j)
        F_prev = F
        if done:
            break
    return v * v, F_prev, nfev


def solve_working_set(
    Z,
    lam: float,
    w0: np.ndarray,
    inner,
    tol: float = 1e-10,
    max_iter: int = 2000,
    kkt_tol: float = 1e-6,
    min_add: int = 256,
    max_rounds: int = 100,
) -> tuple[np.ndarray, float, int]:
    """Eq. 7 for many columns: ``inner`` solves it on a working set W, a sweep certifies it.

    Eq. 7 is convex, so w (zero outside W, optimal on W) is optimal for all columns iff
    every column outside W satisfies ``λ − Σ_n σ(−ρ̄_n) z̄_n(j) ≥ 0``.  Each round:
    ``inner`` solves on W in memory (when W is not empty), one sweep over Z̄ gives that
    gradient, and the most violating columns (at least ``min_add``, at most doubling W)
    join W.  The solution is the
    same as ``inner`` on all columns (up to ``kkt_tol``); the number of sweeps over Z̄
    drops from hundreds to a handful.

    Parameters
    ----------
    Z : LinearOperator
        Z̄ (N × J); its columns W are gathered in memory (``Z.columns``).
    lam : float
        λ of eq. 7.
    w0 : ndarray (J,)
        The start; its non-zeros form the first W when they are at most half the columns.
    inner : callable
        ``inner(Z_W, lam, w0_W, tol=, max_iter=) -> (w_W, f, nfev)``, e.g. :func:`solve_lbfgs`.
    tol, max_iter : float, int
        Passed to ``inner``.
    kkt_tol : float
        A column outside W violates optimality when its gradient is below ``−kkt_tol``.
    min_add, max_rounds : int
        At least this many violators join W per round; at most this many rounds.

    Returns
    -------
    (w, objective, nfev) : (ndarray (J,), float, int)
        The solution (0 outside W), eq. 7 there, and ``inner``'s evaluations.  Memory: Z̄'s
        columns W (N × |W| float64).
    """
    J = Z.shape[1]
    w0 = np.asarray(w0, dtype=np.float64)
    W = np.flatnonzero(w0 > 0) if np.count_nonzero(w0) <= J // 2 else np.zeros(0, dtype=np.int64)
    w = np.zeros(J)
    w[W] = w0[W]
    ZW = Z.columns(W)
    m = ZW @ w[W]
    f = objective(m, w, lam)
    nfev = 0
    for _ in range(max_rounds):
        if W.size:  # solve on W first: the start is not W's optimum
            wW, f, n = inner(InMemoryOperator(ZW), lam, w[W], tol=tol, max_iter=max_iter)
            nfev += n
            w[:] = 0.0
            w[W] = wW
            m = ZW @ wW
        g = lam - Z.rmatvec(sigmoid_neg(m))  # one sweep: gradient of eq. 7
        outside = np.ones(J, bool)
        outside[W] = False
        viol = np.flatnonzero(outside & (g < -kkt_tol))
        if viol.size == 0:
            break
        k = max(min_add, W.size)
        add = viol[np.argsort(g[viol], kind="stable")[:k]]
        W = np.union1d(W, add)
        ZW = Z.columns(W)
    return w, f, nfev
