"""Q-α: spectral feature weighting of Wolf & Shashua (JMLR 2005), linear in the number of features.

Notation follows the paper.  M is n × q (features × samples) with rows m_iᵀ centred and of
unit norm (§2.1); in fsdask X is (sample × feature), so a feature block of M is the
transpose of a block of X.  α (n) are the feature weights, Q (q × k) the leading
eigenvectors of the affinity ``A_α = Σ_i α_i m_i m_iᵀ = Mᵀ diag(α) M``.  Criterion (1)::

    max_{α, Q} trace(Qᵀ A_α² Q)   s.t.  ‖α‖ = 1,  QᵀQ = I,      trace(Qᵀ A_α² Q) = αᵀ G α,
    G_ij = (m_iᵀ m_j) m_iᵀ Q Qᵀ m_j.

**Never forming G.**  ``G = W Wᵀ`` where row i of the Khatri–Rao matrix W (n × qk) is
``m_i ⊗ p_i``, ``p_i = Qᵀ m_i``; so α is the leading left singular vector of the tall,
skinny W.  We get it from the qk × qk Gram ``WᵀW`` (one streaming pass, tree-summed), from
TSQR of W, or matrix-free by Lanczos on ``v ↦ Wᵀ(W v)`` (one pass per product) when qk is
large.  Every variant's α-step is "leading eigenvector of ``W S Wᵀ``" for a per-feature
row map W and a small symmetric signature S (S = I except for the gap criterion and the
supervised 𝒢, which are indefinite).  ``A_α`` is one more pass (``sum_over_blocks``),
fused with the evaluation of α = W u.  Where the Q-update needs only ``Wᵀα = K u`` (Def. 2,
Def. 5, the gap criterion, Ritz's Q̄) that pass also sums the next Gram, so an iteration is
one pass (Ritz: two, one per α-step); see :meth:`QAlpha._fused_step`.  A small X is read
into memory once and swept there (:meth:`fsdask.linalg.Execution.local`).  Kernel Q-α (Def. 14) needs the n × n feature
kernel V: it is applied tile by tile (:func:`fsdask.linalg.feature_kernel_matmul`), never
stored; ``G α = rowsum(B ∘ (V (diag(α) B)))`` with ``B = V E``.

**Precision.**  The Gram's BLAS products are taken in the data's precision
(:meth:`fsdask.linalg.Execution.gram_dtype`: float32 for a float32 store, each batch of
2048–8192 features summed into float64); everything else is float64.  On float32 data α then matches the
all-double computation to ~1e-7 and Prop. 3's non-decreasing objective holds up to that
rounding; ``fsdask.gram-precision: float64`` gives double products on every input.

**Where the paper is misprinted or silent** (each checked numerically against the dense
transcription in ``tests/qalpha_dense.py``):

* Q⁽⁰⁾ is not specified: ``init="pca"`` takes the top-k eigenvectors of MᵀM (A_α at uniform
  α); ``"random"`` (seeded) or an explicit q × k array are the alternatives.
* Def. 4 (Ritz) says "orthonormal n × k matrix Q⁽⁰⁾": it is q × k.  Its step 4 prints
  Ḡ_ij = m_iᵀ Q̄ᵀ Q̄ m_j, without the (m_iᵀ m_j) factor and with Q̄ᵀQ̄ (= I) for Q̄Q̄ᵀ: we use
  Def. 2's G at Q̄.
* Given α, Q holds eigenvectors of A_α of largest |eigenvalue| (A_α is indefinite when α
  has negative entries).
* Def. 5 (Laplacian): with centred rows ``m_iᵀ 1 = 0``, so ``diag(m_i m_iᵀ 1) = 0`` and
  ``L_i = m_i m_iᵀ + d I``; the variant differs from Def. 2 through the shift d only.  Row i
  of its tall matrix is ``vec(L_i Q) = m_i ⊗ p_i + d_i vec(Q)``.
* Def. 6 / §3.1 (supervised): the rows of each class block M^l must be centred and
  normalised *within that class* — with rows normalised over all samples objective (5)
  prefers noise on Weston's data (0 of 6 relevant features in the top 6 in our check).
  The g ≠ h sum runs over ordered pairs; 𝒢 is indefinite, so α is its eigenvector of
  largest *algebraic* eigenvalue.  (5) says "max over Q^{gh}", but the text computes
  Q^{gh} "using the current estimates A^{gh}": we take the leading right singular
  subspace of A^{gh} (power variant: one orthogonal-iteration step on A^{gh}ᵀA^{gh} for
  g ≠ h, on A^{ll} for g = h).  The text also swaps "inter"/"intra" class.  A feature that
  is constant within a class has a zero row in that class block.
* Def. 14 step 5 prints ``E ← E R⁻¹``, which breaks ``EᵀVE = I``; from
  ``Q = Z R⁻¹ = Mᵀ D V E R⁻¹`` the update is ``E ← D V E R⁻¹``, which reproduces Def. 2
  exactly for the linear kernel.
* Def. 14 runs Def. 2 on rows φ(m_i), but the paper never says that §2.1's centring and
  unit norm apply to them.  For §6's kernel Σ_s (m_i^sᵀ m_j^s)² both are computable and we
  apply them (:func:`sessions_kernel`); without them kernel Q-α fails on §6's data.
* The gap criterion (§2.1, last paragraph) with Q = [Q₁|Q₂] complementary in R^q:
  ``G_gap = (MMᵀ) ∘ (M(2Q₁Q₁ᵀ − I)Mᵀ)`` = W S Wᵀ with rows ``[m_i ⊗ p_i, m_i ⊗ m_i]`` and
  S = diag(2I, −I); its leading algebraic eigenvector.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any, Callable, Literal

import dask.array as da
import numpy as np
from sklearn.utils._param_validation import StrOptions

from fsdask import checkpoint
from fsdask._validation import Int, Real
from fsdask.base import FitOutput, Selector
from fsdask.errors import ConvergenceWarning, InputError, ParameterError
from fsdask.fitting import FitContext
from fsdask.linalg import (
    feature_kernel_matmul,
    khatri_rao_gram_block,
    khatri_rao_matvec,
    khatri_rao_rmatvec,
    leading_eigh,
    map_features,
    sum_over_blocks,
    tall_skinny_qr,
)
from fsdask.linalg.execution import TREE_SUM_COPIES, Execution
from fsdask.linalg.moments import center_unit_columns
from fsdask.linalg.reductions import compute_blocks

log = logging.getLogger("fsdask")

VARIANTS = ("power", "basic", "ritz", "laplacian", "gap", "supervised", "kernel")
KERNELS = ("linear", "rbf", "poly", "sessions")
#: features preprocessed at once by A_α's own pass (affinity_block), and the fewest in a
#: tall matrix's batch (_batch)
_ROW_BATCH = 2048
#: a tall matrix's batch is as large as keeps b rows of it in float64 (8·r·b bytes) under this,
#: up to _MAX_BATCH: each batch costs an r × r Gram copy and fresh temporaries (page faults)
#: whatever b is, about a third of a 600-wide Gram pass at b = 2048; at twice this the
#: float32 Khatri–Rao rows of two threads no longer share a 32 MiB L3 and the pass slows down
_BATCH_BYTES, _MAX_BATCH = 16 * 2**20, 8192


def _batch(r: int) -> int:
    """Features per batch for a tall matrix r wide (a multiple of 256 in [2048, 8192])."""
    return int(min(_MAX_BATCH, max(_ROW_BATCH, _BATCH_BYTES // (8 * r) // 256 * 256)))


# --------------------------------------------------------------------------- §2.1 preprocessing
def normalize_block(xb: np.ndarray) -> np.ndarray:
    """Rows of M (= columns of the X block) centred and scaled to unit L2 norm (zero stays zero)."""
    return center_unit_columns(xb)


def class_normalize_block(xb: np.ndarray, groups: list[np.ndarray]) -> np.ndarray:
    """Def. 6: each class block of samples centred and normalised within its class, stacked."""
    return np.concatenate([normalize_block(np.asarray(xb)[idx]) for idx in groups], axis=0)


def prepped(xb: np.ndarray, prep: Callable[[np.ndarray], np.ndarray], batch: int = _ROW_BATCH):
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
        self.batch = _batch(r)  # features per batch of the *_block sweeps
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


#: variants whose iteration is one pass over X (Ritz: two, one per α-step of Def. 4)
FUSED_VARIANTS = ("power", "ritz", "laplacian", "gap")


def _spec(variant: str, Q: np.ndarray, d: float | None, dtype: Any) -> TallSpec:
    """The tall matrix W of an unsupervised variant at Q (d: Def. 5's shift; dtype: the
    precision of its Gram's products)."""
    if variant == "laplacian":
        return laplacian_spec(Q, d, dtype)
    if variant == "gap":
        return gap_spec(Q, dtype)
    return standard_spec(Q, dtype)


# --------------------------------------------------------------------------- one pass each
def affinity_block(xb: np.ndarray, a: np.ndarray, prep: Callable) -> np.ndarray:
    """``A_α = Σ_i α_i m_i m_iᵀ`` over the features of one raw block."""
    out = np.zeros((xb.shape[0], xb.shape[0]))
    for s, m in prepped(xb, prep):
        out += (m * a[s : s + m.shape[1]]) @ m.T
    return out


def affinity(X: Any, alpha: np.ndarray, prep: Callable, ex: Execution) -> np.ndarray:
    """``A_α = Σ_i α_i m_i m_iᵀ`` (q × q): one pass over X (none when X is in memory)."""
    return ex.sum_columns(
        lambda xb, ab: affinity_block(xb, ab, prep), X, alpha, shape=(X.shape[0],) * 2
    )


def uniform_affinity(X: Any, prep: Callable, ex: Execution) -> np.ndarray:
    """A_α at uniform α (α_i = 1/√n), the start of Q⁽⁰⁾: one pass over X."""
    n = X.shape[1]
    return affinity(X, np.full(n, 1.0 / np.sqrt(n)), prep, ex)


def _sym_top(H: np.ndarray) -> tuple[float, np.ndarray]:
    w, V = np.linalg.eigh((H + H.T) / 2)
    return float(w[-1]), V[:, -1]


def leading_from_gram(K: np.ndarray, signature: np.ndarray | None) -> tuple[float, np.ndarray]:
    """Leading algebraic eigenpair of W S Wᵀ from K = WᵀW: (λ, u) with α = W u, ‖α‖ = 1."""
    ev, V = np.linalg.eigh((K + K.T) / 2)
    keep = ev > max(ev.max(initial=0.0), 0.0) * 1e-13
    ev, V = ev[keep], V[:, keep]
    root = np.sqrt(ev)
    if signature is None:
        lam, h = float(ev[-1]), np.eye(ev.size)[:, -1]
    else:
        lam, h = _sym_top((root[:, None] * (V.T @ signature @ V)) * root[None, :])
    return lam, V @ (h / root)


class AlphaStep:
    """Leading (algebraic) eigenvector of W S Wᵀ, α = W u, with A_α evaluated in the same pass.

    X is a dask array or, when :meth:`Execution.local` held it, a NumPy array: every sweep
    goes through ``ex`` (one graph per pass for dask, a thread pool over column slices for
    NumPy), so the α-step reads the same either way.
    """

    def __init__(
        self, X: Any, prep: Callable, solver: str, random_state: int | None, ex: Execution
    ):
        self.X = X
        self.prep = prep
        self.solver = solver
        self.v_prev: np.ndarray | None = None
        self.a_prev: np.ndarray | None = None
        self.rng = np.random.default_rng(random_state)
        self.ex = ex  # the fit's memory budget and pass count
        self.passes0 = ex.passes
        self.dtype = ex.gram_dtype(X.dtype)  # of the Gram's products: the specs are built with it

    @property
    def n_passes(self) -> int:
        """Passes over X made by this α-step so far (dask sweeps; in-memory sweeps read nothing)."""
        return self.ex.passes - self.passes0

    def _choose(self, spec: TallSpec) -> str:
        n = self.X.shape[1]
        if self.solver == "tsqr" and n >= spec.r:
            return "tsqr"
        if self.solver == "auto" and n < spec.r and not isinstance(self.X, da.Array):
            return "tsqr"  # fewer features than qk, in memory: QR of W (n × r), no r × r eigh
        gram_fits = self.ex.fits(
            8.0 * spec.r**2, copies=TREE_SUM_COPIES
        )  # the tree-summed r × r Gram
        if self.solver == "gram" or (self.solver in ("auto", "tsqr") and gram_fits):
            return "gram"
        # matrix-free: Lanczos on Wᵀ W in R^r (S = I: one pass per product), or on W S Wᵀ in R^n
        return "lanczos" if spec.signature is None else "lanczos_n"

    def _tsqr(self, spec: TallSpec) -> tuple[float, np.ndarray, np.ndarray]:
        """(λ, α, A_α) from the QR of the tall W (n × r): Q_W R = W, λ, h = top of R S Rᵀ."""
        prep, X, ex = self.prep, self.X, self.ex
        S = np.eye(spec.r) if spec.signature is None else spec.signature

        def rows(xb):
            return spec.rows(prep(xb)).T

        if not isinstance(X, da.Array):
            Qw, R = np.linalg.qr(ex.map_columns(rows, X, out_rows=spec.r).T)
            lam, h = _sym_top(R @ S @ R.T)
            alpha = Qw @ h
            return lam, alpha, affinity(self.X, alpha, self.prep, self.ex)
        Qw, R = tall_skinny_qr(map_features(rows, X, out_rows=spec.r, dtype=np.float64).T)
        (R,) = ex.compute(R)
        lam, h = _sym_top(R @ S @ R.T)
        alpha_d = (Qw @ h[:, None])[:, 0].rechunk((X.chunks[1],))
        A_d = sum_over_blocks(
            lambda xb, ab: affinity_block(xb, ab, prep), X, alpha_d, shape=(X.shape[0],) * 2
        )
        alpha, A = ex.compute(alpha_d, A_d)  # α joined on the client: tasks stay block-sized
        return lam, alpha, A

    def _lanczos_n(self, spec: TallSpec) -> tuple[float, np.ndarray]:
        """(λ, α) by Lanczos on W S Wᵀ in R^n: (W S Wᵀ) a = W (S (Wᵀ a)), two sweeps per product."""
        prep, X, ex, S = self.prep, self.X, self.ex, spec.signature
        n = X.shape[1]
        a0 = self.a_prev if self.a_prev is not None else np.ones(n) / np.sqrt(n)

        def matvec_n(a):
            c = ex.sum_columns(
                lambda xb, ab: spec.apply_block_T(xb, prep, ab), X, a, shape=(spec.r,)
            )
            return ex.map_columns(lambda xb: spec.apply_block(xb, prep, S @ c), X)

        w, U = leading_eigh(matvec_n, n, 1, which="LA", v0=a0, tol=1e-12)
        return float(w[0]), U[:, 0]

    def _u(self, spec: TallSpec, how: str) -> tuple[float, np.ndarray]:
        """(λ, u) with α = W u, from the Gram (one pass) or Lanczos on Wᵀ W (one per product)."""
        prep, X, ex = self.prep, self.X, self.ex
        if how == "gram":
            K = ex.sum_columns(lambda xb: spec.gram_block(xb, prep), X, shape=(spec.r, spec.r))
            return leading_from_gram(K, spec.signature)
        v0 = (
            self.v_prev
            if self.v_prev is not None and self.v_prev.size == spec.r
            else self.rng.standard_normal(spec.r)
        )

        def matvec(v):
            return ex.sum_columns(lambda xb: spec.normal_block(xb, prep, v), X, shape=(spec.r,))

        w, V = leading_eigh(matvec, spec.r, 1, which="LA", v0=v0, tol=1e-12)
        lam, v = float(w[0]), V[:, 0]
        self.v_prev = v
        return lam, v / np.sqrt(lam)

    def __call__(self, spec: TallSpec) -> tuple[np.ndarray, np.ndarray, float]:
        """Return (α with ‖α‖ = 1 and Σα ≥ 0, A_α, eigenvalue = αᵀ(W S Wᵀ)α)."""
        prep = self.prep
        how = self._choose(spec)
        if how == "tsqr":
            lam, alpha, A = self._tsqr(spec)
        elif how == "lanczos_n":
            lam, alpha = self._lanczos_n(spec)
            A = affinity(self.X, alpha, self.prep, self.ex)
        else:
            lam, u = self._u(spec, how)

            def block(xb):  # α_b = W_b u and its A_α term from the same block
                a = spec.apply_block(xb, prep, u)
                return a, [affinity_block(xb, a, prep)]

            alpha, (A,) = self.ex.map_and_sum_columns(
                block, self.X, shapes=[(self.X.shape[0],) * 2]
            )
        alpha, A = _unit_positive(alpha, A)
        self.a_prev = alpha
        return alpha, A, lam

    # ---- checkpoints: what the next α-step reuses (warm starts, the RNG, the pass count)
    def state(self) -> dict[str, Any]:
        return {
            "solver_v": self.v_prev,
            "solver_a": self.a_prev,
            "solver_rng": checkpoint.rng_state(self.rng),
            "solver_passes": self.n_passes,
        }

    def set_state(self, saved: dict[str, Any]) -> None:
        self.v_prev, self.a_prev = saved.get("solver_v"), saved.get("solver_a")
        checkpoint.set_rng_state(self.rng, saved["solver_rng"])
        self.passes0 = self.ex.passes - int(saved["solver_passes"])

    # ---- one pass per α-step: the Gram of the next step is summed while α is written out
    def fusable(self, spec: TallSpec) -> bool:
        return self._choose(spec) == "gram"

    def gram(self, spec: TallSpec) -> tuple[np.ndarray, np.ndarray]:
        """(K = WᵀW, F = Φ W) in one pass (see :meth:`TallSpec.moments`)."""
        r, f = spec.r, spec.n_functionals(self.X.shape[0])

        def block(xb):  # K and F side by side in one summed vector: one tree-sum
            out = np.zeros(r * r + f * r)
            for _, m in prepped(xb, self.prep, spec.batch):
                Km, Fm = spec.moments(m)
                out[: r * r] += Km.ravel()
                out[r * r :] += Fm.ravel()
            return out

        flat = self.ex.sum_columns(block, self.X, shape=(r * r + f * r,))
        return flat[: r * r].reshape(r, r), flat[r * r :].reshape(f, r)

    def materialize(self, spec: TallSpec, u: np.ndarray, next_spec: TallSpec | None):
        """α = W u and A_α — and, from the same blocks, (K, F) of ``next_spec`` (one pass)."""
        prep, q = self.prep, self.X.shape[0]
        r = 0 if next_spec is None else next_spec.r
        f = 0 if next_spec is None else next_spec.n_functionals(q)
        batch = spec.batch if next_spec is None else min(spec.batch, next_spec.batch)

        def block(xb):  # each batch of features preprocessed once, used for all four terms
            alpha_b, A_b, K_b, F_b = [], np.zeros((q, q)), np.zeros((r, r)), np.zeros((f, r))
            for _, m in prepped(xb, prep, batch):
                a = spec.matvec(m, u)
                alpha_b.append(a)
                A_b += (m * a) @ m.T
                if next_spec is not None:
                    Km, Fm = next_spec.moments(m)
                    K_b += Km
                    F_b += Fm
            return (np.concatenate(alpha_b) if alpha_b else np.zeros(0)), [A_b, K_b, F_b]

        alpha, (A, K, F) = self.ex.map_and_sum_columns(
            block, self.X, shapes=[(q, q), (r, r), (f, r)]
        )
        alpha, A = _unit_positive(alpha, A)
        self.a_prev = alpha
        return alpha, A, K, F


def gram_alpha(K: np.ndarray, F: np.ndarray, signature: np.ndarray | None = None) -> np.ndarray:
    """u with α = W u the unit leading eigenvector of W S Wᵀ and Σα = F₀u ≥ 0 (Def. 2 steps 1–2).

    ``F₀ = (Wᵀ1)ᵀ`` is the first row of the functionals summed with K.
    """
    _, u = leading_from_gram(K, signature)
    return -u if F[0] @ u < 0 else u


def _unit_positive(alpha: np.ndarray, A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """‖α‖ = 1 (only rank truncation can make ‖W u‖ ≠ 1) and Σα ≥ 0; A_α scaled alike."""
    nrm = np.linalg.norm(alpha)
    if nrm > 0 and abs(nrm - 1) > 1e-6:
        alpha, A = alpha / nrm, A / nrm
    if alpha.sum() < 0:
        alpha, A = -alpha, -A
    return alpha, A


# --------------------------------------------------------------------------- small helpers
def orth(Z: np.ndarray) -> np.ndarray:
    """Orthonormal basis of the columns of Z (the QR step of the orthogonal iteration)."""
    return np.linalg.qr(Z)[0]


def top_abs_eigvecs(A: np.ndarray, k: int) -> np.ndarray:
    """Eigenvectors of the symmetric A with the k largest |eigenvalues|."""
    w, V = np.linalg.eigh((A + A.T) / 2)
    return V[:, np.argsort(-np.abs(w), kind="stable")[:k]]


def right_singular(A: np.ndarray, k: int) -> np.ndarray:
    return np.linalg.svd(A)[2][:k].T


def criterion(A: np.ndarray, Q: np.ndarray) -> float:
    """trace(Qᵀ A² Q)."""
    AQ = A @ Q
    return float(np.sum(AQ * AQ))


def auto_cut(alpha: np.ndarray) -> int:
    """Number of features before the sharpest decay of the sorted weights (§1, §4).

    Rule: sort the weights in decreasing order, w₁ ≥ w₂ ≥ …; among the positive weights that
    are at least 1 % of w₁ and the first half of the list, cut after the j with the largest
    ratio w_j / w_{j+1}.  At least one feature is kept.
    """
    w = np.sort(np.asarray(alpha, dtype=np.float64))[::-1]
    n = w.size
    if n < 2 or w[0] <= 0:
        return 1
    ok = w >= 0.01 * w[0]
    last = int(min(np.flatnonzero(ok)[-1] + 1, max(1, n // 2)))  # candidates j = 1 … last
    if last >= n:
        last = n - 1
    if last < 1:
        return 1
    ratios = w[:last] / np.maximum(w[1 : last + 1], w[0] * 1e-300)
    ratios = np.where(w[1 : last + 1] > 0, ratios, np.inf)
    return int(np.argmax(ratios) + 1)


# --------------------------------------------------------------------------- kernels (Def. 14)
def make_kernel(kernel: Any, params: dict | None) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Kernel between feature vectors: ``kern(XI, XJ)`` on (sample × tile) blocks → (tile_I × tile_J)."""
    p = dict(params or {})
    if callable(kernel):
        return lambda a, b: kernel(a, b, **p)
    if kernel == "linear":
        return lambda a, b: a.T @ b
    if kernel == "rbf":
        sigma = float(p.get("sigma", 1.0))
        if sigma <= 0:
            raise ParameterError(f"kernel_params sigma={sigma}; it must be > 0")

        def rbf(a, b):
            d = (a * a).sum(0)[:, None] + (b * b).sum(0)[None, :] - 2 * a.T @ b
            return np.exp(-np.maximum(d, 0) / (2 * sigma**2))

        return rbf
    if kernel == "poly":
        degree, coef0 = int(p.get("degree", 2)), float(p.get("coef0", 0.0))
        return lambda a, b: (a.T @ b + coef0) ** degree
    if kernel == "sessions":
        block = int(p.get("block", 8))
        if block < 1:
            raise ParameterError(f"kernel_params block={block}; it must be ≥ 1")
        return lambda a, b: sessions_kernel(a, b, block)
    raise ParameterError(
        f"kernel={kernel!r}; use one of {', '.join(KERNELS)}, a callable k(XI, XJ) or None"
    )


def sessions_kernel(a: np.ndarray, b: np.ndarray, block: int = 8) -> np.ndarray:
    """§6's kernel Σ_s (m_i^sᵀ m_j^s)² (sections s of ``block`` samples), on §2.1-preprocessed φ.

    The kernel is φ(m_i)ᵀφ(m_j) for the explicit map φ(m) = [vec(m^s m^sᵀ)]_s (dimension
    D = Σ_s |s|²).  Def. 14 runs Def. 2 on the rows φ(m_i), and §2.1 asks every row of M to be
    centred and of unit norm; the paper is silent on doing this in feature space, but both are
    computable here (1ᵀφ(m) = Σ_s (1ᵀm^s)², ‖φ(m)‖² = Σ_s ‖m^s‖⁴), so we return the kernel
    of the centred, unit-norm φ — kernel Q-α then equals linear Q-α on the mapped data.
    Without it every φ(m_i) shares the large positive part Σ_s diag(m^s m^sᵀ), and on the §6
    data (λ = 0.02) kernel Q-α found ≥ 10 of the 12 relevant features in 0 of 5 runs; with
    it in 5 of 5 (as Q-α on the element-wise squared data).
    """

    def raw(x, y):
        out = np.zeros((x.shape[1], y.shape[1]))
        for s in range(0, x.shape[0], block):
            out += (x[s : s + block].T @ y[s : s + block]) ** 2
        return out

    def stats(x):
        one = sum((x[s : s + block].sum(0)) ** 2 for s in range(0, x.shape[0], block))  # 1ᵀφ
        sq = sum((x[s : s + block] ** 2).sum(0) ** 2 for s in range(0, x.shape[0], block))  # ‖φ‖²
        return one, sq

    D = sum(min(block, a.shape[0] - s) ** 2 for s in range(0, a.shape[0], block))
    (oa, na), (ob, nb) = stats(a), stats(b)
    na, nb = np.sqrt(np.maximum(na - oa**2 / D, 0)), np.sqrt(np.maximum(nb - ob**2 / D, 0))
    K = raw(a, b) - np.outer(oa, ob) / D
    return np.divide(K, np.outer(na, nb), out=np.zeros_like(K), where=np.outer(na, nb) > 0)


# --------------------------------------------------------------------------- the estimator
class QAlpha(Selector):
    """Q-α feature weighting (Wolf & Shashua, JMLR 2005), as Dask graphs linear in the features.

    Parameters
    ----------
    k : int, default 2
        Number of clusters / leading eigenvectors of A_α (1 ≤ k < n_samples).
    variant : {"power", "basic", "ritz", "laplacian", "gap", "supervised", "kernel"}
        ``power`` — standard power-embedded Q-α (Def. 2); ``basic`` — alternate exact α and Q
        (§3); ``ritz`` — Ritz acceleration (Def. 4); ``laplacian`` — Laplacian spectrum
        (Def. 5); ``gap`` — maximise Σ_{≤k} λ² − Σ_{>k} λ² (§2.1); ``supervised`` — Def. 6
        (same as ``power`` with ``supervised=True``); ``kernel`` — Def. 14 (``kernel``
        defaults to ``"rbf"``).
    init : {"pca", "random"} or array (q × k)
        Q⁽⁰⁾: top-k eigenvectors of MᵀM (the paper is silent), seeded random, or given.
    gamma : float, default 0.5
        Weight γ of the between-class terms of the supervised criterion (5).
    kernel : None, "linear", "rbf", "poly", "sessions" or callable
        Kernel between feature vectors for Def. 14; a callable gets two (sample × features)
        blocks of preprocessed features and returns their (features × features) kernel.
        ``sessions`` is §6's Σ_s (m_i^sᵀ m_j^s)² over sections of 8 samples, on the centred,
        unit-norm feature map (see :func:`sessions_kernel`); rbf and poly (coef0 = 0) already
        have unit-norm φ, linear and poly (coef0 = 0) centred φ; a callable is used as given.
    kernel_params : dict
        ``sigma`` (rbf, default 1), ``degree``/``coef0`` (poly, 2/0), ``block`` (sessions, 8),
        or keyword arguments for a callable.
    max_iter : int, default 100
    tol : float, default 1e-6
        Converged when ‖α⁽ʳ⁾ − α⁽ʳ⁻¹⁾‖ < tol.  ``converged_`` says whether it happened.
    n_features_to_select : None, int, float in (0, 1) or "auto"
        None and "auto" cut at the sharpest decay of the sorted weights (see :func:`auto_cut`).
    supervised : "auto", True or False
        Use Def. 6 when labels are given to ``fit`` (``"auto"``, with the power or basic
        schemes).
    k_within, k_between : int, default 2 and 1
        k^{gh} of Def. 6 for g = h and g ≠ h (the paper's typical choice).
    n_init : int, default 1
        Restarts: the first from ``init``, the others from seeded random Q⁽⁰⁾; the run with
        the highest final criterion is kept (the paper is silent; criterion (5) in particular
        has local maxima that favour noise from the uniform-α start on Weston's data).  One
        ConvergenceWarning is raised, for the kept start; it suggests restarts, because a
        start that creeps to ``max_iter`` often sits near a poor local maximum.
    alpha_solver : {"auto", "gram", "tsqr", "lanczos"}
        How α is found without G: the r × r Gram of W (``auto``: when it fits the memory
        budget ``fsdask.memory-budget`` with its tree-sum, r ≤ 4096 at 1 GiB), TSQR, or
        Lanczos on Wᵀ W (one pass per product, warm-started).
    random_state : int, default 0
    on_constant : {"drop", "error"}
        Constant features have no direction after centring: weight 0 and never selected
        (``drop``), or an error.

    Attributes
    ----------
    scores_ : α (0 for dropped constant features)   ranking_ : 1 = best
    Q_ : q × k (supervised: dict of Q^{gh}; kernel: None — Q lives in feature space)
    E_ : kernel variant only, n × k with Q = Mᵀ E
    n_iter_, objective_ (criterion per iteration), converged_, result_
    n_passes_ : reads of X after the input check.  An X of at most ``fsdask.hold-x-below``
        bytes (dask config, default 32 MiB) is read once into memory and iterated there
        (n_passes_ = 1); set it to 0 to keep every pass on dask.
    """

    method_name = "qalpha"
    min_samples = 2
    _parameter_constraints: dict = {
        "k": [Int(1)],
        "variant": [StrOptions(set(VARIANTS))],
        "init": [StrOptions({"pca", "random"}), "array-like"],
        "gamma": [Real(0, None)],
        "kernel": [StrOptions(set(KERNELS)), callable, None],
        "kernel_params": [dict, None],
        "max_iter": [Int(1)],
        "tol": [Real(0, None)],
        "n_features_to_select": [Int(1), Real(0, 1, closed="neither"), StrOptions({"auto"}), None],
        "supervised": ["boolean", StrOptions({"auto"})],
        "k_within": [Int(1)],
        "k_between": [Int(1)],
        "alpha_solver": [StrOptions({"auto", "gram", "tsqr", "lanczos"})],
        "n_init": [Int(1)],
        "random_state": [Int(0), None],
        "on_constant": [StrOptions({"drop", "error"})],
    }

    def __init__(
        self,
        k: int = 2,
        variant: str = "power",
        init: Any = "pca",
        gamma: float = 0.5,
        kernel: Any = None,
        kernel_params: dict | None = None,
        max_iter: int = 100,
        tol: float = 1e-6,
        n_features_to_select: Any = None,
        supervised: Any = "auto",
        k_within: int = 2,
        k_between: int = 1,
        alpha_solver: str = "auto",
        n_init: int = 1,
        random_state: int | None = 0,
        on_constant: Literal["drop", "error"] = "drop",
    ):
        self.k = k
        self.variant = variant
        self.init = init
        self.gamma = gamma
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.max_iter = max_iter
        self.tol = tol
        self.n_features_to_select = n_features_to_select
        self.supervised = supervised
        self.k_within = k_within
        self.k_between = k_between
        self.alpha_solver = alpha_solver
        self.n_init = n_init
        self.random_state = random_state
        self.on_constant = on_constant

    # ---- parameters
    @property
    def requires_y(self) -> bool:  # type: ignore[override]
        return self.variant == "supervised" or self.supervised is True

    def _default_support(self, scores: np.ndarray) -> np.ndarray:
        return _top(scores, auto_cut(scores))

    # ---- fit
    def _fit(self, X: da.Array, y: np.ndarray | None, ctx: FitContext) -> FitOutput:
        q, n = X.shape
        if self.supervised is True and self.variant not in ("power", "basic", "supervised"):
            raise ParameterError(
                f"supervised=True works with variant 'power' or 'basic', not {self.variant!r}"
            )
        use_sup = (
            self.variant == "supervised"
            or (
                y is not None
                and self.supervised in ("auto", True)
                and self.variant in ("power", "basic")
            )
            or self.supervised is True
        )
        if self.kernel is not None or self.variant == "kernel":
            out = self._fit_kernel(X)
        else:
            if use_sup and y is None:
                raise InputError("the supervised Q-α (Def. 6) needs labels: fit(X, y)")
            if not use_sup and self.k >= q:
                raise InputError(
                    f"k={self.k} but X has only {q} samples; Q-α needs k < n_samples "
                    f"(centred rows span at most {q - 1} dimensions): lower k or add samples"
                )
            ex = Execution()  # the fit's budget; a small X is read into memory once, here
            Xw = ex.local(X)
            out, best, passes = None, None, ex.passes
            for t in range(self.n_init):
                res = (
                    self._fit_supervised(X, np.asarray(y), t, Xw, ex)
                    if use_sup
                    else self._fit_unsupervised(X, t, Xw, ex)
                )
                passes += self.n_passes_
                if best is None or res.objective[-1] > best[0]:
                    best = (res.objective[-1], res, self.Q_, self._change)
            _, out, self.Q_, self._change = best
            self.n_passes_ = passes
            out.attrs["n_passes"] = int(passes)
            out.attrs["n_init"] = int(self.n_init)
        if not out.converged:  # once, for the start that is kept
            warnings.warn(
                f"Q-α stopped at max_iter={self.max_iter} with ‖Δα‖ = {self._change:.2g} ≥ "
                f"tol={self.tol} (converged_ is False); try {self._restart_hint()}a larger "
                "max_iter or tol — the ranking often settles long before ‖Δα‖ does (compare "
                "scores_ of two max_iter)",
                ConvergenceWarning,
                stacklevel=4,
            )
        if isinstance(self.n_features_to_select, str) or self.n_features_to_select is None:
            out.support = _top(out.scores, auto_cut(out.scores))
        return out

    def _Q0(
        self, q: int, A0: Callable[[], np.ndarray], k: int, rng: np.random.Generator, restart: int
    ) -> np.ndarray:
        """Q⁽⁰⁾ (q × k); ``A0()`` (a pass over X) is called only for ``init="pca"``."""
        if restart > 0:
            return orth(
                np.random.default_rng([self.random_state or 0, restart]).standard_normal((q, k))
            )
        if isinstance(self.init, str):
            if self.init == "pca":
                return top_abs_eigvecs(A0(), k)
            return orth(rng.standard_normal((q, k)))
        Q0 = np.asarray(self.init, dtype=np.float64)
        if Q0.shape != (q, k):
            raise ParameterError(f"init has shape {Q0.shape}; expected (n_samples, k) = ({q}, {k})")
        return orth(Q0)

    def _iterate(
        self,
        step: Callable[[int], np.ndarray],
        max_iter: int,
        obj: list[float],
        slot=None,
        dump: Callable[[], dict] | None = None,
        load: Callable[[dict], None] | None = None,
    ) -> tuple[np.ndarray, int, bool]:
        """Run ``step(r)`` until ‖Δα‖ < tol; ``slot`` checkpoints ``dump()`` (+ α, the objective)
        and a resumed fit starts after the saved iteration with ``load(saved)``.  The last
        ‖Δα‖ is kept in ``_change`` for the warning of the start that :meth:`_fit` keeps."""
        alpha_prev = None
        converged = False
        start, change = 0, np.inf
        saved = slot.restore() if slot is not None else None
        if saved is not None:
            load(saved)
            alpha_prev, start, converged, change = (
                saved["alpha"],
                saved["iteration"],
                saved["converged"],
                saved["change"],
            )
            obj[:] = [float(v) for v in saved["objective"]]
        r = start  # the iteration reached, also when a restored fit had already converged
        for r in range(start + 1, max_iter + 1 if not converged else start + 1):
            alpha = step(r)
            change = np.inf if alpha_prev is None else float(np.linalg.norm(alpha - alpha_prev))
            log.info("Q-α iteration %d: objective %.10g, ‖Δα‖ %.3g", r, obj[-1], change)
            alpha_prev = alpha
            converged = change < self.tol
            if slot is not None:
                slot.reached(
                    r,
                    lambda: {
                        **dump(),
                        "alpha": alpha_prev,
                        "converged": converged,
                        "change": change,
                        "objective": np.asarray(obj),
                    },
                    final=converged or r == max_iter,
                )
            if converged:
                break
        self._change = change
        return alpha_prev, r, converged

    def _restart_hint(self) -> str:
        """The restarts to suggest when a fit does not converge (the kernel form has none).

        On the §6 cluster model with 10 of 2000 features relevant, the starts that crept to
        max_iter had settled near a poor local maximum (objective ~2.1, 2–3 noise features
        selected) that more iterations only confirmed; restarts reached the relevant ones.
        """
        if self.kernel is not None or self.variant == "kernel":
            return ""
        return (
            f"restarts (n_init={max(5, 2 * self.n_init)} keeps the start with the largest "
            "objective_: a slow start often sits near a poor local maximum), or "
        )

    def _fit_unsupervised(self, X: da.Array, restart: int, Xw: Any, ex: Execution) -> FitOutput:
        """Def. 2–5 on ``Xw`` (X, or X held in memory by ``ex``); X names the checkpoint."""
        k, variant = self.k, self.variant
        prep = normalize_block
        rng = np.random.default_rng(self.random_state)
        a0_passes = []

        def A0() -> np.ndarray:  # for init="pca" only
            before = ex.passes
            A = uniform_affinity(Xw, prep, ex)
            a0_passes.append(ex.passes - before)
            return A

        Q = self._Q0(X.shape[0], A0, k, rng, restart)
        solve = AlphaStep(Xw, prep, self.alpha_solver, self.random_state, ex)
        obj: list[float] = []
        state = {"Q": Q, "d": None, "K": None, "F": None}
        dt = solve.dtype
        fused = variant in FUSED_VARIANTS and solve.fusable(_spec(variant, Q, None, dt))

        def step(r: int) -> np.ndarray:
            if fused:
                if state["K"] is None:  # the Gram of iteration 1 (or of a resumed fit)
                    state["K"], state["F"] = solve.gram(_spec(variant, state["Q"], state["d"], dt))
                alpha, A, Q, value = self._fused_step(solve, state, r == self.max_iter)
                obj.append(value)
                return alpha
            Q = state["Q"]
            if variant == "laplacian":
                alpha, A, _ = solve(laplacian_spec(Q, state["d"], dt))  # steps 1–2
                d = float(np.max(np.diag(A)) / alpha.sum())  # step 3
                L = A + alpha.sum() * d * np.eye(A.shape[0])  # steps 4–5 (D_α = 0)
                Q = orth(L @ Q)  # steps 6–7
                state["d"] = d
                obj.append(criterion(L, Q))
            elif variant == "gap":
                alpha, A, _ = solve(gap_spec(Q, dt))
                Q = orth(A @ Q)
                obj.append(2 * criterion(A, Q) - float(np.sum(A * A)))
            else:
                alpha, A, _ = solve(standard_spec(Q, dt))  # Def. 2 steps 1–3
                if variant == "power":
                    Q = orth(A @ Q)  # steps 4–5
                elif variant == "basic":
                    Q = top_abs_eigvecs(A, k)
                elif variant == "ritz":
                    Qb = orth(A @ Q)  # Def. 4 steps 2–3
                    alpha, A, _ = solve(standard_spec(Qb, dt))  # steps 4–5 (Def. 2's G at Q̄)
                    Q = Qb @ top_abs_eigvecs(Qb.T @ A @ Qb, k)  # steps 6–8
                obj.append(criterion(A, Q))
            state["Q"] = Q
            return alpha

        def dump() -> dict:
            keep = {k: v for k, v in state.items() if v is not None}
            return {**keep, **solve.state()}

        def load(saved: dict) -> None:
            state.update({k: saved.get(k) for k in state})
            state["d"] = None if state["d"] is None else float(state["d"])
            solve.set_state(saved)

        slot = checkpoint.for_fit(self, X).slot(f"qalpha/{variant}/restart{restart}")
        alpha, n_iter, converged = self._iterate(step, self.max_iter, obj, slot, dump, load)
        self.Q_ = state["Q"]
        self.n_passes_ = solve.n_passes + sum(a0_passes)
        return FitOutput(
            scores=alpha,
            n_iter=n_iter,
            converged=converged,
            objective=list(obj),
            extras={"Q": self.Q_},
            extra_dims={"Q": ("sample", "component")},
            attrs={
                "variant": variant,
                "k": int(k),
                "n_passes": int(self.n_passes_),
                "gram_dtype": str(dt),
            },
        )

    def _fused_step(
        self, solve: AlphaStep, state: dict, last: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """One iteration in one pass over X (two for Ritz, whose Def. 4 has two α-steps).

        ``state`` holds Q and (K, F) of the tall matrix W at Q.  α = W u comes from K; every
        Q-update needs only statistics linear in α — ``Wᵀα = K u`` and ``F u`` — so the next
        Q is known before α and A_α (step 3) are written out, in the pass that also sums the
        next iteration's (K, F).  ``(K u)`` reshaped is A_α Q for Def. 2 (``(K u)_(a,s) =
        Σ_i α_i m_ia (Qᵀm_i)_s``), A_α Q + (Σ α_i d_i) Q for Def. 5, and [A_α Q; A_α] for
        the gap criterion.  Basic Q-α (Q = eigenvectors of all of A_α) and the supervised
        𝒢 (A^{hg} A^{gh} Q^{gh}) need A_α itself, a q²-dimensional function of u that would
        cost q/k times the Gram to carry: they keep a second pass.
        """
        variant, Q, K, F, d_prev = self.variant, state["Q"], state["K"], state["F"], state["d"]
        spec = _spec(variant, Q, d_prev, solve.dtype)
        u = gram_alpha(K, F, spec.signature)
        KuQ = (K @ u)[: Q.size].reshape(Q.shape)
        d = None
        if variant == "power":
            Q = orth(KuQ)  # Def. 2 steps 4–5
        elif variant == "laplacian":
            s, e, diag_A = F[0] @ u, F[1] @ u, F[2:] @ u  # Σα, Σα_i d_i, diag(A_α)
            d = float(diag_A.max() / s)  # Def. 5 step 3
            Q = orth(KuQ + (s * d - e) * Q)  # steps 4–7: L Q = A_α Q + (Σα) d Q
        elif variant == "gap":
            A_u = (K @ u)[Q.size :].reshape(Q.shape[0], Q.shape[0])
            Q = orth(A_u @ Q)
        else:  # ritz, Def. 4: Q̄ from A_α Q, then the second α-step at Q̄ (its own Gram pass)
            Qb = orth(KuQ)  # steps 2–3
            spec = standard_spec(Qb, solve.dtype)
            Kb, Fb = solve.gram(spec)
            u = gram_alpha(Kb, Fb)  # steps 4–5
            AQb = (Kb @ u).reshape(Q.shape)
            Q = Qb @ top_abs_eigvecs(Qb.T @ AQb, self.k)  # steps 6–8
        nxt = None if last else _spec(variant, Q, d, solve.dtype)
        alpha, A, state["K"], state["F"] = solve.materialize(spec, u, nxt)
        state["Q"], state["d"] = Q, d
        if variant == "laplacian":
            L = A + alpha.sum() * d * np.eye(A.shape[0])
            return alpha, A, Q, criterion(L, Q)
        if variant == "gap":
            return alpha, A, Q, 2 * criterion(A, Q) - float(np.sum(A * A))
        return alpha, A, Q, criterion(A, Q)

    def _fit_supervised(
        self, X: da.Array, y: np.ndarray, restart: int, Xw: Any, ex: Execution
    ) -> FitOutput:
        """Def. 6 on ``Xw`` (X, or X held in memory by ``ex``); X names the checkpoint."""
        classes, codes = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise InputError(
                f"y has a single class ({classes[0]!r}); the supervised Q-α (Def. 6) needs at "
                "least two classes — or fit without y for the unsupervised Q-α"
            )
        groups = [np.flatnonzero(codes == c) for c in range(classes.size)]
        sizes = [g.size for g in groups]
        need = max(self.k_within + 1, self.k_between)
        small = [str(classes[c]) for c, s in enumerate(sizes) if s < need]
        if small:
            raise InputError(
                f"class(es) {', '.join(small)} have fewer than {need} samples; the supervised Q-α "
                f"needs k_within + 1 = {self.k_within + 1} samples per class (lower k_within)"
            )
        bounds = np.r_[0, np.cumsum(sizes)]
        slices = [slice(int(bounds[c]), int(bounds[c + 1])) for c in range(classes.size)]

        def prep(xb):
            return class_normalize_block(xb, groups)

        nc = classes.size
        pairs = [(g, h) for g in range(nc) for h in range(nc)]
        kk = {(g, h): (self.k_within if g == h else self.k_between) for g, h in pairs}
        before = ex.passes
        if restart > 0:  # a seeded random start (n_init > 1): no pass for A_α at uniform α
            rs = np.random.default_rng([self.random_state or 0, restart])
            Qs = {(g, h): orth(rs.standard_normal((sizes[h], kk[g, h]))) for g, h in pairs}
        else:
            A = uniform_affinity(Xw, prep, ex)
            Qs = {(g, h): right_singular(A[slices[g], slices[h]], kk[g, h]) for g, h in pairs}
        a0_passes = ex.passes - before
        solve = AlphaStep(Xw, prep, self.alpha_solver, self.random_state, ex)
        obj = []
        basic = self.variant == "basic"

        def step(r: int) -> np.ndarray:
            alpha, A, _ = solve(supervised_spec(Qs, slices, float(self.gamma), solve.dtype))
            val = 0.0
            for g, h in pairs:
                Agh = A[slices[g], slices[h]]
                if basic:
                    Qs[g, h] = right_singular(Agh, kk[g, h])
                elif g == h:
                    Qs[g, h] = orth(Agh @ Qs[g, h])
                else:
                    Qs[g, h] = orth(Agh.T @ (Agh @ Qs[g, h]))
                e = criterion(Agh, Qs[g, h])
                val += e if g == h else -self.gamma * e
            obj.append(val)
            return alpha

        def dump() -> dict:
            return {**{f"Q{g}_{h}": Qs[g, h] for g, h in pairs}, **solve.state()}

        def load(saved: dict) -> None:
            Qs.update({(g, h): saved[f"Q{g}_{h}"] for g, h in pairs})
            solve.set_state(saved)

        slot = checkpoint.for_fit(self, X, y).slot(f"qalpha/supervised/restart{restart}")
        alpha, n_iter, converged = self._iterate(step, self.max_iter, obj, slot, dump, load)
        self.Q_ = {
            (
                classes[g].item() if hasattr(classes[g], "item") else classes[g],
                classes[h].item() if hasattr(classes[h], "item") else classes[h],
            ): Qs[g, h]
            for g, h in pairs
        }
        self.n_passes_ = solve.n_passes + a0_passes  # + the pass for A at uniform α
        return FitOutput(
            scores=alpha,
            n_iter=n_iter,
            converged=converged,
            objective=list(obj),
            attrs={
                "variant": "supervised",
                "gamma": float(self.gamma),
                "k_within": int(self.k_within),
                "k_between": int(self.k_between),
                "classes": [str(c) for c in classes],
                "n_passes": int(self.n_passes_),
                "gram_dtype": str(solve.dtype),
            },
        )

    def _fit_kernel(self, X: da.Array) -> FitOutput:
        q, n = X.shape
        k = self.k
        if k >= n:
            raise InputError(
                f"k={k} but X has only {n} features; the kernel Q-α needs k < n_features"
            )
        kern = make_kernel("rbf" if self.kernel is None else self.kernel, self.kernel_params)
        ex = Execution()
        Xw = ex.local(X)  # a small X: M held in memory, V applied tile by tile in a loop
        if isinstance(Xw, da.Array):
            Mx = map_features(normalize_block, X, out_rows=q, dtype=np.float64)
            probe = Mx[:, : min(3, n)].compute()
        else:
            Mx = ex.map_columns(normalize_block, Xw, out_rows=q)
            probe = Mx[:, : min(3, n)]
        try:
            v = np.asarray(kern(probe[:, :2], probe))
        except Exception as exc:
            raise ParameterError(
                f"the kernel failed on two (sample × features) blocks: {type(exc).__name__}: {exc}"
            ) from exc
        if v.shape != (probe[:, :2].shape[1], probe.shape[1]):
            raise ParameterError(
                f"the kernel returned shape {v.shape} for blocks of {probe[:, :2].shape[1]} and "
                f"{probe.shape[1]} features; it must return (features_I × features_J)"
            )
        if not np.all(np.isfinite(v)):
            raise ParameterError(
                "the kernel returned NaN/Inf on the first features; check kernel_params"
            )
        tile = int(max(256, min(4096, 2**24 // max(1, q * 8))))
        self.n_passes_ = ex.passes

        def Vmul(B: np.ndarray) -> np.ndarray:
            VB = feature_kernel_matmul(Mx, kern, np.asarray(B, dtype=np.float64), tile=tile)
            if isinstance(VB, np.ndarray):
                return VB
            self.n_passes_ += 1
            return compute_blocks(VB)[0]  # p × k: joined on the client, never in one task

        rng = np.random.default_rng(self.random_state)
        if isinstance(self.init, str) and self.init == "pca":
            w, U = leading_eigh(
                lambda v: Vmul(v[:, None])[:, 0],
                n,
                k,
                which="LA",
                v0=np.ones(n) / np.sqrt(n),
                tol=1e-12,
                matmat=Vmul,
            )
            if np.any(w <= 0):
                raise InputError(
                    "the feature kernel has fewer than k positive eigenvalues; lower k"
                )
            E = U / np.sqrt(w)  # Mᵀ E orthonormal: Eᵀ V E = I
            B = U * np.sqrt(w)  # V E
        else:
            E0 = (
                rng.standard_normal((n, k))
                if isinstance(self.init, str)
                else np.asarray(self.init, float)
            )
            if E0.shape != (n, k):
                raise ParameterError(
                    f"for the kernel variant init must be (n_features × k) = ({n}, {k}); "
                    f"got {E0.shape}"
                )
            VE = Vmul(E0)
            R = np.linalg.cholesky(E0.T @ VE).T
            E, B = np.linalg.solve(R.T, E0.T).T, np.linalg.solve(R.T, VE.T).T
        obj = []
        state = {"E": E, "B": B, "a": np.ones(n) / np.sqrt(n)}

        def step(r: int) -> np.ndarray:
            B = state["B"]

            # steps 1–2: α = leading eigenvector of G = V ∘ (B Bᵀ);  G α = rowsum(B ∘ V(diag(α) B))
            def matvec(a):
                return np.sum(B * Vmul(a[:, None] * B), axis=1)

            def matmat(Amat):  # G Amat in one pass: the columns' diag(a_j) B side by side
                C = Vmul(np.concatenate([a[:, None] * B for a in Amat.T], axis=1))
                return np.stack(
                    [
                        np.sum(B * C[:, j * B.shape[1] : (j + 1) * B.shape[1]], axis=1)
                        for j in range(Amat.shape[1])
                    ],
                    axis=1,
                )

            _, U = leading_eigh(matvec, n, 1, which="LA", v0=state["a"], tol=1e-12, matmat=matmat)
            alpha = U[:, 0] * (1.0 if U[:, 0].sum() >= 0 else -1.0)
            DB = alpha[:, None] * B
            C = Vmul(DB)  # V D B
            ZtZ = DB.T @ C  # step 3: Zᵀ Z = Bᵀ D V D B
            try:
                R = np.linalg.cholesky((ZtZ + ZtZ.T) / 2).T  # step 4
            except np.linalg.LinAlgError as exc:
                raise InputError(
                    "kernel Q-α: Zᵀ Z is singular (the weighted kernel has rank < k); "
                    "lower k or change the kernel"
                ) from exc
            state["E"] = np.linalg.solve(R.T, DB.T).T  # step 5, corrected: E ← D V E R⁻¹
            state["B"] = np.linalg.solve(R.T, C.T).T  # V E for the next cycle, for free
            Bn = state["B"]
            obj.append(float(np.sum(Bn * (alpha[:, None] * Vmul(alpha[:, None] * Bn)))))
            state["a"] = alpha
            return alpha

        def load(saved: dict) -> None:
            state.update({k: saved[k] for k in state})
            self.n_passes_ = int(saved["passes"])

        slot = checkpoint.for_fit(self, X).slot("qalpha/kernel")
        alpha, n_iter, converged = self._iterate(
            step, self.max_iter, obj, slot, lambda: {**state, "passes": self.n_passes_}, load
        )
        self.Q_ = None
        self.E_ = state["E"]
        name = (
            self.kernel
            if isinstance(self.kernel, str)
            else ("rbf" if self.kernel is None else "callable")
        )
        return FitOutput(
            scores=alpha,
            n_iter=n_iter,
            converged=converged,
            objective=list(obj),
            attrs={
                "variant": "kernel",
                "kernel": name,
                "k": int(k),
                "n_passes": int(self.n_passes_),
            },
        )


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    order = np.argsort(-np.asarray(scores), kind="stable")[:k]
    mask = np.zeros(np.asarray(scores).size, bool)
    mask[order] = True
    return mask
