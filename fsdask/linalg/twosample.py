"""Two-sample Kolmogorov–Smirnov statistic of every column of a block, by sorted keys.

For float32 blocks (what :func:`fsdask.ingest` writes) each value is mapped to a *sortable*
uint32 key — the IEEE bits with the sign bit flipped for positives and all bits flipped for
negatives, so that unsigned order equals float order — and the keys of each class are
written transposed (feature × samples of that class).  NumPy's SIMD sort then sorts every
row, and a branch-free merge of the two sorted rows gives

    D = max_t |F₁(t) − F₂(t)|,

evaluated only where the merged value changes (ties are handled exactly, as
``scipy.stats.ks_2samp`` does).  The same sorted keys give the screen (NaN/Inf count, min,
max) for free.  Other dtypes take a plain NumPy argsort path.

Cost per block of n samples × w features: one transposing pass, two row sorts of n/2 keys,
one merge of n steps — about 6 ns per value on one core, against ~25 ns for argsort.
"""

from __future__ import annotations

import numba
import numpy as np

#: features per tile of the transposing pass (the tile's rows stay in L1)
_TILE = 64
#: key of +Inf; positive NaNs have larger keys, -Inf/negative NaNs keys ≤ ~_POS_INF
_POS_INF = np.uint32(0xFF800000)
_NEG_INF = np.uint32(0x007FFFFF)
#: sentinel after the last key of each row (NaN keys are clamped one below it)
_SENTINEL = np.uint32(0xFFFFFFFF)


@numba.njit(nogil=True, cache=True)
def _sortable_keys(xb: np.ndarray, first: np.ndarray, k1: np.ndarray, k2: np.ndarray) -> None:
    """k1[j, r] / k2[j, r]: sortable key of the r-th sample of class 1 / class 2 in column j."""
    n, p = xb.shape
    bits = xb.view(np.uint32)
    for j0 in range(0, p, _TILE):
        j1 = min(p, j0 + _TILE)
        r1 = 0
        r2 = 0
        for i in range(n):
            for j in range(j0, j1):
                b = bits[i, j]
                b = np.uint32(0) if b == np.uint32(0x80000000) else b        # −0.0 ≡ +0.0
                key = np.uint32(b ^ ((b >> np.uint32(31)) * np.uint32(0x7FFFFFFF) | np.uint32(0x80000000)))
                key = min(key, np.uint32(0xFFFFFFFE))                         # keep below the sentinel
                if first[i]:
                    k1[j, r1] = key
                else:
                    k2[j, r2] = key
            if first[i]:
                r1 += 1
            else:
                r2 += 1


@numba.njit(nogil=True, cache=True, inline="always")
def _merge_step(a, b, j, i, k, best, n1, n2):
    """One step of the branch-free merge of rows a[j], b[j]: returns (i, k, best)."""
    av = a[j, i]
    bv = b[j, k]
    take_a = av <= bv
    v = min(av, bv)
    i += take_a
    k += 1 - take_a
    # n₁n₂·|F₁ − F₂| counts only where the next merged value differs (the end of a tie run)
    return i, k, max(best, abs(i * n2 - k * n1) * (min(a[j, i], b[j, k]) != v))


@numba.njit(nogil=True, cache=True)
def _merge_d(a: np.ndarray, b: np.ndarray, n1: int, n2: int, out: np.ndarray) -> None:
    """out[j] = KS D of sorted rows a[j, :n1], b[j, :n2] (each followed by the sentinel).

    Four rows are merged in lock-step: their dependency chains interleave, which is ~2×
    faster than one row at a time (each step depends on the previous step's loads).
    """
    p = a.shape[0]
    steps = n1 + n2 - 1          # after the last value F₁ = F₂ = 1
    p4 = p - p % 4
    for j in range(0, p4, 4):
        i0 = i1 = i2 = i3 = 0
        k0 = k1 = k2 = k3 = 0
        b0 = b1 = b2 = b3 = 0
        for _ in range(steps):
            i0, k0, b0 = _merge_step(a, b, j, i0, k0, b0, n1, n2)
            i1, k1, b1 = _merge_step(a, b, j + 1, i1, k1, b1, n1, n2)
            i2, k2, b2 = _merge_step(a, b, j + 2, i2, k2, b2, n1, n2)
            i3, k3, b3 = _merge_step(a, b, j + 3, i3, k3, b3, n1, n2)
        out[j] = b0 / (n1 * n2)
        out[j + 1] = b1 / (n1 * n2)
        out[j + 2] = b2 / (n1 * n2)
        out[j + 3] = b3 / (n1 * n2)
    for j in range(p4, p):
        i = k = best = 0
        for _ in range(steps):
            i, k, best = _merge_step(a, b, j, i, k, best, n1, n2)
        out[j] = best / (n1 * n2)


