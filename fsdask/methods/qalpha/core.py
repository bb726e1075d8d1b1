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
one pass (Ritz: two, one per α-step); see :func:`.linear.fused_step`.  A small X is read
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
  apply them (:func:`.kernel.sessions_kernel`); without them kernel Q-α fails on §6's data.
* The gap criterion (§2.1, last paragraph) with Q = [Q₁|Q₂] complementary in R^q:

:func:`qalpha_weights` is the door: it holds a small X in memory once, runs the variant's
starts (:func:`.linear.linear_qalpha`, :func:`.supervised.supervised_qalpha`,
:func:`.kernel.kernel_qalpha`) and keeps the start with the largest final criterion.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from fsdask.errors import ParameterError
from fsdask.fitting import FitContext
from fsdask.methods.qalpha.kernel import kernel_qalpha
from fsdask.methods.qalpha.linear import linear_qalpha
from fsdask.methods.qalpha.loop import QAlphaRun
from fsdask.methods.qalpha.supervised import supervised_qalpha

#: the core's iteration schemes (``kernel``: Def. 14; y given: Def. 6 with power/basic)
CORE_VARIANTS = ("power", "basic", "ritz", "laplacian", "gap", "kernel")


def qalpha_weights(
    X: Any,
    y: np.ndarray | None = None,
    *,
    k: int = 2,
    variant: str = "power",
    init: Any = "pca",
    gamma: float = 0.5,
    kernel: Any = "rbf",
    kernel_params: dict | None = None,
    max_iter: int = 100,
    tol: float = 1e-6,
    k_within: int = 2,
    k_between: int = 1,
    alpha_solver: str = "auto",
    n_init: int = 1,
    random_state: int | None = 0,
    ctx: FitContext,
) -> QAlphaRun:
    """The Q-α feature weights α of X (Wolf & Shashua 2005), without forming G.

    Parameters
    ----------
    X : dask array or ndarray (q × n, samples × features), no constant feature
    y : ndarray (q,) or None
        Class labels: the supervised criterion (5) of Def. 6, with ``variant`` "power" or
        "basic" giving how the Q^{gh} are updated.  None: the unsupervised criterion (1).
    k : int, columns of Q (1 ≤ k < q; kernel: k < n)
    variant : {"power", "basic", "ritz", "laplacian", "gap", "kernel"}
        Def. 2, §3, Def. 4, Def. 5, §2.1's gap criterion, Def. 14.
    init : "pca", "random" or array, Q⁽⁰⁾ (q × k; kernel: E⁽⁰⁾, n × k)
    gamma : float, γ of criterion (5)
    kernel : "linear", "rbf", "poly", "sessions" or callable, for Def. 14
    kernel_params : dict or None, the kernel's parameters
    max_iter, tol : stop when ‖α⁽ʳ⁾ − α⁽ʳ⁻¹⁾‖ < tol or after max_iter iterations
    k_within, k_between : int, Def. 6's k^{gh} for g = h and g ≠ h
    alpha_solver : {"auto", "gram", "tsqr", "lanczos"}, how α is found without G
    n_init : int, starts (the first from ``init``, the others seeded random); the one with
        the largest final criterion is kept (kernel: one start)
    random_state : int or None
    ctx : FitContext
        The fit's execution (memory budget, passes over X), checkpoint ("qalpha/<variant>/
        restart<r>" per start, "qalpha/kernel") and progress log.

    Returns
    -------
    QAlphaRun of the kept start.  Memory: X when it is small enough to hold
    (``fsdask.hold-x-below``), A_α (q × q), the Gram of W (r × r, r = qk) when it fits the
    budget, and O(n) per feature vector.
    """
    common = {"max_iter": max_iter, "tol": tol, "random_state": random_state, "ctx": ctx}
    if variant == "kernel":
        return kernel_qalpha(
            X, k=k, kernel=kernel, kernel_params=kernel_params, init=init, **common
        )
    if y is not None and variant not in ("power", "basic"):
        raise ParameterError(
            f"the supervised Q-α works with variant 'power' or 'basic', not {variant!r}"
        )
    Xw = ctx.execution.local(X)  # a small X is read into memory once, here
    if y is None:
        start = functools.partial(linear_qalpha, Xw, variant=variant, k=k, init=init)
    else:
        start = functools.partial(
            supervised_qalpha,
            Xw,
            y,
            k_within=k_within,
            k_between=k_between,
            gamma=gamma,
            basic=variant == "basic",
        )
    return best_start(start, n_init, alpha_solver=alpha_solver, **common)


def best_start(start: Callable[..., QAlphaRun], n_init: int, **common: Any) -> QAlphaRun:
    """The run of ``start(restart=r, **common)``, r < ``n_init``, with the largest final
    criterion (the earliest among equals).  The paper is silent on restarts; criterion (5)
    in particular has local maxima that favour noise from the uniform-α start on Weston's
    data."""
    best: QAlphaRun | None = None
    for restart in range(n_init):
        run = start(restart=restart, **common)
        if best is None or run.objective[-1] > best.objective[-1]:
            best = run
    return best


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
