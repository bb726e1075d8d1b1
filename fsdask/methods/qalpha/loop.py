"""What every Q-α loop shares: its state's common fields, the convergence test on α, the
result of one run, and the small linear algebra of the Q-updates."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from fsdask.fitting import FitContext, Loop


@dataclasses.dataclass(kw_only=True)
class Iterate:
    """The fields every Q-α loop's state carries (a loop's state dataclass derives from it).

    Attributes
    ----------
    r : int
        Iterations done (the paper's r of α⁽ʳ⁾).
    alpha : ndarray (n,) or None
        α⁽ʳ⁾, None before the first iteration.
    change : float
        ‖α⁽ʳ⁾ − α⁽ʳ⁻¹⁾‖ (∞ after the first iteration).
    converged : bool
        ``change < tol``.
    objective : list of float
        The criterion after each iteration.
    """

    r: int = 0
    alpha: np.ndarray | None = None
    change: float = np.inf
    converged: bool = False
    objective: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class QAlphaRun:
    """One run of a Q-α loop (one start of ``n_init``).

    Attributes
    ----------
    alpha : ndarray (n,), the feature weights (‖α‖ = 1, Σα ≥ 0)
    objective : list of float, the criterion per iteration
    n_iter : int, iterations (restored ones included)
    converged : bool, whether ‖Δα‖ < tol was reached
    change : float, the last ‖Δα‖
    Q : ndarray (q × k); supervised: dict {(class g, class h): Q^{gh}}; kernel: None
    E : ndarray (n × k) for the kernel form (Q = Mᵀ E), else None
    attrs : dict, what the run reports in ``result_`` (variant, gram dtype, …)
    """

    alpha: np.ndarray
    objective: list
    n_iter: int
    converged: bool
    change: float
    Q: Any = None
    E: np.ndarray | None = None
    attrs: dict = dataclasses.field(default_factory=dict)


def iterate_alpha(
    ctx: FitContext,
    name: str,
    state: Iterate,
    update: Callable[[Any], np.ndarray],
    *,
    max_iter: int,
    tol: float,
) -> Loop:
    """Run ``α = update(state)`` until ‖α⁽ʳ⁾ − α⁽ʳ⁻¹⁾‖ < tol or ``max_iter`` iterations.

    ``update`` does one iteration of the paper's algorithm on ``state`` (its Q, warm starts,
    …; ``state.r`` is the iteration being done) and appends the criterion to
    ``state.objective``.  The loop is checkpointed under ``name`` (:meth:`FitContext.iterate`).

    Returns
    -------
    Loop, whose state holds α, the last ‖Δα‖ and the objective.
    """

    def step(s: Iterate) -> Iterate:
        s.r += 1
        alpha = update(s)
        s.change = np.inf if s.alpha is None else float(np.linalg.norm(alpha - s.alpha))
        s.alpha = alpha
        s.converged = s.change < tol
        ctx.log_iteration(s.r, objective=s.objective[-1], change=s.change)
        return s

    return ctx.iterate(name, state, step, max_iter=max_iter, done=_converged)


def _converged(s: Iterate) -> bool:
    return s.converged


def run_of(loop: Loop, **fields: Any) -> QAlphaRun:
    """The :class:`QAlphaRun` of a finished loop (``fields``: Q, E, attrs)."""
    s = loop.state
    return QAlphaRun(
        alpha=s.alpha,
        objective=list(s.objective),
        n_iter=loop.n_iter,
        converged=s.converged,
        change=s.change,
        **fields,
    )


# --------------------------------------------------------------------------- small helpers
def orth(Z: np.ndarray) -> np.ndarray:
    """Orthonormal basis of the columns of Z (the QR step of the orthogonal iteration)."""
    return np.linalg.qr(Z)[0]


def top_abs_eigvecs(A: np.ndarray, k: int) -> np.ndarray:
    """Eigenvectors of the symmetric A with the k largest |eigenvalues|."""
    w, V = np.linalg.eigh((A + A.T) / 2)
    return V[:, np.argsort(-np.abs(w), kind="stable")[:k]]


def right_singular(A: np.ndarray, k: int) -> np.ndarray:
    """The k leading right singular vectors of A (as columns)."""
    return np.linalg.svd(A)[2][:k].T


def criterion(A: np.ndarray, Q: np.ndarray) -> float:
    """trace(Qᵀ A² Q)."""
    AQ = A @ Q
    return float(np.sum(AQ * AQ))
