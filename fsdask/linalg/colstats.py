"""Per-feature statistics of X, computed the way each kind of array computes them best.

One implementation per array kind (``functools.singledispatch``), so that a method asks for
the statistic and never tests which kind of array it holds.

The block kernels (:func:`moment_sums`, :func:`screen_sums`, :func:`xt_dot`) give *mergeable*
partial sums over the rows of one block — a dense NumPy block (any real dtype) or a
``scipy.sparse`` CSR block, read through ``.data/.indices/.indptr`` and never densified —
for :meth:`fsdask.linalg.execution.Execution.sum_blocks`, which merges them over sample
blocks.  Class-wise sums are *shifted* by a per-feature reference K (X's first row):
``Σ (x − K)`` and ``Σ (x − K)²`` add up across blocks, and the variance
``(Σ(x−K)² − (Σ(x−K))²/n)/(n−1)`` loses only ``((μ − K)/σ)²`` ulps, not the ``(μ/σ)²`` of
raw sums (the "shifted data" algorithm; Chan, Golub & LeVeque 1983).  For a CSR block the
implicit zeros of a column add ``(0 − K)`` and ``K²`` each, counted, not stored.
"""

from __future__ import annotations

import functools
from typing import Any

import dask.array as da
import numba
import numpy as np
import scipy.sparse

from fsdask._blocks import compute_blocks
from fsdask.linalg.reductions import sum_over_row_blocks

__all__ = [
    "column_std",
    "column_screen",
    "moment_sums",
    "moment_rows",
    "merged_screen",
    "by_class",
    "membership_matrix",
    "membership_rows",
    "membership_sums",
    "screen_sums",
    "xt_dot",
    "MOMENT_MAXIMA",
    "SCREEN_MAXIMA",
]

#: trailing rows of :func:`moment_sums` merged by maximum: the shift K, −min and max
MOMENT_MAXIMA = 3
#: trailing rows of :func:`screen_sums` merged by maximum: −min and max
SCREEN_MAXIMA = 2
#: columns per tile of the dense kernels (the accumulators stay in L2)
_TILE = 512


def merged_screen(sums: np.ndarray) -> np.ndarray:
    """The screen — NaN/Inf count, minimum, maximum of each column — from the last four
    rows of merged :func:`moment_sums` or :func:`membership_sums` (count, K, −min, max).

    Parameters
    ----------
    sums : ndarray (rows, w)

    Returns
    -------
    ndarray (3, w), float64
    """
    return np.stack([sums[-4], -sums[-2], sums[-1]])


def _std(xb: np.ndarray) -> np.ndarray:
    return xb.std(axis=0, dtype=np.float64)


@functools.singledispatch
def column_std(X: Any, ex: Any) -> np.ndarray:
    """The population standard deviation of every column of X (float64), in memory.

    Parameters
    ----------
    X : ndarray or dask array (N, J)
    ex : Execution
        The fit's execution; an in-memory X is swept in its column slices.

    Returns
    -------
    ndarray (J,), float64.  Memory: the output only.
    """
    raise TypeError(f"column_std: no implementation for {type(X).__name__}")


@column_std.register
def _(X: np.ndarray, ex: Any) -> np.ndarray:
    # held in memory: column slices in the client's threads (each column's sd alone)
    return ex.map_columns(_std, X)


@column_std.register
def _(X: da.Array, ex: Any) -> np.ndarray:
    # p values joined on the client; a preprocessing pass, not one of the fit's passes_over_X
    (sd,) = compute_blocks(X.std(axis=0, dtype=np.float64))
    return sd


# --------------------------------------------------------------------------- block kernels
def moment_rows(n_classes: int) -> int:
    """Rows of :func:`moment_sums` for ``n_classes`` classes: 2·C + 5."""
    return 2 * n_classes + 5


