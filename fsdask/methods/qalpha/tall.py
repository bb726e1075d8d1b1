"""The tall matrices W of Q-α: §2.1's preprocessing and, per variant, the row map of W.

Every variant's α-step is "leading eigenvector of ``W S Wᵀ``" for a per-feature row map W
(n × r, one row per feature) and a small symmetric signature S.  ``G = W Wᵀ`` is never
formed: row i of the Khatri–Rao matrix W is ``m_i ⊗ p_i``, ``p_i = Qᵀ m_i``, and the
products, Grams and linear statistics of W are summed feature batch by feature batch.

**Precision.**  The Gram's BLAS products are taken in the data's precision
(:meth:`fsdask.linalg.Execution.gram_dtype`: float32 for a float32 store, each batch of
2048–8192 features summed into float64); everything else is float64.  On float32 data α then matches the
all-double computation to ~1e-7 and Prop. 3's non-decreasing objective holds up to that
rounding; ``fsdask.gram-precision: float64`` gives double products on every input.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from fsdask.linalg import (
    khatri_rao_gram_block,
    khatri_rao_matvec,
    khatri_rao_rmatvec,
)
from fsdask.linalg.moments import center_unit_columns

#: features preprocessed at once by A_α's own pass (affinity_block), and the fewest in a
#: tall matrix's batch (:func:`features_per_batch`)
ROW_BATCH = 2048
#: a tall matrix's batch is as large as keeps b rows of it in float64 (8·r·b bytes) under this,
#: up to _MAX_BATCH: each batch costs an r × r Gram copy and fresh temporaries (page faults)
#: whatever b is, about a third of a 600-wide Gram pass at b = 2048; at twice this the
#: float32 Khatri–Rao rows of two threads no longer share a 32 MiB L3 and the pass slows down
_BATCH_BYTES, _MAX_BATCH = 16 * 2**20, 8192


def features_per_batch(r: int) -> int:
    """Features per batch for a tall matrix r wide (a multiple of 256 in [2048, 8192])."""
    return int(min(_MAX_BATCH, max(ROW_BATCH, _BATCH_BYTES // (8 * r) // 256 * 256)))


# --------------------------------------------------------------------------- §2.1 preprocessing
def normalize_block(xb: np.ndarray) -> np.ndarray:
    """Rows of M (= columns of the X block) centred and scaled to unit L2 norm (zero stays zero)."""
    return center_unit_columns(xb)


def class_normalize_block(xb: np.ndarray, groups: list[np.ndarray]) -> np.ndarray:
    """Def. 6: each class block of samples centred and normalised within its class, stacked."""
    return np.concatenate([normalize_block(np.asarray(xb)[idx]) for idx in groups], axis=0)


def prepped(xb: np.ndarray, prep: Callable[[np.ndarray], np.ndarray], batch: int = ROW_BATCH):
    """``(offset, prep(xb[:, offset : offset + batch]))`` for the column batches of a raw block.

    §2.1 acts feature by feature, so preprocessing batch by batch gives the same M while
    never holding a float64 copy of a whole (possibly 64 MiB float32) block.
    """
    for s in range(0, xb.shape[1], batch):
        yield s, prep(xb[:, s : s + batch])


# --------------------------------------------------------------------------- tall matrices W
class TallSpec:
    """Row map of a tall matrix W (one row per feature) and its signature S (α-step of W S Wᵀ).

    ``rows(m)`` receives preprocessed columns m_i (q × b) and returns the rows of W (b × r);
    ``gram(m)`` / ``matvec(m, u)`` may give WᵀW and W u of those rows without forming them.
    The ``*_block`` methods take a *raw* block and ``prep`` and sweep it in batches.  ``dtype``
    is the precision of the Gram's products (:meth:`Execution.gram_dtype`); the Gram itself,
    the products with u and everything else are float64.
    """

    def __init__(
        self,
        rows: Callable[[np.ndarray], np.ndarray],
        r: int,
        signature: np.ndarray | None = None,
        gram: Callable[[np.ndarray], np.ndarray] | None = None,
        matvec: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
        rmatvec: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
        functionals: Callable[[np.ndarray], np.ndarray] | None = None,
        moments: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None,
        dtype: Any = np.float64,
    ):
        self.rows = rows
        self.dtype = np.dtype(dtype)
        self.r = r
        self.batch = features_per_batch(r)  # features per batch of the *_block sweeps
        self.signature = signature  # None means S = I
        self.gram = gram or self._gram_rows
        self.matvec = matvec or (lambda m, u: rows(m) @ u)
        self.rmatvec = rmatvec or (lambda m, a: rows(m).T @ a)
        self.functionals = functionals
        self._moments = moments

    def _gram_rows(self, m: np.ndarray) -> np.ndarray:
        return self._gram_of(self.rows(m))

    def _gram_of(self, w: np.ndarray) -> np.ndarray:
        """wᵀw with the products in ``dtype``, as float64."""
        w = w.astype(self.dtype, copy=False)
        return (w.T @ w).astype(np.float64, copy=False)

    def moments(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(WᵀW, F)`` of these rows, ``F = Φ W`` for the per-feature values Φ (f × b).

        Φ is ``functionals(m)``, by default the single row 1 (then F = (Wᵀ1)ᵀ, the sign of
        α).  A linear statistic of α = W u is then ``F u``, known before α is written out.
        """
        if self._moments is not None:
            return self._moments(m)
        if self.functionals is None:
            return self.gram(m), self.rmatvec(m, np.ones(m.shape[1]))[None, :]
        w = self.rows(m)
        return self._gram_of(w), self.functionals(m) @ w

    def n_functionals(self, q: int) -> int:
        return 1 if self.functionals is None else len(self.functionals(np.zeros((q, 1))))

    def gram_block(self, xb: np.ndarray, prep: Callable) -> np.ndarray:
        out = np.zeros((self.r, self.r))
        for _, m in prepped(xb, prep, self.batch):
            out += self.gram(m)
        return out

    def apply_block(self, xb: np.ndarray, prep: Callable, u: np.ndarray) -> np.ndarray:
        """(W u) of the block."""
        parts = [self.matvec(m, u) for _, m in prepped(xb, prep, self.batch)]
        return np.concatenate(parts) if parts else np.zeros(0)

    def apply_block_T(self, xb: np.ndarray, prep: Callable, a: np.ndarray) -> np.ndarray:
        """Wᵀ a of the block (r,)."""
        out = np.zeros(self.r)
        for s, m in prepped(xb, prep, self.batch):
            out += self.rmatvec(m, a[s : s + m.shape[1]])
        return out

    def normal_block(self, xb: np.ndarray, prep: Callable, v: np.ndarray) -> np.ndarray:
        """Wᵀ (W v) of the block (r,)."""
        out = np.zeros(self.r)
        for _, m in prepped(xb, prep, self.batch):
            w = self.rows(m)
            out += w.T @ (w @ v)
        return out


