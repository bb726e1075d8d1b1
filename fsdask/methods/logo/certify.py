"""The certificate of elimination (§3.2, §4.2): is weight 0 optimal for every dropped feature?

A feature whose weight falls below ``elim_tol`` (the paper: 1e-8) leaves the active set, so
later iterations touch only the survivors.  The paper's rule alone is not safe — a relevant
feature can be dropped after the first iteration and never return — so when the outer loop
has converged the answer is certified: one pass over every eliminated feature evaluates the
optimality condition of eq. 7 at the final w, ``∂/∂w_j = λ − Σ_n σ(−ρ̄_n) z̄_n(j) ≥ 0``;
features that violate it rejoin the active set and the iteration continues
(:func:`violators`).  That sum is O(N²) per feature; a certification after another first
bounds its change in O(N) (:class:`KKTBounds`) and sums exactly only the features the bound
does not clear (:func:`kkt_block`).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from fsdask.linalg.absdiff import (
    abs_deviation_dot,
    weighted_absdiff_sum,
    weighted_absdiff_sum_bounded,
)
from fsdask.linalg.execution import Execution, LinearOperator
from fsdask.methods.logo.inner import sigmoid_neg

__all__ = ["KKTBounds", "kkt_block", "violators"]

log = logging.getLogger("fsdask")


def violators(
    ex: Execution,
    source: Any,
    Z: LinearOperator,
    w: np.ndarray,
    active: np.ndarray,
    Pi: np.ndarray,
    lam: float,
    kkt: KKTBounds,
    kkt_tol: float,
) -> np.ndarray:
    """Eliminated features whose weight 0 is not optimal for eq. 7 at w (one pass over them).

    KKT of eq. 7 at w_j = 0: ``g_j = λ − Σ_n σ(−ρ̄_n) z̄_n(j) ≥ 0``, with the margins and
    Π of the current w; ``g_j`` is summed where the bound carried in ``kkt`` from the
    previous certification does not already show it, and its sign decided with a
    rounding bound (:func:`kkt_block`).

    Parameters
    ----------
    ex : Execution
    source : Source
        X as the fit sweeps it (:class:`~fsdask.methods.logo.margins.Source`).
    Z : LinearOperator
        Z̄ over the active columns.
    w : ndarray (J,)
        The weights (0 outside ``active``).
    active : ndarray of int
        The active set.
    Pi : ndarray (N, N)
        Π at w.
    lam : float
        λ of eq. 7.
    kkt : KKTBounds
        The bounds carried from the previous certification; updated.
    kkt_tol : float
        A feature violates optimality when ``g_j < −kkt_tol``.

    Returns
    -------
    ndarray of int, sorted
        The violators, the worst first chosen when there are more than
        ``max(64, 2·|active|)``.  Memory: a few N × N arrays.
    """
    s = sigmoid_neg(Z.matvec(w[active]))
    elim = np.setdiff1d(np.arange(w.size), active, assume_unique=True)
    if elim.size == 0:
        return elim
    C = s[:, None] * Pi
    fn = kkt_block(lam, C, kkt.drift(C), kkt_tol)
    # few active columns: sweep all of X (g_j is defined for them too) rather than
    # gather a copy of the eliminated ones
    swept = np.arange(w.size) if 8 * active.size <= w.size else elim
    out = ex.map_columns(fn, source.columns(swept, cache=False), kkt.lower[swept], out_rows=3)
    kkt.update(C, swept, out[0])
    if swept.size > elim.size:
        out = out[:, elim]
    lower, upper, summed = out
    bad = np.flatnonzero(upper < -kkt_tol)
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


class KKTBounds:
    """Lower bounds on the gradient ``g_j`` of eq. 7 for every feature, valid at the Π and s
    of the last certification, so that the next one sweeps exactly only where needed.

    ``g_j(C) = λ − Σ_{n,i} C_ni |x_nj − x_ij|`` with ``C = diag(s) Π`` is linear in C, and
    ``|x_nj − x_ij| ≤ |x_nj − μ_j| + |x_ij − μ_j|`` for any centre μ_j; with ``S = C + Cᵀ``::

        |g_j(C') − g_j(C)| = ½ |Σ_{n,i} (S' − S)_ni |x_nj − x_ij|| ≤ Σ_n R_n |x_nj − μ_j|,
        R_n = Σ_i |S' − S|_ni,

    an O(N) bound per feature against the O(N²) sum.  A feature whose carried bound stays
    ≥ −kkt_tol cannot violate optimality at C'; only the others are summed.
    Features not swept at a certification (active then) have no bound (−∞).

    Parameters
    ----------
    J : int
        The number of features.

    Attributes
    ----------
    S : ndarray (N, N) or None
        ``C + Cᵀ`` at the last certification (None before the first).
    lower : ndarray (J,)
        The lower bounds on ``g_j`` at the last certification.
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
        """Carry ``C`` and the lower bounds of the features ``swept`` to the next certification."""
        self.S = C + C.T
        self.lower[:] = -np.inf
        self.lower[swept] = lower


def kkt_block(lam: float, C: np.ndarray, R: np.ndarray | None, kkt_tol: float):
    """``x_b, ℓ_b ↦ [lower; upper bounds of g over the block; 1 where it was summed]``.

    First the bound carried from the last certification, ``ℓ_j − Σ_n R_n |x_nj − μ_j|``
    (μ_j the column mean), widened by 1e-9 of itself for its rounding.  Columns it leaves
    below −kkt_tol get ``λ − Σ_{n,i} C_ni |x_nj − x_ij|`` (fused, without forming z̄) with
    its rounding bound (float32 arithmetic for float32 X); columns whose interval still
    straddles −kkt_tol are summed again in float64.  A feature violates optimality iff its
    upper bound is below −kkt_tol; a cleared one has no upper bound (+∞).

    Parameters
    ----------
    lam : float
        λ of eq. 7.
    C : ndarray (N, N)
        ``diag(s) Π``.
    R : ndarray (N,) or None
        :meth:`KKTBounds.drift` (None: no carried bound).
    kkt_tol : float

    Returns
    -------
    callable
        ``block(x_b, ℓ_b) -> ndarray (3, J_b)`` for :meth:`Execution.map_columns`.
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