@functools.singledispatch
def moment_sums(
    xb: Any,
    codes: np.ndarray,
    weights: np.ndarray | None = None,
    shift: np.ndarray | None = None,
    *,
    n_classes: int = 1,
) -> np.ndarray:
    """Class-wise shifted sums and the screen of one block's rows, mergeable over blocks.

    Parameters
    ----------
    xb : ndarray or scipy.sparse CSR matrix (n_b, p_b), any real dtype
    codes : int ndarray (n_b,), the class of each row in ``range(n_classes)``
    weights : ndarray (n_b,) or None, a row weight w (e.g. a centred response)
    shift : ndarray (p_b,) or None, the reference K of every column; None: the block's
        first row (right when the block holds X's first row, i.e. X has one row block)
    n_classes : int, C

    Returns
    -------
    ndarray (2·C + 5, p_b), float64 — rows ``Σ_{i∈c} (x − K)`` (C rows),
    ``Σ_{i∈c} (x − K)²`` (C rows), ``Σ_i w_i (x − K)``, the NaN/Inf count, then the rows
    merged by maximum (:data:`MOMENT_MAXIMA`): K, −min, max.  NaN/Inf values are counted;
    their columns' sums are meaningless (the caller refuses them).  Memory: the output (and,
    for a CSR block, C × p_b counts).
    """
    raise TypeError(f"moment_sums: no implementation for {type(xb).__name__}")


@numba.njit(nogil=True, cache=True)
def _dense_moment_kernel(xb, codes, w, has_w, K, out, C):  # pragma: no cover - numba
    """One sweep per tile of columns; no fast-math: a NaN/Inf makes its column's sum of
    squares non-finite, which flags it (the caller counts exactly)."""
    n, p = xb.shape
    for j0 in range(0, p, _TILE):
        width = min(p, j0 + _TILE) - j0
        k = K[j0 : j0 + width]
        lo = out[2 * C + 3, j0 : j0 + width]
        hi = out[2 * C + 4, j0 : j0 + width]
        d = out[2 * C, j0 : j0 + width]
        for i in range(n):
            row = xb[i, j0 : j0 + width]
            c = codes[i]
            s = out[c, j0 : j0 + width]
            q = out[C + c, j0 : j0 + width]
            for t in range(width):
                v = np.float64(row[t])
                e = v - k[t]
                s[t] += e
                q[t] += e * e
                lo[t] = -v if -v > lo[t] else lo[t]
                hi[t] = v if v > hi[t] else hi[t]
            if has_w:
                wi = w[i]
                for t in range(width):
                    d[t] += wi * (np.float64(row[t]) - k[t])


def _moment_out(n_classes: int, p_b: int) -> np.ndarray:
    out = np.zeros((moment_rows(n_classes), p_b))
    out[-2:] = -np.inf
    return out


def _weights(weights: np.ndarray | None, n_b: int) -> tuple[np.ndarray, bool]:
    if weights is None:
        return np.zeros(n_b), False
    return np.ascontiguousarray(weights, dtype=np.float64), True


@moment_sums.register
def _(xb: np.ndarray, codes, weights=None, shift=None, *, n_classes=1):
    xb = np.ascontiguousarray(xb)
    if xb.dtype.kind not in "fiub":
        xb = xb.astype(np.float64)
    C = int(n_classes)
    K = np.asarray(xb[0] if shift is None else shift, dtype=np.float64)
    out = _moment_out(C, xb.shape[1])
    out[2 * C + 2] = K
    w, has_w = _weights(weights, xb.shape[0])
    _dense_moment_kernel(xb, np.asarray(codes, np.int64), w, has_w, K, out, C)
    flagged = np.flatnonzero(~np.isfinite(out[C : 2 * C].sum(axis=0)))
    if flagged.size:  # rare: count the NaN/Inf values of the flagged columns exactly
        out[2 * C + 1, flagged] = (~np.isfinite(xb[:, flagged])).sum(axis=0)
    return out


@numba.njit(nogil=True, cache=True)
def _csr_moment_kernel(
    indptr, indices, data, codes, order, w, has_w, K, out, cnt, C
):  # pragma: no cover
    """The stored values of each row, taken in ``order``, into its class's sums; the implicit
    zeros are added afterwards from the counts (``cnt``: stored values per class and column)."""
    wnz = np.zeros(K.size)
    for i in order:
        c = codes[i]
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            v = np.float64(data[k])
            if -v > out[2 * C + 3, j]:  # a NaN is never an extreme (as in the dense kernel)
                out[2 * C + 3, j] = -v
            if v > out[2 * C + 4, j]:
                out[2 * C + 4, j] = v
            if not np.isfinite(v):
                out[2 * C + 1, j] += 1.0
                continue
            e = v - K[j]
            out[c, j] += e
            out[C + c, j] += e * e
            cnt[c, j] += 1.0
            if has_w:
                out[2 * C, j] += w[i] * e
                wnz[j] += w[i]
    return wnz


