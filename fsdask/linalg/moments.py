"""Per-feature, per-class moments of a block in one fused pass (numba).

Every univariate filter needs, for each feature j and class c, the count, mean and sum of
centred squares, and the screen (NaN/Inf count, min, max) of the column.  NumPy computes
them with a dozen float64 temporaries per slice; this kernel makes two sweeps over a
cache-sized tile of columns (sums, then centred squares — two-pass, so large offsets
such as raw intensities do not cancel) with float64 accumulators and no temporaries.
:func:`center_unit_columns` is the same two-pass scheme for Q-α's §2.1 preprocessing.

:func:`streamed_moments` gives the same :class:`Moments` for X in any layout — sample blocks
(NumPy or CSR) or feature blocks — from the shifted class-wise sums of
:func:`fsdask.linalg.colstats.moment_sums`, merged over sample blocks by
:meth:`fsdask.linalg.execution.Execution.sum_blocks` in one pass.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import numba
import numpy as np

from fsdask.linalg.colstats import MOMENT_MAXIMA, merged_screen, moment_rows, moment_sums

#: columns per tile: n × 512 × 4 bytes stays in L2 between the two sweeps
_TILE = 512

#: columns per tile of :func:`two_class_scores`: the shared rows (4 × 8 kB) stay in L1/L2
_SCORE_TILE = 1024


class Moments(NamedTuple):
    """counts (C,), mean (C, w), var (C, w) (unbiased; 0 for a class of one), dot (w,) = wᵀX,
    screen (3, w): NaN/Inf count, min, max."""

    counts: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    dot: np.ndarray
    screen: np.ndarray


@numba.njit(nogil=True, cache=True, fastmath={"nsz", "arcp", "contract", "afn"})
def _moments_kernel(xb, codes, counts, w, mean, m2, dot, scr):  # pragma: no cover - numba
    """Two sweeps per tile of columns into tile-local accumulators (they vectorise).

    No ``nnan``/``ninf`` fast-math flags: a NaN/Inf in a column makes its class sum
    non-finite, which flags the column (``scr[0] = 1``; the caller counts exactly).
    """
    n, p = xb.shape
    n_classes = counts.size
    s = np.empty((n_classes, _TILE))
    q = np.empty((n_classes, _TILE))
    d = np.empty(_TILE)
    lo = np.empty(_TILE)
    hi = np.empty(_TILE)
    for j0 in range(0, p, _TILE):
        width = min(p, j0 + _TILE) - j0
        s[:] = 0.0
        q[:] = 0.0
        d[:] = 0.0
        lo[:] = np.inf
        hi[:] = -np.inf
        for i in range(n):  # sweep 1: class sums, the weighted sum wᵀx, min, max
            row = xb[i, j0 : j0 + width]
            sc = s[codes[i]]
            wi = w[i]
            for t in range(width):
                v = np.float64(row[t])
                sc[t] += v
                d[t] += wi * v
                lo[t] = min(lo[t], v)
                hi[t] = max(hi[t], v)
        for c in range(n_classes):
            inv = 1.0 / max(counts[c], 1.0)
            for t in range(width):
                s[c, t] *= inv
        for i in range(n):  # sweep 2: centred squares within each class (two-pass variance)
            row = xb[i, j0 : j0 + width]
            sc = s[codes[i]]
            qc = q[codes[i]]
            for t in range(width):
                e = np.float64(row[t]) - sc[t]
                qc[t] += e * e
        for t in range(width):
            finite = np.isfinite(lo[t]) and np.isfinite(hi[t])
            for c in range(n_classes):
                finite = finite and np.isfinite(s[c, t])
            scr[0, j0 + t] = 0.0 if finite else 1.0
            scr[1, j0 + t] = lo[t]
            scr[2, j0 + t] = hi[t]
            dot[j0 + t] = d[t]
            for c in range(n_classes):
                mean[c, j0 + t] = s[c, t]
                m2[c, j0 + t] = q[c, t]


def class_moments(
    xb: np.ndarray,
    codes: np.ndarray | None = None,
    n_classes: int = 1,
    weights: np.ndarray | None = None,
) -> Moments:
    """Moments of every column of the (samples × features) block ``xb``.

    Parameters
    ----------
    xb : (n, w) array (float32 or float64; accumulation is float64)
    codes : (n,) int array of class codes in ``range(n_classes)``, or None (one class)
    n_classes : int
    weights : (n,) array or None
        If given, ``dot = weightsᵀ xb`` is accumulated in the same sweep (e.g. a centred
        response for correlations).
    """
    n, w = xb.shape
    codes = np.zeros(n, np.int64) if codes is None else np.asarray(codes, np.int64)
    counts = np.bincount(codes, minlength=n_classes).astype(np.float64)
    wv = np.zeros(n) if weights is None else np.asarray(weights, np.float64)
    mean = np.empty((n_classes, w))
    m2 = np.empty((n_classes, w))
    dot = np.empty(w)
    scr = np.empty((3, w))
    xb = np.ascontiguousarray(xb)
    _moments_kernel(xb, codes, counts, wv, mean, m2, dot, scr)
    flagged = np.flatnonzero(scr[0])
    if flagged.size:  # rare: count the NaN/Inf values of the flagged columns exactly
        scr[0, flagged] = (~np.isfinite(xb[:, flagged])).sum(0)
    var = m2 / np.maximum(counts - 1, 1)[:, None]
    return Moments(counts, mean, var, dot, scr)


def _moment_block(xb, codes, *rest, n_classes, has_w):
    """:func:`moment_sums` of one block, its optional row weights and column shift unpacked."""
    weights = rest[0] if has_w else None
    shift = rest[-1] if len(rest) > int(has_w) else None
    return moment_sums(xb, codes, weights, shift, n_classes=n_classes)


def streamed_moments(
    ex: Any,
    X: Any,
    codes: np.ndarray | None = None,
    n_classes: int = 1,
    weights: np.ndarray | None = None,
) -> Moments:
    """The :class:`Moments` of every column of X from one pass, in any layout.

    Parameters
    ----------
    ex : Execution, the fit's execution (the pass is counted there)
    X : ndarray, scipy.sparse or dask array (n, p); sample or feature blocks, NumPy or CSR
    codes : int ndarray (n,) of class codes in ``range(n_classes)``, or None (one class)
    n_classes : int
    weights : ndarray (n,) or None; ``dot = Σ_i w_i (x_i − K)`` — for a centred response
        (Σ w = 0) the same as ``wᵀ x``

    Returns
    -------
    Moments: counts (C,), mean and unbiased var (C, p), dot (p,), screen (3, p) NaN/Inf
    count, min, max.  Sums are shifted by X's first row (:meth:`Execution.first_row`), so a
    large offset does not cancel.  Memory: (2·C + 5) × p float64 on the client, per task
    one block and 8 partials of (2·C + 5) × p_j.
    """
    n = X.shape[0]
    codes = np.zeros(n, np.int64) if codes is None else np.asarray(codes, np.int64)
    shift = ex.first_row(X)
    rows = [codes] + ([np.asarray(weights, np.float64)] if weights is not None else [])
    fn = functools.partial(_moment_block, n_classes=n_classes, has_w=weights is not None)
    sums = ex.sum_blocks(
        fn,
        X,
        *rows,
        shape=(moment_rows(n_classes),),
        maxima=MOMENT_MAXIMA,
        columns=() if shift is None else (shift,),
    )
    return moments_from_sums(sums, np.bincount(codes, minlength=n_classes), n_classes)


def moments_from_sums(sums: np.ndarray, counts: np.ndarray, n_classes: int) -> Moments:
    """:class:`Moments` from the merged shifted sums of :func:`moment_sums`, or of
    :func:`~fsdask.linalg.colstats.membership_sums` for many variants at once.

    Parameters
    ----------
    sums : ndarray (2·V·C + D + 4, p), merged over every block, with D = V dot rows or none
        (V = 1: the 2·C + 5 rows of :func:`moment_sums`)
    counts : int ndarray (C,) — the samples of each class — or (V, C), per variant
    n_classes : int, C

    Returns
    -------
    Moments; with counts (V, C): mean and var (V, C, p), dot (V, p) (None without dot
    rows).  mean = K + S/n_c;
    M2 = Q − S²/n_c (≥ 0), var = M2/(n_c − 1) (0 for a class of one).  Memory: a few
    (V·C, p) arrays.
    """
    C = n_classes
    nc = np.asarray(counts, np.float64)
    lead = nc.shape[:-1]
    V = int(np.prod(lead, dtype=np.int64))
    VC, p = V * C, sums.shape[1]
    nv = nc.reshape(VC, 1)
    S, Q, K = sums[:VC], sums[VC : 2 * VC], sums[-3]
    with np.errstate(divide="ignore", invalid="ignore"):
        d = S / np.maximum(nv, 1)
        mean = K + d
        var = np.multiply(S, d, out=d)  # in place: the arrays are (V·C, p)
        np.subtract(Q, var, out=var)
        np.maximum(var, 0.0, out=var)  # M2
    np.divide(var, np.maximum(nv - 1, 1), out=var)
    r = sums.shape[0] - 4  # the dot rows end here
    screen = merged_screen(sums)
    dot = sums[2 * VC : r].reshape(*lead, p) if r > 2 * VC else None
    return Moments(nc, mean.reshape(*lead, C, p), var.reshape(*lead, C, p), dot, screen)


_EPS = float(np.finfo(np.float64).eps)


@numba.njit(nogil=True, cache=True)
def _is_constant(var, mean, n):  # pragma: no cover - numba
    """A variance no larger than the rounding of the mean can leave: a column of 0.1 has a
    float64 mean off by an ulp, and its residues would otherwise be scaled up to a unit vector
    of noise.  The bound is scikit-learn's ``_is_constant_feature`` (Chan, Golub & LeVeque)."""
    return var <= n * _EPS * var + (n * mean * _EPS) ** 2


