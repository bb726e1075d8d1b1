"""Fused kernels on absolute differences between samples, over one feature block.

Local-learning methods (Logo, RELIEF-like weighting) need two O(N²·J_b) sweeps of a
feature block x (N samples × J_b features):

* the weighted Manhattan distances ``D_ni = Σ_j w_j |x_nj − x_ij|`` (N × N, symmetric);
* the Π-weighted transform ``z_nj = Σ_i Π_ni |x_nj − x_ij|`` for an N × N matrix Π
  (N × J_b, the shape of the block) — Logo's expected margin vectors z̄_n (eq. 3).

Both are fused numba loops: no N × N × J_b temporary is ever formed, arithmetic is in
float64 whatever the input dtype, and the loops release the GIL so Dask threads run
blocks in parallel.  ``fastmath`` lets LLVM vectorise the inner reductions; the result is
deterministic for a given machine.  :func:`manhattan_over_blocks` and
:func:`absdiff_transform` apply them to a dask array in feature blocks.
"""

from __future__ import annotations

import dask.array as da
import numba
import numpy as np

from fsdask.linalg.reductions import map_features, sum_over_blocks

#: features per cache tile in the distance kernel
_TILE = 512


@numba.njit(nogil=True, fastmath=True, cache=True)
def _manhattan_sym(x, w, tile):  # pragma: no cover - compiled
    N, J = x.shape
    D = np.zeros((N, N))
    # each tile is first copied into a contiguous float64 buffer: the inner loop then runs
    # over unit-stride float64 rows of one type, which LLVM vectorises (converting x's
    # float32 in the inner loop, over rows J apart, kept it scalar — about 8× slower)
    buf = np.empty((N, tile))
    for j0 in range(0, J, tile):
        m = min(J, j0 + tile) - j0
        for n in range(N):
            for j in range(m):
                buf[n, j] = np.float64(x[n, j0 + j])
        wt = w[j0 : j0 + m]
        for n in range(N):
            bn = buf[n, :m]
            i = n + 1
            while i + 3 < N:  # four pairs at a time share the loads of row n and of w
                b0, b1, b2, b3 = buf[i, :m], buf[i + 1, :m], buf[i + 2, :m], buf[i + 3, :m]
                s0 = s1 = s2 = s3 = 0.0
                for j in range(m):
                    a, wj = bn[j], wt[j]
                    s0 += wj * abs(a - b0[j])
                    s1 += wj * abs(a - b1[j])
                    s2 += wj * abs(a - b2[j])
                    s3 += wj * abs(a - b3[j])
                D[n, i] += s0
                D[n, i + 1] += s1
                D[n, i + 2] += s2
                D[n, i + 3] += s3
                i += 4
            for ir in range(i, N):
                bi = buf[ir, :m]
                s = 0.0
                for j in range(m):
                    s += wt[j] * abs(bn[j] - bi[j])
                D[n, ir] += s
    for n in range(N):
        for i in range(n + 1, N):
            D[i, n] = D[n, i]
    return D


@numba.njit(nogil=True, fastmath=True, cache=True)
def _pi_absdiff_t(xt, Pi):  # pragma: no cover - compiled
    J, N = xt.shape
    Z = np.empty((J, N))
    for j in range(J):
        for n in range(N):
            xn = np.float64(xt[j, n])
            s = 0.0
            for i in range(N):
                s += Pi[n, i] * abs(xn - np.float64(xt[j, i]))
            Z[j, n] = s
    return Z


@numba.njit(nogil=True, fastmath=True, cache=True)
def _pi_absdiff_csr(x, indptr, indices, data):  # pragma: no cover - compiled
    # sample-major: for each kept pair (n, i), one unit-stride sweep over the block's
    # features of rows n and i — vectorised, where a feature-major loop gathers x_i
    N, J = x.shape
    Z = np.zeros((N, J))
    for n in range(N):
        for k in range(indptr[n], indptr[n + 1]):
            i = indices[k]
            c = data[k]
            for j in range(J):
                Z[n, j] += c * abs(np.float64(x[n, j]) - np.float64(x[i, j]))
    return Z