def _row_order(codes: np.ndarray, C: int, has_w: bool) -> np.ndarray:
    """The order in which the CSR kernel takes a block's rows: class by class when there are
    several classes, so that only one class's accumulators (3 rows of p_b) are scattered into
    at a time and stay in cache — with 10 classes and 2·10⁴ features the scattered rows
    otherwise span 5 MB and the sweep runs 2.5× slower.  Each accumulator still sees its
    rows in the original order (the sort is stable), so the sums are unchanged to the bit;
    the response-weighted row, which mixes classes, keeps the row order."""
    if C > 1 and not has_w:
        return np.argsort(codes, kind="stable")
    return np.arange(codes.size)


def _csr(xb: Any) -> Any:
    """A CSR block in canonical form (duplicates summed, as densifying would)."""
    if not xb.has_canonical_format:
        xb = xb.copy()
        xb.sum_duplicates()
    return xb


def _csr_moment_sums(xb, codes, weights=None, shift=None, *, n_classes=1):
    xb = _csr(xb)
    C = int(n_classes)
    n_b, p_b = xb.shape
    first = xb[:1].toarray() if shift is None else shift
    K = np.asarray(first, dtype=np.float64).reshape(-1)
    codes = np.asarray(codes, np.int64)
    out = _moment_out(C, p_b)
    out[2 * C + 2] = K
    cnt = np.zeros((C, p_b))
    w, has_w = _weights(weights, n_b)
    order = _row_order(codes, C, has_w)
    wnz = _csr_moment_kernel(xb.indptr, xb.indices, xb.data, codes, order, w, has_w, K, out, cnt, C)
    zeros = np.bincount(codes, minlength=C)[:C, None] - cnt  # implicit zeros per class
    out[:C] -= zeros * K
    out[C : 2 * C] += zeros * (K * K)
    if has_w:  # Σ over the implicit zeros of w_i (0 − K)
        out[2 * C] -= (w.sum() - wnz) * K
    some_zero = zeros.sum(axis=0) > 0
    out[2 * C + 3 :, some_zero] = np.maximum(out[2 * C + 3 :, some_zero], 0.0)
    return out


# ------------------------------------------------------ many subsets of the rows at once
#: bytes of the float64 copy of a dense block's columns one product of
#: :func:`membership_sums` reads (its columns are taken in tiles of this size)
MEMBERSHIP_TILE_BYTES = 16 * 2**20


def membership_rows(
    n_variants: int, n_classes: int, weighted: bool = True, n_weights: int | None = None
) -> int:
    """Rows of :func:`membership_sums` for V variants of C classes: 2·V·C + W + 4 with W
    weight columns (W = ``n_weights``, default V: for one variant the layout of
    :func:`moment_sums`), 2·V·C + 4 without weights."""
    w = (n_variants if n_weights is None else int(n_weights)) if weighted else 0
    return 2 * n_variants * n_classes + w + 4


def membership_matrix(member: np.ndarray, n_classes: int) -> np.ndarray:
    """The 0/1 membership matrix M of a block's rows: M[v·C + c, i] = 1 where row i is in
    variant v with class c.

    Parameters
    ----------
    member : int ndarray (n_b, V), the class of each row in each variant, −1 where the row
        is not in it
    n_classes : int, C

    Returns
    -------
    ndarray (V·C, n_b), float64.  Memory: the result.
    """
    member = np.asarray(member, np.int64).reshape(len(member), -1)
    n_b, V = member.shape
    M = np.zeros((V * n_classes, n_b))
    i, v = np.nonzero(member >= 0)
    M[v * n_classes + member[i, v], i] = 1.0
    return M


