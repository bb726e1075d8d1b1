"""A straightforward dense NumPy transcription of Wolf & Shashua (JMLR 2005), for testing.

It forms the n × n matrices G, F, 𝒢 and the kernel V explicitly, exactly as the paper's
definitions read (with the misprint fixes listed in fsdask/methods/qalpha/core.py), so it only
works for small n.  ``X`` is (sample × feature); the paper's M is its transpose.
"""

from __future__ import annotations

import numpy as np


def preprocess(X: np.ndarray) -> np.ndarray:
    """§2.1: M (n × q), each row (feature) centred and of unit L2 norm (zero rows stay zero)."""
    M = np.asarray(X, dtype=np.float64).T
    M = M - M.mean(axis=1, keepdims=True)
    norm = np.linalg.norm(M, axis=1, keepdims=True)
    return np.divide(M, norm, out=np.zeros_like(M), where=norm > 0)


def leading(G: np.ndarray) -> tuple[float, np.ndarray]:
    """Largest algebraic eigenpair of a symmetric matrix, vector with a positive sum."""
    import scipy.linalg
    import scipy.sparse.linalg

    n = G.shape[0]
    Gs = (G + G.T) / 2
    if n > 800:  # the explicit dense G, with ARPACK instead of a full tridiagonalisation
        w, V = scipy.sparse.linalg.eigsh(Gs, k=1, which="LA", tol=1e-15, v0=np.ones(n))
    else:
        w, V = scipy.linalg.eigh(Gs, subset_by_index=[n - 1, n - 1])
    v = V[:, -1]
    return w[-1], (v if v.sum() >= 0 else -v)


def top_abs_eigvecs(A: np.ndarray, k: int) -> np.ndarray:
    w, V = np.linalg.eigh((A + A.T) / 2)
    return V[:, np.argsort(-np.abs(w), kind="stable")[:k]]


def orth(Z: np.ndarray) -> np.ndarray:
    return np.linalg.qr(Z)[0]