@numba.njit(nogil=True, cache=True)
def _center_unit_kernel(xb, out):  # pragma: no cover - numba
    """Three sweeps per tile of columns (sum, centred squares, write), all in L2.

    No fast-math: each column's sums run down the rows in order, as NumPy's ``mean(axis=0)``
    does, and the loops vectorise across columns without reassociation.
    """
    n, p = xb.shape
    mu = np.empty(_TILE)
    ss = np.empty(_TILE)
    for j0 in range(0, p, _TILE):
        width = min(p, j0 + _TILE) - j0
        mu[:] = 0.0
        ss[:] = 0.0
        for i in range(n):
            row = xb[i, j0 : j0 + width]
            for t in range(width):
                mu[t] += np.float64(row[t])
        for t in range(width):
            mu[t] /= n
        for i in range(n):
            row = xb[i, j0 : j0 + width]
            for t in range(width):
                e = np.float64(row[t]) - mu[t]
                ss[t] += e * e
        for t in range(width):  # 1/‖x − x̄‖, and 0 for a constant column (which stays 0)
            ss[t] = 0.0 if _is_constant(ss[t] / n, mu[t], n) else 1.0 / np.sqrt(ss[t])
        for i in range(n):
            row = xb[i, j0 : j0 + width]
            dst = out[i, j0 : j0 + width]
            for t in range(width):
                dst[t] = (np.float64(row[t]) - mu[t]) * ss[t]


