"""The data of CPFS's problem (4.2) and its duality-gap certificate, through a small factor of X.

X is n samples × p features with centred columns (§3).  CPFS reconstructs X from a few of
its own columns, ``X̃ = XA``, and asks for whole rows of A to vanish (§4, eq. 4.2)::

    min_A  ‖X − XA‖²_F + λ Σ_i ‖a_i‖_∞          a_i = i-th row of A (p × p)

A zero row i means feature i is used to reconstruct nothing: it is not selected.

The **duality gap** is the certificate every solve stops on (reported in ``result_``).  The
Fenchel dual of (4.2) is ``max_Θ −⟨Θ, X⟩ − ‖Θ‖²/4  s.t.  max_i ‖(XᵀΘ)_i‖₁ ≤ λ`` (ℓ1 is the
dual of ℓ∞, max-over-rows the dual of sum-over-rows).  From any A we take the residual
``R = X − XA`` and ``Θ = −2cR`` with the largest feasible c ≤ the unconstrained optimum,
giving ``D = 2c⟨R, X⟩ − c²‖R‖²`` and ``gap = P(A) − D ≥ P(A) − P*``.

How the big matrix is swept (``fsdask.linalg``): X = U S Vᵀ, so ``‖X M‖ = ‖B M‖`` with
``B = S Vᵀ`` (r × p, r ≤ min(n, p)); B comes from the p × p Gram (small p) or the TSQR
of the tall-skinny Xᵀ (:func:`fsdask.linalg.gram_factor`).  Every product with
``G = XᵀX = BᵀB`` then costs O(p·r) per column; G itself is kept only when its p²·8 bytes fit
the memory budget (the fit's :class:`~fsdask.linalg.execution.Execution`).  The KKT scan
computes ``‖∇f_i‖₁`` for all p rows (O(p²·|S|) with G, O(p²·r) without): zero rows are
optimal iff ``‖∇f_i‖₁ ≤ λ``.  The p² wall remains in the scan: see the README for the cost
model, and :func:`check_scan_cost`.
"""

from __future__ import annotations

import hashlib
from typing import Any

import dask.array as da
import numpy as np

from fsdask.errors import InputError, ParameterError
from fsdask.linalg import (
    gram_factor,
    map_features,
    row_l1_bound,
    row_l1_norms,
    row_l1_norms_screened,
)
from fsdask.linalg.execution import Execution, fits
from fsdask.linalg.reductions import compute_blocks
from fsdask.linalg.tsqr import factor_nbytes

__all__ = [
    "CLIENT_ARRAYS",
    "MAX_SCAN_FLOPS_DEFAULT",
    "SCAN_ARRAYS",
    "Problem",
    "Rows",
    "centred_block",
    "check_scan_cost",
    "client_nbytes",
    "column_hashes",
    "diagonal",
    "duplicate_columns",
    "prepare_problem",
    "rel_gap",
    "row_abs_max",
    "row_norms",
]

#: default ``max_scan_flops``: ~1 h per KKT scan at ~30 Gflop/s, and a path takes 10–20 scans
MAX_SCAN_FLOPS_DEFAULT = 1e14


