"""Logo: local-learning feature weighting (Sun, Todorovic & Goodison, TPAMI 2010).

The paper's Algorithm 1, with its symbols:

* margins (eq. 2–3): ``ρ̄_n(w) = wᵀ z̄_n``, ``z̄_n = Σ_{i∈M_n} P(x_i=NM(x_n)|w) |x_n − x_i|
  − Σ_{i∈H_n} P(x_i=NH(x_n)|w) |x_n − x_i|`` = ``Σ_i Π_ni |x_n − x_i|`` with
  ``Π = P_M − P_H``;
* probabilities (eqs. 4–5) from the kernel ``k(d) = exp(−d/σ)`` of the weighted Manhattan
  distances ``d(x_n, x_i|w) = Σ_j w_j |x_nj − x_ij|``; for more than two classes the
  misses are all samples of the other classes (eq. 20, made probabilistic as eqs. 3–5);
* the inner problem (eq. 7) ``min_{w≥0} Σ_n log(1 + exp(−wᵀ z̄_n)) + λ‖w‖₁``, solved either
  by the paper's gradient descent on ``w = v²`` with a line search (eqs. 9–10,
  ``solver="gd"``) or by L-BFGS-B on ``w ≥ 0`` (``solver="lbfgs"``, the default: same
  optimum, far fewer passes);
* the fixed-point outer loop until ``‖w(t) − w(t−1)‖ < θ`` (Algorithm 1, line 8).

How it is swept (DESIGN.md "Logo"): the N × N distances are a tree-sum over feature blocks,
Z̄ (N × J) is computed block by block with the fused kernel of
:mod:`fsdask.linalg.absdiff`; :mod:`fsdask.linalg.execution` keeps it chunked like X
(persisted) while it is big, or holds it in memory when the active part fits the memory
budget (``fsdask.memory-budget``); when all of X fits, the algorithm reads X once.  Every
objective/gradient of the inner problem is one sweep over Z̄ for the margins Z̄w plus one
for the gradient Z̄ᵀs.

Elimination (§3.2, §4.2): a feature whose weight falls below ``elim_tol`` (the paper:
1e-8) leaves the active set, so later iterations touch only the survivors.  The paper's
rule alone is not safe — a relevant feature can be dropped after the first iteration and
never return — so when the outer loop has converged we certify the answer: one pass over
every eliminated feature evaluates the optimality condition of eq. 7 at the final w,
``∂/∂w_j = λ − Σ_n σ(−ρ̄_n) z̄_n(j) ≥ 0``; features that violate it rejoin the active set
and the iteration continues.  That sum is O(N²) per feature; a certification after another
first bounds its change in O(N) (:class:`_KKTBounds`) and sums exactly only the features the
bound does not clear.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import warnings
from typing import Any

import dask.array as da
import numpy as np
from scipy.optimize import minimize
from sklearn.utils._param_validation import StrOptions

from fsdask import checkpoint
from fsdask._validation import Int, Real
from fsdask.base import FitOutput, Selector
from fsdask.errors import ConvergenceWarning, InputError
from fsdask.fitting import FitContext
from fsdask.linalg.absdiff import (
    _SPARSE_DENSITY,
    DROP_BELOW,
    abs_deviation_dot,
    pi_weighted_absdiff,
    weighted_absdiff_sum,
    weighted_absdiff_sum_bounded,
    weighted_manhattan,
)
from fsdask.linalg.execution import (
    Execution,
    InMemoryOperator,
    LinearOperator,
    backend_of,
)
from fsdask.linalg.reductions import compute_blocks

log = logging.getLogger("fsdask")

SOLVERS = ("lbfgs", "gd")


# --------------------------------------------------------------------------- eqs. 4–5, 20
def miss_hit_probabilities(D: np.ndarray, y: np.ndarray, sigma: float) -> np.ndarray:
    """``Π = P_M − P_H`` (N × N) from the distances D (eqs. 4–5; misses per eq. 20).

    Row n: ``P(x_i = NM(x_n)|w) = k(D_ni) / Σ_{j∈M_n} k(D_nj)`` over the misses
    ``M_n = {i: y_i ≠ y_n}`` (all other classes) and likewise over the hits
    ``H_n = {i: y_i = y_n, i ≠ n}``, with ``k(d) = exp(−d/σ)``.  The kernel is evaluated as
    ``exp(−(d − min_{M_n} d)/σ)``: the shift cancels in the ratio and keeps the values
    finite when d/σ is in the thousands (all features weighted 1 at the start).
    """
    N = D.shape[0]
    same = y[:, None] == y[None, :]
    Pi = np.zeros((N, N))
    for mask, sign in ((~same, 1.0), (same & ~np.eye(N, dtype=bool), -1.0)):
        Dm = np.where(mask, D, np.inf)
        k = np.exp(-(Dm - Dm.min(axis=1, keepdims=True)) / sigma)
        Pi += sign * (k / k.sum(axis=1, keepdims=True))
    return Pi


def _norm(d: np.ndarray) -> float:
    """‖d‖₂ without BLAS: a threaded BLAS dot of a p-vector waits for a busy core."""
    return float(np.sqrt(np.sum(d * d)))


def _sigmoid_neg(m: np.ndarray) -> np.ndarray:
    """σ(−m) = exp(−m)/(1 + exp(−m)), stable for any m."""
    return 0.5 * (1.0 - np.tanh(0.5 * m))


# --------------------------------------------------------------------------- eq. 7 / 9–10
def _objective(m: np.ndarray, w: np.ndarray, lam: float) -> float:
    """Σ_n log(1 + exp(−ρ̄_n)) + λ Σ_j w_j (eq. 7; w ≥ 0 so ‖w‖₁ = Σ w)."""
    return float(np.logaddexp(0.0, -m).sum() + lam * w.sum())


@functools.cache
def _threadpools():
    """threadpoolctl's view of the loaded libraries, found once (a search takes milliseconds)."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return None
    return ThreadpoolController()