@functools.singledispatch
def membership_sums(
    xb: Any,
    member: np.ndarray,
    weights: np.ndarray | None = None,
    shift: np.ndarray | None = None,
    *,
    n_classes: int = 1,
) -> np.ndarray:
    """:func:`moment_sums` of many subsets of one block's rows at once, as matrix products.

    Variant v (a resample, a permutation of the labels) holds some of the rows, each in a
    class; with M the :func:`membership_matrix` and E = X_b − K the shifted block, every
    variant's class-wise sums are ``M E`` and its sums of squares ``M (E∘E)`` — one BLAS
    product each (a CSR block: ``Eᵀ Mᵀ`` through its non-zeros, the implicit zeros added
    from their counts, as :func:`moment_sums` does).  The work is 4·V·C·n_b·p_b flop
    instead of V sweeps of the block.

    Parameters
    ----------
    xb : ndarray or scipy.sparse CSR matrix (n_b, p_b), any real dtype
    member : int ndarray (n_b, V), the class of each row in each variant, −1 where absent
        (rows are distinct within a variant)
    weights : ndarray (n_b, W) or None, row weights (a centred response, 0 where a row is
        absent): W columns of weighted sums, usually one per variant (W = V), or several
        per variant (SparseHSIC's centred Δ of each resample)
    shift : ndarray (p_b,) or None, the reference K (None: the block's first row)
    n_classes : int, C

    Returns
    -------
    ndarray (:func:`membership_rows`, p_b), float64 — rows ``Σ_{i∈v,c} (x − K)`` (row
    v·C + c), ``Σ_{i∈v,c} (x − K)²`` (V·C rows), ``Σ_i w_iw (x − K)`` (W rows, only with
    weights), the NaN/Inf count, then the rows merged by maximum (:data:`MOMENT_MAXIMA`): K, −min,
    max.  Memory: the output, M (V·C × n_b) and a float64 copy of at most
    :data:`MEMBERSHIP_TILE_BYTES` of the block (a CSR block: two copies of its values).
    """
    raise TypeError(f"membership_sums: no implementation for {type(xb).__name__}")


def _membership_out(xb: Any, member, n_classes: int, shift, weights) -> tuple:
    """The output, M, its sizes and the shift of :func:`membership_sums`."""
    n_b, p_b = xb.shape
    V = np.asarray(member).reshape(n_b, -1).shape[1]
    first = _dense_rows_of(xb[:1]) if shift is None else shift
    K = np.asarray(first, dtype=np.float64).reshape(-1)
    W = None if weights is None else np.asarray(weights).reshape(n_b, -1).shape[1]
    out = np.zeros((membership_rows(V, n_classes, weights is not None, W), p_b))
    out[-3] = K
    return out, membership_matrix(member, n_classes), V, K


def _dense_rows_of(rows: Any) -> np.ndarray:
    return rows.toarray() if scipy.sparse.issparse(rows) else np.asarray(rows)


def by_class(member: np.ndarray, n_classes: int) -> list | None:
    """Each class's rows and their membership, when every row keeps one class in every
    variant that holds it (resamples of fixed labels; not permutations of them).

    Then the class-c rows of M (:func:`membership_matrix`) are zero outside the rows of
    class c, and ``M E`` is C products of V × n_c by n_c × p_b: 1/C of its work.

    Returns
    -------
    list of C pairs (int ndarray (n_c,): the rows of class c, float64 ndarray (V, n_c):
    1 where the row is in variant v), or None (other memberships, or one class).
    """
    m = np.asarray(member, np.int64).reshape(len(member), -1)
    if n_classes < 2 or m.shape[0] == 0:
        return None
    cls = m.max(axis=1)  # a row's class (−1: in no variant)
    if ((m >= 0) & (m != cls[:, None])).any():
        return None
    return [
        (rows, (m[rows] >= 0).T.astype(np.float64))
        for rows in (np.flatnonzero(cls == c) for c in range(n_classes))
    ]


def _class_products(out: np.ndarray, E: np.ndarray, parts: list, cols: slice, at: int) -> None:
    """Rows ``at + v·C + c`` of ``out[:, cols]``: the membership products of E, class by
    class (:func:`by_class`)."""
    C = len(parts)
    for c, (rows, Mc) in enumerate(parts):
        out[at + c : at + C * Mc.shape[0] : C, cols] = Mc @ E[rows]