@numba.njit(nogil=True, cache=True)
def _screen_from_sorted(a: np.ndarray, b: np.ndarray, n1: int, n2: int, out: np.ndarray) -> None:
    """out[0] = NaN/Inf count, out[1] = min key, out[2] = max key, per row (keys, as floats)."""
    p = a.shape[0]
    for j in range(p):
        bad = 0
        for i in range(n1):
            bad += (a[j, i] <= _NEG_INF) or (a[j, i] >= _POS_INF)
        for i in range(n2):
            bad += (b[j, i] <= _NEG_INF) or (b[j, i] >= _POS_INF)
        out[0, j] = bad
        out[1, j] = min(a[j, 0], b[j, 0])
        out[2, j] = max(a[j, n1 - 1], b[j, n2 - 1])


def _keys_to_float32(keys: np.ndarray) -> np.ndarray:
    """Inverse of the sortable map."""
    k = keys.astype(np.uint32)
    bits = np.where(k & np.uint32(0x80000000), k ^ np.uint32(0x80000000), ~k)
    return bits.view(np.float32)


def ks_columns(xb: np.ndarray, first: np.ndarray, with_screen: bool = False) -> np.ndarray:
    """Two-sample KS D of every column of ``xb`` between rows ``first`` and the others.

    Parameters
    ----------
    xb : (n, w) array
        A block: samples × features.
    first : (n,) bool
        Membership of the first sample group; both groups must be non-empty.
    with_screen : bool
        Also return the screen rows (NaN/Inf count, min, max) of every column.

    Returns
    -------
    (1, w) float64 array, or (4, w) with the screen rows appended.
    """
    first = np.asarray(first, dtype=np.bool_)
    n1 = int(first.sum())
    n2 = first.size - n1
    if n1 == 0 or n2 == 0:
        raise ValueError("the KS statistic needs samples in both groups")
    w = xb.shape[1]
    out = np.empty((4 if with_screen else 1, w))
    if xb.dtype != np.float32:
        out[0] = _ks_argsort(xb, first, n1, n2)
        if with_screen:
            out[1], out[2], out[3] = (~np.isfinite(xb)).sum(0), xb.min(0), xb.max(0)
        return out
    k1 = np.empty((w, n1 + 1), np.uint32)
    k2 = np.empty((w, n2 + 1), np.uint32)
    if xb.strides[1] != xb.itemsize:  # a column slice of a block is fine: rows stay contiguous
        xb = np.ascontiguousarray(xb)
    _sortable_keys(xb, first, k1, k2)
    k1[:, n1] = _SENTINEL
    k2[:, n2] = _SENTINEL
    k1.sort(axis=1)
    k2.sort(axis=1)
    _merge_d(k1, k2, n1, n2, out[0])
    if with_screen:
        scr = np.empty((3, w), np.uint32)
        _screen_from_sorted(k1, k2, n1, n2, scr)
        out[1] = scr[0]
        out[2] = _keys_to_float32(scr[1])
        out[3] = _keys_to_float32(scr[2])
    return out


def _ks_argsort(xb: np.ndarray, first: np.ndarray, n1: int, n2: int) -> np.ndarray:
    """Reference path for any dtype: argsort each column, D at the ends of tie runs."""
    xt = np.ascontiguousarray(xb.T)                     # features × samples
    order = np.argsort(xt, axis=1)
    xs = np.take_along_axis(xt, order, axis=1)
    lab = first[order]
    diff = np.cumsum(lab, axis=1) / n1 - np.cumsum(~lab, axis=1) / n2
    end_of_tie = np.ones_like(xs, dtype=bool)
    end_of_tie[:, :-1] = xs[:, 1:] != xs[:, :-1]
    return np.max(np.abs(np.where(end_of_tie, diff, 0.0)), axis=1)
