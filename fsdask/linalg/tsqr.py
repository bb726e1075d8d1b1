"""Tall-skinny factorisations (n × r with n ≫ r), the dask ``tsqr`` way.

Tall arrays here are *feature-major*: ``M = Xᵀ`` (feature × sample), or any (feature × r)
array, chunked in row blocks with one column chunk — exactly the layout
:func:`dask.array.linalg.tsqr` wants.

:func:`centred_factor` gives the small factor of the centred (and scaled) X in the layout X
comes in: from the p × p Gram summed over X's sample blocks
(:meth:`~fsdask.linalg.execution.Execution.sum_blocks`, :mod:`fsdask.linalg.gram`) when X is
sample-blocked, else by :func:`gram_factor` on feature blocks.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Literal

import dask.array as da
import numpy as np

from fsdask._validation import is_sample_blocked
from fsdask.linalg.execution import TREE_SUM_COPIES, Execution, fits
from fsdask.linalg.gram import shifted_gram_block, whole_rows
from fsdask.linalg.reductions import compute_blocks, sample_dot, sum_over_blocks


def _tall(A: da.Array) -> da.Array:
    if not isinstance(A, da.Array):
        A = da.from_array(np.asarray(A))
    if len(A.chunks[1]) != 1:
        A = A.rechunk({1: -1})
    return A


def tall_skinny_qr(A: da.Array) -> tuple[da.Array, da.Array]:
    """QR of a tall-skinny array by TSQR (:func:`dask.array.linalg.tsqr`).

    Parameters
    ----------
    A : dask array (n, r), n ≫ r; rechunked to one column chunk and row blocks of ≥ r rows

    Returns
    -------
    Q : dask array (n, r), lazy, chunked like A
    R : dask array (r, r), lazy

    Memory: per task one row block and r × r factors; the tree of R factors is r² per node.
    """
    A = _tall(A)
    if A.shape[1] > A.chunks[0][0] or any(c < A.shape[1] for c in A.chunks[0][:-1]):
        A = A.rechunk({0: max(A.shape[1], A.chunks[0][0])})
    return da.linalg.tsqr(A)


def tall_skinny_svd(
    A: da.Array, method: Literal["tsqr", "gram"] = "tsqr", ex: Execution | None = None
) -> tuple[da.Array, np.ndarray, np.ndarray]:
    """Thin SVD ``A = U diag(s) Vᵀ`` of a tall-skinny array.

    ``tsqr`` (default) is backward stable; ``gram`` eigen-decomposes the r × r Gram ``AᵀA``
    in one streaming pass, which costs fewer flops but loses digits for ill-conditioned A.

    Parameters
    ----------
    A : dask array (n, r), n ≫ r
    method : {"tsqr", "gram"}
    ex : Execution, optional
        The fit's execution (``ctx.execution``): the pass that gives s and Vt is counted.

    Returns
    -------
    U : dask array (n, r), lazy
    s : ndarray (r,), singular values descending
    Vt : ndarray (r, r)

    Memory: r × r on the client; one row block per task.
    """
    A = _tall(A)
    if method == "gram":
        r = A.shape[1]
        (G,) = _computer(ex)(sum_over_blocks(lambda ab: ab @ ab.T, A.T, shape=(r, r)))
        evals, V = np.linalg.eigh(G)
        order = np.argsort(evals)[::-1]
        s = np.sqrt(np.clip(evals[order], 0, None))
        V = V[:, order]
        inv = np.where(s > s.max(initial=0) * 1e-12, 1.0 / np.where(s > 0, s, 1), 0.0)
        U = A @ (V * inv)
        return U, s, V.T
    Q, R = tall_skinny_qr(A)
    (R,) = _computer(ex)(R)
    Ur, s, Vt = np.linalg.svd(R, full_matrices=False)
    return Q @ Ur, s, Vt


def _computer(ex: Execution | None) -> Callable[..., tuple]:
    """How a function computes: through the caller's Execution (passes counted), else
    :func:`~fsdask._blocks.compute_blocks` (chunks joined on the client, uncounted)."""
    return ex.compute if ex is not None else compute_blocks


def khatri_rao(M: da.Array, P: da.Array) -> da.Array:
    """Row-wise Kronecker product ``W`` with rows ``m_i ⊗ p_i``.

    Parameters
    ----------
    M : dask array (n, q)
    P : dask array (n, k), rechunked to M's row blocks

    Returns
    -------
    dask array (n, q·k), lazy, chunked like M's rows.  Memory: q·k times that of M once
    computed (one row block at a time when streamed) — prefer :func:`khatri_rao_gram` or
    the mat-vecs, which never form it.
    """
    M, P = _tall(M), _tall(P)
    if M.shape[0] != P.shape[0]:
        raise ValueError(
            f"M and P must have the same number of rows; got {M.shape[0]} and {P.shape[0]}"
        )
    P = P.rechunk({0: M.chunks[0]})
    q, k = M.shape[1], P.shape[1]
    return da.blockwise(
        lambda m, p: (m[:, :, None] * p[:, None, :]).reshape(m.shape[0], q * k),
        "ic",
        M,
        "ia",
        P,
        "ib",
        new_axes={"c": q * k},
        concatenate=True,
        dtype=np.result_type(M.dtype, P.dtype),
    )


def khatri_rao_gram_block(m: np.ndarray, p: np.ndarray, dtype: Any = np.float64) -> np.ndarray:
    """``WᵀW`` for the rows ``w_i = m_i ⊗ p_i`` of one block, W never stored row-major.

    The columns of W are reordered as (s, a): ``S = [p_s ∘ m]_s`` is (k·q × b), its Gram
    ``S Sᵀ`` is one symmetric rank-b update (BLAS syrk, the transposed product of one
    buffer), and the (a, s) order is restored on the small result.  Building S costs one
    multiply per entry of W; the rank update does half the flops of a general product.

    Parameters
    ----------
    m : ndarray (b, q)
    p : ndarray (b, k)
    dtype : precision of S and of its rank update (see :meth:`Execution.gram_dtype`)

    Returns
    -------
    ndarray (q·k, q·k), float64.  Memory: S (b · q·k · itemsize bytes) plus the result.
    """
    q, k = m.shape[1], p.shape[1]
    mt, pt = m.T.astype(dtype, copy=False), p.T.astype(dtype, copy=False)
    S = (pt[:, None, :] * mt[None, :, :]).reshape(k * q, m.shape[0])  # row (s, a): p_is m_ia
    G = S @ S.T
    out = np.empty((q, k, q, k))  # (a, s) order and float64 in one copy (a reshape of the
    out[...] = G.reshape(k, q, k, q).transpose(1, 0, 3, 2)  # transposed view costs ~10×)
    return out.reshape(q * k, q * k)


def khatri_rao_matvec(m: np.ndarray, p: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``W u`` for the rows ``m_i ⊗ p_i``: ``(W u)_i = m_iᵀ U p_i`` with U = u as q × k.

    Parameters
    ----------
    m : ndarray (b, q)
    p : ndarray (b, k)
    u : ndarray (q·k,)

    Returns
    -------
    ndarray (b,).  O(b·q·k) time, O(b·q) memory.
    """
    U = np.asarray(u).reshape(m.shape[1], p.shape[1])
    return np.einsum("ai,ai->i", m.T, U @ p.T)  # callers pass m, p as views of (q, b) arrays