def _single_threaded_blas():
    """L-BFGS-B makes many tiny BLAS calls: threaded BLAS makes them ~50× slower on a busy machine."""
    ctl = _threadpools()
    if ctl is None:  # pragma: no cover
        return contextlib.nullcontext()
    return ctl.limit(limits=1, user_api="blas")


def solve_lbfgs(
    Z, lam: float, w0: np.ndarray, tol: float = 1e-10, max_iter: int = 2000
) -> tuple[np.ndarray, float, int]:
    """Eq. 7 by L-BFGS-B on w ≥ 0; returns (w, objective, number of f/g evaluations)."""
    nfev = 0

    def fg(w):
        nonlocal nfev
        nfev += 1
        m = Z.matvec(w)
        return _objective(m, w, lam), lam - Z.rmatvec(_sigmoid_neg(m))

    with _single_threaded_blas():
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
    """
    v = np.sqrt(np.maximum(np.asarray(w0, dtype=np.float64), v_floor**2))
    w = v * v
    m = Z.matvec(w)
    F = _objective(m, w, lam)
    nfev = 1
    eta = None
    prev_v = prev_gv = None
    for _ in range(max_iter):
        gw = lam - Z.rmatvec(_sigmoid_neg(m))  # ∂(7)/∂w
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
            F_new = _objective(m_new, w_new, lam)
            if F_new <= F - 1e-4 * eta * gg or eta < 1e-300:
                break
            eta *= 0.5
        prev_v, prev_gv = v, gv
        done = (F - F_new) <= tol * max(1.0, abs(F))
        v, w, m, F = v_new, w_new, m_new, F_new
        if done and np.max(np.abs(w * (lam - Z.rmatvec(_sigmoid_neg(m))))) <= 1e-6 * max(
            1.0, abs(F)
        ):
            break
    return w, F, nfev


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
    every column outside W satisfies ``λ − Σ_n σ(−ρ̄_n) z̄_n(j) ≥ 0``.  Each round: one
    sweep over Z̄ for that gradient, the most violating columns (at least ``min_add``, at
    most doubling W) join W, and ``inner`` re-solves on W in memory.  The solution is the
    same as ``inner`` on all columns (up to ``kkt_tol``); the number of sweeps over Z̄
    drops from hundreds to a handful.
    """
    J = Z.shape[1]
    w0 = np.asarray(w0, dtype=np.float64)
    W = np.flatnonzero(w0 > 0) if np.count_nonzero(w0) <= J // 2 else np.zeros(0, dtype=np.int64)
    w = np.zeros(J)
    w[W] = w0[W]
    ZW = Z.columns(W)
    m = ZW @ w[W]
    f = _objective(m, w, lam)
    nfev = 0
    for _ in range(max_rounds):
        g = lam - Z.rmatvec(_sigmoid_neg(m))  # one sweep: gradient of eq. 7
        outside = np.ones(J, bool)
        outside[W] = False
        viol = np.flatnonzero(outside & (g < -kkt_tol))
        if viol.size == 0:
            break
        k = max(min_add, W.size)
        add = viol[np.argsort(g[viol], kind="stable")[:k]]
        W = np.union1d(W, add)
        ZW = Z.columns(W)
        wW, f, n = inner(InMemoryOperator(ZW), lam, w[W], tol=tol, max_iter=max_iter)
        nfev += n
        w[:] = 0.0
        w[W] = wW
        m = ZW @ wW
    return w, f, nfev