def center_unit_columns(xb: np.ndarray) -> np.ndarray:
    """Columns of ``xb`` centred and scaled to unit L2 norm, as float64 (a zero column stays 0).

    Parameters
    ----------
    xb : (n, w) array, float32 or float64 (accumulation is float64)

    Returns
    -------
    (n, w) float64 array; a column whose variance is within the rounding of its mean is
    constant and stays 0.  One pass over a cache-sized tile at a time, no temporaries: the
    NumPy form (``x − x.mean(0)``, the norms, the division) makes four float64 copies of the
    block.  Memory: the result.
    """
    xb = np.ascontiguousarray(xb)
    if xb.dtype not in (np.float32, np.float64):
        xb = xb.astype(np.float64)
    out = np.empty(xb.shape)
    _center_unit_kernel(xb, out)
    return out


def two_class_scores(
    sums: np.ndarray,
    source: np.ndarray,
    counts: np.ndarray,
    statistic: str,
    equal_var: bool = False,
) -> np.ndarray:
    """The ``ttest`` or ``snr`` score of many variants of two classes straight from their
    shifted sums: :func:`moments_from_sums` and the statistic's formula fused, one sweep
    over the sums in the CPU's cache instead of a dozen NumPy passes over (V·C, w) arrays.

    The operations and their order are those of :func:`moments_from_sums` and
    :func:`fsdask.methods.filters.stats_from_moments` (no fast-math), so the scores are
    theirs to the last bit.

    Parameters
    ----------
    sums : ndarray (2·B·2 + 4, w), the :func:`~fsdask.linalg.colstats.membership_sums`
        rows of B variants (no weight rows)
    source : int ndarray (V, 2): variant v's sums are those of variant ``source[v, 0]``
        of ``sums`` minus those of ``source[v, 1]`` (−1: nothing subtracted)
    counts : ndarray (V, 2), the samples of each class in each variant
    statistic : ``"ttest"`` (Welch's t, Student's with ``equal_var``) or ``"snr"``
    equal_var : bool

    Returns
    -------
    ndarray (V, w), float64: |t| or |snr|.  Memory: the result.
    """
    out = np.empty((len(source), sums.shape[1]))
    kind = 2 if statistic == "snr" else int(bool(equal_var))
    _two_class_kernel(sums, np.asarray(source, np.int64), np.asarray(counts, np.float64), kind, out)
    return out


