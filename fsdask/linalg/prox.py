"""Row-wise ℓ1-ball projection and the prox of the ℓ∞ norm (numba, O(p) per row).

The projection of v onto ``{x: ‖x‖₁ ≤ τ}`` is ``sign(v)·(|v| − θ)_+`` where θ solves
``Σ_j (|v_j| − θ)_+ = τ`` (θ = 0 when ‖v‖₁ ≤ τ).  θ is found by Michelot's fixed point
(1986; Condat 2016, Alg. 2): start from the mean over all entries and repeat
``θ ← (Σ_{|v_j|>θ} |v_j| − τ) / #{|v_j| > θ}``; θ increases monotonically and is exact
once no entry leaves the set (a few passes in practice, no sort).

By Moreau's identity ``prox_{τ‖·‖_∞}(v) = v − Π_{‖·‖₁≤τ}(v) = clip(v, −θ, θ)`` — zero
exactly when ``‖v‖₁ ≤ τ``.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def _threshold(v: np.ndarray, tau: float, buf: np.ndarray) -> float:  # pragma: no cover - compiled
    """θ of the projection of one row v onto the ℓ1 ball of radius τ (0 inside the ball)."""
    p = v.size
    s = 0.0
    for j in range(p):
        s += abs(v[j])
    if s <= tau:
        return 0.0  # inside the ball: θ = 0
    th = (s - tau) / p
    cnt = 0  # first pass: keep the entries above θ₀ in buf
    s = 0.0
    for j in range(p):
        a = abs(v[j])
        if a > th:
            buf[cnt] = a
            cnt += 1
            s += a
    if cnt == 0:  # all |v_j| equal and τ = 0: θ = that value
        return th
    th = (s - tau) / cnt
    while True:  # later passes only over buf, compacted in place
        c2 = 0
        s2 = 0.0
        for j in range(cnt):
            a = buf[j]
            if a > th:
                buf[c2] = a
                c2 += 1
                s2 += a
        if c2 == cnt or c2 == 0:
            break
        th = (s2 - tau) / c2
        cnt = c2
    return max(th, 0.0)


@numba.njit(cache=True)
def _thresholds(V: np.ndarray, radius: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    k, p = V.shape
    theta = np.zeros(k)
    buf = np.empty(p)
    for i in range(k):
        theta[i] = _threshold(V[i], radius[i], buf)
    return theta


@numba.njit(cache=True)
def _prox_grad_rows(Y, G, A, c, tau, An, dots, beta, Yn):  # pragma: no cover - compiled
    k, p = Y.shape
    buf = np.empty(p)
    for i in range(k):
        v = An[i]
        for j in range(p):
            v[j] = Y[i, j] - c[i] * G[i, j]
        th = _threshold(v, tau[i], buf)
        dot = 0.0
        for j in range(p):
            a = min(max(v[j], -th), th)
            v[j] = a
            dot += (Y[i, j] - a) * (a - A[i, j])
            if beta >= 0.0:  # the momentum point, while A's row is in cache
                Yn[i, j] = a + beta * (a - A[i, j])
        dots[i] = dot


def l1_ball_thresholds(V: np.ndarray, radius: float | np.ndarray) -> np.ndarray:
    """θ_i of the projection of every row of V onto the ℓ1 ball of ``radius``.

    Parameters
    ----------
    V : ndarray (k, p)
    radius : float or ndarray (k,)

    Returns
    -------
    ndarray (k,), 0 for rows inside the ball.  O(k·p) time, no sort.  Memory: one float64
    copy of V at most (none when V is float64 and C-contiguous).
    """
    V = np.ascontiguousarray(V, dtype=np.float64)
    rad = np.ascontiguousarray(np.broadcast_to(np.asarray(radius, dtype=np.float64), (V.shape[0],)))
    return _thresholds(V, rad)


def project_l1_ball_rows(V: np.ndarray, radius: float | np.ndarray) -> np.ndarray:
    """Euclidean projection of every row of V onto the ℓ1 ball of ``radius``.

    Parameters
    ----------
    V : ndarray (k, p)
    radius : float or ndarray (k,)

    Returns
    -------
    ndarray (k, p).  Memory: the result.
    """
    V = np.asarray(V, dtype=np.float64)
    th = l1_ball_thresholds(V, radius)[:, None]
    return np.where(th > 0, np.sign(V) * np.maximum(np.abs(V) - th, 0.0), V)


def prox_linf_rows(V: np.ndarray, tau: float | np.ndarray) -> np.ndarray:
    """``prox_{τ‖·‖_∞}`` of every row: ``clip(v, −θ, θ)``; rows with ``‖v‖₁ ≤ τ`` become exactly 0.

    Parameters
    ----------
    V : ndarray (k, p)
    tau : float or ndarray (k,)

    Returns
    -------
    ndarray (k, p).  Memory: the result.
    """
    V = np.asarray(V, dtype=np.float64)
    th = l1_ball_thresholds(V, tau)[:, None]
    return np.clip(V, -th, th)


def prox_linf_grad_step(
    Y: np.ndarray,
    G: np.ndarray,
    A: np.ndarray,
    c: np.ndarray,
    tau: np.ndarray,
    *,
    beta: float | None = None,
    out: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray] | tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One proximal-gradient step on every row, fused into one pass.

    ``A⁺_i = prox_{τ_i‖·‖_∞}(Y_i − c_i G_i)`` (G the gradient at Y, c_i the step of row i),
    and ``⟨Y_i − A⁺_i, A⁺_i − A_i⟩`` per row (the adaptive-restart test of FISTA needs their
    weighted sum).  One pass over Y, G and A instead of the ~8 whole-array NumPy passes of
    ``prox_linf_rows(Y − c·G, τ)`` — the step is memory-bound when the rows are long.
    With ``beta`` the same pass also writes the momentum point ``A⁺ + β(A⁺ − A)`` (returned
    third; the caller drops it on a restart), saving a pass over A⁺ and A.  ``out``: two
    float64 C-contiguous (k, p) arrays, distinct from the inputs, to write A⁺ and the momentum
    point into (a FISTA loop reuses them instead of faulting in fresh pages every step).
    Serial on purpose: it runs between BLAS products on the client, where a parallel numba
    loop would compete with OpenBLAS's spinning threads.
    """
    k, p = Y.shape
    An, Yn = (
        out
        if out is not None
        else (np.empty((k, p)), np.empty((k, p) if beta is not None else (0, 0)))
    )
    dots = np.empty(k)
    f64 = lambda a: np.ascontiguousarray(a, dtype=np.float64)  # noqa: E731
    _prox_grad_rows(
        f64(Y),
        f64(G),
        f64(A),
        f64(np.broadcast_to(c, (k,))),
        f64(np.broadcast_to(tau, (k,))),
        An,
        dots,
        -1.0 if beta is None else float(beta),
        Yn,
    )
    return (An, dots) if beta is None else (An, dots, Yn)