def _unit_scale(X, ex: Execution):
    """X with every feature divided by its standard deviation (constant features, which
    get weight 0 anyway, are left as they are): in memory when X is, else one pass."""
    if isinstance(X, da.Array):
        # p values joined on the client; a preprocessing pass, not one of the fit's passes_over_X
        (sd,) = compute_blocks(X.std(axis=0, dtype=np.float64))
    else:  # held in memory: column slices in the client's threads (each column's sd alone)
        sd = ex.map_columns(lambda xb: xb.std(axis=0, dtype=np.float64), X)
    return X / np.where(sd > 0, sd, 1.0).astype(X.dtype)


#: above this many active columns the inner problem is solved on a working set
_WS_MIN = 2048


# --------------------------------------------------------------------------- the estimator
class Logo(Selector):
    """Local-learning feature weighting for high-dimensional data (Sun et al., TPAMI 2010).

    Parameters
    ----------
    sigma : kernel width σ of ``k(d) = exp(−d/σ)`` (> 0).  The paper: 2 (spiral), 5
        (microarrays); a larger σ converges faster (Fig. 5b).
    lam : ℓ1 regularisation λ ≥ 0 of eq. 7 (the paper: 1).
    theta : stop when ``‖w(t) − w(t−1)‖₂ < θ`` (the paper: 0.01).
    max_iter : maximum number of outer (fixed-point) iterations.
    solver : ``"lbfgs"`` (L-BFGS-B on w ≥ 0, default, fewest passes over Z̄) or ``"gd"``
        (the paper's v² gradient descent with line search, eq. 10).
    n_features_to_select : top-k selection; ``None`` selects weights > ``support_threshold``
        × max weight (the paper: 0.01, §4.2).
    elim_tol : weights ≤ this leave the active set (the paper: 1e-8).
    eliminate : ``False`` keeps every feature in every iteration (plain Algorithm 1).
    certify : check the optimality of every eliminated feature at the end (one pass) and
        let violators rejoin; ``False`` gives the paper's plain elimination.
    kkt_tol : a feature violates optimality when ``∂/∂w_j < −kkt_tol``.
    inner_tol, inner_max_iter : tolerance / iteration cap of the inner solver.
    memory_budget : bytes (or "1GiB"); None reads dask config ``fsdask.memory-budget``.  X's
        active columns and Z̄ are held in memory once N·J_active·8 bytes fit; above it they
        stay chunked (dask) and every product is a sweep.
    on_constant : ``"drop"`` (constant features get weight 0) or ``"error"``.
    standardize : divide every feature by its standard deviation first (default ``True``:
        Manhattan distances weigh features by their scale, so on raw data a high-variance
        noise feature outweighs a relevant one); ``False`` is the paper's exact behaviour
        (its data were standardised beforehand).  Costs one extra pass over X when X does not
        fit the memory budget.
    """

    method_name = "logo"
    requires_y = True
    y_task = "classification"
    min_samples = 3
    _parameter_constraints: dict = {
        "sigma": [Real(0, None, closed="neither")],
        "lam": [Real(0, None)],
        "theta": [Real(0, None, closed="neither")],
        "max_iter": [Int(1)],
        "solver": [StrOptions(set(SOLVERS))],
        "n_features_to_select": [Int(1), Real(0, 1, closed="neither"), None],
        "elim_tol": [Real(0, None)],
        "eliminate": ["boolean"],
        "certify": ["boolean"],
        "standardize": ["boolean"],
        "kkt_tol": [Real(0, None)],
        "inner_tol": [Real(0, None, closed="neither")],
        "inner_max_iter": [Int(1)],
        "support_threshold": [Real(0, 1)],
        "memory_budget": [Real(0, None), str, None],
        "on_constant": [StrOptions({"drop", "error"})],
    }

    def __init__(
        self,
        sigma: float = 2.0,
        lam: float = 1.0,
        theta: float = 0.01,
        max_iter: int = 30,
        solver: str = "lbfgs",
        n_features_to_select: Any = None,
        elim_tol: float = 1e-8,
        eliminate: bool = True,
        certify: bool = True,
        kkt_tol: float = 1e-6,
        inner_tol: float = 1e-10,
        inner_max_iter: int = 2000,
        support_threshold: float = 0.01,
        memory_budget: Any = None,
        on_constant: str = "drop",
        standardize: bool = True,
    ):
        self.sigma = sigma
        self.lam = lam
        self.theta = theta
        self.max_iter = max_iter
        self.solver = solver
        self.n_features_to_select = n_features_to_select
        self.elim_tol = elim_tol
        self.eliminate = eliminate
        self.certify = certify
        self.kkt_tol = kkt_tol
        self.inner_tol = inner_tol
        self.inner_max_iter = inner_max_iter
        self.support_threshold = support_threshold
        self.memory_budget = memory_budget
        self.on_constant = on_constant
        self.standardize = standardize

    def _default_support(self, scores: np.ndarray) -> np.ndarray:
        """The paper's rule (§4.2): weights normalised to max 1, keep those > 0.01."""
        top = scores.max()
        if top <= 0:
            return np.zeros(scores.size, bool)
        return scores > self.support_threshold * top

    # ---- the algorithm
    def _fit(self, X: da.Array, y: np.ndarray, ctx: FitContext) -> FitOutput:
        _check_classes(y)
        N, J = X.shape
        lam, sigma = float(self.lam), float(self.sigma)
        ex = Execution(self.memory_budget)
        X_full = _Source(ex, X, self.standardize)
        solve = solve_lbfgs if self.solver == "lbfgs" else solve_v2_gradient

        w = np.ones(J)  # Algorithm 1, line 1
        active = np.arange(J)  # the active set
        eliminated_any = False
        delta_trace: list[float] = []
        objective: list[float] = []
        active_sizes: list[int] = []
        inner_passes: list[int] = []
        rejoined: list[int] = []
        converged = False
        check = None  # certification due at the next Π: "final" or "early"
        certified_active = None  # the active set at the last certification
        n_certifications = 0
        early_checks = True
        final_violators = np.zeros(0, dtype=np.int64)
        kkt = _KKTBounds(J)  # carried from one certification to the next
        n_iter = 0
        slot = checkpoint.for_fit(self, X, y).slot("logo")
        saved = slot.restore()  # a killed fit continues after its last saved iteration
        if saved is not None:
            w, active, n_iter = saved["w"], saved["active"], saved["iteration"]
            eliminated_any, check, early_checks = (
                saved["eliminated_any"],
                saved["check"],
                saved["early_checks"],
            )
            certified_active, n_certifications = (
                saved.get("certified_active"),
                saved["n_certifications"],
            )
            delta_trace, objective = saved["delta_trace"].tolist(), saved["objective"].tolist()
            active_sizes, inner_passes = (
                saved["active_sizes"].tolist(),
                saved["inner_passes"].tolist(),
            )
            rejoined, ex.passes = list(saved["rejoined"]), saved["passes"]
        y = _check_classes(y)
        while True:
            XA = X_full.columns(active)
            D = _distances(ex, XA, w[active])  # line 3 (w_j = 0 adds nothing)
            Pi = miss_hit_probabilities(D, y, sigma)  # line 4 (eqs. 4–5, 20)
            Z = _zbar(ex, XA, Pi)  # eq. 3, one fused pass
            viol = None
            if check:
                viol = self._violators(ex, X_full, Z, w, active, Pi, lam, kkt)
                n_certifications += 1
                if viol.size == 0 and check == "final":
                    converged = True
                    break
                if viol.size == 0:
                    early_checks = False  # elimination was right: check at the end only
                if viol.size:
                    rejoined.extend(int(j) for j in viol)
                    active = np.union1d(active, viol)
                    XA = X_full.columns(active)
                    Z = _zbar(ex, XA, Pi)  # w_viol = 0: D and Π unchanged
                certified_active = active.copy()
            if n_iter >= self.max_iter:
                if viol is not None:
                    final_violators = viol
                elif self.certify and eliminated_any:
                    final_violators = self._violators(ex, X_full, Z, w, active, Pi, lam, kkt)
                break
            w_new = np.zeros(J)
            if Z.shape[1] > _WS_MIN:  # lines 5–6
                w_new[active], f, _ = solve_working_set(
                    Z,
                    lam,
                    w[active],
                    solve,
                    tol=self.inner_tol,
                    max_iter=self.inner_max_iter,
                    kkt_tol=self.kkt_tol,
                )
            else:
                w_new[active], f, _ = solve(
                    Z, lam, w[active], tol=self.inner_tol, max_iter=self.inner_max_iter
                )
            n_iter += 1
            inner_passes.append(Z.passes)
            delta = _norm(w_new - w)  # line 8
            delta_trace.append(delta)
            objective.append(f)
            w = w_new
            keep = w[active] > self.elim_tol  # §3.2: drop ~0 weights
            if not self.eliminate:
                keep[:] = True
            w[active[~keep]] = 0.0
            eliminated_any |= not keep.all()
            active = active[keep]
            active_sizes.append(int(active.size))
            log.info(
                "logo: iteration %d  ‖Δw‖=%.4g  objective=%.6g  active=%d",
                n_iter,
                delta,
                f,
                active.size,
            )
            del Z, XA
            if active.size == 0:
                warnings.warn(
                    "logo: every weight fell to 0 (λ too large for this data?); try a smaller lam",
                    ConvergenceWarning,
                    stacklevel=4,
                )
                converged = delta < self.theta
                break
            check = None
            if delta < self.theta:
                if not (self.certify and eliminated_any):
                    converged = True
                    break
                check = "final"
            elif (
                self.certify
                and eliminated_any
                and early_checks
                and keep.all()
                and (certified_active is None or not np.array_equal(active, certified_active))
            ):
                # elimination has settled: certify now rather than converge to a fixed point
                # that lacks a wrongly eliminated feature (the final check stays mandatory)
                check = "early"
            slot.reached(
                n_iter,
                lambda: {
                    "w": w,
                    "active": active,
                    "eliminated_any": eliminated_any,
                    "check": check,
                    "early_checks": early_checks,
                    "certified_active": certified_active,
                    "n_certifications": n_certifications,
                    "delta_trace": np.asarray(delta_trace),
                    "objective": np.asarray(objective),
                    "active_sizes": np.asarray(active_sizes, dtype=np.int64),
                    "inner_passes": np.asarray(inner_passes, dtype=np.int64),
                    "rejoined": rejoined,
                    "passes": ex.passes,
                },
            )
        if final_violators.size:
            warnings.warn(
                f"logo: not converged, and {final_violators.size} eliminated feature(s) violate the "
                "optimality condition at the last w (first: "
                f"{', '.join(map(str, final_violators[:5]))}); their weight 0 is not certified — "
                "raise max_iter or sigma",
                ConvergenceWarning,
                stacklevel=4,
            )
        elif not converged and active.size:
            warnings.warn(
                f"logo: stopped after max_iter={self.max_iter} outer iterations with "
                f"‖Δw‖={delta_trace[-1]:.3g} ≥ θ={self.theta}; raise max_iter or sigma (a larger "
                "kernel width converges faster, paper §3.1)",
                ConvergenceWarning,
                stacklevel=4,
            )
        return FitOutput(
            scores=w,
            n_iter=n_iter,
            converged=converged,
            objective=objective,
            extras={
                "delta": np.asarray(delta_trace),
                "active_size": np.asarray(active_sizes, dtype=np.int64),
                "inner_passes": np.asarray(inner_passes, dtype=np.int64),
            },
            extra_dims={
                "delta": ("iteration",),
                "active_size": ("iteration",),
                "inner_passes": ("iteration",),
            },
            attrs={
                "delta_trace": [float(d) for d in delta_trace],
                "n_rejoined": len(rejoined),
                "rejoined_features": rejoined[:1000],
                "solver": self.solver,
                "certified": bool(self.certify and converged),
                "n_certifications": n_certifications,
                "uncertified_features": [int(j) for j in final_violators[:1000]],
                "passes_over_X": ex.passes,
            },
        )

    def _violators(self, ex, X_full, Z, w, active, Pi, lam, kkt: _KKTBounds) -> np.ndarray:
        """Eliminated features whose weight 0 is not optimal for eq. 7 at w (one pass over them).

        KKT of eq. 7 at w_j = 0: ``g_j = λ − Σ_n σ(−ρ̄_n) z̄_n(j) ≥ 0``, with the margins and
        Π of the current w; ``g_j`` is summed where the bound carried in ``kkt`` from the
        previous certification does not already show it, and its sign decided with a
        rounding bound (:func:`_kkt_block`).
        """
        s = _sigmoid_neg(Z.matvec(w[active]))
        elim = np.setdiff1d(np.arange(w.size), active, assume_unique=True)
        if elim.size == 0:
            return elim
        C = s[:, None] * Pi
        fn = _kkt_block(lam, C, kkt.drift(C), self.kkt_tol)
        # few active columns: sweep all of X (g_j is defined for them too) rather than
        # gather a copy of the eliminated ones
        swept = np.arange(w.size) if 8 * active.size <= w.size else elim
        out = ex.map_columns(fn, X_full.columns(swept, cache=False), kkt.lower[swept], out_rows=3)
        kkt.update(C, swept, out[0])
        if swept.size > elim.size:
            out = out[:, elim]
        lower, upper, summed = out
        bad = np.flatnonzero(upper < -self.kkt_tol)
        log.info(
            "logo: certification of %d eliminated features (%d summed): %d violate optimality",
            elim.size,
            int(summed.sum()),
            bad.size,
        )
        # the worst violators rejoin first (at most max(64, 2·|active|) per check); the check
        # is repeated after re-convergence, so none is left out of the final certificate
        cap = max(64, 2 * active.size)
        if bad.size > cap:
            g = 0.5 * (lower[bad] + upper[bad])  # the computed g, within rounding
            bad = bad[np.argsort(g, kind="stable")[:cap]]
        return np.sort(elim[bad])


