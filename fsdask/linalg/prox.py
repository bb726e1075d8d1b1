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
def _thresholds(V: np.ndarray, radius: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    k, p = V.shape
    theta = np.zeros(k)
    buf = np.empty(p)
    for i in range(k):
        tau = radius[i]
        s = 0.0
        for j in range(p):
            s += abs(V[i, j])
        if s <= tau:
            continue                        # inside the ball: θ = 0
        th = (s - tau) / p
        cnt = 0                             # first pass: keep the entries above θ₀ in buf
        s = 0.0
        for j in range(p):
            a = abs(V[i, j])
            if a > th:
                buf[cnt] = a
                cnt += 1
                s += a
        if cnt == 0:                        # all |v_j| equal and τ = 0: θ = that value
            theta[i] = th
            continue
        th = (s - tau) / cnt
        while True:                         # later passes only over buf, compacted in place
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
        theta[i] = max(th, 0.0)
    return theta


def l1_ball_thresholds(V: np.ndarray, radius: float | np.ndarray) -> np.ndarray:
    """θ_i of the projection of every row of V onto the ℓ1 ball of ``radius`` (0 inside the ball)."""
    V = np.ascontiguousarray(V, dtype=np.float64)
    rad = np.ascontiguousarray(np.broadcast_to(np.asarray(radius, dtype=np.float64), (V.shape[0],)))
    return _thresholds(V, rad)


def project_l1_ball_rows(V: np.ndarray, radius: float | np.ndarray) -> np.ndarray:
    """Euclidean projection of every row of V onto the ℓ1 ball of ``radius``."""
    V = np.asarray(V, dtype=np.float64)
    th = l1_ball_thresholds(V, radius)[:, None]
    return np.where(th > 0, np.sign(V) * np.maximum(np.abs(V) - th, 0.0), V)


def prox_linf_rows(V: np.ndarray, tau: float | np.ndarray) -> np.ndarray:
    """``prox_{τ‖·‖_∞}`` of every row: ``clip(v, −θ, θ)``; rows with ``‖v‖₁ ≤ τ`` become exactly 0."""
    V = np.asarray(V, dtype=np.float64)
    th = l1_ball_thresholds(V, tau)[:, None]
    return np.clip(V, -th, th)
