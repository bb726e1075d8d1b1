"""Streaming maps and reductions over the feature blocks of X (sample, feature).

X is chunked as (all samples, feature block).  Two shapes of work cover most methods:

* a **per-feature map**: ``f(X_b) -> (..., p_b)`` — every per-feature statistic (filters,
  normalisation, margins) is one of these, with no communication between blocks;
* a **reduction over blocks**: ``Σ_b f(X_b)`` of a small array (q×q Gram, N×N distances,
  class sums) — done as a tree (``split_every``) so no single task holds more than a few
  partial results.
"""

from __future__ import annotations

import math
import uuid
from typing import Any, Callable, Sequence

import dask.array as da
import numba
import numpy as np

from fsdask._blocks import compute_blocks  # noqa: F401  (re-exported: the methods import it here)
from fsdask.linalg.threads import cores, parallel_map

#: up to this many columns of C, ``Cᵀ X_b`` and the range run as one fused numba sweep
_FUSED_MAX_R = 8
#: features per cache tile of the fused sweep
_FUSED_TILE = 1024


def _whole(x: Any) -> Any:
    """The block itself: ``blockwise(concatenate=False)`` hands a contracted axis as a list."""
    while isinstance(x, list):
        if len(x) != 1:
            raise ValueError("expected a single chunk along the contracted (sample) axis")
        x = x[0]
    return np.ascontiguousarray(x) if isinstance(x, np.ndarray) else x


def blockwise_whole(
    func: Callable[..., np.ndarray], out_ind: str, *arg_pairs: Any, **kwargs: Any
) -> da.Array:
    """``da.blockwise`` for inputs with ONE chunk along every contracted axis (samples).

    ``concatenate=True`` would call ``concatenate3`` on a one-element list — a full copy of
    every block; here the block is handed to ``func`` as it is.
    """

    def call(*blocks: Any, **kw: Any) -> np.ndarray:
        return func(*(_whole(b) for b in blocks), **kw)

    return da.blockwise(call, out_ind, *arg_pairs, concatenate=False, **kwargs)


def _fresh(prefix: str) -> str:
    """A unique key name for a transient graph layer.

    ``da.blockwise`` names its output by tokenizing the function, and a closure over the
    iteration's arrays is tokenized by cloudpickling it: ~10 ms per reduction, more than the
    reduction itself on a small X.  These layers are derived from X inside one fit and never
    name data (a checkpoint keys on X's own name), so they need no deterministic name.
    """
    return f"{prefix}-{uuid.uuid4().hex}"


def _check_blocks(X: da.Array) -> None:
    if len(X.chunks[0]) != 1:
        raise ValueError(
            "X must be chunked as (all samples, feature block); "
            "use fsdask._validation.as_feature_blocks(X)"
        )


def map_features(
    func: Callable[..., np.ndarray],
    X: da.Array,
    *args: da.Array,
    out_rows: int | None = None,
    dtype: Any = None,
    **kwargs: Any,
) -> da.Array:
    """Apply ``func(X_b, *args_b, **kwargs)`` to each feature block.

    Parameters
    ----------
    func : callable
        ``func(X_b, *args_b, **kwargs)`` on one block X_b (n × p_b) returns ``(p_b,)`` or
        ``(out_rows, p_b)``.
    X : dask array (n, p), chunked (all samples, feature block)
    *args : dask arrays (…, p)
        Aligned with X's feature blocks (whole along their other axes).
    out_rows : int or None
        Rows of each block's result; None for a vector.
    dtype : dtype of the result (default X's).
    **kwargs
        NumPy arrays and scalars passed whole to every block.

    Returns
    -------
    dask array (p,) or (out_rows, p), lazy, chunked like X's features.

    Memory: one block and its result per task; nothing crosses blocks.
    """
    _check_blocks(X)
    dtype = dtype or X.dtype
    if out_rows is None:
        ind = "j"
        new_axes: dict = {}
    else:
        ind = "rj"
        new_axes = {"r": out_rows}
    return blockwise_whole(
        func,
        ind,
        *_arg_pairs(X, args),
        new_axes=new_axes,
        dtype=dtype,
        name=_fresh("map-features"),
        **kwargs,
    )