@membership_sums.register
def _(xb: np.ndarray, member, weights=None, shift=None, *, n_classes=1):
    out, M, V, K = _membership_out(xb, member, n_classes, shift, weights)
    VC = M.shape[0]
    A = M if weights is None else np.vstack([M, np.asarray(weights, np.float64).T])
    parts = by_class(member, n_classes) if weights is None else None
    n_b, p_b = xb.shape
    step = max(256, int(MEMBERSHIP_TILE_BYTES // (8 * max(n_b, 1))))
    for j0 in range(0, p_b, step):
        j1 = min(p_b, j0 + step)
        # a NaN/Inf spoils only its column's sums, which the screen flags and the fit refuses
        with np.errstate(invalid="ignore", over="ignore"):
            E = np.subtract(xb[:, j0:j1], K[j0:j1], dtype=np.float64)
            if parts is not None:  # fixed labels: class by class, 1/C of the products
                _class_products(out, E, parts, slice(j0, j1), 0)
                np.square(E, out=E)
                _class_products(out, E, parts, slice(j0, j1), VC)
                continue
            SA = A @ E  # every variant's class sums (and weighted sums): one BLAS product
            out[:VC, j0:j1] = SA[:VC]
            if weights is not None:
                out[2 * VC : 2 * VC + SA.shape[0] - VC, j0:j1] = SA[VC:]
            np.square(E, out=E)
            out[VC : 2 * VC, j0:j1] = M @ E
    if n_b == 0:
        out[-2:] = -np.inf  # no extremes: the identity of the maximum merge
        return out
    lo, hi = xb.min(axis=0), xb.max(axis=0)  # a NaN propagates: it flags its column
    out[-2], out[-1] = -lo, hi
    flagged = np.flatnonzero(~(np.isfinite(lo) & np.isfinite(hi)))
    if flagged.size:  # rare: count the NaN/Inf values of the flagged columns exactly
        out[-4, flagged] = (~np.isfinite(xb[:, flagged])).sum(axis=0)
        out[-2:, flagged] = screen_sums(xb[:, flagged])[1:]  # a NaN is never an extreme
    return out


def _csr_membership_sums(xb, member, weights=None, shift=None, *, n_classes=1):
    xb = _csr(xb)
    out, M, V, K = _membership_out(xb, member, n_classes, shift, weights)
    VC = M.shape[0]
    R = M.T if weights is None else np.hstack([M.T, np.asarray(weights, np.float64)])
    R = np.ascontiguousarray(R)
    e = np.asarray(xb.data, np.float64) - K[xb.indices]  # the stored values, shifted
    E = scipy.sparse.csr_matrix((e, xb.indices, xb.indptr), shape=xb.shape)
    P = scipy.sparse.csr_matrix((np.ones_like(e), xb.indices, xb.indptr), shape=xb.shape)
    SA = np.asarray(E.T @ R).T
    stored = np.asarray(P.T @ R).T  # stored values per variant and class (and their Σ w)
    E.data **= 2
    Q = np.asarray(E.T @ R[:, :VC]).T
    scr = screen_sums(xb)  # NaN/Inf count, −min, max, the implicit zeros counted
    out[-4], out[-2:] = scr[0], scr[1:]
    zeros = M.sum(axis=1)[:, None] - stored[:VC]  # implicit zeros: each adds (0 − K)
    out[:VC] = SA[:VC] - zeros * K
    out[VC : 2 * VC] = Q + zeros * (K * K)
    if weights is not None:
        w_zero = np.asarray(weights, np.float64).sum(axis=0)[:, None] - stored[VC:]
        out[2 * VC : 2 * VC + w_zero.shape[0]] = SA[VC:] - w_zero * K
    return out


@functools.singledispatch
def screen_sums(xb: Any) -> np.ndarray:
    """The screen of one block's rows, mergeable over blocks.

    Parameters
    ----------
    xb : ndarray or scipy.sparse CSR matrix (n_b, p_b), any real dtype

    Returns
    -------
    ndarray (3, p_b), float64: the NaN/Inf count, then (merged by maximum,
    :data:`SCREEN_MAXIMA`) −min and max of every column (a NaN is never one) — for CSR
    the implicit zeros count when a column has fewer stored values than rows.
    """
    raise TypeError(f"screen_sums: no implementation for {type(xb).__name__}")


@numba.njit(nogil=True, cache=True)
def _dense_screen_kernel(xb, out):  # pragma: no cover - numba
    """−min and max per column, and a sum that a NaN/Inf makes non-finite (row 0, a flag)."""
    n, p = xb.shape
    for j0 in range(0, p, _TILE):
        width = min(p, j0 + _TILE) - j0
        s = out[0, j0 : j0 + width]
        lo = out[1, j0 : j0 + width]
        hi = out[2, j0 : j0 + width]
        for i in range(n):
            row = xb[i, j0 : j0 + width]
            for t in range(width):  # selects, not branches: the loop vectorises
                v = np.float64(row[t])
                s[t] += v * 0.0  # 0 for a finite value, NaN for NaN/Inf
                lo[t] = -v if -v > lo[t] else lo[t]
                hi[t] = v if v > hi[t] else hi[t]


@screen_sums.register
def _(xb: np.ndarray) -> np.ndarray:
    xb = np.ascontiguousarray(xb)
    if xb.dtype.kind not in "fiub":
        xb = xb.astype(np.float64)
    out = np.zeros((3, xb.shape[1]))
    out[1:] = -np.inf
    _dense_screen_kernel(xb, out)
    flagged = np.flatnonzero(~np.isfinite(out[0]))
    out[0] = 0.0
    if flagged.size:  # rare: count the NaN/Inf values of the flagged columns exactly
        out[0, flagged] = (~np.isfinite(xb[:, flagged])).sum(axis=0)
    return out


def _csr_screen_sums(xb) -> np.ndarray:
    xb = _csr(xb)
    n_b, p_b = xb.shape
    m = _csr_moment_sums(xb, np.zeros(n_b, np.int64), None, np.zeros(p_b))
    return m[[3, 5, 6]]


def column_screen(X: da.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The screen of X in any layout: per column the NaN/Inf count, the minimum and the
    maximum (a NaN is never one), from mergeable partials over its sample blocks.

    Parameters
    ----------
    X : dask array (n, p), any chunking, NumPy or CSR blocks

    Returns
    -------
    (bad, lo, hi), ndarrays (p,).  One read of X — a preprocessing pass, not one of a
    fit's passes over X (as :func:`column_std`).  Memory: a few (3, p_j) partials per task.
    """
    lazy = sum_over_row_blocks(screen_sums, X, shape=(3,), maxima=SCREEN_MAXIMA)
    (s,) = compute_blocks(lazy)
    return s[0], -s[1], s[2]


@functools.singledispatch
def xt_dot(xb: Any, M: np.ndarray) -> np.ndarray:
    """``(X_bᵀ M)ᵀ`` for one block: the partial product over its rows, mergeable over blocks.

    Parameters
    ----------
    xb : ndarray or scipy.sparse CSR matrix (n_b, p_b)
    M : ndarray (n_b,) or (n_b, r), the block's rows of M

    Returns
    -------
    ndarray (p_b,) or (r, p_b), float64.  Memory: the output (a CSR block is multiplied
    through its non-zeros).
    """
    raise TypeError(f"xt_dot: no implementation for {type(xb).__name__}")


@xt_dot.register
def _(xb: np.ndarray, M: np.ndarray) -> np.ndarray:
    M = np.asarray(M, dtype=np.float64)
    return np.ascontiguousarray(M.T @ xb, dtype=np.float64)


def _csr_xt_dot(xb, M: np.ndarray) -> np.ndarray:
    M = np.asarray(M, dtype=np.float64)
    return np.ascontiguousarray(np.asarray(_csr(xb).T @ M).T, dtype=np.float64)


for _kind in (scipy.sparse.csr_matrix, scipy.sparse.csr_array):
    moment_sums.register(_kind, _csr_moment_sums)
    membership_sums.register(_kind, _csr_membership_sums)
    screen_sums.register(_kind, _csr_screen_sums)
    xt_dot.register(_kind, _csr_xt_dot)