@numba.njit(nogil=True, fastmath=True, cache=True)
def _weighted_absdiff_sum_csr(xt, indptr, indices, data):  # pragma: no cover - compiled
    J, N = xt.shape
    g = np.empty(J)
    for j in range(J):
        acc = 0.0
        for n in range(N):
            xn = np.float64(xt[j, n])
            for k in range(indptr[n], indptr[n + 1]):
                acc += data[k] * abs(xn - np.float64(xt[j, indices[k]]))
        g[j] = acc
    return g


@numba.njit(nogil=True, fastmath=True, cache=True)
def _absdiff_sum_upper(xt, S):  # pragma: no cover - compiled
    # Σ_{n<i} S_ni |x_n − x_i| per feature: half the pairs of the full double sum.  The
    # inner loop runs over slices (length N − n − 1) rather than range(n + 1, N): with the
    # offset range LLVM did not vectorise it
    J, N = xt.shape
    g = np.empty(J)
    for j in range(J):
        acc = 0.0
        for n in range(N - 1):
            xn = np.float64(xt[j, n])
            xr = xt[j, n + 1 :]
            Sr = S[n, n + 1 :]
            s = 0.0
            for k in range(xr.shape[0]):
                s += Sr[k] * abs(xn - np.float64(xr[k]))
            acc += s
        g[j] = acc
    return g


@numba.njit(nogil=True, fastmath=True, cache=True)
def _absdiff_sum_upper_f32(xt, S):  # pragma: no cover - compiled
    # _absdiff_sum_upper in float32 (twice the SIMD lanes); each row's partial sum is
    # carried on in float64.  Four features at a time share each load of S's row.
    J, N = xt.shape
    g = np.empty(J)
    j = 0
    while j + 3 < J:
        a0 = a1 = a2 = a3 = 0.0
        for n in range(N - 1):
            Sr = S[n, n + 1 :]
            r0, r1 = xt[j, n + 1 :], xt[j + 1, n + 1 :]
            r2, r3 = xt[j + 2, n + 1 :], xt[j + 3, n + 1 :]
            x0, x1, x2, x3 = xt[j, n], xt[j + 1, n], xt[j + 2, n], xt[j + 3, n]
            s0 = s1 = s2 = s3 = np.float32(0.0)
            for k in range(Sr.shape[0]):
                c = Sr[k]
                s0 += c * abs(x0 - r0[k])
                s1 += c * abs(x1 - r1[k])
                s2 += c * abs(x2 - r2[k])
                s3 += c * abs(x3 - r3[k])
            a0 += np.float64(s0)
            a1 += np.float64(s1)
            a2 += np.float64(s2)
            a3 += np.float64(s3)
        g[j], g[j + 1], g[j + 2], g[j + 3] = a0, a1, a2, a3
        j += 4
    for jr in range(j, J):  # the last J mod 4 features
        acc = 0.0
        for n in range(N - 1):
            Sr, r0, x0 = S[n, n + 1 :], xt[jr, n + 1 :], xt[jr, n]
            s0 = np.float32(0.0)
            for k in range(Sr.shape[0]):
                s0 += Sr[k] * abs(x0 - r0[k])
            acc += np.float64(s0)
        g[jr] = acc
    return g


@numba.njit(nogil=True, fastmath=True, cache=True)
def _abs_deviation_dot_t(xt, r):  # pragma: no cover - compiled
    J, N = xt.shape
    out = np.empty(J)
    for j in range(J):
        m = 0.0
        for n in range(N):
            m += np.float64(xt[j, n])
        m /= N
        acc = 0.0
        for n in range(N):
            acc += r[n] * abs(np.float64(xt[j, n]) - m)
        out[j] = acc
    return out


#: entries of Π with |Π_ni| ≤ this are skipped (Π holds differences of probabilities)
DROP_BELOW = 1e-13
#: below this fraction of non-zeros the sparse (CSR) kernels are used
SPARSE_DENSITY = 0.1


def _csr(Pi: np.ndarray, drop_below: float = DROP_BELOW):
    """Row-compressed non-negligible entries of Π: (indptr, indices, data), or None when
    they are not sparse (at least ``SPARSE_DENSITY`` of Π: the dense kernels are faster)."""
    mask = np.abs(Pi) > drop_below
    if np.count_nonzero(mask) >= SPARSE_DENSITY * Pi.size:
        return None
    indptr = np.concatenate([[0], np.cumsum(mask.sum(axis=1))]).astype(np.int64)
    rows, cols = np.nonzero(mask)
    return indptr, cols.astype(np.int64), np.ascontiguousarray(Pi[rows, cols], dtype=np.float64)


