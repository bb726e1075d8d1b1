"""Def. 2–5 of Wolf & Shashua: the unsupervised Q-α on the rows m_i of M (§2.1, §3).

Each variant is one function doing one iteration of the paper's definition on the loop's
:class:`LinearState`: :func:`power_step` (Def. 2), :func:`basic_step` (§3, exact α and Q),
:func:`ritz_step` (Def. 4), :func:`laplacian_step` (Def. 5), :func:`gap_step` (§2.1's gap
criterion).  Where the α-step comes from the Gram of W, :func:`fused_step` does the same
iteration in one pass over X (two for Ritz).  :func:`linear_qalpha` runs one start.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from fsdask.errors import ParameterError
from fsdask.fitting import FitContext
from fsdask.methods.qalpha.alpha import AlphaStep, WarmStart, gram_alpha, uniform_affinity
from fsdask.methods.qalpha.loop import (
    Iterate,
    QAlphaRun,
    criterion,
    iterate_alpha,
    orth,
    run_of,
    top_abs_eigvecs,
)
from fsdask.methods.qalpha.tall import (
    gap_spec,
    laplacian_spec,
    normalize_block,
    standard_spec,
    variant_spec,
)

#: variants whose iteration is one pass over X (Ritz: two, one per α-step of Def. 4)
FUSED_VARIANTS = ("power", "ritz", "laplacian", "gap")


@dataclasses.dataclass(kw_only=True)
class LinearState(Iterate, WarmStart):
    """The state of a Def. 2–5 loop.

    Attributes
    ----------
    Q : ndarray (q × k), Q⁽ʳ⁾
    d : float or None, Def. 5's shift d of the last iteration (None: d_i = max_a m_ia²)
    K, F : ndarrays or None, the Gram WᵀW and functionals Φ W of the tall matrix at Q
        (fused iterations only: summed in the pass of the previous iteration)
    """

    Q: np.ndarray
    d: float | None = None
    K: np.ndarray | None = None
    F: np.ndarray | None = None


def initial_Q(
    init: Any, q: int, k: int, restart: int, random_state: int | None, A0: Callable[[], np.ndarray]
) -> np.ndarray:
    """Q⁽⁰⁾ (q × k), which the paper does not specify.

    ``init="pca"``: the top-k eigenvectors of ``A0()`` (A_α at uniform α, a pass over X,
    called only then); ``"random"``: seeded; an array: orthonormalised.  Restarts after the
    first (``restart > 0``) start from seeded random Q⁽⁰⁾.
    """
    if restart > 0:
        return orth(np.random.default_rng([random_state or 0, restart]).standard_normal((q, k)))
    if isinstance(init, str):
        if init == "pca":
            return top_abs_eigvecs(A0(), k)
        return orth(np.random.default_rng(random_state).standard_normal((q, k)))
    Q0 = np.asarray(init, dtype=np.float64)
    if Q0.shape != (q, k):
        raise ParameterError(f"init has shape {Q0.shape}; expected (n_samples, k) = ({q}, {k})")
    return orth(Q0)


# --------------------------------------------------------------------------- one iteration each
def power_step(solve: AlphaStep, s: LinearState) -> np.ndarray:
    """Def. 2 (standard power-embedded Q-α): α from G at Q, then one power step on A_α."""
    alpha, A, _ = solve(standard_spec(s.Q, solve.dtype), s)  # Def. 2 steps 1–3
    s.Q = orth(A @ s.Q)  # steps 4–5
    s.objective.append(criterion(A, s.Q))
    return alpha


def basic_step(solve: AlphaStep, s: LinearState, k: int) -> np.ndarray:
    """§3 (basic Q-α): α from G at Q, then Q = the k leading eigenvectors of A_α."""
    alpha, A, _ = solve(standard_spec(s.Q, solve.dtype), s)
    s.Q = top_abs_eigvecs(A, k)
    s.objective.append(criterion(A, s.Q))
    return alpha


def ritz_step(solve: AlphaStep, s: LinearState, k: int) -> np.ndarray:
    """Def. 4 (Ritz acceleration): Q̄ = orth(A_α Q), α again at Q̄, Q from the Ritz pairs."""
    _, A, _ = solve(standard_spec(s.Q, solve.dtype), s)
    Qb = orth(A @ s.Q)  # Def. 4 steps 2–3
    alpha, A, _ = solve(standard_spec(Qb, solve.dtype), s)  # steps 4–5 (Def. 2's G at Q̄)
    s.Q = Qb @ top_abs_eigvecs(Qb.T @ A @ Qb, k)  # steps 6–8
    s.objective.append(criterion(A, s.Q))
    return alpha


def laplacian_step(solve: AlphaStep, s: LinearState) -> np.ndarray:
    """Def. 5 (Laplacian spectrum): α from F = Y Yᵀ, then a power step on L = A_α + (Σα) d I."""
    alpha, A, _ = solve(laplacian_spec(s.Q, s.d, solve.dtype), s)  # steps 1–2
    s.d = float(np.max(np.diag(A)) / alpha.sum())  # step 3
    L = A + alpha.sum() * s.d * np.eye(A.shape[0])  # steps 4–5 (D_α = 0)
    s.Q = orth(L @ s.Q)  # steps 6–7
    s.objective.append(criterion(L, s.Q))
    return alpha


def gap_step(solve: AlphaStep, s: LinearState) -> np.ndarray:
    """§2.1's gap criterion Σ_{≤k} λ² − Σ_{>k} λ²: α from G_gap, then a power step on A_α."""
    alpha, A, _ = solve(gap_spec(s.Q, solve.dtype), s)
    s.Q = orth(A @ s.Q)
    s.objective.append(2 * criterion(A, s.Q) - float(np.sum(A * A)))
    return alpha