# --------------------------------------------------------------------------- problem
class Problem:
    """The data of (4.2) through the small factor B (r × p), with ``G = BᵀB = XᵀX``.

    ``allowed`` marks rows of A that may be nonzero (duplicate columns are kept as targets
    but their rows are fixed at zero).  G itself is kept when its p²·8 bytes fit
    ``memory_budget`` (bytes, or None for the dask config key ``fsdask.memory-budget``;
    a fit passes its Execution's budget).
    """

    def __init__(self, B: np.ndarray, allowed: np.ndarray, memory_budget: Any = None):
        self.B = np.ascontiguousarray(B, dtype=np.float64)
        self.r, self.p = self.B.shape
        self.allowed = allowed
        self.trG = float(np.sum(self.B * self.B))
        self.G = self.B.T @ self.B if fits(8.0 * self.p**2, memory_budget) else None
        self.n_scans = 0
        self.n_exact_rows = 0
        self._ref: tuple[np.ndarray, np.ndarray] | None = (
            None  # last scan: E, ‖Bᵀ E‖₁ (exact or bounds)
        )

    def rows(self, S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``G_SS`` (k × k) and ``G_S:`` (k × p)."""
        if self.G is not None:
            GS = self.G[S]
        else:
            GS = self.B[:, S].T @ self.B
        return GS[:, S].copy(), GS

    def grad_l1(self, S: np.ndarray, A: np.ndarray, lam: float | None = None) -> np.ndarray:
        """``‖∇f_i‖₁`` for all p rows, ``∇f = 2 G (A − I)`` with A nonzero only on rows S (the KKT scan).

        With G in memory: exact, O(p²·|S|).  From the factor, ``∇f = 2Bᵀ E`` with
        ``E = B_S A − B`` (r × p): rows whose upper bound is ≤ λ are certified without their
        p products and carry the bound (≥ the true value, so the KKT test and the dual scaling
        stay safe); ``lam=None`` makes the maximum exact.  The bound is the smaller of the SVD
        bound of E and the previous scan's value plus the SVD bound of the change
        ``E − E_ref`` (:func:`row_l1_bound`): successive scans along the path and between KKT
        rounds differ little, so most rows are certified from the last scan.
        """
        self.n_scans += 1
        if self.G is not None:
            if S.size == 0:
                return 2.0 * np.abs(self.G).sum(axis=1)
            return 2.0 * row_l1_norms(self.G[:, S], A, self.G)
        if S.size:  # E = B_S A − B, the product's array reused: no second r × p array
            E = self.B[:, S] @ A
            E -= self.B
        else:
            E = -self.B
        upper = None
        if self._ref is not None:
            E_ref, v_ref = self._ref
            upper = v_ref + row_l1_bound(self.B.T, E - E_ref)  # triangle inequality
        vals, exact = row_l1_norms_screened(
            self.B.T, E, None if lam is None else lam / 2.0, upper=upper
        )
        self._ref = (E, vals)
        self.n_exact_rows += int(exact.sum())
        return 2.0 * vals

    def losses(
        self, S: np.ndarray, A: np.ndarray, gram: tuple[np.ndarray, np.ndarray] | None = None
    ) -> tuple[float, float]:
        """``f = ‖X − XA‖²`` and ``⟨R, X⟩`` with ``R = X − XA``.

        With ``gram = (G_S:, G_SS A)`` in O(|S|·p): ``f = ‖X‖² − 2⟨A, G_S:⟩ + ⟨A, G_SS A⟩``,
        ``⟨R, X⟩ = ‖X‖² − ⟨A, G_S:⟩``; this cancels when f ≪ ‖X‖², so below
        ``f < 1e-4‖X‖²`` (and without ``gram``) the residual is formed on B (O(r·|S|·p)).
        """
        if gram is not None and S.size:
            GS, M = gram
            ax = float(np.vdot(A, GS))
            f = self.trG - 2.0 * ax + float(np.vdot(A, M))
            if f > 1e-4 * self.trG:
                return f, self.trG - ax
        XA = self.B[:, S] @ A if S.size else np.zeros_like(self.B)
        E = self.B - XA
        f = float(np.sum(E * E))
        return f, f + float(np.sum(E * XA))  # ⟨R, X⟩ = ‖R‖² + ⟨R, XA⟩

    def primal_dual(
        self,
        S: np.ndarray,
        A: np.ndarray,
        lam: float,
        gmax: float,
        fx: tuple[float, float] | None = None,
    ) -> tuple[float, float, float]:
        """Primal P(A), dual D (the scaled residual Θ = −2cR) and loss f = ‖X − XA‖².

        ``fx = (f, ⟨R, X⟩)`` if already known (:meth:`Rows.losses`), else from :meth:`losses`.
        """
        f, rx = self.losses(S, A) if fx is None else fx
        pen = lam * float(row_abs_max(A).sum()) if S.size else 0.0
        P = f + pen
        c = 1.0 if f <= 0 else rx / f
        if gmax > 0:
            c = min(c, lam / gmax)
        c = max(c, 0.0)
        D = 2 * c * rx - c * c * f
        return P, D, f


def rel_gap(P: float, D: float, lam: float, trG: float) -> float:
    """``(P − D)/P``; at λ = 0 (P* = 0, A = I) relative to ``‖X‖²`` instead."""
    return max(P - D, 0.0) / (max(P, 1e-300) if lam > 0 else max(trG, 1e-300))


class Rows:
    """The rows S of (4.2) and the products the inner solvers need.

    ``G_SS`` (|S| × |S|), ``G_S:`` (|S| × p), and a linear map ``A ↦ Z`` through which every
    product with G_SS goes: when r < |S|/2, ``Z = B_S A`` (r × p, 2·|S|·r·p flops) and
    ``G_SS A − G_S: = B_Sᵀ(Z − B)``; else ``Z = G_SS A`` (|S|²·p) and ``G_SS A − G_S: = Z − G_S:``.
    Z is linear in A, so a momentum step carries it along without another product.
    """

    def __init__(self, prob: Problem, S: np.ndarray):
        self.prob, self.S = prob, S
        self.Gss, self.GS = prob.rows(S)
        self.factored = 2 * prob.r < S.size
        self.BS = np.ascontiguousarray(prob.B[:, S]) if self.factored else None
        self._grad = np.empty((S.size, prob.p))  # |S| × p: reused, not faulted in every step
        self._resid = np.empty((prob.r, prob.p)) if self.factored else None  # Z − B, likewise

    def state(self, A: np.ndarray) -> np.ndarray:
        """Z of A: ``B_S A`` or ``G_SS A``."""
        return self.BS @ A if self.factored else self.Gss @ A

    def half_grad(self, Z: np.ndarray) -> np.ndarray:
        """``G_SS A − G_S:`` (half the gradient rows ``∇_S f = 2 G (A − I)``) from Z of A.

        Written into one buffer: the next call overwrites it (callers use it at once).
        """
        if self.factored:
            resid = np.subtract(Z, self.prob.B, out=self._resid)
            return np.matmul(self.BS.T, resid, out=self._grad)
        return np.subtract(Z, self.GS, out=self._grad)

    def losses(self, A: np.ndarray, Z: np.ndarray) -> tuple[float, float]:
        """``f = ‖X − XA‖²`` and ``⟨R, X⟩`` from Z of A (:meth:`Problem.losses`)."""
        if not self.factored:
            return self.prob.losses(self.S, A, gram=(self.GS, Z))
        E = self.prob.B - Z  # the residual on B: XA ↔ B_S A = Z
        f = float(np.sum(E * E))
        return f, f + float(np.sum(E * Z))

    def gap(self, A: np.ndarray, Z: np.ndarray, lam: float) -> float:
        """Relative duality gap with the rows S (the dual scaled by the max over S)."""
        H = self.half_grad(Z)
        gmax = 2.0 * float(np.abs(H, out=H).sum(axis=1).max())  # max_i ‖∇f_i‖₁ on S
        P, D, _ = self.prob.primal_dual(self.S, A, lam, gmax, self.losses(A, Z))
        return rel_gap(P, D, lam, self.prob.trG)


def row_abs_max(A: np.ndarray) -> np.ndarray:
    """``‖a_i‖_∞`` of every row of A (k × p) without the k × p temporary ``np.abs(A)``: A's
    rows are p long, and the duality gap and the path's bookkeeping take this every few steps."""
    if A.shape[1] == 0:
        return np.zeros(A.shape[0])
    return np.maximum(A.max(axis=1), -A.min(axis=1))


def row_norms(p: int, S: np.ndarray, A: np.ndarray) -> np.ndarray:
    """``‖a_i‖_∞`` of every row of the p × p matrix A held as its rows S (``A_S``): (p,)."""
    out = np.zeros(p)
    if S.size:
        out[S] = row_abs_max(A)
    return out


def diagonal(p: int, S: np.ndarray, A: np.ndarray) -> np.ndarray:
    """The diagonal ``a_ii`` of the p × p matrix A held as its rows S (``A_S``): (p,)."""
    out = np.zeros(p)
    if S.size:
        out[S] = A[np.arange(S.size), S]
    return out


# --------------------------------------------------------------------------- from X to (4.2)
#: r × p float64 arrays a CPFS fit holds at its peak, B included: a KKT scan's residual
#: E, the previous scan's, their difference and the two p × r products of its SVD bound
#: (tracemalloc peaks of 7.4–7.7 · B on 100 × 20 000 and 60 × 40 000)
SCAN_ARRAYS = 8
#: what :func:`client_nbytes` measures, for the messages
CLIENT_ARRAYS = f"its factor B and its KKT scans' residuals ({SCAN_ARRAYS} × min(n, p) × p float64)"


def client_nbytes(n: int, p: int) -> float:
    """Bytes a CPFS fit holds in the fitting process at its peak: :data:`SCAN_ARRAYS` arrays
    of the factor's size (:func:`fsdask.linalg.tsqr.factor_nbytes`), what the pre-read
    check compares with the machine's memory.

    Parameters
    ----------
    n : int
        Samples of X (the factor has at most min(n, p) rows).
    p : int
        Features of X, the factor's columns.

    Returns
    -------
    float
        ``SCAN_ARRAYS · 8 · min(n, p) · p``.
    """
    return SCAN_ARRAYS * factor_nbytes(n, p)


def check_scan_cost(n: int, p: int, max_scan_flops: float | None) -> None:
    """Refuse, before X is read, a problem whose KKT scan would exceed ``max_scan_flops``.

    One scan from the factor costs up to ``2·p²·min(n, p)`` flops and a path takes 10–20
    scans; None lifts the limit.

    Raises
    ------
    ParameterError
        Naming the cost and how to bring p down.
    """
    flops = 2.0 * p * p * min(n, p)
    if max_scan_flops is not None and flops > max_scan_flops:
        raise ParameterError(
            f"CPFS on {n} × {p}: one KKT scan costs up to 2·p²·min(n, p) = {flops:.1e} flops "
            f"(> max_scan_flops={max_scan_flops:.1e}, ~1 h each on 2 cores) and a path "
            "takes 10–20 scans; select fewer candidate features first (e.g. a Filter), or "
            "pass max_scan_flops=None to run anyway"
        )


def prepare_problem(
    X: da.Array,
    ex: Execution,
    *,
    scale: bool = False,
    energy_tol: float = 1e-12,
    on_duplicate: str = "drop",
) -> tuple[Problem, dict[str, Any]]:
    """The problem (4.2) of X: centred columns (§3), duplicates found, the factor B of X.

    Parameters
    ----------
    X : dask array (n, p), chunked (all samples, feature block)
    ex : Execution
        The fit's execution: its budget decides how X is factored and whether G is kept.
    scale : bool
        Divide centred columns by their standard deviation (the paper does not).
    energy_tol : float
        Singular directions with total energy ≤ ``energy_tol·‖X‖²`` are dropped from B.
    on_duplicate : {"drop", "keep", "error"}
        Exact duplicate columns: rows fixed at zero, left free, or refused.

    Returns
    -------
    (Problem, dict)
        The problem and ``rank``, ``discarded_energy``, ``n_duplicate_columns``.  Memory: B
        (r·p·8 bytes) and, when it fits the budget, G (p²·8 bytes); X is read in two or three
        passes (column hashes, then :func:`fsdask.linalg.gram_factor`), never held.
    """
    # §3: columns zero-centred — one float64 copy per block, centred in place (a chain of
    # dask ops would hold each of its float64 intermediates at once in the fused task)
    Xc = map_features(centred_block, X, out_rows=X.shape[0], dtype=np.float64, scale=scale)
    dup = duplicate_columns(X)
    if dup.any() and on_duplicate == "error":
        raise InputError(
            f"X has {int(dup.sum())} column(s) that duplicate an earlier column "
            f"(first: #{int(np.flatnonzero(dup)[0])}); drop them or use on_duplicate='drop'"
        )
    allowed = ~dup if on_duplicate == "drop" else np.ones(X.shape[1], bool)
    B, s = gram_factor(Xc, energy_tol=energy_tol, ex=ex)
    total = float(np.sum(s**2))
    info = {
        "rank": int(B.shape[0]),
        "discarded_energy": float(np.sum(s[B.shape[0] :] ** 2) / total) if total else 0.0,
        "n_duplicate_columns": int(dup.sum()),
    }
    return Problem(B, allowed, ex.budget), info


def centred_block(xb: np.ndarray, scale: bool) -> np.ndarray:
    """The block's columns centred (and divided by their ddof-1 standard deviation), in one
    float64 copy: block memory ×1 in float64, never the ×3–4 of ``(x − x̄)/sd`` as dask ops."""
    out = xb.astype(np.float64)
    out -= out.mean(axis=0)
    if scale:
        out /= np.sqrt(np.einsum("ij,ij->j", out, out) / (out.shape[0] - 1))
    return out


def duplicate_columns(X: da.Array) -> np.ndarray:
    """Mask of columns that exactly equal an earlier column (one pass: per-column byte hashes)."""
    (h,) = compute_blocks(map_features(column_hashes, X, dtype=np.int64))  # joined on the client
    _, first = np.unique(h, return_index=True)
    dup = np.ones(h.size, bool)
    dup[first] = False
    return dup


def column_hashes(xb: np.ndarray) -> np.ndarray:
    """A 64-bit BLAKE2b digest of each column's bytes, the same in every process (Python's
    ``hash`` of bytes is salted per process: equal columns on two workers would differ)."""
    xb = np.ascontiguousarray(xb.T)
    return np.array(
        [
            int.from_bytes(
                hashlib.blake2b(row.tobytes(), digest_size=8).digest(), "little", signed=True
            )
            for row in xb
        ],
        dtype=np.int64,
    )