def khatri_rao_rmatvec(m: np.ndarray, p: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``Wᵀ a`` for the rows ``m_i ⊗ p_i``: ``vec(Σ_i a_i m_i p_iᵀ)``.

    Parameters
    ----------
    m : ndarray (b, q)
    p : ndarray (b, k)
    a : ndarray (b,)

    Returns
    -------
    ndarray (q·k,).  O(b·q·k) time, O(b·q) memory.
    """
    return ((m.T * a) @ p).ravel()


def _kr_gram_block(m: np.ndarray, p: np.ndarray, row_batch: int) -> np.ndarray:
    q, k = m.shape[1], p.shape[1]
    G = np.zeros((q * k, q * k))
    for s in range(0, m.shape[0], row_batch):
        G += khatri_rao_gram_block(m[s : s + row_batch], p[s : s + row_batch])
    return G


def khatri_rao_gram(M: da.Array, P: da.Array, row_batch: int = 8192) -> da.Array:
    """Gram ``WᵀW`` of the Khatri–Rao product of M and P, W never formed.

    One streaming pass over M and P, tree-summed; ``WᵀW = Σ_i (m_i m_iᵀ) ⊗ (p_i p_iᵀ)``.

    Parameters
    ----------
    M : dask array (n, q)
    P : dask array (n, k)
    row_batch : int
        Rows of W formed at once inside a block.

    Returns
    -------
    dask array (q·k, q·k), lazy.  Memory per task: one block, ``row_batch`` rows of W and
    a few (q·k)² partial sums.
    """
    M, P = _tall(M), _tall(P)
    P = P.rechunk({0: M.chunks[0]})
    q, k = M.shape[1], P.shape[1]
    return sum_over_blocks(
        lambda mb, pb: _kr_gram_block(mb.T, pb.T, row_batch), M.T, P.T, shape=(q * k, q * k)
    )


def _gram_term(xb: np.ndarray) -> np.ndarray:
    """``X_b X_bᵀ`` in float64, with at most one float64 copy of the block."""
    xb = xb.astype(np.float64, copy=False)
    return xb @ xb.T


def gram_factor(
    X: da.Array,
    energy_tol: float = 1e-12,
    method: Literal["auto", "tsqr"] = "auto",
    memory_budget: Any = None,
    ex: Execution | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Small factor ``B`` (r × p, numpy) with ``BᵀB = XᵀX`` up to a discarded energy.

    ``X = U diag(s) Vᵀ`` gives ``B = diag(s) Vᵀ`` and ``XᵀX = BᵀB = V S² Vᵀ``; since U has
    orthonormal columns, ``‖X M‖_F = ‖B M‖_F`` for every p × m matrix M, so any objective of
    the form ‖X − XA‖ can be evaluated on B (r ≤ min(n, p) rows) instead of X.  The Gram of
    the smaller side is used when it fits the memory budget:

    * ``p ≤ n``: the p × p Gram ``XᵀX`` (one pass), then ``eigh`` — the smallest factor
      there is, whatever the budget;
    * ``p > n`` and the n × n Gram fits: ``K = Σ_b X_b X_bᵀ`` tree-summed over feature
      blocks, ``K = U S² Uᵀ``, then ``B = U_rᵀ X`` (two passes; no division by small
      singular values — directions below the energy cut are noise anyway);
    * otherwise (or ``method="tsqr"``) the tall-skinny SVD of ``Xᵀ`` (p × n) by TSQR
      (:func:`tall_skinny_svd`), backward stable.

    Parameters
    ----------
    X : dask array (n, p), chunked (all samples, feature block)
    energy_tol : float
        Trailing singular values whose total energy Σ s² is at most ``energy_tol · ‖X‖²_F``
        are dropped (numerical rank; float32 rounding noise of exactly low-rank data falls
        here).
    method : {"auto", "tsqr"}
        ``"tsqr"`` forces the TSQR route when p > n.
    memory_budget : int, str or None
        Bytes the n × n Gram may take (with its tree-sum's partial sums,
        ``TREE_SUM_COPIES`` × n²·8); None reads dask config ``fsdask.memory-budget``.
        Used only without ``ex``.
    ex : Execution, optional
        The fit's execution (``ctx.execution``): its budget decides, and the passes over X
        are counted in it.  Without it (a call outside a fit) nothing is counted.

    Returns
    -------
    B : ndarray (r, p), float64, r ≤ min(n, p) — r·p·8 bytes in memory.
    s : ndarray (min(n, p),), all singular values, descending, before truncation.

    Memory: the Gram (min(n, p)² · 8 bytes, a few copies while tree-summed), or TSQR's
    n × n R factors per block; nothing p × p is formed when p > n.
    """
    if not isinstance(X, da.Array):
        X = da.from_array(np.asarray(X))
    n, p = X.shape
    compute = _computer(ex)
    fits_budget = ex.fits if ex is not None else functools.partial(fits, budget=memory_budget)
    if p <= n:
        (G,) = compute(X.T @ X)  # p × p ≤ n × n
        s, V = _eigh_descending(np.asarray(G, dtype=np.float64))
    elif method == "auto" and fits_budget(8.0 * n * n, copies=TREE_SUM_COPIES):
        return _factor_from_sample_gram(X, energy_tol, compute)
    else:
        Ut, s, _ = tall_skinny_svd(X.T.astype(np.float64), ex=ex)
        (V,) = compute(Ut)  # p × n: joined on the client, never in one task
    keep = _rank(s, energy_tol)
    B = s[:keep, None] * V[:, :keep].T
    return np.ascontiguousarray(B), s


def _factor_from_sample_gram(
    X: da.Array, energy_tol: float, compute: Callable[..., tuple]
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`gram_factor` by the n × n Gram ``K = Σ_b X_b X_bᵀ`` (p > n): ``K = U S² Uᵀ``,
    then ``B = U_rᵀ X`` (two passes)."""
    n = X.shape[0]
    (K,) = compute(sum_over_blocks(_gram_term, X, shape=(n, n)))
    s, U = _eigh_descending(np.asarray(K))
    keep = _rank(s, energy_tol)
    # B = U_rᵀ X as r × p chunks: joined by rows on the client, where Bᵀ = Xᵀ U_r would cost
    # two transposing copies of the r × p result there (about 0.5 s at 200 × 4·10⁵)
    (B,) = compute(sample_dot(X.astype(np.float64), U[:, :keep]))
    return B, s


def _eigh_descending(G: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Singular values ``s = √λ`` (descending, λ clipped at 0) and eigenvectors of a Gram."""
    w, V = np.linalg.eigh((G + G.T) / 2)
    order = np.argsort(w)[::-1]
    return np.sqrt(np.clip(w[order], 0, None)), V[:, order]


def _rank(s: np.ndarray, energy_tol: float) -> int:
    """Singular values kept: those before a tail of energy Σ s² ≤ ``energy_tol``·total (≥ 1)."""
    energy = s**2
    tail = np.cumsum(energy[::-1])[::-1]  # tail[k] = Σ_{j ≥ k} s_j²
    return max(int(np.sum(tail > energy_tol * energy.sum())), 1)


def centred_gram(X: Any, ex: Execution) -> np.ndarray:
    """The p × p Gram of the centred X, ``Σ_i (x_i − x̄)(x_i − x̄)ᵀ``, in one pass over its
    row blocks.

    Each block gives its Gram and column sums about K = X's first row
    (:func:`fsdask.linalg.gram.shifted_gram_block`, a CSR block kept sparse); then
    ``Σ(x − K)(x − K)ᵀ − S₁S₁ᵀ/n`` with ``S₁ = Σ(x − K)`` is the centred Gram, without the
    cancellation of ``XᵀX − n x̄x̄ᵀ`` when the means are large.

    Parameters
    ----------
    X : dask array (n, p) in sample blocks (column chunks merged per row block), or in memory
    ex : Execution, the fit's execution (it counts the pass)

    Returns
    -------
    ndarray (p, p), float64, symmetric.  Memory: (p + 1)·p·8 bytes per block's term and
    the tree-sum's partial sums.
    """
    n, p = X.shape
    if is_sample_blocked(X):
        X = whole_rows(X)
    K = ex.first_row(X)

    def block(xb, *shift):
        return shifted_gram_block(xb, shift[0] if shift else None)

    sums = ex.sum_blocks(block, X, shape=(p + 1,), columns=() if K is None else (K,))
    G = sums[:p] - np.outer(sums[p], sums[p]) / n
    return (G + G.T) / 2


def gram_over_samples(X: Any, ex: Execution) -> bool:
    """Whether :func:`centred_factor` sums X's p × p Gram over its row blocks: X comes in
    row blocks of all features (:func:`fsdask._validation.is_sample_blocked`), p ≤ n (else the
    n × n side is the small one), and the Gram with the tree-sum's partial sums
    (``TREE_SUM_COPIES`` × (p + 1)·p·8 bytes) fits the budget.  A row-blocked X for which
    this is False must be given to :func:`centred_factor` by feature blocks.

    Parameters
    ----------
    X : dask array (n, p)
    ex : Execution, the fit's execution (its budget)

    Returns
    -------
    bool
    """
    n, p = X.shape
    return is_sample_blocked(X) and p <= n and ex.fits(8.0 * p * (p + 1), copies=TREE_SUM_COPIES)


#: what :func:`factor_nbytes` measures, for the messages of the methods that hold it
FACTOR = "its factor B (min(n, p) × p float64)"


def factor_nbytes(n: int, p: int) -> float:
    """Bytes of the factor ``B`` (r × p, r ≤ min(n, p)) that :func:`centred_factor` returns
    on the client — at most ``8·min(n, p)·p``, the size of the Gram it comes from as well.

    Parameters
    ----------
    n, p : int
        Samples and features of X.

    Returns
    -------
    float
    """
    return 8.0 * min(n, p) * p


def centred_factor(
    X: Any, scale: bool, ex: Execution, energy_tol: float = 1e-12
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`gram_factor` of the centred X (columns divided by their standard deviation,
    ddof = 1, when ``scale``), in the layout X comes in.

    A sample-blocked X (an AnnData CSR matrix, a store chunked by samples) with p ≤ n and a
    Gram within the budget (:func:`gram_over_samples`) gives the p × p Gram summed over its
    row blocks (:func:`centred_gram`, one pass, CSR blocks never densified) and its
    eigendecomposition — the same factor as ``gram_factor`` gives on feature blocks (it, too,
    takes the p × p Gram when p ≤ n).  Any other X is centred lazily and factored by
    :func:`gram_factor`, so it must come by feature blocks (the caller converts it).

    Parameters
    ----------
    X : dask array (n, p); constant columns already removed when ``scale``
    scale : bool
    ex : Execution, the fit's execution (it counts the passes)
    energy_tol : float, as for :func:`gram_factor`

    Returns
    -------
    B : ndarray (r, p), float64
    s : ndarray (min(n, p),), the singular values of the centred (scaled) X, descending.
    """
    n = X.shape[0]
    if gram_over_samples(X, ex):
        G = centred_gram(X, ex)
        if scale:
            sd = np.sqrt(np.diag(G) / (n - 1))
            G = G / np.outer(sd, sd)
        s, V = _eigh_descending(G)
        keep = _rank(s, energy_tol)
        return np.ascontiguousarray(s[:keep, None] * V[:, :keep].T), s
    Xf = X.astype(np.float64)
    Xc = Xf - Xf.mean(axis=0)
    if scale:
        Xc = Xc / Xc.std(axis=0, ddof=1)
    return gram_factor(Xc, energy_tol=energy_tol, ex=ex)
