"""Algorithm 1 of Sun, Todorovic & Goodison (TPAMI 2010), with its symbols and line numbers.

1. ``w(0) = 1``;
3. the distances ``d(x_n, x_i|w(t−1))`` (:func:`~fsdask.methods.logo.margins.distances`);
4. the probabilities ``P(x_i=NM(x_n)|w)``, ``P(x_i=NH(x_n)|w)`` (eqs. 4–5, 20) and from them
   ``z̄_n`` (eq. 3; :mod:`fsdask.methods.logo.margins`);
5–6. ``w(t)`` solving the inner problem (eq. 7) ``min_{w≥0} Σ_n log(1 + exp(−wᵀ z̄_n)) +
   λ‖w‖₁`` (:mod:`fsdask.methods.logo.inner`);
8. until ``‖w(t) − w(t−1)‖ < θ``: a fixed point.

``conventions="authors"`` runs it as the authors' MATLAB ``Logo.m`` (2010) does instead of
as the paper's text states it (:data:`AUTHORS`): line 3 divides the first iteration's
distances by √J, lines 5–6 stop at a 1 % change of the objective
(:func:`~fsdask.methods.logo.inner.solve_logo_m`), line 8 compares the max-normalised √w
(:func:`weight_change`), and at most 11 outer iterations are run.

Elimination (§3.2, §4.2): weights at or below ``elim_tol`` leave the active set; the answer
is then certified (:mod:`fsdask.methods.logo.certify`) — an early certification as soon as
elimination settles, a final one when the loop has converged — and violators rejoin.

One outer iteration is one step of :meth:`~fsdask.fitting.FitContext.iterate` over the state
:class:`LogoState` (checkpointed and resumed by the driver); :func:`logo_weights` runs it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from fsdask._validation import class_counts
from fsdask.errors import InputError
from fsdask.fitting import FitContext
from fsdask.methods.logo.certify import KKTBounds, violators
from fsdask.methods.logo.inner import (
    objective,
    solve_lbfgs,
    solve_logo_m,
    solve_v2_gradient,
    solve_working_set,
)
from fsdask.methods.logo.margins import Source, distances, miss_hit_probabilities, zbar

__all__ = [
    "AUTHORS",
    "CONVENTIONS",
    "SOLVERS",
    "LogoState",
    "check_classes",
    "logo_weights",
    "weight_change",
]

SOLVERS = ("lbfgs", "gd")

#: ``"paper"``: Algorithm 1 as the paper's text states it; ``"authors"``: as ``Logo.m`` runs it
CONVENTIONS = ("paper", "authors")

#: ``Logo.m``'s constants: its outer loop ``while Difference > 0.01 & t <= 10`` runs at most
#: 11 iterations; its inner loop stops when the objective changes by at most 1 %
AUTHORS = {"max_outer_iter": 11, "inner_rtol": 0.01}

#: above this many active columns the inner problem is solved on a working set
WS_MIN = 2048


@dataclasses.dataclass
class LogoState:
    """Algorithm 1's state after an outer iteration (what a checkpoint holds).

    Attributes
    ----------
    w : ndarray (J,)
        The weights (line 1: all 1); 0 outside ``active``.
    active : ndarray of int
        The active set (features not eliminated).
    n_iter : int
        Outer iterations done (inner problems solved).
    eliminated_any : bool
        Whether elimination has dropped a feature (then the answer needs a certificate).
    check : str or None
        The certification due at the next Π: ``"final"`` (after convergence), ``"early"``
        (elimination has settled) or None.
    early_checks : bool
        Whether early certifications are still made (not after one found no violator).
    certified_active : ndarray of int or None
        The active set at the last certification.
    n_certifications : int
        Certifications made so far.
    delta_trace, objective : list of float
        The change of line 8 (:func:`weight_change`) and eq. 7 at w(t), per outer iteration.
    active_sizes, inner_passes : list of int
        The active set's size and the sweeps over Z̄ of the inner solve, per outer iteration.
    rejoined : list of int
        Features that a certification brought back, in order.
    final_violators : ndarray of int
        Eliminated features whose weight 0 is not certified when the loop stopped.
    converged : bool
        Line 8 held (and the final certification, when one was due, found no violator).
    stop : bool
        The loop is over: converged and certified, at ``max_iter``, or every weight is 0.
    """

    w: np.ndarray
    active: np.ndarray
    n_iter: int = 0
    eliminated_any: bool = False
    check: str | None = None
    early_checks: bool = True
    certified_active: np.ndarray | None = None
    n_certifications: int = 0
    delta_trace: list[float] = dataclasses.field(default_factory=list)
    objective: list[float] = dataclasses.field(default_factory=list)
    active_sizes: list[int] = dataclasses.field(default_factory=list)
    inner_passes: list[int] = dataclasses.field(default_factory=list)
    rejoined: list[int] = dataclasses.field(default_factory=list)
    final_violators: np.ndarray = dataclasses.field(
        default_factory=lambda: np.zeros(0, dtype=np.int64)
    )
    converged: bool = False
    stop: bool = False


def check_classes(y: np.ndarray) -> np.ndarray:
    """Integer class codes; every class needs a hit (two samples) for eq. 5.

    Parameters
    ----------
    y : ndarray (N,)
        Class labels.

    Returns
    -------
    ndarray (N,) of int
        The class codes.

    Raises
    ------
    InputError
        y has a single class, or a class has a single sample.
    """
    classes, codes, counts = class_counts(np.asarray(y))
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


def _norm(d: np.ndarray) -> float:
    """‖d‖₂ without BLAS: a threaded BLAS dot of a p-vector waits for a busy core."""
    return float(np.sqrt(np.sum(d * d)))


def weight_change(w_new: np.ndarray, w_old: np.ndarray, conventions: str = "paper") -> float:
    """The change that line 8 of Algorithm 1 compares with θ.

    Parameters
    ----------
    w_new, w_old : ndarray (J,)
        w(t) and w(t−1), ≥ 0.
    conventions : {"paper", "authors"}
        ``"paper"``: ``‖w(t) − w(t−1)‖₂``; ``"authors"`` (``Logo.m``): the change of the
        max-normalised square roots, ``‖√w(t)/max √w(t) − √w(t−1)/max √w(t−1)‖₂``, which
        is blind to a common scale of w.

    Returns
    -------
    float
        The change (``inf`` under ``"authors"`` when either w is all 0).
    """
    if conventions == "paper":
        return _norm(w_new - w_old)
    a, b = np.sqrt(w_new), np.sqrt(w_old)
    if a.max(initial=0.0) <= 0 or b.max(initial=0.0) <= 0:
        return float("inf")
    return _norm(a / a.max() - b / b.max())


def _stopped(state: LogoState) -> bool:
    return state.stop


def logo_weights(
    X: Any,
    y: np.ndarray,
    *,
    ctx: FitContext,
    sigma: float = 2.0,
    lam: float = 1.0,
    theta: float = 0.01,
    max_iter: int = 30,
    solver: str = "lbfgs",
    elim_tol: float = 1e-8,
    eliminate: bool = True,
    certify: bool = True,
    kkt_tol: float = 1e-6,
    inner_tol: float = 1e-10,
    inner_max_iter: int = 2000,
    standardize: bool = True,
    conventions: str = "paper",
) -> LogoState:
    """The feature weights of Algorithm 1, with elimination and its certificate.

    Parameters
    ----------
    X : dask array (N, J)
        Samples × features, chunked (all samples, feature block).
    y : ndarray (N,)
        Class labels; every class needs two samples.
    ctx : FitContext
        The fit's context: its execution (budget, passes), the checkpointed loop, warnings.
    sigma, lam, theta, max_iter, solver, elim_tol, eliminate, certify, kkt_tol, inner_tol,
    inner_max_iter, standardize, conventions
        As for :class:`~fsdask.methods.logo.Logo`.

    Returns
    -------
    LogoState
        The final state: ``w``, the traces, the certification's bookkeeping.  Memory: X's
        active columns and Z̄ when they fit the budget, plus a few N × N arrays.
    """
    codes = check_classes(y)
    authors = conventions == "authors"
    if authors:  # Logo.m's outer loop and its inner solver
        max_iter = min(max_iter, AUTHORS["max_outer_iter"])
        solve, inner_tol = solve_logo_m, AUTHORS["inner_rtol"]
    else:
        solve = solve_lbfgs if solver == "lbfgs" else solve_v2_gradient
    alg = _Algorithm1(
        ctx=ctx,
        source=Source(ctx.execution, X, standardize),
        y=codes,
        sigma=float(sigma),
        lam=float(lam),
        theta=theta,
        max_iter=max_iter,
        solve=solve,
        elim_tol=elim_tol,
        eliminate=eliminate,
        certify=certify,
        kkt_tol=kkt_tol,
        inner_tol=inner_tol,
        inner_max_iter=inner_max_iter,
        kkt=KKTBounds(X.shape[1]),  # carried from one certification to the next
        conventions=conventions,
    )
    J = X.shape[1]
    start = LogoState(w=np.ones(J), active=np.arange(J))  # Algorithm 1, line 1
    state = ctx.iterate("logo", start, alg.step, done=_stopped).state
    _warn_unfinished(ctx, state, max_iter, theta, authors)
    return state


def _warn_unfinished(
    ctx: FitContext, s: LogoState, max_iter: int, theta: float, authors: bool
) -> None:
    """Say why the loop stopped when it is not a certified fixed point."""
    if s.active.size == 0:
        ctx.warn("logo: every weight fell to 0 (λ too large for this data?); try a smaller lam")
    elif s.final_violators.size:
        ctx.warn(
            f"logo: not converged, and {s.final_violators.size} eliminated feature(s) violate the "
            "optimality condition at the last w (first: "
            f"{', '.join(map(str, s.final_violators[:5]))}); their weight 0 is not certified — "
            "raise max_iter or sigma"
        )
    elif not s.converged and authors:
        ctx.warn(
            f"logo: stopped after max_iter={max_iter} outer iterations (Logo.m runs at most "
            f"{AUTHORS['max_outer_iter']}) with change={s.delta_trace[-1]:.3g} ≥ θ={theta}; "
            "raise sigma, or use conventions='paper' to iterate further"
        )
    elif not s.converged:
        ctx.warn(
            f"logo: stopped after max_iter={max_iter} outer iterations with "
            f"‖Δw‖={s.delta_trace[-1]:.3g} ≥ θ={theta}; raise max_iter or sigma (a larger "
            "kernel width converges faster, paper §3.1)"
        )


@dataclasses.dataclass
class _Algorithm1:
    """The problem (X, y, the parameters) and one outer iteration of Algorithm 1 on it."""

    ctx: FitContext
    source: Source
    y: np.ndarray
    sigma: float
    lam: float
    theta: float
    max_iter: int
    solve: Callable
    elim_tol: float
    eliminate: bool
    certify: bool
    kkt_tol: float
    inner_tol: float
    inner_max_iter: int
    kkt: KKTBounds
    conventions: str = "paper"

    def step(self, s: LogoState) -> LogoState:
        """One outer iteration: lines 3–4, a due certification, lines 5–6 and 8."""
        ex = self.ctx.execution
        XA = self.source.columns(s.active)
        D = distances(ex, XA, s.w[s.active])  # line 3 (w_j = 0 adds nothing)
        if self.conventions == "authors" and s.n_iter == 0:
            D /= np.sqrt(s.w.size)  # Logo.m: dist = sum(Temp,1)/sqrt(dim) at t == 1
        Pi = miss_hit_probabilities(D, self.y, self.sigma)  # line 4 (eqs. 4–5, 20)
        Z = zbar(ex, XA, Pi)  # eq. 3, one fused pass
        viol = None
        if s.check:
            viol, Z = self._certify(s, Z, Pi)
            if s.stop:
                return s
        if s.n_iter >= self.max_iter:
            if viol is not None:
                s.final_violators = viol
            elif self.certify and s.eliminated_any:
                s.final_violators = self._violators(s, Z, Pi)
            s.stop = True
            return s
        w_new = np.zeros(s.w.size)
        w_new[s.active], f = self._inner(Z, s.w[s.active])  # lines 5–6
        self._advance(s, w_new, f, Z.passes)
        return s

    def _violators(self, s: LogoState, Z, Pi: np.ndarray) -> np.ndarray:
        ex = self.ctx.execution
        return violators(ex, self.source, Z, s.w, s.active, Pi, self.lam, self.kkt, self.kkt_tol)

    def _certify(self, s: LogoState, Z, Pi: np.ndarray):
        """The certification due (``s.check``) at this Π: violators rejoin the active set.

        Returns the violators and Z̄ over the active set after they rejoined; a final
        certification that finds none stops the loop, converged.
        """
        viol = self._violators(s, Z, Pi)
        s.n_certifications += 1
        if viol.size == 0 and s.check == "final":
            s.converged = s.stop = True
            return viol, Z
        if viol.size == 0:
            s.early_checks = False  # elimination was right: check at the end only
        if viol.size:
            s.rejoined.extend(int(j) for j in viol)
            s.active = np.union1d(s.active, viol)
            XA = self.source.columns(s.active)
            Z = zbar(self.ctx.execution, XA, Pi)  # w_viol = 0: D and Π unchanged
        s.certified_active = s.active.copy()
        return viol, Z

    def _inner(self, Z, w0: np.ndarray) -> tuple[np.ndarray, float]:
        """Lines 5–6: eq. 7 over the active columns (on a working set when they are many)."""
        if Z.shape[1] > WS_MIN and self.conventions == "paper":  # Logo.m solves on all columns
            w, f, _ = solve_working_set(
                Z,
                self.lam,
                w0,
                self.solve,
                tol=self.inner_tol,
                max_iter=self.inner_max_iter,
                kkt_tol=self.kkt_tol,
            )
        else:
            w, f, _ = self.solve(Z, self.lam, w0, tol=self.inner_tol, max_iter=self.inner_max_iter)
        if self.conventions == "authors":
            self._check_logo_m(Z, w0, f)
        return w, f

    def _check_logo_m(self, Z, w0: np.ndarray, f: float) -> None:
        """Logo.m's line search (a step in [0, 1] to ±0.02, never below ≈ 0.008) overshoots
        when the descent is large, and its 1 % stop then accepts a rising objective."""
        why = (
            "its step, searched in [0, 1] to ±0.02, is too coarse for this data (features of "
            "large scale, or many); scale the features to [0, 1] as Logo.m's demo does, or use "
            "conventions='paper'"
        )
        if not np.isfinite(f):
            raise InputError(f"logo: Logo.m's inner loop diverged (eq. 7 overflowed): {why}")
        f0 = objective(Z.matvec(w0), w0, self.lam)
        if f > f0:
            self.ctx.warn(f"logo: Logo.m's inner loop raised eq. 7 from {f0:.4g} to {f:.4g}: {why}")

    def _advance(self, s: LogoState, w_new: np.ndarray, f: float, inner_passes: int) -> None:
        """Line 8 and §3.2: record w(t), eliminate ~0 weights, decide whether to stop."""
        s.n_iter += 1  # line 7
        s.inner_passes.append(inner_passes)
        delta = weight_change(w_new, s.w, self.conventions)  # line 8
        s.delta_trace.append(delta)
        s.objective.append(f)
        s.w = w_new
        keep = s.w[s.active] > self.elim_tol  # §3.2: drop ~0 weights
        if not self.eliminate:
            keep[:] = True
        s.w[s.active[~keep]] = 0.0
        s.eliminated_any |= not keep.all()
        s.active = s.active[keep]
        s.active_sizes.append(int(s.active.size))
        self.ctx.log_iteration(s.n_iter, change=delta, objective=f, active=int(s.active.size))
        if s.active.size == 0:  # every weight fell to 0
            s.converged, s.stop = delta < self.theta, True
            return
        s.check = None
        if delta < self.theta:
            if not (self.certify and s.eliminated_any):
                s.converged = s.stop = True
                return
            s.check = "final"
        elif (
            self.certify
            and s.eliminated_any
            and s.early_checks
            and keep.all()
            and (s.certified_active is None or not np.array_equal(s.active, s.certified_active))
        ):
            # elimination has settled: certify now rather than converge to a fixed point
            # that lacks a wrongly eliminated feature (the final check stays mandatory)
            s.check = "early"