class _KKTBounds:
    """Lower bounds on the gradient ``g_j`` of eq. 7 for every feature, valid at the Π and s
    of the last certification, so that the next one sweeps exactly only where needed.

    ``g_j(C) = λ − Σ_{n,i} C_ni |x_nj − x_ij|`` with ``C = diag(s) Π`` is linear in C, and
    ``|x_nj − x_ij| ≤ |x_nj − μ_j| + |x_ij − μ_j|`` for any centre μ_j; with ``S = C + Cᵀ``::

        |g_j(C') − g_j(C)| = ½ |Σ_{n,i} (S' − S)_ni |x_nj − x_ij|| ≤ Σ_n R_n |x_nj − μ_j|,
        R_n = Σ_i |S' − S|_ni,

    an O(N) bound per feature against the O(N²) sum.  A feature whose carried bound stays
    ≥ −kkt_tol cannot violate optimality at C'; only the others are summed.
    Features not swept at a certification (active then) have no bound (−∞).
    """

    def __init__(self, J: int):
        self.S: np.ndarray | None = None
        self.lower = np.full(J, -np.inf)

    def drift(self, C: np.ndarray) -> np.ndarray | None:
        """``R`` for the move from the last certification's C to this one (None: none yet)."""
        if self.S is None:
            return None
        return np.abs((C + C.T) - self.S).sum(axis=1)

    def update(self, C: np.ndarray, swept: np.ndarray, lower: np.ndarray) -> None:
        self.S = C + C.T
        self.lower[:] = -np.inf
        self.lower[swept] = lower