def _arg_pairs(X: da.Array, args: Sequence[da.Array]) -> list:
    """``blockwise`` (array, index) pairs: X as ``ij``, then each (…, feature) argument chunked
    like X's feature blocks and whole along its other axes (``uvw…j``; scalars unindexed)."""
    pairs: list = [X, "ij"]
    for a in args:
        if a.ndim == 0:
            pairs += [a, None]
            continue
        a = a.rechunk({**{ax: -1 for ax in range(a.ndim - 1)}, a.ndim - 1: X.chunks[1]})
        pairs += [a, "uvw"[: a.ndim - 1] + "j"]
    return pairs


def sum_over_blocks(
    func: Callable[..., np.ndarray],
    X: da.Array,
    *args: da.Array,
    shape: Sequence[int],
    dtype: Any = np.float64,
    split_every: int | None = 8,
    **kwargs: Any,
) -> da.Array:
    """Tree-sum ``Σ_b func(X_b, *args_b, **kwargs)`` where each term has ``shape``.

    Parameters
    ----------
    func : callable
        ``func(X_b, *args_b, **kwargs)`` returns an array of ``shape``.
    X : dask array (n, p), chunked (all samples, feature block)
    *args : dask arrays (…, p)
        Aligned with X's feature blocks (e.g. a weight vector, or Z̄).
    shape : tuple of int
        Shape of every term and of the sum.
    dtype : dtype of the sum (float64).
    split_every : int
        Terms summed per tree node.

    Returns
    -------
    dask array of ``shape`` (one chunk), lazy.

    Memory: per task one block plus at most ``split_every`` partial sums of ``shape``.
    """
    _check_blocks(X)
    shape = tuple(int(s) for s in shape)
    letters = "abcdefgh"[: len(shape)]
    arg_pairs = _arg_pairs(X, args)

    def term(xb, *rest, **kw):
        out = np.asarray(func(xb, *rest, **kw), dtype=dtype)
        return out[None, ...]

    parts = blockwise_whole(
        term,
        "j" + letters,
        *arg_pairs,
        new_axes=dict(zip(letters, shape)),
        adjust_chunks={"j": 1},
        dtype=dtype,
        name=_fresh("sum-term"),
        **kwargs,
    )
    return parts.sum(axis=0, split_every=split_every)


def map_and_sum(
    func: Callable[..., tuple[np.ndarray, Sequence[np.ndarray]]],
    X: da.Array,
    *args: da.Array,
    shapes: Sequence[Sequence[int]],
    dtype: Any = np.float64,
    split_every: int | None = 8,
    **kwargs: Any,
) -> tuple[da.Array, list[da.Array]]:
    """One pass that yields a per-feature map *and* tree-summed block terms together.

    Computed together (``dask.compute(f, *sums)``) each block is read and ``func`` run once.

    Parameters
    ----------
    func : callable
        ``func(X_b, *args_b, **kwargs)`` returns ``(f_b, [s_1b, s_2b, …])`` with ``f_b`` of
        shape ``(p_b,)`` and ``s_ib`` of ``shapes[i]``.
    X : dask array (n, p), chunked (all samples, feature block)
    *args : dask arrays (…, p), aligned with X's feature blocks
    shapes : sequence of tuples, the shape of each summed term
    dtype, split_every : as in :func:`sum_over_blocks`

    Returns
    -------
    mapped : dask array (p,), lazy
    sums : list of dask arrays of ``shapes[i]``, lazy

    Memory: per task one block, its map and ``split_every`` partial sums of each shape.
    """
    _check_blocks(X)
    parts = blockwise_whole(
        lambda *a: func(*a, **kwargs),
        "j",
        *_arg_pairs(X, args),
        dtype=object,
        meta=np.empty((0,), dtype=object),
        name=_fresh("map-and-sum"),
    )
    mapped = da.blockwise(
        lambda t: np.asarray(t[0], dtype=dtype),
        "j",
        parts,
        "j",
        dtype=dtype,
        meta=np.empty((0,), dtype=dtype),
        name=_fresh("mapped"),
    )
    sums = []
    for i, shape in enumerate(shapes):
        shape = tuple(int(s) for s in shape)
        letters = "abcdefgh"[: len(shape)]
        term = da.blockwise(
            lambda t, i=i: np.asarray(t[1][i], dtype=dtype)[None],
            "j" + letters,
            parts,
            "j",
            new_axes=dict(zip(letters, shape)),
            adjust_chunks={"j": 1},
            dtype=dtype,
            meta=np.empty((0,) * (len(shape) + 1), dtype=dtype),
            name=_fresh("summed"),
        )
        sums.append(term.sum(axis=0, split_every=split_every))
    return mapped, sums