def _feature_major(x: np.ndarray) -> np.ndarray:
    xt = np.ascontiguousarray(np.asarray(x).T)
    return xt if xt.dtype in (np.float32, np.float64) else xt.astype(np.float64)


def weighted_manhattan(x: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """``D_ni = Σ_j w_j |x_nj − x_ij|`` for one block x.

    Parameters
    ----------
    x : ndarray (N, J_b), float32 or float64 (others are converted)
    w : ndarray (J_b,) or None (ones)

    Returns
    -------
    ndarray (N, N), float64, symmetric.

    Cost: O(N²·J_b / 2) in one fused loop; memory N² · 8 bytes and an N × ``_TILE`` float64
    tile, no N × N × J_b temporary.
    """
    x = np.ascontiguousarray(x)
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float64)
    w = np.ones(x.shape[1]) if w is None else np.ascontiguousarray(w, dtype=np.float64)
    if x.shape[1] == 0:
        return np.zeros((x.shape[0], x.shape[0]))
    return _manhattan_sym(x, w, _TILE)


def pi_weighted_absdiff(
    x: np.ndarray, Pi: np.ndarray, dtype=np.float64, drop_below: float = DROP_BELOW
) -> np.ndarray:
    """``z_nj = Σ_i Π_ni |x_nj − x_ij|`` for one block x.

    Entries with ``|Π_ni| ≤ drop_below`` are skipped; when most are (a narrow kernel, or
    the first iterations of Logo where one neighbour dominates), a CSR loop does only the
    remaining pairs.

    Parameters
    ----------
    x : ndarray (N, J_b)
    Pi : ndarray (N, N)
    dtype : dtype of the result (arithmetic is float64)
    drop_below : float

    Returns
    -------
    ndarray (N, J_b) in ``dtype``.

    Cost: O(N²·J_b) (O(nnz(Π)·J_b) on the sparse path); memory: the result and (dense
    path) a feature-major copy of x.
    """
    x = np.asarray(x)
    Pi = np.ascontiguousarray(Pi, dtype=np.float64)
    if x.shape[1] == 0:
        return np.zeros((Pi.shape[0], 0), dtype=dtype)
    sparse = _csr(Pi, drop_below)
    if sparse is not None:
        if x.dtype not in (np.float32, np.float64):
            x = x.astype(np.float64)
        return _pi_absdiff_csr(x, *sparse).astype(dtype, copy=False)
    return _pi_absdiff_t(_feature_major(x), Pi).T.astype(dtype, copy=False)


def weighted_absdiff_sum(
    x: np.ndarray, C: np.ndarray, drop_below: float = DROP_BELOW
) -> np.ndarray:
    """``g_j = Σ_n Σ_i C_ni |x_nj − x_ij|`` for one block x.

    E.g. ``C = diag(s) Π`` gives ``Σ_n s_n z̄_n(j)`` (Logo's gradient) without forming z̄.

    Parameters
    ----------
    x : ndarray (N, J_b)
    C : ndarray (N, N)
    drop_below : float, entries of C with ``|C_ni| ≤ drop_below`` are skipped

    Returns
    -------
    ndarray (J_b,), float64.

    Cost: O(N²·J_b / 2) (O(nnz(C)·J_b) on the sparse path); memory J_b values, C + Cᵀ and
    a feature-major copy of x.
    """
    xt = _feature_major(x)
    if xt.shape[0] == 0:
        return np.zeros(0)
    C = np.asarray(C, dtype=np.float64)
    sparse = _csr(C, drop_below)
    if sparse is not None:
        return _weighted_absdiff_sum_csr(xt, *sparse)
    # |x_n − x_i| is symmetric: Σ_{n,i} C_ni |·| = Σ_{n<i} (C_ni + C_in) |·|
    return _absdiff_sum_upper(xt, np.ascontiguousarray(C + C.T))