def _kkt_block(lam: float, C: np.ndarray, R: np.ndarray | None, kkt_tol: float):
    """``x_b, ℓ_b ↦ [lower; upper bounds of g over the block; 1 where it was summed]``.

    First the bound carried from the last certification, ``ℓ_j − Σ_n R_n |x_nj − μ_j|``
    (μ_j the column mean), widened by 1e-9 of itself for its rounding.  Columns it leaves
    below −kkt_tol get ``λ − Σ_{n,i} C_ni |x_nj − x_ij|`` (fused, without forming z̄) with
    its rounding bound (float32 arithmetic for float32 X); columns whose interval still
    straddles −kkt_tol are summed again in float64.  A feature violates optimality iff its
    upper bound is below −kkt_tol; a cleared one has no upper bound (+∞).
    """

    def block(xb, lb):
        J_b = xb.shape[1]
        lower, upper = np.full(J_b, -np.inf), np.full(J_b, np.inf)
        if R is not None:
            lower = lb - (1.0 + 1e-9) * abs_deviation_dot(xb, R)
        unsure = np.flatnonzero(~(lower >= -kkt_tol))
        if unsure.size:
            xu = xb if unsure.size == J_b else xb[:, unsure]
            g, err = weighted_absdiff_sum_bounded(xu, C)
            lower[unsure], upper[unsure] = lam - g - err, lam - g + err
        straddle = unsure[(lower[unsure] < -kkt_tol) & (upper[unsure] >= -kkt_tol)]
        if straddle.size:
            lower[straddle] = upper[straddle] = lam - weighted_absdiff_sum(xb[:, straddle], C)
        summed = np.zeros(J_b)
        summed[unsure] = 1.0
        return np.vstack([lower, upper, summed])

    return block