@numba.njit(nogil=True, cache=True)
def _two_class_kernel(sums, source, counts, kind, out):  # pragma: no cover - numba
    """kind 0: Welch's t, 1: Student's pooled t, 2: snr; see :func:`two_class_scores`.

    Tiles of columns, every variant in a tile, each score loop free of branches so that it
    runs on SIMD lanes (IEEE division and square root round the same there: the scores do
    not change)."""
    B2 = (sums.shape[0] - 4) // 2  # rows of class sums: B variants × 2 classes
    K = sums[-3]
    p = sums.shape[1]
    diff = np.empty((4, _SCORE_TILE))
    for j0 in range(0, p, _SCORE_TILE):
        j1 = min(p, j0 + _SCORE_TILE)
        w = j1 - j0
        for v in range(source.shape[0]):
            a, b = source[v, 0], source[v, 1]
            rows = (2 * a, 2 * a + 1, B2 + 2 * a, B2 + 2 * a + 1)
            if b >= 0:  # a complement: the full sample's sums minus the subsample's
                less = (2 * b, 2 * b + 1, B2 + 2 * b, B2 + 2 * b + 1)
                for r in range(4):
                    for t in range(w):
                        diff[r, t] = sums[rows[r], j0 + t] - sums[less[r], j0 + t]
                S1, S2, Q1, Q2 = diff[0, :w], diff[1, :w], diff[2, :w], diff[3, :w]
            else:
                S1, S2 = sums[rows[0], j0:j1], sums[rows[1], j0:j1]
                Q1, Q2 = sums[rows[2], j0:j1], sums[rows[3], j0:j1]
            _two_class_row(
                S1, S2, Q1, Q2, K[j0:j1], counts[v, 0], counts[v, 1], kind, out[v, j0:j1]
            )


@numba.njit(nogil=True, cache=True, inline="always")
def _two_class_row(S1, S2, Q1, Q2, K, n1, n2, kind, o):  # pragma: no cover - numba
    if kind == 2:
        for j in range(o.size):
            m1, m2, v1, v2 = _two_class_parts(S1[j], S2[j], Q1[j], Q2[j], K[j], n1, n2)
            se = np.sqrt(v1) + np.sqrt(v2)
            o[j] = abs((m2 - m1) / (se if se > 0.0 else np.inf))
    elif kind == 1:
        for j in range(o.size):
            m1, m2, v1, v2 = _two_class_parts(S1[j], S2[j], Q1[j], Q2[j], K[j], n1, n2)
            sp = ((n1 - 1.0) * v1 + (n2 - 1.0) * v2) / (n1 + n2 - 2.0)
            se = np.sqrt(sp * (1.0 / n1 + 1.0 / n2))
            o[j] = abs((m2 - m1) / (se if se > 0.0 else np.inf))
    else:
        for j in range(o.size):
            m1, m2, v1, v2 = _two_class_parts(S1[j], S2[j], Q1[j], Q2[j], K[j], n1, n2)
            se = np.sqrt(v1 / n1 + v2 / n2)
            o[j] = abs((m2 - m1) / (se if se > 0.0 else np.inf))


@numba.njit(nogil=True, cache=True, inline="always")
def _two_class_parts(S1, S2, Q1, Q2, K, n1, n2):  # pragma: no cover - numba
    """The two classes' means and unbiased variances from their shifted sums (as
    :func:`fsdask.linalg.colstats.moments_from_sums` computes them)."""
    d1, d2 = S1 / max(n1, 1.0), S2 / max(n2, 1.0)
    v1, v2 = Q1 - S1 * d1, Q2 - S2 * d2
    v1, v2 = 0.0 if v1 < 0.0 else v1, 0.0 if v2 < 0.0 else v2  # NaN stays
    return K + d1, K + d2, v1 / max(n1 - 1.0, 1.0), v2 / max(n2 - 1.0, 1.0)
