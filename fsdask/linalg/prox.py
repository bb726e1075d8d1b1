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

from fsdask.linalg.threads import cores, parallel_map


@numba.njit(cache=True, nogil=True)
def _threshold(v: np.ndarray, tau: float, buf: np.ndarray) -> float:  # pragma: no cover - compiled
    """θ of the projection of one row v onto the ℓ1 ball of radius τ (0 inside the ball)."""
    s = 0.0
    for j in range(v.size):
        s += abs(v[j])
    return _threshold_given_sum(v, s, tau, buf)


@numba.njit(cache=True, nogil=True)
def _threshold_given_sum(v, s, tau, buf):  # pragma: no cover - compiled
    """:func:`_threshold` with ``s = ‖v‖₁`` already summed (by the pass that wrote v)."""
    p = v.size
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


@numba.njit(cache=True, nogil=True)
def _prox_grad_rows(Y, G, A, c, tau, An, dots, beta, Yn, i0, i1):  # pragma: no cover - compiled
    p = Y.shape[1]
    buf = np.empty(p)
    for i in range(i0, i1):
        v = An[i]
        s = 0.0
        for j in range(p):
            v[j] = Y[i, j] - c[i] * G[i, j]
            s += abs(v[j])
        th = _threshold_given_sum(v, s, tau[i], buf)
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
    Rows are split over the cores in threads (the kernel releases the GIL) when the arrays
    are large; the step is memory-bound, so the gain stays well below the thread count.
    """
    k, p = Y.shape
    An, Yn = (
        out
        if out is not None
        else (np.empty((k, p)), np.empty((k, p) if beta is not None else (0, 0)))
    )
    dots = np.empty(k)
    f64 = lambda a: np.ascontiguousarray(a, dtype=np.float64)  # noqa: E731
    args = (
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
    _over_rows(lambda i0, i1: _prox_grad_rows(*args, i0, i1), k, k * p)
    return (An, dots) if beta is None else (An, dots, Yn)


#: below this many entries a step stays in the calling thread (a thread costs ~0.1 ms)
_THREADED_ENTRIES = 1 << 20


def _over_rows(kernel, k: int, entries: int) -> None:
    """``kernel(i0, i1)`` over the rows [0, k): one contiguous share of the rows per core on
    fsdask's thread pool when the step is large, else in the calling thread."""
    parts = min(cores(), k)
    if parts < 2 or entries < _THREADED_ENTRIES:
        kernel(0, k)
        return
    bounds = np.linspace(0, k, parts + 1).astype(int)
    parallel_map(lambda ab: kernel(*ab), list(zip(bounds[:-1], bounds[1:])))