def weighted_absdiff_sum_bounded(
    x: np.ndarray, C: np.ndarray, drop_below: float = DROP_BELOW
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`weighted_absdiff_sum` and a bound on the error of each value.

    For float32 x and a dense C the sum runs in float32 arithmetic (twice the SIMD lanes),
    and ``|error_j| ≤ γ · Σ_n R_n |x_nj − μ_j|`` with ``R_n = Σ_i |S_ni|``, ``S = C + Cᵀ``,
    μ_j the column mean and ``γ = (N + 4)·2⁻²⁴`` (rounding S to float32, the difference, the
    product, then a float32 sum of at most N − 1 terms in any order — each at most 2⁻²⁴
    relative — on ``Σ_{n<i} |S_ni| |x_nj − x_ij| ≤ Σ_n R_n |x_nj − μ_j|``).  Otherwise the
    float64 kernels, with a bound of 0 (their rounding, ~N·2⁻⁵³ relative, is neglected).

    Returns
    -------
    (g, err) : ndarrays (J_b,), float64.  Cost: half of :func:`weighted_absdiff_sum`'s
    float64 sweep, plus O(N·J_b) for the bound.
    """
    x = np.asarray(x)
    C = np.asarray(C, dtype=np.float64)
    if x.dtype != np.float32 or x.shape[1] == 0 or _csr(C, drop_below) is not None:
        return weighted_absdiff_sum(x, C, drop_below), np.zeros(x.shape[1])
    S = C + C.T
    if not np.abs(S).max() < 1e30:  # far from float32's range only
        return weighted_absdiff_sum(x, C, drop_below), np.zeros(x.shape[1])
    xt = _feature_major(x)
    g = _absdiff_sum_upper_f32(xt, np.ascontiguousarray(S, dtype=np.float32))
    N = x.shape[0]
    gamma = (N + 4) * 2.0**-24 * 1.001
    # + an absolute term for products that underflow float32 (2⁻¹⁴⁹ each, N² of them)
    err = gamma * _abs_deviation_dot_t(xt, np.abs(S).sum(axis=1)) + N * N * 2.0**-140
    return g, err


def abs_deviation_dot(x: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``Σ_n r_n |x_nj − μ_j|`` for every column j of x (N × J_b), μ_j the column mean.

    With ``|x_nj − x_ij| ≤ |x_nj − μ_j| + |x_ij − μ_j|`` it bounds ``½ Σ_{n,i} |A_ni| |x_nj − x_ij|``
    in O(N) per feature when ``r_n = Σ_i |A_ni|`` for a symmetric A.  Float64, one fused loop.
    """
    xt = _feature_major(x)
    if xt.shape[0] == 0:
        return np.zeros(0)
    return _abs_deviation_dot_t(xt, np.ascontiguousarray(r, dtype=np.float64))


def manhattan_over_blocks(
    X: da.Array, w: np.ndarray | da.Array | None = None, split_every: int | None = 8
) -> da.Array:
    """Weighted Manhattan distances of X, tree-summed over feature blocks (one pass).

    Parameters
    ----------
    X : dask array (N, J), chunked (all samples, feature block)
    w : ndarray or dask array (J,), or None (ones)
    split_every : int, terms per tree-sum node

    Returns
    -------
    dask array (N, N), lazy.  Memory: per task one block and ``split_every`` N × N sums.
    """
    n = X.shape[0]
    if w is None:
        return sum_over_blocks(
            lambda xb: weighted_manhattan(xb), X, shape=(n, n), split_every=split_every
        )
    wd = (
        w
        if isinstance(w, da.Array)
        else da.from_array(np.asarray(w, dtype=np.float64), chunks=(X.chunks[1],))
    )
    return sum_over_blocks(
        lambda xb, wb: weighted_manhattan(xb, wb), X, wd, shape=(n, n), split_every=split_every
    )


def absdiff_transform(X: da.Array, Pi: np.ndarray, dtype=None) -> da.Array:
    """``Σ_i Π_ni |x_nj − x_ij|`` for every column of X (one pass).

    Parameters
    ----------
    X : dask array (N, J), chunked (all samples, feature block)
    Pi : ndarray (N, N)
    dtype : dtype of the result (default: X's, at least float32)

    Returns
    -------
    dask array (N, J), lazy, chunked like X (one block per block of X) — as large as X:
    persist it only when the cluster's memory holds it.
    """
    dtype = np.dtype(dtype or np.result_type(X.dtype, np.float32))
    Pi = np.asarray(Pi, dtype=np.float64)
    return map_features(
        lambda xb: pi_weighted_absdiff(xb, Pi, dtype), X, out_rows=X.shape[0], dtype=dtype
    )