# --------------------------------------------------------------------------- fused iterations
def fused_step(solve: AlphaStep, s: LinearState, variant: str, k: int, last: bool) -> np.ndarray:
    """One iteration in one pass over X (two for Ritz, whose Def. 4 has two α-steps).

    ``s`` holds Q and (K, F) of the tall matrix W at Q.  α = W u comes from K; every
    Q-update needs only statistics linear in α — ``Wᵀα = K u`` and ``F u`` — so the next
    Q is known before α and A_α (step 3) are written out, in the pass that also sums the
    next iteration's (K, F).  ``(K u)`` reshaped is A_α Q for Def. 2 (``(K u)_(a,s) =
    Σ_i α_i m_ia (Qᵀm_i)_s``), A_α Q + (Σ α_i d_i) Q for Def. 5, and [A_α Q; A_α] for
    the gap criterion.  Basic Q-α (Q = eigenvectors of all of A_α) and the supervised
    𝒢 (A^{hg} A^{gh} Q^{gh}) need A_α itself, a q²-dimensional function of u that would
    cost q/k times the Gram to carry: they keep a second pass.  ``last``: no next Gram.
    """
    if s.K is None:  # the Gram of iteration 1 (or of a resumed fit)
        s.K, s.F = solve.gram(variant_spec(variant, s.Q, s.d, solve.dtype))
    spec = variant_spec(variant, s.Q, s.d, solve.dtype)
    u = gram_alpha(s.K, s.F, spec.signature)
    d = None
    if variant == "ritz":  # Q̄ from A_α Q, then the second α-step at Q̄ (its own Gram pass)
        Q, spec, u = fused_ritz_update(solve, s.K, u, s.Q, k)
    else:
        Q, d = fused_q_update(variant, s.K, s.F, u, s.Q)
    nxt = None if last else variant_spec(variant, Q, d, solve.dtype)
    alpha, A, s.K, s.F = solve.materialize(spec, u, nxt, s)
    s.Q, s.d = Q, d
    if variant == "laplacian":
        L = A + alpha.sum() * d * np.eye(A.shape[0])
        s.objective.append(criterion(L, Q))
    elif variant == "gap":
        s.objective.append(2 * criterion(A, Q) - float(np.sum(A * A)))
    else:
        s.objective.append(criterion(A, Q))
    return alpha