def feature_dot(X: da.Array, W: np.ndarray | da.Array) -> da.Array:
    """``X @ W`` as a sum over feature blocks.

    Parameters
    ----------
    X : dask array (n, p), chunked (all samples, feature block)
    W : ndarray or dask array (p, r)

    Returns
    -------
    dask array (n, r), lazy, one chunk.  Memory: a few n × r partial sums.
    """
    W = W if isinstance(W, da.Array) else da.from_array(np.asarray(W), chunks=(X.chunks[1], -1))
    r = W.shape[1]
    return sum_over_blocks(
        lambda xb, wb: xb @ wb.T,
        X,
        W.T,
        shape=(X.shape[0], r),
        dtype=np.result_type(X.dtype, W.dtype),
    )


def _ct_dot(xb: np.ndarray, Ct: np.ndarray, slab_bytes: int = 32 * 2**20) -> np.ndarray:
    """``Cᵀ X_b`` (r × p_b) in C's precision, as BLAS products in the (r × n)·(n × p_b)
    orientation (the faster one for a wide block, rather than ``(X_bᵀ C)ᵀ``) over slabs of samples,
    so a float32 block is cast to float64 ``slab_bytes`` at a time, never whole."""
    if xb.dtype == Ct.dtype:
        return Ct @ xb
    step = max(1, slab_bytes // (Ct.itemsize * max(1, xb.shape[1])))
    out = Ct[:, :step] @ xb[:step].astype(Ct.dtype)
    for s in range(step, xb.shape[0], step):
        out += Ct[:, s : s + step] @ xb[s : s + step].astype(Ct.dtype)
    return out


def sample_dot(X: da.Array, C: np.ndarray) -> da.Array:
    """``Cᵀ X`` as a per-feature map: each column of C weighs the samples.

    Parameters
    ----------
    X : dask array (n, p), chunked (all samples, feature block)
    C : ndarray (n, r), small, sent whole to every block

    Returns
    -------
    dask array (r, p), lazy, chunked like X's features; each chunk C-contiguous, so joining
    them on the client copies rows (no transposing copy of an r × p result).

    Memory: per task one block and its r × p_b product; a float32 block is promoted to C's
    precision in slabs of samples, never whole.
    """
    C = np.asarray(C)
    Ct = np.ascontiguousarray(C.T.astype(np.result_type(X.dtype, C.dtype)))
    return map_features(_ct_dot, X, out_rows=C.shape[1], dtype=Ct.dtype, Ct=Ct)


def row_dot(X: da.Array, C: np.ndarray) -> da.Array:
    """``Xᵀ C`` as a per-feature map: :func:`sample_dot` transposed.

    Parameters
    ----------
    X, C : as for :func:`sample_dot`

    Returns
    -------
    dask array (p, r), lazy, chunked like X's features.  Memory: as :func:`sample_dot`.
    """
    return sample_dot(X, C).T


@numba.njit(nogil=True, cache=True)
def _dot_range(xb, Ct, prod, rng, sd, want_sd, tile):  # pragma: no cover - compiled
    """prod = Ct @ xb (float64 accumulation, sample order), rng = max − min and, if
    ``want_sd``, the ddof-1 standard deviation per column, reading the block from memory once:
    tile by tile, the standard deviation by a second sweep of the tile (two-pass, in cache).
    No fastmath: NaN/Inf propagate into prod."""
    n, p = xb.shape
    lo = np.empty(tile)
    hi = np.empty(tile)
    s1 = np.empty(tile)
    for j0 in range(0, p, tile):
        w = min(p, j0 + tile) - j0
        lo[:w] = np.inf
        hi[:w] = -np.inf
        s1[:w] = 0.0
        prod[:, j0 : j0 + w] = 0.0
        tail = n - n % 4
        for i in range(0, tail, 4):
            _four_rows(xb, Ct, i, j0, w, lo, hi, s1, prod)
        for i in range(tail, n):
            _one_row(xb, Ct, i, j0, w, lo, hi, s1, prod)
        for j in range(w):
            rng[j0 + j] = hi[j] - lo[j]
        if want_sd:
            for j in range(w):
                s1[j] /= n  # the column means; lo is reused for Σ (x − mean)²
                lo[j] = 0.0
            for i in range(n):
                row = xb[i, j0 : j0 + w]
                for j in range(w):
                    d = np.float64(row[j]) - s1[j]
                    lo[j] += d * d
            for j in range(w):
                sd[j0 + j] = np.sqrt(lo[j] / (n - 1)) if n > 1 else np.nan


@numba.njit(nogil=True, cache=True)
def _one_row(xb, Ct, i, j0, w, lo, hi, s1, prod):  # pragma: no cover - compiled
    """Sample i into the tile's running min, max, sum and products."""
    row = xb[i, j0 : j0 + w]
    for j in range(w):  # selects, not branches: the loop vectorises
        v = np.float64(row[j])
        lo[j] = v if v < lo[j] else lo[j]
        hi[j] = v if v > hi[j] else hi[j]
        s1[j] += v
    for k in range(Ct.shape[0]):
        c = Ct[k, i]
        acc = prod[k, j0 : j0 + w]
        for j in range(w):
            acc[j] += c * row[j]


@numba.njit(nogil=True, cache=True)
def _four_rows(xb, Ct, i, j0, w, lo, hi, s1, prod):  # pragma: no cover - compiled
    """Samples i … i + 3, as four :func:`_one_row` (the same operations in the same order,
    hence the same bits) with each accumulator loaded and stored once, not four times: the
    sweep is bound by those loads and stores, not by the arithmetic."""
    r0 = xb[i, j0 : j0 + w]
    r1 = xb[i + 1, j0 : j0 + w]
    r2 = xb[i + 2, j0 : j0 + w]
    r3 = xb[i + 3, j0 : j0 + w]
    for j in range(w):
        v0, v1 = np.float64(r0[j]), np.float64(r1[j])
        v2, v3 = np.float64(r2[j]), np.float64(r3[j])
        a = lo[j]
        a = v0 if v0 < a else a
        a = v1 if v1 < a else a
        a = v2 if v2 < a else a
        lo[j] = v3 if v3 < a else a
        b = hi[j]
        b = v0 if v0 > b else b
        b = v1 if v1 > b else b
        b = v2 if v2 > b else b
        hi[j] = v3 if v3 > b else b
        s1[j] = (((s1[j] + v0) + v1) + v2) + v3
    for k in range(Ct.shape[0]):
        c0, c1, c2, c3 = Ct[k, i], Ct[k, i + 1], Ct[k, i + 2], Ct[k, i + 3]
        acc = prod[k, j0 : j0 + w]
        for j in range(w):
            acc[j] = (((acc[j] + c0 * r0[j]) + c1 * r1[j]) + c2 * r2[j]) + c3 * r3[j]


def _row_dot_summary_block(xb: np.ndarray, Ct: np.ndarray, sd: bool) -> np.ndarray:
    r = Ct.shape[0]
    out = np.empty((r + 3, xb.shape[1]))
    fused = r <= _FUSED_MAX_R and xb.dtype.kind == "f"
    if fused:
        out[r + 2] = 0.0
        _dot_range(xb, Ct, out[:r], out[r + 1], out[r + 2], sd, _FUSED_TILE)
    else:
        out[:r] = _ct_dot(xb, Ct)
        with np.errstate(invalid="ignore"):  # inf − inf → NaN is the point
            out[r + 1] = xb.max(axis=0).astype(np.float64) - xb.min(axis=0)  # float64: no overflow
        out[r + 2] = xb.std(axis=0, ddof=1, dtype=np.float64) if sd else 0.0
    # a non-finite value makes its column's products (IEEE arithmetic) or range non-finite
    bad = np.flatnonzero(~np.isfinite(out[0]) | ~np.isfinite(out[r + 1]))
    out[r] = 0.0
    if bad.size:  # rare: count exactly, and keep NaN/Inf out of the products
        fin = np.isfinite(xb[:, bad])
        out[r, bad] = xb.shape[0] - fin.sum(axis=0)
        xb_bad = np.where(fin, xb[:, bad], 0)
        out[:r, bad] = _ct_dot(xb_bad, Ct)
        out[r + 1, bad] = np.nan
        if sd:
            out[r + 2, bad] = xb_bad.std(axis=0, ddof=1, dtype=np.float64)
    return out


def row_dot_summary(X: da.Array, C: np.ndarray, *, sd: bool = False) -> da.Array:
    """``Xᵀ C`` and per-feature facts in **one** pass over X.

    For up to ``_FUSED_MAX_R`` columns of C the products and the range come from one fused
    numba sweep of the block (float64 arithmetic, no float64 copy of a float32 block);
    above, from BLAS.  A feature holding NaN/Inf has non-finite products or range (IEEE
    arithmetic), so no ``isfinite`` mask of the block is needed; such a feature gets its
    exact count, products with those values replaced by 0, and a NaN range (the count
    row tells the caller to refuse it).

    Parameters
    ----------
    X : dask array (n, p), chunked (all samples, feature block)
    C : ndarray (n, r)
    sd : bool
        Also the standard deviation (ddof = 1) of each feature.

    Returns
    -------
    dask array (r + 3, p), float64, lazy: rows ``(Xᵀ C)ᵀ`` (r rows), the number of
    non-finite values, the range max − min (0 ⇔ constant feature) and the standard
    deviation (zeros unless ``sd``).

    Memory: per task one block and (r + 3) × p_b float64.
    """
    Ct = np.ascontiguousarray(np.asarray(C, dtype=np.float64).T)
    return map_features(
        _row_dot_summary_block, X, out_rows=Ct.shape[0] + 3, dtype=np.float64, Ct=Ct, sd=sd
    )


def row_l1_norms(
    M: np.ndarray, E: np.ndarray, C: np.ndarray | None = None, block_bytes: int = 32 * 2**20
) -> np.ndarray:
    """``‖(M E − C)_i‖₁`` for every row i, never holding ``M E`` (p × q) whole.

    The inputs are the small factors of a big problem, e.g. ``Bᵀ`` (p × r) and a residual
    (r × p).  Rows are processed in blocks, one per core at a time on fsdask's thread pool
    (:func:`~fsdask.linalg.threads.parallel_map`), each one BLAS product on one thread and
    its row sums: with a short inner dimension the product is memory-bound, and so is the
    sum of its absolute values, so the cores share both rather than only the product.

    Parameters
    ----------
    M : ndarray (p, m)
    E : ndarray (m, q)
    C : ndarray (p, q) or None
    block_bytes : int
        Size of one block of ``M E`` rows.

    Returns
    -------
    ndarray (p,)

    Cost: O(p·m·q) time, O(block_bytes) extra memory in all (each of the ``cores()`` blocks
    computed at once holds its share).
    """
    p, q = M.shape[0], E.shape[1]
    # blocks of [step, 2·step) rows, never one row while p > 1: a one-row product is a
    # matrix-vector product in BLAS, rounded differently from the same row in a block
    step = max(2, int(block_bytes // max(1, 16 * q * cores())))
    bounds = np.linspace(0, p, max(1, p // step) + 1).astype(int)
    out = np.empty(p)

    def block(ab: tuple[int, int]) -> None:
        a, b = ab
        blk = M[a:b] @ E
        if C is not None:
            blk -= C[a:b]
        out[a:b] = np.abs(blk, out=blk).sum(axis=1)

    parallel_map(block, list(zip(bounds[:-1], bounds[1:])))
    return out


def _thin_svd(E: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``E = U diag(s) Vt``, thin.  A wide E (m ≪ q: CPFS's r × p residual) is factored as
    its transpose, ``Eᵀ = V diag(s) Uᵀ``: LAPACK takes that tall orientation about 3×
    faster (0.085 against 0.27 s at 20 × 10⁵), with the same factors to rounding."""
    m, q = E.shape
    if m >= q:
        return np.linalg.svd(E, full_matrices=False)
    V, s, Ut = np.linalg.svd(E.T, full_matrices=False)
    return Ut.T, s, V.T


def row_l1_bound(M: np.ndarray, E: np.ndarray) -> np.ndarray:
    """A safe upper bound of ``‖(M E)_i‖₁`` for every row.

    With the thin SVD ``E = Σ_k u_k σ_k v_kᵀ`` (E is m × q with m small),
    ``‖(M E)_i‖₁ ≤ Σ_k |(M U)_ik| σ_k ‖v_k‖₁`` (triangle inequality), and
    ``‖(M E)_i‖₁ ≤ √q ‖(M E)_i‖₂ = √q ‖(M U)_i σ‖₂`` (Cauchy–Schwarz; V has orthonormal
    rows); the smaller of the two.  The first loses up to √m to the triangle inequality over
    k, the second only ‖x‖₁/(√q‖x‖₂) — about √(2/π) for dense rows with Gaussian-like
    entries.  The bound scales with E: for a small change ``E − E_ref`` it is small, which
    is what makes ``row_l1_norms_screened(..., upper=vals_ref + row_l1_bound(M, E − E_ref))``
    cheap.

    Parameters
    ----------
    M : ndarray (p, m)
    E : ndarray (m, q)

    Returns
    -------
    ndarray (p,)

    Cost: O(m²·q) for the SVD of E plus O(p·m²) (no p × q product); memory: the SVD's
    factors and two p × m arrays.
    """
    U, s, Vt = _thin_svd(E)
    # the p × m and m × q arrays are changed in place (same values, same layout): each
    # temporary would be the size of the factor B, the largest array CPFS holds
    weights = s * np.abs(Vt, out=Vt).sum(axis=1)
    del Vt
    MU = M @ U
    sq = MU * s
    np.square(sq, out=sq)
    # Cauchy–Schwarz is tight for rows of equal magnitudes: a margin for the rounding of
    # the exact values it is compared with
    cs = math.sqrt(E.shape[1]) * np.sqrt(sq.sum(axis=1)) * (1.0 + 1e-10)
    del sq
    tri = np.abs(MU, out=MU) @ weights
    return np.minimum(tri, cs)


def row_l1_norms_screened(
    M: np.ndarray,
    E: np.ndarray,
    above: float | None = None,
    block_bytes: int = 32 * 2**20,
    upper: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``‖(M E)_i‖₁`` computed exactly only where it may exceed ``above``; a safe upper bound elsewhere.

    The bound is :func:`row_l1_bound`, or the smaller of it and ``upper`` — any other upper
    bound the caller knows (e.g. the values of an earlier E_ref plus
    ``row_l1_bound(M, E − E_ref)``).  Rows whose bound exceeds ``above`` get the exact value
    (:func:`row_l1_norms`, O(m·q) each).

    Parameters
    ----------
    M : ndarray (p, m)
    E : ndarray (m, q)
    above : float or None
        Threshold of interest; None: exact wherever the bound reaches the largest exact
        value, so the maximum over rows is exact.
    block_bytes : int, as in :func:`row_l1_norms`
    upper : ndarray (p,) or None
        Another known upper bound.

    Returns
    -------
    values : ndarray (p,), exact or bound
    exact : ndarray (p,) of bool, which rows are exact

    Cost: O(p·m²) plus O(m·q) per exact row; memory as :func:`row_l1_norms`.
    """
    p = M.shape[0]
    bound = row_l1_bound(M, E)
    if upper is not None:
        bound = np.minimum(bound, upper)
    out = bound.copy()
    exact = np.zeros(p, bool)
    if above is None:
        top = np.argsort(-bound)[: min(p, 256)]
        out[top] = row_l1_norms(M[top], E, block_bytes=block_bytes)
        exact[top] = True
        above = float(out[top].max(initial=0.0))
    need = np.flatnonzero(~exact & (bound > above))
    if need.size:
        out[need] = row_l1_norms(M[need], E, block_bytes=block_bytes)
        exact[need] = True
    return out, exact


def _one_block(x: Any) -> Any:
    """A row vector's block: ``blockwise(concatenate=False)`` hands its contracted trailing axes
    as nested one-element lists."""
    while isinstance(x, list):
        x = x[0]
    return x


def sum_over_row_blocks(
    func: Callable[..., np.ndarray],
    X: da.Array,
    *row_args: np.ndarray,
    columns: Sequence[np.ndarray] = (),
    shape: Sequence[int],
    maxima: int = 0,
    split_every: int | None = 8,
) -> da.Array:
    """``Σ_i func(X_ij, *row_args_i, *columns_j)`` over the row blocks i of X, for every
    feature block j: mergeable partial sums over samples.

    Parameters
    ----------
    func : callable
        ``func(X_ij, *row_args_i, *columns_j)`` on one block (n_i × p_j; a NumPy array or a
        ``scipy.sparse.csr_matrix``, handed over as it is) returns ``(*shape, p_j)`` partial
        sums over the block's rows.
    X : dask array (n, p), any row and column chunking
    *row_args : ndarrays (n, …), sliced like X's rows (e.g. class codes, a response)
    columns : ndarrays (…, p), sliced like X's columns (e.g. a per-feature shift)
    shape : tuple of int, the leading shape of every partial
    maxima : int
        The last ``maxima`` rows (first axis of ``shape``) are merged by maximum instead of
        summed (a minimum is the maximum of −x).
    split_every : int, partials merged per tree node

    Returns
    -------
    dask array (*shape, p), float64, lazy, chunked like X's features.  The tree has a fixed
    shape, so the result does not depend on scheduling.

    Memory: per task one block plus at most ``split_every`` partials of (*shape, p_j).
    """
    shape = tuple(int(s) for s in shape)
    letters = "abcdefgh"[: len(shape)]
    # every trailing axis of an argument gets its own letter: blockwise ties axes that share
    # one, so two row arguments of different widths would otherwise be refused
    spare = iter("klmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    pairs: list = [X, "ij"]
    for v in row_args:
        v = np.asarray(v)
        vd = da.from_array(v, chunks=(X.chunks[0], *v.shape[1:]))
        pairs += [vd, "i" + "".join(next(spare) for _ in v.shape[1:])]
    for c in columns:
        c = np.asarray(c)
        cd = da.from_array(c, chunks=(*c.shape[:-1], X.chunks[1]))
        pairs += [cd, "".join(next(spare) for _ in c.shape[:-1]) + "j"]

    def term(xb, *rest):
        out = np.asarray(func(xb, *(_one_block(r) for r in rest)), dtype=np.float64)
        return out[None, ...]

    parts = da.blockwise(
        term,
        "i" + letters + "j",
        *pairs,
        new_axes=dict(zip(letters, shape)),
        adjust_chunks={"i": 1},
        concatenate=False,
        dtype=np.float64,
        meta=np.empty((0,) * (len(shape) + 2), dtype=np.float64),
        name=_fresh("row-block-term"),
    )
    k = shape[0] if shape else 0
    if not maxima:
        return parts.sum(axis=0, split_every=split_every)
    summed = parts[:, : k - maxima].sum(axis=0, split_every=split_every)
    top = parts[:, k - maxima :].max(axis=0, split_every=split_every)
    return da.concatenate([summed, top], axis=0)