def khatri_rao_rows(m: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """Rows m_i ⊗ p_i, p_i = Qᵀ m_i, for the columns m_i of ``m`` (q × b) → (b × qk)."""
    p = Q.T @ m  # k × b
    return (m.T[:, :, None] * p.T[:, None, :]).reshape(m.shape[1], -1)


def standard_spec(Q: np.ndarray, dtype: Any = np.float64) -> TallSpec:
    """Def. 2: G = W Wᵀ, rows m_i ⊗ Qᵀm_i (WᵀW and W u without forming W)."""

    def moments(m):  # (WᵀW, (Wᵀ1)ᵀ) from one P = Qᵀm; Wᵀ1 = Σ_i m_i ⊗ p_i = vec(m Pᵀ)
        p = Q.T @ m
        return khatri_rao_gram_block(m.T, p.T, dtype), (m @ p.T).reshape(1, -1)

    return TallSpec(
        lambda m: khatri_rao_rows(m, Q),
        Q.shape[0] * Q.shape[1],
        dtype=dtype,
        gram=lambda m: khatri_rao_gram_block(m.T, (Q.T @ m).T, dtype),
        matvec=lambda m, u: khatri_rao_matvec(m.T, (Q.T @ m).T, u),
        rmatvec=lambda m, a: khatri_rao_rmatvec(m.T, (Q.T @ m).T, a),
        moments=moments,
    )


def laplacian_spec(Q: np.ndarray, d: float | None, dtype: Any = np.float64) -> TallSpec:
    """Def. 5: F = Y Yᵀ, rows vec(L_i Q) = m_i ⊗ p_i + d_i vec(Q) (d_i = max_a m_ia² when d is None).

    With K the Khatri–Rao rows m_i ⊗ p_i and s = (d_i), W = K + s vec(Q)ᵀ: its products and
    Gram are those of K (never stored row-major) plus rank-one terms, so a Laplacian pass
    costs what a Def. 2 pass costs (forming W would write b·qk values per batch, twice).
    """
    vq = Q.ravel()

    def shift(m):
        return (m * m).max(axis=0) if d is None else np.full(m.shape[1], d)

    def kr(m):
        return m.T, (Q.T @ m).T

    def rows(m):
        return khatri_rao_rows(m, Q) + shift(m)[:, None] * vq[None, :]

    def functionals(m):  # Φ = [1; d_i; m_i ∘ m_i]: F u = (Σα, Σα_i d_i, diag(A_α))
        return np.vstack([np.ones(m.shape[1]), shift(m), m * m])

    def gram(m):  # WᵀW = KᵀK + (Kᵀs) vqᵀ + vq (Kᵀs)ᵀ + (sᵀs) vq vqᵀ
        (mt, pt), s = kr(m), shift(m)
        c = np.outer(khatri_rao_rmatvec(mt, pt, s), vq)
        return khatri_rao_gram_block(mt, pt, dtype) + c + c.T + (s @ s) * np.outer(vq, vq)

    def matvec(m, u):
        return khatri_rao_matvec(*kr(m), u) + shift(m) * (vq @ u)

    def rmatvec(m, a):
        return khatri_rao_rmatvec(*kr(m), a) + vq * (shift(m) @ a)

    def moments(m):  # (WᵀW, Φ W) with Φ W = Φ K + (Φ s) vqᵀ
        phi = functionals(m)
        F = phi @ khatri_rao_rows(m, Q) + np.outer(phi @ shift(m), vq)
        return gram(m), F

    return TallSpec(
        rows,
        Q.size,
        dtype=dtype,
        gram=gram,
        matvec=matvec,
        rmatvec=rmatvec,
        functionals=functionals,
        moments=moments,
    )


def gap_spec(Q: np.ndarray, dtype: Any = np.float64) -> TallSpec:
    """Gap criterion: rows [m_i ⊗ p_i, m_i ⊗ m_i], S = diag(2I, −I)."""
    q, k = Q.shape
    eye = np.eye(q)

    def rows(m):
        return np.concatenate([khatri_rao_rows(m, Q), khatri_rao_rows(m, eye)], axis=1)

    S = np.r_[np.full(q * k, 2.0), np.full(q * q, -1.0)]
    return TallSpec(rows, q * k + q * q, np.diag(S), dtype=dtype)


def supervised_spec(
    Qs: dict, slices: list[slice], gamma: float, dtype: Any = np.float64
) -> TallSpec:
    """Def. 6: 𝒢 = Σ_l G^{ll} − γ Σ_{g≠h} G^{gh}; rows [m_i^g ⊗ Q^{gh}ᵀ m_i^h]_{(g,h)}."""
    keys = sorted(Qs)
    widths = [(slices[g].stop - slices[g].start) * Qs[g, h].shape[1] for g, h in keys]
    sign = np.concatenate(
        [np.full(w, 1.0 if g == h else -gamma) for (g, h), w in zip(keys, widths)]
    )

    def rows(m):
        parts = []
        for g, h in keys:
            mg, mh = m[slices[g]], m[slices[h]]
            p = Qs[g, h].T @ mh
            parts.append((mg.T[:, :, None] * p.T[:, None, :]).reshape(m.shape[1], -1))
        return np.concatenate(parts, axis=1)

    return TallSpec(rows, int(sum(widths)), np.diag(sign), dtype=dtype)


def variant_spec(variant: str, Q: np.ndarray, d: float | None, dtype: Any) -> TallSpec:
    """The tall matrix W of an unsupervised variant at Q (d: Def. 5's shift; dtype: the
    precision of its Gram's products)."""
    if variant == "laplacian":
        return laplacian_spec(Q, d, dtype)
    if variant == "gap":
        return gap_spec(Q, dtype)
    return standard_spec(Q, dtype)