def fused_q_update(
    variant: str, K: np.ndarray, F: np.ndarray, u: np.ndarray, Q: np.ndarray
) -> tuple[np.ndarray, float | None]:
    """The next (Q, d) of Def. 2, Def. 5 or the gap criterion from ``Wᵀα = K u`` and ``F u``."""
    KuQ = (K @ u)[: Q.size].reshape(Q.shape)
    if variant == "power":
        return orth(KuQ), None  # Def. 2 steps 4–5
    if variant == "laplacian":
        s, e, diag_A = F[0] @ u, F[1] @ u, F[2:] @ u  # Σα, Σα_i d_i, diag(A_α)
        d = float(diag_A.max() / s)  # Def. 5 step 3
        return orth(KuQ + (s * d - e) * Q), d  # steps 4–7: L Q = A_α Q + (Σα) d Q
    A_u = (K @ u)[Q.size :].reshape(Q.shape[0], Q.shape[0])  # gap
    return orth(A_u @ Q), None


def fused_ritz_update(
    solve: AlphaStep, K: np.ndarray, u: np.ndarray, Q: np.ndarray, k: int
) -> tuple[np.ndarray, Any, np.ndarray]:
    """Def. 4 from ``K u``: Q̄ = orth(A_α Q), the Gram at Q̄ (one pass), its α and the next Q.

    Returns (Q, the tall matrix at Q̄, u at Q̄): α is written out at Q̄.
    """
    Qb = orth((K @ u)[: Q.size].reshape(Q.shape))  # steps 2–3
    spec = standard_spec(Qb, solve.dtype)
    Kb, Fb = solve.gram(spec)
    u = gram_alpha(Kb, Fb)  # steps 4–5
    AQb = (Kb @ u).reshape(Q.shape)
    return Qb @ top_abs_eigvecs(Qb.T @ AQb, k), spec, u  # steps 6–8


# --------------------------------------------------------------------------- one start
def linear_qalpha(
    X: Any,
    *,
    variant: str,
    k: int,
    init: Any,
    max_iter: int,
    tol: float,
    alpha_solver: str,
    random_state: int | None,
    restart: int,
    ctx: FitContext,
) -> QAlphaRun:
    """One start of the unsupervised Q-α (Def. 2–5) on X.

    Parameters
    ----------
    X : ndarray or dask array (q × n, samples × features): X, or X held in memory by
        ``ctx.execution``; its columns are the features m_i, preprocessed by §2.1 here
    variant : {"power", "basic", "ritz", "laplacian", "gap"}
    k : int, columns of Q (1 ≤ k < q)
    init : "pca", "random" or a (q × k) array, Q⁽⁰⁾ (see :func:`initial_Q`)
    max_iter, tol : stop when ‖α⁽ʳ⁾ − α⁽ʳ⁻¹⁾‖ < tol or after max_iter iterations
    alpha_solver : {"auto", "gram", "tsqr", "lanczos"}, see :class:`AlphaStep`
    random_state : int or None, seeds Q⁽⁰⁾ and Lanczos's start vector
    restart : int, the start's number (0: from ``init``; others: seeded random Q⁽⁰⁾)
    ctx : FitContext, the fit's execution (passes), checkpoint and progress log

    Returns
    -------
    QAlphaRun with Q (q × k).  Memory: X if it was held, plus O(q² + r²) for A_α and the
    Gram of W (r = qk; qk + q² for the gap criterion).
    """
    ex, prep = ctx.execution, normalize_block
    Q = initial_Q(init, X.shape[0], k, restart, random_state, lambda: uniform_affinity(X, prep, ex))
    solve = AlphaStep(X, prep, alpha_solver, ex)
    state = LinearState(Q=Q, rng=np.random.default_rng(random_state))
    fused = variant in FUSED_VARIANTS and solve.fusable(variant_spec(variant, Q, None, solve.dtype))

    def update(s: LinearState) -> np.ndarray:
        if fused:
            return fused_step(solve, s, variant, k, last=s.r == max_iter)
        if variant == "basic":
            return basic_step(solve, s, k)
        if variant == "ritz":
            return ritz_step(solve, s, k)
        if variant == "laplacian":
            return laplacian_step(solve, s)
        if variant == "gap":
            return gap_step(solve, s)
        return power_step(solve, s)

    loop = iterate_alpha(
        ctx, f"qalpha/{variant}/restart{restart}", state, update, max_iter=max_iter, tol=tol
    )
    return run_of(
        loop,
        Q=loop.state.Q,
        attrs={"variant": variant, "k": int(k), "gram_dtype": str(solve.dtype)},
    )