def _check_classes(y: np.ndarray) -> np.ndarray:
    """Integer class codes; every class needs a hit (two samples) for eq. 5."""
    classes, codes, counts = np.unique(y, return_inverse=True, return_counts=True)
    if classes.size < 2:
        raise InputError(f"y has a single class ({classes[0]!r}); Logo needs at least two classes")
    if counts.min() < 2:
        lone = classes[counts < 2]
        raise InputError(
            f"class(es) {', '.join(repr(c) for c in lone[:5])} of y have a single sample: Logo needs "
            "a nearest hit (another sample of the same class, eq. 5) for every sample; "
            "drop or merge those classes (or is y a continuous response?)"
        )
    return codes.ravel()


class _Source:
    """X, standardised or not; held in memory when it fits the budget (then the whole fit,
    standardisation included, reads it once)."""

    def __init__(self, ex: Execution, X: da.Array, standardize: bool):
        self.ex = ex
        self.X = ex.hold(X)
        if standardize:
            self.X = _unit_scale(self.X, ex)
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
def _distances(ex: Execution, x, w: np.ndarray) -> np.ndarray:
    """N × N weighted Manhattan distances (Algorithm 1, line 3); columns with w_j = 0 add nothing."""
    nz = np.flatnonzero(w > 0)
    if nz.size < w.size:  # rejoined features: w_j = 0
        x, w = backend_of(x).take_columns(x, nz), w[nz]
    return ex.sum_columns(weighted_manhattan, x, w, shape=(x.shape[0],) * 2)


def _gradient_block(s: np.ndarray, Pi: np.ndarray):
    """``x_b ↦ Σ_n s_n z̄_n(j)`` over a block, without forming z̄: ``Σ_n s_n Σ_i Π_ni |x_nj − x_ij|``."""
    C = s[:, None] * Pi
    return lambda xb: weighted_absdiff_sum(xb, C)


def _zbar(ex: Execution, x, Pi: np.ndarray) -> LinearOperator:
    """Z̄ (eq. 3) as an operator: in memory, persisted chunked like X, or — when Π is narrow
    (few non-zeros per row, e.g. the first iteration at 10⁶ features, where the nearest
    miss/hit dominates) — recomputed from X at every product, a cheap sparse sweep."""
    narrow = np.count_nonzero(np.abs(Pi) > DROP_BELOW) < _SPARSE_DENSITY * Pi.size
    return ex.operator(
        lambda xb: pi_weighted_absdiff(xb, Pi),
        x,
        dtype=np.result_type(x.dtype, np.float32),
        rblock=lambda s: _gradient_block(s, Pi),
        recompute=narrow,
    )