def G_of(M: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """Def. 2 step 1: G_ij = (m_iᵀ m_j) m_iᵀ Q Qᵀ m_j."""
    P = M @ Q
    return (M @ M.T) * (P @ P.T)


def A_of(M: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    return M.T @ (alpha[:, None] * M)


def init_Q(M: np.ndarray, k: int) -> np.ndarray:
    """Q⁽⁰⁾ = top-k eigenvectors of MᵀM (A_α at uniform α)."""
    return top_abs_eigvecs(M.T @ M, k)


def crit(A: np.ndarray, Q: np.ndarray) -> float:
    return float(np.trace(Q.T @ A @ A @ Q))


def qalpha_dense(
    X: np.ndarray, k: int, variant: str = "power", n_iter: int = 10, Q0: np.ndarray | None = None
) -> tuple[np.ndarray, list[float], np.ndarray]:
    """Unsupervised Q-α: variants power (Def. 2), basic (§3), ritz (Def. 4), laplacian (Def. 5), gap (§2.1)."""
    M = preprocess(X)
    n, q = M.shape
    Q = init_Q(M, k) if Q0 is None else Q0
    obj = []
    if variant == "laplacian":
        # Def. 5: d_i = max diag(m_i m_iᵀ); L_i = m_i m_iᵀ − diag(m_i m_iᵀ 1) + d I
        d = (M**2).max(axis=1)
        for _ in range(n_iter):
            Y = np.empty((n, q * k))
            for i in range(n):
                L_i = (
                    np.outer(M[i], M[i])
                    - np.diag(np.outer(M[i], M[i]) @ np.ones(q))
                    + d[i] * np.eye(q)
                )
                Y[i] = (L_i @ Q).ravel()
            F = Y @ Y.T  # F_ij = trace(Qᵀ L_iᵀ L_j Q)
            _, alpha = leading(F)
            A = A_of(M, alpha)
            dr = np.max(np.diag(A)) / alpha.sum()  # step 3
            L = A - np.diag(A @ np.ones(q)) + alpha.sum() * dr * np.eye(q)  # steps 4–5
            Q = orth(L @ Q)
            obj.append(crit(L, Q))
            d = np.full(n, dr)
        return alpha, obj, Q
    for _ in range(n_iter):
        if variant == "gap":
            P = M @ Q
            K = M @ M.T
            Gg = K * (2 * P @ P.T - K)  # (MMᵀ)∘(M(Q₁Q₁ᵀ − Q₂Q₂ᵀ)Mᵀ)
            _, alpha = leading(Gg)
            A = A_of(M, alpha)
            Q = orth(A @ Q)
            obj.append(2 * crit(A, Q) - float(np.sum(A * A)))
            continue
        _, alpha = leading(G_of(M, Q))
        A = A_of(M, alpha)
        if variant == "power":
            Q = orth(A @ Q)
        elif variant == "basic":
            Q = top_abs_eigvecs(A, k)
        elif variant == "ritz":
            Qb = orth(A @ Q)  # steps 2–3
            _, alpha = leading(G_of(M, Qb))  # steps 4–5, Def. 2's G at Q̄
            A = A_of(M, alpha)
            S = Qb.T @ A @ Qb  # step 6
            Q = Qb @ top_abs_eigvecs(S, k)  # steps 7–8
        else:
            raise ValueError(variant)
        obj.append(crit(A, Q))
    return alpha, obj, Q


def preprocess_classes(X: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    """Def. 6 with within-class preprocessing: M^l (n × q^l), rows centred and unit norm in class l."""
    return [preprocess(X[y == c]) for c in np.unique(y)]


def supervised_dense(
    X: np.ndarray,
    y: np.ndarray,
    gamma: float = 0.5,
    k_within: int = 2,
    k_between: int = 1,
    variant: str = "power",
    n_iter: int = 10,
) -> tuple[np.ndarray, list[float]]:
    """Def. 6 / §3.1: 𝒢 = Σ_l G^{ll} − γ Σ_{g≠h} G^{gh} over ordered pairs."""
    Ms = preprocess_classes(X, y)
    c = len(Ms)
    n = Ms[0].shape[0]
    pairs = [(g, h) for g in range(c) for h in range(c)]
    kk = {(g, h): (k_within if g == h else k_between) for g, h in pairs}

    def Agh(alpha, g, h):
        return Ms[g].T @ (alpha[:, None] * Ms[h])  # q^g × q^h

    def right_sv(A, kq):
        return np.linalg.svd(A)[2][:kq].T

    alpha = np.ones(n) / np.sqrt(n)
    Q = {(g, h): right_sv(Agh(alpha, g, h), kk[g, h]) for g, h in pairs}
    obj = []
    for _ in range(n_iter):
        Gs = np.zeros((n, n))
        for g, h in pairs:
            P = Ms[h] @ Q[g, h]
            term = (Ms[g] @ Ms[g].T) * (P @ P.T)
            Gs += term if g == h else -gamma * term
        _, alpha = leading(Gs)
        val = 0.0
        for g, h in pairs:
            A = Agh(alpha, g, h)
            if variant == "basic":
                Q[g, h] = right_sv(A, kk[g, h])
            elif g == h:
                Q[g, h] = orth(A @ Q[g, h])
            else:
                Q[g, h] = orth(A.T @ (A @ Q[g, h]))
            e = float(np.trace(Q[g, h].T @ A.T @ A @ Q[g, h]))
            val += e if g == h else -gamma * e
        obj.append(val)
    return alpha, obj


def kernel_dense(X: np.ndarray, kernel, k: int, n_iter: int = 10) -> tuple[np.ndarray, list[float]]:
    """Def. 14 with E ← D V E R⁻¹ (the printed E ← E R⁻¹ breaks EᵀVE = I)."""
    M = preprocess(X)
    V = kernel(M.T, M.T)  # v_ij = k(m_i, m_j)
    w, U = np.linalg.eigh(V)
    top = np.argsort(-w, kind="stable")[:k]
    E = U[:, top] / np.sqrt(w[top])  # Mᵀ E orthonormal: E ᵀ V E = I
    obj = []
    for _ in range(n_iter):
        B = V @ E
        G = V * (B @ B.T)  # step 1
        _, alpha = leading(G)  # step 2
        D = np.diag(alpha)
        ZtZ = B.T @ D @ V @ D @ B  # step 3: Zᵀ Z
        R = np.linalg.cholesky(ZtZ).T  # step 4: Zᵀ Z = Rᵀ R
        E = D @ B @ np.linalg.inv(R)  # step 5 (corrected)
        obj.append(float(np.trace(E.T @ V @ D @ V @ D @ V @ E)))
    return alpha, obj
